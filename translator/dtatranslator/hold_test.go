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

// TestReporterHoldsHigh: with HighOnly, a full window holds back the
// high-priority reports alone: the low-priority ones all go out while
// nothing is acknowledged, the held ones wait in order, and an ACK
// releases them, numbered after the window, until every report is
// acknowledged.
func TestReporterHoldsHigh(t *testing.T) {
	name := fmt.Sprintf("hold%p", t)
	l := ring.NewLink(name, ring.Config{RingSize: 4096})
	pool, err := dpdk.NewPool(name, 8192, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.A().Close(); l.B().Close(); pool.Close() })
	repMAC, trMAC := header.MAC{2, 0, 0, 0, 0, 2}, header.MAC{2, 0, 0, 0, 0, 1}
	repIP, trIP := netip.MustParseAddr("10.9.0.10"), netip.MustParseAddr("10.9.0.100")
	cfg := ReporterConfig{SrcMAC: repMAC, DstMAC: trMAC, SrcIP: repIP, DstIP: trIP, Keys: 100, Redundancy: 2,
		Count: 400, Seed: 3, HighShare: 0.5}
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
	r, err := NewReporter(cfg, l.A(), pool)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background(), 20*time.Second) }()

	// The translator's end: reports by priority, first transmissions of
	// each sequence number in the order they came.
	far := l.B()
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
	ack := func(seq uint8) {
		var frame [128]byte
		n, err := WriteAckFrame(frame[:], trMAC, repMAC, trIP.As4(), repIP.As4(), dtawire.AckPort, dtawire.Ack{Seq: seq})
		if err != nil {
			t.Fatal(err)
		}
		pkt := pool.Get()
		pkt.CopyFrom(frame[:n])
		for far.TxBurst(0, []*dpdk.Packet{pkt}) == 0 {
			time.Sleep(time.Millisecond)
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
			ack(order[len(order)-1])
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
