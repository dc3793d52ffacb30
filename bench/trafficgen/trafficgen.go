// Package trafficgen is Lumina's RC traffic generator over any verbs
// provider: a requester and a responder, num-qps RC connections between
// them, num-msgs-per-qp messages of message-size bytes per QP in WRITE,
// READ or SEND, at most tx-depth outstanding per QP, with the retransmit
// timeout and retry count of the test. Before traffic starts, the runtime
// metadata of every connection (IPs, QPNs, initial PSNs) goes to a hook,
// which is how the injector learns what its intents mean. Afterwards the
// responder's memory is compared with what was sent, and each message's
// completion time is reported.
//
// This file runs both ends in one process (the lab and tests); the
// two-host form exchanges the same metadata over TCP.
package trafficgen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/verbs"
)

// Params are the traffic keys of a Lumina test.
type Params struct {
	Verb intent.Verb // write, read, send, send_read
	// SendQPs is, for send_read, how many of the first QPs carry SEND;
	// the others carry READ.
	SendQPs     int
	NumQPs      int
	MsgsPerQP   int
	MessageSize int
	MTU         int // path MTU in bytes
	TxDepth     int // outstanding messages per QP (Lumina: 1 for non-ECN events)
	// Timeout is the IB local ACK timeout exponent (min-retransmit-timeout):
	// 4.096 us x 2^Timeout; RetryCnt is max-retransmit-retry.
	Timeout  uint8
	RetryCnt uint8
	// NoRetry makes a zero RetryCnt mean no retransmissions instead of
	// the default of 7.
	NoRetry bool
	// Rate, when positive, paces each QP to this many bits per second:
	// message m of a QP is posted no earlier than m x message-size x 8 /
	// Rate after the start (each message itself goes at line rate).
	Rate float64
	// BarrierSync holds every QP's message m+1 until every QP has
	// completed message m (Lumina's barrier-sync), so the QPs' messages
	// go out in rounds.
	BarrierSync bool
	// Seed fixes the initial PSNs and the data pattern.
	Seed uint64
	// Driver, when set, is the clock of the run and what waits for
	// completions: a simulation that steps the devices on virtual time
	// (the Lumina twin) runs them while the generator waits, so message
	// completion times are the model's. Nil: the wall clock, and devices
	// that run on their own.
	Driver Driver `json:"-"`
}

// Driver is the time and the waiting of a run on a simulated testbed.
type Driver interface {
	// Now is the simulation's time.
	Now() time.Time
	// Wait runs the simulation until notify has a value (which it takes),
	// the time reaches until (when not zero) or ctx ends; it fails when
	// nothing is left to happen, so a run can never wait forever.
	Wait(ctx context.Context, notify <-chan struct{}, until time.Time) error
}

// wallClock is the Driver of runs on devices that run themselves.
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func (wallClock) Wait(ctx context.Context, notify <-chan struct{}, until time.Time) error {
	wait := time.Millisecond
	if !until.IsZero() {
		wait = min(wait, max(time.Until(until), 0))
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-notify:
	case <-t.C:
	case <-ctx.Done():
	}
	return nil
}

func (p Params) driver() Driver {
	if p.Driver == nil {
		return wallClock{}
	}
	return p.Driver
}

// Defaults fills what is zero.
func (p Params) Defaults() Params {
	if p.Verb == "" {
		p.Verb = intent.VerbWrite
	}
	if p.NumQPs == 0 {
		p.NumQPs = 1
	}
	if p.MsgsPerQP == 0 {
		p.MsgsPerQP = 1
	}
	if p.MessageSize == 0 {
		p.MessageSize = 4096
	}
	if p.MTU == 0 {
		p.MTU = 1024
	}
	if p.TxDepth == 0 {
		p.TxDepth = 1
	}
	if p.Timeout == 0 {
		p.Timeout = 14
	}
	if p.RetryCnt == 0 && !p.NoRetry {
		p.RetryCnt = 7
	}
	return p
}

// verbOf is QP i's operation: send_read runs SEND on the first SendQPs
// QPs and READ on the rest.
func (p Params) verbOf(i int) intent.Verb {
	if p.Verb != intent.VerbSendRead {
		return p.Verb
	}
	if i < p.SendQPs {
		return intent.VerbSend
	}
	return intent.VerbRead
}

// Validate checks the parameters as Lumina does.
func (p Params) Validate() error {
	switch p.Verb {
	case intent.VerbWrite, intent.VerbRead, intent.VerbSend:
	case intent.VerbSendRead:
		if p.SendQPs < 0 || p.SendQPs > p.NumQPs {
			return fmt.Errorf("trafficgen: send_read with %d SEND QPs of %d", p.SendQPs, p.NumQPs)
		}
	default:
		return fmt.Errorf("trafficgen: verb %q: write, read, send or send_read", p.Verb)
	}
	switch {
	case p.NumQPs < 1 || p.NumQPs > 1024:
		return fmt.Errorf("trafficgen: num-qps %d: want 1..1024", p.NumQPs)
	case p.MsgsPerQP < 1:
		return fmt.Errorf("trafficgen: num-msgs-per-qp %d", p.MsgsPerQP)
	case p.MessageSize < 1 || p.MessageSize > 1<<30:
		return fmt.Errorf("trafficgen: message-size %d: want 1..1 GiB", p.MessageSize)
	case verbs.MTUFromBytes(p.MTU) == 0:
		return fmt.Errorf("trafficgen: mtu %d: want 256, 512, 1024, 2048 or 4096", p.MTU)
	case p.TxDepth < 1 || p.TxDepth > 1024:
		return fmt.Errorf("trafficgen: tx-depth %d: want 1..1024", p.TxDepth)
	case p.Timeout > 31:
		return fmt.Errorf("trafficgen: min-retransmit-timeout %d: want 0..31", p.Timeout)
	case p.RetryCnt > 7:
		return fmt.Errorf("trafficgen: max-retransmit-retry %d: want 0..7", p.RetryCnt)
	case p.Rate < 0:
		return fmt.Errorf("trafficgen: negative rate")
	}
	return nil
}

// Endpoint is one host of the test: a device and the GID it uses.
type Endpoint struct {
	Dev      verbs.Device
	GID      netip.Addr
	GIDIndex int
	// MultiGID, when set, gives QP i the GID MultiGID[i % len] at index
	// GIDIndex + i % len (Lumina's multi-gid: each QP on its own GID, so
	// each connection is its own flow for ECMP and CNP pacing).
	MultiGID []netip.Addr
}

// gid is QP i's GID and its index.
func (e *Endpoint) gid(i int) (netip.Addr, int) {
	if len(e.MultiGID) == 0 {
		return e.GID, e.GIDIndex
	}
	k := i % len(e.MultiGID)
	return e.MultiGID[k], e.GIDIndex + k
}

// QPResult is one connection's outcome.
type QPResult struct {
	Conn intent.Conn `json:"conn"`
	// MCT is each message's completion time: from posting to its
	// completion (for tx-depth 1, the message's whole life).
	MCT    []time.Duration `json:"mct_ns"`
	Bytes  int64           `json:"bytes"`
	Status string          `json:"status"` // "ok", or the first failed completion
	// DataOK says whether the destination memory holds what was sent.
	DataOK bool `json:"data_ok"`
}

// Result is a run's outcome.
type Result struct {
	Params  Params        `json:"params"`
	QPs     []QPResult    `json:"qps"`
	Elapsed time.Duration `json:"elapsed_ns"`
	// Goodput is the bytes moved over the elapsed time, in bits per second.
	Goodput float64 `json:"goodput_bps"`
}

// OK says whether every message completed and every byte arrived.
func (r *Result) OK() bool {
	for _, q := range r.QPs {
		if q.Status != "ok" || !q.DataOK {
			return false
		}
	}
	return len(r.QPs) > 0
}

// Conns is the metadata of every connection, in QP order.
func (r *Result) Conns() []intent.Conn {
	out := make([]intent.Conn, len(r.QPs))
	for i, q := range r.QPs {
		out[i] = q.Conn
	}
	return out
}

// ErrFailed is wrapped when a message completes in error.
var ErrFailed = errors.New("trafficgen: message failed")

// ErrPeer is wrapped when the other side breaks the exchange.
var ErrPeer = errors.New("trafficgen: peer")

// side is one end of every connection.
type side struct {
	ep  Endpoint
	pd  verbs.PD
	cq  verbs.CQ
	mr  verbs.MR
	buf []byte
	qps []verbs.QP
	psn []uint32
}

// regionSize is each QP's share of a side's buffer: every message of the
// QP has its own place, so the final memory shows each one.
func (p Params) regionSize() int { return p.MsgsPerQP * p.MessageSize }

func newSide(ep Endpoint, p Params, rng *rand.Rand) (*side, error) {
	s := &side{ep: ep}
	var err error
	if s.pd, err = ep.Dev.AllocPD(); err != nil {
		return s, err
	}
	if s.cq, err = ep.Dev.CreateCQ(verbs.CQAttr{CQE: min(p.NumQPs*p.TxDepth*2+64, 65536)}); err != nil {
		return s, err
	}
	if s.buf, err = verbs.AllocBuffer(p.NumQPs*p.regionSize(), false); err != nil {
		return s, err
	}
	if s.mr, err = s.pd.RegMR(s.buf, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead); err != nil {
		return s, err
	}
	for range p.NumQPs {
		qp, err := s.pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: s.cq, RecvCQ: s.cq,
			Cap: verbs.QPCap{MaxSendWR: p.TxDepth, MaxRecvWR: p.TxDepth, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			return s, err
		}
		s.qps = append(s.qps, qp)
		s.psn = append(s.psn, rng.Uint32()&0xffffff)
		err = qp.Modify(&verbs.QPAttr{State: verbs.QPSInit, Port: 1,
			AccessFlags: verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead},
			verbs.AttrState|verbs.AttrPKeyIndex|verbs.AttrPort|verbs.AttrAccessFlags)
		if err != nil {
			return s, fmt.Errorf("QP %#x to INIT: %w", qp.QPN(), err)
		}
	}
	return s, nil
}

// QPInfo is what one side tells the other about one of its QPs: the
// metadata of the exchange (perftest's and Lumina's key message).
type QPInfo struct {
	QPN  uint32     `json:"qpn"`
	PSN  uint32     `json:"psn"`
	GID  netip.Addr `json:"gid"`
	Addr uint64     `json:"addr"` // the QP's memory region
	RKey uint32     `json:"rkey"`
}

// info describes s's QPs to the peer.
func (s *side) info(p Params) []QPInfo {
	out := make([]QPInfo, len(s.qps))
	for i, qp := range s.qps {
		g, _ := s.ep.gid(i)
		out[i] = QPInfo{QPN: qp.QPN(), PSN: s.psn[i], GID: g, Addr: s.mr.Addr() + uint64(i*p.regionSize()), RKey: s.mr.RKey()}
	}
	return out
}

// connect brings QP i of s to RTS towards the peer's QP i.
func (s *side) connect(remote []QPInfo, p Params) error {
	if len(remote) != len(s.qps) {
		return fmt.Errorf("%w: the peer has %d QPs, this side %d", ErrPeer, len(remote), len(s.qps))
	}
	for i, qp := range s.qps {
		_, sidx := s.ep.gid(i)
		r := remote[i]
		err := qp.Modify(&verbs.QPAttr{State: verbs.QPSRTR, PathMTU: verbs.MTUFromBytes(p.MTU), DestQPN: r.QPN,
			RQPSN: r.PSN, MaxDestRdAtomic: 16, MinRNRTimer: 12,
			AH: verbs.AHAttr{DGID: verbs.GIDFromAddr(r.GID), SGIDIndex: sidx, HopLimit: 64, Port: 1}},
			verbs.AttrState|verbs.AttrAV|verbs.AttrPathMTU|verbs.AttrDestQPN|verbs.AttrRQPSN|
				verbs.AttrMaxDestRdAtomic|verbs.AttrMinRNRTimer)
		if err != nil {
			return fmt.Errorf("QP %#x to RTR: %w", qp.QPN(), err)
		}
		err = qp.Modify(&verbs.QPAttr{State: verbs.QPSRTS, Timeout: p.Timeout, RetryCnt: p.RetryCnt, RNRRetry: 7,
			SQPSN: s.psn[i], MaxRdAtomic: 16},
			verbs.AttrState|verbs.AttrTimeout|verbs.AttrRetryCnt|verbs.AttrRNRRetry|verbs.AttrSQPSN|verbs.AttrMaxQPRdAtomic)
		if err != nil {
			return fmt.Errorf("QP %#x to RTS: %w", qp.QPN(), err)
		}
	}
	return nil
}

// conns pairs the requester's and the responder's QPs as metadata.
func conns(req, resp []QPInfo) []intent.Conn {
	out := make([]intent.Conn, len(req))
	for i := range req {
		out[i] = intent.Conn{RequesterIP: req[i].GID, RequesterQPN: req[i].QPN, RequesterIPSN: req[i].PSN,
			ResponderIP: resp[i].GID, ResponderQPN: resp[i].QPN, ResponderIPSN: resp[i].PSN}
	}
	return out
}

// regions are QP i's source and destination memory on this side for
// role: a requester sources WRITE and SEND and sinks READ, a responder the
// opposite. Either may be nil.
func (s *side) regions(p Params, i int, requester bool) (src, dst []byte) {
	r := s.buf[i*p.regionSize() : (i+1)*p.regionSize()]
	if (p.verbOf(i) == intent.VerbRead) != requester {
		return r, nil
	}
	return nil, r
}

// pattern is QP i's data: both hosts compute it from the seed, so each
// can check what it received without the other's memory.
func pattern(p Params, i int, b []byte) {
	rng := rand.New(rand.NewPCG(p.Seed^0x7061747465726e, uint64(i)))
	for k := 0; k < len(b); k += 8 {
		v := rng.Uint64()
		for j := 0; j < 8 && k+j < len(b); j++ {
			b[k+j] = byte(v >> (8 * j))
		}
	}
}

// prepare fills the sources and clears the destinations of a side.
func (s *side) prepare(p Params, requester bool) {
	for i := range s.qps {
		src, dst := s.regions(p, i, requester)
		if src != nil {
			pattern(p, i, src)
		}
		clear(dst)
	}
}

// check reports, per QP, whether the first n[i] bytes of each
// destination region on this side hold the pattern (true for QPs this
// side does not receive data on).
func (s *side) check(p Params, requester bool, n []int64) []bool {
	ok := make([]bool, len(s.qps))
	want := make([]byte, p.regionSize())
	for i := range s.qps {
		_, dst := s.regions(p, i, requester)
		if dst == nil {
			ok[i] = true
			continue
		}
		pattern(p, i, want)
		ok[i] = string(dst[:n[i]]) == string(want[:n[i]])
	}
	return ok
}

func (s *side) close() {
	for _, qp := range s.qps {
		_ = qp.Destroy()
	}
	if s.mr != nil {
		_ = s.mr.Dereg()
	}
	if s.cq != nil {
		_ = s.cq.Destroy()
	}
	if s.pd != nil {
		_ = s.pd.Dealloc()
	}
	if s.buf != nil {
		_ = verbs.FreeBuffer(s.buf)
	}
}

// Run connects num-qps QPs between req and resp, hands their metadata to
// ready (nil skips it; an error aborts before any traffic), then runs the
// messages and checks the memory. A message that completes in error ends
// its QP (the rest of its messages are not sent) and Run returns the
// Result with ErrFailed.
func Run(ctx context.Context, req, resp Endpoint, p Params, ready func([]intent.Conn) error) (*Result, error) {
	p = p.Defaults()
	if err := p.Validate(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(p.Seed, 0x4c756d696e61))
	a, err := newSide(req, p, rng)
	defer a.close()
	if err != nil {
		return nil, fmt.Errorf("trafficgen: requester: %w", err)
	}
	b, err := newSide(resp, p, rng)
	defer b.close()
	if err != nil {
		return nil, fmt.Errorf("trafficgen: responder: %w", err)
	}
	ai, bi := a.info(p), b.info(p)
	if err := a.connect(bi, p); err != nil {
		return nil, fmt.Errorf("trafficgen: requester: %w", err)
	}
	if err := b.connect(ai, p); err != nil {
		return nil, fmt.Errorf("trafficgen: responder: %w", err)
	}
	res := newResult(p, ai, bi)
	if ready != nil {
		if err := ready(res.Conns()); err != nil {
			return res, fmt.Errorf("trafficgen: metadata: %w", err)
		}
	}
	a.prepare(p, true)
	b.prepare(p, false)
	clock := p.driver()
	start := clock.Now()
	runErr := run(ctx, a, bi, p, res, b.postRecv(p), b.cq)
	res.finish(p, clock.Now().Sub(start), a.check(p, true, res.bytes()), b.check(p, false, res.bytes()))
	return res, runErr
}

// postRecv posts the receive for SEND message m of QP i into its place in
// the region.
func (s *side) postRecv(p Params) func(i, m int) error {
	return func(i, m int) error {
		addr := s.mr.Addr() + uint64(i*p.regionSize()+m*p.MessageSize)
		return s.qps[i].PostRecv([]verbs.RecvWR{{ID: uint64(i)<<32 | uint64(m),
			SGL: []verbs.SGE{{Addr: addr, Length: uint32(p.MessageSize), LKey: s.mr.LKey()}}}})
	}
}

func newResult(p Params, req, resp []QPInfo) *Result {
	res := &Result{Params: p, QPs: make([]QPResult, len(req))}
	for i, c := range conns(req, resp) {
		res.QPs[i] = QPResult{Conn: c, Status: "ok"}
	}
	return res
}

func (r *Result) bytes() []int64 {
	n := make([]int64, len(r.QPs))
	for i, q := range r.QPs {
		n[i] = q.Bytes
	}
	return n
}

// finish records the elapsed time, the goodput and the memory checks of
// both sides.
func (r *Result) finish(p Params, el time.Duration, reqOK, respOK []bool) {
	r.Elapsed = el
	var moved int64
	for i := range r.QPs {
		r.QPs[i].DataOK = reqOK[i] && respOK[i]
		moved += r.QPs[i].Bytes
	}
	if el > 0 {
		r.Goodput = float64(moved) * 8 / el.Seconds()
	}
}

// run drives every QP: keep tx-depth messages posted, collect
// completions, until every message completed or failed.
//
// postRecv, when set, posts the responder's receive for SEND message m
// of QP i just before the SEND (in-process runs; a remote responder keeps
// its own receives posted), and rcq, when set, is the responder's CQ to
// reap alongside.
func run(ctx context.Context, a *side, remote []QPInfo, p Params, res *Result, postRecv func(i, m int) error, rcq verbs.CQ) error {
	clock := p.driver()
	type qstate struct{ posted, done, failed int }
	st := make([]qstate, p.NumQPs)
	postedAt := make([][]time.Time, p.NumQPs)
	for i := range postedAt {
		postedAt[i] = make([]time.Time, p.MsgsPerQP)
		res.QPs[i].MCT = make([]time.Duration, 0, p.MsgsPerQP)
	}
	qpIdx := map[uint32]int{}
	for i, qp := range a.qps {
		qpIdx[qp.QPN()] = i
	}
	post := func(i int) error {
		m := st[i].posted
		off := uint64(m * p.MessageSize)
		laddr, n := a.mr.Addr()+uint64(i*p.regionSize())+off, uint32(p.MessageSize)
		wr := verbs.SendWR{ID: uint64(i)<<32 | uint64(m), Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{{Addr: laddr, Length: n, LKey: a.mr.LKey()}}, RemoteAddr: remote[i].Addr + off, RKey: remote[i].RKey}
		switch p.verbOf(i) {
		case intent.VerbWrite:
			wr.Opcode = verbs.WRRDMAWrite
		case intent.VerbRead:
			wr.Opcode = verbs.WRRDMARead
		case intent.VerbSend:
			wr.Opcode = verbs.WRSend
			if postRecv != nil {
				if err := postRecv(i, m); err != nil {
					return err
				}
			}
		}
		postedAt[i][m] = clock.Now()
		if err := a.qps[i].PostSend([]verbs.SendWR{wr}); err != nil {
			return err
		}
		st[i].posted++
		return nil
	}
	start := clock.Now()
	// fill posts what the QP's tx-depth and pace allow; it reports the
	// time of the next paced message when that holds the QP back.
	fill := func(i int, round int) (time.Time, error) {
		s := &st[i]
		for s.failed == 0 && s.posted < p.MsgsPerQP && s.posted-s.done < p.TxDepth && s.posted <= round {
			if p.Rate > 0 {
				due := start.Add(time.Duration(float64(s.posted) * float64(p.MessageSize) * 8 / p.Rate * 1e9))
				if clock.Now().Before(due) {
					return due, nil
				}
			}
			if err := post(i); err != nil {
				return time.Time{}, fmt.Errorf("trafficgen: QP %d: %w", i, err)
			}
		}
		return time.Time{}, nil
	}
	active := p.NumQPs
	wcs := make([]verbs.WC, 64)
	var failed error
	var rwcs [64]verbs.WC
	for active > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		var next time.Time
		// round is the last message index any QP may post: unbounded,
		// or with barrier-sync the one after what every live QP finished.
		round := p.MsgsPerQP
		if p.BarrierSync {
			for i := range st {
				if st[i].failed == 0 && st[i].done < p.MsgsPerQP {
					round = min(round, st[i].done)
				}
			}
		}
		for i := range st {
			due, err := fill(i, round)
			if err != nil {
				return err
			}
			if !due.IsZero() && (next.IsZero() || due.Before(next)) {
				next = due
			}
		}
		n, err := a.cq.Poll(wcs)
		if err != nil {
			return err
		}
		// Receive completions of SEND land on the responder's CQ; they
		// are not what the requester waits for, but they must be reaped.
		if rcq != nil {
			_, _ = rcq.Poll(rwcs[:])
		}
		if n == 0 {
			if err := clock.Wait(ctx, a.cq.Notify(), next); err != nil {
				return err
			}
			continue
		}
		for _, wc := range wcs[:n] {
			i, ok := qpIdx[wc.QPN]
			if !ok {
				continue
			}
			q, s := &res.QPs[i], &st[i]
			m := int(wc.ID & 0xffffffff)
			if wc.Status != verbs.WCSuccess {
				if s.failed == 0 {
					q.Status = fmt.Sprintf("message %d: %v", m, wc.Status)
					failed = errors.Join(failed, fmt.Errorf("%w: QP %d %s", ErrFailed, i, q.Status))
				}
				s.failed++
			} else {
				q.MCT = append(q.MCT, clock.Now().Sub(postedAt[i][m]))
				q.Bytes += int64(p.MessageSize)
				s.done++
			}
			// A failed QP is in ERR: its other posted messages flush.
			if s.done+s.failed == s.posted && (s.failed > 0 || s.posted == p.MsgsPerQP) {
				active--
			}
		}
	}
	return failed
}
