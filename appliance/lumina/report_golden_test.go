package lumina

import (
	"bytes"
	"crypto/sha256"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rdma-appliance/appliance/collector/luminaanalyzer"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/report/*/golden.txt from the current report writer")

// TestWriteReportGolden pins report.html and the plot files, byte for
// byte, for the reports of three lab runs of the ready-made tests
// (testdata/report/*: their meta.json and analysis.json, recorded once)
// and for variants of them that meet the report's other branches: an
// invalid trace, Go-back-N violations, counters, unrecovered losses.
// The golden file holds the HTML and a digest of each plot file.
func TestWriteReportGolden(t *testing.T) {
	for _, name := range []string{"fast-retrans-20k", "timeout-retries", "cnp-pacing"} {
		src := filepath.Join("testdata", "report", name)
		m, err := luminaanalyzer.ReadMeta(src)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := luminaanalyzer.ReadReport(filepath.Join(src, luminaanalyzer.AnalysisFile))
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		out.Write(reportFiles(t, m, rep))
		if name == "fast-retrans-20k" {
			// The same run judged otherwise.
			bad := *rep
			bad.Valid, bad.Invalid = false, "mirror sequence gap at 17"
			bad.GBN.Compliant = false
			bad.GBN.Violations = []luminaanalyzer.Violation{{Conn: 1, Machine: "request sender", Node: "requester",
				Reason: "went back past the NAKed PSN", Count: 2}}
			bad.GBN.Count = 2
			bad.Retransmission.Losses = slices.Clone(bad.Retransmission.Losses)
			if len(bad.Retransmission.Losses) > 0 {
				bad.Retransmission.Losses[0].RecoveredBy = ""
			}
			for len(bad.Retransmission.Losses) <= 200 && len(bad.Retransmission.Losses) > 0 {
				bad.Retransmission.Losses = append(bad.Retransmission.Losses, bad.Retransmission.Losses...)
			}
			bad.Counters.Checks = []luminaanalyzer.CounterCheck{
				{Node: "requester", Counter: "packet_seq_err", Expected: 3, Observed: 3, Present: true, Match: true, Basis: "NAKs received"},
				{Node: "responder", Counter: "out_of_sequence", Expected: 3, Observed: 5, Present: true, Basis: "gaps"},
				{Node: "responder", Counter: "np_cnp_sent", Expected: 0, Basis: "CNPs"},
			}
			bad.Counters.Mismatches = 1
			out.WriteString("\n==== judged otherwise\n")
			out.Write(reportFiles(t, m, &bad))
		}
		golden := filepath.Join(src, "golden.txt")
		if *updateGolden {
			if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run with -update-golden to write it)", err)
		}
		if !bytes.Equal(out.Bytes(), want) {
			t.Errorf("%s: report differs from %s (%d bytes, want %d)", name, golden, out.Len(), len(want))
		}
	}
}

// reportFiles writes the report into a fresh directory and returns the
// HTML followed by a digest line per plot file.
func reportFiles(t *testing.T, m *luminaanalyzer.Meta, rep *luminaanalyzer.Report) []byte {
	t.Helper()
	dir := t.TempDir()
	if err := WriteReport(dir, m, rep); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	html, err := os.ReadFile(filepath.Join(dir, luminaanalyzer.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	out.Write(html)
	for _, e := range entries {
		if e.Name() == luminaanalyzer.ReportFile {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&out, "\n%x %s", sha256.Sum256(b), e.Name())
	}
	out.WriteString("\n")
	return out.Bytes()
}
