package lumina

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/rdma-appliance/appliance/collector/luminaanalyzer"
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

// TestTwinLuminaCNPCheck runs Lumina's own CNP check (test_cnp's expected
// counts per port, per IP pair and per destination IP, derived from the
// switch's timestamps of the triggers and the 100 us interval) on twin runs
// of a setting whose addresses group the QPs three ways. Each NIC must pass
// exactly the mode the paper and Lumina's code give it: CX6 per port, CX4
// and CX5 per destination IP (§6.4, Table 4); an E810, which Lumina checks
// with no interval, every mode, since every mark must draw a CNP. Fifty
// 20 KB messages per QP (4000 marks, several intervals) keep the run
// short. With losses, two NAKs join the marks; with slow restart on they
// count as triggers on CX5 and CX6 (Lumina's NACK_TRIGGER_CNP), not on CX4
// and E810.
func TestTwinLuminaCNPCheck(t *testing.T) {
	want := map[string][]string{
		"CX4":  {luminaanalyzer.ScopeDestIP},
		"CX5":  {luminaanalyzer.ScopeDestIP},
		"CX6":  {luminaanalyzer.ScopePort},
		"E810": {luminaanalyzer.ScopePort, luminaanalyzer.ScopeIPPair, luminaanalyzer.ScopeDestIP},
	}
	for _, losses := range []bool{false, true} {
		for _, nic := range []string{"CX4", "CX5", "CX6", "E810"} {
			name := nic
			if losses {
				name += "+losses"
			}
			t.Run(name, func(t *testing.T) {
				l, err := RunLuminaCNP(context.Background(), t.TempDir(), nic, 50, losses)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%s: %s", name, l)
				if got := l.Passing(); !slices.Equal(got, want[nic]) {
					t.Errorf("Lumina's check passes %v, want %v", got, want[nic])
				}
				g := l.Mode(luminaanalyzer.ScopePort).Groups[0]
				naks, trig := 0, false
				if losses {
					naks, trig = 2, nic == "CX5" || nic == "CX6"
				}
				if g.NACKs != naks || l.NACKTriggersCNP != trig || g.Expected < 2 {
					t.Errorf("port: %d NAKs (want %d), NAKs trigger CNPs %v (want %v), %d CNPs expected (want several intervals)",
						g.NACKs, naks, l.NACKTriggersCNP, trig, g.Expected)
				}
				// Without losses every packet is marked; with them a
				// QP's marks stop at its retransmission (round 2).
				if marks := 4 * 50 * 20; !losses && g.ECNs != marks || losses && (g.ECNs >= marks || g.ECNs < 2*50*20) {
					t.Errorf("port: %d marks", g.ECNs)
				}
				if nic == "E810" {
					// One DCQCN switch per E810: the responder's on, the
					// requester's off.
					tt, err := CNPPacingTest(nic, 50, losses)
					if err != nil {
						t.Fatal(err)
					}
					req, resp := tt.Spec.Requester.RoCEParameters.DCQCNEnable, tt.Spec.Responder.RoCEParameters.DCQCNEnable
					if req == nil || resp == nil || *req || !*resp {
						t.Errorf("E810 dcqcn-enable: requester %v, responder %v; want false, true", req, resp)
					}
				}
				if n := len(l.Mode(luminaanalyzer.ScopeIPPair).Groups); n != 4 || len(l.Mode(luminaanalyzer.ScopeDestIP).Groups) != 2 {
					t.Errorf("%d IP pairs and %d senders, want 4 and 2", n, len(l.Mode(luminaanalyzer.ScopeDestIP).Groups))
				}
			})
		}
	}
}
