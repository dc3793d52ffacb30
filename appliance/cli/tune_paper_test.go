package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTunePaper: a shortened run prints every method of the case and
// the verdicts and writes the files; bad flags are usage errors.
func TestTunePaper(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := runCLI(t, "tune", "paper", "--cases", "incast2-q10-64k", "--evals", "3", "--bursts", "1", "--out", dir)
	if code != 0 {
		t.Fatalf("%d %s %s", code, out, errOut)
	}
	for _, want := range []string{"tuned (seed 1)", "dcqcn", "dctcp", "experience", "hpcc", "vendor", "P99 FCT: beats",
		"under the history normalisation", "queues its burst's message", "are the whole run's"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
	for _, f := range []string{"paper.txt", "paper.json", "paper.html", "paper-1.png"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	code, out, _ = runCLI(t, "tune", "paper", "--fig13", "incast2-q10-64k", "--knobs", "0,4", "--evals", "2", "--bursts", "1", "--out", dir)
	if code != 0 || !strings.Contains(out, "Fig. 13") {
		t.Fatalf("fig13: %d %s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "fig13.html")); err != nil {
		t.Fatal(err)
	}
	// The earlier settings, for ablations: the footer says which ran.
	code, out, _ = runCLI(t, "tune", "paper", "--cases", "incast2-q10-64k", "--evals", "2", "--bursts", "1", "--norm", "fixed",
		"--window", "posting", "--busy", "skip", "--out", dir)
	for _, want := range []string{"under the fixed normalisation", "skips the burst", "are the posting window's"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("ablation: %d, output lacks %q:\n%s", code, want, out)
		}
	}
	for _, bad := range [][]string{{"--cases", "nope"}, {"--evals", "0"}, {"--fig13", "redis", "--knobs", "x"}, {"extra"},
		{"--norm", "eq14"}, {"--window", "1s"}, {"--busy", "drop"}, {"--telemetry", "all"}} {
		if code, _, _ := runCLI(t, append([]string{"tune", "paper", "--out", dir}, bad...)...); code == 0 {
			t.Fatalf("%v accepted", bad)
		}
	}
}

func TestParseKnobs(t *testing.T) {
	v, err := parseKnobs("0, 1,4.5")
	if err != nil || len(v) != 3 || v[2] != 4500*time.Nanosecond {
		t.Fatalf("%v %v", v, err)
	}
	for _, bad := range []string{"", "-1", "1,,2", "NaN", "2e6", "1,2,3,4,5,6,7,8,9"} {
		if _, err := parseKnobs(bad); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
}

// FuzzParseKnobs: any input is values within range or an error, never a
// panic.
func FuzzParseKnobs(f *testing.F) {
	for _, s := range []string{"0,1,4", "", "1e6", "-0", "0x10", "4,4,4,4,4,4,4,4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		vals, err := parseKnobs(s)
		if err != nil {
			return
		}
		if len(vals) == 0 || len(vals) > 8 {
			t.Fatalf("%q: %d values", s, len(vals))
		}
		for _, v := range vals {
			if v < 0 || v > time.Second {
				t.Fatalf("%q: %v", s, v)
			}
		}
	})
}
