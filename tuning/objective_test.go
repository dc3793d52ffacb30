package tuning

import (
	"math"
	"testing"
)

func tel1(t, q float64) Telemetry {
	return Telemetry{Duration: 1e6, Switches: []SwitchStats{{Name: "s1", Ports: []PortStats{{Capacity: 25e9, Throughput: t, QueueMean: q}}}}}
}

func TestEq14History(t *testing.T) {
	o := DefaultObjective()
	o.QueueFloor = 0
	var h HistoryBest
	// First round is its own best: beta + (1-beta) = 1.
	if f, _ := o.Score(tel1(20e9, 1000), &h); math.Abs(f-1) > 1e-12 {
		t.Fatalf("first round %g, want 1", f)
	}
	// Half the throughput, twice the queue: 0.5*0.5 + 0.5*0.5.
	if f, _ := o.Score(tel1(10e9, 2000), &h); math.Abs(f-0.5) > 1e-12 {
		t.Fatalf("worse round %g, want 0.5", f)
	}
	// A new best throughput lowers what the old one is worth.
	if f, _ := o.Score(tel1(40e9, 1000), &h); math.Abs(f-1) > 1e-12 || h.TMax["s1"] != 40e9 {
		t.Fatalf("new best %g, history %v", f, h.TMax)
	}
	if f, _ := o.Score(tel1(20e9, 1000), &h); math.Abs(f-0.75) > 1e-12 {
		t.Fatalf("old best after a better one %g, want 0.75", f)
	}
	// Sum over switches.
	two := tel1(40e9, 1000)
	two.Switches = append(two.Switches, SwitchStats{Name: "s2", Ports: []PortStats{{Throughput: 5e9, QueueMean: 10}}})
	if f, _ := o.Score(two, &h); math.Abs(f-2) > 1e-12 {
		t.Fatalf("two switches at their best %g, want 2", f)
	}
	// An empty best queue stays finite with the floor.
	o.QueueFloor = 256
	var h2 HistoryBest
	o.Score(tel1(1e9, 0), &h2)
	if f, _ := o.Score(tel1(1e9, 256), &h2); math.Abs(f-(0.5+0.5*256.0/512)) > 1e-12 {
		t.Fatalf("floored %g", f)
	}
}

func TestFixedAndAggregations(t *testing.T) {
	o := DefaultObjective()
	o.Norm = Fixed
	o.QueueRef = 1000
	if f, _ := o.Score(tel1(25e9, 1000), nil); math.Abs(f-(0.5+0.25)) > 1e-12 {
		t.Fatalf("fixed %g, want 0.75", f)
	}
	vs := []float64{5, 1, 3, 100, 2}
	for a, want := range map[Agg]float64{AggMin: 1, AggMax: 100, AggSum: 111, AggMean: 22.2, AggP99: 100} {
		if got, err := a.Apply(vs); err != nil || math.Abs(got-want) > 1e-12 {
			t.Errorf("%s: %g %v, want %g", a, got, err, want)
		}
	}
	if _, err := Agg("median").Apply(vs); err == nil {
		t.Error("unknown aggregation accepted")
	}
	// Ports aggregate per switch: min throughput, max queue.
	o.Throughput, o.Queue = AggMin, AggMax
	tel := Telemetry{Duration: 1e6, Switches: []SwitchStats{{Name: "s", Ports: []PortStats{
		{Capacity: 10e9, Throughput: 10e9, QueueMean: 0}, {Capacity: 10e9, Throughput: 5e9, QueueMean: 3000}}}}}
	if f, _ := o.Score(tel, nil); math.Abs(f-(0.5*0.5+0.5*0.25)) > 1e-12 {
		t.Fatalf("min/max aggregation %g", f)
	}
}

func TestEq15Fairness(t *testing.T) {
	o := DefaultObjective()
	o.Fairness = true
	o.Norm = Fixed
	o.QueueRef = 1e9
	fair := Telemetry{Duration: 1e6, Switches: []SwitchStats{{Ports: []PortStats{{Capacity: 30e9}}}},
		Flows: []FlowStats{{ID: 0, Throughput: 10e9}, {ID: 1, Throughput: 10e9}, {ID: 2, Throughput: 10e9}}}
	unfair := fair
	unfair.Flows = []FlowStats{{ID: 0, Throughput: 14.5e9}, {ID: 1, Throughput: 14.5e9}, {ID: 2, Throughput: 1e9}}
	ff, _ := o.Score(fair, nil)
	fu, _ := o.Score(unfair, nil)
	if !(ff > fu) || math.Abs(ff-1) > 1e-6 {
		t.Fatalf("fair %g, unfair %g: want fair = 1 > unfair", ff, fu)
	}
	o.Gamma = 4
	if fu4, _ := o.Score(unfair, nil); !(fu4 < fu) {
		t.Fatalf("larger gamma did not punish unfairness more: %g vs %g", fu4, fu)
	}
	if _, err := o.Score(Telemetry{Switches: fair.Switches}, nil); err == nil {
		t.Fatal("fairness without flows scored")
	}
}

// Eq. 16: report counts, packet size and sampling rate give the
// throughput back.
func TestEq16(t *testing.T) {
	// 25 Gbit/s of 1086-byte frames for 1 ms is 2877.5 packets; one
	// report per 16 packets.
	pkts := 25e9 * 1e-3 / 8 / 1086
	reports := uint64(pkts / 16)
	got := INTThroughput(reports, 1086, 1.0/16, 1e6)
	if math.Abs(got-25e9)/25e9 > 0.01 {
		t.Fatalf("INT throughput %g, want 25e9 within 1%%", got)
	}
	p := PortStats{Reports: reports, AvgPacket: 1086, SampleRate: 1.0 / 16}
	if p.PortThroughput(1e6) != got {
		t.Fatal("a port without a throughput figure does not use Eq. 16")
	}
}
