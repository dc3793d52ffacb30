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
					{`adaptive-retrans: false`, fmt.Sprintf("adaptive-retrans: %v", adaptive)}}, PaperNIC(nic)...)...)
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

// TestTwinTable2Messages runs every column of Lumina's Table 2 on the twin
// in the paper's setting (Table2Test: message k's tail dropped until the
// QP gives up, the tails before it 7 times each). As in TestTwinTable2 the
// drops are the paper's count plus one: a NIC that gave up earlier leaves
// intents unfired, one that retried more completes.
func TestTwinTable2Messages(t *testing.T) {
	for _, adaptive := range []bool{false, true} {
		for _, nic := range []string{"CX4", "CX5", "CX6"} {
			var got [5]int
			for k := 1; k <= 5; k++ {
				want := 7
				if adaptive {
					want = paperTable2[nic][k-1]
				}
				col, err := RunTable2(context.Background(), t.TempDir(), nic, adaptive, k, want+1)
				if err != nil {
					t.Fatalf("%s adaptive=%v message %d: %v", nic, adaptive, k, err)
				}
				if col.Before != "" {
					t.Errorf("%s adaptive=%v run %d: %s; Figure 12's 7 drops then delivered were asked", nic, adaptive, k, col.Before)
				}
				got[k-1] = col.Retries
				if !col.GaveUp || col.Retries != want {
					t.Errorf("%s adaptive=%v message %d: %d retries, gave up %v; the paper's %s retries %d times and gives up",
						nic, adaptive, k, col.Retries, col.GaveUp, nic, want)
				}
			}
			t.Logf("%s adaptive=%v: retries of messages 1-5 %v", nic, adaptive, got)
		}
	}
}
