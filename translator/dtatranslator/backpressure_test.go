package dtatranslator

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/ring"
)

// stallPort is a link that stops taking frames now and then (a busy
// peer, a paused port): TxBurst takes nothing while stalled.
type stallPort struct {
	dpdk.Port
	calls   atomic.Uint64
	stalled atomic.Uint64
}

func (s *stallPort) TxBurst(q int, pkts []*dpdk.Packet) int {
	// Refuse 512 calls in a row out of every 1024: stalls long enough
	// to fill the translator's backlog.
	if s.calls.Add(1)%1024 < 512 {
		s.stalled.Add(1)
		return 0
	}
	return s.Port.TxBurst(q, pkts)
}

// TestServiceBackpressure: a translator port that keeps refusing bursts
// loses no RDMA packet (the translator cannot resend them): it stops
// taking reports until the port takes the backlog, and the reporters'
// go-back-N recovers whatever their own link dropped meanwhile; a
// Key-Increment that finds the atomic queue full is neither taken nor
// acknowledged, so it is resent too. Every count is then what was
// reported, every list entry there.
func TestServiceBackpressure(t *testing.T) {
	name := fmt.Sprintf("bp%p", t)
	// Rings deep enough that the bridge between them (the wire) drops
	// nothing: the test is about the translator's own port.
	cfg := ring.Config{RingSize: 16384}
	lt, lc, lr := ring.NewLink(name+"t", cfg), ring.NewLink(name+"c", cfg), ring.NewLink(name+"r", cfg)
	for _, p := range []dpdk.Port{lt.A(), lt.B(), lc.A(), lc.B(), lr.A(), lr.B()} {
		t.Cleanup(func() { p.Close() })
	}
	// The reporter (a switch) has its own buffers, as it would: while
	// the translator refuses reports it resends windows of them at full
	// rate, and tens of thousands of its frames wait in the rings, which
	// would otherwise leave the translator's pool empty.
	rp, err := dpdk.NewPool(name+"rep", 16384, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rp.Close() })
	tr := &stallPort{Port: lt.A()}
	b := buildServiceBed(t, tr, lc.A(), []dpdk.Port{lr.A()}, []dpdk.Port{lt.B(), lc.B(), lr.B()},
		// Small bursts: a backlog of four fills within one stall.
		func(s *Spec) { s.Burst = 4 })
	b.repPool = rp
	rc := ReporterConfig{Keys: 2000, Lists: []uint32{1}, Retransmittable: true, Count: 8000, Seed: 9, Rate: 2000000}
	rc.Mix.KeyIncrement, rc.Mix.Append = 3, 1
	r := b.reporter(t, 0, rc)
	runReporters(t, []*Reporter{r})
	st := b.settle(t)
	if tr.stalled.Load() == 0 || st.Stats.TxPaused == 0 {
		t.Fatalf("the port never refused a burst: %d stalls, %d paused polls", tr.stalled.Load(), st.Stats.TxPaused)
	}
	// A frame the translator found no buffer or room for (TxDropped:
	// the reporter's storm of resends can hold every buffer of its pool
	// in the rings) gives its PSN back and its report is refused, so it
	// costs nothing; a lost RDMA packet shows as a NAK and lost PSNs.
	if c := st.Collectors[0]; c.LostPSNs != 0 || c.Conn.NAKs != 0 || c.Conn.Resyncs != 0 {
		t.Fatalf("RDMA frames lost to a busy port: %+v, conn %+v, wire drops %d", st.Stats, c.Conn, b.br.Dropped)
	}
	b.checkTruth(t, r)
	t.Logf("%d refused bursts, %d paused polls, %d reports, reporter resent %d, %d frames refused for want of a buffer",
		tr.stalled.Load(), st.Stats.TxPaused, st.Stats.Reports, r.Stats.Resent, st.Stats.TxDropped)
}
