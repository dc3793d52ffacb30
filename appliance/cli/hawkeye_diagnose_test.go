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

// TestHawkeyeDiagnoseStrict: a telemetry file with an unknown or a
// missing field is an error naming it (exit 1), not a diagnosis.
func TestHawkeyeDiagnoseStrict(t *testing.T) {
	good, err := os.ReadFile(filepath.Join("..", "..", "collector", "hawkeyeanalyzer", "testdata", "storm.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, c := range []struct{ from, to, want string }{
		{`"time_ns"`, `"time_ms"`, `unknown field "time_ms"`},
		{`"victim"`, `"victims"`, `unknown field "victims"`},
		{`"pause_frames"`, `"pause_frame"`, `unknown field "pause_frame"`},
	} {
		bad := filepath.Join(dir, "bad.json")
		if err := os.WriteFile(bad, bytes.Replace(good, []byte(c.from), []byte(c.to), 1), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := runCLI(t, "hawkeye", "diagnose", bad)
		if code != 1 || !strings.Contains(errOut, c.want) || strings.Contains(out, "anomaly") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", c.to, code, out, errOut)
		}
	}
	missing := filepath.Join(dir, "missing.json")
	os.WriteFile(missing, []byte(`{"event":1,"victim":{"src":1,"dst":2,"sport":3,"dport":4791,"proto":17},"hosts":{},"links":[],"reports":[]}`), 0o644)
	if code, _, errOut := runCLI(t, "hawkeye", "diagnose", missing); code != 1 || !strings.Contains(errOut, `missing field "time_ns"`) {
		t.Errorf("missing field: exit %d, %q", code, errOut)
	}
}
