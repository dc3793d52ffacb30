package report_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/rdma-appliance/appliance/internal/report"
)

// A run summary: parameters, verdicts, and a latency CDF, written as one
// HTML file that can be mailed or archived with the run.
func ExamplePage() {
	rtt := []float64{4.1, 4.3, 4.2, 5.0, 4.4, 9.8, 4.2, 4.6}

	p := report.NewPage("Lumina run 42")
	p.Subtitle = "RDMA WRITE, 8 QPs"
	p.Section("Parameters").KeyValues(
		report.KV{Key: "message size", Value: 65536},
		report.KV{Key: "trace whole", Value: true},
	)
	p.Section("Events").Table(report.Table{
		Header: []string{"event", "PSN", "verdict"},
		Rows: [][]report.Cell{
			report.Row("drop", 1024, true),
			report.Row("corrupt", 4096, report.Fail("no NAK")),
		},
	})
	p.Section("Latency").Chart(&report.Chart{
		Title: "RTT", XLabel: "µs", YLabel: "share", Kind: report.Step,
		Series: []report.Series{report.CDF("RTT", rtt)},
	})

	path := filepath.Join(os.TempDir(), "lumina-42.html")
	if err := p.WriteFile(path); err != nil {
		log.Fatal(err)
	}
	defer os.Remove(path)
	fmt.Println("written")
	// Output: written
}

// The same chart as SVG for a page and as PNG for a ticket.
func ExampleChart() {
	c := &report.Chart{
		Title: "Drops per dumper", Kind: report.Bar, YLabel: "packets",
		Categories: []string{"dumper0", "dumper1"},
		Series: []report.Series{
			{Name: "WRR", Y: []float64{0, 0}},
			{Name: "flow hash", Y: []float64{1200, 0}},
		},
	}
	if err := c.SVG(os.Stdout); err != nil {
		log.Fatal(err)
	}
	f, err := os.CreateTemp("", "drops-*.png")
	if err != nil {
		log.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if err := c.PNG(f); err != nil {
		log.Fatal(err)
	}
}
