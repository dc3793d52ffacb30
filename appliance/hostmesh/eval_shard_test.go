package hostmesh

import (
	"context"
	"testing"
)

// TestEvalShards: shards of an evaluation merge to the whole's rows.
func TestEvalShards(t *testing.T) {
	types := []string{FaultNone, FaultLinkFlap}
	whole, _, err := Eval(context.Background(), types, 2, 7, nil)
	if err != nil {
		t.Fatal(err)
	}
	var parts [][]EvalRow
	for i := range 3 {
		rows, _, err := EvalShard(context.Background(), types, 2, 7, i, 3, nil)
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
		if w.Fault != m.Fault || w.Runs != m.Runs || w.Correct != m.Correct || w.Accuracy != m.Accuracy {
			t.Fatalf("merged %+v, whole %+v", m, w)
		}
	}
	if _, _, err := EvalShard(context.Background(), types, 2, 7, 3, 3, nil); err == nil {
		t.Fatal("shard 3/3 accepted")
	}
}
