package fabric

import (
	"sync/atomic"
	"time"
)

// A parallel run meets at a barrier once per window, and a window of a
// small fabric is short: a k=4 fat-tree on 2 partitions at 1 us of
// lookahead handles some 460 events per partition in about 50 us. Parking
// a goroutine on a channel and waking it again through the Go scheduler
// (futex wake, another thread's findRunnable) costs about as much, and
// spent a fifth of the partitioned runs' CPU. A gate waits by spinning on
// an atomic counter first, for a bounded time, so that a partner running
// on another core hands the window on in the time of a cache-line
// transfer, and parks on a channel only when the partner is slow to come
// (not running: the OS gave its core to other work), so that the waiter
// does not burn a core shared with others for long.

// gateSpin bounds how long a gate spins before it parks: a few windows of
// a small fabric, short against an OS time slice (milliseconds), which is
// how long a partner that lost its core stays away.
const gateSpin = 100 * time.Microsecond

// gate is a counter one goroutine waits on and others post to.
type gate struct {
	n atomic.Uint64
	// parked says the waiter has parked, or is about to, on wake: the
	// poster that swaps it from true sends it one token.
	parked atomic.Bool
	wake   chan struct{}
	// parks counts the times the waiter parked (the tests check that
	// both ways of waking are taken).
	parks uint64
	// Keep other gates' counters off this one's cache line: the poster
	// and the waiter of each gate are different cores.
	_ [64]byte
}

func newGate() *gate { return &gate{wake: make(chan struct{}, 1)} }

// post adds one to the count and wakes the waiter if it parked.
func (g *gate) post() {
	g.n.Add(1)
	// Load first: the swap (a locked write to the line the waiter
	// spins on) only when the waiter parked. The atomics are
	// sequentially consistent: if this load misses the waiter's store
	// of true, the waiter's load of n after that store sees the add.
	if g.parked.Load() && g.parked.Swap(false) {
		g.wake <- struct{}{}
	}
}

// wait returns once the count is at least want. Only one goroutine waits
// on a gate.
func (g *gate) wait(want uint64) {
	if g.n.Load() >= want {
		return
	}
	t0 := time.Now()
	for i := 1; ; i++ {
		if g.n.Load() >= want {
			return
		}
		// The clock every 256 loads: the spin's bound need not be
		// sharp, and a load is much cheaper than reading the clock.
		if i&255 == 0 && time.Since(t0) > gateSpin {
			break
		}
	}
	for {
		g.parks++
		g.parked.Store(true)
		if g.n.Load() >= want {
			if !g.parked.Swap(false) {
				<-g.wake // a poster took the flag: take its token
			}
			return
		}
		<-g.wake // the poster that swapped the flag to false sent it
		if g.n.Load() >= want {
			return
		}
	}
}
