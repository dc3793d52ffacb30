package luminatofino

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/p4/internal/p4test"
)

// bfrtAnswers are the mock bfrt_python's counter and register reads:
// each counter a packet count of its own (an offset per counter plus the
// index), so a read of the wrong index or counter shows; event_pkts
// counts packets only. mirror_seq is 1<<32 | 5 in pipe 0.
const bfrtAnswers = `
OFFSETS = {'rx_pkts': 100000, 'rx_roce_pkts': 200000, 'tx_pkts': 300000, 'mirrored_pkts': 400000, 'event_pkts': 500000}
REGS = {'mirror_seq_lo': [5, 0, 0, 0], 'mirror_seq_hi': [1, 0, 0, 0]}


def counter_data(table, index):
    pk = OFFSETS[table] + index
    d = {b'$COUNTER_SPEC_PKTS': pk}
    if table != 'event_pkts':
        d[b'$COUNTER_SPEC_BYTES'] = 64 * pk
    return d


def register_values(register, index):
    return REGS[register]
`

func runPython(t *testing.T, mode, script string) string {
	t.Helper()
	return p4test.RunBfrt(t, bfrtAnswers, mode, script)
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
