package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/collector/hostmeshanalyzer"
)

// TestMeshPGDropBadInput: every bad flag is a usage error naming it, before
// any switch is read.
func TestMeshPGDropBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--switch NAME=COMMAND: at least one switch"},
		{[]string{"--switch", "rail0", "--out", "x"}, `--switch "rail0": want NAME=COMMAND`},
		{[]string{"--switch", "=cat x", "--out", "x"}, `--switch "=cat x"`},
		{[]string{"--switch", "a=x", "--switch", "a=y", "--out", "x"}, "--switch a: named twice"},
		{[]string{"--switch", "a=x", "--pg", "16", "--out", "x"}, "--pg 16"},
		{[]string{"--switch", "a=x", "--every", "0s", "--out", "x"}, "--every 0s"},
		{[]string{"--switch", "a=x"}, "--analyzer and/or --out"},
		{[]string{"--switch", "a=x", "--out", "x", "extra"}, "no arguments"},
	} {
		code, out, errOut := runCLI(t, append([]string{"mesh", "pgdrop"}, tc.args...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) || out != "" {
			t.Errorf("mesh pgdrop %q: exit %d, stderr %q, want exit 2 naming %q", tc.args, code, errOut, tc.want)
		}
	}
	if code, _, errOut := runCLI(t, "mesh", "analyze", "--lossless-pg", "0", "f"); code != 2 || !strings.Contains(errOut, "--lossless-pg 0") {
		t.Errorf("mesh analyze --lossless-pg 0: exit %d, stderr %q", code, errOut)
	}
}

// TestMeshPGDropToAnalyze: the poller's file, with an agent's batch whose
// probes over the switch time out, makes `mesh analyze FILE` name the
// switch.
func TestMeshPGDropToAnalyze(t *testing.T) {
	dir := t.TempDir()
	table, out := filepath.Join(dir, "table"), filepath.Join(dir, "batches")
	// A table whose PG 3 count grows by 40 a reading.
	cmd := `n=$(cat ` + table + ` 2>/dev/null || echo 0); printf 'Ingress PG dropped packets:\n Port PG0 PG3\n---- --- ---\nEthernet8 0 %d\n' "$n"; echo $((n + 40)) > ` + table
	if code, _, errOut := runCLI(t, "mesh", "pgdrop", "--switch", "rail2="+cmd, "--every", "20ms", "--duration", "1s", "--out", out); code != 0 {
		t.Fatalf("mesh pgdrop: exit %d: %s", code, errOut)
	}
	b, err := os.ReadFile(out)
	if err != nil || !strings.Contains(string(b), `"switch":"rail2","port":"Ethernet8","pg":3`) {
		t.Fatalf("poller's file: %v %s", err, b)
	}
	// An agent whose probes to n2 (over rail2) time out one in four
	// while the records' discards run.
	bs, err := hostmeshanalyzer.ReadBatches(bytes.NewReader(b))
	if err != nil || len(bs) == 0 {
		t.Fatalf("poller's batches: %d, %v", len(bs), err)
	}
	from, to := bs[0].PGDrops[0].From, bs[len(bs)-1].PGDrops[0].To
	agent := hostmeshanalyzer.Batch{Host: "m0"}
	for i := range 80 {
		r := hostmeshanalyzer.Result{Host: "m0", Src: "n0", Dst: "n2", SrcIP: "10.0.0.1", DstIP: "10.0.2.1", SPort: 49152, Seq: uint64(i),
			At: from + int64(i)*(to-from)/80, Timeout: i%4 == 0, NetworkNs: 5000, ProcessingNs: 3000}
		if i%2 == 1 {
			r.Dst, r.DstIP, r.SPort = "n1", "10.0.1.1", 49153
		}
		agent.Results = append(agent.Results, r)
	}
	agent.Paths = []hostmeshanalyzer.Path{
		{Host: "m0", Src: "n0", Dst: "n2", Tuple: hostmeshanalyzer.Tuple{SrcIP: "10.0.0.1", DstIP: "10.0.2.1", SPort: 49152}, At: from, Complete: true, Hops: []string{"rail0", "spine0", "rail2"}},
		{Host: "m0", Src: "n0", Dst: "n1", Tuple: hostmeshanalyzer.Tuple{SrcIP: "10.0.0.1", DstIP: "10.0.1.1", SPort: 49153}, At: from, Complete: true, Hops: []string{"rail0", "spine1", "rail1"}},
	}
	line, _ := json.Marshal(agent)
	if err := os.WriteFile(out, append(append(b, line...), '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, errOut := runCLI(t, "mesh", "analyze", out)
	if code != 0 || !strings.Contains(stdout, "ALERT switch rail2: its lossless class (PG 3) discarded") || strings.Contains(stdout, "ALERT rnic") {
		t.Fatalf("mesh analyze: exit %d, %s %s", code, stdout, errOut)
	}
}
