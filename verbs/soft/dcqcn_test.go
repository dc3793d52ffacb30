package soft

import (
	"net/netip"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/verbs"
	"github.com/rdma-appliance/appliance/verbs/dcqcn"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// TestDCQCNPacing marks every request packet CE on the way to the
// responder, whose CNPs make the requester's reaction point cut the QP's
// rate: the transfer then takes at least its bytes over the line rate (what
// was sent before the first CNP aside), every CNP is handled, and once the
// marks stop the rate climbs back to line rate.
func TestDCQCNPacing(t *testing.T) {
	const lineRate = 2e9
	prof := ProfileCX5
	prof.DCQCNRate = true
	prof.DCQCN = dcqcn.Defaults(lineRate)
	prof.DCQCN.Timer = 20 * time.Microsecond
	prof.DCQCN.AI = 200e6
	var lp *lossyPort
	wrap := func(side int, pt dpdk.Port) dpdk.Port {
		if side == 0 {
			lp = &lossyPort{Port: pt}
			return lp
		}
		return pt
	}
	p := newPair(t, Config{Profile: prof}, Config{GIDs: []netip.Addr{netip.MustParseAddr("10.0.0.2")}, Profile: prof}, wrap)
	marking := true
	lp.setDecide(func(i int, pk *roce.Packet, _ []byte) fate {
		if marking && pk.Opcode.Transport() == roce.TransportRC && !opIsResponse(pk.Opcode) {
			return markCE
		}
		return pass
	})
	const size = 8 << 20
	x := newEnd(t, p.a, verbs.QPTypeRC, size, false)
	y := newEnd(t, p.b, verbs.QPTypeRC, size, false)
	prm := defaultRC()
	prm.timeout = 16
	connect(t, x, y, prm)
	start := time.Now()
	must(t, x.qp.PostSend([]verbs.SendWR{write(x, y, 1, 0, size)}))
	// The reaction point recovers on its own timer (20 us here), so a
	// scheduling stall after the completion could hide the cut: sample the
	// rate while the transfer runs and keep the lowest.
	minRate, limitedSeen := lineRate, false
	var wcs [1]verbs.WC
	for {
		n, err := x.scq.Poll(wcs[:])
		must(t, err)
		if n == 1 {
			break
		}
		if rate, limited, ok := p.a.QPRate(x.qp.QPN()); ok {
			minRate = min(minRate, rate)
			limitedSeen = limitedSeen || limited
		}
		if time.Since(start) > 20*time.Second {
			t.Fatal("marked transfer did not complete in 20 s")
		}
		time.Sleep(50 * time.Microsecond)
	}
	if wc := wcs[0]; wc.Status != verbs.WCSuccess {
		t.Fatalf("wc %+v", wc)
	}
	el := time.Since(start)
	// At most MaxInflight packets go out before the first CNP comes back.
	// A reaction point that recovers to the line rate between two CNPs
	// (one delayed on a loaded machine) stops pacing, and the RNIC then
	// sends as fast as its loop runs (about ten times the 2 Gbit/s here):
	// allow a tenth of the transfer that way. Unpaced, the whole transfer
	// takes a tenth of the floor.
	unpaced := float64(prof.MaxInflight * 4096)
	if floor := time.Duration((size - unpaced) * 8 / lineRate * 1e9 * 0.9); el < floor {
		t.Fatalf("%d bytes in %v: faster than the %v line rate allows (%v)", size, el, lineRate, floor)
	}
	if !limitedSeen || minRate >= lineRate {
		t.Fatalf("during the marked transfer: lowest rate %v, limited %v", minRate, limitedSeen)
	}
	sent := p.b.Counter(CntNpCnpSent)
	if sent == 0 {
		t.Fatal("no CNPs sent")
	}
	deadline := time.Now().Add(5 * time.Second)
	for p.a.Counter(CntRpCnpHandled) != sent {
		if time.Now().After(deadline) {
			t.Fatalf("rp_cnp_handled %d, np_cnp_sent %d", p.a.Counter(CntRpCnpHandled), sent)
		}
		time.Sleep(time.Millisecond)
	}
	t.Logf("%d MiB in %v (%.2f Gbit/s) with %d CNPs; lowest rate: %.3g bit/s", size>>20, el,
		size*8/el.Seconds()/1e9, sent, minRate)
	lp.setDecide(func(int, *roce.Packet, []byte) fate { return pass })
	var rate float64
	for {
		var limited bool
		rate, limited, _ = p.a.QPRate(x.qp.QPN())
		if !limited {
			break
		}
		if time.Now().After(deadline.Add(5 * time.Second)) {
			t.Fatalf("rate %v still limited without marks", rate)
		}
		time.Sleep(time.Millisecond)
	}
	if rate != lineRate {
		t.Fatalf("recovered rate %v, want %v", rate, lineRate)
	}
}

// TestDCQCNBadParams: invalid reaction point parameters are a configuration error.
func TestDCQCNBadParams(t *testing.T) {
	prof := ProfileCX5
	prof.DCQCNRate = true
	prof.DCQCN = dcqcn.Defaults(1e9)
	prof.DCQCN.G = 2
	l := newPair(t, Config{}, Config{}, nil)
	if _, err := NewDevice("dcqcn-bad", l.la, Config{GIDs: []netip.Addr{netip.MustParseAddr("10.9.0.1")}, Profile: prof}); err == nil {
		t.Fatal("g = 2 accepted")
	}
}
