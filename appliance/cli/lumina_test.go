package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/collector/luminaanalyzer"
)

// TestLuminaRunAndAnalyze runs a ready-made test with --lab, then
// analyzes its run directory again; a run marked invalid is reported as
// such and fails.
func TestLuminaRunAndAnalyze(t *testing.T) {
	res := t.TempDir()
	test := filepath.Join("..", "lumina", "testdata", "tests", "timeout-retries.yml")
	code, out, errOut := runCLI(t, "lumina", "run", "-f", test, "--lab", "--result-path", res)
	if code != 0 || !strings.Contains(out, "repeat 0: valid") || !strings.Contains(out, "retry counter exceeded") {
		t.Fatalf("run: %d %s %s", code, out, errOut)
	}
	dirs, _ := filepath.Glob(filepath.Join(res, "*", "0"))
	if len(dirs) != 1 {
		t.Fatalf("run dirs %v", dirs)
	}
	code, out, errOut = runCLI(t, "lumina", "analyze", dirs[0])
	if code != 0 || !strings.Contains(out, "report: "+filepath.Join(dirs[0], "report.html")) {
		t.Fatalf("analyze: %d %s %s", code, out, errOut)
	}
	m, err := luminaanalyzer.ReadMeta(dirs[0])
	if err != nil {
		t.Fatal(err)
	}
	m.Valid, m.IntegrityNote = false, "a dumper lost packets"
	if err := luminaanalyzer.WriteMeta(dirs[0], m); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runCLI(t, "lumina", "analyze", dirs[0])
	if code != 1 || !strings.Contains(errOut, "1 of 1 runs are invalid tests") {
		t.Fatalf("invalid run: %d %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, "lumina", "run", "-f", test+".missing", "--lab"); code != 1 || !strings.Contains(errOut, "no such file") {
		t.Fatalf("missing file: %d %s", code, errOut)
	}
}
