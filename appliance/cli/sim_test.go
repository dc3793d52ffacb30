package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSimRun(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := runCLI(t, "sim", "run", "--quiet", "--out", dir, "../../bench/fabric/testdata/incast.yml")
	if code != 0 || !strings.Contains(out, "packet hops") || !strings.Contains(out, "CNPs") {
		t.Fatalf("sim run: %d\n%s\n%s", code, out, errOut)
	}
	for _, f := range []string{"results.json", "flows.csv", "series.csv"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Fatalf("%s: %v", f, err)
		}
	}
	bad := filepath.Join(dir, "bad.yml")
	if err := os.WriteFile(bad, []byte("duration: 1ms\ntopology: {kind: fat-tree, k: 3}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLI(t, "sim", "run", "--quiet", "--out", dir, bad); code == 0 || !strings.Contains(errOut, "bad.yml") || !strings.Contains(errOut, "even") {
		t.Fatalf("bad scenario: %d %s", code, errOut)
	}
}

// TestSimSweepShards: two shards of a sweep, merged, write the same CSV
// as the whole sweep (wall times aside); a missing shard is refused.
func TestSimSweepShards(t *testing.T) {
	dir := t.TempDir()
	scen := filepath.Join(dir, "incast.yml")
	data, err := os.ReadFile("../../bench/fabric/testdata/incast.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(scen, []byte(strings.Replace(string(data), "duration: 2ms", "duration: 200us", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"sim", "sweep", "--quiet", "--set", "switch.ecn.kmin=5KB,100KB", "--set", "host.dcqcn=true,false", "--seeds", "2"}
	whole, shards := filepath.Join(dir, "whole"), filepath.Join(dir, "shards")
	if code, out, errOut := runCLI(t, append(args, "--out", whole, scen)...); code != 0 || !strings.Contains(out, "8 runs (0 failed)") {
		t.Fatalf("sweep: %d %s %s", code, out, errOut)
	}
	for _, sh := range []string{"0/2", "1/2"} {
		if code, out, errOut := runCLI(t, append(args, "--out", shards, "--shard", sh, scen)...); code != 0 || !strings.Contains(out, "4 of 8 runs") {
			t.Fatalf("shard %s: %d %s %s", sh, code, out, errOut)
		}
	}
	merged := filepath.Join(dir, "merged")
	s0, s1 := filepath.Join(shards, "sweep-shard-0-of-2.json"), filepath.Join(shards, "sweep-shard-1-of-2.json")
	if code, out, errOut := runCLI(t, "sim", "merge", "--out", merged, s1, s0); code != 0 {
		t.Fatalf("merge: %d %s %s", code, out, errOut)
	}
	// Columns: point, kmin, dcqcn, seed, ... wall_ms (next to last), error.
	strip := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			f := strings.Split(l, ",")
			f[len(f)-2] = ""
			lines = append(lines, strings.Join(f, ","))
		}
		return strings.Join(lines, "\n")
	}
	if a, b := strip(filepath.Join(whole, "sweep.csv")), strip(filepath.Join(merged, "sweep.csv")); a != b || strings.Count(a, "\n") != 8 {
		t.Fatalf("whole:\n%s\nmerged:\n%s", a, b)
	}
	if code, _, errOut := runCLI(t, "sim", "merge", "--out", merged, s0); code == 0 || !strings.Contains(errOut, "4 of the sweep's 8 points") {
		t.Fatalf("missing shard: %d %s", code, errOut)
	}
}
