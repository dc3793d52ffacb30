package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHawkeyeEvalShards: two shards merged print the table one run
// prints.
func TestHawkeyeEvalShards(t *testing.T) {
	dir := t.TempDir()
	for _, sh := range []string{"0/2", "1/2"} {
		if code, out, errOut := runCLI(t, "hawkeye", "eval", "--traces", "1", "--quiet", "--shard", sh, "--out", dir); code != 0 {
			t.Fatalf("shard %s: %d %s %s", sh, code, out, errOut)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "hawkeye-eval-shard-*.json"))
	if len(files) != 2 {
		t.Fatalf("shard files %v", files)
	}
	code, merged, errOut := runCLI(t, append([]string{"hawkeye", "merge", "--out", dir}, files...)...)
	if code != 0 {
		t.Fatalf("merge: %d %s", code, errOut)
	}
	code, whole, _ := runCLI(t, "hawkeye", "eval", "--traces", "1", "--quiet", "--out", t.TempDir())
	if code != 0 {
		t.Fatal("eval")
	}
	table := func(s string) string { return s[strings.Index(s, "ANOMALY"):strings.Index(s, "written to")] }
	if table(merged) != table(whole) {
		t.Fatalf("merged:\n%s\nwhole:\n%s", table(merged), table(whole))
	}
	if _, err := os.Stat(filepath.Join(dir, "hawkeye-eval.txt")); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := runCLI(t, "hawkeye", "eval", "--shard", "2/2"); code != 2 {
		t.Fatalf("bad shard: exit %d", code)
	}
}
