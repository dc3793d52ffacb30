package lumina

// The paper's settings on the twin. Lumina's §6 runs each figure and
// table in a setting of its own (one connection and one dropped packet for
// Figures 8-10, five messages with their tails dropped for Table 2, three
// QPs with two marks each for Tables 3 and 4). Here each setting is a
// ready-made test file with the paper's edits, run on the virtual testbed
// and read back with the analyzer, as a user would read a run; the twin's
// tests assert on these measurements and `lumina paper` writes them as
// one HTML page per figure.

import (
	"context"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"regexp"

	"github.com/rdma-appliance/appliance/collector/luminaanalyzer"
	"github.com/rdma-appliance/appliance/dumper/pcap"
	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// PaperNICs are the NICs of the paper's testbeds.
var PaperNICs = []string{"CX4", "CX5", "CX6"}

// EditedReadyMade is a ready-made test with edits applied, each a regular
// expression and its replacement, decoded under name: the paper's
// settings written as Lumina's test files.
func EditedReadyMade(file, name string, edits ...[2]string) (*Test, error) {
	b, err := readyFS.ReadFile(path.Join("testdata/tests", file))
	if err != nil {
		return nil, err
	}
	s := string(b)
	for _, e := range edits {
		s = regexp.MustCompile(e[0]).ReplaceAllString(s, e[1])
	}
	return DecodeTest(name, []byte(s))
}

// PaperNIC edits a ready-made file's NICs to the paper's nic, on the link
// speed of that NIC's testbed (Lumina §6: a ConnectX-4 Lx MCX4131A 40GbE,
// a ConnectX-5 MCX515A 100GbE and a ConnectX-6 Dx MCX623105AN 100GbE;
// Lumina's port-speed is the switch ports', so a CX4 testbed runs at 40G).
func PaperNIC(nic string) [][2]string {
	speed := "100G"
	if nic == "CX4" {
		speed = "40G"
	}
	return [][2]string{{`type: CX5`, "type: " + nic}, {`port-speed: \w+`, "port-speed: " + speed}}
}

// OneDropTest is the paper's §6.2 setting (Figures 8-10): one connection,
// one WRITE of size bytes, packet psn (from 0) dropped, both NICs of type
// nic on its testbed's links.
func OneDropTest(nic string, size, psn int) (*Test, error) {
	return EditedReadyMade("fast-retrans-20k.yml", "one-drop.yml", append([][2]string{
		{`(?s)  data-pkt-events:.*`, fmt.Sprintf("  data-pkt-events:\n    - {qpn: 0, psn: %d, type: drop, iter: 1}\n", psn)},
		{`num-qps: \d+`, "num-qps: 1"},
		{`message-size: \d+`, fmt.Sprintf("message-size: %d", size)}}, PaperNIC(nic)...)...)
}

// CNPTableTest is the paper's §6.4 setting (Tables 3 and 4): three
// connections from three requester GIDs to one responder, one 1 MB WRITE
// each, the 50th and 950th packets of each ECN-marked,
// min-time-between-cnps 50 us, DCQCN's reaction off.
func CNPTableTest(nic string) (*Test, error) {
	ev := "  data-pkt-events:\n"
	for q := range 3 {
		ev += fmt.Sprintf("    - {qpn: %d, psn: 49, type: ecn, iter: 1}\n    - {qpn: %d, psn: 949, type: ecn, iter: 1}\n", q, q)
	}
	return EditedReadyMade("cnp-pacing.yml", "cnp-table.yml", append([][2]string{
		{`(?s)  data-pkt-events:.*`, ev},
		{`num-msgs-per-qp: \d+`, "num-msgs-per-qp: 1"},
		{`message-size: \d+`, "message-size: 1048576"},
		{`min-time-between-cnps: \d+`, "min-time-between-cnps: 50"}}, PaperNIC(nic)...)...)
}

// CNPPacingTest is the ready-made cnp-pacing test (every packet
// ECN-marked, min-time-between-cnps 100 us, the requesters' DCQCN off) on
// four QPs whose addresses group them three ways: the requester has two
// addresses and the responder four, so QP i runs from requester address
// i mod 2 to responder address i. The port holds all four, the data
// senders (the CNPs' destinations) two pairs of them, the IP pairs one
// each, and Lumina's CNP check expects a different count of CNPs under
// each pacing mode. Both NICs are of type nic. With losses, QP 1's 11th
// and QP 2's 501st packets are dropped and slow restart is on, so a
// ConnectX-5 or 6 sends a CNP with each NAK (paced like the others).
func CNPPacingTest(nic string, msgs int, losses bool) (*Test, error) {
	ev := "  data-pkt-events:\n"
	for q := range 4 {
		ev += fmt.Sprintf("    - {qpn: %d, psn: all, type: ecn, iter: 1}\n", q)
	}
	edits := [][2]string{
		{`(?s)  data-pkt-events:.*`, ev},
		{`ip-list: \[10\.0\.0\.1, 10\.0\.0\.2, 10\.0\.0\.3\]`, "ip-list: [10.0.0.1, 10.0.0.2]"},
		{`ip-list: \[10\.0\.1\.1\]`, "ip-list: [10.0.1.1, 10.0.1.2, 10.0.1.3, 10.0.1.4]"},
		{`num-qps: \d+`, "num-qps: 4"},
		{`num-msgs-per-qp: \d+`, fmt.Sprintf("num-msgs-per-qp: %d", msgs)}}
	if losses {
		edits[0][1] += "    - {qpn: 1, psn: 10, type: drop, iter: 1}\n    - {qpn: 2, psn: 500, type: drop, iter: 1}\n"
		edits = append(edits, [2]string{`slow-restart: false`, "slow-restart: true"})
	}
	if nic == "E810" {
		// The key Lumina's host code and test_cnp read on an E810, its
		// one DCQCN switch: on at the responder (the notification
		// point), off at the requester, whose reaction the setting
		// turns off.
		edits = append(edits,
			[2]string{`(?s)(\nrequester:\n.*?  roce-parameters:\n)`, "${1}    dcqcn-enable: false\n"},
			[2]string{`(?s)(\nresponder:\n.*?  roce-parameters:\n)`, "${1}    dcqcn-enable: true\n"})
	}
	return EditedReadyMade("cnp-pacing.yml", "cnp-pacing-4qp.yml", append(edits, PaperNIC(nic)...)...)
}

// RunLuminaCNP runs CNPPacingTest on the twin and returns Lumina's CNP
// check of its trace.
func RunLuminaCNP(ctx context.Context, dir, nic string, msgs int, losses bool) (*luminaanalyzer.LuminaCNP, error) {
	tt, err := CNPPacingTest(nic, msgs, losses)
	if err != nil {
		return nil, err
	}
	rep, _, err := RunTwin(ctx, tt, dir)
	if err != nil {
		return nil, err
	}
	if rep.Traffic != "ok" {
		return nil, fmt.Errorf("lumina: %s: traffic %s", nic, rep.Traffic)
	}
	return luminaanalyzer.LuminaCNPCheckDir(ctx, rep.Dir)
}

// Table2Test is the paper's §6.3 setting for Table 2's column k (from 1):
// one connection, five 10 KB WRITEs, timeout 14, retry_cnt 7. A QP that
// gives up is in the error state and flushes the messages behind it, so
// message k gives up in a run of its own: the tails of messages 1..k-1
// are dropped 7 times each (Figure 12's setting: delivered on their last
// retry) and message k's on its first drops transmissions. Lumina's
// format names message k's tail by its PSN from the connection's start
// (10k-1) and its rounds by ITER, which counts every round of the
// connection: message k's first transmission is in round 7(k-1)+1.
func Table2Test(nic string, adaptive bool, k, drops int) (*Test, error) {
	ev := "  data-pkt-events:\n"
	for m := 1; m < k; m++ {
		for r := 1; r <= 7; r++ {
			ev += fmt.Sprintf("    - {qpn: 0, psn: %d, type: drop, iter: %d}\n", 10*m-1, 7*(m-1)+r)
		}
	}
	for r := 1; r <= drops; r++ {
		ev += fmt.Sprintf("    - {qpn: 0, psn: %d, type: drop, iter: %d}\n", 10*k-1, 7*(k-1)+r)
	}
	return EditedReadyMade("timeout-retries.yml", "table2.yml", append([][2]string{
		{`(?s)  data-pkt-events:.*`, ev},
		{`num-msgs-per-qp: \d+`, "num-msgs-per-qp: 5"},
		{`message-size: \d+`, "message-size: 10240"},
		{`min-retransmit-timeout: \d+`, "min-retransmit-timeout: 14"},
		{`adaptive-retrans: false`, fmt.Sprintf("adaptive-retrans: %v", adaptive)}}, PaperNIC(nic)...)...)
}

// RunTwin runs a test once on the virtual testbed, its results under dir,
// and returns the repeat and the analyzer's report of its trace; an
// invalid repeat (a broken trace, an intent that did not fire as asked)
// is an error, since nothing may be read from it.
func RunTwin(ctx context.Context, tt *Test, dir string) (RepeatResult, *luminaanalyzer.Report, error) {
	tt.Spec.ResultPath = dir
	tt.Spec.NumRepeats = 1
	sum, err := (&Runner{Test: tt, Lab: true}).Run(ctx)
	if err != nil {
		return RepeatResult{}, nil, err
	}
	rep := sum.Repeats[0]
	if !rep.Valid {
		return rep, nil, fmt.Errorf("lumina: invalid repeat in %s: integrity %s, events %s", rep.Dir, rep.Integrity, rep.Events)
	}
	r, err := luminaanalyzer.AnalyzeDir(ctx, rep.Dir)
	return rep, r, err
}

// NACKSample runs Figures 8/9's setting once and returns the NACK
// generation and reaction latencies the analyzer reads, in microseconds.
func NACKSample(ctx context.Context, dir, nic string, size, psn int) (gen, react float64, err error) {
	tt, err := OneDropTest(nic, size, psn)
	if err != nil {
		return 0, 0, err
	}
	_, r, err := RunTwin(ctx, tt, dir)
	if err != nil {
		return 0, 0, err
	}
	if len(r.Retransmission.NACK) != 1 || r.Retransmission.NACK[0].ReactionNs < 0 {
		return 0, 0, fmt.Errorf("lumina: %s %d bytes psn %d: NACK records %+v", nic, size, psn, r.Retransmission.NACK)
	}
	n := r.Retransmission.NACK[0]
	return float64(n.GenerationNs) / 1e3, float64(n.ReactionNs) / 1e3, nil
}

// RetransLatency runs Figure 10(a)'s setting (the fifth packet dropped)
// and returns the retransmission latency of its one NAK (first
// out-of-order packet to the retransmission, at the switch) in
// microseconds.
func RetransLatency(ctx context.Context, dir, nic string, size int) (float64, error) {
	tt, err := OneDropTest(nic, size, 4)
	if err != nil {
		return 0, err
	}
	_, r, err := RunTwin(ctx, tt, dir)
	if err != nil {
		return 0, err
	}
	if len(r.Retransmission.NACK) != 1 || r.Retransmission.NACK[0].TotalNs < 0 {
		return 0, fmt.Errorf("lumina: %d bytes: NACK records %+v", size, r.Retransmission.NACK)
	}
	return float64(r.Retransmission.NACK[0].TotalNs) / 1e3, nil
}

// MCT runs one CX6 WRITE of size bytes with an event of type ev ("drop"
// or "ecn") on its fifth packet and returns its completion time as the
// traffic generator measured it (Figure 10(b)), in microseconds of
// virtual time.
func MCT(ctx context.Context, dir string, size int, ev string) (float64, error) {
	tt, err := EditedReadyMade("fast-retrans-20k.yml", "fig10b.yml", append([][2]string{
		{`(?s)  data-pkt-events:.*`, "  data-pkt-events:\n    - {qpn: 0, psn: 4, type: " + ev + ", iter: 1}\n"},
		{`num-qps: \d+`, "num-qps: 1"},
		{`message-size: \d+`, fmt.Sprintf("message-size: %d", size)}}, PaperNIC("CX6")...)...)
	if err != nil {
		return 0, err
	}
	rep, _, err := RunTwin(ctx, tt, dir)
	if err != nil {
		return 0, err
	}
	if rep.Traffic != "ok" {
		return 0, fmt.Errorf("lumina: %d bytes, %s: traffic %s", size, ev, rep.Traffic)
	}
	m, err := luminaanalyzer.ReadMeta(rep.Dir)
	if err != nil {
		return 0, err
	}
	if len(m.MCT) != 1 || len(m.MCT[0]) != 1 {
		return 0, fmt.Errorf("lumina: MCTs %v", m.MCT)
	}
	return float64(m.MCT[0][0]) / 1e3, nil
}

// CNPTable is one NIC's Tables 3 and 4 on the twin: per QP, in the order
// of their first marks (the paper's QP1-3), the CNPs it drew and the times
// of its two marks from the trace's first packet, in microseconds.
type CNPTable struct {
	CNPs          [3]int64
	First, Second [3]float64
}

// RunCNPTable runs Tables 3 and 4's setting for nic.
func RunCNPTable(ctx context.Context, dir, nic string) (CNPTable, error) {
	var out CNPTable
	tt, err := CNPTableTest(nic)
	if err != nil {
		return out, err
	}
	rep, r, err := RunTwin(ctx, tt, dir)
	if err != nil {
		return out, err
	}
	if rep.Traffic != "ok" {
		return out, fmt.Errorf("lumina: %s: traffic %s", nic, rep.Traffic)
	}
	cnps := map[uint32]int64{}
	for _, q := range r.CNP.ByQP {
		cnps[q.QPN] = q.CNPs
	}
	marks, err := ecnMarks(filepath.Join(rep.Dir, tt.Spec.AggregatePcapFilename))
	if err != nil {
		return out, err
	}
	if len(marks) != 6 {
		return out, fmt.Errorf("lumina: %s: %d ECN-marked packets, want 6", nic, len(marks))
	}
	for i, m := range marks[:3] {
		out.CNPs[i], out.First[i] = cnps[m.qpn], m.us
		for _, s := range marks[3:] {
			if s.qpn == m.qpn {
				out.Second[i] = s.us
			}
		}
	}
	return out, nil
}

// mark is an ECN-marked packet: its time from the trace's first packet
// and the QP it is for.
type mark struct {
	us  float64
	qpn uint32
}

// ecnMarks lists the ECN-marked packets of a trace in its order.
func ecnMarks(file string) ([]mark, error) {
	rd, err := pcap.Open(file)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	var rec pcap.Record
	var p roce.Packet
	var first int64
	var out []mark
	for {
		if err := rd.Next(&rec); err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, err
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
}

// Table2Column is message k's outcome in Table 2's setting: the retries
// the analyzer counts for it and whether it gave up, and whether the
// messages before it went as asked (7 retries each, delivered).
type Table2Column struct {
	Retries int
	GaveUp  bool
	Before  string // "" when messages 1..k-1 went as asked
}

// RunTable2 runs Table 2's setting for message k with drops drops of its
// tail.
func RunTable2(ctx context.Context, dir, nic string, adaptive bool, k, drops int) (Table2Column, error) {
	var out Table2Column
	tt, err := Table2Test(nic, adaptive, k, drops)
	if err != nil {
		return out, err
	}
	_, r, err := RunTwin(ctx, tt, dir)
	if err != nil {
		return out, err
	}
	if len(r.Timeouts.Messages) != k {
		return out, fmt.Errorf("lumina: %s adaptive=%v message %d: timeout records %+v", nic, adaptive, k, r.Timeouts.Messages)
	}
	for _, m := range r.Timeouts.Messages[:k-1] {
		if m.GaveUp || m.MaxRetries != 7 {
			out.Before = fmt.Sprintf("message %d retried %d times (gave up %v)", m.Message+1, m.MaxRetries, m.GaveUp)
		}
	}
	m := r.Timeouts.Messages[k-1]
	out.Retries, out.GaveUp = m.MaxRetries, m.GaveUp
	return out, nil
}
