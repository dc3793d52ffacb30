package tuning

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunSpecExample(t *testing.T) {
	rs, err := LoadRunSpec(filepath.Join("testdata", "tune.yml"))
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

func TestRunSpecErrors(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"target: {kind: simulator, scenario: incast-2}\nspace: {pmax: {min: 1, max: 150, step: 10}}\n", "tune.yml:2: space: pmax bounds"},
		{"target: {kind: simulator, scenario: incast-7}\n", "tune.yml:1: target.scenario"},
		{"target: {kind: fluid}\nspace: {headroom: {values: [-1, 100]}}\n", "headroom bounds"},
		{"target: {kind: switches, known-hosts: insecure, switches: [{name: s, address: a:22, user: u, dialect: junos, ports: [e1]}]}\n", "dialect"},
		{"target: {kind: fluid}\nalgorithm: {C: 1.5, method: anneal}\nbudget: 0\n", "cooling"},
		{"target: {kind: fluid}\nspace: {kmax-offset: 500, kmaxx: 1}\n", "kmaxx"},
	} {
		_, err := DecodeRunSpec("tune.yml", []byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.yaml, err, c.want)
		}
	}
}
