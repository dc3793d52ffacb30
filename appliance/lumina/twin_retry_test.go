package lumina

import (
	"context"
	"fmt"
	"testing"

	"github.com/rdma-appliance/appliance/collector/luminaanalyzer"
)

// TestTwinTable2 runs the first column of Lumina's Table 2 on the twin:
// one 8 KB WRITE whose tail packet is dropped on every transmission until
// the requester gives up, in non-adaptive mode (7 retries, retry_cnt, on
// every NIC) and adaptive mode (13 for the first message on CX4, CX5 and
// CX6). The drops are intents on the tail's first n transmissions, n the
// paper's count plus one: a NIC that gave up earlier leaves intents unfired
// (an invalid run), one that retried more completes the message. The
// later messages' columns (8, then 7 or 8) are not reproduced: Lumina's
// test format drops the same packets of every message, and the soft RNIC
// grants every later message 8.
func TestTwinTable2(t *testing.T) {
	for _, adaptive := range []bool{false, true} {
		for _, nic := range []string{"CX4", "CX5", "CX6"} {
			want := 7
			if adaptive {
				want = 13
			}
			t.Run(fmt.Sprintf("%s/adaptive=%v", nic, adaptive), func(t *testing.T) {
				ev := "  data-pkt-events:\n"
				for it := 1; it <= want+1; it++ {
					ev += fmt.Sprintf("    - {qpn: 0, psn: 7, type: drop, iter: %d}\n", it)
				}
				tt := editedReady(t, "timeout-retries.yml", "table2.yml",
					[2]string{`(?s)  data-pkt-events:.*`, ev},
					[2]string{`adaptive-retrans: false`, fmt.Sprintf("adaptive-retrans: %v", adaptive)},
					[2]string{`type: CX5`, "type: " + nic})
				rep, _ := runTwin(t, tt, nil)
				if !rep.Valid {
					t.Fatalf("repeat %+v", rep)
				}
				r, err := luminaanalyzer.AnalyzeDir(context.Background(), rep.Dir)
				if err != nil {
					t.Fatal(err)
				}
				if len(r.Timeouts.Messages) != 1 {
					t.Fatalf("timeout records %+v", r.Timeouts.Messages)
				}
				m := r.Timeouts.Messages[0]
				t.Logf("%s adaptive=%v: %d retries, gave up %v (paper %d)", nic, adaptive, m.MaxRetries, m.GaveUp, want)
				if !m.GaveUp || m.MaxRetries != want {
					t.Errorf("%d retries, gave up %v: the paper's %s retries %d times and gives up", m.MaxRetries, m.GaveUp, nic, want)
				}
			})
		}
	}
}
