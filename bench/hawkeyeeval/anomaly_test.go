package hawkeyeeval

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/rdma-appliance/appliance/bench/fabric/workload"
	"github.com/rdma-appliance/appliance/bench/hawkeyesim"
	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
)

// TestPlacementRandom: anomalies land in different places for different
// seeds, on k=4 and k=8 alike; a loop's routes really loop and leave its
// destination's pod alone; background traffic never goes to the loop's
// destination; the counterfactual keeps the background flows' IDs (so
// their ECMP paths) and drops the anomaly's.
func TestPlacementRandom(t *testing.T) {
	for _, tp := range []Topology{{4}, {8}} {
		for _, a := range Anomalies {
			places := map[string]bool{}
			for seed := uint64(1); seed <= 12; seed++ {
				tr, err := Generate(tp, a, seed)
				if err != nil {
					t.Fatalf("%v %v seed %d: %v", tp, a, seed, err)
				}
				places[fmt.Sprint(tr.Truth.Receiver, tr.Truth.Loop)] = true
				if len(tr.Truth.Injected) == 0 || len(tr.Truth.Ports) == 0 || (tr.Truth.Host == "") == (len(tr.Truth.Flows) == 0) {
					t.Fatalf("%v %v seed %d: truth %+v", tp, a, seed, tr.Truth)
				}
				for i, f := range tr.Flows {
					if f.ID != i || (i < tr.Background) == slices.Contains(tr.Truth.Injected, i) {
						t.Fatalf("%v %v seed %d: flow %d %+v (background %d)", tp, a, seed, i, f, tr.Background)
					}
				}
				cf := tr.Counterfactual()
				if len(cf.Flows) != tr.Background+tr.Context || len(cf.Faults) != 0 || !slices.Equal(cf.Flows[:tr.Background], tr.Flows[:tr.Background]) {
					t.Fatalf("%v %v seed %d: counterfactual of %d flows", tp, a, seed, len(cf.Flows))
				}
				if a.Deadlock() {
					checkLoop(t, tr)
				}
			}
			if len(places) < 6 {
				t.Errorf("%v %v: 12 seeds, %d placements", tp, a, len(places))
			}
		}
	}
}

// checkLoop follows the routes to the loop's destination from the
// loop's first switch: they must come back round through every loop
// switch, none in the destination's pod.
func checkLoop(t *testing.T, tr *Trace) {
	t.Helper()
	dst := tr.Flows[tr.Truth.Injected[0]].Dst
	for _, f := range tr.Flows[:tr.Background] {
		if f.Dst == dst {
			t.Fatalf("seed %d: background flow %+v into the loop's destination", tr.Seed, f)
		}
	}
	start, _ := tr.Graph.Node(tr.Truth.Loop[0])
	node := start
	for i := range tr.Truth.Loop {
		if name := tr.Graph.Nodes[node].Name; name != tr.Truth.Loop[i] {
			t.Fatalf("seed %d: loop %v, step %d at %s", tr.Seed, tr.Truth.Loop, i, name)
		}
		hops := tr.Routes.NextHops(node, dst)
		if len(hops) != 1 || hops[0] != tr.Truth.LoopPorts[i] {
			t.Fatalf("seed %d: %s routes to the destination by %v", tr.Seed, tr.Graph.Nodes[node].Name, hops)
		}
		node = tr.Graph.Ports(node)[hops[0]].Peer
	}
	if node != start {
		t.Fatalf("seed %d: loop %v does not close", tr.Seed, tr.Truth.Loop)
	}
}

// TestRunStorm: one PFC storm through every method. It manifests; the
// storm's victims are detected; Hawkeye names the host, and so does
// port-level telemetry (it still traces PFC), while SpiderMon, blind to
// PFC, cannot name the type; each method is charged for what it
// collects: full polling reads every switch, port records cost less than
// Hawkeye's, NetSight's postcards far more.
func TestRunStorm(t *testing.T) {
	tr, err := Generate(Topology{4}, Storm, 2)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), tr, RunOptions{Params: DefaultParams(), Methods: Methods})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Manifested {
		t.Fatalf("not manifested: %s", res.Reason)
	}
	sc := Scores{}
	sc.Tally(DefaultParams(), res, Methods)
	get := func(m Method) *Score { return sc.Get(DefaultParams(), Topology{4}, Storm, m) }
	h, full, port, spider, ns := get(Hawkeye), get(FullPolling), get(PortOnly), get(SpiderMon), get(NetSight)
	if h.Victims == 0 || h.TP == 0 || h.Found != 1 || port.TP == 0 || spider.TP != 0 {
		t.Fatalf("hawkeye %+v\nport-only %+v\nspidermon %+v", h, port, spider)
	}
	if full.SwitchesPolled() != 20 || h.SwitchesPolled() >= 20 || port.Bytes >= h.Bytes || ns.Bytes < 100*h.Bytes ||
		h.Coverage() > full.Coverage() || full.Coverage() != 1 {
		t.Fatalf("telemetry: hawkeye %d B on %.1f switches, full %d B on %.1f, port-only %d B, netsight %d B; coverage %.2f vs %.2f",
			h.Bytes, h.SwitchesPolled(), full.Bytes, full.SwitchesPolled(), port.Bytes, ns.Bytes, h.Coverage(), full.Coverage())
	}
	// Detections before the storm began are no one's victims.
	for _, in := range res.Incidents {
		if in.Time < tr.Truth.At && in.Victim {
			t.Fatalf("a detection at %d, before the storm at %d, counted as its victim", in.Time, tr.Truth.At)
		}
	}
}

// TestFabricBase: the base the evaluation detects with (the fat-tree's
// largest RTT without queues, hawkeyesim.MaxRTT over its links) is the one
// the real host's agent computes from the hop count and the link
// (hawkeyewire.BaseRTT: 6 links host to host across a core).
func TestFabricBase(t *testing.T) {
	frame := hawkeyesim.DefaultAgentConfig().FrameBytes
	for _, k := range []int{4, 8} {
		ft, err := newFatTree(k)
		if err != nil {
			t.Fatal(err)
		}
		got, want := hawkeyesim.MaxRTT(ft.g, frame), hawkeyewire.BaseRTT(6, evalDelay, evalBW, frame)
		if got != want || want < 24_000 || want > 25_000 {
			t.Errorf("k=%d: MaxRTT %d ns, BaseRTT over 6 links %d ns (want both about 24.6 us)", k, got, want)
		}
	}
}

// TestFabricShares: the flows a trace starts with in progress resume at
// rates every link of their ECMP paths carries, the fabric's included;
// the warm-up's shares over the hosts' links alone offered some
// aggregation or core link more than it carries (ECMP collisions).
func TestFabricShares(t *testing.T) {
	over := 0
	for seed := uint64(1); seed <= 3; seed++ {
		tr, err := Generate(Topology{8}, Incast, seed)
		if err != nil {
			t.Fatal(err)
		}
		sim, err := tr.Sim()
		if err != nil {
			t.Fatal(err)
		}
		// The incast keeps every background flow, so the warm-up's
		// flows are the trace's first, with the same IDs.
		hostOnly := workload.InProgress(tr.Graph.Hosts(), evalBW, tr.Load, workload.Hawkeye, warmupNs, seed)
		load := func(rate func(f workload.Flow) float64) map[[2]int]float64 {
			out := map[[2]int]float64{}
			for _, f := range tr.Flows[:len(hostOnly)] {
				h := sim.FlowHash(int32(f.ID))
				node, _ := sim.Peer(f.Src, 0)
				for node != f.Dst && sim.SwitchOf(node) >= 0 {
					p := sim.NextHop(node, f.Dst, h)
					out[[2]int{node, p}] += rate(f)
					node, _ = sim.Peer(node, p)
				}
			}
			return out
		}
		for l, r := range load(func(f workload.Flow) float64 { return f.Rate }) {
			if r > evalBW*(1+1e-9) {
				t.Fatalf("seed %d: link %v offered %.3g b/s, above %.3g", seed, l, r, evalBW)
			}
		}
		for _, r := range load(func(f workload.Flow) float64 { return hostOnly[f.ID].Rate }) {
			if r > evalBW*(1+1e-9) {
				over++
			}
		}
	}
	if over == 0 {
		t.Fatal("the hosts' shares overloaded no fabric link: the test shows nothing")
	}
}
