package dta

import (
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
            pk = 1000 + kw['COUNTER_INDEX']
            return Entry({b'$COUNTER_SPEC_PKTS': pk, b'$COUNTER_SPEC_BYTES': 80 * pk})
        if p.endswith('.get') and 'REGISTER_INDEX' in kw:
            parts = p.split('.')
            return Entry({(parts[-3] + '.' + parts[-2] + '.f1').encode(): [77 + kw['REGISTER_INDEX'], 0, 0, 0]})
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
// whole and line by line: they must be valid Python that makes keyword
// calls only and finishes; the counter script's output must parse.
func TestScriptsRun(t *testing.T) {
	for _, ex := range examples {
		s, err := ex.script(t)
		if err != nil {
			t.Fatal(err)
		}
		for _, mode := range []string{"file", "interactive"} {
			out := runPython(t, mode, s)
			if strings.HasSuffix(ex.name, "_counters") {
				continue
			}
			if !strings.Contains(out, "dta: ") || !strings.Contains(out, " loaded: ") {
				t.Errorf("%s %s: the script did not finish:\n%s", ex.name, mode, out)
			}
		}
	}

	tr := twoCollectors(t)
	s, _ := tr.Script()
	out := runPython(t, "file", s)
	// One entry per route, collector (3 tables), region, list (2 tables),
	// group and reporter.
	want := len(tr.Routes) + 3*len(tr.Collectors) + 3 + 2*3 + 2 + len(tr.Peers)
	if n := strings.Count(out, ".add_with_"); n != want {
		t.Errorf("%d table entries added, want %d", n, want)
	}
	if n := strings.Count(out, "CALL bfrt.pre.node.add"); n != 1+2 {
		t.Errorf("%d multicast nodes, want 3 (N = 1 and 2)", n)
	}

	c, _ := tr.CounterScript()
	for _, mode := range []string{"file", "interactive"} {
		got, err := tr.ParseCounters(strings.NewReader(runPython(t, mode, c)))
		if err != nil {
			t.Fatal(err)
		}
		// The mock answers index + 1000 packets and 80 bytes a packet;
		// registers 77 + index in pipe 0, where both collectors' ports
		// are.
		if got.Reports[1] != 1001 || got.Reports[5] != 1005 || got.Dropped["nack"] != 1001 ||
			got.Postcards["bad_hop"] != 1003 {
			t.Errorf("%s: %+v", mode, got)
		}
		if len(got.Collectors) != 2 || got.Collectors[1].RDMAPackets != 1001 || got.Collectors[1].RDMABytes != 80080 ||
			got.Collectors[1].Resyncs != 1001 || got.Collectors[0].PSN != 77 || got.Collectors[1].PSN != 78 {
			t.Errorf("%s: collectors %+v", mode, got.Collectors)
		}
	}
}
