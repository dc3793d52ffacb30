package hostmesh

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"
)

// TestEvalShards: shards of an evaluation run every run exactly once
// between them and merge to the whole's rows. The runs are stand-ins whose
// outcome follows from the seed: this is the bookkeeping, the runs
// themselves are tested elsewhere.
func TestEvalShards(t *testing.T) {
	var seeds []uint64
	runOne = func(_ context.Context, hosts int, fault string, seed uint64) (*Run, error) {
		seeds = append(seeds, seed)
		o := Outcome{Correct: seed%3 != 0, FalseAlerts: int(seed % 2), DetectNs: int64(seed%5) * 1e6, ProbingNs: int64(120 * time.Millisecond)}
		return &Run{Fault: fault, Seed: seed, Machines: hosts, Outcome: o}, nil
	}
	defer func() { runOne = RunOne }()
	types := []string{FaultNone, FaultLinkFlap, FaultHeadroom}
	hosts := []int{4, 16}
	whole, _, err := Eval(context.Background(), hosts, types, 5, 7, nil)
	if err != nil {
		t.Fatal(err)
	}
	all := slices.Clone(seeds)
	seeds = nil
	var parts [][]EvalRow
	for i := range 4 {
		rows, _, err := EvalShard(context.Background(), hosts, types, 5, 7, i, 4, nil)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, rows)
	}
	slices.Sort(all)
	slices.Sort(seeds)
	if len(all) != 2*3*5 || !slices.Equal(all, seeds) || len(slices.Compact(slices.Clone(all))) != len(all) {
		t.Fatalf("runs of the whole %v, of the shards %v", all, seeds)
	}
	merged := MergeRows(parts...)
	if len(merged) != len(whole) {
		t.Fatalf("%d rows, want %d", len(merged), len(whole))
	}
	for i := range whole {
		w, m := whole[i], merged[i]
		m.WallMs, w.WallMs = 0, 0
		if w.Hosts != m.Hosts || w.Fault != m.Fault || w.Runs != m.Runs || w.Top1Runs != m.Top1Runs || w.FalseAlerts != m.FalseAlerts ||
			w.Top1 != m.Top1 || math.Abs(w.FalseAlertsPerHour-m.FalseAlertsPerHour) > 1e-9 || w.DetectSeconds != m.DetectSeconds || w.Goal != m.Goal ||
			len(w.Misses) != len(m.Misses) {
			t.Fatalf("merged %+v, whole %+v", m, w)
		}
	}
	if _, _, err := EvalShard(context.Background(), hosts, types, 2, 7, 3, 3, nil); err == nil {
		t.Fatal("shard 3/3 accepted")
	}
	if _, _, err := EvalShard(context.Background(), hosts, []string{"link-flop"}, 2, 7, 0, 1, nil); err == nil {
		t.Fatal("unknown fault type accepted")
	}
}
