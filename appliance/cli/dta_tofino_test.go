package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/collector/dtacollector"
	"github.com/rdma-appliance/appliance/internal/dtawire"
	"github.com/rdma-appliance/appliance/internal/service"
	"github.com/rdma-appliance/appliance/p4/dtatofino"
)

// fakeSDE is an SDE directory whose run_bfshell.sh stands in for bfshell
// on a switch: it wants `-b FILE` with SDE set to its directory, keeps a
// copy of each script as scripts/N.py, and answers a counter script (one
// with dtatofino.CounterPrefix) line by line as the switch would, every
// counter 7 packets of 448 bytes and every register 42 in pipe 0; to a
// setup script it says the script ran.
func fakeSDE(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	sh := `#!/bin/sh
[ "$1" = -b ] && [ -f "$2" ] || { echo "usage: run_bfshell.sh -b FILE" >&2; exit 2; }
[ "$SDE" = "` + dir + `" ] || { echo "SDE=$SDE: not this SDE" >&2; exit 3; }
n=$(ls "$SDE/scripts" | wc -l)
cp "$2" "$SDE/scripts/$((n + 1)).py"
if grep -q '` + dtatofino.CounterPrefix + `' "$2"; then
	sed -n \
	-e "s/^counter('\([a-z_]*\)', \([0-9]*\), '\([^']*\)', .*/` + dtatofino.CounterPrefix + `{\"kind\": \"counter\", \"name\": \"\1\", \"index\": \2, \"collector\": \"\3\", \"packets\": 7, \"bytes\": 448}/p" \
	-e "s/^register('\([a-z_]*\)', \([0-9]*\), '\([^']*\)', .*/` + dtatofino.CounterPrefix + `{\"kind\": \"register\", \"name\": \"\1\", \"index\": \2, \"collector\": \"\3\", \"values\": [42, 0, 0, 0]}/p" \
	-e "s/^emit({'kind': 'end', 'records': \([0-9]*\)})/` + dtatofino.CounterPrefix + `{\"kind\": \"end\", \"records\": \1}/p" "$2"
else
	echo "bfrt_python> script ran"
fi
`
	if err := os.WriteFile(filepath.Join(dir, "run_bfshell.sh"), []byte(sh), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// tofinoFile is a translator file with one collector, c0, at exchange,
// behind a dev port of pipe 0.
func tofinoFile(t *testing.T, dir, listen, exchange, keyFile string) string {
	t.Helper()
	key := ""
	if keyFile != "" {
		key = ", key-file: " + keyFile
	}
	f := filepath.Join(dir, "tofino.yml")
	yml := fmt.Sprintf(`name: tofino-cli
listen: %s
interval: 100ms
ip: 10.9.0.200
mac: "02:00:00:00:00:64"
qpn: 0x321
ports:
  - {name: p1, dev-port: 4, speed: 100G, fec: rs, mac: "02:00:00:00:00:01"}
collectors:
  - {name: c0, exchange: %s%s, port: p1}
`, listen, exchange, key)
	if err := os.WriteFile(f, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestDtaTofino runs `appliance dta collect` on a software RNIC and
// `appliance dta tofino` against it: --dry-run prints a script for the
// collector's QP and closes the connection; with --sde (a stand-in
// bfshell) the script is loaded, the counters are read and served, and
// the command stops cleanly when interrupted.
func TestDtaTofino(t *testing.T) {
	id := fmt.Sprintf("dtatof%d", time.Now().UnixNano()%1e6)
	dir := t.TempDir()
	collAddr, exAddr, tofAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	if err := os.WriteFile(filepath.Join(dir, "dta.key"), []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	coll := filepath.Join(dir, "collector.yml")
	if err := os.WriteFile(coll, fmt.Appendf(nil, `name: c0
listen: %s
exchange: %s
key-file: dta.key
key-write: {slots: 1024}
append:
  lists: [{id: 1, entries: 64}]
`, collAddr, exAddr), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	collDone := make(chan int, 1)
	go func() {
		collDone <- run(ctx, []string{"--log-level", "warn", "dta", "collect", "-f", coll, "--nic", "ring:" + id + ".b", "--gid", "10.9.0.1"},
			&bytes.Buffer{}, &bytes.Buffer{})
	}()
	cl := service.NewClient(collAddr)
	connections := func() []dtacollector.ConnState {
		var cs []dtacollector.ConnState
		if err := cl.Do(ctx, "GET", "/v1/connections", nil, &cs); err != nil {
			return nil
		}
		return cs
	}
	waitUntil(t, "the collector", func() bool { return cl.Do(ctx, "GET", "/v1/stats", nil, nil) == nil })
	file := tofinoFile(t, dir, tofAddr, exAddr, "dta.key")

	// --dry-run: the script for the collector's QP, then the connection
	// closes (the collector drops the QP).
	code, out, errOut := runCLI(t, "--log-level", "warn", "dta", "tofino", "-f", file, "--dry-run")
	if code != 0 || !strings.Contains(out, "dta: translator loaded: 1 port, 1 collector, 1 list, 0 reporters") ||
		!strings.Contains(out, "# collectors[0] c0: 10.9.0.1 qpn ") {
		t.Fatalf("--dry-run: %d %.3000q %q", code, out, errOut)
	}
	waitUntil(t, "the dry run's connection to close", func() bool { cs := connections(); return cs != nil && len(cs) == 0 })

	sde := fakeSDE(t)
	script := filepath.Join(dir, "setup.py")
	type result struct {
		code     int
		out, err string
	}
	done := make(chan result, 1)
	go func() {
		var o, e bytes.Buffer
		c := run(ctx, []string{"--log-level", "warn", "dta", "tofino", "-f", file, "--sde", sde, "--script", script}, &o, &e)
		done <- result{c, o.String(), e.String()}
	}()
	tc := service.NewClient(tofAddr)
	var st dtatofino.Status
	waitUntil(t, "the load and a counter read", func() bool {
		return tc.Do(ctx, "GET", "/v1/status", nil, &st) == nil && st.State == "loaded" && st.CounterReads > 0
	})
	cs := connections()
	if len(cs) != 1 || cs[0].Translator != "tofino-cli" || cs[0].QPN != st.Collectors[0].QPN || cs[0].FirstPSN != st.Collectors[0].FirstPSN {
		t.Fatalf("the collector's connections %+v, the status %+v", cs, st.Collectors)
	}
	loaded, _ := os.ReadFile(filepath.Join(sde, "scripts", "1.py"))
	written, _ := os.ReadFile(script)
	if !bytes.Equal(loaded, written) || !strings.Contains(string(loaded), fmt.Sprintf("dst_qpn=%#x, icrc", cs[0].QPN)) {
		t.Fatalf("the loaded script is not --script's or not the collector's (qpn %#x):\n%.2000s", cs[0].QPN, loaded)
	}
	if c := st.Counters; c == nil || c.Reports[dtawire.OpKeyWrite] != 7 || c.Dropped["nack"] != 7 || len(c.Collectors) != 1 ||
		c.Collectors[0].RDMABytes != 448 || c.Collectors[0].PSN != 42 {
		t.Fatalf("counters %+v", st.Counters)
	}
	cancel()
	r := <-done
	if r.code != 0 || !strings.Contains(r.out, "dta tofino tofino-cli: 1 loads, ") || !strings.Contains(r.out, " counter reads (0 failed)") {
		t.Fatalf("dta tofino: %d %q %q", r.code, r.out, r.err)
	}
	<-collDone
}

// TestDtaTofinoErrors: a bad file is refused with its line and key, and
// the command wants somewhere for the script to go.
func TestDtaTofinoErrors(t *testing.T) {
	dir := t.TempDir()
	file := tofinoFile(t, dir, "127.0.0.1:0", "10.9.0.1:40050", "")
	if code, _, errOut := runCLI(t, "dta", "tofino", "-f", file, "--dry-run"); code != 1 ||
		!strings.Contains(errOut, file+":10: collectors[0].key-file: the exchange 10.9.0.1:40050 is off loopback") {
		t.Fatalf("no key off loopback: %d %q", code, errOut)
	}
	t.Setenv("SDE", "")
	if code, _, errOut := runCLI(t, "dta", "tofino", "-f", file); code != 2 || !strings.Contains(errOut, "want --sde PATH") {
		t.Fatalf("nowhere to load: %d %q", code, errOut)
	}
	// Nothing listens at the exchange: the dry run says which collector.
	file = tofinoFile(t, dir, "127.0.0.1:0", freeAddr(t), "")
	if code, _, errOut := runCLI(t, "dta", "tofino", "-f", file, "--dry-run"); code != 1 || !strings.Contains(errOut, "collector c0: ") ||
		!strings.Contains(errOut, "connection refused") {
		t.Fatalf("no collector: %d %q", code, errOut)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
