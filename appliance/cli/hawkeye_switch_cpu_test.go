package cli

import (
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/bench/hawkeyesim"
	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
	"github.com/rdma-appliance/appliance/p4/hawkeyetofino"
)

// hawkeyeCPUProgram is a leaf's program (h0 and h1 facing hosts, up a
// switch) written to dir/leaf.json, and the twin of the switch.
func hawkeyeCPUProgram(t *testing.T, dir string) (string, *hawkeyesim.Switch) {
	t.Helper()
	prog := `{"ports": [
  {"name": "h0", "dev_port": 0, "speed": "100G", "fec": "rs", "host": true},
  {"name": "h1", "dev_port": 4, "speed": "100G", "fec": "rs", "host": true},
  {"name": "up", "dev_port": 8, "speed": "100G", "fec": "rs"}],
 "routes": [{"prefix": "10.1.0.1/32", "port": "h0"}, {"prefix": "10.1.0.2/32", "port": "h1"}, {"prefix": "10.0.0.0/8", "port": "up"}],
 "cpu_port": 192}`
	f := filepath.Join(dir, "leaf.json")
	if err := os.WriteFile(f, []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	sw, err := hawkeyesim.NewSwitch("leaf", hawkeyesim.DefaultConfig(),
		[]hawkeyesim.SwitchPort{{Dev: 0, Bandwidth: 100e9, Host: true}, {Dev: 4, Bandwidth: 100e9, Host: true}, {Dev: 8, Bandwidth: 100e9}},
		[]hawkeyesim.SwitchRoute{{Prefix: netip.MustParsePrefix("10.1.0.1/32"), Port: 0}, {Prefix: netip.MustParsePrefix("10.1.0.2/32"), Port: 4},
			{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Port: 8}})
	if err != nil {
		t.Fatal(err)
	}
	return f, sw
}

// hawkeyeSDE is an SDE whose run_bfshell.sh runs a script against the
// registers in dir/regs.json (bench/hawkeyesim's stand-in bfshell).
func hawkeyeSDE(t *testing.T, dir string) string {
	t.Helper()
	mock, err := filepath.Abs("../../bench/hawkeyesim/testdata/bfshell.py")
	if err != nil {
		t.Fatal(err)
	}
	sh := `#!/bin/sh
[ "$1" = -b ] && [ -f "$2" ] || { echo "usage: run_bfshell.sh -b FILE" >&2; exit 2; }
exec python3 ` + mock + ` "$SDE/regs.json" "$2"
`
	if err := os.WriteFile(filepath.Join(dir, "run_bfshell.sh"), []byte(sh), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestHawkeyeSwitchCPU runs the command on one end of a ring link that
// plays the switch CPU's port, with a stand-in SDE answering from the
// twin's registers: the poll copy the data plane sends it becomes one
// JSON report line holding the twin's flows, and the counters print when
// the command is interrupted.
func TestHawkeyeSwitchCPU(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	dir := t.TempDir()
	progFile, sw := hawkeyeCPUProgram(t, dir)
	victim := hawkeyewire.FlowKey{Src: 10<<24 | 1<<16 | 1, Dst: 10<<24 | 9<<16 | 1, Sport: 49152, Dport: 4791, Proto: 17}
	frame := func(k hawkeyewire.FlowKey) []byte {
		f := make([]byte, 1000)
		f[12], f[13], f[14], f[22], f[23] = 8, 0, 0x45, 64, 17
		for i, v := range []uint32{k.Src, k.Dst, uint32(k.Sport)<<16 | uint32(k.Dport)} {
			for j := range 4 {
				f[26+4*i+j] = byte(v >> (24 - 8*j))
			}
		}
		return f
	}
	pollAt := int64(9<<20 + 100_000)
	for i := range int64(10) {
		sw.Packet(pollAt-50_000+i*1000, 0, frame(victim), 3000)
	}
	poll := hawkeyewire.Poll{Type: hawkeyewire.TypeFlow, Event: 3, Victim: victim}.AppendFrame(nil, [6]byte{}, [6]byte{})
	if _, toCPU := sw.Packet(pollAt, 0, poll, 0); !toCPU {
		t.Fatal("the twin took no poll")
	}
	regs, err := sw.Registers()
	if err != nil {
		t.Fatal(err)
	}
	sde := hawkeyeSDE(t, dir)
	b, _ := json.Marshal(regs)
	if err := os.WriteFile(filepath.Join(sde, "regs.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}

	l := ring.Named("hawkswcpu", ring.Config{})
	defer ring.Forget("hawkswcpu")
	pool, err := dpdk.NewPool("hawkswcpu-test", 8, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range [][]byte{hawkeyetofino.AppendCPUCopy(nil, 0, uint32(pollAt), poll), []byte("not for the CPU")} {
		p := pool.Get()
		p.CopyFrom(f)
		l.B().TxBurst(0, []*dpdk.Packet{p})
	}
	out := filepath.Join(dir, "reports.jsonl")
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr strings.Builder
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"hawkeye", "switch-cpu", "-f", progFile, "--port", "ring:hawkswcpu.a", "--sde", sde, "--out", out, "--json"},
			&stdout, &stderr)
	}()
	var lines []string
	for deadline := time.Now().Add(20 * time.Second); len(lines) == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(out); err == nil && strings.HasSuffix(string(b), "\n") {
			lines = strings.Split(strings.TrimSpace(string(b)), "\n")
		}
	}
	cancel()
	if code := <-done; code != 0 || len(lines) != 1 {
		t.Fatalf("exit %d, %d report lines: %s", code, len(lines), stderr.String())
	}
	var r hawkeyetofino.CPUReport
	dec := json.NewDecoder(strings.NewReader(lines[0]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatal(err)
	}
	want := sw.Collect(pollAt)
	if r.Event != 3 || r.Victim != victim || r.Report.Switch != "leaf" || len(r.Report.Epochs) != 1 || len(want.Epochs) != 1 ||
		len(r.Report.Epochs[0].Flows) != 1 || r.Report.Epochs[0].Flows[0] != want.Epochs[0].Flows[0] || r.Report.Bytes != want.Bytes {
		t.Fatalf("report %+v, the twin's %+v", r.Report, want)
	}
	var st hawkeyetofino.CPUStats
	errOut := stderr.String()
	i := strings.Index(errOut, "{")
	if i < 0 {
		t.Fatalf("no counters: %s", errOut)
	}
	if err := json.Unmarshal([]byte(errOut[i:]), &st); err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	if st.Polls != 1 || st.Reports != 1 || st.Malformed != 1 || st.Collections != 1 {
		t.Fatalf("counters %+v (stderr %s)", st, stderr.String())
	}
}

func TestHawkeyeSwitchCPUErrors(t *testing.T) {
	dir := t.TempDir()
	progFile, _ := hawkeyeCPUProgram(t, dir)
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"ports": [], "routes": [], "cpu_port": 192, "colour": 1}`), 0o644)
	invalid := filepath.Join(dir, "invalid.json")
	os.WriteFile(invalid, []byte(`{"ports": [{"name": "a", "dev_port": 1, "speed": "7G", "fec": "rs"}], "routes": [], "cpu_port": 192}`), 0o644)
	for _, c := range []struct{ args, want string }{
		{"--port ring:x.a --sde /x", "want -f program.json"},
		{"-f " + progFile + " --sde /x", "want -f program.json"},
		{"-f " + progFile + " --port ring:x.a --sde ''", "want --sde"},
		{"-f " + progFile + " --port ring:x.a --sde /x --read-epochs 5", "--read-epochs 5"},
		{"-f " + progFile + " --port ring:x.a --sde /x --mtu 100", "--mtu 100"},
		{"-f " + bad + " --port ring:x.a --sde /x", `unknown field "colour"`},
		{"-f " + invalid + " --port ring:x.a --sde /x", "ports[0].speed"},
	} {
		args := append([]string{"hawkeye", "switch-cpu"}, strings.Fields(c.args)...)
		for i, a := range args {
			if a == "''" {
				args[i] = ""
			}
		}
		if code, _, errOut := runCLI(t, args...); code == 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: exit %d, %q", c.args, code, errOut)
		}
	}
}
