package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/appliance/lumina"
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

// TestLuminaRunIntentNeverFires: an intent the traffic cannot reach (a
// ninth round of a connection that never retransmits) makes the repeat
// invalid, with the intent named, in the summary and the exit status.
// Lumina's own example runs unchanged beside it.
func TestLuminaRunIntentNeverFires(t *testing.T) {
	tt, err := lumina.LoadTest(filepath.Join("..", "lumina", "testdata", "tests", "fast-retrans-20k.yml"))
	if err != nil {
		t.Fatal(err)
	}
	s := tt.Spec
	s.Traffic.NumQPs = "2"
	s.Traffic.DataPktEvents = append(s.Traffic.DataPktEvents[:1], lumina.EventSpec{QPN: 1, PSN: "2", Type: "drop", Iter: 9})
	data, err := lumina.MarshalTest(&s)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	test := filepath.Join(dir, "never.yml")
	if err := os.WriteFile(test, data, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "lumina", "run", "-f", test, "--lab", "--result-path", dir)
	want := "intent 1 {qpn 1 psn 2 iter 9 drop} never fired"
	if code != 1 || !strings.Contains(out, "repeat 0: INVALID") || !strings.Contains(out, want) || !strings.Contains(errOut, "repeat 0 is an invalid test: events INVALID") {
		t.Fatalf("run: %d\n%s\n%s", code, out, errOut)
	}
	example := filepath.Join("..", "lumina", "testdata", "upstream", "example.yml")
	code, out, errOut = runCLI(t, "lumina", "run", "-f", example, "--lab", "--result-path", t.TempDir())
	if code != 0 || strings.Count(out, ": valid") != 5 {
		t.Fatalf("Lumina's example: %d\n%s\n%s", code, out, errOut)
	}
}

// TestLuminaRunSetup: --dry-run prints the hardware mode's commands for
// Lumina's example; without it, a host command that fails stops the run
// before any traffic, naming the machine and the step.
func TestLuminaRunSetup(t *testing.T) {
	example := filepath.Join("..", "lumina", "testdata", "upstream", "example.yml")
	code, out, errOut := runCLI(t, "lumina", "run", "-f", example, "--dry-run")
	if code != 0 || !strings.Contains(out, "requester (192.168.1.12): assign 10.0.0.1/24 (ip-list)\n  run:     sudo ip addr replace 10.0.0.1/24 dev ens1") ||
		!strings.Contains(out, "/path/to/bf-sde/on/switch/run_switchd.sh -p injector") {
		t.Fatalf("dry run: %d\n%s\n%s", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, "lumina", "run", "-f", example, "--dry-run", "--lab"); code != 2 || !strings.Contains(errOut, "--dry-run") {
		t.Fatalf("--dry-run --lab: %d %s", code, errOut)
	}
	old := remoteExec
	remoteExec = inProcess{} // runs only appliance commands: ip is "not found"
	defer func() { remoteExec = old }()
	code, _, errOut = runCLI(t, "lumina", "run", "-f", example, "--result-path", t.TempDir())
	if code != 1 || !strings.Contains(errOut, "setting up the machines: requester: reading the state before: flush ens1's addresses: ip: not found on 192.168.1.12") {
		t.Fatalf("failing setup: %d %s", code, errOut)
	}
}

// TestLuminaPaper writes one of the paper's pages and the index; an
// unknown figure is an error.
func TestLuminaPaper(t *testing.T) {
	out := t.TempDir()
	code, stdout, errOut := runCLI(t, "lumina", "paper", "--out", out, "--figures", "table4")
	if code != 0 || !strings.Contains(stdout, filepath.Join(out, "table4.html")+": Table 4: CNPs per QP: 3 of 3 checks within tolerance") ||
		!strings.Contains(stdout, "index: "+filepath.Join(out, "index.html")) {
		t.Fatalf("paper: %d %s %s", code, stdout, errOut)
	}
	if _, err := os.Stat(filepath.Join(out, "index.html")); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLI(t, "lumina", "paper", "--out", out, "--figures", "fig99"); code == 0 || !strings.Contains(errOut, "fig99") {
		t.Fatalf("unknown figure: %d %s", code, errOut)
	}
}
