package dtatranslator

import (
	"net/netip"
	"testing"

	"github.com/rdma-appliance/appliance/internal/dtawire"
)

// TestQueueAtomicWait: a queued high-priority Key-Increment that finds
// the collector's atomic window full moves on to the atomics' queue, so
// the high-priority reports queued behind it go out at once; one that
// finds that queue full too stays and gives its tokens back, however
// often the loop retries it (before, every retry spent them, and the
// meter let through a fraction of its rate).
func TestQueueAtomicWait(t *testing.T) {
	sv := fuzzService(t) // one collector, MaxAtomic 4, whose ACKs never come
	sv.meter = Meter{Rate: 1000, Burst: 100}
	sv.now = 1 // the clock stands still: no token comes back by itself
	enc := func(r dtawire.Report) []byte {
		b := make([]byte, 64)
		n, err := dtawire.Format{}.Encode(b, &r)
		if err != nil {
			t.Fatal(err)
		}
		return b[:n]
	}
	src := netip.MustParseAddr("10.9.0.10")
	ki := enc(dtawire.Report{Opcode: dtawire.OpKeyIncrement, Redundancy: 2, Key: 7, Counter: 3})
	kw := enc(dtawire.Report{Opcode: dtawire.OpKeyWrite, Redundancy: 2, Key: 9, Data: []byte{1, 2, 3, 4}})
	ap := enc(dtawire.Report{Opcode: dtawire.OpAppend, ListID: 1, Data: []byte{0, 0, 0, 5}})
	for _, p := range [][]byte{ki, ki, ki, kw, ap} {
		if !sv.queue.push(p, src) {
			t.Fatal("queue full")
		}
	}
	sv.drainQueue()
	// Two Key-Increments fill the window of 4 atomics; the third waits
	// among the atomics, metered; the Key-Write and the Append go.
	if sv.queue.n != 0 || sv.atomics.n != 1 {
		t.Fatalf("queued %d, waiting for atomics %d: want 0 and 1", sv.queue.n, sv.atomics.n)
	}
	if want := 100.0 - (2 + 2 + 2 + 2 + 1); sv.meter.tokens != want {
		t.Fatalf("tokens %g, want %g", sv.meter.tokens, want)
	}
	// The atomics' queue full as well: the report waits where it is.
	sv.atomics.init(1)
	sv.atomics.push(ki, src)
	sv.queue.push(ki, src)
	sv.queue.push(kw, src)
	before := sv.meter.tokens
	for range 100 {
		sv.drainQueue()
	}
	if sv.queue.n != 2 || sv.meter.tokens != before {
		t.Fatalf("after 100 retries: %d queued (want 2), tokens %g (want %g)", sv.queue.n, sv.meter.tokens, before)
	}
}
