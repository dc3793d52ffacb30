package soft

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rdma-appliance/appliance/verbs"
)

// cq is a completion queue: a ring of completions written by the poll loop
// and read by the application. A mutex guards the ring; the loop holds it for
// a few nanoseconds per completion, which costs less than the cache misses a
// lock-free ring would save at these rates, and lets several application
// goroutines poll one CQ.
type cq struct {
	dev    *Device
	ts     bool
	notify chan struct{}

	mu   sync.Mutex
	ring []verbs.WC
	head int // next to poll
	n    int // queued

	overrun bool // loop-owned: the overrun event went out

	users atomic.Int32 // QPs using it
	dead  atomic.Bool
}

var _ verbs.CQ = (*cq)(nil)

// maxCQE is the largest CQ.
const maxCQE = 1 << 20

// CreateCQ implements verbs.Device.
func (d *Device) CreateCQ(attr verbs.CQAttr) (verbs.CQ, error) {
	if d.closed.Load() {
		return nil, fmt.Errorf("soft: create cq: %w", verbs.ErrClosed)
	}
	if attr.CQE <= 0 || attr.CQE > maxCQE {
		return nil, fmt.Errorf("soft: create cq: %w: %d entries (1..%d)", verbs.ErrInvalidArgument, attr.CQE, maxCQE)
	}
	return &cq{dev: d, ts: attr.CompletionTimestamps, notify: make(chan struct{}, 1),
		ring: make([]verbs.WC, attr.CQE)}, nil
}

// push queues a completion; it is called by the poll loop (or a control
// operation holding the loop lock). A full CQ loses the completion, counts
// it and raises EventCQErr.
func (c *cq) push(wc *verbs.WC) {
	if c.ts {
		wc.Timestamp = c.dev.clock()
	}
	c.mu.Lock()
	if c.n == len(c.ring) {
		c.mu.Unlock()
		c.dev.cnt.inc(CntCQOverflow)
		if !c.overrun {
			// Reported once, like the CQ error event of a NIC whose CQ
			// overran.
			c.overrun = true
			c.dev.event(verbs.AsyncEvent{Type: verbs.EventCQErr, CQ: c})
		}
		return
	}
	i := c.head + c.n
	if i >= len(c.ring) {
		i -= len(c.ring)
	}
	c.ring[i] = *wc
	c.n++
	c.mu.Unlock()
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// Poll implements verbs.CQ.
func (c *cq) Poll(wcs []verbs.WC) (int, error) {
	if c.dead.Load() {
		return 0, fmt.Errorf("soft: poll cq: %w", verbs.ErrClosed)
	}
	c.mu.Lock()
	n := min(len(wcs), c.n)
	for i := 0; i < n; i++ {
		wcs[i] = c.ring[c.head]
		c.head++
		if c.head == len(c.ring) {
			c.head = 0
		}
	}
	c.n -= n
	c.mu.Unlock()
	return n, nil
}

// Notify implements verbs.CQ.
func (c *cq) Notify() <-chan struct{} { return c.notify }

// Destroy implements verbs.CQ.
func (c *cq) Destroy() error {
	if c.users.Load() != 0 {
		return fmt.Errorf("soft: destroy cq: %w", verbs.ErrBusy)
	}
	if c.dead.Swap(true) {
		return fmt.Errorf("soft: destroy cq: %w", verbs.ErrClosed)
	}
	return nil
}
