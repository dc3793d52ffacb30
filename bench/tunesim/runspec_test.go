package tunesim

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/tuning"
)

func TestRunSpecExample(t *testing.T) {
	rs, err := tuning.LoadRunSpec(filepath.Join("testdata", "tune.yml"), Simulator{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rs.Budget, rs.Patience = 20, 0
	se, err := rs.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	r, err := se.Tuner.Run(context.Background())
	if err != nil || r.Evaluations != 20 {
		t.Fatalf("%v after %d", err, r.Evaluations)
	}
	txt, err := se.WriteReport(dir, r, "sonic")
	if err != nil || !strings.Contains(txt, "WRED_PROFILE") {
		t.Fatalf("report: %v\n%s", err, txt)
	}
	if _, err := os.Stat(filepath.Join(dir, "tune-state.json")); err != nil {
		t.Fatal(err)
	}
}

// TestRunSpecScenario: the simulator's scenarios are checked by name, and
// the space against the scenario's scopes.
func TestRunSpecScenario(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"target: {kind: simulator, scenario: incast-2}\nspace: {pmax: {min: 1, max: 150, step: 10}}\n", "tune.yml:2: space: pmax bounds"},
		{"target: {kind: simulator, scenario: incast-7}\n", "tune.yml:1: target.scenario"},
	} {
		_, err := tuning.DecodeRunSpec("tune.yml", []byte(c.yaml), Simulator{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.yaml, err, c.want)
		}
	}
}
