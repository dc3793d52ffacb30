package soft

import (
	"encoding/binary"

	"github.com/rdma-appliance/appliance/verbs"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// The RC responder. Requests are executed in PSN order as they arrive;
// responses to READ and atomic requests are queued in the responder
// resources (max_dest_rd_atomic entries, a ring) and transmitted by the
// output pass, so a 1 MiB READ does not stall the loop, and ACKs and NAKs
// for later requests wait until the responses before them are out (an ACK
// overtaking a READ response would make the requester see an implied NAK).
// The same entries are the replay cache: a duplicate READ is served again
// from memory, a duplicate atomic gets the saved original value without
// executing twice.
type respState struct {
	epsn uint32 // expected PSN
	msn  uint32

	inSend  bool // a multi-packet SEND is in progress
	recvOff uint32
	inWrite bool // a multi-packet WRITE is in progress
	wrBuf   []byte
	wrOff   uint32

	nakSent    bool // a NAK sequence error went out for the current gap
	ackPending bool
	ctlPending bool // a NAK or RNR NAK waits behind queued responses
	ctlSyn     roce.Syndrome
	ctlPSN     uint32
	ctlAt      int64 // a delayed NAK sequence error goes at this time

	res            []rdRes
	resSeq, outSeq uint64
}

// rdRes is a responder resource: one READ or atomic request.
type rdRes struct {
	seq     uint64
	atomic  bool
	psn     uint32 // first PSN of the request
	last    uint32 // last PSN of its responses
	data    []byte // READ: the bytes to return, from PSN dataPSN on
	dataPSN uint32
	orig    uint64 // atomic: the original value
	cur     uint32 // next response PSN to transmit
	pending bool
}

func (r *respState) reset(epsn uint32, res int) {
	*r = respState{epsn: epsn, res: make([]rdRes, res)}
}

func (r *respState) flushed() {
	r.inSend, r.inWrite, r.wrBuf = false, false, nil
	r.outSeq = r.resSeq
	r.ackPending, r.ctlPending = false, false
}

func (r *respState) slot(seq uint64) *rdRes { return &r.res[seq%uint64(len(r.res))] }

// responderInput handles a request packet.
func (q *qp) responderInput(frame []byte, p *roce.Packet) {
	d := q.dev
	st := verbs.QPState(q.state.Load())
	if st != verbs.QPSRTR && st != verbs.QPSRTS && st != verbs.QPSSQD {
		d.cnt.inc(CntRxWrongQP)
		return
	}
	q.established(st)
	r := &q.resp
	if !q.req.macKnown {
		// Answer where the request came from until the requester side
		// resolves the neighbour itself.
		q.bld.DstMAC = p.Net.Ethernet(frame).Src()
	}
	diff := roce.ComparePSN(p.PSN, r.epsn)
	if diff > 0 {
		if !r.nakSent {
			// mlx5 counts out_of_sequence once per NAK sequence error,
			// not per packet dropped behind the gap: Lumina's checks,
			// written from CX4-6 hardware, compare it with the NAKs.
			d.cnt.inc(CntOutOfSequence)
			r.nakSent = true
			q.queueCtl(roce.NAKSyndrome(roce.NAKPSNSequenceError), r.epsn)
			if dl := int64(d.prof.NAKGenerationDelay); dl > 0 {
				r.ctlAt = d.now + dl
			}
			if d.prof.NAKTriggersCNP && d.prof.CNPEnable {
				d.sendCNP(q, frame, p)
			}
		}
		return
	}
	if diff < 0 {
		d.cnt.inc(CntDuplicateRequest)
		q.duplicate(frame, p)
		return
	}
	r.nakSent = false
	switch p.Opcode {
	case roce.RCSendFirst, roce.RCSendOnly, roce.RCSendOnlyImm, roce.RCSendMiddle, roce.RCSendLast, roce.RCSendLastImm:
		q.recvSend(frame, p)
	case roce.RCWriteFirst, roce.RCWriteOnly, roce.RCWriteOnlyImm, roce.RCWriteMiddle, roce.RCWriteLast, roce.RCWriteLastImm:
		q.recvWrite(frame, p)
	case roce.RCReadRequest:
		q.recvRead(frame, p)
	case roce.RCCompareSwap, roce.RCFetchAdd:
		q.recvAtomic(frame, p)
	default:
		q.nakInvalid()
	}
}

// nakInvalid answers an invalid request (bad opcode sequence, bad length).
func (q *qp) nakInvalid() {
	q.queueCtl(roce.NAKSyndrome(roce.NAKInvalidRequest), q.resp.epsn)
}

// accepted advances the expected PSN past an executed request.
func (q *qp) accepted(n int) {
	r := &q.resp
	r.epsn = roce.AddPSN(r.epsn, n)
	r.ackPending = true
}

// segment checks that a SEND or WRITE packet fits the message in progress
// (segmentFits); a packet that does not fit draws an invalid request NAK.
func (q *qp) segment(frame []byte, p *roce.Packet, inThis, inOther bool) (roce.Position, []byte, bool) {
	pos := p.Info().Position
	pl := p.Payload(frame)
	if !segmentFits(pos, len(pl), q.mtu, inThis, inOther) {
		q.nakInvalid()
		return pos, nil, false
	}
	return pos, pl, true
}

// segmentFits says whether a SEND or WRITE packet at position pos with n
// payload bytes fits the message in progress: a first or only packet when
// none of its kind is open (and no message of the other kind is), a middle
// or last one otherwise, and a full-MTU payload unless it ends the message.
func segmentFits(pos roce.Position, n, mtu int, inThis, inOther bool) bool {
	return pos.IsStart() != inThis && !inOther && (pos.IsEnd() || n == mtu) && n <= mtu
}

func (q *qp) recvSend(frame []byte, p *roce.Packet) {
	d := q.dev
	r := &q.resp
	pos, pl, ok := q.segment(frame, p, r.inSend, r.inWrite)
	if !ok {
		return
	}
	rq := &q.rq
	head := rq.head.Load()
	if pos.IsStart() {
		if head == rq.tail.Load() {
			d.cnt.inc(CntOutOfBuffer)
			d.cnt.inc(CntRNRNakSent)
			q.queueCtl(roce.RNRNAKSyndrome(q.attr.MinRNRTimer), p.PSN)
			return
		}
		r.inSend, r.recvOff = true, 0
	}
	w := &rq.slots[head&rq.mask]
	if !scatter(w.seg, int(r.recvOff), pl) {
		// The message is longer than the receive buffer: a local length
		// error for the receiver, an invalid request for the sender.
		wc := verbs.WC{ID: w.id, Status: verbs.WCLocLenErr, Opcode: verbs.WCRecv, QPN: q.qpn}
		d.cnt.inc(CntRespCQEError)
		rq.head.Store(head + 1)
		q.rcq.push(&wc)
		q.sendCtl(roce.NAKSyndrome(roce.NAKInvalidRequest), p.PSN)
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
		r.msn = (r.msn + 1) & roce.MSNMask
	}
	q.accepted(1)
}

// checkRemote resolves an R_Key for remote access: the key must name a
// region of the QP's PD that allows the access, the QP must allow it too,
// and [va, va+n) must lie inside the region.
func (q *qp) checkRemote(rkey uint32, va uint64, n uint32, acc verbs.Access) ([]byte, bool) {
	if q.attr.AccessFlags&acc == 0 {
		return nil, false
	}
	if n == 0 {
		return nil, true // zero-length transfers check no key (IBTA 9.4.4)
	}
	m := q.dev.keys.lookup(rkey)
	if m == nil || m.pd != q.pd || m.access&acc == 0 || m.dead.Load() {
		return nil, false
	}
	return m.slice(va, n)
}

func (q *qp) recvWrite(frame []byte, p *roce.Packet) {
	d := q.dev
	r := &q.resp
	pos, pl, ok := q.segment(frame, p, r.inWrite, r.inSend)
	if !ok {
		return
	}
	imm := p.ImmDt(frame) != nil
	rq := &q.rq
	head := rq.head.Load()
	if imm && head == rq.tail.Load() {
		// WRITE with immediate consumes a receive: check before placing
		// data so a retry after the RNR wait finds the same state.
		d.cnt.inc(CntOutOfBuffer)
		d.cnt.inc(CntRNRNakSent)
		q.queueCtl(roce.RNRNAKSyndrome(q.attr.MinRNRTimer), p.PSN)
		return
	}
	if pos.IsStart() {
		h := p.RETH(frame)
		buf, ok := q.checkRemote(h.RKey(), h.VA(), h.DMALen(), verbs.AccessRemoteWrite)
		if !ok {
			q.queueCtl(roce.NAKSyndrome(roce.NAKRemoteAccessError), p.PSN)
			return
		}
		r.inWrite, r.wrBuf, r.wrOff = true, buf, 0
	}
	if int(r.wrOff)+len(pl) > len(r.wrBuf) || (pos.IsEnd() && int(r.wrOff)+len(pl) != len(r.wrBuf)) {
		r.inWrite, r.wrBuf = false, nil
		q.nakInvalid()
		return
	}
	copy(r.wrBuf[r.wrOff:], pl)
	r.wrOff += uint32(len(pl))
	if pos.IsEnd() {
		if imm {
			w := &rq.slots[head&rq.mask]
			wc := verbs.WC{ID: w.id, Opcode: verbs.WCRecvRDMAWithImm, ByteLen: r.wrOff, QPN: q.qpn,
				SrcQP: q.attr.DestQPN, Imm: p.ImmDt(frame).Imm(), Flags: verbs.WCWithImm}
			rq.head.Store(head + 1)
			q.rcq.push(&wc)
		}
		r.inWrite, r.wrBuf = false, nil
		r.msn = (r.msn + 1) & roce.MSNMask
	}
	q.accepted(1)
}

// allocRes takes the next responder resource, or nil when all of them still
// have responses to send (the requester exceeded max_dest_rd_atomic, or
// responses are slow; dropping makes it retry).
func (q *qp) allocRes() *rdRes {
	r := &q.resp
	if r.resSeq-r.outSeq >= uint64(len(r.res)) {
		return nil
	}
	s := r.slot(r.resSeq)
	*s = rdRes{seq: r.resSeq}
	r.resSeq++
	return s
}

func (q *qp) recvRead(frame []byte, p *roce.Packet) {
	r := &q.resp
	if r.inSend || r.inWrite || len(r.res) == 0 {
		q.nakInvalid()
		return
	}
	h := p.RETH(frame)
	n := h.DMALen()
	if n > maxMsgSize {
		q.nakInvalid()
		return
	}
	buf, ok := q.checkRemote(h.RKey(), h.VA(), n, verbs.AccessRemoteRead)
	if !ok {
		q.queueCtl(roce.NAKSyndrome(roce.NAKRemoteAccessError), p.PSN)
		return
	}
	s := q.allocRes()
	if s == nil {
		return
	}
	np := max(1, (n+uint32(q.mtu)-1)/uint32(q.mtu))
	s.psn, s.last = p.PSN, roce.AddPSN(p.PSN, int(np)-1)
	s.data, s.dataPSN, s.cur, s.pending = buf, p.PSN, p.PSN, true
	r.msn = (r.msn + 1) & roce.MSNMask
	r.epsn = roce.AddPSN(r.epsn, int(np))
}

func (q *qp) recvAtomic(frame []byte, p *roce.Packet) {
	r := &q.resp
	if r.inSend || r.inWrite || len(r.res) == 0 {
		q.nakInvalid()
		return
	}
	h := p.AtomicETH(frame)
	if h.VA()&7 != 0 {
		q.nakInvalid()
		return
	}
	buf, ok := q.checkRemote(h.RKey(), h.VA(), 8, verbs.AccessRemoteAtomic)
	if !ok {
		q.queueCtl(roce.NAKSyndrome(roce.NAKRemoteAccessError), p.PSN)
		return
	}
	s := q.allocRes()
	if s == nil {
		return
	}
	// The soft RNIC's memory is the host's: atomics operate on native-endian
	// 64-bit words, as a NIC's PCIe atomics do on the host.
	orig := binary.NativeEndian.Uint64(buf)
	if p.Opcode == roce.RCCompareSwap {
		if orig == h.Compare() {
			binary.NativeEndian.PutUint64(buf, h.SwapAdd())
		}
	} else {
		binary.NativeEndian.PutUint64(buf, orig+h.SwapAdd())
	}
	s.atomic, s.psn, s.last, s.orig, s.cur, s.pending = true, p.PSN, p.PSN, orig, p.PSN, true
	r.msn = (r.msn + 1) & roce.MSNMask
	r.epsn = roce.AddPSN(r.epsn, 1)
}

// duplicate handles a request with a PSN already executed: SEND and WRITE
// are acknowledged again, READ is served again from the resource that
// covers the PSN, an atomic gets its saved result.
func (q *qp) duplicate(frame []byte, p *roce.Packet) {
	r := &q.resp
	switch p.Opcode {
	case roce.RCReadRequest, roce.RCCompareSwap, roce.RCFetchAdd:
	default:
		r.ackPending = true
		return
	}
	atomic := p.Opcode != roce.RCReadRequest
	lo := r.resSeq - min(r.resSeq, uint64(len(r.res)))
	for seq := r.resSeq; seq > lo; seq-- {
		s := r.slot(seq - 1)
		if s.atomic != atomic {
			continue
		}
		rel := roce.ComparePSN(p.PSN, s.psn)
		if rel < 0 || roce.ComparePSN(p.PSN, s.last) > 0 {
			continue
		}
		if !atomic {
			// The requester asks again from p.PSN on, with VA and length
			// adjusted to what it still lacks.
			h := p.RETH(frame)
			buf, ok := q.checkRemote(h.RKey(), h.VA(), h.DMALen(), verbs.AccessRemoteRead)
			if !ok {
				return
			}
			s.data, s.dataPSN = buf, p.PSN
		} else if rel != 0 {
			return
		}
		s.cur, s.pending = p.PSN, true
		// Go-back-N: whatever was queued after this resource will be
		// asked for again, so restart the output here.
		for later := seq; later < r.resSeq; later++ {
			r.slot(later).pending = false
		}
		if seq-1 < r.outSeq {
			r.outSeq = seq - 1
		}
		return
	}
}

// queueCtl schedules a NAK or RNR NAK behind any queued responses.
//
// An error NAK (remote access, invalid request) is final for the requester:
// it must not be replaced by the sequence NAK that the requests following
// the failed one provoke, so it also stands for the gap they open.
//
// So does an RNR NAK: the requester already sent the packets behind the
// message that found no receive, and they arrive out of sequence. Answering
// them with a sequence NAK would replace the RNR NAK still queued, or
// follow it, and the requester counts sequence NAKs against retry_cnt: a
// receiver that is merely slow to post (rnr_retry 7 means "wait forever")
// would fail the connection with RETRY_EXC_ERR. They are dropped instead,
// as after any NAK, until the requester retries the NAKed PSN.
func (q *qp) queueCtl(syn roce.Syndrome, psn uint32) {
	r := &q.resp
	if r.ctlPending && r.ctlSyn.IsNAK() && r.ctlSyn.NAKCode() != roce.NAKPSNSequenceError {
		return
	}
	r.ctlPending, r.ctlSyn, r.ctlPSN, r.ctlAt = true, syn, psn, 0
	r.ackPending = false
	if syn.IsRNRNAK() || (syn.IsNAK() && syn.NAKCode() != roce.NAKPSNSequenceError) {
		r.nakSent = true
	}
}

// respOutput transmits queued READ responses and atomic ACKs, then the
// pending NAK or the coalesced ACK.
func (q *qp) respOutput() bool {
	d := q.dev
	r := &q.resp
	did := false
	mtu := uint32(q.mtu)
	for budget := d.burst; budget > 0 && r.outSeq < r.resSeq; budget-- {
		s := r.slot(r.outSeq)
		if !s.pending {
			r.outSeq++
			continue
		}
		if !d.txRoom() {
			return did
		}
		pkt := d.allocTx()
		if pkt == nil {
			return did
		}
		b := &q.bld
		b.PSN, b.AckReq, b.SE = s.cur, false, false
		b.Syndrome, b.MSN = roce.ACKSyndrome(roce.CreditsInvalid), r.msn
		payload := 0
		off := uint32(0)
		if s.atomic {
			b.Opcode = roce.RCAtomicAck
			b.AtomicAckData = s.orig
			s.pending = false
		} else {
			off = uint32(roce.ComparePSN(s.cur, s.dataPSN)) * mtu
			rem := uint32(len(s.data)) - off
			n := min(rem, mtu)
			first, last := s.cur == s.dataPSN, rem <= mtu
			switch {
			case first && last:
				b.Opcode = roce.RCReadResponseOnly
			case first:
				b.Opcode = roce.RCReadResponseFirst
			case last:
				b.Opcode = roce.RCReadResponseLast
			default:
				b.Opcode = roce.RCReadResponseMiddle
			}
			payload = int(n)
			if last {
				s.pending = false
			}
		}
		buf := pkt.Buffer()
		hl := b.HeaderLen()
		copy(buf[hl:hl+payload], s.data[off:])
		n, err := b.BuildInPlace(buf, payload)
		if err != nil {
			pkt.Free()
			s.pending = false
			continue
		}
		_ = pkt.SetLen(n)
		d.send(pkt)
		s.cur = roce.AddPSN(s.cur, 1)
		if !s.pending {
			r.outSeq++
		}
		did = true
	}
	if r.outSeq != r.resSeq {
		return did
	}
	if r.ctlPending {
		if r.ctlAt != 0 && d.now < r.ctlAt {
			return did // the NIC is still generating the NAK
		}
		if q.sendCtl(r.ctlSyn, r.ctlPSN) {
			r.ctlPending, r.ctlAt = false, 0
			did = true
		}
	} else if r.ackPending {
		if q.sendCtl(roce.ACKSyndrome(roce.CreditsInvalid), roce.AddPSN(r.epsn, -1)) {
			r.ackPending = false
			did = true
		}
	}
	return did
}

// sendCtl transmits an ACK, NAK or RNR NAK now.
func (q *qp) sendCtl(syn roce.Syndrome, psn uint32) bool {
	d := q.dev
	pkt := d.allocTx()
	if pkt == nil {
		return false
	}
	b := &q.bld
	b.Opcode, b.PSN, b.AckReq, b.SE = roce.RCAck, psn, false, false
	b.Syndrome, b.MSN = syn, q.resp.msn
	n, err := b.BuildInPlace(pkt.Buffer(), 0)
	if err != nil {
		pkt.Free()
		return false
	}
	_ = pkt.SetLen(n)
	d.send(pkt)
	return true
}
