package hostmesh

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/bench/fabric"
	"github.com/rdma-appliance/appliance/collector/hostmeshanalyzer"
	"github.com/rdma-appliance/appliance/internal/topo"
)

// TestLabRun: the lab's short round localizes the flapping link, stays
// quiet without a fault, writes its report, and is quick.
func TestLabRun(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Now()
	r, err := LabRun(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Pass {
		t.Fatalf("%s: %+v", r.Reason, r)
	}
	if _, err := os.Stat(filepath.Join(dir, "hostmesh-report.txt")); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s in %v", r.Reason, time.Since(t0))
}

// TestSimDeterministic: the same seed gives the same run.
func TestSimDeterministic(t *testing.T) {
	a, err := RunOne(context.Background(), 4, FaultCorrupt, 7)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := RunOne(context.Background(), 4, FaultCorrupt, 7)
	if a.Stats.Events != b.Stats.Events || a.Stats.Timeouts != b.Stats.Timeouts || a.Top != b.Top || a.FalseAlerts != b.FalseAlerts {
		t.Fatalf("%+v / %+v", a.Stats, b.Stats)
	}
}

// TestSimTraceCoverage: on the evaluation's largest cluster (16 machines of
// 8 RNICs, 8 spines, the switches rate-limiting their ICMP answers), every
// agent has traced nearly all of its 5-tuples by the time faults start.
// Agents that traced in lockstep lost the race for the switches' answers to
// the first machine's agent: the last machines' probes had no paths, and
// the faults on them went unlocalized.
func TestSimTraceCoverage(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	sc := ClusterScenario(16)
	g, err := topo.RailOptimized(sc.Machines, sc.RNICs, sc.Spines, sc.Bandwidth, sc.Bandwidth, sc.Delay)
	if err != nil {
		t.Fatal(err)
	}
	s, err := fabric.New(g, g.ShortestPaths(), nil, fabric.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	complete := map[string]map[hostmeshanalyzer.Tuple]bool{}
	ag, err := NewSimAgent(s, SimConfig{Core: SimCoreConfig(), PostDelay: [2]int64{1000, 3000}, PollDelay: [2]int64{1000, 4000},
		ICMPEvery: 2000, Seed: 5}, func(b hostmeshanalyzer.Batch) {
		for _, p := range b.Paths {
			if p.Complete {
				if complete[p.Host] == nil {
					complete[p.Host] = map[hostmeshanalyzer.Tuple]bool{}
				}
				complete[p.Host][p.Tuple] = true
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	s.SetHooks(ag.Hooks())
	warm := warmWindows * int64(SimAnalyzerConfig().Window) // as in the evaluation
	ag.Start(0, warm)
	if _, err := s.Run(context.Background(), warm+int64(SimCoreConfig().Timeout)); err != nil {
		t.Fatal(err)
	}
	ag.Flush()
	for i := range ag.Hosts() {
		c := ag.Core(i)
		h := c.Config().Host
		n := len(c.RNICs())
		// The pool's current ports and the one rotated out at 60 ms.
		want := n * (n - 1) * c.Config().PoolSize
		if got := len(complete[h]); got < want*9/10 {
			t.Errorf("agent %s: %d 5-tuples traced, want at least %d of %d", h, got, want*9/10, want)
		}
	}
}
