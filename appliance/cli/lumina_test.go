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
	code, out, errOut := runCLI(t, "lumina", "run", "-f", example, "--dry-run", "--remote-token-file", "/etc/appliance/token")
	if code != 0 || !strings.Contains(out, "requester (192.168.1.12): assign 10.0.0.1/24 (ip-list)\n  run:     sudo ip addr replace 10.0.0.1/24 dev ens1") ||
		!strings.Contains(out, "/path/to/bf-sde/on/switch/run_switchd.sh -p injector") ||
		!strings.Contains(out, "appliance --token-file /etc/appliance/token dump --port afpacket:ens1") {
		t.Fatalf("dry run: %d\n%s\n%s", code, out, errOut)
	}
	// The services the plan starts listen off loopback: without a token
	// file for them, or with one the shell could misread, nothing runs.
	for _, bad := range [][]string{{}, {"--remote-token-file", "token"}, {"--remote-token-file", "/etc/a token"}} {
		args := append([]string{"lumina", "run", "-f", example, "--dry-run"}, bad...)
		if code, _, errOut := runCLI(t, args...); code != 1 || !strings.Contains(errOut, "token") {
			t.Fatalf("%v: %d %s", bad, code, errOut)
		}
	}
	// A DPDK dumper needs the mirror NIC's PCI address, named by key.
	noPCI := filepath.Join(t.TempDir(), "nopci.yml")
	data, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(noPCI, []byte(strings.Replace(string(data), "    pci-addr: \"03:00.0\"\n    switch-port: 148", "    switch-port: 148", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLI(t, "lumina", "run", "-f", noPCI, "--dry-run", "--remote-token-file", "/t", "--dumper-dpdk"); code != 1 ||
		!strings.Contains(errOut, "requester-mirror.nic.pci-addr") || !strings.Contains(errOut, "nopci.yml:") {
		t.Fatalf("--dumper-dpdk without pci-addr: %d %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, "lumina", "run", "-f", example, "--dry-run", "--lab"); code != 2 || !strings.Contains(errOut, "--dry-run") {
		t.Fatalf("--dry-run --lab: %d %s", code, errOut)
	}
	old := remoteExec
	remoteExec = inProcess{} // runs only appliance commands: ip is "not found"
	defer func() { remoteExec = old }()
	// The orchestrator needs the token it starts the services with.
	if code, _, errOut := runCLI(t, "lumina", "run", "-f", example, "--remote-token-file", "/t", "--result-path", t.TempDir()); code != 2 ||
		!strings.Contains(errOut, "--token-file") {
		t.Fatalf("setup without the orchestrator's token: %d %s", code, errOut)
	}
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runCLI(t, "--token-file", tok, "lumina", "run", "-f", example, "--remote-token-file", "/t", "--result-path", t.TempDir())
	if code != 1 || !strings.Contains(errOut, "setting up the machines: requester: reading the state before: flush ens1's addresses: ip: not found on 192.168.1.12") {
		t.Fatalf("failing setup: %d %s", code, errOut)
	}
}

// TestLuminaPaper writes one of the paper's pages and the index, with no
// run directory left by default and the runs kept with --keep-runs; an
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
	if _, err := os.Stat(filepath.Join(out, "runs")); !os.IsNotExist(err) {
		t.Errorf("runs/ written without --keep-runs: %v", err)
	}
	kept := t.TempDir()
	if code, _, errOut := runCLI(t, "lumina", "paper", "--out", kept, "--figures", "table4", "--keep-runs"); code != 0 {
		t.Fatalf("--keep-runs: %d %s", code, errOut)
	}
	if runs, _ := filepath.Glob(filepath.Join(kept, "runs", "cnp-*", "*", "0", "meta.json")); len(runs) != 3 {
		t.Errorf("--keep-runs kept %v, want the three NICs' runs", runs)
	}
	if code, _, errOut := runCLI(t, "lumina", "paper", "--out", out, "--figures", "fig99"); code == 0 || !strings.Contains(errOut, "fig99") {
		t.Fatalf("unknown figure: %d %s", code, errOut)
	}
}
