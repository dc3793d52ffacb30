package hawkeyeanalyzer

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/golden/* from the current analyzer")

// analysisOutput is everything the analyzer lets out for one incident: the
// graph as JSON, the diagnosis as JSON and text, DOT and the drawn SVG.
func analysisOutput(t *testing.T, tel *hawkeyewire.Telemetry) []byte {
	t.Helper()
	g := Build(tel, Options{})
	var buf bytes.Buffer
	b, err := json.MarshalIndent(g, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	buf.Write(b)
	buf.WriteString("\n== diagnosis\n")
	d := g.Diagnose()
	if err := d.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	buf.WriteString("\n== text\n")
	if err := d.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	buf.WriteString("\n== dot\n")
	buf.Write(d.DOT())
	buf.WriteString("\n== svg\n")
	buf.Write(d.GraphSVG())
	return buf.Bytes()
}

func compareGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update-golden to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (%d bytes, want %d)", path, len(got), len(want))
	}
}

// TestAnalysisGolden pins the whole analysis, byte for byte, on the example
// incidents (full outputs) and on the benchmark's large incident and the
// fuzz corpus (digests of the same outputs), so that a refactoring of the
// graph construction or the layout cannot change a single byte unnoticed.
func TestAnalysisGolden(t *testing.T) {
	names := make([]string, 0)
	for name := range examples() {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		f, err := os.Open(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		tel, err := Decode(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		compareGolden(t, filepath.Join("testdata", "golden", name+".out"), analysisOutput(t, tel))
	}

	var digests bytes.Buffer
	digest := func(name string, tel *hawkeyewire.Telemetry) {
		fmt.Fprintf(&digests, "%x %s\n", sha256.Sum256(analysisOutput(t, tel)), name)
	}
	digest("nil", nil)
	digest("bench", benchTelemetry())
	files, err := filepath.Glob("testdata/fuzz/FuzzDiagnose/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fuzz corpus: %v", err)
	}
	for _, f := range files {
		tel, err := Decode(bytes.NewReader(readCorpus(t, f)))
		if err != nil {
			continue
		}
		digest(filepath.Base(f), tel)
	}
	compareGolden(t, filepath.Join("testdata", "golden", "digests.txt"), digests.Bytes())
}
