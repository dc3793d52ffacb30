package soft

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/verbs"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// vclock is a virtual clock a test moves by hand.
type vclock struct{ t int64 }

func (c *vclock) now() int64 { return c.t }

// steppedPair is two devices on a ring link that nobody polls but the
// test, both reading clk: virtual time, as the Lumina twin runs them.
func steppedPair(t *testing.T, clk *vclock, ca, cb Config) (*Device, *Device) {
	t.Helper()
	return steppedPairOn(t, clk, ca, cb, nil)
}

// steppedPairOn is steppedPair with the first device's port wrapped by
// wrapA (when not nil), to drop or mark what it sends.
func steppedPairOn(t *testing.T, clk *vclock, ca, cb Config, wrapA func(dpdk.Port) dpdk.Port) (*Device, *Device) {
	t.Helper()
	id := testSeq.Add(1)
	l := ring.NewLink(fmt.Sprintf("vc%d", id), ring.Config{RingSize: 4096})
	ca.GIDs, cb.GIDs = []netip.Addr{netip.MustParseAddr("10.0.0.1")}, []netip.Addr{netip.MustParseAddr("10.0.0.2")}
	ca.PoolSize, cb.PoolSize = 1024, 1024
	ca.Clock, cb.Clock = clk.now, clk.now
	pa := dpdk.Port(l.A())
	if wrapA != nil {
		pa = wrapA(pa)
	}
	a, err := NewDevice(fmt.Sprintf("vcA%d", id), pa, ca)
	must(t, err)
	b, err := NewDevice(fmt.Sprintf("vcB%d", id), l.B(), cb)
	must(t, err)
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// settle polls both devices until neither has work, at the clock's
// current time.
func settle(a, b *Device) {
	for i := 0; i < 1000; i++ {
		x, y := a.Poll(), b.Poll()
		if !x && !y {
			return
		}
	}
}

// TestVirtualClock checks that a device given a clock takes all its time
// from it: completion timestamps are the clock's value, the retransmission
// timer fires when (and only when) the clock passes its deadline, which
// NextEvent reports, and the DCQCN rate limiter paces on it.
func TestVirtualClock(t *testing.T) {
	clk := &vclock{t: 1_000_000_000}
	a, b := steppedPair(t, clk, Config{}, Config{})
	x := newEnd(t, a, verbs.QPTypeRC, 1<<16, true)
	y := newEnd(t, b, verbs.QPTypeRC, 1<<16, true)
	p := defaultRC()
	p.timeout = 10 // 4.096 us x 2^10 = 4.19 ms
	connect(t, x, y, p)
	staticNeighbors(&pair{a: a, b: b})
	must(t, x.qp.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{{Addr: x.mr.Addr(), Length: 3000, LKey: x.mr.LKey()}}, RemoteAddr: y.mr.Addr(), RKey: y.mr.RKey()}}))
	clk.t += 12345
	settle(a, b)
	var wc [4]verbs.WC
	n, err := x.scq.Poll(wc[:])
	must(t, err)
	if n != 1 || wc[0].Status != verbs.WCSuccess {
		t.Fatalf("write: %d completions %+v", n, wc[:n])
	}
	if wc[0].Timestamp != clk.t {
		t.Fatalf("completion timestamp %d, the virtual clock says %d", wc[0].Timestamp, clk.t)
	}
	if _, ok := a.NextEvent(); ok {
		t.Fatal("an idle device reports a timer")
	}

	// A WRITE whose packets the responder never reads: the requester's
	// timer is due 4.19 ms after it sent, on the virtual clock.
	b.Close()
	sent := clk.t
	must(t, x.qp.PostSend([]verbs.SendWR{{ID: 2, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{{Addr: x.mr.Addr(), Length: 100, LKey: x.mr.LKey()}}, RemoteAddr: y.mr.Addr(), RKey: y.mr.RKey()}}))
	a.Poll()
	due, ok := a.NextEvent()
	rto := int64(4096) << 10
	if !ok || due != sent+rto {
		t.Fatalf("next event %d (%v), want the retransmission deadline %d", due, ok, sent+rto)
	}
	retx := a.Counter(CntTxRetransmits)
	clk.t = due - 1
	a.Poll()
	if a.Counter(CntTxRetransmits) != retx {
		t.Fatal("retransmitted before the virtual deadline")
	}
	clk.t = due
	a.Poll()
	if a.Counter(CntTxRetransmits) != retx+1 {
		t.Fatalf("no retransmission at the virtual deadline (retransmits %d)", a.Counter(CntTxRetransmits))
	}
}

// TestVirtualClockDCQCN checks that the DCQCN reaction point paces on the
// device's clock: a rate cut at virtual time T spaces packets by their
// serialisation time at the cut rate, in virtual nanoseconds.
func TestVirtualClockDCQCN(t *testing.T) {
	clk := &vclock{t: 1_000_000_000}
	prof := ProfileCX5
	prof.DCQCNRate = true
	a, b := steppedPair(t, clk, Config{Profile: prof}, Config{})
	x := newEnd(t, a, verbs.QPTypeRC, 1<<20, false)
	y := newEnd(t, b, verbs.QPTypeRC, 1<<20, false)
	connect(t, x, y, defaultRC())
	staticNeighbors(&pair{a: a, b: b})
	if rate, limited, ok := a.QPRate(x.qp.QPN()); !ok || limited {
		t.Fatalf("rate %v limited %v ok %v", rate, limited, ok)
	}
	a.lockLoop()
	q := a.lookupQP(x.qp.QPN())
	q.rp.CNP(clk.t)
	a.unlockLoop()
	if _, limited, _ := a.QPRate(x.qp.QPN()); !limited {
		t.Fatal("a CNP did not cut the rate")
	}
	must(t, x.qp.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{{Addr: x.mr.Addr(), Length: 64 << 10, LKey: x.mr.LKey()}}, RemoteAddr: y.mr.Addr(), RKey: y.mr.RKey()}}))
	a.Poll()
	sent := a.Counter(CntTxPackets)
	if sent == 0 {
		t.Fatal("nothing sent")
	}
	// Polling without moving the clock sends nothing more: the next slot
	// is in virtual time, which NextEvent reports.
	for range 10 {
		a.Poll()
	}
	if a.Counter(CntTxPackets) != sent {
		t.Fatalf("sent %d packets more without the virtual clock moving", a.Counter(CntTxPackets)-sent)
	}
	next, ok := a.NextEvent()
	if !ok || next <= clk.t {
		t.Fatalf("next pacing slot %d (%v) not after now %d", next, ok, clk.t)
	}
	clk.t = next
	a.Poll()
	if a.Counter(CntTxPackets) <= sent {
		t.Fatal("no packet at the pacing slot")
	}
}

// TestNAKReactionHold checks the NAK reaction on the device's clock: a
// requester that takes a NAK sequence error builds no new frame until
// Profile.NAKReactionDelay has passed (NextEvent reports that time), then
// goes back to the NAKed PSN. The frames it had already queued still go
// out first; those it would have built meanwhile would have queued ahead
// of the retransmission too (Lumina's Figure 9(b): an early loss in a
// long message waits for the pipeline to drain, not for the drain and
// the reaction one after the other).
func TestNAKReactionHold(t *testing.T) {
	clk := &vclock{t: 1_000_000_000}
	prof := ProfileCX5
	prof.NAKTriggersCNP = false
	prm := defaultRC()
	var lp *lossyPort
	a, b := steppedPairOn(t, clk, Config{Profile: prof, Burst: 8}, Config{Profile: prof, Burst: 8},
		func(p dpdk.Port) dpdk.Port { lp = &lossyPort{Port: p}; return lp })
	x := newEnd(t, a, verbs.QPTypeRC, 1<<20, false)
	y := newEnd(t, b, verbs.QPTypeRC, 1<<20, false)
	connect(t, x, y, prm)
	staticNeighbors(&pair{a: a, b: b})
	lost := roce.AddPSN(prm.psnA, 2)
	var sent []uint32 // PSNs of the request packets, in the order sent
	lp.setDecide(func(_ int, p *roce.Packet, _ []byte) fate {
		if opIsResponse(p.Opcode) || p.Opcode.Transport() != roce.TransportRC || p.Opcode == roce.RCAck {
			return pass
		}
		sent = append(sent, p.PSN)
		if p.PSN == lost && len(sent) == 3 {
			return drop
		}
		return pass
	})
	must(t, x.qp.PostSend([]verbs.SendWR{write(x, y, 1, 0, 64<<10)}))
	a.Poll() // one burst: PSNs 0-7 of 64, the third lost
	b.Poll() // out of sequence: the NAK is due after the generation delay
	clk.t += int64(prof.NAKGenerationDelay)
	b.Poll()
	n := len(sent)
	a.Poll() // takes the NAK
	for range 5 {
		a.Poll()
	}
	if len(sent) != n {
		t.Fatalf("%d packets built during the NAK reaction (PSNs %x)", len(sent)-n, sent[n:])
	}
	due, ok := a.NextEvent()
	if want := clk.t + int64(prof.NAKReactionDelay); !ok || due != want {
		t.Fatalf("next event %d (%v), want the end of the NAK reaction %d", due, ok, want)
	}
	clk.t = due
	a.Poll()
	if len(sent) == n || sent[n] != lost {
		t.Fatalf("after the reaction: PSNs %x, want the retransmission of %x first", sent[n:], lost)
	}
	if a.Counter(CntTxRetransmits) == 0 {
		t.Fatal("no retransmission counted")
	}
}
