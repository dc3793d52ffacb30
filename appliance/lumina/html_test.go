package lumina

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/internal/report"
)

// TestReportRenders runs a ready-made test with the analyzers and checks
// the report: the files are there, the verdict says what the test did,
// and report.html renders to a page that is not blank in headless
// Chromium (skipped, with the reason, where no browser is installed).
func TestReportRenders(t *testing.T) {
	tt := loadReady(t, "fast-retrans-20k.yml")
	sum, err := (&Runner{Test: tt, Lab: true, Analyze: AnalyzeRunOptions(SoftOptions())}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rep := sum.Repeats[0]
	if !rep.Valid || !strings.Contains(rep.Analysis, "NAKs") {
		t.Fatalf("repeat %+v", rep)
	}
	if !raceEnabled && (!rep.AnalysisOK || !strings.Contains(rep.Analysis, "go-back-N ok")) {
		t.Fatalf("a correct RNIC judged faulty: %+v", rep)
	}
	for _, f := range []string{"analysis.json", "summary.txt", "report.html", "nack-latency.svg", "nack-latency.png"} {
		if fi, err := os.Stat(filepath.Join(rep.Dir, f)); err != nil || fi.Size() == 0 {
			t.Fatalf("%s: %v", f, err)
		}
	}
	html, _ := os.ReadFile(filepath.Join(rep.Dir, "report.html"))
	if !strings.Contains(string(html), "<svg") || strings.Contains(string(html), "<script src") || strings.Contains(string(html), "<link ") {
		t.Fatal("report.html is not self-contained with inline charts")
	}
	if _, err := report.FindBrowser(); err != nil {
		t.Skipf("no headless browser to render the report: %v", err)
	}
	shot := filepath.Join(t.TempDir(), "shot.png")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := report.Screenshot(ctx, filepath.Join(rep.Dir, "report.html"), shot); err != nil {
		if errors.Is(err, report.ErrNoBrowser) {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	if ok, err := report.NotBlank(shot); err != nil || !ok {
		t.Fatalf("the report renders blank: %v", err)
	}
}

// TestBrokenRNICCaught: a requester that skips the NAKed packet when it
// goes back is caught by the Go-back-N checker, which names the packet,
// and the run's verdict fails; lumina fuzz would keep such a case.
func TestBrokenRNICCaught(t *testing.T) {
	tt := loadReady(t, "fast-retrans-20k.yml")
	r := &Runner{Test: tt, Lab: true, Analyze: AnalyzeRunOptions(SoftOptions()), Testbed: func(c *TestbedConfig) {
		c.Requester.FaultSkipNAKedPSN = true
	}}
	sum, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rep := sum.Repeats[0]
	if !rep.Valid || rep.AnalysisOK || !strings.Contains(rep.Analysis, "go-back-N VIOLATED") || !strings.Contains(rep.Analysis, "seq ") {
		t.Fatalf("broken RNIC not caught: %+v", rep)
	}
	t.Log(rep.Analysis)
}
