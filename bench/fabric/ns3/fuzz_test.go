package ns3

import (
	"strings"
	"testing"
)

// FuzzParseReport: ns-3's output (a subprocess's word) gives a report of
// counts or an error naming ns3, never a panic.
func FuzzParseReport(f *testing.F) {
	f.Add("noise\nns3 k=4 hosts=16 flows=3 sim_ns=1000000 rx_packets=1330 hops=7980 rx_bytes=1250000 setup_ns=38 wall_ns=2000000\n")
	for _, bad := range []string{"", "ns3 sim_ns=1", "ns3 sim_ns=x rx_packets=1 hops=1 wall_ns=1", "ns3 junk", "ns3 flows=-1"} {
		f.Add(bad)
	}
	f.Fuzz(func(t *testing.T, out string) {
		r, err := parseReport(out)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "ns3: ") {
				t.Fatalf("error names not ns3: %v", err)
			}
			return
		}
		if r.SimNs < 0 || r.Packets < 0 || r.Hops < 0 || r.Wall < 0 || r.Setup < 0 || r.Flows < 0 || r.RxBytes < 0 {
			t.Fatalf("a negative count: %+v", r)
		}
		_ = r.HopsPerSec()
	})
}
