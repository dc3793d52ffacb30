package capture

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/afpacket"
	"github.com/rdma-appliance/appliance/dpdk/filter"
)

// DrainIdle is how many empty polls in a row end a loop after its stop
// flag is set: enough for frames still in flight to land.
const DrainIdle = 256

// MaxDrain bounds a drain past DrainFor when frames keep coming.
const MaxDrain = 500 * time.Millisecond

// parkTimeout bounds a parked loop's sleep, so it sees its stop flag.
const parkTimeout = 50 * time.Millisecond

// Loop is one receive queue's poll loop: the capture path that the
// capture command and the Lumina dumper share. It pins itself to Core
// (unpinned when negative), receives bursts, drops what Filter rejects
// when the port could not filter in the kernel, and hands the rest to the
// handler; the loop frees them after. Unpinned on a port that can sleep
// (afpacket), it parks in the kernel when the queue is idle instead of
// spinning; pinned, it owns its core and spins.
type Loop struct {
	Port  dpdk.Port
	Queue int
	Core  int
	Burst int
	// Stop ends the loop once the queue has been idle for DrainIdle polls
	// and DrainFor has passed since the loop saw it.
	Stop     *atomic.Bool
	DrainFor time.Duration
	// Stats counts the passes of the loop (its utilisation); optional.
	Stats *dpdk.LoopStats
	// Filter, when set, is run on each packet in user space (ports that
	// attached Config.Filter in the kernel do not need it). Rejected
	// packets are freed and counted in Filtered.
	Filter   *filter.Program
	Filtered atomic.Uint64
	// OnIdle, when set, is called when the queue runs dry after frames:
	// where a loop that batches its counters publishes them.
	OnIdle func()
	// ParkIdle makes an unpinned loop on a dpdk.Waiter port sleep in the
	// kernel once idle, instead of waking every millisecond: a capture
	// that must not cost CPU when traffic is light. On a dpdk.Waker port it
	// sleeps without a timeout (Wake ends the sleep at a stop: no timer
	// wakes an idle process), elsewhere up to parkTimeout at a time.
	ParkIdle bool
}

// Pin locks the calling goroutine's thread to core (when core >= 0) and
// returns what undoes the lock.
func Pin(core int) (func(), error) {
	if core < 0 {
		return func() {}, nil
	}
	if err := dpdk.Pin(core); err != nil {
		return nil, err
	}
	return runtime.UnlockOSThread, nil
}

// Run polls until Stop, calling handle with each burst of packets. It
// reports on started whether it could pin its core.
func (l *Loop) Run(handle func([]*dpdk.Packet), started chan<- error) {
	bufs := make([]*dpdk.Packet, l.burst())
	prog := l.userFilter()
	l.run(started, func(want int) int {
		n := l.Port.RxBurst(l.Queue, bufs[:want])
		if n == 0 {
			return 0
		}
		kept := n
		if prog != nil {
			kept = l.filter(prog, bufs[:n])
		}
		if kept > 0 {
			handle(bufs[:kept])
		}
		dpdk.FreeBulk(bufs[:n])
		clear(bufs[:n])
		return n
	})
}

// RunFrames polls until Stop, calling handle with each frame. On a port
// that shows frames in place (dpdk.FrameReader) and filtered them in the
// kernel or needs no filter, frames are never copied into packet buffers:
// handle sees them in the kernel's ring.
func (l *Loop) RunFrames(handle func(*dpdk.Frame), started chan<- error) {
	prog := l.userFilter()
	if fr, ok := l.Port.(dpdk.FrameReader); ok && prog == nil {
		l.run(started, func(want int) int { return fr.ReadFrames(l.Queue, want, handle) })
		return
	}
	var f dpdk.Frame
	l.Run(func(pkts []*dpdk.Packet) {
		for _, p := range pkts {
			f.Data, f.Timestamp, f.WireLen = p.Data(), p.Timestamp, p.OrigLen()
			handle(&f)
		}
	}, started)
}

// BlockReader is a port that hands over received frames a kernel block
// at a time (afpacket's TPACKET_V3 ring).
type BlockReader interface {
	ReadBlocks(q, max int, fn func(b *afpacket.Block)) int
}

// RunBlocks polls until Stop, calling handleBlock with each block of
// frames on a port that hands them over so (BlockReader) and filtered them
// in the kernel or needs no filter: one call per block, the frames read in
// place. On other ports it runs RunFrames with handle.
func (l *Loop) RunBlocks(handleBlock func(*afpacket.Block), handle func(*dpdk.Frame), started chan<- error) {
	br, ok := l.Port.(BlockReader)
	if !ok || l.userFilter() != nil {
		l.RunFrames(handle, started)
		return
	}
	l.run(started, func(want int) int { return br.ReadBlocks(l.Queue, want, handleBlock) })
}

// RunPoll polls until Stop with poll, which takes up to want frames of
// the loop's queue and returns how many it took: for a consumer that reads
// the port its own way (a port writing capture records itself). No filter
// runs in the loop.
func (l *Loop) RunPoll(poll func(want int) int, started chan<- error) { l.run(started, poll) }

func (l *Loop) burst() int {
	if l.Burst <= 0 {
		return 32
	}
	return l.Burst
}

// userFilter is the filter to run in user space: none when the port ran
// it in the kernel or it matches everything.
func (l *Loop) userFilter() *filter.Program {
	if l.Filter == nil || l.Filter.All || l.Port.Info().Filtered {
		return nil
	}
	return l.Filter
}

// run is the loop itself: poll takes up to want packets and returns how
// many it took.
func (l *Loop) run(started chan<- error, poll func(want int) int) {
	unpin, err := Pin(l.Core)
	if err != nil {
		started <- fmt.Errorf("queue %d: %w", l.Queue, err)
		return
	}
	defer unpin()
	started <- nil
	burst := l.burst()
	bo := dpdk.DefaultBackoff()
	if l.Core >= 0 {
		bo = dpdk.Backoff{Spin: 1 << 30} // a pinned poller owns its core
	}
	bo.Stats = l.Stats
	waiter, _ := l.Port.(dpdk.Waiter)
	if l.Core >= 0 {
		waiter = nil
	}
	idle := 0
	var stopAt int64
	for {
		stopping := l.Stop.Load()
		if stopping {
			// Drain what is in flight, but not for ever: a source that never
			// runs dry (a line-rate link, net_null) must still stop.
			now := dpdk.Nanotime()
			if stopAt == 0 {
				stopAt = now
			}
			if idle >= DrainIdle && now-stopAt >= int64(l.DrainFor) || now-stopAt >= int64(l.DrainFor+MaxDrain) {
				return
			}
		}
		n := poll(burst)
		if n == 0 {
			if idle == 0 && l.OnIdle != nil {
				l.OnIdle()
			}
			idle++
			if waiter != nil && idle > 64 && !stopping {
				timeout := time.Millisecond
				if l.ParkIdle {
					timeout = parkTimeout
					if _, ok := l.Port.(dpdk.Waker); ok {
						timeout = -1
					}
				}
				_, _ = waiter.Wait(l.Queue, timeout)
				continue
			}
			bo.Idle()
			continue
		}
		idle = 0
		bo.Busy()
	}
}

// filter moves the packets prog accepts to the front of pkts, the others
// behind them, and returns how many it kept.
func (l *Loop) filter(prog *filter.Program, pkts []*dpdk.Packet) int {
	k := 0
	for i, p := range pkts {
		if prog.Match(p.Data(), p.OrigLen()) != 0 {
			pkts[k], pkts[i] = pkts[i], pkts[k]
			k++
		}
	}
	if r := len(pkts) - k; r > 0 {
		l.Filtered.Add(uint64(r))
	}
	return k
}
