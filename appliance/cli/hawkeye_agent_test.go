package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/netns"
	"github.com/rdma-appliance/appliance/dpdk/ring"
)

// TestHawkeyeAgentFlags: the flags reach the agent (package hawkeyeagent
// tests the agent itself): --ip seeds the event ids, polls leave --port
// for --gw-mac, --input is read, --base-per-flow takes each flow's
// smallest RTT as its base; two sources of RTTs are refused.
func TestHawkeyeAgentFlags(t *testing.T) {
	const id = "hawkeye-agent-cli-test"
	peer := ring.Named(id, ring.Config{}).B()
	in := filepath.Join(t.TempDir(), "rtt.txt")
	if err := os.WriteFile(in, []byte("10.0.0.1:49153 10.0.0.9:4791 5000\n10.0.0.1:49153 10.0.0.9:4791 16000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "hawkeye", "agent", "--port", "ring:"+id+".a", "--input", in, "--gw-mac", "0c:42:a1:00:00:01",
		"--ip", "10.0.0.7", "--base-per-flow")
	if code != 0 || out != "poll event 7: 10.0.0.1:49153 -> 10.0.0.9:4791 proto 17 rtt 16000 ns (base 5000 ns) sent true\n" ||
		!strings.Contains(errOut, "samples=2 polls=1 sent=1") {
		t.Fatalf("exit %d: %q %q", code, out, errOut)
	}
	pkts := make([]*dpdk.Packet, 2)
	if n := peer.RxBurst(0, pkts); n != 1 || pkts[0].Data()[0] != 0x0c || pkts[0].Data()[5] != 0x01 {
		t.Fatalf("%d frames", n)
	}
	pkts[0].Free()
	if code, _, errOut := runCLI(t, "hawkeye", "agent", "--ping", "x", "--input", "f"); code != 2 || !strings.Contains(errOut, "give one") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

// TestHawkeyeAgentFabricBase: by default every flow's base is the fabric's
// largest RTT without queues, the evaluation's (6 links of 2 us at 100
// Gbit/s: 24571 ns), so 16 us after 5 us is no anomaly and 80 us is
// (over 300%); --hops and the links change it; bad values name the flag.
func TestHawkeyeAgentFabricBase(t *testing.T) {
	in := filepath.Join(t.TempDir(), "rtt.txt")
	if err := os.WriteFile(in, []byte("10.0.0.1:49153 10.0.0.9:4791 5000\n10.0.0.1:49153 10.0.0.9:4791 16000\n10.0.0.2:49153 10.0.0.9:4791 80000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "hawkeye", "agent", "--input", in, "--ip", "10.0.0.7")
	if code != 0 || out != "poll event 7: 10.0.0.2:49153 -> 10.0.0.9:4791 proto 17 rtt 80000 ns (base 24571 ns) sent false\n" {
		t.Fatalf("exit %d: %q %q", code, out, errOut)
	}
	// Two links (hosts on one switch): 8190 ns, so 16 us crosses 150%.
	code, out, errOut = runCLI(t, "hawkeye", "agent", "--input", in, "--ip", "10.0.0.7", "--hops", "2", "--threshold", "150")
	if code != 0 || !strings.Contains(out, "rtt 16000 ns (base 8190 ns)") || strings.Count(out, "\n") != 2 {
		t.Fatalf("--hops 2: exit %d: %q %q", code, out, errOut)
	}
	for _, bad := range [][]string{{"--hops", "0"}, {"--link-gbps", "0"}, {"--link-delay", "-1us"}, {"--base-rtt", "-1us"},
		{"--base-rtt", "5us", "--base-per-flow"}} {
		code, _, errOut := runCLI(t, append([]string{"hawkeye", "agent", "--input", in}, bad...)...)
		if code != 2 || !strings.Contains(errOut, bad[0]) {
			t.Errorf("%v: exit %d: %s", bad, code, errOut)
		}
	}
}

// TestHawkeyeAgentPFCFlags: the PFC counters' flags are checked before
// anything opens, and a NIC whose driver has no PFC counters (here a veth
// in a namespace of the test's) is refused by name, not polled blind.
func TestHawkeyeAgentPFCFlags(t *testing.T) {
	in := filepath.Join(t.TempDir(), "rtt.txt")
	if err := os.WriteFile(in, []byte("10.0.0.1:49153 10.0.0.9:4791 5000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]string{{"--pfc-prio", "8"}, {"--pfc-interval", "10us"}, {"--pfc-netdev", "auto"}} {
		code, _, errOut := runCLI(t, append([]string{"hawkeye", "agent", "--input", in, "--pfc-netdev", "eth0"}, bad...)...)
		if code != 2 || !strings.Contains(errOut, bad[0]) {
			t.Errorf("%v: exit %d: %s", bad, code, errOut)
		}
	}
	pr := netns.TestPair(t, "hpf", 0)
	var code int
	var errOut string
	if err := netns.Do(pr.NSA, func() error {
		code, _, errOut = runCLI(t, "hawkeye", "agent", "--input", in, "--pfc-netdev", pr.IfA)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if code != 1 || !strings.Contains(errOut, pr.IfA+" has no PFC pause counters of priority 3") {
		t.Fatalf("veth: exit %d: %s", code, errOut)
	}
}
