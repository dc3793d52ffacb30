package soft

import (
	"encoding/binary"
	"time"

	"github.com/rdma-appliance/appliance/verbs"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// The RC requester. Send queue entries move through three cursors:
//
//	head <= next <= started <= tail
//
// Entries in [head, started) have PSN ranges assigned (contiguous, in
// order); head is the oldest not yet retired; next is where transmission
// resumes, with off bytes of it already sent and psn the PSN of the next
// packet. Go-back-N rewinds next/off/psn to the oldest unacknowledged PSN
// (una). Entries retire in order once acknowledged (READ and atomics once
// their data arrived), which frees their ring slots.
type reqState struct {
	head, next, started uint64
	off                 uint32
	psn                 uint32 // next PSN to transmit
	una                 uint32 // oldest unacknowledged PSN
	endPSN              uint32 // PSN after the last assigned one
	sentEnd             uint32 // PSN after the highest one ever transmitted
	rdOut               int    // READ/atomic entries started and not retired

	deadline   int64 // retransmission timer; 0 when off
	retries    int   // consecutive retries without progress (timeouts and NAKs)
	rnrRetries int
	holdUntil  int64 // no transmission before (RNR wait)
	// A NAK sequence error the requester is still reacting to: go-back-N
	// to nakPSN at nakAt (Profile.NAKReactionDelay). The QP has taken the
	// NAK and builds nothing new meanwhile; the frames already in the
	// device's transmit queue drain, and the retransmission joins the
	// queue's tail when the reaction is over.
	nakPending bool
	nakAt      int64
	nakPSN     uint32
	sinceAck   int // packets since the last AckReq
	retired    uint64

	impliedSet bool
	impliedAt  uint32 // una of the last implied NAK, to act once per gap
	macKnown   bool
}

func (r *reqState) init() { *r = reqState{} }

func (r *reqState) start(psn uint32) {
	h := r.head
	*r = reqState{head: h, next: h, started: h, psn: psn, una: psn, endPSN: psn, sentEnd: psn}
}

func (r *reqState) flushed(tail uint64) {
	r.head, r.next, r.started, r.off = tail, tail, tail, 0
	r.rdOut = 0
	r.deadline = 0
}

// pacingSpin is how far ahead a DCQCN pacing slot may be for the loop to
// spin rather than back off toward its longest sleep.
const pacingSpin = int64(50 * time.Microsecond)

func isRdAtomic(op verbs.WROpcode) bool { return op == verbs.WRRDMARead || op.IsAtomic() }

// npkts is the number of PSNs a request consumes.
func (q *qp) npkts(w *swqe) uint32 {
	if w.op.IsAtomic() {
		return 1
	}
	return max(1, (w.length+uint32(q.mtu)-1)/uint32(q.mtu))
}

// rto is the retransmission timeout: 4.096 us x 2^timeout, or with adaptive
// retransmission a sixteenth of it doubling with each consecutive timeout up
// to eight times it (the shape Lumina measured on ConnectX).
func (q *qp) rto() int64 {
	base := verbs.TimeoutNanos(q.attr.Timeout)
	if base == 0 || !q.dev.prof.AdaptiveRetrans {
		return base
	}
	return min(base>>4<<min(q.req.retries, 7), base*8)
}

// retryLimit is retry_cnt; adaptive retransmission adds the profile's
// extra retries for the message's place on the QP (Lumina's Table 2).
func (q *qp) retryLimit() int {
	n := int(q.attr.RetryCnt)
	if extra := q.dev.prof.AdaptiveExtraRetries; q.dev.prof.AdaptiveRetrans && len(extra) > 0 {
		n += extra[min(q.req.retired, uint64(len(extra)-1))]
	}
	return n
}

// rcOutput runs the responder's pending responses, the requester's timers,
// and transmits new and retransmitted request packets.
func (q *qp) rcOutput() bool {
	did := q.respOutput()
	d := q.dev
	r := &q.req
	if r.deadline != 0 && d.now >= r.deadline {
		q.timeout()
		did = true
		if st := verbs.QPState(q.state.Load()); st != verbs.QPSRTS && st != verbs.QPSSQD {
			return did
		}
	}
	if r.nakPending {
		if d.now < r.nakAt {
			// Reacting to a NAK: a go-back-N NIC that has taken it
			// does not go on with the sequence it will resend.
			return did
		}
		r.nakPending = false
		// Unless a timeout went back further meanwhile, or the PSN was
		// acknowledged.
		if roce.ComparePSN(r.nakPSN, r.una) >= 0 && roce.ComparePSN(r.nakPSN, r.psn) < 0 {
			q.rewind(r.nakPSN)
		}
		did = true
	}
	if r.holdUntil != 0 {
		if d.now < r.holdUntil {
			return did
		}
		r.holdUntil = 0
	}
	sq := &q.sq
	tail := sq.tail.Load()
	if r.next == tail {
		return did
	}
	if !r.macKnown {
		mac, res := d.resolve(q.srcGID, q.dstGID)
		switch res {
		case resolveWait:
			return did
		case resolveFail:
			q.fail(&sq.slots[r.head&sq.mask], verbs.WCRetryExcErr, vendorNoNeighbor)
			return true
		}
		q.bld.DstMAC, r.macKnown = mac, true
	}
	maxRd := max(1, int(q.attr.MaxRdAtomic))
	for budget := d.burst; budget > 0; budget-- {
		if r.next == r.started {
			// In SQD only requests already started go on.
			if r.started == tail || q.attr.State == verbs.QPSSQD {
				break
			}
			w := &sq.slots[r.started&sq.mask]
			if isRdAtomic(w.op) && r.rdOut >= maxRd {
				break
			}
			if w.fence && r.rdOut > 0 {
				break
			}
			w.psn, w.npkts, w.done = r.endPSN, q.npkts(w), false
			r.endPSN = roce.AddPSN(r.endPSN, int(w.npkts))
			r.started++
			if isRdAtomic(w.op) {
				r.rdOut++
			}
		}
		if ahead := roce.ComparePSN(r.psn, r.una); ahead > 0 && int(ahead) >= d.prof.MaxInflight {
			break
		}
		if !d.txRoom() {
			break
		}
		if d.prof.DCQCNRate && !q.rp.Allowed(d.now) {
			// Paced by DCQCN: keep the loop polling when the next slot
			// is nearer than the idle loop's longest sleep.
			if q.rp.NextTx()-d.now < pacingSpin {
				did = true
			}
			break
		}
		if !q.sendRequest(&sq.slots[r.next&sq.mask]) {
			break
		}
		did = true
	}
	return did
}

// sendRequest transmits the next packet of w (at r.off / r.psn).
func (q *qp) sendRequest(w *swqe) bool {
	d := q.dev
	r := &q.req
	pkt := d.allocTx()
	if pkt == nil {
		return false
	}
	b := &q.bld
	b.PSN = r.psn
	b.AckReq, b.SE = false, false
	payload := 0
	dataOff := r.off
	mtu := uint32(q.mtu)
	advance := 1
	switch w.op {
	case verbs.WRSend, verbs.WRSendWithImm, verbs.WRRDMAWrite, verbs.WRRDMAWriteWithImm:
		rem := w.length - r.off
		n := min(rem, mtu)
		first, last := r.off == 0, rem <= mtu
		send := w.op == verbs.WRSend || w.op == verbs.WRSendWithImm
		imm := w.op.HasImm()
		switch {
		case first && last:
			b.Opcode = pick(send, imm, roce.RCSendOnly, roce.RCSendOnlyImm, roce.RCWriteOnly, roce.RCWriteOnlyImm)
		case first:
			b.Opcode = pick(send, false, roce.RCSendFirst, 0, roce.RCWriteFirst, 0)
		case last:
			b.Opcode = pick(send, imm, roce.RCSendLast, roce.RCSendLastImm, roce.RCWriteLast, roce.RCWriteLastImm)
		default:
			b.Opcode = pick(send, false, roce.RCSendMiddle, 0, roce.RCWriteMiddle, 0)
		}
		if first && !send {
			b.VA, b.RKey, b.DMALen = w.raddr, w.rkey, w.length
		}
		b.Imm = w.imm
		r.sinceAck++
		if last || r.sinceAck >= d.prof.AckEvery {
			b.AckReq = true
			r.sinceAck = 0
		}
		b.SE = last && w.solicited
		payload = int(n)
		r.off += n
		if last {
			r.off = 0
			r.next++
		}
	case verbs.WRRDMARead:
		b.Opcode = roce.RCReadRequest
		b.VA, b.RKey, b.DMALen = w.raddr+uint64(r.off), w.rkey, w.length-r.off
		advance = int(roce.ComparePSN(roce.AddPSN(w.psn, int(w.npkts)), r.psn))
		r.off = 0
		r.next++
	case verbs.WRAtomicCmpAndSwp, verbs.WRAtomicFetchAndAdd:
		b.Opcode = roce.RCFetchAdd
		b.SwapAdd, b.Compare = w.compareAdd, 0
		if w.op == verbs.WRAtomicCmpAndSwp {
			b.Opcode = roce.RCCompareSwap
			b.SwapAdd, b.Compare = w.swap, w.compareAdd
		}
		b.VA, b.RKey = w.raddr, w.rkey
		r.next++
	}
	buf := pkt.Buffer()
	hl := b.HeaderLen()
	if payload > 0 {
		gather(w.seg, int(dataOff), buf[hl:hl+payload])
	}
	n, err := b.BuildInPlace(buf, payload)
	if err != nil {
		pkt.Free()
		return false
	}
	_ = pkt.SetLen(n)
	d.send(pkt)
	if d.prof.DCQCNRate {
		q.rp.Sent(d.now, n)
	}
	if roce.ComparePSN(r.psn, r.sentEnd) < 0 {
		d.cnt.inc(CntTxRetransmits)
	}
	r.psn = roce.AddPSN(r.psn, advance)
	if roce.ComparePSN(r.psn, r.sentEnd) > 0 {
		r.sentEnd = r.psn
	}
	if r.deadline == 0 {
		if t := q.rto(); t > 0 {
			r.deadline = d.now + t
		}
	}
	return true
}

func pick(send, imm bool, s, si, w, wi roce.Opcode) roce.Opcode {
	switch {
	case send && imm:
		return si
	case send:
		return s
	case imm:
		return wi
	}
	return w
}

// rewind restarts transmission at psn (go-back-N).
func (q *qp) rewind(psn uint32) {
	r := &q.req
	sq := &q.sq
	r.sinceAck = 0
	for i := r.head; i != r.started; i++ {
		w := &sq.slots[i&sq.mask]
		rel := roce.ComparePSN(psn, w.psn)
		if rel >= 0 && uint32(rel) < w.npkts {
			r.next, r.psn = i, psn
			r.off = 0
			if !w.op.IsAtomic() {
				r.off = uint32(rel) * uint32(q.mtu)
			}
			return
		}
	}
	r.next, r.off, r.psn = r.started, 0, r.endPSN
}

// timeout handles the expiry of the retransmission timer.
func (q *qp) timeout() {
	d := q.dev
	r := &q.req
	r.deadline = 0
	r.nakPending = false // the timeout goes back to the oldest unacknowledged PSN
	if r.head == r.started || r.una == r.sentEnd {
		return
	}
	d.cnt.inc(CntLocalAckTimeoutErr)
	if r.retries >= q.retryLimit() {
		q.fail(&q.sq.slots[r.head&q.sq.mask], verbs.WCRetryExcErr, 0)
		return
	}
	r.retries++
	q.rewind(r.una)
}

// progress records that una advanced.
//
// A go-back-N retransmission may still be behind una when a late ACK for the
// original transmission arrives: skip what is now acknowledged, so that the
// cursor never points into a retired entry (its PSN and offset would then
// describe different messages).
func (q *qp) progress() {
	r := &q.req
	if roce.ComparePSN(r.psn, r.una) < 0 {
		s := r.sinceAck
		q.rewind(r.una)
		r.sinceAck = s
	}
	r.retries, r.rnrRetries = 0, 0
	r.impliedSet = false
	r.deadline = 0
	if r.una != r.sentEnd {
		if t := q.rto(); t > 0 {
			r.deadline = q.dev.now + t
		}
	}
}

// retire completes the head entry successfully. The slot is released
// before the completion is queued: an application that polls it may post
// into the slot at once (see releaseThenPush).
func (q *qp) retire(w *swqe) {
	r := &q.req
	signaled := w.signaled
	wc := verbs.WC{ID: w.id, Opcode: wcOpcode(w.op), ByteLen: w.length, QPN: q.qpn}
	if isRdAtomic(w.op) {
		r.rdOut--
	}
	r.head++
	r.retired++
	q.sq.done.Store(r.head)
	if signaled {
		q.scq.push(&wc)
	}
}

// fail completes w (the head entry) with an error status and moves the QP
// to the error state, which flushes everything behind it.
func (q *qp) fail(w *swqe, st verbs.WCStatus, vendor uint32) {
	d := q.dev
	r := &q.req
	if r.head != q.sq.tail.Load() {
		wc := verbs.WC{ID: w.id, Status: st, Opcode: wcOpcode(w.op), QPN: q.qpn, VendorErr: vendor}
		d.cnt.inc(CntReqCQEError)
		r.head++
		q.sq.done.Store(r.head)
		if r.started < r.head {
			r.started = r.head
		}
		q.scq.push(&wc)
	}
	q.toError()
}

func (q *qp) toError() {
	q.attr.State = verbs.QPSErr
	q.state.Store(uint32(verbs.QPSErr))
	q.dev.flushQP(q)
}

// ackThrough handles the acknowledgement of every PSN up to and including
// psn. It reports false if it found a READ or atomic left without its
// response (an implied NAK), after rewinding.
func (q *qp) ackThrough(psn uint32) bool {
	r := &q.req
	sq := &q.sq
	if roce.ComparePSN(psn, r.una) < 0 {
		return true
	}
	moved := false
	ok := true
	for r.head != r.started {
		w := &sq.slots[r.head&sq.mask]
		last := roce.AddPSN(w.psn, int(w.npkts)-1)
		if roce.ComparePSN(last, psn) > 0 {
			// Partly acknowledged: only SEND and WRITE advance here.
			if !isRdAtomic(w.op) && roce.ComparePSN(psn, r.una) >= 0 {
				r.una = roce.AddPSN(psn, 1)
				moved = true
			}
			break
		}
		if isRdAtomic(w.op) && !w.done {
			// The responder acknowledged past a READ or atomic whose
			// response we lack: the response was lost.
			ok = false
			q.impliedNAK()
			break
		}
		r.una = roce.AddPSN(last, 1)
		moved = true
		q.retire(w)
	}
	if moved {
		q.progress()
	}
	return ok
}

// impliedNAK rewinds to una once per gap.
func (q *qp) impliedNAK() {
	r := &q.req
	if r.impliedSet && r.impliedAt == r.una {
		return
	}
	r.impliedSet, r.impliedAt = true, r.una
	q.dev.cnt.inc(CntImpliedNakSeqErr)
	q.rewind(r.una)
}

// requesterInput handles a response (ACK, NAK, READ response, atomic ACK).
func (q *qp) requesterInput(frame []byte, p *roce.Packet) {
	d := q.dev
	st := verbs.QPState(q.state.Load())
	if st != verbs.QPSRTS && st != verbs.QPSSQD {
		d.cnt.inc(CntRxWrongQP)
		return
	}
	r := &q.req
	psn := p.PSN
	// A response must be for a PSN we sent and have not seen acknowledged;
	// an ACK may repeat una-1.
	if roce.ComparePSN(psn, roce.AddPSN(r.una, -1)) < 0 || roce.ComparePSN(psn, r.sentEnd) >= 0 {
		return
	}
	sq := &q.sq
	switch p.Opcode {
	case roce.RCAck:
		syn := p.AETH(frame).Syndrome()
		switch syn.Type() {
		case roce.AckTypeACK:
			q.ackThrough(psn)
		case roce.AckTypeRNRNAK:
			d.cnt.inc(CntRxRNRNak)
			if !q.ackThrough(roce.AddPSN(psn, -1)) || r.head == r.started {
				return
			}
			if q.attr.RNRRetry != 7 && r.rnrRetries >= int(q.attr.RNRRetry) {
				d.cnt.inc(CntRNRNakRetryErr)
				q.fail(&sq.slots[r.head&sq.mask], verbs.WCRNRRetryExcErr, uint32(syn))
				return
			}
			r.rnrRetries++
			r.deadline = 0
			r.holdUntil = d.now + verbs.RNRTimerNanos(syn.RNRTimer())
			q.rewind(psn)
		case roce.AckTypeNAK:
			if !q.ackThrough(roce.AddPSN(psn, -1)) || r.head == r.started {
				return
			}
			switch syn.NAKCode() {
			case roce.NAKPSNSequenceError:
				d.cnt.inc(CntPacketSeqErr)
				if r.retries >= q.retryLimit() {
					q.fail(&sq.slots[r.head&sq.mask], verbs.WCRetryExcErr, uint32(syn))
					return
				}
				r.retries++
				to := psn
				if d.prof.FaultSkipNAKedPSN {
					to = roce.AddPSN(psn, 1)
				}
				if dl := int64(d.prof.NAKReactionDelay); dl > 0 {
					// The retransmission is built when the NIC has
					// processed the NAK, and queued behind the frames
					// still in its transmit pipeline (Lumina §6.2:
					// retransmissions cannot preempt them); the QP adds
					// no new frames meanwhile, so the pipeline drains
					// during the reaction and the retransmission waits
					// for the longer of the two, not their sum.
					r.nakPending, r.nakAt, r.nakPSN = true, d.now+dl, to
				} else {
					q.rewind(to)
				}
			case roce.NAKRemoteAccessError:
				q.fail(&sq.slots[r.head&sq.mask], verbs.WCRemAccessErr, uint32(syn))
			case roce.NAKRemoteOperationalError:
				q.fail(&sq.slots[r.head&sq.mask], verbs.WCRemOpErr, uint32(syn))
			default:
				q.fail(&sq.slots[r.head&sq.mask], verbs.WCRemInvReqErr, uint32(syn))
			}
		}
	case roce.RCAtomicAck:
		if !q.ackThrough(roce.AddPSN(psn, -1)) {
			return
		}
		if psn != r.una || r.head == r.started {
			return
		}
		w := &sq.slots[r.head&sq.mask]
		if !w.op.IsAtomic() || w.psn != psn {
			return
		}
		var v [8]byte
		binary.NativeEndian.PutUint64(v[:], p.AtomicAckETH(frame).OrigData())
		scatter(w.seg, 0, v[:])
		w.done = true
		r.una = roce.AddPSN(psn, 1)
		q.retire(w)
		q.progress()
	case roce.RCReadResponseFirst, roce.RCReadResponseMiddle, roce.RCReadResponseLast, roce.RCReadResponseOnly:
		if !q.ackThrough(roce.AddPSN(psn, -1)) {
			return
		}
		if psn != r.una {
			if roce.ComparePSN(psn, r.una) > 0 {
				q.impliedNAK()
			}
			return
		}
		if r.head == r.started {
			return
		}
		w := &sq.slots[r.head&sq.mask]
		rel := roce.ComparePSN(psn, w.psn)
		if w.op != verbs.WRRDMARead || rel < 0 || uint32(rel) >= w.npkts {
			return
		}
		pos := p.Info().Position
		lastPkt := uint32(rel) == w.npkts-1
		pl := p.Payload(frame)
		off := uint32(rel) * uint32(q.mtu)
		if lastPkt != pos.IsEnd() || (!lastPkt && len(pl) != q.mtu) || off+uint32(len(pl)) > w.length ||
			(lastPkt && off+uint32(len(pl)) != w.length) {
			q.fail(w, verbs.WCBadRespErr, uint32(p.Opcode))
			return
		}
		scatter(w.seg, int(off), pl)
		r.una = roce.AddPSN(psn, 1)
		if lastPkt {
			w.done = true
			q.retire(w)
		}
		q.progress()
	}
}
