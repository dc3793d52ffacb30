package dtatofino

import (
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/p4/internal/p4test"
)

// bfrtAnswers are the mock bfrt_python's counter and register reads:
// index + 1000 packets of 80 bytes for every counter; 77 + index in pipe
// 0 for every register, the other pipes 0.
const bfrtAnswers = `
def counter_data(table, index):
    pk = 1000 + index
    return {b'$COUNTER_SPEC_PKTS': pk, b'$COUNTER_SPEC_BYTES': 80 * pk}


def register_values(register, index):
    return [77 + index, 0, 0, 0]
`

func runPython(t *testing.T, mode, script string) string {
	t.Helper()
	return p4test.RunBfrt(t, bfrtAnswers, mode, script)
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
	// One entry per route, collector (3 tables, and batch_icrc for the
	// two with lists), region, list (2 tables), group and reporter.
	want := len(tr.Routes) + 3*len(tr.Collectors) + 2 + 3 + 2*3 + 2 + len(tr.Peers)
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
			got.Postcards["bad_hop"] != 1002 || got.Postcards["evicted"] != 1000 {
			t.Errorf("%s: %+v", mode, got)
		}
		if len(got.Collectors) != 2 || got.Collectors[1].RDMAPackets != 1001 || got.Collectors[1].RDMABytes != 80080 ||
			got.Collectors[1].Resyncs != 1001 || got.Collectors[0].PSN != 77 || got.Collectors[1].PSN != 78 {
			t.Errorf("%s: collectors %+v", mode, got.Collectors)
		}
		if got.Sketches != nil {
			t.Errorf("%s: sketch outcomes from a build without Sketch-Merge: %v", mode, got.Sketches)
		}
	}

	// The build with Sketch-Merge: its entries, and its outcomes read.
	sm := sketchMerge(t, 1)
	s, _ = sm.Script()
	out = runPython(t, "file", s)
	for name, want := range map[string]int{".sketch.add_with_set_sketch ": 2, "sketch_region.add_with_set_region ": 2,
		"sketch_reporter.add_with_set_sketch_reporter ": 3 + 2, "sketch_next.mod ": 3 + 2} {
		if n := strings.Count(out, name); n != want {
			t.Errorf("%d %s calls, want %d", n, name, want)
		}
	}
	c, _ = sm.CounterScript()
	got, err := sm.ParseCounters(strings.NewReader(runPython(t, "file", c)))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Sketches) != 4 || got.Sketches["held"] != 1000 || got.Sketches["ahead"] != 1003 {
		t.Errorf("sketch outcomes %v", got.Sketches)
	}

	// The build with the rate meter: a meter per collector, the reports it
	// dropped and sent to the CPU read back; none without it.
	if _, ok := twoCollectorsCounters(t)["metered"]; ok {
		t.Error("the build without the meter reads the metered count")
	}
	mt := metered(t)
	s, _ = mt.Script()
	out = runPython(t, "file", s)
	if n := strings.Count(out, "CALL bfrt.translator.pipe.Ingress.rdma_meter.mod "); n != len(mt.Collectors) {
		t.Errorf("%d meters set, want %d", n, len(mt.Collectors))
	}
	c, _ = mt.CounterScript()
	got, err = mt.ParseCounters(strings.NewReader(runPython(t, "file", c)))
	if err != nil {
		t.Fatal(err)
	}
	if got.Dropped["metered"] != 1004 || got.Dropped["to_cpu"] != 1005 {
		t.Errorf("metered outcomes %v", got.Dropped)
	}
}

// twoCollectorsCounters is what twoCollectors' counter script reads from
// the mock switch: reports not translated, by reason.
func twoCollectorsCounters(t *testing.T) map[string]uint64 {
	tr := twoCollectors(t)
	c, _ := tr.CounterScript()
	got, err := tr.ParseCounters(strings.NewReader(runPython(t, "file", c)))
	if err != nil {
		t.Fatal(err)
	}
	return got.Dropped
}
