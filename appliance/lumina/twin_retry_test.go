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
// later columns: TestTwinTable2Messages.
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
				tt := editedReady(t, "timeout-retries.yml", "table2.yml", append([][2]string{
					{`(?s)  data-pkt-events:.*`, ev},
					{`adaptive-retrans: false`, fmt.Sprintf("adaptive-retrans: %v", adaptive)}}, paperNIC(nic)...)...)
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

// paperTable2 is Lumina's Table 2: the most retries of messages 1-5 (five
// 10 KB WRITEs on one connection, retry_cnt 7) in adaptive mode.
var paperTable2 = map[string][5]int{
	"CX4": {13, 8, 7, 7, 7},
	"CX5": {13, 8, 8, 8, 8},
	"CX6": {13, 8, 8, 8, 8},
}

// TestTwinTable2Messages runs every column of Lumina's Table 2 on the twin
// in the paper's setting: one connection, five 10 KB WRITEs, timeout 14,
// retry_cnt 7, the tail (tenth) packet dropped. A QP that gives up is in
// the error state and flushes the messages behind it, so message k gives
// up in a run of its own: the tails of messages 1..k-1 are dropped 7 times
// each (Figure 12's setting: they are delivered on their last retry) and
// message k's on every transmission until the QP gives up. Lumina's
// format names message k's tail by its PSN from the connection's start
// (10k-1), its rounds by ITER, which counts every round of the
// connection: message k's first transmission is in round 7(k-1)+1. As in
// TestTwinTable2 the drops are the paper's count plus one: a NIC that gave
// up earlier leaves intents unfired, one that retried more completes.
func TestTwinTable2Messages(t *testing.T) {
	for _, adaptive := range []bool{false, true} {
		for _, nic := range []string{"CX4", "CX5", "CX6"} {
			var got [5]int
			for k := 1; k <= 5; k++ {
				want := 7
				if adaptive {
					want = paperTable2[nic][k-1]
				}
				ev := "  data-pkt-events:\n"
				for m := 1; m < k; m++ {
					for r := 1; r <= 7; r++ {
						ev += fmt.Sprintf("    - {qpn: 0, psn: %d, type: drop, iter: %d}\n", 10*m-1, 7*(m-1)+r)
					}
				}
				for r := 1; r <= want+1; r++ {
					ev += fmt.Sprintf("    - {qpn: 0, psn: %d, type: drop, iter: %d}\n", 10*k-1, 7*(k-1)+r)
				}
				tt := editedReady(t, "timeout-retries.yml", "table2.yml", append([][2]string{
					{`(?s)  data-pkt-events:.*`, ev},
					{`num-msgs-per-qp: \d+`, "num-msgs-per-qp: 5"},
					{`message-size: \d+`, "message-size: 10240"},
					{`min-retransmit-timeout: \d+`, "min-retransmit-timeout: 14"},
					{`adaptive-retrans: false`, fmt.Sprintf("adaptive-retrans: %v", adaptive)}}, paperNIC(nic)...)...)
				rep, _ := runTwin(t, tt, nil)
				if !rep.Valid {
					t.Fatalf("%s adaptive=%v message %d: repeat %+v", nic, adaptive, k, rep)
				}
				r, err := luminaanalyzer.AnalyzeDir(context.Background(), rep.Dir)
				if err != nil {
					t.Fatal(err)
				}
				if len(r.Timeouts.Messages) != k {
					t.Fatalf("%s adaptive=%v message %d: timeout records %+v", nic, adaptive, k, r.Timeouts.Messages)
				}
				for _, m := range r.Timeouts.Messages[:k-1] {
					if m.GaveUp || m.MaxRetries != 7 {
						t.Errorf("%s adaptive=%v run %d: message %d retried %d times (gave up %v), Figure 12's 7 drops then delivered were asked",
							nic, adaptive, k, m.Message+1, m.MaxRetries, m.GaveUp)
					}
				}
				m := r.Timeouts.Messages[k-1]
				got[k-1] = m.MaxRetries
				if !m.GaveUp || m.MaxRetries != want {
					t.Errorf("%s adaptive=%v message %d: %d retries, gave up %v; the paper's %s retries %d times and gives up",
						nic, adaptive, k, m.MaxRetries, m.GaveUp, nic, want)
				}
			}
			t.Logf("%s adaptive=%v: retries of messages 1-5 %v", nic, adaptive, got)
		}
	}
}
