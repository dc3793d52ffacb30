package tunesim

import (
	"errors"
	"fmt"
	"time"

	"github.com/rdma-appliance/appliance/bench/fabric"
	"github.com/rdma-appliance/appliance/bench/fabric/workload"
	"github.com/rdma-appliance/appliance/internal/topo"
)

// Loop is a workload posted while the simulation runs, by applications
// that wait for their completions: the paper's perftest bursts and its
// Redis benchmark. A static flow list cannot say either: perftest's QPs
// do not post a burst while the last one is still in flight, and a Redis
// client thread sends its next SET when the reply to its last one
// arrives. An open-loop list at the 39-to-1 incast's 8x overload would
// pile up messages without end and score the backlog.
type Loop struct {
	// Senders each run QPs queue pairs (client threads) to Dst.
	Senders []int
	Dst     int
	QPs     int
	// Size is each message's (request's) bytes.
	Size int64
	// Interval > 0 is perftest's bursts: every Interval each QP whose
	// last message completed posts one more (a busy QP skips the burst).
	// Interval 0 is request/response: each QP posts its next request as
	// soon as the Resp-byte reply (Dst to the sender) to the last one
	// completed.
	Interval time.Duration
	Resp     int64
	// Queue makes a busy QP queue a burst's message behind the one in
	// flight instead of skipping the burst: an RC QP's send queue
	// (perftest's tx-depth, 128 by default, holds far more than the
	// few bursts of a run) runs its messages in order, each the moment
	// the last completes, and each message's FCT counts from its burst.
	// Every watermark then faces the same messages; with skipping, a
	// configuration that finishes the first burst sooner is offered the
	// second one and the others are not, and their FCTs are over
	// different traffic.
	Queue bool
}

// validate checks the loop against the topology.
func (l *Loop) validate(g *topo.Graph) error {
	switch {
	case l.QPs < 1 || l.Size <= 0 || len(l.Senders) == 0:
		return errors.New("loop: QPs, size and senders must be positive")
	case l.Interval < 0 || l.Resp < 0:
		return fmt.Errorf("loop: interval %v, response %d: not negative", l.Interval, l.Resp)
	case l.Interval == 0 && l.Resp <= 0:
		return errors.New("loop: request/response (interval 0) needs a response size")
	case l.Queue && l.Interval == 0:
		return errors.New("loop: queueing is for bursts (an interval); request/response waits for its reply")
	}
	for _, h := range append([]int{l.Dst}, l.Senders...) {
		if h < 0 || h >= len(g.Nodes) || g.Nodes[h].Kind != topo.Host {
			return fmt.Errorf("loop: node %d is not a host", h)
		}
	}
	for _, s := range l.Senders {
		if s == l.Dst {
			return fmt.Errorf("loop: sender %d is the destination", s)
		}
	}
	return nil
}

// Op is one request/response exchange: from the request's post to the
// reply's completion, both as the simulator ran them.
type Op struct {
	QP         int   `json:"qp"`
	Start, End int64 `json:"-"`
}

// Latency is the exchange's completion time (ns).
func (o Op) Latency() int64 { return o.End - o.Start }

// loopRun is one run of a Loop in one simulation: it posts until Stop.
type loopRun struct {
	l    *Loop
	stop int64
	// last is each QP's last flow in the simulation (-1: none yet).
	last []int32
	// role of each flow this loop posted, by the flow's index: its QP,
	// and whether it is a reply.
	qpOf    map[int32]int
	isReply map[int32]bool
	// reqStart is each QP's outstanding request's post time (its burst's
	// time for a queued message); backlog the burst times of each QP's
	// queued messages (Loop.Queue), oldest first.
	reqStart []int64
	backlog  [][]int64
	nextID   int
	skipped  uint64
	posted   uint64
	ops      []Op
}

func newLoopRun(l *Loop, stop int64) *loopRun {
	n := len(l.Senders) * l.QPs
	r := &loopRun{l: l, stop: stop, last: make([]int32, n), qpOf: map[int32]int{}, isReply: map[int32]bool{}, reqStart: make([]int64, n),
		backlog: make([][]int64, n)}
	for i := range r.last {
		r.last[i] = -1
	}
	return r
}

// sender is QP q's host: QPs are numbered sender-major.
func (r *loopRun) sender(q int) int { return r.l.Senders[q/r.l.QPs] }

// add posts flows now; reply marks them as replies.
func (r *loopRun) add(s *fabric.Sim, qps []int, src func(q int) (int, int), size int64, reply bool) {
	if len(qps) == 0 {
		return
	}
	flows := make([]workload.Flow, len(qps))
	for i, q := range qps {
		a, b := src(q)
		flows[i] = workload.Flow{ID: r.nextID, Src: a, Dst: b, Size: size, Start: s.Now(), Prio: fabric.PrioData}
		r.nextID++
	}
	base := int32(s.Flows())
	if err := s.AddFlows(flows); err != nil {
		// The loop was validated against the topology: a refusal here
		// is a bug, not an input.
		panic(fmt.Sprintf("closed-loop workload: %v", err))
	}
	for i, q := range qps {
		fi := base + int32(i)
		r.last[q], r.qpOf[fi] = fi, q
		if reply {
			r.isReply[fi] = true
		} else {
			r.reqStart[q] = s.Now()
			r.posted++
		}
	}
}

func (r *loopRun) request(q int) (int, int) { return r.sender(q), r.l.Dst }
func (r *loopRun) reply(q int) (int, int)   { return r.l.Dst, r.sender(q) }

// start schedules the first burst (or the first requests) at time 0.
func (r *loopRun) start(s *fabric.Sim) {
	if r.l.Interval > 0 {
		s.At(0, r.burst)
		return
	}
	s.At(0, func(s *fabric.Sim) {
		all := make([]int, len(r.last))
		for i := range all {
			all[i] = i
		}
		r.add(s, all, r.request, r.l.Size, false)
	})
}

// burst posts one message on every idle QP and schedules the next burst
// while posting lasts.
func (r *loopRun) burst(s *fabric.Sim) {
	var idle []int
	for q, fi := range r.last {
		if fi >= 0 {
			if _, done, _, _, _ := s.FlowProgress(fi); !done || len(r.backlog[q]) > 0 {
				if r.l.Queue {
					r.backlog[q] = append(r.backlog[q], s.Now())
					r.posted++
				} else {
					r.skipped++
				}
				continue
			}
		}
		idle = append(idle, q)
	}
	r.add(s, idle, r.request, r.l.Size, false)
	if next := s.Now() + int64(r.l.Interval); next < r.stop {
		s.At(next, r.burst)
	}
}

// done is the Done hook's part for request/response: a finished request
// is answered, a finished reply closes the exchange and, while posting
// lasts, the QP sends its next request. The new flows are posted from a
// callback at the same instant, not from inside the simulator's ACK
// handling that called the hook.
func (r *loopRun) done(s *fabric.Sim, fi int32) {
	q, ok := r.qpOf[fi]
	if !ok || (r.l.Interval > 0 && !r.l.Queue) {
		return
	}
	if r.l.Interval > 0 {
		// A queued loop's message is an exchange of its own: from its
		// burst to its completion. The QP's next queued message starts
		// now, keeping its burst's time.
		r.ops = append(r.ops, Op{QP: q, Start: r.reqStart[q], End: s.Now()})
		if len(r.backlog[q]) > 0 {
			at := r.backlog[q][0]
			r.backlog[q] = r.backlog[q][1:]
			s.At(s.Now(), func(s *fabric.Sim) {
				r.add(s, []int{q}, r.request, r.l.Size, false)
				r.posted-- // counted when its burst queued it
				r.reqStart[q] = at
			})
		}
		return
	}
	if !r.isReply[fi] {
		s.At(s.Now(), func(s *fabric.Sim) { r.add(s, []int{q}, r.reply, r.l.Resp, true) })
		return
	}
	r.ops = append(r.ops, Op{QP: q, Start: r.reqStart[q], End: s.Now()})
	if s.Now() < r.stop {
		s.At(s.Now(), func(s *fabric.Sim) { r.add(s, []int{q}, r.request, r.l.Size, false) })
	}
}

// pending is whether a flow this loop posted is still running.
func (r *loopRun) pending(s *fabric.Sim) bool {
	for q, fi := range r.last {
		if len(r.backlog[q]) > 0 {
			return true
		}
		if fi < 0 {
			continue
		}
		if _, done, _, _, _ := s.FlowProgress(fi); !done {
			return true
		}
		// A finished request whose reply is not posted yet is pending
		// too; its reply is posted at the same instant.
		if r.l.Interval == 0 && !r.isReply[fi] {
			return true
		}
	}
	return false
}
