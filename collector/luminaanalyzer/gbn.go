package luminaanalyzer

import (
	"fmt"

	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// Go-back-N, as the trace shows it.
//
// Each connection carries two PSN-sequenced streams: requests from the
// requester (WRITE and SEND data, READ requests, each READ request taking
// as many PSNs as it asks responses for) and READ responses from the
// responder. Each stream has a sender and a receiver, and both are run
// here from the middlebox's point of view:
//
// The receiver keeps its expected PSN. A packet that was dropped or
// corrupted never reached it; one at the expected PSN advances it; one
// beyond opens a gap (the first such packet is the "first out-of-order
// packet" of the NAK generation latency); one before is a duplicate. The
// receiver must answer a gap with exactly one NAK for the expected PSN and
// no more until the gap closes, and must never acknowledge a PSN it has
// not received in order. For READ the receiver is the requester and its
// NAK the READ request it re-issues from the first missing response.
//
// The sender keeps the PSN after the highest it sent. A packet at that PSN
// is new; beyond it, PSNs were skipped; before it, a retransmission.
// Retransmissions come in runs: a run starts at some PSN and goes on in
// order to the highest PSN sent. A run must start exactly at the PSN of a
// pending NAK (or re-issued READ for the responder), or, with none pending,
// at the oldest unacknowledged PSN (a timeout). It may skip forward only
// over PSNs acknowledged meanwhile.
//
// Timing: the middlebox sees a packet to an RNIC before the RNIC does and
// a packet from it after the RNIC sent it, so the RNIC's knowledge lags
// the middlebox's by up to a path delay. The rules are applied so that
// lag never makes a compliant RNIC look wrong: a NAK may name a gap that
// had just closed, and a timeout may restart at a PSN acknowledged less
// than Options.Slack earlier.

// txRingSize is how many recent transmissions per stream are remembered
// (for timeout intervals and give-up detection): a power of two, above
// the in-flight window of the RNICs Lumina tests.
const txRingSize = 1024

// maxOutstandingLosses bounds the lost transmissions waiting for a
// retransmission per stream.
const maxOutstandingLosses = 1024

// txSlot is the latest transmission of a PSN, and the first one that was
// delivered (seq 0 if none was).
type txSlot struct {
	ts  int64
	seq uint64
	psn uint32
	set bool
	ev  mirror.EventType
}

// gapState is a receiver's gap: the expected PSN when an out-of-order
// packet arrived, the first such packet, and the NAK that answered it.
type gapState struct {
	open    bool
	valid   bool // for the last closed gap: there is one
	nak     bool
	checked bool // the last closed gap's missing NAK was reported
	psn     uint32
	ooo     int64
	first   pref
	nakRef  pref
}

type runState struct {
	active bool
	start  uint32
	next   uint32
	cause  string
}

// pendState is a request for a go-back-N restart the sender has been sent
// and not yet answered: a NAK (request stream) or a re-issued READ request
// (response stream).
type pendState struct {
	set   bool
	psn   uint32
	cause string
	ref   pref
}

type unaMark struct {
	una uint32
	ts  int64
}

type lossRef struct {
	psn uint32
	rec int
}

type stream struct {
	id int

	// receiver
	rxOn      bool
	epsn      uint32
	gap, last gapState
	// sender
	txOn    bool
	sentEnd uint32
	lastTx  int64
	run     runState
	pend    pendState
	// una is the oldest unacknowledged PSN as the middlebox saw the
	// acknowledgements go by; unaHist the latest advances.
	una      uint32
	unaHist  [8]unaMark
	unaN     int
	retries  int // retries (timeouts and NAKs) since the last progress
	ring     []txSlot
	losses   []lossRef
	lossDrop bool // losses overflowed
	// nackRec is the NACK record waiting for the first retransmission of
	// its PSN (-1 none): the reaction latency is measured to it, however
	// the sender's run went.
	nackRec int
}

type conn struct {
	idx int
	c   intent.Conn
	// gid and qpn by direction: the destination of packets to the
	// requester (0) and to the responder (1).
	gid        [2]roce.GID
	qpn        [2]uint32
	base       uint32 // the requester's initial PSN
	verbs      uint8
	packets    [2]int64
	other      int64
	s          [2]stream
	reads      readRing
	terminated string
	violN      [numMachines]int64
	violIdx    [numMachines]int
	rep        ConnReport
}

func (c *conn) init(i int, mc intent.Conn) {
	c.idx, c.c = i, mc
	c.gid[toRequester], c.qpn[toRequester] = roce.GIDFromAddr(mc.RequesterIP), mc.RequesterQPN&roce.QPNMask
	c.gid[toResponder], c.qpn[toResponder] = roce.GIDFromAddr(mc.ResponderIP), mc.ResponderQPN&roce.QPNMask
	c.base = mc.RequesterIPSN & roce.PSNMask
	c.s[streamReq].id, c.s[streamRsp].id = streamReq, streamRsp
	c.s[streamReq].nackRec, c.s[streamRsp].nackRec = -1, -1
	for i := range c.violIdx {
		c.violIdx[i] = -1
	}
}

// readRing remembers the PSN ranges of the READ requests not yet wholly
// answered, so the response stream knows which PSNs are READ data when a
// connection mixes READs with other requests.
type readRing struct {
	start, n  [64]uint32
	lastTx    [64]int64 // the latest transmission of the READ request, re-issues included
	head, len int
}

func (r *readRing) add(start, n uint32, ts int64) {
	if r.len == len(r.start) {
		r.head = (r.head + 1) % len(r.start)
		r.len--
	}
	i := (r.head + r.len) % len(r.start)
	r.start[i], r.n[i], r.lastTx[i] = start, n, ts
	r.len++
}

// find returns the index of the READ whose responses include psn, or -1.
func (r *readRing) find(psn uint32) int {
	for k := range r.len {
		i := (r.head + k) % len(r.start)
		if d := roce.ComparePSN(psn, r.start[i]); d >= 0 && uint32(d) < r.n[i] {
			return i
		}
	}
	return -1
}

// covers reports whether psn is a response PSN of a known READ.
func (r *readRing) covers(psn uint32) bool { return r.find(psn) >= 0 }

// next returns psn if it is a READ data PSN, else the start of the first
// READ after it (psn if there is none).
func (r *readRing) next(psn uint32) uint32 {
	if r.covers(psn) {
		return psn
	}
	for k := range r.len {
		i := (r.head + k) % len(r.start)
		if roce.ComparePSN(r.start[i], psn) > 0 {
			return r.start[i]
		}
	}
	return psn
}

// prune forgets the READs wholly before psn.
func (r *readRing) prune(psn uint32) {
	for r.len > 0 && roce.ComparePSN(roce.AddPSN(r.start[r.head], int(r.n[r.head])), psn) <= 0 {
		r.head = (r.head + 1) % len(r.start)
		r.len--
	}
}

func (s *stream) start(psn uint32) {
	s.rxOn, s.txOn = true, true
	s.epsn, s.sentEnd, s.una = psn, psn, psn
	s.ring = make([]txSlot, txRingSize)
}

func (s *stream) slot(psn uint32) *txSlot { return &s.ring[psn&(txRingSize-1)] }

// lastTxOf returns the time of the latest transmission of psn, if known.
func (s *stream) lastTxOf(psn uint32) (txSlot, bool) {
	if s.ring == nil {
		return txSlot{}, false
	}
	sl := s.slot(psn)
	return *sl, sl.set && sl.psn == psn
}

// advanceUna records an acknowledgement of every PSN before una.
func (s *stream) advanceUna(una uint32, ts int64) bool {
	if !s.txOn || roce.ComparePSN(una, s.una) <= 0 || roce.ComparePSN(una, s.sentEnd) > 0 {
		return false
	}
	s.una = una
	s.unaHist[s.unaN%len(s.unaHist)] = unaMark{una: una, ts: ts}
	s.unaN++
	s.retries = 0
	return true
}

// ackedAt returns when the middlebox first saw psn acknowledged, if that
// is among the latest advances.
func (s *stream) ackedAt(psn uint32) (int64, bool) {
	at, ok := int64(0), false
	for k := 1; k <= min(s.unaN, len(s.unaHist)); k++ {
		m := s.unaHist[(s.unaN-k)%len(s.unaHist)]
		if roce.ComparePSN(m.una, psn) <= 0 {
			break
		}
		at, ok = m.ts, true
	}
	return at, ok
}

// request handles a packet from the requester to the responder.
func (a *Analyzer) request(c *conn, r pref, n uint32, read bool) {
	s := &c.s[streamReq]
	if !s.txOn {
		if r.psn != c.base {
			a.notes = append(a.notes, fmt.Sprintf("connection %d: the first request has PSN %d, the metadata's initial PSN is %d",
				c.idx, r.psn, c.base))
		}
		s.start(r.psn)
	}
	isNew := roce.ComparePSN(r.psn, s.sentEnd) >= 0
	if read && isNew {
		c.reads.add(r.psn, n, r.ts)
		if rs := &c.s[streamRsp]; !rs.txOn {
			rs.start(r.psn)
		}
	}
	if !read {
		c.rep.DataPackets++
	}
	a.send(c, s, r, n)
	if read && !isNew {
		if i := c.reads.find(r.psn); i >= 0 {
			c.reads.lastTx[i] = r.ts
		}
	}
	if !r.lost() {
		a.receive(c, s, r, n)
	}
}

// response handles a READ response.
func (a *Analyzer) response(c *conn, r pref) {
	s := &c.s[streamRsp]
	c.rep.DataPackets++
	if !s.txOn {
		// A response to no READ the trace holds: follow it anyway.
		s.start(r.psn)
	}
	a.send(c, s, r, 1)
	if !r.lost() {
		a.receive(c, s, r, 1)
	}
}

// send runs the sender of stream s over a transmission of n PSNs from r.psn.
func (a *Analyzer) send(c *conn, s *stream, r pref, n uint32) {
	q := r.psn
	mach := machReqSender
	if s.id == streamRsp {
		mach = machRspSender
	}
	if d := roce.ComparePSN(q, s.sentEnd); d >= 0 {
		// New PSNs. Responses may jump over PSNs that are no READ's.
		if d > 0 && (s.id == streamReq || c.reads.covers(s.sentEnd)) && a.first(c, mach) {
			a.violate(c, mach, r, fmt.Sprintf("PSN jumps from %d to %d: PSNs %d..%d were never sent",
				s.sentEnd, q, s.sentEnd, roce.AddPSN(q, -1)))
		}
		if s.run.active {
			if roce.ComparePSN(a.unaOf(c, s), s.sentEnd) < 0 && a.first(c, mach) {
				a.violate(c, mach, r, fmt.Sprintf("sent new PSN %d while its go-back-N retransmission from PSN %d "+
					"had only reached PSN %d (PSN %d was not acknowledged)", q, s.run.start, s.run.next, a.unaOf(c, s)))
			}
			s.run.active = false
		}
		s.sentEnd = roce.AddPSN(q, int(n))
	} else {
		c.rep.Retransmitted++
		switch {
		case s.run.active && q == s.run.next:
		case s.run.active && roce.ComparePSN(q, s.run.next) > 0:
			if roce.ComparePSN(a.unaOf(c, s), q) < 0 && a.first(c, mach) {
				a.violate(c, mach, r, fmt.Sprintf("go-back-N retransmission from PSN %d skips PSN %d (jumps to %d), "+
					"which was not acknowledged", s.run.start, s.run.next, q))
			}
		default:
			s.run = runState{active: true, start: q}
			if s.id == streamReq {
				a.requestRun(c, s, r)
			} else {
				a.responseRun(c, s, r)
			}
		}
		s.run.active = true
		s.run.next = roce.AddPSN(q, int(n))
		if roce.ComparePSN(s.run.next, s.sentEnd) >= 0 {
			s.run.active = false
		}
	}
	s.lastTx = r.ts
	a.recordTx(c, s, r, n)
}

// unaOf is the oldest unacknowledged PSN of stream s. The responder's
// READ responses are acknowledged by the requester receiving them.
func (a *Analyzer) unaOf(c *conn, s *stream) uint32 {
	if s.id == streamRsp {
		return s.epsn
	}
	return s.una
}

// recordTx remembers a transmission and keeps the loss records: a lost
// transmission opens one, a later transmission of the PSN resolves it. The
// first transmission of a NAKed PSN after its NAK completes the NACK
// record.
func (a *Analyzer) recordTx(c *conn, s *stream, r pref, n uint32) {
	if s.nackRec >= 0 {
		nr := &a.nack[s.nackRec]
		if d := roce.ComparePSN(nr.PSN, r.psn); d >= 0 && uint32(d) < n {
			nr.Retx = r.ref()
			nr.ReactionNs = r.ts - nr.NAK.TimestampNs
			nr.TotalNs = r.ts - nr.FirstOOO.TimestampNs
			nr.RetxLost = r.lost()
			s.nackRec = -1
		}
	}
	if len(s.losses) > 0 {
		k := 0
		for _, l := range s.losses {
			if d := roce.ComparePSN(l.psn, r.psn); d >= 0 && uint32(d) < n {
				a.resolveLoss(s, l, r)
				continue
			}
			s.losses[k] = l
			k++
		}
		s.losses = s.losses[:k]
	}
	sl := s.slot(r.psn)
	if !sl.set || sl.psn != r.psn {
		*sl = txSlot{psn: r.psn, set: true}
	}
	sl.ts, sl.ev = r.ts, r.ev
	if !r.lost() {
		if sl.seq == 0 {
			sl.seq = r.seq
		}
		return
	}
	c.rep.Lost++
	rec := -1
	if len(a.losses) < a.opt.MaxRecords {
		msg, rel := a.msgOf(c, r.psn)
		rec = len(a.losses)
		a.losses = append(a.losses, Loss{Conn: c.idx, Stream: streamNames[s.id], Message: msg, RelPSN: rel,
			Packet: r.ref(), LatencyNs: -1})
	} else {
		a.truncated.retrans = true
	}
	if len(s.losses) == maxOutstandingLosses {
		copy(s.losses, s.losses[1:])
		s.losses = s.losses[:len(s.losses)-1]
		s.lossDrop = true
	}
	s.losses = append(s.losses, lossRef{psn: r.psn, rec: rec})
}

func (a *Analyzer) resolveLoss(s *stream, l lossRef, r pref) {
	if l.rec < 0 {
		return
	}
	lr := &a.losses[l.rec]
	lr.RecoveredBy, lr.From, lr.Retx = s.run.cause, s.run.start, r.ref()
	lr.LatencyNs = r.ts - lr.Packet.TimestampNs
	if lr.RecoveredBy == causeNone {
		lr.RecoveredBy = "unexplained"
	}
}

// requestRun classifies the start of a requester's retransmission run and
// checks where it starts.
func (a *Analyzer) requestRun(c *conn, s *stream, r pref) {
	q := r.psn
	rs := &c.s[streamRsp]
	switch {
	case s.pend.set:
		p := s.pend.psn
		if q == p {
			s.run.cause = s.pend.cause
			a.react(s)
			if s.run.cause != causeRNR {
				a.retry(c, s, r, s.run.cause)
			}
			return
		}
		if roce.ComparePSN(q, p) < 0 && r.ts-s.lastTx >= a.timeoutFloor {
			// A timer expiry raced the NAK; the NAK stays pending.
			a.timeoutRun(c, s, r)
			return
		}
		if a.first(c, machReqSender) {
			a.violate(c, machReqSender, r, fmt.Sprintf("after the NAK for PSN %d (seq %d), go-back-N restarted at PSN %d",
				p, s.pend.ref.seq, q))
		}
		s.run.cause = s.pend.cause
		s.pend.set = false
		a.retry(c, s, r, s.run.cause)
	case rs.gap.open && c.reads.covers(q):
		a.readGap(c, r)
	default:
		a.timeoutRun(c, s, r)
	}
}

// react marks the pending NAK answered.
func (a *Analyzer) react(s *stream) { s.pend.set = false }

// readGap handles a READ re-issued while the requester's responses have a
// gap: the response receiver's NAK.
func (a *Analyzer) readGap(c *conn, r pref) {
	rs, s := &c.s[streamRsp], &c.s[streamReq]
	g := &rs.gap
	first := !g.nak
	if g.nak {
		if r.ts-g.nakRef.ts >= a.timeoutFloor {
			a.timeoutRun(c, s, r)
			return
		}
		if a.first(c, machRspReceiver) {
			a.violate(c, machRspReceiver, r, fmt.Sprintf("re-issued the READ again for the gap at PSN %d "+
				"(first re-issued at seq %d) before it closed", g.psn, g.nakRef.seq))
		}
	} else {
		if r.psn != g.psn && a.first(c, machRspReceiver) {
			a.violate(c, machRspReceiver, r, fmt.Sprintf("re-issued the READ from PSN %d, but the first missing "+
				"response is PSN %d", r.psn, g.psn))
		}
		g.nak, g.nakRef = true, r
	}
	c.rep.ReadGaps++
	a.node[nodeRequester].readGaps++
	s.run.cause = causeReadGap
	a.retry(c, s, r, causeReadGap)
	if first {
		a.addNACK(c, rs, g, r)
	}
	if !r.lost() {
		rs.pend = pendState{set: true, psn: r.psn, cause: causeReadGap, ref: r}
	}
}

// timeoutRun handles a retransmission no NAK asked for: it must start at
// the oldest unacknowledged PSN.
func (a *Analyzer) timeoutRun(c *conn, s *stream, r pref) {
	q := r.psn
	s.run.cause = causeTimeout
	una := s.una
	stale := false
	switch d := roce.ComparePSN(q, una); {
	case d > 0:
		if a.first(c, machReqSender) {
			a.violate(c, machReqSender, r, fmt.Sprintf("retransmission without a NAK (a timeout) starts at PSN %d, "+
				"skipping PSN %d, which was not acknowledged", q, una))
		}
	case d < 0:
		// The timer fired before the acknowledgement reached the
		// requester; when it does, it resets the retry count.
		stale = true
		at, ok := s.ackedAt(q)
		if (!ok || r.ts-at > int64(a.opt.Slack)) && a.first(c, machReqSender) {
			when := "long before"
			if ok {
				when = fmt.Sprintf("%.3f ms before", float64(r.ts-at)/1e6)
			}
			a.violate(c, machReqSender, r, fmt.Sprintf("retransmission without a NAK (a timeout) starts at PSN %d, "+
				"acknowledged %s; the oldest unacknowledged PSN was %d", q, when, una))
		}
	}
	c.rep.Timeouts++
	a.node[nodeRequester].timeouts++
	// The requester's timer ran from its latest transmission covering q
	// (the data packet, or the READ request) or its latest progress,
	// whichever came last.
	ri := c.reads.find(q)
	read := ri >= 0
	from := int64(-1)
	if read {
		from = c.reads.lastTx[ri]
	} else if sl, ok := s.lastTxOf(q); ok {
		from = sl.ts
	}
	if s.unaN > 0 {
		from = max(from, s.unaHist[(s.unaN-1)%len(s.unaHist)].ts)
	}
	interval := int64(-1)
	if from >= 0 {
		interval = r.ts - from
	}
	s.retries++
	if len(a.touts) < a.opt.MaxRecords {
		msg, rel := a.msgOf(c, q)
		a.touts = append(a.touts, TimeoutRetx{Conn: c.idx, Message: msg, RelPSN: rel, Packet: r.ref(),
			IntervalNs: interval, Retry: s.retries,
			BelowMinimum: interval >= 0 && a.baseTimeout > 0 && interval < a.baseTimeout-a.timerTol})
	} else {
		a.truncated.timeouts = true
	}
	mr := a.msgRetries(c, q)
	mr.Timeouts++
	mr.MaxRetries = max(mr.MaxRetries, s.retries)
	if stale {
		s.retries = 0
	}
	if read && !r.lost() {
		// The responder must answer the re-issued READ from q.
		rs := &c.s[streamRsp]
		rs.pend = pendState{set: true, psn: q, cause: causeTimeout, ref: r}
	}
}

// retry counts a NAK-triggered retry against the message.
func (a *Analyzer) retry(c *conn, s *stream, r pref, cause string) {
	if cause == causeTimeout {
		return
	}
	s.retries++
	mr := a.msgRetries(c, r.psn)
	mr.NAKRetries++
	mr.MaxRetries = max(mr.MaxRetries, s.retries)
}

func (a *Analyzer) msgRetries(c *conn, psn uint32) *MessageRetries {
	msg, _ := a.msgOf(c, psn)
	k := [2]int{c.idx, msg}
	if i, ok := a.msgIndex[k]; ok {
		return &a.msgs[i]
	}
	a.msgIndex[k] = len(a.msgs)
	a.msgs = append(a.msgs, MessageRetries{Conn: c.idx, Message: msg})
	return &a.msgs[len(a.msgs)-1]
}

// responseRun checks the start of a responder's retransmission run: it
// must answer a re-issued READ request, from the PSN it asks for.
func (a *Analyzer) responseRun(c *conn, s *stream, r pref) {
	if s.pend.set {
		s.run.cause = s.pend.cause
		if r.psn != s.pend.psn && a.first(c, machRspSender) {
			a.violate(c, machRspSender, r, fmt.Sprintf("after the READ request re-issued from PSN %d (seq %d), "+
				"responses restart at PSN %d", s.pend.psn, s.pend.ref.seq, r.psn))
		}
		a.react(s)
		return
	}
	s.run.cause = causeNone
	if a.first(c, machRspSender) {
		a.violate(c, machRspSender, r, fmt.Sprintf("response PSN %d sent again, but no READ request asked for it again", r.psn))
	}
}

// receive runs the receiver of stream s over a delivered packet.
func (a *Analyzer) receive(c *conn, s *stream, r pref, n uint32) {
	q := r.psn
	switch d := roce.ComparePSN(q, s.epsn); {
	case d == 0:
		s.epsn = roce.AddPSN(q, int(n))
		if s.id == streamRsp {
			s.epsn = c.reads.next(s.epsn)
			// Responses received in order acknowledge the READ.
			c.s[streamReq].advanceUna(s.epsn, r.ts)
			c.reads.prune(s.epsn)
		}
		if s.gap.open {
			s.last = s.gap
			s.last.open, s.last.valid, s.last.checked = false, true, false
			s.gap.open = false
		}
	case d > 0:
		c.rep.OutOfOrder++
		if s.id == streamReq {
			a.node[nodeResponder].ooo++
		}
		if !s.gap.open {
			s.gap = gapState{open: true, psn: s.epsn, first: r}
			c.rep.Gaps++
			node := nodeResponder
			if s.id == streamRsp {
				node = nodeRequester
			}
			a.trigger(c, node, trigGap, r)
		}
		s.gap.ooo++
	default:
		c.rep.Duplicates++
		if s.id == streamReq {
			a.node[nodeResponder].dup++
		}
	}
}

// ack handles an ACK or NAK from the responder.
func (a *Analyzer) ack(c *conn, r pref, syn roce.Syndrome) {
	s := &c.s[streamReq]
	if !s.rxOn {
		if a.first(c, machReqReceiver) {
			a.violate(c, machReqReceiver, r, "acknowledgement before any request")
		}
		return
	}
	p := r.psn
	switch syn.Type() {
	case roce.AckTypeACK:
		if roce.ComparePSN(p, s.epsn) >= 0 && a.first(c, machReqReceiver) {
			a.violate(c, machReqReceiver, r, fmt.Sprintf("ACK for PSN %d, but PSN %d had not been received in order",
				p, s.epsn))
		}
		if l := &s.last; l.valid && !l.nak && !l.checked && l.ooo > 0 && roce.ComparePSN(p, l.psn) >= 0 {
			l.checked = true
			if a.first(c, machReqReceiver) {
				a.violate(c, machReqReceiver, r, fmt.Sprintf("gap at PSN %d: %d packets arrived out of order "+
					"(the first at seq %d), and PSN %d was acknowledged without a NAK", l.psn, l.ooo, l.first.seq, l.psn))
			}
		}
		if !r.lost() {
			s.advanceUna(roce.AddPSN(p, 1), r.ts)
		}
		if sl, ok := s.lastTxOf(p); ok && sl.seq != 0 {
			a.progress(nodeResponder, sl.seq, r.ts)
		}
	case roce.AckTypeNAK:
		if code := syn.NAKCode(); code != roce.NAKPSNSequenceError {
			c.terminated = "NAK " + code.String()
			a.node[nodeRequester].terminated++
			return
		}
		c.rep.NAKs++
		a.nakSeq(c, s, r)
	case roce.AckTypeRNRNAK:
		c.rep.RNRNAKs++
		// The responder refused p: it expects p again, and drops what
		// follows until the requester retries p.
		if roce.ComparePSN(p, s.epsn) < 0 {
			s.epsn = p
		}
		s.gap = gapState{open: true, psn: p, first: r, nak: true, nakRef: r}
		if !r.lost() {
			s.advanceUna(p, r.ts)
			s.pend = pendState{set: true, psn: p, cause: causeRNR, ref: r}
		}
	default:
		c.other++
	}
}

// nakSeq handles a NAK sequence error.
func (a *Analyzer) nakSeq(c *conn, s *stream, r pref) {
	p := r.psn
	a.node[nodeResponder].nakTx++ // sent, whether or not it arrived
	var g *gapState
	switch {
	case s.gap.open && s.gap.psn == p:
		g = &s.gap
	case s.last.valid && s.last.psn == p:
		g = &s.last // the NAK left before the gap closed
	}
	switch {
	case g == nil:
		if a.first(c, machReqReceiver) {
			a.violate(c, machReqReceiver, r, fmt.Sprintf("NAK sequence error for PSN %d, but no gap was open there "+
				"(expected PSN %d)", p, s.epsn))
		}
	case g.nak:
		if a.first(c, machReqReceiver) {
			a.violate(c, machReqReceiver, r, fmt.Sprintf("second NAK for the gap at PSN %d (the first at seq %d)",
				p, g.nakRef.seq))
		}
	default:
		g.nak, g.nakRef = true, r
		a.addNACK(c, s, g, r)
		a.progress(nodeResponder, g.first.seq, r.ts)
	}
	if !r.lost() {
		a.node[nodeRequester].nakRx++
		s.advanceUna(p, r.ts)
		s.pend = pendState{set: true, psn: p, cause: causeNAK, ref: r}
	}
}

// addNACK records the NAK generation latency of gap g of stream s; the
// reaction follows with the first retransmission of the gap's PSN.
func (a *Analyzer) addNACK(c *conn, s *stream, g *gapState, nak pref) {
	if len(a.nack) >= a.opt.MaxRecords {
		a.truncated.retrans = true
		s.nackRec = -1
		return
	}
	msg, rel := a.msgOf(c, g.psn)
	ev := mirror.EventNone
	if sl, ok := s.lastTxOf(g.psn); ok {
		ev = sl.ev
	}
	a.nack = append(a.nack, NACKLatency{Conn: c.idx, Stream: streamNames[s.id], PSN: g.psn, Message: msg, RelPSN: rel,
		Event: ev, FirstOOO: g.first.ref(), NAK: nak.ref(), GenerationNs: nak.ts - g.first.ts, ReactionNs: -1, TotalNs: -1})
	s.nackRec = len(a.nack) - 1
}
