package soft

import (
	"github.com/rdma-appliance/appliance/verbs"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// Unreliable Connected QPs: SEND and RDMA WRITE (with and without
// immediate) over a connection, segmented at the path MTU like RC, but with
// no acknowledgements and no retransmission. The requester completes a work
// request once its last packet is queued for transmission. The responder
// tracks the expected PSN; a gap (or a packet that does not fit the message
// in progress, or a WRITE whose R_Key check fails) silently discards the
// rest of the message and everything up to the next first or only packet,
// and a SEND so discarded does not consume its receive request (IBTA 9.7.5.2
// and 9.9.1 for UC).

// ucOutput transmits the QP's posted requests.
func (q *qp) ucOutput() bool {
	d := q.dev
	sq := &q.sq
	tail := sq.tail.Load()
	if q.sqCons == tail {
		return false
	}
	if !q.req.macKnown {
		mac, res := d.resolve(q.srcGID, q.dstGID)
		switch res {
		case resolveWait:
			return false
		case resolveFail:
			q.ucComplete(&sq.slots[q.sqCons&sq.mask], verbs.WCRetryExcErr, vendorNoNeighbor)
			return true
		}
		q.bld.DstMAC, q.req.macKnown = mac, true
	}
	did := false
	mtu := uint32(q.mtu)
	for budget := d.burst; budget > 0 && q.sqCons != tail; budget-- {
		if q.req.off == 0 && q.attr.State == verbs.QPSSQD {
			break // SQD: finish the message in progress, start none
		}
		if !d.txRoom() {
			break
		}
		if d.prof.DCQCNRate && !q.rp.Allowed(d.now) {
			if q.rp.NextTx()-d.now < pacingSpin {
				did = true
			}
			break
		}
		pkt := d.allocTx()
		if pkt == nil {
			break
		}
		did = true
		w := &sq.slots[q.sqCons&sq.mask]
		off := q.req.off
		rem := w.length - off
		n := min(rem, mtu)
		first, last := off == 0, rem <= mtu
		send := w.op == verbs.WRSend || w.op == verbs.WRSendWithImm
		imm := w.op.HasImm()
		b := &q.bld
		b.PSN = q.udPSN
		b.AckReq, b.SE = false, last && w.solicited
		switch {
		case first && last:
			b.Opcode = pick(send, imm, roce.UCSendOnly, roce.UCSendOnlyImm, roce.UCWriteOnly, roce.UCWriteOnlyImm)
		case first:
			b.Opcode = pick(send, false, roce.UCSendFirst, 0, roce.UCWriteFirst, 0)
		case last:
			b.Opcode = pick(send, imm, roce.UCSendLast, roce.UCSendLastImm, roce.UCWriteLast, roce.UCWriteLastImm)
		default:
			b.Opcode = pick(send, false, roce.UCSendMiddle, 0, roce.UCWriteMiddle, 0)
		}
		if first && !send {
			b.VA, b.RKey, b.DMALen = w.raddr, w.rkey, w.length
		}
		b.Imm = w.imm
		buf := pkt.Buffer()
		hl := b.HeaderLen()
		if n > 0 {
			gather(w.seg, int(off), buf[hl:hl+int(n)])
		}
		size, err := b.BuildInPlace(buf, int(n))
		if err != nil {
			pkt.Free()
			q.ucComplete(w, verbs.WCLocLenErr, 0)
			continue
		}
		_ = pkt.SetLen(size)
		d.send(pkt)
		if d.prof.DCQCNRate {
			q.rp.Sent(d.now, size)
		}
		q.udPSN = roce.AddPSN(q.udPSN, 1)
		q.req.off += n
		if last {
			q.ucComplete(w, verbs.WCSuccess, 0)
		}
	}
	return did
}

// ucComplete retires the oldest send request; an error moves the QP to the
// error state, which flushes the rest.
func (q *qp) ucComplete(w *swqe, st verbs.WCStatus, vendor uint32) {
	q.req.off = 0
	report := w.signaled || st != verbs.WCSuccess
	wc := verbs.WC{ID: w.id, Status: st, Opcode: wcOpcode(w.op), ByteLen: w.length, QPN: q.qpn, VendorErr: vendor}
	// Release the slot first (see releaseThenPush).
	q.sqCons++
	q.sq.done.Store(q.sqCons)
	if report {
		if st != verbs.WCSuccess {
			q.dev.cnt.inc(CntReqCQEError)
		}
		q.scq.push(&wc)
	}
	if st != verbs.WCSuccess {
		q.toError()
	}
}

// ucInput handles a UC packet for q.
func (q *qp) ucInput(frame []byte, p *roce.Packet) {
	d := q.dev
	st := verbs.QPState(q.state.Load())
	if st != verbs.QPSRTR && st != verbs.QPSRTS && st != verbs.QPSSQD {
		d.cnt.inc(CntRxWrongQP)
		return
	}
	q.established(st)
	r := &q.resp
	if p.PSN != r.epsn {
		d.cnt.inc(CntOutOfSequence)
		r.ucAbort()
	}
	r.epsn = roce.AddPSN(p.PSN, 1)
	send := p.Opcode <= roce.UCSendOnlyImm
	pos := p.Info().Position
	pl := p.Payload(frame)
	if !q.ucFits(send, pos, len(pl)) {
		// A first or only packet while a message is open means the end
		// of that message was lost: abandon it and take the new one.
		// Anything else is dropped; so are the following packets of
		// its message, which no longer fit either.
		d.cnt.inc(CntRxDiscards)
		r.ucAbort()
		if !pos.IsStart() || !q.ucFits(send, pos, len(pl)) {
			return
		}
	}
	if send {
		q.ucRecvSend(frame, p, pos, pl)
	} else {
		q.ucRecvWrite(frame, p, pos, pl)
	}
}

func (q *qp) ucFits(send bool, pos roce.Position, n int) bool {
	r := &q.resp
	if send {
		return segmentFits(pos, n, q.mtu, r.inSend, r.inWrite)
	}
	return segmentFits(pos, n, q.mtu, r.inWrite, r.inSend)
}

// ucAbort abandons the message in progress; its remaining packets will not
// fit and are dropped until the next first or only packet.
func (r *respState) ucAbort() {
	r.inSend, r.inWrite, r.wrBuf = false, false, nil
}

func (q *qp) ucRecvSend(frame []byte, p *roce.Packet, pos roce.Position, pl []byte) {
	d := q.dev
	r := &q.resp
	rq := &q.rq
	head := rq.head.Load()
	if pos.IsStart() {
		if head == rq.tail.Load() {
			// No receive request: UC drops the message.
			d.cnt.inc(CntOutOfBuffer)
			return
		}
		r.inSend, r.recvOff = true, 0
	}
	w := &rq.slots[head&rq.mask]
	if !scatter(w.seg, int(r.recvOff), pl) {
		wc := verbs.WC{ID: w.id, Status: verbs.WCLocLenErr, Opcode: verbs.WCRecv, QPN: q.qpn}
		d.cnt.inc(CntRespCQEError)
		rq.head.Store(head + 1)
		q.rcq.push(&wc)
		q.toError()
		return
	}
	r.recvOff += uint32(len(pl))
	if pos.IsEnd() {
		wc := verbs.WC{ID: w.id, Opcode: verbs.WCRecv, ByteLen: r.recvOff, QPN: q.qpn, SrcQP: q.attr.DestQPN}
		if im := p.ImmDt(frame); im != nil {
			wc.Imm, wc.Flags = im.Imm(), verbs.WCWithImm
		}
		rq.head.Store(head + 1)
		q.rcq.push(&wc)
		r.inSend = false
	}
}

func (q *qp) ucRecvWrite(frame []byte, p *roce.Packet, pos roce.Position, pl []byte) {
	d := q.dev
	r := &q.resp
	if pos.IsStart() {
		h := p.RETH(frame)
		buf, ok := q.checkRemote(h.RKey(), h.VA(), h.DMALen(), verbs.AccessRemoteWrite)
		if !ok {
			d.cnt.inc(CntRxDiscards)
			return
		}
		r.inWrite, r.wrBuf, r.wrOff = true, buf, 0
	}
	if int(r.wrOff)+len(pl) > len(r.wrBuf) || (pos.IsEnd() && int(r.wrOff)+len(pl) != len(r.wrBuf)) {
		d.cnt.inc(CntRxDiscards)
		r.ucAbort()
		return
	}
	imm := p.ImmDt(frame)
	rq := &q.rq
	head := rq.head.Load()
	if pos.IsEnd() && imm != nil && head == rq.tail.Load() {
		// The immediate needs a receive request; without one the
		// message is dropped (its data may already be in place, as on
		// a NIC).
		d.cnt.inc(CntOutOfBuffer)
		r.inWrite, r.wrBuf = false, nil
		return
	}
	copy(r.wrBuf[r.wrOff:], pl)
	r.wrOff += uint32(len(pl))
	if pos.IsEnd() {
		if imm != nil {
			w := &rq.slots[head&rq.mask]
			wc := verbs.WC{ID: w.id, Opcode: verbs.WCRecvRDMAWithImm, ByteLen: r.wrOff, QPN: q.qpn,
				SrcQP: q.attr.DestQPN, Imm: imm.Imm(), Flags: verbs.WCWithImm}
			rq.head.Store(head + 1)
			q.rcq.push(&wc)
		}
		r.inWrite, r.wrBuf = false, nil
	}
}
