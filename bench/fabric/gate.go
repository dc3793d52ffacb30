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
//
// How long to spin depends on the machine: with a core each, the partner
// comes within the imbalance of a window (microseconds) and spinning
// always pays; on a machine loaded with other work, a partner that lost
// its core stays away for a time slice (milliseconds), and every spin
// that ends in a park is a core's time taken from the others for
// nothing. So each gate adapts its spin: a wait that parked and lasted
// longer than gateSpin (the partner was away: spinning was no use)
// halves it, down to gateSpinMin; a spin that succeeded, or a park that
// a longer spin would have spared (the partner came within gateSpin),
// grows it by a quarter, up to gateSpin. On this 2-core VM at a load of
// 16-22 without a real-time priority, a fixed 100 us spin cost the k=4
// benchmark's 2-partition run 2.3 times the CPU per hop of the parking
// barrier; adapting, 1.3 times. With a core each (chrt), the spin stays
// long and the two behave alike.

// gateSpin bounds how long a gate spins before it parks: a few windows of
// a small fabric, short against an OS time slice. gateSpinMin is the
// least: a partner that is running but a little behind still gets
// caught without a park.
const (
	gateSpin    = 100 * time.Microsecond
	gateSpinMin = 5 * time.Microsecond
)

// gate is a counter one goroutine waits on and others post to.
type gate struct {
	n atomic.Uint64
	// parked says the waiter has parked, or is about to, on wake: the
	// poster that swaps it from true sends it one token.
	parked atomic.Bool
	wake   chan struct{}
	// spin is how long the next wait spins before it parks (0: not
	// set yet, gateSpin); parks counts the waits that parked (the tests
	// check that both ways of waking are taken). The waiter alone uses
	// both.
	spin  time.Duration
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
	if g.spin == 0 {
		g.spin = gateSpin
	}
	t0 := time.Now()
	for i := 1; ; i++ {
		if g.n.Load() >= want {
			g.spin = min(gateSpin, g.spin+g.spin/4)
			return
		}
		// The clock every 256 loads: the spin's bound need not be
		// sharp, and a load is much cheaper than reading the clock.
		if i&255 == 0 && time.Since(t0) > g.spin {
			break
		}
	}
	g.parks++
	g.park(want)
	if time.Since(t0) > gateSpin {
		g.spin = max(gateSpinMin, g.spin/2)
	} else {
		g.spin = min(gateSpin, g.spin+g.spin/4)
	}
}

// park blocks on wake until the count is at least want.
func (g *gate) park(want uint64) {
	for {
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
