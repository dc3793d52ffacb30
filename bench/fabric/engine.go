// Package fabric is a packet-level simulator of a RoCEv2 fabric: links with
// bandwidth and delay, switches with a shared-buffer MMU, PFC, RED-style ECN
// marking, strict-priority/WRR egress and ECMP, and hosts whose RNICs run
// RC flows segmented at the MTU with go-back-N, ACKs, CNPs and DCQCN (the
// reaction point of package verbs/dcqcn, the one the software RNIC uses).
// Hawkeye, ByteTuning and Hostmesh are evaluated on it, and switch programs
// observe it through hooks.
//
// The engine is a discrete-event loop over integer nanoseconds. Events and
// packets live in preallocated pools indexed by int32 and the event queue is
// a calendar queue of small structs (queue.go), so a running simulation allocates nothing
// per packet or event once its pools have grown to the in-flight maximum;
// memory is bounded by the topology and the packets in flight, not by the
// simulated time. The same seed gives the same run, event for event, and
// the order does not depend on how the fabric is partitioned: events at one
// time are ordered on the node that scheduled them and that node's own
// count (no global counter), and every switch and faulty link draws from a
// random stream of its own, so a parallel run (parallel.go) gives the
// sequential run's results.
package fabric

import (
	"bufio"
	"context"
	"errors"
)

// event is one scheduled happening. kind says what; a and b are its
// arguments (a port, a packet, a flow, a host, a generation). key breaks
// ties between events at the same t: the scheduling entity in the top
// bits, that entity's count of events scheduled below (see Sim.schedule).
type event struct {
	t    int64
	key  uint64
	kind uint8
	a, b int32
}

// Tie-break keys: an entity is a node (its index + 1) or 0, the fabric as
// a whole (setup, Sim.At callbacks, time-series samples); entityBits of
// count leave room for 2^40 events scheduled by one node.
const (
	entityBits  = 40
	maxEntities = 1 << (64 - entityBits)
)

const (
	evTxDone       uint8 = iota // a port finished serialising its packet
	evArrive                    // a packet reaches a port's node (a port, b packet)
	evFlowStart                 // a flow's first packet may go (a flow)
	evHostWake                  // a host's RNIC may send again (a host)
	evRTO                       // a flow's retransmission timer (a flow, b generation)
	evPortWake                  // a paused port's pause ran out (a port)
	evPauseRefresh              // a switch port still congested re-sends XOFF (a port, b prio)
	evSample                    // time-series sample
	evInject                    // a faulty host sends a PAUSE (a host)
	evUser                      // Sim.At callbacks (a index)
)

// Sim is a running simulation.
type Sim struct {
	now int64
	q   eventQueue
	// next[e] is the key of the next event entity e schedules (e in the
	// top bits, its count below); the queue's key points at the entry of
	// the entity handling the current event (next[0] outside events and
	// in whole-fabric ones). They make event keys that a partitioned run
	// reproduces: a node handles the same events in the same order in
	// any partitioning, so it schedules the same keys.
	next []uint64
	pkts []Packet
	free int32 // head of the free packet list (-1: none)
	// Events counts events handled; Hops packet arrivals at nodes (a
	// packet crossing one link is one hop).
	Events, Hops uint64

	net      *network
	series   *bufio.Writer
	user     []func(*Sim)
	userFree []int32
	cfg      Config
	stats    Stats
	res      *Results
	// Progress, when set, is called about every ProgressEvery of
	// simulated time with the time reached.
	Progress      func(now int64)
	ProgressEvery int64
	// par is the parallel runner of a partitioned simulation (nil: a
	// sequential one).
	par *parallel
}

// Now is the simulated time in nanoseconds.
func (s *Sim) Now() int64 { return s.now }

// schedule adds an event at time t, keyed by the entity handling the
// current event.
func (s *Sim) schedule(t int64, kind uint8, a, b int32) {
	s.q.push(event{t: t, kind: kind, a: a, b: b})
}

// as makes entity e (a node's index + 1, or 0) the one handling events.
func (s *Sim) as(e int32) { s.q.key = &s.next[e] }

// At runs f at simulated time t (hooks and experiments use it to inject
// faults or read state mid-run). It panics on a simulation that runs in
// parallel (RunParallel), where no callback sees the whole fabric.
func (s *Sim) At(t int64, f func(*Sim)) {
	if err := s.partitioned(); err != nil {
		panic(err)
	}
	t = max(t, s.now) // the past is now: time does not run backwards
	// Slots of callbacks that ran are reused: periodic callbacks keep
	// the table as small as the callbacks pending.
	var i int32
	if n := len(s.userFree); n > 0 {
		i = s.userFree[n-1]
		s.userFree = s.userFree[:n-1]
		s.user[i] = f
	} else {
		s.user = append(s.user, f)
		i = int32(len(s.user) - 1)
	}
	s.schedule(t, evUser, i, 0)
}

// allocPacket takes a packet from the pool.
func (s *Sim) allocPacket() int32 {
	if s.free >= 0 {
		i := s.free
		s.free = s.pkts[i].next
		s.pkts[i] = Packet{next: -1}
		return i
	}
	s.pkts = append(s.pkts, Packet{next: -1})
	return int32(len(s.pkts) - 1)
}

// freePacket returns a packet to the pool.
func (s *Sim) freePacket(i int32) {
	s.pkts[i].next = s.free
	s.pkts[i].Kind = 0
	s.free = i
}

// InFlight is how many packets exist now (queued, on a link, or being
// processed).
func (s *Sim) InFlight() int {
	if s.par != nil {
		return s.par.inFlight()
	}
	n := len(s.pkts)
	for i := s.free; i >= 0; i = s.pkts[i].next {
		n--
	}
	return n
}

// ErrCanceled is returned by Run when its context ends first.
var ErrCanceled = errors.New("fabric: run canceled")

// Run handles events until simulated time until (inclusive) or until
// nothing is left to happen, and returns the results so far. It checks ctx
// every few thousand events. A simulation partitioned by RunParallel
// goes on in parallel.
func (s *Sim) Run(ctx context.Context, until int64) (*Results, error) {
	if s.par != nil {
		return s.runParallel(ctx, until)
	}
	nextProgress := s.now + s.ProgressEvery
	for {
		if ctx.Err() != nil {
			s.as(0)
			s.finish(s.now)
			return s.res, ErrCanceled
		}
		more := s.drain(until, 4096)
		if s.Progress != nil && s.now >= nextProgress {
			s.Progress(s.now)
			nextProgress = s.now + s.ProgressEvery
		}
		if !more {
			break
		}
	}
	s.as(0) // calls between runs act for the whole fabric
	if until > s.now && s.q.len() > 0 {
		s.now = until
	}
	s.finish(s.now)
	return s.res, nil
}

// drain handles the events due at or before until, at most limit of
// them, and says whether it stopped at the limit (more may be due). Run
// checks its context and progress between such batches; a partition runs
// a window in one.
func (s *Sim) drain(until int64, limit int) bool {
	for range limit {
		e, ok := s.q.popUntil(until)
		if !ok {
			return false
		}
		s.now = e.t
		s.Events++
		s.dispatch(e)
	}
	return true
}

// RunFor runs d nanoseconds past now.
func (s *Sim) RunFor(ctx context.Context, d int64) (*Results, error) { return s.Run(ctx, s.now+d) }

// dispatch handles an event as the entity it belongs to: the node whose
// port, host or flow sender it concerns.
func (s *Sim) dispatch(e event) {
	n := s.net
	switch e.kind {
	case evTxDone:
		s.q.key = n.portKey[e.a]
		n.txDone(e.a)
	case evArrive:
		s.q.key = n.portKey[e.a]
		s.Hops++
		n.arrive(e.a, e.b)
	case evFlowStart:
		s.as(int32(n.flows[e.a].f.Src) + 1)
		n.flowStart(e.a)
	case evHostWake:
		s.as(n.hosts[e.a].node + 1)
		n.hosts[e.a].wakePending = false
		n.kick(n.hosts[e.a].port)
	case evRTO:
		s.as(int32(n.flows[e.a].f.Src) + 1)
		n.rto(e.a, e.b)
	case evPortWake:
		s.q.key = n.portKey[e.a]
		n.kick(e.a)
	case evPauseRefresh:
		s.q.key = n.portKey[e.a]
		n.pauseRefresh(e.a, int(e.b))
	case evSample:
		s.as(0)
		n.sample()
	case evInject:
		s.as(n.hosts[e.a].node + 1)
		n.inject(e.a)
	case evUser:
		s.as(0)
		f := s.user[e.a]
		s.user[e.a] = nil
		s.userFree = append(s.userFree, e.a)
		f(s)
	}
}
