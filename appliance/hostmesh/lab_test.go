package hostmesh

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
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
	a, err := RunOne(context.Background(), FaultCorrupt, 7)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := RunOne(context.Background(), FaultCorrupt, 7)
	if a.Stats.Events != b.Stats.Events || a.Stats.Timeouts != b.Stats.Timeouts || a.Named != b.Named {
		t.Fatalf("%+v / %+v", a.Stats, b.Stats)
	}
}
