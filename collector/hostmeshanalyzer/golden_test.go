package hostmeshanalyzer

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/golden/* from the current analyzer")

// TestReportGolden pins the analysis, byte for byte, on a series of
// windows that meets every branch of it: healthy probes, a dead RNIC held
// over the next windows, an RNIC its agent reports gone, a down spine link,
// a slow link direction, an overloaded host, and probes without a traced
// path. Each window's report is written as JSON and as text.
func TestReportGolden(t *testing.T) {
	var out bytes.Buffer
	emit := func(name string, r *Report) {
		fmt.Fprintf(&out, "== %s\n", name)
		b, err := json.MarshalIndent(r, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		out.Write(b)
		out.WriteString("\n")
		r.WriteText(&out)
	}
	add := func(a *Analyzer, bs []Batch) {
		for i := range bs {
			a.Add(&bs[i])
		}
	}
	jitter := rand.New(rand.NewPCG(9, 9))
	noisy := func(p probe) (bool, int64, int64) {
		if p.host == 1 && (p.src == 5 || p.dst == 5) {
			return true, 0, 0
		}
		if p.spine == 1 && (p.src == 2 || p.dst == 2) && jitter.IntN(3) == 0 {
			return true, 0, 0
		}
		if p.host == 3 {
			return false, 4000 + jitter.Int64N(3000), 900_000 + jitter.Int64N(400_000)
		}
		return false, 4000 + jitter.Int64N(3000), 2000 + jitter.Int64N(4000)
	}
	c := &cluster{hosts: 4, rnics: 8, rng: rand.New(rand.NewPCG(11, 11))}
	a := NewAnalyzer(Config{})
	add(a, c.batches(0, 100, noisy))
	emit("dead rnic, lossy link, overloaded host", a.Analyze(win))
	add(a, c.batches(win, 100, healthy))
	emit("healthy, rnic held", a.Analyze(2*win))

	// An RNIC its agent reports gone, and probes whose paths were never
	// traced or only partly.
	bs := c.batches(2*win, 100, noisy)
	bs[0].Down = []string{"n3"}
	bs[1].Paths = nil
	for i := range bs[2].Paths {
		bs[2].Paths[i].Complete = i%2 == 0
	}
	add(a, bs)
	emit("down rnic, untraced paths", a.Analyze(3*win))

	slow := func(p probe) (bool, int64, int64) {
		if p.spine == 0 && p.dst == 3 {
			return false, 40000 + jitter.Int64N(1000), 3000
		}
		return false, 5000 + jitter.Int64N(500), 3000
	}
	c = &cluster{hosts: 4, rnics: 4, rng: rand.New(rand.NewPCG(12, 12))}
	a = NewAnalyzer(Config{})
	add(a, c.batches(0, 200, slow))
	emit("slow link direction", a.Analyze(win))
	emit("empty window", a.Analyze(2*win))

	down := func(p probe) (bool, int64, int64) {
		if p.spine == 1 && (p.src == 2 || p.dst == 2) {
			return true, 0, 0
		}
		return false, 5000 + jitter.Int64N(500), 3000
	}
	c = &cluster{hosts: 4, rnics: 4, rng: rand.New(rand.NewPCG(13, 13))}
	a = NewAnalyzer(Config{})
	add(a, c.batches(0, 200, down))
	emit("spine link down, rnics explained by it", a.Analyze(win))

	path := filepath.Join("testdata", "golden", "reports.txt")
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update-golden to write it)", err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("reports differ from %s (%d bytes, want %d)", path, out.Len(), len(want))
	}
}
