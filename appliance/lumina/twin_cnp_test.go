package lumina

import (
	"context"
	"math"
	"testing"
)

// TestTwinCNPTables runs Lumina's Tables 3 and 4 on the twin: the times of
// the ECN-marked packets (from the first packet of the trace) and the CNPs
// each responder QP sends. Table 4 is the pacing scope: CX6 paces per
// port, so only the QP whose mark comes first draws CNPs (the paper's QP1:
// 2, 0, 0); CX4 and CX5 per destination IP, so each QP gets its two.
// Table 3's second marks come from the three QPs sharing the link: about
// 250 us at 100 Gbit/s on CX5 and CX6, about 630 us on the CX4 testbed's
// 40 Gbit/s (checked within 10%). The first marks are logged, not checked:
// the paper's are spread wider than the twin's equal shares (8/17/18 us on
// CX5 against 12.6/13.1/13.8; 10/31/45 on CX4 against 32-34), its QP1
// ahead at both marks, as when the QPs did not start together; the paper
// gives no start offsets, and offsets fitted to this table would not be a
// model of anything it describes.
func TestTwinCNPTables(t *testing.T) {
	paper1st := map[string][3]float64{"CX4": {10, 31, 45}, "CX5": {8, 17, 18}, "CX6": {9, 16, 17}}
	paper2nd := map[string][3]float64{"CX4": {616, 630, 643}, "CX5": {246, 255, 258}, "CX6": {246, 254, 259}}
	for _, nic := range []string{"CX4", "CX5", "CX6"} {
		t.Run(nic, func(t *testing.T) {
			tab, err := RunCNPTable(context.Background(), t.TempDir(), nic)
			if err != nil {
				t.Fatal(err)
			}
			got, first, second := tab.CNPs, tab.First, tab.Second
			want := [3]int64{2, 2, 2}
			if nic == "CX6" {
				want = [3]int64{2, 0, 0}
			}
			t.Logf("%s: CNPs of QP1-3 %v (paper %v); 1st ECN at %.1f us (paper's %v), 2nd at %.1f us (paper's %v)",
				nic, got, want, first, paper1st[nic], second, paper2nd[nic])
			if got != want {
				t.Errorf("CNPs of QP1-3 %v, paper %v", got, want)
			}
			for i := range 3 {
				if p := paper2nd[nic][i]; math.Abs(second[i]-p) > 0.1*p {
					t.Errorf("QP%d's second mark at %.1f us, paper %g us", i+1, second[i], p)
				}
			}
		})
	}
}
