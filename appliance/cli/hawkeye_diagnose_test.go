package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestHawkeyeDiagnoseSVG: --svg draws the graph whether Graphviz is
// installed or not (the built-in renderer stands in), --renderer native
// gives the built-in drawing, and --renderer graphviz without dot is an
// error that says so.
func TestHawkeyeDiagnoseSVG(t *testing.T) {
	tel := filepath.Join("..", "..", "collector", "hawkeyeanalyzer", "testdata", "storm.json")
	dir := t.TempDir()
	auto, native := filepath.Join(dir, "auto.svg"), filepath.Join(dir, "native.svg")
	code, out, errOut := runCLI(t, "hawkeye", "diagnose", "--svg", auto, "--dot", filepath.Join(dir, "g.dot"), tel)
	if code != 0 || !strings.Contains(out, "pfc_storm_host_injection") {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, "hawkeye", "diagnose", "--svg", native, "--renderer", "native", tel); code != 0 {
		t.Fatalf("native: exit %d: %s", code, errOut)
	}
	a, err := os.ReadFile(auto)
	if err != nil {
		t.Fatal(err)
	}
	n, err := os.ReadFile(native)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(n, []byte(`class="hawkeye-graph"`)) || !bytes.Contains(n, []byte(`data-id="H1"`)) {
		t.Fatalf("native SVG:\n%s", n)
	}
	_, lookErr := exec.LookPath("dot")
	if lookErr != nil && !bytes.Equal(a, n) {
		t.Fatal("without Graphviz, --svg should be the built-in drawing")
	}
	if lookErr == nil && !bytes.Contains(a, []byte("<svg")) {
		t.Fatalf("graphviz SVG:\n%s", a)
	}
	code, _, errOut = runCLI(t, "hawkeye", "diagnose", "--svg", filepath.Join(dir, "gv.svg"), "--renderer", "graphviz", tel)
	if lookErr != nil && (code != 1 || !strings.Contains(errOut, "graphviz")) {
		t.Fatalf("--renderer graphviz without dot: exit %d: %s", code, errOut)
	}
	if code, _, _ := runCLI(t, "hawkeye", "diagnose", "--svg", native, "--renderer", "gnuplot", tel); code != 2 {
		t.Fatalf("bad --renderer: exit %d", code)
	}
}
