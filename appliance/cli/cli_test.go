package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestHelpEverywhere(t *testing.T) {
	code, out, errOut := runCLI(t, "--help")
	if code != 0 || !strings.Contains(out, "Commands:") || !strings.Contains(out, "lab") || errOut != "" {
		t.Fatalf("--help: %d %q %q", code, out, errOut)
	}
	if code, out, errOut := runCLI(t, "--no-such-flag"); code != 2 || out != "" || !strings.Contains(errOut, "Commands:") {
		t.Fatalf("--no-such-flag: %d %q %q", code, out, errOut)
	}
	for _, c := range commands {
		code, out, _ := runCLI(t, c.Name, "--help")
		if code != 0 || !strings.Contains(out, "Usage: appliance "+c.Name) {
			t.Errorf("%s --help: %d %q", c.Name, code, out)
		}
		code, out, _ = runCLI(t, "help", c.Name)
		if code != 0 || !strings.Contains(out, "Usage: appliance "+c.Name) {
			t.Errorf("help %s: %d %q", c.Name, code, out)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	if code, _, errOut := runCLI(t, "frobnicate"); code != 2 || !strings.Contains(errOut, `unknown command "frobnicate"`) {
		t.Fatalf("unknown command: %d %q", code, errOut)
	}
	if code, _, _ := runCLI(t); code != 2 {
		t.Fatalf("no command: %d", code)
	}
	if code, _, errOut := runCLI(t, "version", "extra"); code != 2 || !strings.Contains(errOut, "takes no arguments") {
		t.Fatalf("extra arg: %d %q", code, errOut)
	}
	if code, _, errOut := runCLI(t, "--log-level", "loud", "version"); code != 2 || !strings.Contains(errOut, "--log-level") {
		t.Fatalf("bad log level: %d %q", code, errOut)
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := runCLI(t, "version")
	if code != 0 || !strings.HasPrefix(out, "appliance ") || !strings.Contains(out, "port drivers: ") || !strings.Contains(out, "ring") {
		t.Fatalf("version: %d %q", code, out)
	}
}

func TestLabConfigErrors(t *testing.T) {
	code, out, _ := runCLI(t, "lab", "--print-default")
	if code != 0 || !strings.Contains(out, "wire:") {
		t.Fatalf("print-default: %d %q", code, out)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "lab.yml")
	bad := strings.Replace(out, "rounds:", "rounsd:", 1)
	if err := os.WriteFile(cfg, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI(t, "lab", "--config", cfg, "--out", dir)
	if code != 1 || !strings.Contains(errOut, cfg+":") || !strings.Contains(errOut, `wire.rounsd: unknown key (did you mean "rounds"?)`) {
		t.Fatalf("bad key: %d %q", code, errOut)
	}
	bad = strings.Replace(out, "payload: 256", "payload: 100000", 1)
	if err := os.WriteFile(cfg, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runCLI(t, "lab", "--config", cfg, "--out", dir)
	if code != 1 || !strings.Contains(errOut, "wire.payload") {
		t.Fatalf("bad value: %d %q", code, errOut)
	}
}

func TestPorts(t *testing.T) {
	code, out, _ := runCLI(t, "ports", "--json")
	if code != 0 || !strings.Contains(out, `"drivers"`) {
		t.Fatalf("ports: %d %q", code, out)
	}
}

func TestLabAndPcapCommands(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "lab.yml")
	code, def, _ := runCLI(t, "lab", "--print-default")
	if code != 0 {
		t.Fatal("print-default failed")
	}
	// The whole lab, each stage shortened: this test is about the
	// command (and it also runs under the race detector).
	small := strings.NewReplacer("rounds: 2000", "rounds: 20", "iters: 50000", "iters: 2000", "lat-iters: 2000", "lat-iters: 200",
		// One round of Figure 7b: a CPU-bound simulation, and three took
		// the whole 10 minutes under the race detector at load 25.
		"balance-rounds: 5", "balance-rounds: 1", "reports: 20000", "reports: 2000", "traces: 3", "traces: 1",
		// dta-flow: a meter the reporters overload twice under the
		// race detector on a loaded machine too (TestDTAFlowStage).
		"reports: 6000", "reports: 2000", "meter: 5000", "meter: 2000").Replace(def)
	if err := os.WriteFile(cfg, []byte(small), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "lab", "--config", cfg, "--out", dir)
	if code != 0 || !regexp.MustCompile(`(?m)^wire +PASS`).MatchString(out) || !strings.Contains(out, "artifacts: "+dir) {
		t.Fatalf("lab: %d\n%s\n%s", code, out, errOut)
	}
	pc := filepath.Join(dir, "wire.pcap")
	code, out, errOut = runCLI(t, "pcap", "info", pc)
	if code != 0 || !strings.Contains(out, "bad ICRC 0") || !strings.Contains(out, "0x81  CNP") {
		t.Fatalf("pcap info: %d\n%s\n%s", code, out, errOut)
	}
	ng := filepath.Join(dir, "wire.pcapng.zst")
	code, out, errOut = runCLI(t, "pcap", "convert", "--format", "pcapng", "--zstd", "--snap-len", "64", pc, ng)
	if code != 0 || !strings.Contains(out, "wrote ") {
		t.Fatalf("pcap convert: %d %s %s", code, out, errOut)
	}
	code, out, _ = runCLI(t, "pcap", "info", "--json", ng)
	if code != 0 || !strings.Contains(out, `"format": "pcapng"`) || !strings.Contains(out, `"compressed": true`) {
		t.Fatalf("pcap info json: %d %s", code, out)
	}
	if code, _, errOut := runCLI(t, "pcap", "info", filepath.Join(dir, "nope.pcap")); code != 1 || !strings.Contains(errOut, "nope.pcap") {
		t.Fatalf("missing file: %d %s", code, errOut)
	}
	if code, _, _ := runCLI(t, "pcap", "convert", "--format", "erf", pc, ng); code != 2 {
		t.Fatalf("bad format: %d", code)
	}
	if code, _, _ := runCLI(t, "pcap"); code != 2 {
		t.Fatalf("group without subcommand: %d", code)
	}
}

func TestPortsOpen(t *testing.T) {
	code, out, _ := runCLI(t, "ports", "--open", "ring:clitest.a", "--seconds", "0.2")
	if code != 0 || !strings.Contains(out, "driver ring") || !strings.Contains(out, "total: rx 0 packets") {
		t.Fatalf("ports --open ring: %d %q", code, out)
	}
	code, _, errOut := runCLI(t, "ports", "--open", "nosuch:dev")
	if code != 1 || !strings.Contains(errOut, `no such driver "nosuch"`) {
		t.Fatalf("unknown driver: %d %q", code, errOut)
	}
}

func TestVerbsDevices(t *testing.T) {
	code, out, _ := runCLI(t, "verbs", "devices")
	if code != 0 || !strings.Contains(out, "providers:") {
		t.Fatalf("verbs devices: %d %q", code, out)
	}
	code, out, _ = runCLI(t, "verbs", "devices", "--json")
	if code != 0 || !strings.Contains(out, `"providers"`) {
		t.Fatalf("verbs devices --json: %d %q", code, out)
	}
}

// TestHelpOnce: a command's --help is printed once, to stdout, and a bad
// flag prints its error and the usage to stderr only (the flag package
// printed the usage to stderr as well as the --help to stdout, so `2>&1`
// showed it twice and docs/commands held every page twice).
func TestHelpOnce(t *testing.T) {
	for _, path := range [][]string{{"lumina", "run"}, {"dump"}, {"dta", "collect"}, {"pcap", "info"}} {
		name := "appliance " + strings.Join(path, " ")
		code, out, errOut := runCLI(t, append(path, "--help")...)
		if code != 0 || strings.Count(out, "Usage: "+name) != 1 || errOut != "" {
			t.Errorf("%s --help: %d, usage %d times on stdout, stderr %q", name, code, strings.Count(out, "Usage: "), errOut)
		}
		code, out, errOut = runCLI(t, append(path, "--no-such-flag")...)
		if code != 2 || out != "" || !strings.Contains(errOut, "flag provided but not defined: -no-such-flag") ||
			strings.Count(errOut, "Usage: "+name) != 1 {
			t.Errorf("%s --no-such-flag: %d, stdout %q, stderr %q", name, code, out, errOut)
		}
	}
}
