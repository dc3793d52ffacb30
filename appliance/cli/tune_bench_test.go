package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestTuneBenchShards: three shards of a (shortened) tune bench, merged,
// give the table one run gives (the grid's seconds aside); a missing
// shard is refused.
func TestTuneBenchShards(t *testing.T) {
	if raceEnabled {
		t.Skip("four times the 3300-point grid under the race detector: a minute; make test runs it without")
	}
	dir := t.TempDir()
	common := []string{"--scenarios", "multihost", "--duration", "20us"}
	method := []string{"--seeds", "1", "--evals", "30"}
	whole := filepath.Join(dir, "whole")
	if code, out, errOut := runCLI(t, append(append([]string{"tune", "bench", "--out", whole}, common...), method...)...); code != 0 {
		t.Fatalf("bench: %d %s %s", code, out, errOut)
	}
	shards := filepath.Join(dir, "shards")
	var files []string
	for _, sh := range []string{"0/3", "1/3", "2/3"} {
		code, out, errOut := runCLI(t, append([]string{"tune", "bench", "--out", shards, "--shard", sh}, common...)...)
		if code != 0 || !strings.Contains(out, "1100 grid points") {
			t.Fatalf("shard %s: %d %s %s", sh, code, out, errOut)
		}
		files = append(files, filepath.Join(shards, "tune-bench-shard-"+sh[:1]+"-of-3.json"))
	}
	merged := filepath.Join(dir, "merged")
	if code, out, errOut := runCLI(t, append(append(append([]string{"tune", "merge", "--out", merged}, common...), method...), files...)...); code != 0 {
		t.Fatalf("merge: %d %s %s", code, out, errOut)
	}
	// The grid's seconds are the column before the verdict.
	gridS := regexp.MustCompile(`\s+\d+\s+(PASS|FAIL)`)
	read := func(d string) string {
		b, err := os.ReadFile(filepath.Join(d, "bench.txt"))
		if err != nil {
			t.Fatal(err)
		}
		return gridS.ReplaceAllString(string(b), " $1")
	}
	if a, b := read(whole), read(merged); a != b || !strings.Contains(a, "multihost") {
		t.Fatalf("whole:\n%s\nmerged:\n%s", a, b)
	}
	code, _, errOut := runCLI(t, append(append([]string{"tune", "merge", "--out", merged}, common...), files[:2]...)...)
	if code == 0 || !strings.Contains(errOut, "2200 of the grid's 3300 points: a shard is missing") {
		t.Fatalf("missing shard: %d %s", code, errOut)
	}
}

// TestTuneDiscriminate: tune discriminate runs the methods on measured
// grids and writes its table; it wants files and two seeds at least.
func TestTuneDiscriminate(t *testing.T) {
	dir := t.TempDir()
	land := filepath.Join("..", "..", "bench", "tunesim", "testdata", "landscape-incast-39.csv.gz")
	code, out, errOut := runCLI(t, "tune", "discriminate", "--seeds", "3", "--out", dir, land)
	if code != 0 || !strings.Contains(out, "incast-39") || !strings.Contains(out, "anneal ahead") {
		t.Fatalf("%d %s %s", code, out, errOut)
	}
	for _, f := range []string{"discrimination.txt", "discrimination.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"tune", "discriminate"}, "want landscape files"},
		{[]string{"tune", "discriminate", "--seeds", "1", land}, "at least 2"},
		{[]string{"tune", "discriminate", filepath.Join(dir, "discrimination.txt")}, "discrimination.txt"},
		{[]string{"tune", "online", "--steps", "0"}, "at least 1"},
		{[]string{"tune", "online", "--scenario", "nope", "--steps", "1"}, `online scenario "nope"`},
		{[]string{"tune", "online", "--norm", "eq15", "--steps", "1"}, `--norm "eq15": history or fixed`},
		{[]string{"tune", "online", "--workers", "0", "--steps", "1"}, "--workers 0: at least 1"},
		{[]string{"tune", "online", "--queue-floor", "-1", "--steps", "1"}, "--queue-floor -1: not negative"},
		{[]string{"tune", "online", "--cool-within", "1", "--steps", "1"}, "--cool-within 1: at least 2"},
		{[]string{"tune", "online", "--lean", "--steps", "1"}, "lean re-measures x only while held: it needs hold"},
		{[]string{"tune", "online", "--reheat-tem", "-2", "--steps", "1"}, "reheat temperature -2: not negative"},
		{[]string{"tune", "online", "--fixed-from", "/nonexistent/online.json", "--steps", "1"}, "--fixed-from: open /nonexistent/online.json"},
	} {
		if code, _, errOut := runCLI(t, c.args...); code == 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: %d %s, want %q", c.args, code, errOut, c.want)
		}
	}
}
