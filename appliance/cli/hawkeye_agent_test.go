package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/translator/hawkeye"
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
		h, ok := hawkeye.ParseFrame(p.Data())
		if !ok || p.Len() != 60 || h.Type() != hawkeye.TypeFlow || h.Event() != uint8(1+i) || h.Victim().Dport != 4791 {
			t.Fatalf("frame %d: %x", i, p.Data())
		}
		if d := p.Data(); d[0] != 0x0c || d[5] != 0x01 {
			t.Fatalf("frame %d to %x", i, d[:6])
		}
		p.Free()
	}
}
