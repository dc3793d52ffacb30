package dtacollector

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/internal/dtamem"
)

// pollBurst bounds the entries one poll reads, so a busy list still lets
// the poller notice Close.
const pollBurst = 256

// list is one Append list and its pollers.
type list struct {
	id      uint32
	spec    ListSpec
	mem     []byte
	layout  dtamem.Layout
	entries uint64
	pollers []*poller
	// rate is entries a second over the last tick (float64 bits);
	// lastRead and lastTick belong to the ticker.
	rate     atomic.Uint64
	lastRead uint64
	lastTick time.Time
}

// poller is one of a list's pollers: it reads positions start,
// start+step, ... of the ring.
type poller struct {
	list  *list
	index int
	core  int // -1: unpinned
	start uint64
	step  uint64
	p     *dtamem.Poller
	fn    func(pos uint64, data uint32)
	// seen is the poller goroutine's own count; read publishes it,
	// next the position it reads next and lost the positions it
	// skipped as holes.
	seen uint64
	read atomic.Uint64
	next atomic.Uint64
	lost atomic.Uint64
	// hole is the position the poller found a hole at (an entry
	// further on while its own is missing), and when; idle counts
	// empty polls between hole checks.
	hole      uint64
	holeSince time.Time
	idle      int
	// loop counts the poller's passes (its utilisation).
	loop dpdk.LoopStats
}

func newList(id uint32, s ListSpec, mem []byte, layout dtamem.Layout) *list {
	l := &list{id: id, spec: s, mem: mem, layout: layout, entries: uint64(len(mem) / layout.AppendEntryLen())}
	cores, _ := dpdk.ParseCoreList(s.Cores) // validated with the spec
	for i := range s.Pollers {
		p := &poller{list: l, index: i, core: -1, start: uint64(i), step: uint64(s.Pollers),
			p: dtamem.NewPoller(mem, l.entries, uint64(i), uint64(s.Pollers))}
		p.p.Layout = layout
		if i < len(cores) && s.Cores != "" {
			p.core = cores[i]
		}
		l.pollers = append(l.pollers, p)
	}
	return l
}

// setCallback makes the function the poller calls per entry: nothing
// but counting by default, onEntry with the entry's position when set.
func (p *poller) setCallback(onEntry func(list uint32, pos uint64, data uint32)) {
	p.next.Store(p.start)
	if onEntry == nil {
		p.fn = func(uint64, uint32) {}
		return
	}
	id := p.list.id
	p.fn = func(pos uint64, d uint32) { onEntry(id, pos, d) }
}

// poll reads up to max new entries and publishes the count.
func (p *poller) poll(max int) int {
	n := p.p.Poll(max, p.fn)
	if n > 0 {
		p.seen += uint64(n)
		p.read.Store(p.seen)
		p.next.Store(p.p.Next())
	}
	return n
}

// Holes: a list's writer never fills a hole (see dtamem.Poller), so a
// poller that has waited holeGrace at a position while a later one holds
// its entry skips to it. On one RC connection writes land in order and
// the later entry alone proves the hole; the grace leaves room for an
// RNIC that places one connection's writes slightly out of order.
// holeLookahead bounds how far past its position a poller looks, and
// holeCheckEvery how many empty polls pass between looks (a look reads
// up to holeLookahead entries).
const (
	holeGrace      = time.Millisecond
	holeLookahead  = 1 << 14
	holeCheckEvery = 64
)

// checkHole is called on empty polls: every holeCheckEvery of them it
// looks for an entry past the poller's position, and skips to it once
// the hole has stood holeGrace. It reports whether it skipped.
func (p *poller) checkHole() bool {
	if p.idle++; p.idle < holeCheckEvery {
		return false
	}
	p.idle = 0
	q, ok := p.p.Ahead(holeLookahead)
	if !ok {
		p.holeSince = time.Time{}
		return false
	}
	now := time.Now()
	if at := p.p.Next(); p.holeSince.IsZero() || p.hole != at {
		p.hole, p.holeSince = at, now
		return false
	}
	if now.Sub(p.holeSince) < holeGrace {
		return false
	}
	p.p.Skip(q)
	p.holeSince = time.Time{}
	p.lost.Store(p.p.Lost)
	p.next.Store(p.p.Next())
	return true
}

// pinnedBackoff spins longer than the default before giving the core
// away: a pinned poller owns its core, but a quiet list still should not
// hold it at 100% for nothing.
var pinnedBackoff = dpdk.Backoff{Spin: 1 << 14, Yield: 1 << 15, MaxSleep: 50 * time.Microsecond}

// startPollers starts every list's pollers, pinned where the spec says,
// and the rate ticker.
func (c *Collector) startPollers() error {
	var started int
	errs := make(chan error, 64)
	for _, id := range c.listIDs {
		for _, p := range c.lists[id].pollers {
			p.setCallback(c.opt.OnEntry)
			c.pollWG.Add(1)
			started++
			go c.runPoller(p, errs)
		}
	}
	var first error
	for range started {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	c.pollWG.Add(1)
	go c.tick()
	return first
}

// stopPollers stops the pollers and the ticker and waits for them.
func (c *Collector) stopPollers() {
	if c.stopPolling.Swap(true) {
		return
	}
	close(c.stopTicker)
	c.pollWG.Wait()
}

func (c *Collector) runPoller(p *poller, started chan<- error) {
	defer c.pollWG.Done()
	bo := dpdk.DefaultBackoff()
	if p.core >= 0 {
		owner := fmt.Sprintf("dta collector %s list %d poller %d", c.spec.Name, p.list.id, p.index)
		if c.opt.Claims != nil {
			if err := c.opt.Claims.Claim(p.core, owner); err != nil {
				started <- fmt.Errorf("dta collector: list %d poller %d: %w", p.list.id, p.index, err)
				return
			}
			defer c.opt.Claims.Release(p.core)
		}
		if err := dpdk.Pin(p.core); err != nil {
			started <- fmt.Errorf("dta collector: list %d poller %d: pinning to core %d: %w", p.list.id, p.index, p.core, err)
			return
		}
		defer runtime.UnlockOSThread()
		bo = pinnedBackoff
	}
	bo.Stats = &p.loop
	started <- nil
	for !c.stopPolling.Load() {
		if p.poll(pollBurst) > 0 || p.checkHole() {
			p.idle = 0
			bo.Busy()
		} else {
			bo.Idle()
		}
	}
}

// tick computes each list's rate once a second.
func (c *Collector) tick() {
	defer c.pollWG.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-c.stopTicker:
			return
		case now := <-t.C:
			for _, l := range c.lists {
				read := l.read()
				if !l.lastTick.IsZero() {
					r := float64(read-l.lastRead) / now.Sub(l.lastTick).Seconds()
					l.rate.Store(math.Float64bits(r))
				}
				l.lastRead, l.lastTick = read, now
			}
		}
	}
}

// read is how many entries the list's pollers have read.
func (l *list) read() uint64 {
	var n uint64
	for _, p := range l.pollers {
		n += p.read.Load()
	}
	return n
}

// lost is how many positions the list's pollers skipped as holes.
func (l *list) lost() uint64 {
	var n uint64
	for _, p := range l.pollers {
		n += p.lost.Load()
	}
	return n
}

// Entry is one Append entry: its position in the list (from 0) and data.
type Entry struct {
	Pos  uint64 `json:"pos"`
	Data uint32 `json:"data"`
}

// recent reads back the latest n entries the pollers have read, oldest
// first. The list's ring is itself the record of recent entries, so the
// pollers keep nothing per entry: an entry is read back from its slot and
// left out when its sequence shows the next lap of the ring has
// overwritten it.
func (l *list) recent(n int) []Entry {
	if n <= 0 {
		return nil
	}
	// The latest n positions below each poller's next: the ones it
	// skipped hold no entry of theirs and are left out below.
	var pos []uint64
	// In the public layout only the latest half ring is the pollers'
	// own: further back, they cleared it for the next lap.
	depth := n
	if l.layout == dtamem.LayoutPublic {
		depth = min(n, int(l.entries/2/l.pollers[0].step))
	}
	for _, p := range l.pollers {
		next := p.next.Load()
		for j := 0; j < depth && next >= p.start+p.step; j++ {
			next -= p.step
			pos = append(pos, next)
		}
	}
	slices.Sort(pos)
	pos = pos[len(pos)-min(len(pos), n):]
	out := make([]Entry, 0, len(pos))
	for _, q := range pos {
		d, ok := l.layout.EntryAt(l.mem, l.entries, q)
		// Read the sequence again: the next lap may have written the
		// data between the two reads. (The public layout has none: its
		// pollers keep the latest half ring, older entries read cleared
		// or as the next lap's.)
		if _, still := l.layout.EntryAt(l.mem, l.entries, q); ok && still {
			out = append(out, Entry{Pos: q, Data: d})
		}
	}
	return out
}

// PollerStatus is one poller's state.
type PollerStatus struct {
	Index int    `json:"index"`
	Core  int    `json:"core"` // -1: unpinned
	Read  uint64 `json:"read"`
	Lost  uint64 `json:"lost"`
}

// ListStatus is an Append list's state: its pollers, how many entries
// they read, how fast, and the latest entries.
type ListStatus struct {
	ID      uint32         `json:"id"`
	Entries uint64         `json:"entries"`
	Batch   int            `json:"batch"`
	Read    uint64         `json:"read"`
	Lost    uint64         `json:"lost"` // positions skipped as holes: writes that never landed
	Rate    float64        `json:"entries_per_second"`
	Pollers []PollerStatus `json:"pollers"`
	Recent  []Entry        `json:"recent,omitempty"`
}

func (l *list) status(batch, recent int) ListStatus {
	st := ListStatus{ID: l.id, Entries: l.entries, Batch: batch, Read: l.read(), Lost: l.lost(),
		Rate: math.Float64frombits(l.rate.Load()), Recent: l.recent(recent)}
	for _, p := range l.pollers {
		st.Pollers = append(st.Pollers, PollerStatus{Index: p.index, Core: p.core, Read: p.read.Load(), Lost: p.lost.Load()})
	}
	return st
}
