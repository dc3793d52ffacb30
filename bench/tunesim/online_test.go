package tunesim

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/tuning"
)

// TestOnlineRunSpec: the example online run file tunes one fabric that
// never restarts: every evaluation is one window right after the
// configuration it judges, the windows follow each other on one clock,
// and the running switches end with the last configuration applied.
func TestOnlineRunSpec(t *testing.T) {
	rs, err := tuning.LoadRunSpec(filepath.Join("testdata", "tune-online.yml"), Simulator{})
	if err != nil {
		t.Fatal(err)
	}
	// Short: 8 windows of 2 ms (the file's window is 8 ms).
	rs.Budget, rs.Target.Duration = 8, "2ms"
	se, err := rs.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	lt, ok := se.Target.(*LiveTarget)
	if !ok {
		t.Fatalf("online target is a %T", se.Target)
	}
	var last tuning.Point
	se.Tuner.Progress = func(r tuning.Record) { last = r.Point }
	r, err := se.Tuner.Run(context.Background())
	if err != nil || r.Evaluations != 8 {
		t.Fatalf("%v after %d evaluations", err, r.Evaluations)
	}
	ws := lt.Windows()
	if len(ws) != 8 {
		t.Fatalf("%d windows for 8 evaluations", len(ws))
	}
	step := int64(lt.Sc.Settle + lt.Sc.Window)
	for i, w := range ws {
		if w.From != int64(i)*step+int64(lt.Sc.Settle) || w.Applied != int64(i)*step {
			t.Fatalf("window %d: %+v, want applied at %d and measured from %d (one running fabric)", i, w, int64(i)*step, int64(i)*step+int64(lt.Sc.Settle))
		}
	}
	c, err := se.Space.Config(last)
	if err != nil {
		t.Fatal(err)
	}
	for sw, layer := range map[string]string{"tor7": "tor", "agg6": "agg", "core3": "core"} {
		got, err := lt.SwitchWatermark(sw)
		if err != nil {
			t.Fatal(err)
		}
		if w := c.Scopes[layer]; got.Kmin != w.Kmin*se.Space.Cell || got.Headroom != w.Headroom*se.Space.Cell {
			t.Fatalf("%s runs Kmin %d headroom %d, the last evaluation applied %v", sw, got.Kmin, got.Headroom, w)
		}
	}
	if n := len(r.Records); n == 0 || r.Records[0].Score == r.Records[n-1].Score && r.Records[1].Score == r.Records[2].Score {
		t.Fatalf("scores do not move: %+v", r.Records)
	}
}

// TestOnlineRunSpecErrors: online is for the simulator's online scenarios.
func TestOnlineRunSpecErrors(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"target: {kind: simulator, scenario: incast-2, online: true}\n", "tune.yml:1: target.scenario: \"incast-2\": one of the online scenarios fig11"},
		{"target: {kind: simulator, scenario: fig11}\n", "tune.yml:1: target.scenario"},
		{"target: {kind: fluid, online: true}\n", "tune.yml:1: target.online"},
		{"target: {kind: simulator, scenario: fig11, online: true}\nalgorithm: {remeasure: false, reheat: 0.1}\n", "reheat watches re-measurements"},
	} {
		_, err := tuning.DecodeRunSpec("tune.yml", []byte(c.yaml), Simulator{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.yaml, err, c.want)
		}
	}
}
