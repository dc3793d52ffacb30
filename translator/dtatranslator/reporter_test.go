package dtatranslator

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/internal/dtawire"
)

// reporterLink is a reporter's link with nobody at the translator's end
// but the test: the far end reads what the reporter sends, and ack sends
// it the translator's answers.
type reporterLink struct {
	t             *testing.T
	near, far     dpdk.Port
	pool          *dpdk.Pool
	repMAC, trMAC header.MAC
	repIP, trIP   netip.Addr
}

func newReporterLink(t *testing.T, name string) *reporterLink {
	l := ring.NewLink(name, ring.Config{RingSize: 4096})
	pool, err := dpdk.NewPool(name, 8192, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.A().Close(); l.B().Close(); pool.Close() })
	return &reporterLink{t: t, near: l.A(), far: l.B(), pool: pool, repMAC: header.MAC{2, 0, 0, 0, 0, 2}, trMAC: header.MAC{2, 0, 0, 0, 0, 1},
		repIP: netip.MustParseAddr("10.9.0.10"), trIP: netip.MustParseAddr("10.9.0.100")}
}

// config is a reporter's configuration on the link.
func (l *reporterLink) config() ReporterConfig {
	return ReporterConfig{SrcMAC: l.repMAC, DstMAC: l.trMAC, SrcIP: l.repIP, DstIP: l.trIP}
}

// ack sends the reporter the translator's answers, in one burst.
func (l *reporterLink) ack(as ...dtawire.Ack) {
	var pkts []*dpdk.Packet
	for _, a := range as {
		var frame [128]byte
		n, err := WriteAckFrame(frame[:], l.trMAC, l.repMAC, l.trIP.As4(), l.repIP.As4(), dtawire.AckPort, a)
		if err != nil {
			l.t.Fatal(err)
		}
		pkt := l.pool.Get()
		pkt.CopyFrom(frame[:n])
		pkts = append(pkts, pkt)
	}
	for len(pkts) > 0 {
		n := l.far.TxBurst(0, pkts)
		pkts = pkts[n:]
		if n == 0 {
			time.Sleep(time.Millisecond)
		}
	}
}

// TestReporterHoldsHigh: with HighOnly, a full window holds back the
// high-priority reports alone: the low-priority ones all go out while
// nothing is acknowledged, the held ones wait in order, and an ACK
// releases them, numbered after the window, until every report is
// acknowledged.
func TestReporterHoldsHigh(t *testing.T) {
	name := fmt.Sprintf("hold%p", t)
	l := newReporterLink(t, name)
	pool := l.pool
	cfg := l.config()
	cfg.Keys, cfg.Redundancy, cfg.Count, cfg.Seed, cfg.HighShare = 100, 2, 400, 3, 0.5
	cfg.Mix.KeyWrite = 1
	// A reporter of the same seed that keeps nothing draws the same
	// priorities: how many of the 400 are high.
	dry := ring.NewLink(name+"d", ring.Config{RingSize: 4096})
	t.Cleanup(func() { dry.A().Close(); dry.B().Close() })
	d, err := NewReporter(cfg, dry.A(), pool)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Run(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	wantHigh := int(d.Stats.SentHigh)
	if wantHigh <= Window || wantHigh > 2*Window {
		t.Fatalf("seed 3 draws %d high-priority reports: want more than a window, at most two", wantHigh)
	}
	cfg.Retransmittable, cfg.HighOnly = true, true
	r, err := NewReporter(cfg, l.near, pool)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background(), 20*time.Second) }()

	// The translator's end: reports by priority, first transmissions of
	// each sequence number in the order they came.
	far := l.far
	rx := make([]*dpdk.Packet, 64)
	var p header.Parsed
	var rep dtawire.Report
	var format dtawire.Format
	var low int
	var order []uint8
	seen := map[uint8]bool{}
	read := func() {
		n := far.RxBurst(0, rx)
		for _, pkt := range rx[:n] {
			f := pkt.Data()
			if header.Decode(f, &p) != nil || format.Parse(p.Payload(f), &rep) != nil {
				t.Fatalf("not a report: %x", f)
			}
			high := int(p.IPv4(f).DSCP()) == HighDSCP
			switch {
			case high != rep.Retransmittable:
				t.Fatalf("high %v but numbered %v", high, rep.Retransmittable)
			case !high:
				low++
			case !seen[rep.Seq]:
				seen[rep.Seq] = true
				order = append(order, rep.Seq)
			}
		}
		dpdk.FreeBulk(rx[:n])
		if n == 0 {
			time.Sleep(100 * time.Microsecond)
		}
	}
	// Nothing acknowledged: a window of high-priority reports and every
	// low-priority one arrive.
	deadline := time.Now().Add(20 * time.Second)
	for len(order) < Window || low < 400-wantHigh {
		if time.Now().After(deadline) {
			t.Fatalf("with the window full: %d low-priority and %d high-priority reports arrived", low, len(order))
		}
		read()
	}
	for range 10 {
		read()
	}
	if len(order) != Window || low != 400-wantHigh {
		t.Fatalf("%d high-priority reports went past a full window of %d (%d low)", len(order), Window, low)
	}
	// Acknowledge everything as it comes until the reporter is done.
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			goto finished
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reporter did not finish: %d high-priority reports arrived", len(order))
		}
		read()
		if len(order) > 0 {
			l.ack(dtawire.Ack{Seq: order[len(order)-1]})
		}
		time.Sleep(time.Millisecond)
	}
finished:
	read()
	st := r.Stats
	if st.Unacknowledged != 0 || uint64(len(order)) != st.SentHigh || uint64(low) != st.Sent-st.SentHigh {
		t.Fatalf("arrived %d high, %d low; reporter %+v", len(order), low, st)
	}
	// Every high-priority report after the first window was held, but
	// those drawn after the first ACK (the reporter may still have been
	// drawing) may have found room.
	if st.SentHigh != uint64(wantHigh) || st.Held == 0 || st.Held > st.SentHigh-Window {
		t.Fatalf("held %d of %d high-priority reports (want %d, at most all after the first window)", st.Held, st.SentHigh, wantHigh)
	}
	for i, s := range order {
		if s != uint8(i) {
			t.Fatalf("high-priority report %d numbered %d: %v", i, s, order)
		}
	}
}

// sendTen runs a reporter of ten numbered Append reports on a link of
// its own, lingering that long for their ACKs (none comes unless the test
// sends it).
func sendTen(t *testing.T, name string, linger time.Duration) (*reporterLink, *Reporter) {
	l := newReporterLink(t, fmt.Sprintf("%s%p", name, t))
	cfg := l.config()
	cfg.Count, cfg.Retransmittable = 10, true
	cfg.Mix.Append, cfg.Lists = 1, []uint32{1}
	r, err := NewReporter(cfg, l.near, l.pool)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(context.Background(), linger); err != nil {
		t.Fatal(err)
	}
	return l, r
}

// answer sends the reporter the translator's answers and has it read
// them all.
func (l *reporterLink) answer(r *Reporter, as ...dtawire.Ack) {
	before := r.Stats.ACKs + r.Stats.NACKs
	l.ack(as...)
	for r.Stats.ACKs+r.Stats.NACKs < before+uint64(len(as)) {
		r.receive()
	}
}

// TestReporterNACKInFlight: the translator repeats a NACK while its gap
// stands; a resend from that number already on its way is not sent
// again (each repeat used to resend the window, on a loaded host every
// millisecond).
func TestReporterNACKInFlight(t *testing.T) {
	l, r := sendTen(t, "nif", 0)
	// Reports 0..9 are out, none acknowledged; two NACKs for 3 arrive
	// together.
	l.answer(r, dtawire.Ack{Seq: 3, NACK: true}, dtawire.Ack{Seq: 3, NACK: true})
	if r.Stats.NACKsInFlight != 1 || r.Stats.Resent != 7 {
		t.Fatalf("two NACKs for 3: %d not acted on (want 1), %d resent (want 7, reports 3..9 once)", r.Stats.NACKsInFlight, r.Stats.Resent)
	}
}

// TestReporterBackoff: a reporter whose resends go unanswered waits twice
// as long before each next one, so a translator behind its reports is
// not sent a window every RetransmitTimeout; an ACK brings the timeout
// back.
func TestReporterBackoff(t *testing.T) {
	// 400 ms unanswered: 5+10+20+40+80+160 ms make at most 6 timeouts
	// (a slow host makes fewer); a fixed 5 ms would make about 80.
	l, r := sendTen(t, "bo", 400*time.Millisecond)
	st := r.Stats
	if st.Timeouts == 0 || st.Timeouts > 6 || st.Resent != 10*st.Timeouts || st.Unacknowledged != 10 {
		t.Fatalf("timeouts %d (want 1..6), resent %d (10 each), unacknowledged %d", st.Timeouts, st.Resent, st.Unacknowledged)
	}
	if r.rto <= RetransmitTimeout {
		t.Fatalf("timeout %v after %d unanswered resends", r.rto, st.Timeouts)
	}
	// Every report was resent: its ACK times no round trip.
	l.answer(r, dtawire.Ack{Seq: 9})
	if r.rto != RetransmitTimeout || r.oldest != r.seq {
		t.Fatalf("after the ACK: timeout %v, %d unacknowledged", r.rto, uint8(r.seq-r.oldest))
	}
}

// TestReporterRTT: the retransmission timeout follows the round trips the
// ACKs of reports sent once measure (a translator 30 ms away is not sent
// a window every 5 ms).
func TestReporterRTT(t *testing.T) {
	l, r := sendTen(t, "rtt", 0)
	time.Sleep(30 * time.Millisecond)
	l.answer(r, dtawire.Ack{Seq: 9})
	// A first round trip R of at least 30 ms: R + 4 R/2.
	if r.srtt < 30*time.Millisecond || r.rto < 90*time.Millisecond || r.timedOut() {
		t.Fatalf("round trip %v, timeout %v", r.srtt, r.rto)
	}
}
