package lumina

import (
	"context"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"testing"

	"github.com/rdma-appliance/appliance/collector/luminaanalyzer"
	"github.com/rdma-appliance/appliance/dumper/pcap"
	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// cnpTableTest is Lumina's §6.4 setting (Tables 3 and 4) as a test file:
// the ready-made CNP test's file with three connections from three
// requester GIDs to one responder, one 1 MB WRITE each, the 50th and 950th
// packets of each ECN-marked, min-time-between-cnps 50 us, DCQCN's
// reaction off, both NICs of type nic.
func cnpTableTest(t *testing.T, nic string) *Test {
	t.Helper()
	ev := "  data-pkt-events:\n"
	for q := range 3 {
		ev += fmt.Sprintf("    - {qpn: %d, psn: 49, type: ecn, iter: 1}\n    - {qpn: %d, psn: 949, type: ecn, iter: 1}\n", q, q)
	}
	return editedReady(t, "cnp-pacing.yml", "cnp-table.yml", append([][2]string{
		{`(?s)  data-pkt-events:.*`, ev},
		{`num-msgs-per-qp: \d+`, "num-msgs-per-qp: 1"},
		{`message-size: \d+`, "message-size: 1048576"},
		{`min-time-between-cnps: \d+`, "min-time-between-cnps: 50"}}, paperNIC(nic)...)...)
}

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
			rep, _ := runTwin(t, cnpTableTest(t, nic), nil)
			if !rep.Valid || rep.Traffic != "ok" {
				t.Fatalf("repeat %+v", rep)
			}
			r, err := luminaanalyzer.AnalyzeDir(context.Background(), rep.Dir)
			if err != nil {
				t.Fatal(err)
			}
			cnps := map[uint32]int64{}
			for _, q := range r.CNP.ByQP {
				cnps[q.QPN] = q.CNPs
			}
			marks := ecnMarks(t, filepath.Join(rep.Dir, "trace.pcap"))
			if len(marks) != 6 {
				t.Fatalf("%d ECN-marked packets, want 6", len(marks))
			}
			// The paper's QP1..QP3 are the QPs in the order of their first
			// marks.
			var order []uint32
			for _, m := range marks[:3] {
				order = append(order, m.qpn)
			}
			var got [3]int64
			var first, second [3]float64
			for i, q := range order {
				got[i] = cnps[q]
				first[i] = marks[i].us
				for _, m := range marks[3:] {
					if m.qpn == q {
						second[i] = m.us
					}
				}
			}
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

// mark is an ECN-marked packet: its time from the trace's first packet
// and the QP it is for.
type mark struct {
	us  float64
	qpn uint32
}

// ecnMarks lists the ECN-marked packets of a trace in its order.
func ecnMarks(t *testing.T, path string) []mark {
	t.Helper()
	rd, err := pcap.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var rec pcap.Record
	var p roce.Packet
	var first int64
	var out []mark
	for {
		if err := rd.Next(&rec); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if first == 0 {
			first = rec.Timestamp
		}
		if roce.ParseTruncated(rec.Data, roce.UDPPort, &p) != nil {
			continue
		}
		np := p.Net
		if m, err := mirror.Read(rec.Data, &np); err == nil && m.Event == mirror.EventECN {
			out = append(out, mark{float64(rec.Timestamp-first) / 1e3, p.DestQP})
		}
	}
	return out
}
