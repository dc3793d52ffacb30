package fabric

import (
	"bytes"
	"context"
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestSweep: the grid is the product of the values times the seeds; the
// swept values reach the runs (a higher ECN threshold marks fewer
// packets); three shards merge into the whole sweep, row for row; a
// value the key does not take is refused, naming it, before any run.
func TestSweep(t *testing.T) {
	data, err := os.ReadFile("testdata/incast.yml")
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.Replace(data, []byte("duration: 2ms"), []byte("duration: 300us"), 1)
	var params []SweepParam
	for _, s := range []string{"switch.ecn.kmin=5KB,150KB", "workload[0].load=0.2"} {
		p, err := ParseSweepParam(s)
		if err != nil {
			t.Fatal(err)
		}
		params = append(params, p)
	}
	pts := SweepPoints(params, 2)
	if len(pts) != 4 || pts[1].Seed != 2 || pts[2].Set["switch.ecn.kmin"] != "150KB" || pts[3].Index != 3 {
		t.Fatalf("points %+v", pts)
	}
	whole, err := RunSweep(context.Background(), "incast.yml", data, pts, Shard{0, 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(whole) != 4 {
		t.Fatalf("%d rows", len(whole))
	}
	for _, r := range whole {
		if r.Err != "" || r.Flows == 0 || r.Stats.Hops == 0 {
			t.Fatalf("row %+v", r)
		}
	}
	if whole[0].Stats.ECNMarks <= whole[2].Stats.ECNMarks {
		t.Fatalf("kmin 5KB marked %d, 150KB %d", whole[0].Stats.ECNMarks, whole[2].Stats.ECNMarks)
	}
	if whole[0].Stats == whole[1].Stats {
		t.Fatal("two seeds, one outcome")
	}
	var parts [][]SweepRow
	for i := range 3 {
		rows, err := RunSweep(context.Background(), "incast.yml", data, pts, Shard{i, 3}, nil)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, rows)
	}
	merged, err := MergeSweep(parts[2], parts[0], parts[1])
	if err != nil {
		t.Fatal(err)
	}
	for i := range merged {
		merged[i].WallMs, whole[i].WallMs = 0, 0
	}
	if !reflect.DeepEqual(merged, whole) {
		t.Fatalf("merged shards differ from the whole sweep:\n%+v\n%+v", merged, whole)
	}
	if _, err := MergeSweep(parts[0], parts[0]); err == nil {
		t.Fatal("a shard merged twice")
	}
	var csv bytes.Buffer
	if err := WriteSweepCSV(&csv, []string{"switch.ecn.kmin", "workload[0].load"}, merged); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(csv.String()), "\n"); len(lines) != 5 || !strings.HasPrefix(lines[3], "2,150KB,0.2,1,") {
		t.Fatalf("csv:\n%s", csv.String())
	}

	bad, _ := ParseSweepParam("switch.ecn.kmin=lots")
	if _, err := RunSweep(context.Background(), "incast.yml", data, SweepPoints([]SweepParam{bad}, 1), Shard{0, 1}, nil); err == nil ||
		!strings.Contains(err.Error(), "switch.ecn.kmin=lots") {
		t.Fatalf("bad value: %v", err)
	}
	if _, err := RunSweep(context.Background(), "incast.yml", data, SweepPoints([]SweepParam{{Key: "workload[5].load", Values: []string{"1"}}}, 1), Shard{0, 1}, nil); err == nil ||
		!strings.Contains(err.Error(), "no item 5") {
		t.Fatalf("bad index: %v", err)
	}
	for _, s := range []string{"kmin", "=1", "k=", "k=1,,2"} {
		if _, err := ParseSweepParam(s); err == nil {
			t.Fatalf("%q accepted", s)
		}
	}
}
