package hawkeyeeval

import (
	"context"
	"fmt"
	"testing"

	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
)

// TestAnomaliesManifest: the generated anomalies show in the fabric as
// injected: incast and storm spread PFC, the loops deadlock (both loop
// ports paused, no data crossing them at the end), contention queues
// without any pause; and an out-of-loop deadlock never forms without its
// outside cause. Background traffic decides whether an outside cause
// closes its loop within the trace, so the out-of-loop types need only
// most seeds to deadlock (the evaluation scores only the traces that
// did, and says how many).
func TestAnomaliesManifest(t *testing.T) {
	for _, a := range Anomalies {
		t.Run(a.String(), func(t *testing.T) {
			missed := 0
			for seed := uint64(1); seed <= 5; seed++ {
				tr, err := Generate(a, seed)
				if err != nil {
					t.Fatal(err)
				}
				s, err := tr.Sim()
				if err != nil {
					t.Fatal(err)
				}
				res, err := s.Run(context.Background(), tr.Duration-500_000)
				if err != nil {
					t.Fatal(err)
				}
				loopData := func() uint64 {
					return res.Port("agg4", 2).TxData + res.Port("core0", 2).TxData
				}
				before := loopData()
				st := res.Stats
				res, _ = s.Run(context.Background(), tr.Duration)
				deadlocked := loopData() == before && s.Paused(node(tr, "agg4"), 2, 3) && s.Paused(node(tr, "core0"), 2, 3)
				switch a {
				case Incast:
					if st.PauseFrames == 0 {
						t.Fatalf("seed %d: incast drew no PFC", seed)
					}
				case Storm:
					if st.InjectedPauses == 0 || st.PauseFrames == 0 {
						t.Fatalf("seed %d: storm: %d injected, %d XOFF", seed, st.InjectedPauses, st.PauseFrames)
					}
				case InLoopDeadlock, OutLoopContention, OutLoopInjection:
					if a != InLoopDeadlock && loopDeadlocks(t, withoutCause(tr)) {
						t.Fatal("the loop deadlocks without the cause outside it: the initiator is in the loop")
					}
					if !deadlocked {
						t.Logf("seed %d: no deadlock: loop data %d -> %d, paused agg4:2 %v core0:2 %v", seed, before, loopData(),
							s.Paused(node(tr, "agg4"), 2, 3), s.Paused(node(tr, "core0"), 2, 3))
						missed++
						if a == InLoopDeadlock || missed > 2 {
							t.Fatalf("%d of 5 seeds did not deadlock", missed)
						}
					}
				case Contention:
					if st.PauseFrames != 0 || st.Drops != 0 {
						t.Fatalf("seed %d: contention drew %d XOFF, %d drops", seed, st.PauseFrames, st.Drops)
					}
				}
				t.Logf("seed %d load %.2f: %d flows, XOFF %d, injected %d, CNPs %d, deadlocked %v", seed, tr.Load, len(tr.Flows),
					st.PauseFrames, st.InjectedPauses, st.CNPs, deadlocked)
			}
		})
	}
}

func node(tr *Trace, name string) int { i, _ := tr.Graph.Node(name); return i }

// withoutCause is a trace with its anomaly's root-cause flows and faults
// removed: the loop and its trickle alone.
func withoutCause(tr *Trace) *Trace {
	c := *tr
	c.Faults = nil
	c.Flows = nil
	for _, f := range tr.Flows {
		if f.Dst == node(tr, fmt.Sprintf("h%d", outLoopHost)) && f.Start == tr.Truth.At { // the burst onto the outside host
			continue
		}
		f.ID = len(c.Flows)
		c.Flows = append(c.Flows, f)
	}
	return &c
}

// loopDeadlocks runs a trace and reports whether its loop ports end up
// paused with no data crossing them.
func loopDeadlocks(t *testing.T, tr *Trace) bool {
	s, err := tr.Sim()
	if err != nil {
		t.Fatal(err)
	}
	res, _ := s.Run(context.Background(), tr.Duration-500_000)
	before := res.Port("agg4", 2).TxData + res.Port("core0", 2).TxData
	res, _ = s.Run(context.Background(), tr.Duration)
	return res.Port("agg4", 2).TxData+res.Port("core0", 2).TxData == before &&
		s.Paused(node(tr, "agg4"), 2, 3) && s.Paused(node(tr, "core0"), 2, 3)
}

// TestShardsMerge: three shards of an evaluation add up to the whole.
func TestShardsMerge(t *testing.T) {
	diag := func(*hawkeyewire.Telemetry) (Verdict, error) { return Verdict{Anomaly: Incast}, nil }
	as, ms := []Anomaly{Incast, Contention}, []Method{Hawkeye}
	whole, err := Evaluate(context.Background(), 2, as, ms, diag, nil)
	if err != nil {
		t.Fatal(err)
	}
	var parts [][]Score
	for i := range 3 {
		sc, err := EvaluateShard(context.Background(), Shard{I: i, N: 3}, 2, as, ms, diag, nil)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, Flatten(sc))
	}
	merged := Merge(parts...)
	for _, a := range as {
		if *merged[a][Hawkeye] != *whole[a][Hawkeye] {
			t.Fatalf("%v: merged %+v, whole %+v", a, *merged[a][Hawkeye], *whole[a][Hawkeye])
		}
	}
	if _, err := EvaluateShard(context.Background(), Shard{I: 3, N: 3}, 1, as, []Method{Hawkeye}, nil, nil); err == nil {
		t.Fatal("shard 3/3 accepted")
	}
}
