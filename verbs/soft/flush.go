package soft

import "github.com/rdma-appliance/appliance/verbs"

// output lets a QP transmit; it runs once per loop iteration per QP.
func (q *qp) output() bool {
	switch verbs.QPState(q.state.Load()) {
	case verbs.QPSRTS:
		switch q.typ {
		case verbs.QPTypeUD:
			return q.udOutput()
		case verbs.QPTypeUC:
			return q.ucOutput()
		}
		return q.rcOutput()
	case verbs.QPSSQD:
		var did bool
		switch q.typ {
		case verbs.QPTypeRC:
			did = q.rcOutput()
		case verbs.QPTypeUC:
			did = q.ucOutput()
		}
		q.checkDrained()
		return did
	case verbs.QPSRTR:
		if q.typ == verbs.QPTypeRC {
			return q.respOutput()
		}
	case verbs.QPSErr:
		// Requests posted while the QP was moving to ERR are flushed here.
		if q.sq.tail.Load() != q.sq.done.Load() || q.rq.tail.Load() != q.rq.head.Load() {
			q.dev.flushQP(q)
			return true
		}
	}
	return false
}

// checkDrained ends a drain in SQD once no started request is outstanding:
// for RC when every started message is acknowledged, for UC when no message
// is half sent, for UD at once.
func (q *qp) checkDrained() {
	if !q.sqd.draining {
		return
	}
	switch q.typ {
	case verbs.QPTypeRC:
		if q.req.head != q.req.started {
			return
		}
	case verbs.QPTypeUC:
		if q.req.off != 0 {
			return
		}
	}
	q.sqd.draining = false
	if q.sqd.notify {
		q.dev.event(verbs.AsyncEvent{Type: verbs.EventSQDrained, QPN: q.qpn})
	}
}

// established reports COMM_EST for the first packet a connected QP receives
// in RTR.
func (q *qp) established(st verbs.QPState) {
	if st == verbs.QPSRTR && !q.commEst {
		q.commEst = true
		q.dev.event(verbs.AsyncEvent{Type: verbs.EventCommEst, QPN: q.qpn})
	}
}

// flushQP completes every outstanding work request of q with
// WR_FLUSH_ERR, as a QP entering the error state does. Each slot is
// released before its completion is queued (see releaseThenPush).
func (d *Device) flushQP(q *qp) {
	sq := &q.sq
	tail := sq.tail.Load()
	start := sq.done.Load()
	q.sqCons = tail
	q.req.flushed(tail)
	for i := start; i != tail; i++ {
		w := &sq.slots[i&sq.mask]
		wc := verbs.WC{ID: w.id, Status: verbs.WCWRFlushErr, Opcode: wcOpcode(w.op), QPN: q.qpn}
		d.cnt.inc(CntReqCQEFlushError)
		sq.done.Store(i + 1)
		q.scq.push(&wc)
	}
	sq.done.Store(tail)
	rq := &q.rq
	rtail := rq.tail.Load()
	for i := rq.head.Load(); i != rtail; i++ {
		w := &rq.slots[i&rq.mask]
		wc := verbs.WC{ID: w.id, Status: verbs.WCWRFlushErr, Opcode: verbs.WCRecv, QPN: q.qpn}
		d.cnt.inc(CntRespCQEFlushError)
		rq.head.Store(i + 1)
		q.rcq.push(&wc)
	}
	rq.head.Store(rtail)
	q.resp.flushed()
}

// releaseThenPush: a work queue slot is freed (done or head advanced)
// before the completion that retires it is queued, never after. The
// application may poll the completion the moment it is queued and post
// again; were the slot still counted, a queue filled to exactly its
// capacity would refuse that post with ErrQueueFull. The entry's fields are
// copied into the completion first, since a producer may refill the slot as
// soon as it is released.

// wcOpcode maps a send opcode to its completion opcode.
func wcOpcode(op verbs.WROpcode) verbs.WCOpcode {
	switch op {
	case verbs.WRRDMAWrite, verbs.WRRDMAWriteWithImm:
		return verbs.WCRDMAWrite
	case verbs.WRRDMARead:
		return verbs.WCRDMARead
	case verbs.WRAtomicCmpAndSwp:
		return verbs.WCCompSwap
	case verbs.WRAtomicFetchAndAdd:
		return verbs.WCFetchAdd
	}
	return verbs.WCSend
}
