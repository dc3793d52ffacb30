package perftest

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/rdma-appliance/appliance/verbs"
)

// Config is one side's device and how to use it.
type Config struct {
	Device verbs.Device
	// GIDIndex and Port select the source GID (port 0 means 1).
	GIDIndex int
	Port     int
	// Poll drives a device that has no engine of its own (a soft RNIC
	// whose loop was not started). Every wait of the test calls it; nil
	// for devices that run by themselves.
	Poll func() bool
	// Rand seeds the PSNs; nil uses a random source.
	Rand *rand.Rand
}

// endpoint is one side's verbs resources. Each QP owns a region of the
// buffer: its first half is the local source and sink of its own requests,
// the second half (at QPInfo.VAddr) is where the peer's requests land.
type endpoint struct {
	cfg   Config
	p     Params
	info  verbs.DeviceInfo
	gid   verbs.GID
	mtu   verbs.MTU
	pd    verbs.PD
	scq   verbs.CQ
	rcq   verbs.CQ
	qps   []verbs.QP
	mr    verbs.MR
	buf   []byte
	slot  int // bytes per half region
	local []QPInfo
	inl   int
}

func (e *endpoint) region(q int) int { return q * 2 * e.slot }

func newEndpoint(cfg Config, p Params) (_ *endpoint, err error) {
	if cfg.Device == nil {
		return nil, errors.New("perftest: no device")
	}
	if cfg.Port == 0 {
		cfg.Port = 1
	}
	e := &endpoint{cfg: cfg, p: p, info: cfg.Device.Info()}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	pa, err := cfg.Device.QueryPort(cfg.Port)
	if err != nil {
		return nil, fmt.Errorf("perftest: %s port %d: %w", e.info.Name, cfg.Port, err)
	}
	if cfg.GIDIndex < 0 || cfg.GIDIndex >= len(pa.GIDs) {
		return nil, fmt.Errorf("perftest: %s port %d has %d RoCEv2 GIDs, no index %d", e.info.Name, cfg.Port, len(pa.GIDs), cfg.GIDIndex)
	}
	e.gid = pa.GIDs[cfg.GIDIndex]
	e.mtu = pa.ActiveMTU
	if p.MTU != 0 {
		e.mtu = verbs.MTUFromBytes(p.MTU)
		if e.mtu > pa.MaxMTU {
			return nil, fmt.Errorf("perftest: mtu %d exceeds %s's port maximum %v", p.MTU, e.info.Name, pa.MaxMTU)
		}
	}
	e.inl = min(p.Inline, e.info.MaxInline)
	maxSize := p.MaxSize()
	if uint64(maxSize) > e.info.MaxMRSize/uint64(2*p.QPs) && e.info.MaxMRSize > 0 {
		return nil, fmt.Errorf("perftest: %d QPs of %d-byte messages exceed %s's largest MR", p.QPs, maxSize, e.info.Name)
	}
	e.slot = (maxSize + 4095) &^ 4095
	if e.pd, err = cfg.Device.AllocPD(); err != nil {
		return nil, fmt.Errorf("perftest: alloc PD: %w", err)
	}
	sq := min(max(p.TxDepth, 1), max(e.info.MaxQPWR, 1))
	rq := 1
	if p.usesRecv() {
		rq = min(p.RxDepth, max(e.info.MaxQPWR, 1))
	}
	cqe := p.QPs * (sq + rq)
	if e.info.MaxCQE > 0 {
		cqe = min(cqe, e.info.MaxCQE)
	}
	if e.scq, err = cfg.Device.CreateCQ(verbs.CQAttr{CQE: cqe}); err != nil {
		return nil, fmt.Errorf("perftest: create CQ: %w", err)
	}
	if e.rcq, err = cfg.Device.CreateCQ(verbs.CQAttr{CQE: cqe}); err != nil {
		return nil, fmt.Errorf("perftest: create CQ: %w", err)
	}
	if e.buf, err = verbs.AllocBuffer(2*e.slot*p.QPs, false); err != nil {
		return nil, fmt.Errorf("perftest: %w", err)
	}
	access := verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead | verbs.AccessRemoteAtomic
	if e.mr, err = e.pd.RegMR(e.buf, access); err != nil {
		return nil, fmt.Errorf("perftest: register %d bytes: %w", len(e.buf), err)
	}
	rnd := cfg.Rand
	if rnd == nil {
		rnd = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	outReads := uint16(min(max(e.info.MaxQPRdAtom, 1), 16))
	for q := 0; q < p.QPs; q++ {
		qp, err := e.pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: e.scq, RecvCQ: e.rcq,
			Cap: verbs.QPCap{MaxSendWR: sq, MaxRecvWR: rq, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: e.inl}})
		if err != nil {
			return nil, fmt.Errorf("perftest: create QP %d: %w", q, err)
		}
		e.qps = append(e.qps, qp)
		err = qp.Modify(&verbs.QPAttr{State: verbs.QPSInit, Port: uint8(cfg.Port), AccessFlags: access},
			verbs.AttrState|verbs.AttrPKeyIndex|verbs.AttrPort|verbs.AttrAccessFlags)
		if err != nil {
			return nil, fmt.Errorf("perftest: QP %#x to INIT: %w", qp.QPN(), err)
		}
		e.local = append(e.local, QPInfo{OutReads: outReads, QPN: qp.QPN(), PSN: rnd.Uint32() & 0xffffff,
			RKey: e.mr.RKey(), VAddr: e.mr.Addr() + uint64(e.region(q)+e.slot), GID: e.gid})
	}
	return e, nil
}

// connect brings every QP to RTS towards the peer's QP of the same index,
// with perftest's attributes (min RNR timer 12, timeout 14, retry 7,
// infinite RNR retry).
func (e *endpoint) connect(remote []QPInfo) error {
	if len(remote) != len(e.qps) {
		return fmt.Errorf("%w announced %d QPs, this side has %d", ErrPeer, len(remote), len(e.qps))
	}
	for i, qp := range e.qps {
		r, l := remote[i], e.local[i]
		err := qp.Modify(&verbs.QPAttr{State: verbs.QPSRTR, PathMTU: e.mtu, DestQPN: r.QPN, RQPSN: r.PSN,
			MaxDestRdAtomic: uint8(l.OutReads), MinRNRTimer: 12,
			AH: verbs.AHAttr{DGID: r.GID, SGIDIndex: e.cfg.GIDIndex, HopLimit: 64, Port: e.cfg.Port}},
			verbs.AttrState|verbs.AttrAV|verbs.AttrPathMTU|verbs.AttrDestQPN|verbs.AttrRQPSN|
				verbs.AttrMaxDestRdAtomic|verbs.AttrMinRNRTimer)
		if err != nil {
			return fmt.Errorf("perftest: QP %#x to RTR: %w", qp.QPN(), err)
		}
		err = qp.Modify(&verbs.QPAttr{State: verbs.QPSRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, SQPSN: l.PSN,
			MaxRdAtomic: uint8(min(r.OutReads, l.OutReads))},
			verbs.AttrState|verbs.AttrTimeout|verbs.AttrRetryCnt|verbs.AttrRNRRetry|verbs.AttrSQPSN|verbs.AttrMaxQPRdAtomic)
		if err != nil {
			return fmt.Errorf("perftest: QP %#x to RTS: %w", qp.QPN(), err)
		}
	}
	return nil
}

// close releases everything; safe on a partly built endpoint.
func (e *endpoint) close() error {
	var errs []error
	for _, qp := range e.qps {
		errs = append(errs, qp.Destroy())
	}
	if e.mr != nil {
		errs = append(errs, e.mr.Dereg())
	}
	for _, cq := range []verbs.CQ{e.scq, e.rcq} {
		if cq != nil {
			errs = append(errs, cq.Destroy())
		}
	}
	if e.pd != nil {
		errs = append(errs, e.pd.Dealloc())
	}
	if e.buf != nil {
		errs = append(errs, verbs.FreeBuffer(e.buf))
	}
	return errors.Join(errs...)
}
