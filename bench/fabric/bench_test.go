package fabric

import (
	"context"
	"testing"

	"github.com/rdma-appliance/appliance/bench/fabric/topo"
	"github.com/rdma-appliance/appliance/bench/fabric/workload"
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
	b.ReportMetric(float64(hops)/sec/1e6, "Mhops/s")
	b.ReportMetric(float64(events)/sec/1e6, "Mevents/s")
	b.ReportMetric(float64(len(flows)), "flows")
}

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
