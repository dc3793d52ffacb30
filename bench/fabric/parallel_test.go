package fabric

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/bench/fabric/workload"
	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/internal/topo"
)

// parScenario is a k=4 fat-tree with web-search flows at 50% load and an
// incast of 12 senders into h0 on top: ECN marks (each switch's random
// stream), CNPs, DCQCN and PFC pauses all happen, across pods.
func parScenario(t testing.TB, seed uint64) *Sim {
	t.Helper()
	g, err := topo.FatTree(4, gbps100, 1000)
	if err != nil {
		t.Fatal(err)
	}
	flows := workload.Poisson(g.Hosts(), gbps100, 0.5, workload.WebSearch, 1e6, seed)
	for i := range 12 {
		flows = append(flows, workload.Flow{ID: 100000 + i, Src: host(g, fmt.Sprintf("h%d", i+2)), Dst: host(g, "h0"),
			Size: 2 << 20, Start: int64(i) * 1000})
	}
	cfg := DefaultConfig()
	cfg.Seed = seed
	cfg.Switch.Buffer = 4 << 20 // a small buffer: the incast pauses its senders
	s, err := New(g, g.ShortestPaths(), flows, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddFault(HostFault{Host: "h15", Prio: PrioData, Quanta: 0x2000, Interval: 200_000, From: 300_000, Until: 900_000}); err != nil {
		t.Fatal(err)
	}
	return s
}

// resultBytes is everything a run reports: the results as JSON (every
// flow's FCT, every port's counters, the fabric's counters).
func resultBytes(t testing.TB, r *Results) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestParallelMatchesSequential: the scenario run sequentially and on 2
// and 4 partitions gives byte-identical results, and so does a parallel
// run in several pieces (frames still crossing between partitions when a
// piece ends).
func TestParallelMatchesSequential(t *testing.T) {
	ctx := context.Background()
	const until = 3_000_000
	seeds := []uint64{1, 2}
	if raceEnabled {
		seeds = seeds[:1]
	}
	for _, seed := range seeds {
		seq := parScenario(t, seed)
		want := resultBytes(t, run(t, seq, until))
		res := seq.res
		if res.Stats.PauseFrames == 0 || res.Stats.ECNMarks == 0 || res.Stats.CNPs == 0 || res.Stats.InjectedPauses == 0 {
			t.Fatalf("seed %d: the scenario should pause, mark and notify: %+v", seed, res.Stats)
		}
		done := 0
		for _, f := range res.Flows {
			if f.Done {
				done++
			}
		}
		if done < len(res.Flows)/2 {
			t.Fatalf("seed %d: %d of %d flows done", seed, done, len(res.Flows))
		}
		for _, parts := range []int{2, 4} {
			s := parScenario(t, seed)
			r, err := s.RunParallel(ctx, until, parts)
			if err != nil {
				t.Fatal(err)
			}
			if s.Partitions() != parts {
				t.Fatalf("%d partitions, asked for %d", s.Partitions(), parts)
			}
			if got := resultBytes(t, r); !bytes.Equal(got, want) {
				t.Fatalf("seed %d, %d partitions: results differ from the sequential run\n%s", seed, parts, firstDiff(want, got))
			}
			if s.Events != seq.Events || s.Hops != seq.Hops || s.Now() != seq.Now() {
				t.Fatalf("seed %d, %d partitions: %d events %d hops at %d, sequential %d %d at %d", seed, parts,
					s.Events, s.Hops, s.Now(), seq.Events, seq.Hops, seq.Now())
			}
		}
		// In pieces: Run and RunFor go on in parallel.
		s := parScenario(t, seed)
		if _, err := s.RunParallel(ctx, until/3, 3); err != nil {
			t.Fatal(err)
		}
		if s.InFlight() == 0 {
			t.Fatal("nothing in flight a third of the way")
		}
		if _, err := s.RunFor(ctx, until/3); err != nil {
			t.Fatal(err)
		}
		if got := resultBytes(t, run(t, s, until)); !bytes.Equal(got, want) {
			t.Fatalf("seed %d, in pieces: results differ from the sequential run\n%s", seed, firstDiff(want, got))
		}
	}
}

// firstDiff shows where two outputs part.
func firstDiff(a, b []byte) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	from := max(0, i-200)
	return fmt.Sprintf("sequential: ...%s\nparallel:   ...%s", a[from:min(len(a), i+100)], b[from:min(len(b), i+100)])
}

// TestParallelRefuses: what must see the whole fabric keeps a simulation
// sequential, and a parallel one refuses what would reach across it.
func TestParallelRefuses(t *testing.T) {
	ctx := context.Background()
	for name, arm := range map[string]func(s *Sim){
		"hooks":  func(s *Sim) { s.SetHooks(&Hooks{}) },
		"At":     func(s *Sim) { s.At(10, func(*Sim) {}) },
		"series": func(s *Sim) { s.SetSeries(&bytes.Buffer{}) },
		"fault": func(s *Sim) {
			if err := s.AddLinkFault(LinkFault{A: "tor0", B: "agg0", Prob: 0.1}); err != nil {
				t.Fatal(err)
			}
		},
		"ran": func(s *Sim) { run(t, s, 10_000) },
	} {
		s := parScenario(t, 1)
		arm(s)
		if _, err := s.RunParallel(ctx, 100_000, 2); !errors.Is(err, ErrSequentialOnly) {
			t.Fatalf("%s: %v", name, err)
		}
		if s.Partitions() != 0 || s.Now() > 10_000 {
			t.Fatalf("%s: refused, yet partitioned or ran", name)
		}
	}
	// One switch: nothing to split.
	g, r := star(t, 4, gbps100, 1000)
	s, err := New(g, r, nil, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RunParallel(ctx, 1000, 2); !errors.Is(err, ErrSequentialOnly) {
		t.Fatalf("a star: %v", err)
	}

	s = parScenario(t, 1)
	if _, err := s.RunParallel(ctx, 10_000, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddFlow(workload.Flow{ID: 9, Src: host(s.Graph(), "h0"), Dst: host(s.Graph(), "h1"), Size: 1000}); err == nil {
		t.Fatal("a flow added to a parallel simulation")
	}
	if err := s.AddFault(HostFault{Host: "h1", Interval: 1, Until: 1}); err == nil {
		t.Fatal("a fault added to a parallel simulation")
	}
	if err := s.Send(0, 0, Packet{Size: MinFrame}); err == nil {
		t.Fatal("a packet sent into a parallel simulation")
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("At on a parallel simulation")
			}
		}()
		s.At(20_000, func(*Sim) {})
	}()
}

// TestGroups: a fat-tree splits into its pods, a leaf-spine into its
// leaves, the top layer into no group.
func TestGroups(t *testing.T) {
	g, err := topo.FatTree(4, gbps100, 1000)
	if err != nil {
		t.Fatal(err)
	}
	group, n := Groups(g)
	if n != 4 {
		t.Fatalf("k=4 fat-tree: %d groups", n)
	}
	for i, nd := range g.Nodes {
		var want int32
		switch nd.Layer {
		case "core":
			want = -1
		case "tor", "agg":
			var k int
			fmt.Sscanf(nd.Name[3:], "%d", &k)
			want = int32(k / 2)
		default:
			var k int
			fmt.Sscanf(nd.Name[1:], "%d", &k)
			want = int32(k / 4)
		}
		if group[i] != want {
			t.Fatalf("%s: group %d, want %d", nd.Name, group[i], want)
		}
	}
	ls, err := topo.LeafSpine(3, 2, 2, gbps100, gbps100, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if _, n := Groups(ls); n != 3 {
		t.Fatalf("3 leaves: %d groups", n)
	}
}

// TestStatsAdd: summing the partitions' counters misses none.
func TestStatsAdd(t *testing.T) {
	var a, b Stats
	v := reflect.ValueOf(&b).Elem()
	for i := range v.NumField() {
		v.Field(i).SetUint(uint64(i + 1))
	}
	a.add(&b)
	a.add(&b)
	w := reflect.ValueOf(a)
	for i := range w.NumField() {
		if w.Field(i).Uint() != 2*uint64(i+1) {
			t.Fatalf("%s not summed", w.Type().Field(i).Name)
		}
	}
}

// BenchmarkFatTreeParallel is BenchmarkFatTree's scenario (k=4) and k=8
// and k=16 fat-trees with the same load, each run sequentially (Run) and on
// 2 and 4 partitions (RunParallel) in turns: one op runs all three, and a
// partitioned run whose results differ from the sequential run's by a byte
// fails the benchmark. Per partition count P it reports packet hops a
// second of wall time (pP-Mhops/s) and of CPU time, all goroutines
// (pP-Mhops/CPU-s), and the speedup: the sequential run's wall time over
// the partitioned run's in the same op, the median over the ops
// (speedup-pP). On a machine shared with other work the wall-clock speedup
// measures also how much of the machine each run got; the CPU figures say
// what partitioning costs whatever the load. No peer runs here.
func BenchmarkFatTreeParallel(b *testing.B) {
	for _, k := range []int{4, 8, 16} {
		g, err := topo.FatTree(k, gbps100, 1000)
		if err != nil {
			b.Fatal(err)
		}
		// 8x the hosts at each step: shorter runs keep each to seconds.
		until := map[int]int64{4: 10e6, 8: 2e6, 16: 500e3}[k]
		flows := workload.Poisson(g.Hosts(), gbps100, 0.5, workload.WebSearch, until, 1)
		r := g.ShortestPaths()
		b.Run(fmt.Sprintf("k=%d", k), func(b *testing.B) {
			b.ReportAllocs()
			parts := []int{1, 2, 4}
			var hops [3]uint64
			var wall, cpu [3]time.Duration
			var speedup [3][]float64
			for b.Loop() {
				var want []byte
				var seqWall time.Duration
				for i, p := range parts {
					s, err := New(g, r, flows, DefaultConfig())
					if err != nil {
						b.Fatal(err)
					}
					c0, t0 := dpdk.ProcessCPU(), time.Now()
					var res *Results
					if p == 1 {
						res, err = s.Run(context.Background(), until)
					} else {
						res, err = s.RunParallel(context.Background(), until, p)
					}
					w := time.Since(t0)
					if err != nil {
						b.Fatal(err)
					}
					cpu[i] += dpdk.ProcessCPU() - c0
					wall[i] += w
					hops[i] += res.Stats.Hops
					got := resultBytes(b, res)
					if p == 1 {
						want, seqWall = got, w
						continue
					}
					if !bytes.Equal(got, want) {
						b.Fatalf("k=%d on %d partitions: results differ from the sequential run's", k, p)
					}
					speedup[i] = append(speedup[i], seqWall.Seconds()/w.Seconds())
				}
			}
			for i, p := range parts {
				b.ReportMetric(float64(hops[i])/wall[i].Seconds()/1e6, fmt.Sprintf("p%d-Mhops/s", p))
				b.ReportMetric(float64(hops[i])/cpu[i].Seconds()/1e6, fmt.Sprintf("p%d-Mhops/CPU-s", p))
				if p > 1 {
					slices.Sort(speedup[i])
					b.ReportMetric(speedup[i][len(speedup[i])/2], fmt.Sprintf("speedup-p%d", p))
				}
			}
		})
	}
}

// TestParallelLeafSpine: a leaf-spine splits by leaves, unevenly over 3
// partitions, with links of unequal delay (the lookahead is the least
// between partitions), and still gives the sequential results.
func TestParallelLeafSpine(t *testing.T) {
	build := func() *Sim {
		g, err := topo.LeafSpine(4, 2, 4, gbps100, gbps100, 1000)
		if err != nil {
			t.Fatal(err)
		}
		// Host links of 300 to 900 ns; one leaf-spine link (between
		// partitions with 2 or 3 of them: spine1 goes to the second)
		// shorter than the others.
		leaf0, spine1 := host(g, "leaf0"), host(g, "spine1")
		for i := range g.Links {
			l := &g.Links[i]
			switch {
			case (l.A == leaf0 && l.B == spine1) || (l.A == spine1 && l.B == leaf0):
				l.Delay = 700
			case g.Nodes[l.A].Kind == topo.Host || g.Nodes[l.B].Kind == topo.Host:
				l.Delay = 300 + int64(i%3)*300
			}
		}
		flows := workload.Poisson(g.Hosts(), gbps100, 0.6, workload.WebSearch, 1e6, 5)
		for i := range 6 {
			flows = append(flows, workload.Flow{ID: 50000 + i, Src: host(g, fmt.Sprintf("h%d", 4+i)), Dst: host(g, "h1"), Size: 1 << 20})
		}
		cfg := DefaultConfig()
		cfg.Seed = 9
		cfg.Switch.Buffer = 2 << 20
		s, err := New(g, g.ShortestPaths(), flows, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	seq := build()
	want := resultBytes(t, run(t, seq, 2e6))
	if st := seq.res.Stats; st.PauseFrames == 0 || st.ECNMarks == 0 {
		t.Fatalf("the scenario should pause and mark: %+v", st)
	}
	for _, parts := range []int{2, 3} {
		s := build()
		r, err := s.RunParallel(context.Background(), 2e6, parts)
		if err != nil {
			t.Fatal(err)
		}
		if got := resultBytes(t, r); !bytes.Equal(got, want) {
			t.Fatalf("%d partitions: results differ from the sequential run\n%s", parts, firstDiff(want, got))
		}
		if s.par.look != 700 {
			t.Fatalf("lookahead %d, want the least cross-partition delay 700", s.par.look)
		}
	}
}
