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
