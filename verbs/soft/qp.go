package soft

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rdma-appliance/appliance/verbs"
	"github.com/rdma-appliance/appliance/verbs/dcqcn"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// Limits the soft RNIC enforces (reported in DeviceInfo).
const (
	maxQPWR      = 1 << 14
	maxSGE       = 16
	maxInline    = 1024
	maxQPs       = 1 << 14
	maxRdAtomic  = 16
	maxMsgSize   = 1 << 31
	qpnIndexBase = 0x100 // QPNs below are reserved (0 SMI, 1 GSI, and room for specials)
)

// swqe is a send queue entry. The application fills it under the send
// queue's lock, the poll loop owns it from the moment the tail moves past it
// until it retires it. Its segment and inline arrays are allocated once when
// the QP is created, so posting allocates nothing.
type swqe struct {
	id         uint64
	op         verbs.WROpcode
	signaled   bool
	solicited  bool
	fence      bool
	imm        uint32
	raddr      uint64
	rkey       uint32
	compareAdd uint64
	swap       uint64
	ah         *ah
	rqpn       uint32
	rqkey      uint32
	length     uint32
	seg        [][]byte // the local buffers of the SGL, resolved at post time
	inline     []byte   // backing store of inline data

	// Requester progress, owned by the loop.
	psn   uint32 // first PSN
	npkts uint32 // PSNs the request consumes (READ: response packets)
	done  bool   // READ data / atomic result arrived, ready to retire
}

// rwqe is a receive queue entry.
type rwqe struct {
	id     uint64
	length uint32
	seg    [][]byte
}

// sendQueue is a ring of swqes: many producers (under mu), one consumer (the
// poll loop). tail is published by producers; done by the loop once entries
// have completed, which frees their slots.
type sendQueue struct {
	mu    sync.Mutex
	slots []swqe
	mask  uint64
	tail  atomic.Uint64
	done  atomic.Uint64
}

type recvQueue struct {
	mu    sync.Mutex
	slots []rwqe
	mask  uint64
	tail  atomic.Uint64
	head  atomic.Uint64 // consumed by the loop
}

func pow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

// qp is a queue pair. Fields below "loop-owned" are touched only with the
// device's loop lock held (by the loop or a control operation).
type qp struct {
	dev    *Device
	pd     *pd
	typ    verbs.QPType
	qpn    uint32
	scq    *cq
	rcq    *cq
	sigAll bool
	cap    verbs.QPCap
	state  atomic.Uint32 // mirror of attr.State for the posting paths

	sq sendQueue
	rq recvQueue

	// loop-owned
	attr    verbs.QPAttr
	dead    bool
	bld     roce.Builder // RC: the connection's headers, set at RTR
	srcGID  roce.GID
	dstGID  roce.GID
	mtu     int
	sgidIdx int
	udPSN   uint32
	sqCons  uint64 // UD: next swqe to send
	req     reqState
	resp    respState
	cnpLast int64    // CNP pacing with CNPPerQP
	rp      dcqcn.RP // DCQCN reaction point (Profile.DCQCNRate)
	sqd     sqdState
	commEst bool // COMM_EST reported
}

// sqdState tracks a move to SQD: the send queue stops starting requests
// and is drained once those already started are done.
type sqdState struct {
	draining bool // in SQD with started requests outstanding
	notify   bool // report EventSQDrained when the drain ends
}

var _ verbs.QP = (*qp)(nil)

func (q *qp) QPN() uint32        { return q.qpn }
func (q *qp) Type() verbs.QPType { return q.typ }

// CreateQP implements verbs.PD.
func (p *pd) CreateQP(attr verbs.QPInitAttr) (verbs.QP, error) {
	d := p.dev
	if p.dead.Load() || d.closed.Load() {
		return nil, fmt.Errorf("soft: create qp: %w", verbs.ErrClosed)
	}
	if attr.Type != verbs.QPTypeRC && attr.Type != verbs.QPTypeUC && attr.Type != verbs.QPTypeUD {
		return nil, fmt.Errorf("soft: create qp: %w: %v", verbs.ErrNotSupported, attr.Type)
	}
	scq, ok1 := attr.SendCQ.(*cq)
	rcq, ok2 := attr.RecvCQ.(*cq)
	if !ok1 || !ok2 || scq == nil || rcq == nil || scq.dev != d || rcq.dev != d {
		return nil, fmt.Errorf("soft: create qp: %w: CQs must belong to this device", verbs.ErrInvalidArgument)
	}
	if scq.dead.Load() || rcq.dead.Load() {
		return nil, fmt.Errorf("soft: create qp: %w: CQ destroyed", verbs.ErrClosed)
	}
	c := attr.Cap
	if c.MaxSendWR <= 0 || c.MaxRecvWR < 0 || c.MaxSendWR > maxQPWR || c.MaxRecvWR > maxQPWR ||
		c.MaxSendSGE < 0 || c.MaxRecvSGE < 0 || c.MaxSendSGE > maxSGE || c.MaxRecvSGE > maxSGE ||
		c.MaxInlineData < 0 || c.MaxInlineData > maxInline {
		return nil, fmt.Errorf("soft: create qp: %w: capabilities %+v", verbs.ErrInvalidArgument, c)
	}
	c.MaxSendSGE = max(c.MaxSendSGE, 1)
	c.MaxRecvSGE = max(c.MaxRecvSGE, 1)
	q := &qp{dev: d, pd: p, typ: attr.Type, scq: scq, rcq: rcq, sigAll: attr.SigAll, cap: c}
	ns, nr := pow2(c.MaxSendWR), pow2(max(c.MaxRecvWR, 1))
	q.sq.slots, q.sq.mask = make([]swqe, ns), uint64(ns-1)
	q.rq.slots, q.rq.mask = make([]rwqe, nr), uint64(nr-1)
	sseg := make([][]byte, ns*c.MaxSendSGE)
	var inl []byte
	if c.MaxInlineData > 0 {
		inl = make([]byte, ns*c.MaxInlineData)
	}
	for i := range q.sq.slots {
		q.sq.slots[i].seg = sseg[i*c.MaxSendSGE : i*c.MaxSendSGE : (i+1)*c.MaxSendSGE]
		if inl != nil {
			q.sq.slots[i].inline = inl[i*c.MaxInlineData : (i+1)*c.MaxInlineData : (i+1)*c.MaxInlineData]
		}
	}
	rseg := make([][]byte, nr*c.MaxRecvSGE)
	for i := range q.rq.slots {
		q.rq.slots[i].seg = rseg[i*c.MaxRecvSGE : i*c.MaxRecvSGE : (i+1)*c.MaxRecvSGE]
	}
	q.req.init()
	if err := d.addQP(q); err != nil {
		return nil, err
	}
	p.users.Add(1)
	scq.users.Add(1)
	rcq.users.Add(1)
	return q, nil
}

// Modify implements verbs.QP: the transition is checked with
// verbs.CheckModify, then applied with the loop lock held so the poll loop
// sees the QP either before or after, never half way.
func (q *qp) Modify(attr *verbs.QPAttr, mask verbs.AttrMask) error {
	if attr == nil {
		return fmt.Errorf("soft: modify qp: %w: nil attributes", verbs.ErrInvalidArgument)
	}
	d := q.dev
	d.lockLoop()
	defer d.unlockLoop()
	if q.dead {
		return fmt.Errorf("soft: modify qp %#x: %w", q.qpn, verbs.ErrClosed)
	}
	cur := q.attr.State
	next, err := verbs.CheckModify(q.typ, cur, attr, mask)
	if err != nil {
		return fmt.Errorf("soft: modify qp %#x: %w", q.qpn, err)
	}
	na := q.attr
	applyAttr(&na, attr, mask)
	na.State = next
	if mask&verbs.AttrMaxDestRdAtomic != 0 && na.MaxDestRdAtomic > maxRdAtomic {
		return fmt.Errorf("soft: modify qp %#x: %w: max_dest_rd_atomic %d > %d", q.qpn,
			verbs.ErrInvalidArgument, na.MaxDestRdAtomic, maxRdAtomic)
	}
	if mask&verbs.AttrMaxQPRdAtomic != 0 && na.MaxRdAtomic > maxRdAtomic {
		return fmt.Errorf("soft: modify qp %#x: %w: max_rd_atomic %d > %d", q.qpn,
			verbs.ErrInvalidArgument, na.MaxRdAtomic, maxRdAtomic)
	}
	if mask&verbs.AttrPort != 0 && na.Port != 1 {
		return fmt.Errorf("soft: modify qp %#x: %w: port %d (the soft RNIC has port 1)", q.qpn,
			verbs.ErrInvalidArgument, na.Port)
	}
	if next == verbs.QPSRTR && cur == verbs.QPSInit && q.typ != verbs.QPTypeUD {
		if err := q.setPath(&na); err != nil {
			return fmt.Errorf("soft: modify qp %#x: %w", q.qpn, err)
		}
		q.resp.reset(na.RQPSN, int(na.MaxDestRdAtomic))
	}
	q.attr = na
	switch {
	case next == verbs.QPSRTS && cur == verbs.QPSRTR:
		switch q.typ {
		case verbs.QPTypeRC:
			q.req.start(na.SQPSN)
		case verbs.QPTypeUC:
			q.udPSN = na.SQPSN
			q.req.off = 0
		default:
			q.udPSN = na.SQPSN
		}
		if d.prof.DCQCNRate && q.typ != verbs.QPTypeUD {
			q.rp.Init(&d.prof.DCQCN)
		}
	case next == verbs.QPSSQD && cur == verbs.QPSRTS:
		q.sqd = sqdState{draining: true, notify: na.EnSQDAsyncNotify}
	case next == verbs.QPSRTS && cur == verbs.QPSSQD:
		q.sqd = sqdState{}
		d.kick()
	case next == verbs.QPSErr && cur != verbs.QPSErr:
		q.state.Store(uint32(next))
		d.flushQP(q)
	case next == verbs.QPSReset && cur != verbs.QPSReset:
		q.state.Store(uint32(next))
		q.resetQueues()
		q.attr = verbs.QPAttr{}
	}
	q.state.Store(uint32(next))
	return nil
}

func applyAttr(a *verbs.QPAttr, in *verbs.QPAttr, m verbs.AttrMask) {
	if m&verbs.AttrAccessFlags != 0 {
		a.AccessFlags = in.AccessFlags
	}
	if m&verbs.AttrPKeyIndex != 0 {
		a.PKeyIndex = in.PKeyIndex
	}
	if m&verbs.AttrPort != 0 {
		a.Port = in.Port
	}
	if m&verbs.AttrQKey != 0 {
		a.QKey = in.QKey
	}
	if m&verbs.AttrAV != 0 {
		a.AH = in.AH
	}
	if m&verbs.AttrPathMTU != 0 {
		a.PathMTU = in.PathMTU
	}
	if m&verbs.AttrTimeout != 0 {
		a.Timeout = in.Timeout
	}
	if m&verbs.AttrRetryCnt != 0 {
		a.RetryCnt = in.RetryCnt
	}
	if m&verbs.AttrRNRRetry != 0 {
		a.RNRRetry = in.RNRRetry
	}
	if m&verbs.AttrRQPSN != 0 {
		a.RQPSN = in.RQPSN
	}
	if m&verbs.AttrMaxQPRdAtomic != 0 {
		a.MaxRdAtomic = in.MaxRdAtomic
	}
	if m&verbs.AttrMinRNRTimer != 0 {
		a.MinRNRTimer = in.MinRNRTimer
	}
	if m&verbs.AttrSQPSN != 0 {
		a.SQPSN = in.SQPSN
	}
	if m&verbs.AttrMaxDestRdAtomic != 0 {
		a.MaxDestRdAtomic = in.MaxDestRdAtomic
	}
	if m&verbs.AttrDestQPN != 0 {
		a.DestQPN = in.DestQPN
	}
	if m&verbs.AttrEnSQDAsyncNotify != 0 {
		a.EnSQDAsyncNotify = in.EnSQDAsyncNotify
	}
}

// setPath prepares the RC connection's header template from the primary
// address vector.
func (q *qp) setPath(a *verbs.QPAttr) error {
	d := q.dev
	src, dst, err := d.pathGIDs(&a.AH)
	if err != nil {
		return err
	}
	mtu := min(a.PathMTU.Bytes(), d.maxMTU)
	fl := a.AH.FlowLabel
	if fl == 0 {
		fl = roce.FlowLabelFromQPNs(q.qpn, a.DestQPN)
	}
	q.srcGID, q.dstGID, q.mtu, q.sgidIdx = src, dst, mtu, a.AH.SGIDIndex
	q.bld = roce.Builder{SrcMAC: d.mac, SrcGID: src, DstGID: dst, TrafficClass: a.AH.TrafficClass,
		HopLimit: hopLimit(a.AH.HopLimit), FlowLabel: fl, DontFragment: true, PKey: roce.DefaultPKey,
		DestQP: a.DestQPN, SrcPort: roce.FlowLabelToUDPSrcPort(fl)}
	return nil
}

func hopLimit(h uint8) uint8 {
	if h == 0 {
		return roce.DefaultHopLimit
	}
	return h
}

// resetQueues empties both queues without completions (a move to RESET).
func (q *qp) resetQueues() {
	q.sq.mu.Lock()
	q.sq.tail.Store(0)
	q.sq.done.Store(0)
	q.sq.mu.Unlock()
	q.rq.mu.Lock()
	q.rq.tail.Store(0)
	q.rq.head.Store(0)
	q.rq.mu.Unlock()
	q.sqCons = 0
	q.req.init()
	q.resp = respState{}
	q.sqd = sqdState{}
	q.commEst = false
}

// Query implements verbs.QP.
func (q *qp) Query() (verbs.QPAttr, error) {
	d := q.dev
	d.lockLoop()
	defer d.unlockLoop()
	if q.dead {
		return verbs.QPAttr{}, fmt.Errorf("soft: query qp: %w", verbs.ErrClosed)
	}
	a := q.attr
	a.CurState = a.State
	a.Cap = q.cap
	a.SQDraining = a.State == verbs.QPSSQD && q.sqd.draining
	return a, nil
}

// Destroy implements verbs.QP.
func (q *qp) Destroy() error {
	d := q.dev
	d.lockLoop()
	defer d.unlockLoop()
	if q.dead {
		return fmt.Errorf("soft: destroy qp: %w", verbs.ErrClosed)
	}
	q.dead = true
	q.state.Store(uint32(verbs.QPSErr))
	d.removeQP(q)
	q.pd.users.Add(-1)
	q.scq.users.Add(-1)
	q.rcq.users.Add(-1)
	return nil
}

// PostSend implements verbs.QP. Every request is checked before it is
// queued; the first bad one stops the post and is reported with its index.
func (q *qp) PostSend(wrs []verbs.SendWR) error {
	st := verbs.QPState(q.state.Load())
	if st != verbs.QPSRTS && st != verbs.QPSSQD {
		return &verbs.PostError{Index: 0, Err: fmt.Errorf("%w: QP %#x is %v", verbs.ErrBadState, q.qpn, st)}
	}
	sq := &q.sq
	sq.mu.Lock()
	defer sq.mu.Unlock()
	tail := sq.tail.Load()
	for i := range wrs {
		// The queue holds what the QP was created with (its Query Cap),
		// not the power of two its ring is rounded up to.
		if tail-sq.done.Load() >= uint64(q.cap.MaxSendWR) {
			sq.tail.Store(tail)
			q.dev.kick()
			return &verbs.PostError{Index: i, Err: verbs.ErrQueueFull}
		}
		if err := q.fillSend(&sq.slots[tail&sq.mask], &wrs[i]); err != nil {
			sq.tail.Store(tail)
			q.dev.kick()
			return &verbs.PostError{Index: i, Err: err}
		}
		tail++
	}
	sq.tail.Store(tail)
	q.dev.kick()
	return nil
}

func (q *qp) fillSend(w *swqe, wr *verbs.SendWR) error {
	switch wr.Opcode {
	case verbs.WRSend, verbs.WRSendWithImm:
	case verbs.WRRDMAWrite, verbs.WRRDMAWriteWithImm:
		if q.typ == verbs.QPTypeUD {
			return fmt.Errorf("%w: %v on a UD QP", verbs.ErrInvalidArgument, wr.Opcode)
		}
	case verbs.WRRDMARead, verbs.WRAtomicCmpAndSwp, verbs.WRAtomicFetchAndAdd:
		if q.typ != verbs.QPTypeRC {
			return fmt.Errorf("%w: %v on a %v QP", verbs.ErrInvalidArgument, wr.Opcode, q.typ)
		}
	default:
		return fmt.Errorf("%w: opcode %v", verbs.ErrInvalidArgument, wr.Opcode)
	}
	if len(wr.SGL) > q.cap.MaxSendSGE {
		return fmt.Errorf("%w: %d SGEs, max %d", verbs.ErrTooLarge, len(wr.SGL), q.cap.MaxSendSGE)
	}
	inline := wr.Flags&verbs.SendInline != 0
	if inline && (wr.Opcode == verbs.WRRDMARead || wr.Opcode.IsAtomic()) {
		return fmt.Errorf("%w: inline %v", verbs.ErrInvalidArgument, wr.Opcode)
	}
	// Local data is written by READ and atomics, read by the others.
	writes := wr.Opcode == verbs.WRRDMARead || wr.Opcode.IsAtomic()
	total := wr.Len()
	if total > maxMsgSize {
		return fmt.Errorf("%w: message of %d bytes", verbs.ErrTooLarge, total)
	}
	if wr.Opcode.IsAtomic() {
		if total != 8 || wr.RemoteAddr&7 != 0 {
			return fmt.Errorf("%w: atomics take 8 bytes at an 8-byte aligned address", verbs.ErrInvalidArgument)
		}
	}
	var dst *ah
	if q.typ == verbs.QPTypeUD {
		a, ok := wr.AH.(*ah)
		if !ok || a == nil || a.pd != q.pd || a.dead.Load() {
			return fmt.Errorf("%w: UD send needs an address handle of this PD", verbs.ErrInvalidArgument)
		}
		if total > uint64(q.dev.maxMTU) {
			return fmt.Errorf("%w: UD message of %d bytes exceeds the MTU %d", verbs.ErrTooLarge, total, q.dev.maxMTU)
		}
		dst = a
	}
	if inline && total > uint64(q.cap.MaxInlineData) {
		return fmt.Errorf("%w: %d bytes inline, max %d", verbs.ErrTooLarge, total, q.cap.MaxInlineData)
	}
	w.seg = w.seg[:0]
	for j, s := range wr.SGL {
		m := q.dev.keys.lookup(s.LKey)
		if m == nil || m.pd != q.pd || m.dead.Load() {
			return fmt.Errorf("%w: SGE %d lkey %#x", verbs.ErrBadKey, j, s.LKey)
		}
		if writes && m.access&verbs.AccessLocalWrite == 0 {
			return fmt.Errorf("%w: SGE %d: region %#x lacks local write", verbs.ErrBadKey, j, s.LKey)
		}
		b, ok := m.slice(s.Addr, s.Length)
		if !ok {
			return fmt.Errorf("%w: SGE %d [%#x+%d] outside region %#x", verbs.ErrBadKey, j, s.Addr, s.Length, s.LKey)
		}
		if len(b) > 0 {
			w.seg = append(w.seg, b)
		}
	}
	if inline {
		n := 0
		for _, b := range w.seg {
			n += copy(w.inline[n:], b)
		}
		w.seg = append(w.seg[:0], w.inline[:n])
	}
	w.id, w.op, w.imm = wr.ID, wr.Opcode, wr.Imm
	w.signaled = q.sigAll || wr.Flags&verbs.SendSignaled != 0
	w.solicited = wr.Flags&verbs.SendSolicited != 0
	w.fence = wr.Flags&verbs.SendFence != 0
	w.raddr, w.rkey, w.compareAdd, w.swap = wr.RemoteAddr, wr.RKey, wr.CompareAdd, wr.Swap
	w.ah, w.rqpn, w.rqkey = dst, wr.RemoteQPN, wr.RemoteQKey
	w.length = uint32(total)
	w.psn, w.npkts, w.done = 0, 0, false
	return nil
}

// PostRecv implements verbs.QP.
func (q *qp) PostRecv(wrs []verbs.RecvWR) error {
	st := verbs.QPState(q.state.Load())
	if st == verbs.QPSReset || st == verbs.QPSErr {
		return &verbs.PostError{Index: 0, Err: fmt.Errorf("%w: QP %#x is %v", verbs.ErrBadState, q.qpn, st)}
	}
	rq := &q.rq
	rq.mu.Lock()
	defer rq.mu.Unlock()
	tail := rq.tail.Load()
	for i := range wrs {
		if tail-rq.head.Load() >= uint64(q.cap.MaxRecvWR) {
			rq.tail.Store(tail)
			return &verbs.PostError{Index: i, Err: verbs.ErrQueueFull}
		}
		if err := q.fillRecv(&rq.slots[tail&rq.mask], &wrs[i]); err != nil {
			rq.tail.Store(tail)
			return &verbs.PostError{Index: i, Err: err}
		}
		tail++
	}
	rq.tail.Store(tail)
	return nil
}

func (q *qp) fillRecv(w *rwqe, wr *verbs.RecvWR) error {
	if len(wr.SGL) > q.cap.MaxRecvSGE {
		return fmt.Errorf("%w: %d SGEs, max %d", verbs.ErrTooLarge, len(wr.SGL), q.cap.MaxRecvSGE)
	}
	w.seg = w.seg[:0]
	var total uint64
	for j, s := range wr.SGL {
		m := q.dev.keys.lookup(s.LKey)
		if m == nil || m.pd != q.pd || m.dead.Load() {
			return fmt.Errorf("%w: SGE %d lkey %#x", verbs.ErrBadKey, j, s.LKey)
		}
		if m.access&verbs.AccessLocalWrite == 0 {
			return fmt.Errorf("%w: SGE %d: region %#x lacks local write", verbs.ErrBadKey, j, s.LKey)
		}
		b, ok := m.slice(s.Addr, s.Length)
		if !ok {
			return fmt.Errorf("%w: SGE %d [%#x+%d] outside region %#x", verbs.ErrBadKey, j, s.Addr, s.Length, s.LKey)
		}
		if len(b) > 0 {
			w.seg = append(w.seg, b)
		}
		total += uint64(s.Length)
	}
	if total > maxMsgSize {
		return fmt.Errorf("%w: receive of %d bytes", verbs.ErrTooLarge, total)
	}
	w.id, w.length = wr.ID, uint32(total)
	return nil
}

// gather copies len(dst) bytes of the segments, starting at byte off of the
// message, into dst.
func gather(seg [][]byte, off int, dst []byte) {
	for _, s := range seg {
		if off >= len(s) {
			off -= len(s)
			continue
		}
		n := copy(dst, s[off:])
		dst = dst[n:]
		off = 0
		if len(dst) == 0 {
			return
		}
	}
}

// scatter copies src into the segments at byte off of the message; it
// reports false if they are too short.
func scatter(seg [][]byte, off int, src []byte) bool {
	for _, s := range seg {
		if len(src) == 0 {
			return true
		}
		if off >= len(s) {
			off -= len(s)
			continue
		}
		n := copy(s[off:], src)
		src = src[n:]
		off = 0
	}
	return len(src) == 0
}
