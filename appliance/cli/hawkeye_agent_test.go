package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
)

// TestHawkeyeAgent: RTT lines over the threshold become polling frames on
// the port (read back from the ring's other end) and printed polls; bad
// lines are skipped.
func TestHawkeyeAgent(t *testing.T) {
	const id = "hawkeye-agent-test"
	peer := ring.Named(id, ring.Config{}).B()
	in := filepath.Join(t.TempDir(), "rtt.txt")
	lines := `# flow a
10.0.0.1 10.0.0.9 17 49153 4791 5000
10.0.0.1 10.0.0.9 17 49153 4791 14000
10.0.0.1 10.0.0.9 17 49153 4791 16000
10.0.0.1:49153 10.0.0.9:4791 20000
10.0.0.2:50000 10.0.0.9:4791 4000
10.0.0.2:50000 10.0.0.9:4791 13000
garbage line
`
	if err := os.WriteFile(in, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "hawkeye", "agent", "--port", "ring:"+id+".a", "--input", in, "--gw-mac", "0c:42:a1:00:00:01",
		"--ip", "10.0.0.1", "--interval", "1h")
	if code != 0 {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	// 16000 > 3 x 5000 polls flow a; 20000 is within the interval;
	// 13000 > 3 x 4000: flow b polls too.
	if n := strings.Count(out, "poll event"); n != 2 || !strings.Contains(out, "poll event 1: 10.0.0.1:49153 -> 10.0.0.9:4791") ||
		!strings.Contains(out, "poll event 2: 10.0.0.2:50000") || !strings.Contains(errOut, "bad RTT sample") {
		t.Fatalf("out %q err %q", out, errOut)
	}
	pkts := make([]*dpdk.Packet, 8)
	n := peer.RxBurst(0, pkts)
	if n != 2 {
		t.Fatalf("%d frames on the port", n)
	}
	for i, p := range pkts[:n] {
		h, ok := hawkeyewire.ParseFrame(p.Data())
		if !ok || p.Len() != 60 || h.Type() != hawkeyewire.TypeFlow || h.Event() != uint8(1+i) || h.Victim().Dport != 4791 {
			t.Fatalf("frame %d: %x", i, p.Data())
		}
		if d := p.Data(); d[0] != 0x0c || d[5] != 0x01 {
			t.Fatalf("frame %d to %x", i, d[:6])
		}
		p.Free()
	}
}

// TestHawkeyeAgentHostmesh: Hostmesh batches are samples too: a probe
// 5-tuple whose one-way latency jumps is polled; timeouts are not
// samples; a malformed batch is counted and skipped.
func TestHawkeyeAgentHostmesh(t *testing.T) {
	in := filepath.Join(t.TempDir(), "mesh.jsonl")
	lines := `{"host":"h1","results":[{"host":"h1","src":"rnic0","dst":"rnic1","src_ip":"10.1.0.1","dst_ip":"10.1.1.1","sport":49200,"seq":1,"at_ns":1,"network_ns":3000,"processing_ns":900}]}
{"host":"h1","results":[{"host":"h1","src":"rnic0","dst":"rnic1","src_ip":"10.1.0.1","dst_ip":"10.1.1.1","sport":49200,"seq":2,"at_ns":2,"timeout":true}]}
{"host":"h1","results":[{"host":"h1","src":"rnic0","dst":"rnic1","src_ip":"10.1.0.1","dst_ip":"10.1.1.1","sport":49200,"seq":3,"at_ns":3,"network_ns":12000,"processing_ns":900}]}
{"host":"h1","results":[{"src_ip":"fe80::1","dst_ip":"10.1.1.1","network_ns":5}]}
{"host":
`
	if err := os.WriteFile(in, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "hawkeye", "agent", "--input", in, "--interval", "1h")
	if code != 0 {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	if n := strings.Count(out, "poll event"); n != 1 || !strings.Contains(out, "10.1.0.1:49200 -> 10.1.1.1:4791 proto 17 rtt 12000 ns (base 3000 ns)") {
		t.Fatalf("out %q", out)
	}
	if strings.Count(errOut, "bad Hostmesh batch") != 2 {
		t.Fatalf("err %q", errOut)
	}
}

// TestHawkeyeAgentPing: the agent measures RTTs itself with RDMA READs
// (here between two software RNICs in the process): every ping is a
// sample of the QP's 5-tuple, and a flow over the threshold is polled.
func TestHawkeyeAgentPing(t *testing.T) {
	code, out, errOut := runCLI(t, "hawkeye", "agent", "--ping", "loopback", "--ping-count", "50", "--ping-interval", "1ms",
		"--threshold", "100", "--interval", "1h", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	var p agentPoll
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("%v: %q", err, out)
	}
	v := p.Victim
	if ip4(v.Src).String() != "192.168.77.2" || ip4(v.Dst).String() != "192.168.77.1" || v.Dport != 4791 || v.Sport < 0xc000 ||
		p.RTT <= p.Base || p.Base <= 0 {
		t.Fatalf("poll %+v", p)
	}
	if !strings.Contains(errOut, "samples=50") {
		t.Fatalf("err %q", errOut)
	}
	if code, _, errOut := runCLI(t, "hawkeye", "agent", "--ping", "x", "--input", "f"); code != 2 || !strings.Contains(errOut, "give one") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}
