package hostmesh

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/verbs"
	"github.com/rdma-appliance/appliance/verbs/soft"
)

// Device is one RNIC the agent probes with: an open verbs device (any
// provider) and the GID it probes from.
type Device struct {
	// Name is the RNIC's name in results (the verbs device name by
	// default).
	Name     string
	Dev      verbs.Device
	GIDIndex int
	Port     int // device port (1)
}

// AgentConfig is the agent on verbs devices.
type AgentConfig struct {
	Config
	// Cores pin the loops: RNIC i's sender and receiver threads run on
	// Cores[i % len(Cores)]; none: unpinned goroutines.
	Cores []int
	// BatchEvery is how often results go to the analyzer (1 s).
	BatchEvery time.Duration
	// QKey of the probe QPs (0x48534d31).
	QKey uint32
	// ReadPFC reads an RNIC's cumulative PFC counters of the probes'
	// class; the agent reads them before every batch and the analyzer
	// tells a storming RNIC by them (nil: none read; `appliance mesh
	// probe` reads them with ethtool, see SysPFC). An RNIC whose counters
	// cannot be read is not read again.
	ReadPFC func(ctx context.Context, d Device) (PFCCounters, error)
}

// SoftRNICConfig is a software RNIC (package verbs/soft) at addr sized for
// the agent: its probes are 50-byte UD SENDs, one every interval, so a
// 256-byte MTU, bursts of 8 and 128 packet buffers (640 bytes each, 80 KB)
// carry them, where the soft RNIC's defaults (a 4096-byte MTU, bursts of
// 32 and 8192 buffers, 36 MB) are sized for bulk RDMA. Hosts that probe
// with software RNICs, such as the tests and the overhead benchmark, open
// them with it.
func SoftRNICConfig(addr netip.Addr) soft.Config {
	return soft.Config{GIDs: []netip.Addr{addr}, MaxMTU: verbs.MTU256, PoolSize: 128, Burst: 8}
}

// GCPercent is the garbage collector's target (GOGC) of the agent's
// process (`appliance mesh probe` sets it unless GOGC is set). The agent
// is a long-running daemon with a live heap of a megabyte or two that
// allocates about 100 KB/s (results, batches, uploads); at Go's default
// of 100, whose smallest heap goal is 4 MB, the heap would be most of its
// resident memory. At 25 the goal is about 2 MB, for a collection every
// five seconds or so; BenchmarkAgentOverhead measures the agent with it
// (the collections are part of its CPU figure).
const GCPercent = 25

// Agent probes between the host's RNICs over UD QPs: one QP per RNIC, a
// sender loop that posts a probe every interval and takes the send
// completions (T2), and a receiver loop that takes receive completions
// (T3) and stamps their poll (T4). The soft RNIC and libibverbs serve it
// alike. Path tracing is not done over verbs: the ICMP time-exceeded
// answers to TTL-limited probes go to the host's kernel, not to the QP, so
// on real hosts paths come from traceroute run beside the agent; without
// paths the analyzer still finds anomalous RNICs (an RNIC's own link
// counts as the RNIC) and tracks the SLAs.
type Agent struct {
	cfg   AgentConfig
	core  *Core
	rnics []*rnicRT
	up    *Uploader
	log   *slog.Logger
}

// recvSlot is a receive buffer: the 40-byte GRH area and the probe, with
// room for a longer (malformed or foreign) datagram.
const (
	recvSlot  = 40 + 256
	recvSlots = 128
	sendSlots = 64
)

type rnicRT struct {
	idx   int
	dev   Device
	gid   verbs.GID
	pd    verbs.PD
	scq   verbs.CQ
	rcq   verbs.CQ
	qp    verbs.QP
	mr    verbs.MR
	buf   []byte
	ahs   map[ahKey]verbs.AH
	fails int // consecutive send failures
	// unacked: send WR ids without a completion, by post time.
	unacked map[uint64]int64
	// The sender's and the receiver's work requests, reused.
	swr  [1]verbs.SendWR
	ssge [1]verbs.SGE
	rwr  [1]verbs.RecvWR
	rsge [1]verbs.SGE
	mu   sync.Mutex
	// Counters.
	posted, sendWC, recvWC, recvErr atomic.Uint64
	// noPFC: its PFC counters could not be read.
	noPFC bool
}

type ahKey struct {
	dst int
	fl  uint32
}

// NewAgent opens a QP on every device. The devices stay the caller's.
func NewAgent(cfg AgentConfig, devs []Device, up *Uploader, log *slog.Logger) (*Agent, error) {
	if cfg.QKey == 0 {
		cfg.QKey = 0x48534d31
	}
	if cfg.BatchEvery <= 0 {
		cfg.BatchEvery = time.Second
	}
	if log == nil {
		log = slog.Default()
	}
	a := &Agent{cfg: cfg, up: up, log: log}
	var rn []RNIC
	for i, d := range devs {
		if d.Name == "" {
			d.Name = d.Dev.Info().Name
		}
		if d.Port == 0 {
			d.Port = 1
		}
		r, err := a.open(i, d)
		if err != nil {
			a.Close()
			return nil, fmt.Errorf("hostmesh: RNIC %s: %w", d.Name, err)
		}
		a.rnics = append(a.rnics, r)
		rn = append(rn, RNIC{Name: d.Name, Addr: r.gid.Addr()})
	}
	core, err := NewCore(cfg.Config, rn)
	if err != nil {
		a.Close()
		return nil, err
	}
	a.core = core
	return a, nil
}

// Core is the agent's probing logic (counters, batches).
func (a *Agent) Core() *Core { return a.core }

func (a *Agent) open(i int, d Device) (*rnicRT, error) {
	pa, err := d.Dev.QueryPort(d.Port)
	if err != nil {
		return nil, err
	}
	if d.GIDIndex < 0 || d.GIDIndex >= len(pa.GIDs) {
		return nil, fmt.Errorf("no GID %d (port has %d RoCEv2 GIDs)", d.GIDIndex, len(pa.GIDs))
	}
	r := &rnicRT{idx: i, dev: d, gid: pa.GIDs[d.GIDIndex], ahs: map[ahKey]verbs.AH{}, unacked: map[uint64]int64{}}
	if r.pd, err = d.Dev.AllocPD(); err != nil {
		return nil, err
	}
	if r.scq, err = d.Dev.CreateCQ(verbs.CQAttr{CQE: 2 * sendSlots, CompletionTimestamps: true}); err != nil {
		return nil, err
	}
	if r.rcq, err = d.Dev.CreateCQ(verbs.CQAttr{CQE: 2 * recvSlots, CompletionTimestamps: true}); err != nil {
		return nil, err
	}
	if r.qp, err = r.pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeUD, SendCQ: r.scq, RecvCQ: r.rcq,
		Cap: verbs.QPCap{MaxSendWR: sendSlots, MaxRecvWR: recvSlots, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		return nil, err
	}
	steps := []struct {
		attr verbs.QPAttr
		mask verbs.AttrMask
	}{
		{verbs.QPAttr{State: verbs.QPSInit, Port: uint8(d.Port), QKey: a.cfg.QKey}, verbs.AttrState | verbs.AttrPKeyIndex | verbs.AttrPort | verbs.AttrQKey},
		{verbs.QPAttr{State: verbs.QPSRTR}, verbs.AttrState},
		{verbs.QPAttr{State: verbs.QPSRTS}, verbs.AttrState | verbs.AttrSQPSN},
	}
	for _, s := range steps {
		if err := r.qp.Modify(&s.attr, s.mask); err != nil {
			return nil, err
		}
	}
	if r.buf, err = verbs.AllocBuffer(sendSlots*ProbeSize+recvSlots*recvSlot, false); err != nil {
		return nil, err
	}
	if r.mr, err = r.pd.RegMR(r.buf, verbs.AccessLocalWrite); err != nil {
		return nil, err
	}
	for k := range recvSlots {
		if err := r.postRecv(k); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (r *rnicRT) recvOff(k int) int { return sendSlots*ProbeSize + k*recvSlot }

// postRecv posts receive slot k. Providers copy work requests when they
// are posted (as ibv_post_recv does), so the receiver's one request and
// its scatter entry are reused.
func (r *rnicRT) postRecv(k int) error {
	r.rsge[0] = verbs.SGE{Addr: r.mr.Addr() + uint64(r.recvOff(k)), Length: recvSlot, LKey: r.mr.LKey()}
	r.rwr[0] = verbs.RecvWR{ID: uint64(k), SGL: r.rsge[:]}
	return r.qp.PostRecv(r.rwr[:])
}

// Close releases the QPs and buffers (not the devices).
func (a *Agent) Close() {
	for _, r := range a.rnics {
		for _, ah := range r.ahs {
			ah.Destroy()
		}
		if r.qp != nil {
			r.qp.Destroy()
		}
		if r.mr != nil {
			r.mr.Dereg()
		}
		for _, cq := range []verbs.CQ{r.scq, r.rcq} {
			if cq != nil {
				cq.Destroy()
			}
		}
		if r.pd != nil {
			r.pd.Dealloc()
		}
		if r.buf != nil {
			verbs.FreeBuffer(r.buf)
		}
	}
	a.rnics = nil
}

// Run probes until ctx ends, then uploads what is left.
func (a *Agent) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, r := range a.rnics {
		wg.Add(2)
		go func() { defer wg.Done(); a.pinned(r.idx, func() { a.sender(ctx, r) }) }()
		go func() { defer wg.Done(); a.pinned(r.idx, func() { a.receiver(ctx, r) }) }()
		if es, ok := r.dev.Dev.(verbs.EventSource); ok {
			wg.Add(1)
			go func() { defer wg.Done(); a.watch(ctx, r, es.AsyncEvents()) }()
		}
	}
	t := time.NewTicker(a.cfg.BatchEvery)
	defer t.Stop()
	exp := time.NewTicker(a.core.Config().Interval / 2)
	defer exp.Stop()
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-exp.C:
			a.core.Expire(dpdk.Nanotime())
			a.checkStalls()
		case <-t.C:
			a.flush(ctx)
		}
	}
	wg.Wait()
	// Probes still in flight time out only after the timeout; what has
	// arrived is uploaded now.
	fctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	a.flush(fctx)
	return nil
}

func (a *Agent) flush(ctx context.Context) {
	if a.up == nil {
		return
	}
	a.readPFC(ctx)
	if err := a.up.Push(ctx, a.core.Batch()); err != nil {
		a.log.Debug("hostmesh: analyzer unreachable, results held", "err", err, "held", a.up.Held())
	}
}

// readPFC reads every RNIC's PFC counters into the core.
func (a *Agent) readPFC(ctx context.Context) {
	if a.cfg.ReadPFC == nil {
		return
	}
	for _, r := range a.rnics {
		if r.noPFC {
			continue
		}
		c, err := a.cfg.ReadPFC(ctx, r.dev)
		if err != nil {
			r.noPFC = true
			a.log.Warn("hostmesh: no PFC counters, a PFC storm at this RNIC will look like lost probes", "rnic", r.dev.Name, "err", err)
			continue
		}
		a.core.PFC(r.idx, dpdk.Nanotime(), c)
	}
}

func (a *Agent) pinned(i int, f func()) {
	if len(a.cfg.Cores) > 0 {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := dpdk.Pin(a.cfg.Cores[i%len(a.cfg.Cores)]); err != nil {
			a.log.Warn("hostmesh: pin", "err", err)
		}
	}
	f()
}

// watch marks an RNIC down when its device reports a fatal error or goes
// away (its event channel closes).
func (a *Agent) watch(ctx context.Context, r *rnicRT, ev <-chan verbs.AsyncEvent) {
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-ev:
			if !ok {
				a.down(r, "device closed")
				return
			}
			if e.Type == verbs.EventDeviceFatal || (e.Type == verbs.EventPortErr && e.Port == r.dev.Port) {
				a.down(r, fmt.Sprintf("device event %v", e.Type))
				return
			}
		}
	}
}

func (a *Agent) down(r *rnicRT, why string) {
	if a.core.Down(r.idx) {
		return
	}
	a.log.Warn("hostmesh: RNIC gone, the others keep probing", "rnic", r.dev.Name, "why", why)
	a.core.MarkDown(r.idx)
}

// checkStalls: sends that never complete mean the RNIC stopped working.
func (a *Agent) checkStalls() {
	now := dpdk.Nanotime()
	to := int64(a.core.Config().Timeout)
	for _, r := range a.rnics {
		r.mu.Lock()
		for id, at := range r.unacked {
			if now-at > to {
				delete(r.unacked, id)
				r.fails++
				a.core.Sent(id, 0, false)
			}
		}
		fails := r.fails
		r.mu.Unlock()
		if fails >= 3 {
			a.down(r, "send completions stopped")
		}
	}
}

// sender posts a probe every interval. It takes the send completions when
// it wakes to probe, not as they come: their RNIC timestamps (T2) do not
// depend on when they are polled, and one wake-up a probe instead of two
// halves the loop's wake-ups (waking a thread is much of what an idle
// agent spends). It wakes at least four times a timeout all the same, so
// that every completion is taken long before checkStalls gives up on it.
func (a *Agent) sender(ctx context.Context, r *rnicRT) {
	cfg := a.core.Config()
	iv := cfg.Interval
	wake := min(iv, cfg.Timeout/4)
	// Start at a random phase so that the RNICs' probes spread.
	phase := time.Duration(dpdk.Nanotime() % int64(iv))
	next := time.Now().Add(phase)
	timer := time.NewTimer(min(phase, wake))
	defer timer.Stop()
	wcs := make([]verbs.WC, 16)
	for {
		select {
		case <-ctx.Done():
			a.takeSends(r, wcs)
			return
		case <-timer.C:
		}
		if now := time.Now(); !now.Before(next) {
			if !a.core.Down(r.idx) {
				a.probe(r)
			}
			if next = next.Add(iv); next.Before(now) {
				next = now.Add(iv) // the loop fell behind: no burst to catch up
			}
		}
		timer.Reset(max(min(wake, time.Until(next)), 0))
		a.takeSends(r, wcs)
	}
}

// takeSends polls the send CQ.
func (a *Agent) takeSends(r *rnicRT, wcs []verbs.WC) {
	for {
		n, err := r.scq.Poll(wcs)
		if err != nil {
			a.down(r, "send CQ: "+err.Error())
			return
		}
		for _, wc := range wcs[:n] {
			r.sendWC.Add(1)
			r.mu.Lock()
			delete(r.unacked, wc.ID)
			if wc.Status == verbs.WCSuccess {
				r.fails = 0
			}
			r.mu.Unlock()
			a.core.Sent(wc.ID, wc.Timestamp, wc.Status == verbs.WCSuccess)
		}
		if n < len(wcs) {
			return
		}
	}
}

func (a *Agent) probe(r *rnicRT) {
	s, ok := a.core.Next(r.idx, dpdk.Nanotime())
	if !ok {
		return
	}
	dst := a.rnics[s.Dst]
	ah, err := r.ah(s.Dst, dst.gid, s.FlowLabel)
	if err == nil {
		slot := int(s.Seq%sendSlots) * ProbeSize
		copy(r.buf[slot:], s.Payload[:])
		r.ssge[0] = verbs.SGE{Addr: r.mr.Addr() + uint64(slot), Length: ProbeSize, LKey: r.mr.LKey()}
		r.swr[0] = verbs.SendWR{ID: s.Seq, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: r.ssge[:],
			AH: ah, RemoteQPN: dst.qp.QPN(), RemoteQKey: a.cfg.QKey}
		err = r.qp.PostSend(r.swr[:])
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.fails++
		a.core.Sent(s.Seq, 0, false)
		if errors.Is(err, verbs.ErrClosed) || r.fails >= 3 {
			go a.down(r, "post: "+err.Error())
		}
		return
	}
	r.posted.Add(1)
	r.unacked[s.Seq] = dpdk.Nanotime()
}

// ah is the address handle towards RNIC dst with a flow label: the flow
// label picks the UDP source port, which is how the probe's 5-tuple (and
// so its ECMP path) is chosen.
func (r *rnicRT) ah(dst int, gid verbs.GID, fl uint32) (verbs.AH, error) {
	k := ahKey{dst, fl}
	if ah, ok := r.ahs[k]; ok {
		return ah, nil
	}
	if len(r.ahs) > 1024 { // labels rotate out of the pool: forget old handles
		for kk, ah := range r.ahs {
			ah.Destroy()
			delete(r.ahs, kk)
		}
	}
	ah, err := r.pd.CreateAH(verbs.AHAttr{DGID: gid, SGIDIndex: r.dev.GIDIndex, FlowLabel: fl, Port: r.dev.Port})
	if err != nil {
		return nil, err
	}
	r.ahs[k] = ah
	return ah, nil
}

// receiver takes the receive completions as they come: the time it polls
// them is T4, part of the host's processing delay. Providers signal every
// completion (verbs.CQ.Notify); a poll every timeout besides is only a
// safety net.
func (a *Agent) receiver(ctx context.Context, r *rnicRT) {
	wcs := make([]verbs.WC, 32)
	every := a.core.Config().Timeout
	timer := time.NewTimer(every)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.rcq.Notify():
			timer.Reset(every)
		case <-timer.C:
			timer.Reset(every)
		}
		n, err := r.rcq.Poll(wcs)
		if err != nil {
			a.down(r, "receive CQ: "+err.Error())
			return
		}
		t4 := dpdk.Nanotime()
		for _, wc := range wcs[:n] {
			k := int(wc.ID)
			if wc.Status != verbs.WCSuccess || k >= recvSlots || wc.ByteLen < 40 {
				r.recvErr.Add(1)
			} else {
				r.recvWC.Add(1)
				off := r.recvOff(k)
				_ = a.core.Received(r.idx, r.buf[off+40:off+int(min(wc.ByteLen, recvSlot))], wc.Timestamp, t4)
			}
			if k < recvSlots && wc.Status != verbs.WCWRFlushErr {
				if err := r.postRecv(k); err != nil {
					r.recvErr.Add(1)
				}
			}
		}
	}
}

// RNICStatus is one RNIC's counters.
type RNICStatus struct {
	Name     string `json:"name"`
	Addr     string `json:"addr"`
	Down     bool   `json:"down"`
	Posted   uint64 `json:"posted"`
	SendWC   uint64 `json:"send_completions"`
	RecvWC   uint64 `json:"receive_completions"`
	RecvErrs uint64 `json:"receive_errors"`
}

// Status are the agent's and every RNIC's counters.
func (a *Agent) Status() (Counters, []RNICStatus) {
	var out []RNICStatus
	for _, r := range a.rnics {
		out = append(out, RNICStatus{Name: r.dev.Name, Addr: r.gid.Addr().String(), Down: a.core.Down(r.idx), Posted: r.posted.Load(),
			SendWC: r.sendWC.Load(), RecvWC: r.recvWC.Load(), RecvErrs: r.recvErr.Load()})
	}
	return a.core.Counters(), out
}
