package hostmesh

import (
	"context"
	"testing"
)

// TestEvalShards: shards of an evaluation merge to the whole's rows.
func TestEvalShards(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	types := []string{FaultNone, FaultLinkFlap}
	hosts := []int{4}
	whole, _, err := Eval(context.Background(), hosts, types, 1, 7, nil)
	if err != nil {
		t.Fatal(err)
	}
	var parts [][]EvalRow
	for i := range 2 {
		rows, _, err := EvalShard(context.Background(), hosts, types, 1, 7, i, 2, nil)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, rows)
	}
	merged := MergeRows(parts...)
	if len(merged) != len(whole) {
		t.Fatalf("%d rows, want %d", len(merged), len(whole))
	}
	for i := range whole {
		w, m := whole[i], merged[i]
		if w.Fault != m.Fault || w.Hosts != m.Hosts || w.Runs != m.Runs || w.Top1Runs != m.Top1Runs || w.FalseAlerts != m.FalseAlerts ||
			w.Top1 != m.Top1 || w.FalseAlertsPerHour != m.FalseAlertsPerHour || w.DetectSeconds != m.DetectSeconds || w.Goal != m.Goal {
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
