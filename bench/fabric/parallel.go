package fabric

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"

	"github.com/rdma-appliance/appliance/internal/topo"
)

// The parallel runner splits the fabric into partitions (the pods of a
// fat-tree, the leaves of a leaf-spine, with the top layer's switches
// spread over them) and runs each on a goroutine of its own, with its own
// event queue and packet pool, under conservative synchronisation: a frame
// that leaves one partition for another reaches it a link delay later, so
// with lookahead L, the least delay of a link between partitions, every
// partition may handle the events of [T, T+L) once all of them have
// handled everything before T. Frames crossing over are handed on at the
// barrier that ends such a window. Events carry keys that do not depend on
// the partitioning (engine.go), and switches draw from random streams of
// their own, so every partition handles its events in the order the
// sequential run does and the results are the sequential run's, byte for
// byte.
//
// Whatever reaches across the fabric at one instant stays sequential:
// hooks (switch programs see every partition), Sim.At callbacks, time
// series samples (they read every port at once), and link faults and ACLs
// (their counters are fabric-wide). RunParallel refuses a simulation with
// any of these, and once a simulation runs in parallel it stays so: the
// calls that would add them or add traffic to it (At, SetHooks, SetSeries,
// AddFlow, AddFlows, Send, AddFault, AddLinkFault, KillRNIC, AddACL) are
// refused with an error, or a panic where they return none.

// ErrSequentialOnly is what RunParallel returns (wrapped, with the
// reason) for a simulation that must run sequentially.
var ErrSequentialOnly = errors.New("fabric: this simulation runs sequentially only")

// crossing is a frame on its way to another partition: its arrival event
// (b is filled in by the receiver with the packet's index in its pool).
type crossing struct {
	e event
	p Packet
}

// parallel is a partitioned simulation's runner state.
type parallel struct {
	parts []*Sim
	look  int64
	// out[src][dst][parity] are the frames src sent to dst in the windows
	// of that parity: dst takes them at the start of the next window
	// while src fills the other parity.
	out    [][][2][]crossing
	parity int
	// last is the open window's last instant (stopRun: no more
	// windows). The coordinator writes it, and flips parity, before it
	// posts the workers' start gates; they read both after.
	last int64
}

// stopRun, as a window's last instant, tells the workers to return.
const stopRun = math.MinInt64

// partitioned says whether the simulation runs in parallel (and so
// refuses what would reach across partitions).
func (s *Sim) partitioned() error {
	if s.par != nil {
		return errors.New("fabric: the simulation runs in parallel: no more traffic, faults or hooks")
	}
	return nil
}

// sequentialOnly says why the simulation cannot be partitioned, or nil.
func (s *Sim) sequentialOnly() error {
	n := s.net
	switch {
	case n.hooks != nil:
		return fmt.Errorf("%w: hooks are set", ErrSequentialOnly)
	case len(s.user) > len(s.userFree):
		return fmt.Errorf("%w: Sim.At callbacks are pending", ErrSequentialOnly)
	case s.cfg.SampleInterval > 0 || s.series != nil:
		return fmt.Errorf("%w: time series are sampled", ErrSequentialOnly)
	case n.faults != nil:
		return fmt.Errorf("%w: link faults or ACLs are armed", ErrSequentialOnly)
	case s.Events > 0 || s.InFlight() > 0:
		return fmt.Errorf("%w: it already ran sequentially or holds packets", ErrSequentialOnly)
	}
	return nil
}

// RunParallel is Run on up to parts partitions (0: GOMAXPROCS), each on a
// goroutine of its own; the results are those Run gives. The first call
// partitions the simulation for good: later Run, RunFor and RunParallel
// calls go on in parallel with the same partitions. It returns an error
// wrapping ErrSequentialOnly, and runs nothing, for a simulation that
// must run sequentially (see parallel.go), that already ran sequentially,
// or whose fabric does not split (one group of switches, or a link of no
// delay between groups: no lookahead).
func (s *Sim) RunParallel(ctx context.Context, until int64, parts int) (*Results, error) {
	if s.par == nil {
		if err := s.sequentialOnly(); err != nil {
			return nil, err
		}
		if parts <= 0 {
			parts = runtimeProcs()
		}
		if err := s.partition(parts); err != nil {
			return nil, err
		}
	}
	return s.runParallel(ctx, until)
}

// Partitions is how many partitions a parallel simulation runs on (0 for
// a sequential one).
func (s *Sim) Partitions() int {
	if s.par == nil {
		return 0
	}
	return len(s.par.parts)
}

// Groups splits a topology for parallel runs: the components left when
// the top layer ("core", "spine") is taken away, a fat-tree's pods or a
// leaf-spine's leaves with their hosts; without such a layer, each switch
// with the hosts on it. It returns the group of every node and how many
// groups there are; top-layer switches are in group -1.
func Groups(g *topo.Graph) (group []int32, n int) {
	group = make([]int32, len(g.Nodes))
	top := func(i int) bool {
		nd := &g.Nodes[i]
		return nd.Kind == topo.Switch && (nd.Layer == "core" || nd.Layer == "spine")
	}
	label := func(keep func(i, peer int) bool) int {
		for i := range group {
			group[i] = -1
		}
		n := 0
		var stack []int
		for i := range g.Nodes {
			if group[i] >= 0 || top(i) {
				continue
			}
			group[i] = int32(n)
			stack = append(stack[:0], i)
			for len(stack) > 0 {
				x := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				for _, ref := range g.Ports(x) {
					if group[ref.Peer] < 0 && !top(ref.Peer) && keep(x, ref.Peer) {
						group[ref.Peer] = int32(n)
						stack = append(stack, ref.Peer)
					}
				}
			}
			n++
		}
		return n
	}
	if n = label(func(int, int) bool { return true }); n >= 2 {
		return group, n
	}
	// No top layer splits it: a switch and its hosts make a group.
	n = label(func(a, b int) bool { return g.Nodes[a].Kind != g.Nodes[b].Kind })
	return group, n
}

// partition splits the fabric into up to parts partitions and makes their
// simulations.
func (s *Sim) partition(parts int) error {
	n := s.net
	g := n.g
	group, ng := Groups(g)
	if ng < 2 || parts < 2 {
		return fmt.Errorf("%w: the fabric makes %d group(s) for %d partition(s)", ErrSequentialOnly, ng, parts)
	}
	parts = min(parts, ng)
	// Groups to partitions in runs of neighbours, top-layer switches
	// spread evenly over them.
	nodePart := make([]int32, len(g.Nodes))
	var tops []int
	for i, gr := range group {
		if gr < 0 {
			tops = append(tops, i)
			continue
		}
		nodePart[i] = gr * int32(parts) / int32(ng)
	}
	for j, i := range tops {
		nodePart[i] = int32(j * parts / len(tops))
	}
	look := int64(math.MaxInt64)
	for _, l := range g.Links {
		if nodePart[l.A] != nodePart[l.B] {
			look = min(look, l.Delay)
		}
	}
	switch {
	case look <= 0:
		return fmt.Errorf("%w: a link between partitions has no delay (no lookahead)", ErrSequentialOnly)
	case look == math.MaxInt64:
		// No link between partitions (New refuses a disconnected
		// fabric, so this is defensive): one window may run to until.
		look = math.MaxInt64 / 2
	}
	p := &parallel{look: look, out: make([][][2][]crossing, parts)}
	for i := range n.ports {
		pt := &n.ports[i]
		if dst := nodePart[n.ports[pt.peer].node]; dst != nodePart[pt.node] {
			pt.xpart = dst
		}
	}
	for i := range p.out {
		p.out[i] = make([][2][]crossing, parts)
	}
	// Each partition's simulation shares the fabric's state (ports,
	// switches, hosts, flows: each touches only its own nodes' entries)
	// and has its own clock, queue, packets and counters, and its own
	// copy of the per-entity key counts. It moves only its own nodes'
	// counts on, as the sequential run would, but a count is pushed on
	// with every event scheduled: with one array shared, partitions'
	// nodes whose counts share a cache line made the line bounce
	// between cores at every event (a k=4 partition's events cost 1.8
	// times the sequential run's).
	for k := range parts {
		sub := &Sim{now: s.now, next: slices.Clone(s.next), free: -1, cfg: s.cfg}
		sub.as(0)
		net := *n
		net.s = sub
		net.portKey = n.portKeys(sub.next)
		net.par, net.self = p, int32(k)
		sub.net = &net
		p.parts = append(p.parts, sub)
	}
	// Pending events (flow starts, injected pauses) go to the partition
	// of the node they belong to.
	for {
		e, ok := s.q.popUntil(math.MaxInt64)
		if !ok {
			break
		}
		p.parts[nodePart[n.owner(&e)]].q.pushKeyed(e)
	}
	s.par = p
	return nil
}

// owner is the node an event belongs to (every kind a parallel run has).
func (n *network) owner(e *event) int32 {
	switch e.kind {
	case evFlowStart, evRTO:
		return int32(n.flows[e.a].f.Src)
	case evHostWake, evInject:
		return n.hosts[e.a].node
	}
	return n.ports[e.a].node
}

// cross hands frame i, which just left port pi for a port of partition
// dst, to that partition: it arrives after the link's delay.
func (n *network) cross(pi, i int32, dst int32) {
	s := n.s
	pt := &n.ports[pi]
	c := crossing{e: event{t: s.now + pt.delay, key: *s.q.key, kind: evArrive, a: pt.peer}, p: s.pkts[i]}
	*s.q.key++
	o := &n.par.out[n.self][dst][n.par.parity]
	*o = append(*o, c)
	s.freePacket(i)
}

// take puts the frames other partitions sent to partition k in the last
// window into its queue and pool.
func (p *parallel) take(k int) {
	s := p.parts[k]
	prev := p.parity ^ 1
	for src := range p.out {
		in := &p.out[src][k][prev]
		for _, c := range *in {
			i := s.allocPacket()
			s.pkts[i] = c.p
			s.pkts[i].next = -1
			c.e.b = i
			s.q.pushKeyed(c.e)
		}
		*in = (*in)[:0]
	}
}

// window runs partition k through the window that ends at last.
func (p *parallel) window(k int, last int64) {
	p.take(k)
	p.parts[k].drain(last, math.MaxInt)
}

// windows runs worker w's partitions (every nw-th from w) through the
// window that ends at last. A worker runs its partitions one after the
// other: each partition handles its own events whatever goroutine runs
// it, so the results do not depend on the number of workers.
func (p *parallel) windows(w, nw int, last int64) {
	for k := w; k < len(p.parts); k += nw {
		p.window(k, last)
	}
}

// next is the earliest instant anything is pending at, and whether
// anything is.
func (p *parallel) next() (int64, bool) {
	t, any := int64(math.MaxInt64), false
	for k, s := range p.parts {
		if u, ok := s.q.peek(); ok {
			t, any = min(t, u), true
		}
		for src := range p.out {
			for _, c := range p.out[src][k][p.parity] {
				t, any = min(t, c.e.t), true
			}
		}
	}
	return t, any
}

// workers is how many goroutines run the partitions' windows: no more
// than the processors Go may run at once and the CPUs it may run on. A
// goroutine per partition beyond that only queues for a processor, and
// its barrier waits become waits for the scheduler.
func (p *parallel) workers() int {
	return max(1, min(len(p.parts), runtimeProcs(), runtime.NumCPU()))
}

func (s *Sim) runParallel(ctx context.Context, until int64) (*Results, error) {
	p := s.par
	// The calling goroutine is worker 0 and the coordinator: between
	// windows, while the others wait at their start gates, it finds the
	// next window and checks the context and progress. Workers 1.. each
	// wait at a start gate of their own and post done when their
	// partitions reach the window's end.
	nw := p.workers()
	start := make([]*gate, nw)
	done := newGate()
	for w := 1; w < nw; w++ {
		g := newGate()
		start[w] = g
		go func() {
			for n := uint64(1); ; n++ {
				g.wait(n)
				last := p.last
				if last != stopRun {
					p.windows(w, nw, last)
				}
				done.post()
				if last == stopRun {
					return
				}
			}
		}()
	}
	var posted uint64 // the done posts the coordinator waits for
	open := func(last int64) {
		p.last = last
		for _, g := range start[1:] {
			g.post()
		}
		posted += uint64(nw - 1)
	}
	// Wait for the workers to return, so that none still reads the
	// runner's state when the next Run of the simulation writes it.
	defer func() {
		open(stopRun)
		done.wait(posted)
	}()
	nextProgress := s.now + s.ProgressEvery
	var err error
	for {
		if ctx.Err() != nil {
			err = ErrCanceled
			break
		}
		t, ok := p.next()
		if !ok || t > until {
			break
		}
		// Flip first: the frames of the last window become the ones
		// to take, and this window's go to the other parity.
		p.parity ^= 1
		last := until
		if t <= until-p.look { // t+look-1 < until, without overflow
			last = t + p.look - 1
		}
		open(last)
		p.windows(0, nw, last)
		done.wait(posted)
		if s.Progress != nil && last >= nextProgress {
			s.Progress(last)
			nextProgress = last + s.ProgressEvery
		}
	}
	// The sequential run's clock: its last event's time, or until when
	// more is left to happen.
	s.Events, s.Hops = 0, 0
	for _, sub := range p.parts {
		s.now = max(s.now, sub.now)
		s.Events += sub.Events
		s.Hops += sub.Hops
	}
	if _, more := p.next(); err == nil && more && until > s.now {
		s.now = until
	}
	for _, sub := range p.parts {
		sub.now = s.now
	}
	s.finish(s.now)
	return s.res, err
}

// inFlight counts the packets of every partition and those crossing.
func (p *parallel) inFlight() int {
	n := 0
	for k, s := range p.parts {
		n += len(s.pkts)
		for i := s.free; i >= 0; i = s.pkts[i].next {
			n--
		}
		for src := range p.out {
			n += len(p.out[src][k][p.parity])
		}
	}
	return n
}

// stats sums the partitions' counters.
func (p *parallel) stats() Stats {
	var st Stats
	for _, s := range p.parts {
		st.add(&s.stats)
	}
	return st
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }
