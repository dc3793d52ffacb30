package soft

import (
	"fmt"
	"sync/atomic"

	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/verbs"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// ah is an address handle: a UD destination with a header template.
type ah struct {
	pd   *pd
	attr verbs.AHAttr
	src  roce.GID
	dst  roce.GID
	bld  roce.Builder
	dead atomic.Bool
}

var _ verbs.AH = (*ah)(nil)

func (a *ah) Attr() verbs.AHAttr { return a.attr }

func (a *ah) Destroy() error {
	if a.dead.Swap(true) {
		return fmt.Errorf("soft: destroy ah: %w", verbs.ErrClosed)
	}
	a.pd.users.Add(-1)
	return nil
}

// CreateAH implements verbs.PD.
func (p *pd) CreateAH(attr verbs.AHAttr) (verbs.AH, error) {
	if p.dead.Load() {
		return nil, fmt.Errorf("soft: create ah: %w", verbs.ErrClosed)
	}
	src, dst, err := p.dev.pathGIDs(&attr)
	if err != nil {
		return nil, fmt.Errorf("soft: create ah: %w", err)
	}
	a := &ah{pd: p, attr: attr, src: src, dst: dst}
	a.bld = roce.Builder{SrcMAC: p.dev.mac, SrcGID: src, DstGID: dst, TrafficClass: attr.TrafficClass,
		HopLimit: hopLimit(attr.HopLimit), FlowLabel: attr.FlowLabel, DontFragment: true, PKey: roce.DefaultPKey}
	p.users.Add(1)
	return a, nil
}

// udOutput sends the QP's posted UD requests: one packet each, completed as
// soon as the packet is queued for transmission (UD is unreliable, so that
// is when a NIC completes it too).
func (q *qp) udOutput() bool {
	d := q.dev
	sq := &q.sq
	tail := sq.tail.Load()
	did := false
	for budget := d.burst; budget > 0 && q.sqCons != tail; budget-- {
		w := &sq.slots[q.sqCons&sq.mask]
		a := w.ah
		mac, r := d.resolve(a.src, a.dst)
		if r == resolveWait {
			break
		}
		did = true
		if r == resolveFail {
			q.udComplete(w, verbs.WCRetryExcErr, vendorNoNeighbor)
			continue
		}
		pkt := d.allocTx()
		if pkt == nil {
			break
		}
		b := &d.bld
		*b = a.bld
		b.DstMAC = mac
		b.Opcode = roce.UDSendOnly
		if w.op == verbs.WRSendWithImm {
			b.Opcode = roce.UDSendOnlyImm
			b.Imm = w.imm
		}
		b.SE = w.solicited
		b.DestQP = w.rqpn
		b.PSN = q.udPSN
		b.SrcQP = q.qpn
		// A Q_Key with the high bit set means "use the QP's own" (IBTA 10.2.5).
		b.QKey = w.rqkey
		if int32(w.rqkey) < 0 {
			b.QKey = q.attr.QKey
		}
		if b.FlowLabel == 0 {
			b.SrcPort = roce.UDPSrcPort(0, q.qpn, w.rqpn)
		}
		buf := pkt.Buffer()
		hl := b.HeaderLen()
		gather(w.seg, 0, buf[hl:hl+int(w.length)])
		n, err := b.BuildInPlace(buf, int(w.length))
		if err != nil {
			pkt.Free()
			q.udComplete(w, verbs.WCLocLenErr, 0)
			continue
		}
		_ = pkt.SetLen(n)
		d.send(pkt)
		q.udPSN = roce.AddPSN(q.udPSN, 1)
		q.udComplete(w, verbs.WCSuccess, 0)
	}
	return did
}

// Vendor error codes in WC.VendorErr.
const (
	vendorNoNeighbor = 0x100 // the destination MAC could not be resolved
)

func (q *qp) udComplete(w *swqe, st verbs.WCStatus, vendor uint32) {
	report := w.signaled || st != verbs.WCSuccess
	wc := verbs.WC{ID: w.id, Status: st, Opcode: verbs.WCSend, ByteLen: w.length, QPN: q.qpn, VendorErr: vendor}
	// Release the slot first (see releaseThenPush).
	q.sqCons++
	q.sq.done.Store(q.sqCons)
	if report {
		if st != verbs.WCSuccess {
			q.dev.cnt.inc(CntReqCQEError)
		}
		q.scq.push(&wc)
	}
}

// grhLen is the room a UD receive buffer keeps for the GRH (ibverbs: the
// first 40 bytes of every UD receive).
const grhLen = 40

// udInput delivers a UD SEND into the next receive request.
func (d *Device) udInput(q *qp, frame []byte, p *roce.Packet, gi int) {
	st := verbs.QPState(q.state.Load())
	if st != verbs.QPSRTR && st != verbs.QPSRTS && st != verbs.QPSSQD {
		d.cnt.inc(CntRxWrongQP)
		return
	}
	if p.Opcode != roce.UDSendOnly && p.Opcode != roce.UDSendOnlyImm {
		d.cnt.inc(CntRxDiscards)
		return
	}
	dh := p.DETH(frame)
	if dh.QKey() != q.attr.QKey {
		d.cnt.inc(CntRxQKeyViolation)
		return
	}
	rq := &q.rq
	head := rq.head.Load()
	if head == rq.tail.Load() {
		d.cnt.inc(CntOutOfBuffer)
		return
	}
	w := &rq.slots[head&rq.mask]
	payload := p.Payload(frame)
	wc := verbs.WC{ID: w.id, Opcode: verbs.WCRecv, QPN: q.qpn, SrcQP: dh.SrcQP(), Flags: verbs.WCWithGRH,
		ByteLen: uint32(grhLen + len(payload))}
	if uint64(grhLen+len(payload)) > uint64(w.length) {
		wc.Status = verbs.WCLocLenErr
		d.cnt.inc(CntRespCQEError)
	} else {
		// The GRH area holds the IPv6 header, or for IPv4 twenty zero
		// bytes and then the IPv4 header, as mlx5 and rxe deliver it.
		var grh [grhLen]byte
		if p.IsIPv6() {
			copy(grh[:], frame[p.Net.L3Off:p.Net.L3Off+header.IPv6HeaderLen])
		} else {
			copy(grh[20:], frame[p.Net.L3Off:p.Net.L3Off+header.IPv4MinHeaderLen])
		}
		scatter(w.seg, 0, grh[:])
		scatter(w.seg, grhLen, payload)
	}
	if im := p.ImmDt(frame); im != nil {
		wc.Imm = im.Imm()
		wc.Flags |= verbs.WCWithImm
	}
	rq.head.Store(head + 1)
	q.rcq.push(&wc)
}
