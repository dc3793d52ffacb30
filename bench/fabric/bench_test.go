package fabric

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/bench/fabric/ns3"
	"github.com/rdma-appliance/appliance/bench/fabric/workload"
	"github.com/rdma-appliance/appliance/internal/topo"
)

// benchScenario is the benchmark: a k=4 fat-tree at 100 Gbps,
// web-search flows at 50% load, 10 ms of simulated time.
func benchScenario(tb testing.TB) (*topo.Graph, *topo.Routes, []workload.Flow) {
	g, err := topo.FatTree(4, gbps100, 1000)
	if err != nil {
		tb.Fatal(err)
	}
	flows := workload.Poisson(g.Hosts(), gbps100, 0.5, workload.WebSearch, 10e6, 1)
	return g, g.ShortestPaths(), flows
}

// BenchmarkFatTree is packet-hop events a second on the benchmark
// scenario (target >= 2 M packet-hops/s per core).
func BenchmarkFatTree(b *testing.B) {
	g, r, flows := benchScenario(b)
	b.ReportAllocs()
	var hops, events uint64
	for i := 0; i < b.N; i++ {
		s, err := New(g, r, flows, DefaultConfig())
		if err != nil {
			b.Fatal(err)
		}
		res, err := s.Run(context.Background(), 10e6)
		if err != nil {
			b.Fatal(err)
		}
		hops += res.Stats.Hops
		events += res.Stats.Events
	}
	sec := b.Elapsed().Seconds()
	ours := float64(hops) / sec
	b.ReportMetric(ours/1e6, "Mhops/s")
	b.ReportMetric(float64(events)/sec/1e6, "Mevents/s")
	b.ReportMetric(float64(len(flows)), "flows")
	// ns-3 on the same topology and flows, once per process (a run takes
	// tens of seconds): the peer the papers' simulations ran on.
	b.StopTimer()
	peerOnce.Do(func() {
		if peerErr = ns3.Available(); peerErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		peer, peerErr = ns3.RunFlows(ctx, 4, "100Gbps", "1us", flows, 10*time.Millisecond)
	})
	if peerErr != nil {
		b.Logf("ns-3 side skipped: %v", peerErr)
		return
	}
	b.ReportMetric(peer.HopsPerSec()/1e6, "ns3-Mhops/s")
	b.ReportMetric(ours/peer.HopsPerSec(), "x-vs-ns3")
	b.Logf("k=4 fat-tree, 100G, web-search at 50%%, 10 ms: ours %.2f M packet-hops/s, ns-3 %.3f M/s (%d hops in %v; TCP, no PFC/ECN): %.1fx",
		ours/1e6, peer.HopsPerSec()/1e6, peer.Hops, peer.Wall.Round(time.Millisecond), ours/peer.HopsPerSec())
}

var (
	peerOnce sync.Once
	peer     ns3.Result
	peerErr  error
)

// TestSteadyStateNoAlloc: once its pools have grown, the simulation
// allocates nothing per packet or event.
func TestSteadyStateNoAlloc(t *testing.T) {
	g, r := star(t, 5, gbps100, 1000)
	var flows []workload.Flow
	for i := range 4 {
		flows = append(flows, workload.Flow{ID: i, Src: host(g, "h0") + i + 1, Dst: host(g, "h0"), Size: 1 << 30})
	}
	s, err := New(g, r, flows, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.RunFor(ctx, 2e6); err != nil {
		t.Fatal(err)
	}
	before := s.Events
	allocs := testing.AllocsPerRun(10, func() {
		if _, err := s.RunFor(ctx, 100_000); err != nil {
			t.Fatal(err)
		}
	})
	perRun := float64(s.Events-before) / 11
	// finish() rebuilds the results' slices in place: nothing per event.
	if allocs > 2 {
		t.Fatalf("%.0f allocations per %.0f events", allocs, perRun)
	}
}
