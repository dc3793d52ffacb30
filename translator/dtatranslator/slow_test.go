package dtatranslator

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/internal/dtamem"
)

// gatePort is a collector's port that can stop receiving and stop
// transmitting, each on its own: a collector whose poller does not run
// for a while (a busy host, a descheduled goroutine), and whose answers
// are held up on the way back. Frames wait, in order; none is lost.
type gatePort struct {
	dpdk.Port
	rxHeld, txHeld atomic.Bool
}

func (g *gatePort) RxBurst(q int, pkts []*dpdk.Packet) int {
	if g.rxHeld.Load() {
		return 0
	}
	return g.Port.RxBurst(q, pkts)
}

func (g *gatePort) TxBurst(q int, pkts []*dpdk.Packet) int {
	if g.txHeld.Load() {
		return 0
	}
	return g.Port.TxBurst(q, pkts)
}

// TestServiceSlowCollector: a collector that is slow, not stranded,
// loses nothing. Its answers to the operations it executed come back
// only after the translator has given up waiting (pinged it, and more),
// and then it stays deaf for a hundred flush timeouts before it reads
// what waited for it. The translator must not move its PSN back over
// packets still on their way: the collector executes those in order and
// would take whatever the translator sent again under their PSNs for
// duplicates, which it does not execute. (Under the race detector on
// two cores the collector's poller, the switch and the translator stall
// each other for tens of milliseconds; this is what lost Key-Increments
// in the lab's DTA stage.)
func TestServiceSlowCollector(t *testing.T) {
	name := fmt.Sprintf("slow%p", t)
	cfg := ring.Config{RingSize: 4096}
	lt, lc, lr := ring.NewLink(name+"t", cfg), ring.NewLink(name+"c", cfg), ring.NewLink(name+"r", cfg)
	for _, p := range []dpdk.Port{lt.A(), lt.B(), lc.A(), lc.B(), lr.A(), lr.B()} {
		t.Cleanup(func() { p.Close() })
	}
	gate := &gatePort{Port: lc.A()}
	b := buildServiceBed(t, lt.A(), gate, []dpdk.Port{lr.A()}, []dpdk.Port{lt.B(), lc.B(), lr.B()}, nil)
	conn := func() ConnStats { return b.svc.Status().Collectors[0].Conn }
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s: conn %+v", what, conn())
			}
		}
	}
	rxd := func() uint64 { return b.coll.dev.Counters()["rx_packets"] }

	// Key-Increments, two FETCH_ADDs each: six reports stay within the
	// collector's atomic window, so all of them go out at once.
	rc := ReporterConfig{Keys: 40, Retransmittable: true, Count: 6, Seed: 11}
	rc.Mix.KeyIncrement = 1
	r := b.reporter(t, 0, rc)

	// The collector executes them, but its answers are held.
	gate.txHeld.Store(true)
	before := rxd()
	// The translator pings a collector quiet for a flush timeout (1 ms):
	// on a loaded machine that may come before this goroutine has seen
	// the FETCH_ADDs arrive, and the translator fills, not pings, after
	// its first ping. So the pings are counted from here.
	pings := conn().Pings
	if err := r.Run(context.Background(), 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	waitFor("the collector to receive the FETCH_ADDs", func() bool { return rxd()-before >= 12 })
	// Then it stops reading; the translator, hearing nothing, pings
	// (if it has not already).
	gate.rxHeld.Store(true)
	waitFor("a ping", func() bool { return conn().Pings > pings })
	time.Sleep(10 * time.Millisecond) // 10 flush timeouts: whatever comes after a ping
	// The answers to what it executed before come back; it reads
	// nothing for another 100 ms (the translator used to take 20 ms of
	// silence after such answers for a stranded collector).
	acks := conn().ACKs
	gate.txHeld.Store(false)
	waitFor("the held answers", func() bool { return conn().ACKs > acks })
	time.Sleep(100 * time.Millisecond)
	gate.rxHeld.Store(false)

	// More reports after the collector woke up must land too.
	r.cfg.Count += 30
	if err := r.Run(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	st := b.settle(t)
	c := st.Collectors[0]
	if c.Conn.Resyncs != 0 || c.LostPSNs != 0 || c.Conn.NAKs != 0 {
		t.Errorf("a slow collector was taken for a stranded one: %d resyncs, %d PSNs lost, %d NAKs; conn %+v, collector %v",
			c.Conn.Resyncs, c.LostPSNs, c.Conn.NAKs, c.Conn, b.coll.dev.Counters())
	}
	b.checkTruth(t, r)
	ki := b.coll.region(b.coll.regs.KeyIncrement.Addr, ecKI*8)
	for k, v := range r.Truth.KeyIncrement {
		if got := dtamem.QueryKeyIncrement(ki, k, 2, ecKI); got != v {
			t.Errorf("key-increment %d: %d, want %d", k, got, v)
		}
	}
}
