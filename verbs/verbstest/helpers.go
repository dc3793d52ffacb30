package verbstest

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/verbs"
)

const allAccess = verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead | verbs.AccessRemoteAtomic

// endpoint is one QP with its own PD, CQs and a registered buffer.
type endpoint struct {
	s    *suite
	sd   *side
	pd   verbs.PD
	scq  verbs.CQ
	rcq  verbs.CQ
	qp   verbs.QP
	buf  []byte
	mr   verbs.MR
	cap  verbs.QPCap // as the provider reports it (Query)
	desc string
	// model is what buf must hold, for the randomized test.
	model []byte
}

// epOpts shape an endpoint; zero fields take defaults.
type epOpts struct {
	typ    verbs.QPType
	buf    int          // buffer size (default 64 KiB)
	access verbs.Access // MR access (default all)
	cap    verbs.QPCap
	sigAll bool
	ts     bool // CQs with completion timestamps
}

// teardown registers fn to run when t ends; its error fails the test unless
// it concerns device B after it vanished.
func (s *suite) teardown(t *testing.T, sd *side, what string, fn func() error) {
	t.Cleanup(func() {
		if err := fn(); err != nil && !(s.gone && sd == &s.sides[1]) {
			t.Errorf("teardown: %s on %s: %v", what, sd.name, err)
		}
	})
}

// newEndpoint creates an endpoint on side i (0: A, 1: B) and registers its
// teardown in reverse order of creation.
func (s *suite) newEndpoint(t *testing.T, i int, o epOpts) *endpoint {
	t.Helper()
	sd := &s.sides[i]
	if o.buf == 0 {
		o.buf = 64 << 10
	}
	if o.access == 0 {
		o.access = allAccess
	}
	c := o.cap
	if c.MaxSendWR == 0 {
		c.MaxSendWR = 256
	}
	if c.MaxRecvWR == 0 {
		c.MaxRecvWR = 256
	}
	if c.MaxSendSGE == 0 {
		c.MaxSendSGE = min(4, sd.info.MaxSGE)
	}
	if c.MaxRecvSGE == 0 {
		c.MaxRecvSGE = min(4, sd.info.MaxSGE)
	}
	if c.MaxInlineData == 0 {
		c.MaxInlineData = 128
		if sd.info.MaxInline > 0 {
			c.MaxInlineData = min(c.MaxInlineData, sd.info.MaxInline)
		}
	}
	e := &endpoint{s: s, sd: sd}
	var err error
	if e.pd, err = sd.dev.AllocPD(); err != nil {
		t.Fatalf("%s: alloc PD: %v", sd.name, err)
	}
	s.teardown(t, sd, "dealloc PD", e.pd.Dealloc)
	if e.scq, err = sd.dev.CreateCQ(verbs.CQAttr{CQE: 1024, CompletionTimestamps: o.ts}); err != nil {
		t.Fatalf("%s: create send CQ: %v", sd.name, err)
	}
	s.teardown(t, sd, "destroy send CQ", e.scq.Destroy)
	if e.rcq, err = sd.dev.CreateCQ(verbs.CQAttr{CQE: 1024, CompletionTimestamps: o.ts}); err != nil {
		t.Fatalf("%s: create receive CQ: %v", sd.name, err)
	}
	s.teardown(t, sd, "destroy receive CQ", e.rcq.Destroy)
	if e.buf, err = s.alloc(o.buf); err != nil {
		t.Fatalf("%s: allocating %d bytes: %v", sd.name, o.buf, err)
	}
	if s.free != nil {
		b := e.buf
		s.teardown(t, sd, "free buffer", func() error { return s.free(b) })
	}
	if e.mr, err = e.pd.RegMR(e.buf, o.access); err != nil {
		t.Fatalf("%s: register %d bytes: %v", sd.name, o.buf, err)
	}
	s.teardown(t, sd, "deregister MR", e.mr.Dereg)
	if e.mr.Len() != len(e.buf) || e.mr.Access() != o.access {
		t.Fatalf("%s: MR of %d bytes with access %#x, registered %d with %#x", sd.name, e.mr.Len(),
			e.mr.Access(), len(e.buf), o.access)
	}
	if e.qp, err = e.pd.CreateQP(verbs.QPInitAttr{Type: o.typ, SendCQ: e.scq, RecvCQ: e.rcq, Cap: c,
		SigAll: o.sigAll}); err != nil {
		t.Fatalf("%s: create %v QP with %+v: %v", sd.name, o.typ, c, err)
	}
	s.teardown(t, sd, "destroy QP", e.qp.Destroy)
	if e.qp.Type() != o.typ {
		t.Fatalf("%s: created a %v QP, it says %v", sd.name, o.typ, e.qp.Type())
	}
	a := e.query(t)
	if a.State != verbs.QPSReset {
		t.Fatalf("%s: new QP %#x in %v, want RESET", sd.name, e.qp.QPN(), a.State)
	}
	e.cap = a.Cap
	if e.cap.MaxSendWR < c.MaxSendWR || e.cap.MaxRecvWR < c.MaxRecvWR || e.cap.MaxSendSGE < c.MaxSendSGE ||
		e.cap.MaxRecvSGE < c.MaxRecvSGE || e.cap.MaxInlineData < c.MaxInlineData {
		t.Fatalf("%s: QP %#x capabilities %+v, less than the %+v asked for", sd.name, e.qp.QPN(), e.cap, c)
	}
	e.desc = fmt.Sprintf("%s %v QP %#x", sd.name, o.typ, e.qp.QPN())
	return e
}

func (e *endpoint) query(t *testing.T) verbs.QPAttr {
	t.Helper()
	a, err := e.qp.Query()
	if err != nil {
		t.Fatalf("%s: query QP: %v", e.sd.name, err)
	}
	return a
}

func (e *endpoint) wantState(t *testing.T, st verbs.QPState, when string) {
	t.Helper()
	if a := e.query(t); a.State != st {
		t.Fatalf("%s %s: state %v, want %v", e.desc, when, a.State, st)
	}
}

// sge is a single-element SGL over [off, off+n) of the endpoint's buffer.
func (e *endpoint) sge(off, n int) []verbs.SGE {
	return []verbs.SGE{{Addr: e.mr.Addr() + uint64(off), Length: uint32(n), LKey: e.mr.LKey()}}
}

// raddr is the remote address of byte off of the endpoint's region.
func (e *endpoint) raddr(off int) uint64 { return e.mr.Addr() + uint64(off) }

// connParams are connection attributes.
type connParams struct {
	mtu      verbs.MTU
	timeout  uint8
	retry    uint8
	rnrRetry uint8
	access   [2]verbs.Access // QP access flags of each end
	psn      [2]uint32       // each end's first send PSN
}

func (s *suite) defaultConn() connParams {
	// A 268 ms ACK timeout with seven retries: nothing is lost on the
	// links the suite runs over, so retransmission only covers a starved
	// machine, which must not run a QP out of retries.
	return connParams{mtu: min(s.mtu, verbs.MTU1024), timeout: 16, retry: 7, rnrRetry: 7,
		access: [2]verbs.Access{allAccess, allAccess}, psn: [2]uint32{0x10, 0xfffff8}}
}

// modify applies one Modify and fails the test on error.
func (e *endpoint) modify(t *testing.T, a *verbs.QPAttr, m verbs.AttrMask) {
	t.Helper()
	if err := e.qp.Modify(a, m); err != nil {
		t.Fatalf("%s: modify to %v with %v: %v", e.desc, a.State, m, err)
	}
}

// toInit moves a QP in RESET to INIT with the attributes its type needs.
func (e *endpoint) toInit(t *testing.T, access verbs.Access, qkey uint32) {
	t.Helper()
	a := &verbs.QPAttr{State: verbs.QPSInit, Port: uint8(e.sd.port), AccessFlags: access, QKey: qkey}
	m := verbs.AttrState | verbs.AttrPKeyIndex | verbs.AttrPort
	if e.qp.Type() == verbs.QPTypeUD {
		m |= verbs.AttrQKey
	} else {
		m |= verbs.AttrAccessFlags
	}
	e.modify(t, a, m)
}

// av is the address vector from e towards peer.
func (e *endpoint) av(peer *side) verbs.AHAttr {
	return verbs.AHAttr{DGID: peer.gid, SGIDIndex: e.sd.gidx, HopLimit: 64, Port: e.sd.port}
}

// toRTR moves a connected QP from INIT to RTR towards peer.
func (e *endpoint) toRTR(t *testing.T, peer *side, peerQPN uint32, p connParams, rqPSN uint32) {
	t.Helper()
	a := &verbs.QPAttr{State: verbs.QPSRTR, PathMTU: p.mtu, DestQPN: peerQPN, RQPSN: rqPSN, AH: e.av(peer),
		MaxDestRdAtomic: e.rdAtomic(), MinRNRTimer: 1}
	m := verbs.AttrState | verbs.AttrAV | verbs.AttrPathMTU | verbs.AttrDestQPN | verbs.AttrRQPSN
	if e.qp.Type() == verbs.QPTypeRC {
		m |= verbs.AttrMaxDestRdAtomic | verbs.AttrMinRNRTimer
	}
	e.modify(t, a, m)
}

// toRTS moves a QP from RTR to RTS.
func (e *endpoint) toRTS(t *testing.T, p connParams, sqPSN uint32) {
	t.Helper()
	a := &verbs.QPAttr{State: verbs.QPSRTS, SQPSN: sqPSN, Timeout: p.timeout, RetryCnt: p.retry,
		RNRRetry: p.rnrRetry, MaxRdAtomic: e.rdAtomic()}
	m := verbs.AttrState | verbs.AttrSQPSN
	if e.qp.Type() == verbs.QPTypeRC {
		m |= verbs.AttrTimeout | verbs.AttrRetryCnt | verbs.AttrRNRRetry | verbs.AttrMaxQPRdAtomic
	}
	e.modify(t, a, m)
}

func (e *endpoint) rdAtomic() uint8 {
	n := 4
	if e.sd.info.MaxQPRdAtom > 0 {
		n = min(n, e.sd.info.MaxQPRdAtom)
	}
	return uint8(n)
}

// connect brings two RC or UC endpoints to RTS towards each other.
func (s *suite) connect(t *testing.T, x, y *endpoint, p connParams) {
	t.Helper()
	x.toInit(t, p.access[0], 0)
	y.toInit(t, p.access[1], 0)
	x.toRTR(t, y.sd, y.qp.QPN(), p, p.psn[1])
	y.toRTR(t, x.sd, x.qp.QPN(), p, p.psn[0])
	x.toRTS(t, p, p.psn[0])
	y.toRTS(t, p, p.psn[1])
	x.wantState(t, verbs.QPSRTS, "after connecting")
	y.wantState(t, verbs.QPSRTS, "after connecting")
}

// pair creates an endpoint on A and one on B and connects them.
func (s *suite) pair(t *testing.T, typ verbs.QPType, size int, p connParams) (x, y *endpoint) {
	t.Helper()
	x = s.newEndpoint(t, 0, epOpts{typ: typ, buf: size})
	y = s.newEndpoint(t, 1, epOpts{typ: typ, buf: size})
	s.connect(t, x, y, p)
	return x, y
}

// await polls cq until len(want) completions arrived, waiting on Notify
// between polls. want describes the expected completions in order: a
// timeout fails the test naming those still outstanding.
func (s *suite) await(t *testing.T, cq verbs.CQ, what string, want []string) []verbs.WC {
	t.Helper()
	got := make([]verbs.WC, 0, len(want))
	var buf [32]verbs.WC
	deadline := time.Now().Add(s.timeout)
	tick := time.NewTimer(time.Hour)
	defer tick.Stop()
	for len(got) < len(want) {
		n, err := cq.Poll(buf[:min(len(buf), len(want)-len(got))])
		if err != nil {
			t.Fatalf("%s: poll: %v", what, err)
		}
		got = append(got, buf[:n]...)
		if n > 0 {
			continue
		}
		left := time.Until(deadline)
		if left <= 0 {
			t.Fatalf("%s: no completion within %v: %d of %d arrived; outstanding: %s; arrived: %s", what,
				s.timeout, len(got), len(want), strings.Join(want[len(got):], ", "), wcList(got))
		}
		// Notify wakes the wait; the timer is a backstop for a
		// notification that raced with the poll above.
		tick.Reset(min(left, 5*time.Millisecond))
		select {
		case <-cq.Notify():
		case <-tick.C:
		}
	}
	return got
}

// quiet checks that cq holds no completion, waiting up to d for a late one.
func (s *suite) quiet(t *testing.T, cq verbs.CQ, what string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	var buf [8]verbs.WC
	for {
		n, err := cq.Poll(buf[:])
		if err != nil {
			t.Fatalf("%s: poll: %v", what, err)
		}
		if n > 0 {
			t.Fatalf("%s: unexpected completions: %s", what, wcList(buf[:n]))
		}
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		select {
		case <-cq.Notify():
		case <-time.After(left):
		}
	}
}

func wcList(wcs []verbs.WC) string {
	var b strings.Builder
	for i, wc := range wcs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(wcString(wc))
	}
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}

func wcString(wc verbs.WC) string {
	return fmt.Sprintf("{id %#x %q op %v len %d imm %#x flags %#x qpn %#x src %#x}", wc.ID, wc.Status.String(),
		wc.Opcode, wc.ByteLen, wc.Imm, uint8(wc.Flags), wc.QPN, wc.SrcQP)
}

// wcWant is what a completion must say; unchecked fields are negative or
// zero as documented.
type wcWant struct {
	id     uint64
	status verbs.WCStatus
	op     verbs.WCOpcode
	checkN bool
	n      uint32
	imm    *uint32 // nil: the completion must not carry an immediate
	qpn    uint32
	srcQP  uint32 // checked when non-zero (UD)
	grh    bool   // UD: WCWithGRH must be set
}

// check compares a completion with what it must say. Error completions
// carry only wr_id, status and qp_num in ibverbs, so only those are checked
// for them.
func (w wcWant) check(wc verbs.WC) error {
	bad := func(field string, got, want any) error {
		return fmt.Errorf("%s %v, want %v in %s", field, got, want, wcString(wc))
	}
	switch {
	case wc.ID != w.id:
		return bad("wr_id", fmt.Sprintf("%#x", wc.ID), fmt.Sprintf("%#x", w.id))
	case wc.Status != w.status:
		return bad("status", wc.Status, w.status)
	case wc.QPN != w.qpn:
		return bad("qp_num", fmt.Sprintf("%#x", wc.QPN), fmt.Sprintf("%#x", w.qpn))
	case w.status != verbs.WCSuccess:
		return nil
	case wc.Opcode != w.op:
		return bad("opcode", wc.Opcode, w.op)
	case w.checkN && wc.ByteLen != w.n:
		return bad("byte_len", wc.ByteLen, w.n)
	case w.srcQP != 0 && wc.SrcQP != w.srcQP:
		return bad("src_qp", fmt.Sprintf("%#x", wc.SrcQP), fmt.Sprintf("%#x", w.srcQP))
	case w.grh && wc.Flags&verbs.WCWithGRH == 0:
		return bad("GRH flag", false, true)
	case w.imm == nil && wc.Flags&verbs.WCWithImm != 0:
		return bad("immediate flag", true, false)
	case w.imm != nil && wc.Flags&verbs.WCWithImm == 0:
		return bad("immediate flag", false, true)
	case w.imm != nil && wc.Imm != *w.imm:
		return bad("imm_data", fmt.Sprintf("%#x", wc.Imm), fmt.Sprintf("%#x", *w.imm))
	}
	return nil
}

func (w wcWant) String() string {
	if w.status != verbs.WCSuccess {
		return fmt.Sprintf("wr %#x (%q)", w.id, w.status.String())
	}
	return fmt.Sprintf("wr %#x (%v)", w.id, w.op)
}

// expect awaits len(want) completions on cq and checks each in order.
func (s *suite) expect(t *testing.T, cq verbs.CQ, what string, want []wcWant) []verbs.WC {
	t.Helper()
	descs := make([]string, len(want))
	for i, w := range want {
		descs[i] = w.String()
	}
	got := s.await(t, cq, what, descs)
	for i, w := range want {
		if err := w.check(got[i]); err != nil {
			t.Fatalf("%s: completion %d of %d: %v", what, i, len(want), err)
		}
	}
	return got
}

// sendWant is the successful completion of a send-queue request.
func sendWant(qpn uint32, id uint64, op verbs.WROpcode, n int) wcWant {
	w := wcWant{id: id, status: verbs.WCSuccess, op: wcOpcode(op), qpn: qpn}
	switch {
	case op == verbs.WRRDMARead:
		w.checkN, w.n = true, uint32(n)
	case op.IsAtomic():
		w.checkN, w.n = true, 8
	}
	return w
}

func statusWant(qpn uint32, id uint64, st verbs.WCStatus) wcWant {
	return wcWant{id: id, status: st, qpn: qpn}
}

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

// postErr checks that err is a *verbs.PostError naming index idx and
// wrapping target.
func postErr(t *testing.T, what string, err error, idx int, target error) {
	t.Helper()
	var pe *verbs.PostError
	if !errors.As(err, &pe) {
		t.Fatalf("%s: got %v, want a *verbs.PostError for request %d wrapping %v", what, err, idx, target)
	}
	if pe.Index != idx || !errors.Is(err, target) {
		t.Fatalf("%s: got %v (index %d), want request %d wrapping %v", what, err, pe.Index, idx, target)
	}
}

// diff reports the first byte where got and want differ, or -1.
func diff(got, want []byte) int {
	if bytes.Equal(got, want) {
		return -1
	}
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return i
		}
	}
	return min(len(got), len(want))
}

// noPanic runs f and turns a panic into a test failure naming the call.
func noPanic(t *testing.T, what string, f func() error) (err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("%s panicked: %v", what, r)
		}
	}()
	return f()
}
