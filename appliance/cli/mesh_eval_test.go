package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMeshEvalBadInput: every bad flag is a usage error naming the flag,
// before any run.
func TestMeshEvalBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--runs", "0"}, "--runs 0"},
		{[]string{"--runs", "-3"}, "--runs -3"},
		{[]string{"--runs", "100001"}, "--runs 100001"},
		{[]string{"--runs", "many"}, "-runs"},
		{[]string{"--hosts", "1"}, `--hosts "1"`},
		{[]string{"--hosts", "4,x"}, `--hosts "4,x"`},
		{[]string{"--hosts", "65"}, `--hosts "65"`},
		{[]string{"--hosts", ","}, `--hosts ","`},
		{[]string{"--types", "link-flop"}, `--types: unknown fault type "link-flop"`},
		{[]string{"--types", "none,acl"}, `--types: unknown fault type "acl"`},
		{[]string{"--types", " "}, `--types " "`},
		{[]string{"--seed", "-1"}, "-seed"},
		{[]string{"--shard", "2/2", "--out", "x"}, `--shard "2/2"`},
		{[]string{"--shard", "0/2"}, "--shard needs --out"},
		{[]string{"extra"}, "no arguments"},
	} {
		code, out, errOut := runCLI(t, append([]string{"mesh", "eval"}, tc.args...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) || out != "" {
			t.Errorf("mesh eval %q: exit %d, stderr %q, want exit 2 naming %q", tc.args, code, errOut, tc.want)
		}
	}
	if code, _, errOut := runCLI(t, "mesh", "merge"); code != 2 || !strings.Contains(errOut, "shards' files") {
		t.Errorf("merge without files: %d %q", code, errOut)
	}
	bad := filepath.Join(t.TempDir(), "shard.json")
	if err := os.WriteFile(bad, []byte(`{"rows": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLI(t, "mesh", "merge", bad); code != 1 || !strings.Contains(errOut, bad) {
		t.Errorf("merge of a bad file: %d %q", code, errOut)
	}
}

// TestMeshEvalJSON: --json writes the figures per cluster and fault
// type, under the names.
func TestMeshEvalJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	file := filepath.Join(t.TempDir(), "mesh.json")
	code, out, errOut := runCLI(t, "mesh", "eval", "--hosts", "4", "--runs", "1", "--types", "none", "--json", file)
	if code != 0 || !strings.Contains(out, "4x8, 4 spines") {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Clusters []struct {
			Hosts  int              `json:"hosts"`
			Faults []map[string]any `json:"faults"`
		} `json:"clusters"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || len(doc.Clusters) != 1 || doc.Clusters[0].Hosts != 4 || len(doc.Clusters[0].Faults) != 1 {
		t.Fatalf("%v: %s", err, b)
	}
	f := doc.Clusters[0].Faults[0]
	for _, k := range []string{"fault", "runs", "top1", "false_alerts_per_run", "false_alerts_per_hour", "detect_seconds", "goal"} {
		if _, ok := f[k]; !ok {
			t.Errorf("no %q in %v", k, f)
		}
	}
	if f["runs"] != 1.0 || f["fault"] != "none" {
		t.Errorf("%v", f)
	}
}
