package lumina

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// mockBfrt stands in for bfrt_python: every attribute is a node, every
// call prints "CALL <path> k=v ..." and returns the node (so
// entry_with_normal(...).push() works); port_hdl_info, counter and register
// reads return data shaped like bfrt's. The script runs as a file or, like
// an interactive bfshell session, line by line.
const mockBfrt = `
import code
import sys

OFFSETS = {'rx_pkts': 100000, 'rx_roce_pkts': 200000, 'tx_pkts': 300000, 'mirrored_pkts': 400000, 'event_pkts': 500000}
REGS = {'mirror_seq_lo': [5, 0, 0, 0], 'mirror_seq_hi': [1, 0, 0, 0]}


class Entry:
    def __init__(self, data):
        self.data = data


class Node:
    def __init__(self, path):
        self._path = path

    def __getattr__(self, name):
        if name.startswith('__'):
            raise AttributeError(name)
        return Node(self._path + '.' + name)

    def __call__(self, *args, **kw):
        p = self._path
        if args:
            raise TypeError(p + ': positional arguments')
        print('CALL ' + p + ' ' + ' '.join('%s=%r' % (k, kw[k]) for k in sorted(kw)))
        if p == 'bfrt.port.port_hdl_info.get':
            return Entry({b'$DEV_PORT': 128 + 4 * (kw['CONN_ID'] - 1) + kw['CHNL_ID']})
        if p.endswith('.get') and 'COUNTER_INDEX' in kw:
            table = p.split('.')[-2]
            pk = OFFSETS[table] + kw['COUNTER_INDEX']
            d = {b'$COUNTER_SPEC_PKTS': pk}
            if table != 'event_pkts':
                d[b'$COUNTER_SPEC_BYTES'] = 64 * pk
            return Entry(d)
        if p.endswith('.get') and 'REGISTER_INDEX' in kw:
            parts = p.split('.')
            return Entry({(parts[-3] + '.' + parts[-2] + '.f1').encode(): REGS[parts[-2]]})
        return self


class Console(code.InteractiveConsole):
    def showtraceback(self):
        super().showtraceback()
        sys.exit(1)

    def showsyntaxerror(self, filename=None, **kw):
        super().showsyntaxerror(filename)
        sys.exit(1)


bfrt = Node('bfrt')
src = open(sys.argv[2]).read()
if sys.argv[1] == 'file':
    exec(compile(src, sys.argv[2], 'exec'), {'bfrt': bfrt})
else:
    con = Console({'bfrt': bfrt})
    for line in src.split('\n'):
        con.push(line)
    if con.push(''):
        sys.exit('the script ends inside a statement')
`

func runPython(t *testing.T, mode, script string) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed: the generated scripts are not run")
	}
	if err := exec.Command(py, "-c", "pass").Run(); err != nil {
		t.Skipf("python3 does not run (%v): the generated scripts are not run", err)
	}
	dir := t.TempDir()
	mock, prog := filepath.Join(dir, "mock.py"), filepath.Join(dir, "script.py")
	if err := os.WriteFile(mock, []byte(mockBfrt), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(prog, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(py, mock, mode, prog).CombinedOutput()
	if err != nil {
		t.Fatalf("python3 (%s mode): %v\n%s", mode, err, out)
	}
	return string(out)
}

// TestScriptsRun runs the generated scripts against a mock bfrt_python,
// whole and line by line: they must be valid Python that only makes
// keyword calls, and the counter script's output must parse.
func TestScriptsRun(t *testing.T) {
	for _, ex := range examples {
		p := ex.prog(t)
		s, err := p.Script()
		if err != nil {
			t.Fatal(err)
		}
		c, err := p.CounterScript()
		if err != nil {
			t.Fatal(err)
		}
		for _, mode := range []string{"file", "interactive"} {
			out := runPython(t, mode, s)
			adds := strings.Count(out, ".add_with_")
			want := len(p.Routes) + len(p.Conns) + len(p.Entries) + len(p.wrrSlots())
			pl, _ := p.plan()
			want += len(pl.arpEntries())
			if adds != want {
				t.Errorf("%s %s: %d table entries added, want %d", ex.name, mode, adds, want)
			}
			if !strings.Contains(out, "lumina: "+p.name()+" loaded") {
				t.Errorf("%s %s: the script did not finish:\n%s", ex.name, mode, out)
			}

			out = runPython(t, mode, c)
			got, err := ParseCounters(strings.NewReader(out))
			if err != nil {
				t.Fatalf("%s %s: %v\n%s", ex.name, mode, err, out)
			}
			if len(got.Ports) != len(p.Ports) {
				t.Fatalf("%s: %d ports read back, want %d", ex.name, len(got.Ports), len(p.Ports))
			}
			if got.MirrorSeq != 1<<32|5 || len(got.PipeSeq) != 4 {
				t.Errorf("%s: mirror sequence %d over %v", ex.name, got.MirrorSeq, got.PipeSeq)
			}
			for _, pc := range got.Ports {
				dp := uint64(pc.DevPort)
				if pc.RxPackets != 100000+dp || pc.RxBytes != 64*(100000+dp) || pc.RxRoCE != 200000+dp ||
					pc.TxPackets != 300000+dp || pc.Mirrored != 400000+dp || pc.Dropped != 500000+4*dp+1 ||
					pc.ECNMarked != 500000+4*dp+2 || pc.Corrupted != 500000+4*dp+3 {
					t.Errorf("%s: port %+v read the wrong indices", ex.name, pc)
				}
			}
		}
	}
	// Front-panel ports resolve through port_hdl_info: "1/0" is dev port
	// 128 in the mock.
	p := psnAll(t)
	c, _ := p.CounterScript()
	got, err := ParseCounters(strings.NewReader(runPython(t, "file", c)))
	if err != nil {
		t.Fatal(err)
	}
	if got.Ports[0].Name != "host-a" || got.Ports[0].DevPort != 128 || got.Ports[0].Role != "traffic" {
		t.Errorf("first port %+v, want host-a on dev port 128", got.Ports[0])
	}
	if last := got.Ports[len(got.Ports)-1]; last.Name != "dump-3" || last.Role != "mirror" {
		t.Errorf("last port %+v, want the dumper dump-3", last)
	}
}

// TestKeyAddresses: IPv4 connection keys are the IPv4-mapped 128-bit
// values the data plane builds (96w0xffff ++ IPv4 address).
func TestKeyAddresses(t *testing.T) {
	p := listing2(t)
	s, _ := p.Script()
	out := runPython(t, "file", s)
	want := fmt.Sprintf("CALL bfrt.injector.pipe.Ingress.connection.add_with_set_conn dst_addr=%d dst_qpn=234 idx=0 src_addr=%d",
		uint64(0xffff_0a00_0002), uint64(0xffff_0a00_0001))
	if !strings.Contains(out, want) {
		t.Errorf("the script does not add %q", want)
	}
}
