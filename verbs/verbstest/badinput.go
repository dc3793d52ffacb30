package verbstest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/verbs"
)

func (s *suite) qpTypes() []verbs.QPType {
	types := []verbs.QPType{verbs.QPTypeRC, verbs.QPTypeUD}
	if s.env.UC {
		types = append(types, verbs.QPTypeUC)
	}
	return types
}

// testTransitions walks a QP of each type through the state machine with
// invalid steps in between: each is refused with an error wrapping
// verbs.ErrInvalidArgument, without a panic, and leaves the state as it was.
func (s *suite) testTransitions(t *testing.T) {
	for _, typ := range s.qpTypes() {
		t.Run(typ.String(), func(t *testing.T) { s.transitions(t, typ) })
	}
}

func (s *suite) transitions(t *testing.T, typ verbs.QPType) {
	e := s.newEndpoint(t, 0, epOpts{typ: typ, buf: 4096})
	peer := &s.sides[1]
	bad := func(what string, a *verbs.QPAttr, m verbs.AttrMask) {
		t.Helper()
		before := e.query(t).State
		err := noPanic(t, what, func() error { return e.qp.Modify(a, m) })
		if !errors.Is(err, verbs.ErrInvalidArgument) {
			t.Fatalf("%s: %s: got %v, want an error wrapping verbs.ErrInvalidArgument", e.desc, what, err)
		}
		e.wantState(t, before, "after a refused "+what)
	}
	ud := typ == verbs.QPTypeUD
	port := uint8(e.sd.port)
	initA := verbs.QPAttr{State: verbs.QPSInit, Port: port, AccessFlags: allAccess, QKey: udQKey}
	initM := verbs.AttrState | verbs.AttrPKeyIndex | verbs.AttrPort | verbs.AttrAccessFlags
	if ud {
		initM = verbs.AttrState | verbs.AttrPKeyIndex | verbs.AttrPort | verbs.AttrQKey
	}
	with := func(a verbs.QPAttr, f func(*verbs.QPAttr)) *verbs.QPAttr { f(&a); return &a }

	bad("modify with nil attributes", nil, verbs.AttrState)
	bad("RESET -> RTR", &verbs.QPAttr{State: verbs.QPSRTR}, verbs.AttrState)
	bad("RESET -> RTS", &verbs.QPAttr{State: verbs.QPSRTS, SQPSN: 1}, verbs.AttrState|verbs.AttrSQPSN)
	bad("RESET -> state 9", &verbs.QPAttr{State: 9}, verbs.AttrState)
	bad("RESET -> INIT without the port", &initA, initM&^verbs.AttrPort)
	bad("RESET -> INIT with an extra path MTU", with(initA, func(a *verbs.QPAttr) { a.PathMTU = verbs.MTU1024 }),
		initM|verbs.AttrPathMTU)
	bad("RESET -> INIT to port 0", with(initA, func(a *verbs.QPAttr) { a.Port = 0 }), initM)
	bad("RESET -> INIT claiming cur_state INIT", with(initA, func(a *verbs.QPAttr) { a.CurState = verbs.QPSInit }),
		initM|verbs.AttrCurState)
	e.modify(t, &initA, initM)
	e.wantState(t, verbs.QPSInit, "after RESET -> INIT")

	bad("INIT -> RTS", &verbs.QPAttr{State: verbs.QPSRTS, SQPSN: 1}, verbs.AttrState|verbs.AttrSQPSN)
	rtrA := verbs.QPAttr{State: verbs.QPSRTR, PathMTU: min(s.mtu, verbs.MTU1024), DestQPN: 0x123, RQPSN: 5,
		AH: e.av(peer), MaxDestRdAtomic: e.rdAtomic(), MinRNRTimer: 1}
	rtrM := verbs.AttrState
	switch typ {
	case verbs.QPTypeRC:
		rtrM |= verbs.AttrAV | verbs.AttrPathMTU | verbs.AttrDestQPN | verbs.AttrRQPSN | verbs.AttrMaxDestRdAtomic |
			verbs.AttrMinRNRTimer
	case verbs.QPTypeUC:
		rtrM |= verbs.AttrAV | verbs.AttrPathMTU | verbs.AttrDestQPN | verbs.AttrRQPSN
	}
	if ud {
		bad("INIT -> RTR with a path MTU", &rtrA, rtrM|verbs.AttrPathMTU)
		bad("INIT -> RTR with a destination QPN", &rtrA, rtrM|verbs.AttrDestQPN)
	} else {
		bad("INIT -> RTR without dest_qp_num", &rtrA, rtrM&^verbs.AttrDestQPN)
		bad("INIT -> RTR without the address vector", &rtrA, rtrM&^verbs.AttrAV)
		bad("INIT -> RTR with an extra sq_psn", &rtrA, rtrM|verbs.AttrSQPSN)
		bad("INIT -> RTR with path MTU 0", with(rtrA, func(a *verbs.QPAttr) { a.PathMTU = 0 }), rtrM)
		bad("INIT -> RTR with path MTU 6", with(rtrA, func(a *verbs.QPAttr) { a.PathMTU = 6 }), rtrM)
		bad("INIT -> RTR with a 25-bit rq_psn", with(rtrA, func(a *verbs.QPAttr) { a.RQPSN = 1 << 24 }), rtrM)
		bad("INIT -> RTR with a 25-bit dest_qp_num", with(rtrA, func(a *verbs.QPAttr) { a.DestQPN = 1 << 24 }), rtrM)
		bad("INIT -> RTR with a 21-bit flow label", with(rtrA, func(a *verbs.QPAttr) { a.AH.FlowLabel = 1 << 20 }), rtrM)
	}
	if typ == verbs.QPTypeRC {
		bad("INIT -> RTR without min_rnr_timer", &rtrA, rtrM&^verbs.AttrMinRNRTimer)
		bad("INIT -> RTR with min_rnr_timer 32", with(rtrA, func(a *verbs.QPAttr) { a.MinRNRTimer = 32 }), rtrM)
	}
	e.modify(t, &rtrA, rtrM)
	e.wantState(t, verbs.QPSRTR, "after INIT -> RTR")

	rtsA := verbs.QPAttr{State: verbs.QPSRTS, SQPSN: 9, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: e.rdAtomic()}
	rtsM := verbs.AttrState | verbs.AttrSQPSN
	if typ == verbs.QPTypeRC {
		rtsM |= verbs.AttrTimeout | verbs.AttrRetryCnt | verbs.AttrRNRRetry | verbs.AttrMaxQPRdAtomic
		bad("RTR -> RTS without timeout", &rtsA, rtsM&^verbs.AttrTimeout)
		bad("RTR -> RTS with retry_cnt 8", with(rtsA, func(a *verbs.QPAttr) { a.RetryCnt = 8 }), rtsM)
		bad("RTR -> RTS with rnr_retry 8", with(rtsA, func(a *verbs.QPAttr) { a.RNRRetry = 8 }), rtsM)
		bad("RTR -> RTS with timeout 32", with(rtsA, func(a *verbs.QPAttr) { a.Timeout = 32 }), rtsM)
	} else {
		bad("RTR -> RTS with a timeout", &rtsA, rtsM|verbs.AttrTimeout)
	}
	bad("RTR -> RTS without sq_psn", &rtsA, rtsM&^verbs.AttrSQPSN)
	bad("RTR -> RTS with a 25-bit sq_psn", with(rtsA, func(a *verbs.QPAttr) { a.SQPSN = 1 << 24 }), rtsM)
	bad("RTR -> INIT", &initA, initM)
	e.modify(t, &rtsA, rtsM)
	e.wantState(t, verbs.QPSRTS, "after RTR -> RTS")

	bad("RTS -> RTR", &rtrA, rtrM)
	bad("RTS -> INIT", &initA, initM)
	bad("RTS -> RTS with a path MTU", &verbs.QPAttr{State: verbs.QPSRTS, PathMTU: verbs.MTU256},
		verbs.AttrState|verbs.AttrPathMTU)
	bad("RTS -> RTS claiming cur_state INIT", &verbs.QPAttr{State: verbs.QPSRTS, CurState: verbs.QPSInit},
		verbs.AttrState|verbs.AttrCurState)
	e.modify(t, &verbs.QPAttr{State: verbs.QPSErr}, verbs.AttrState)
	e.wantState(t, verbs.QPSErr, "after RTS -> ERR")
	bad("ERR -> RTS", &rtsA, rtsM)
	bad("ERR -> INIT", &initA, initM)
	e.modify(t, &verbs.QPAttr{State: verbs.QPSReset}, verbs.AttrState)
	e.wantState(t, verbs.QPSReset, "after ERR -> RESET")
	// A QP back in RESET starts over.
	e.modify(t, &initA, initM)
	e.wantState(t, verbs.QPSInit, "after RESET -> INIT again")
	s.quiet(t, e.scq, "send CQ", 0)
	s.quiet(t, e.rcq, "receive CQ", 0)
}

// testPostState posts in every state before RTS: sends are refused until
// RTS, receives in RESET only, with verbs.ErrBadState for the first request;
// in ERR the provider refuses or flushes as Env says.
func (s *suite) testPostState(t *testing.T) {
	for _, typ := range s.qpTypes() {
		t.Run(typ.String(), func(t *testing.T) {
			e := s.newEndpoint(t, 0, epOpts{typ: typ, buf: 4096})
			send := func(id uint64) []verbs.SendWR {
				return []verbs.SendWR{{ID: id, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: e.sge(0, 8)},
					{ID: id + 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: e.sge(8, 8)}}
			}
			recv := func(id uint64) []verbs.RecvWR {
				return []verbs.RecvWR{{ID: id, SGL: e.sge(1024, 64)}, {ID: id + 1, SGL: e.sge(2048, 64)}}
			}
			postErr(t, "post send in RESET", e.qp.PostSend(send(1)), 0, verbs.ErrBadState)
			postErr(t, "post receive in RESET", e.qp.PostRecv(recv(1)), 0, verbs.ErrBadState)
			e.toInit(t, allAccess, udQKey)
			postErr(t, "post send in INIT", e.qp.PostSend(send(3)), 0, verbs.ErrBadState)
			if err := e.qp.PostRecv(recv(10)); err != nil {
				t.Fatalf("post receive in INIT: %v", err)
			}
			if typ == verbs.QPTypeUD {
				e.modify(t, &verbs.QPAttr{State: verbs.QPSRTR}, verbs.AttrState)
			} else {
				e.toRTR(t, &s.sides[1], 0x123, s.defaultConn(), 0)
			}
			postErr(t, "post send in RTR", e.qp.PostSend(send(5)), 0, verbs.ErrBadState)
			if err := e.qp.PostRecv(recv(12)); err != nil {
				t.Fatalf("post receive in RTR: %v", err)
			}
			s.quiet(t, e.scq, "send CQ after refused posts", 0)
			s.quiet(t, e.rcq, "receive CQ before ERR", 0)
			e.modify(t, &verbs.QPAttr{State: verbs.QPSErr}, verbs.AttrState)
			q := e.qp.QPN()
			s.expect(t, e.rcq, "receives flushed by ERR", []wcWant{statusWant(q, 10, verbs.WCWRFlushErr),
				statusWant(q, 11, verbs.WCWRFlushErr), statusWant(q, 12, verbs.WCWRFlushErr),
				statusWant(q, 13, verbs.WCWRFlushErr)})
			s.quiet(t, e.scq, "send CQ after ERR", 0)
			s.postAfterError(t, e)
		})
	}
}

// testLocalKey posts requests whose SGE names an unknown L_Key or lies
// outside its region, between two good ones: refused at post with
// verbs.ErrBadKey naming the request, or accepted and completed with
// WCLocProtErr, as the provider declares (Env.PostChecksKeys).
func (s *suite) testLocalKey(t *testing.T) {
	cases := []struct {
		name string
		sge  func(e *endpoint) verbs.SGE
	}{
		{"UnknownLKey", func(e *endpoint) verbs.SGE {
			return verbs.SGE{Addr: e.mr.Addr(), Length: 8, LKey: e.mr.LKey() ^ 0x00ffff00}
		}},
		{"PastRegionEnd", func(e *endpoint) verbs.SGE {
			return verbs.SGE{Addr: e.mr.Addr() + uint64(e.mr.Len()) - 4, Length: 8, LKey: e.mr.LKey()}
		}},
		{"BeforeRegion", func(e *endpoint) verbs.SGE {
			return verbs.SGE{Addr: e.mr.Addr() - 8, Length: 8, LKey: e.mr.LKey()}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x, y := s.pair(t, verbs.QPTypeRC, 8192, s.defaultConn())
			q := x.qp.QPN()
			good := func(id uint64) verbs.SendWR {
				return verbs.SendWR{ID: id, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGL: x.sge(0, 16),
					RemoteAddr: y.raddr(0), RKey: y.mr.RKey()}
			}
			bad := verbs.SendWR{ID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{c.sge(x)}}
			err := x.qp.PostSend([]verbs.SendWR{good(1), bad, good(3)})
			if !s.env.PostChecksKeys {
				if err != nil {
					t.Fatalf("post with a bad L_Key: %v; the provider checks keys when it executes", err)
				}
				s.expect(t, x.scq, "bad L_Key", []wcWant{sendWant(q, 1, verbs.WRRDMAWrite, 16),
					statusWant(q, 2, verbs.WCLocProtErr), statusWant(q, 3, verbs.WCWRFlushErr)})
				x.wantState(t, verbs.QPSErr, "after a local protection error")
				return
			}
			postErr(t, "post send with a bad L_Key", err, 1, verbs.ErrBadKey)
			s.expect(t, x.scq, "requests before the bad one", []wcWant{sendWant(q, 1, verbs.WRRDMAWrite, 16)})
			// Receives: the good one before the bad one is posted, the
			// one after is not; a SEND proves which.
			rbad := verbs.RecvWR{ID: 11, SGL: []verbs.SGE{c.sge(y)}}
			err = y.qp.PostRecv([]verbs.RecvWR{{ID: 10, SGL: y.sge(100, 64)}, rbad, {ID: 12, SGL: y.sge(200, 64)}})
			postErr(t, "post receive with a bad L_Key", err, 1, verbs.ErrBadKey)
			copy(x.buf[32:], "after the bad key")
			if err := x.qp.PostSend([]verbs.SendWR{{ID: 4, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
				SGL: x.sge(32, 17)}}); err != nil {
				t.Fatal(err)
			}
			s.expect(t, x.scq, "SEND after the bad requests", []wcWant{sendWant(q, 4, verbs.WRSend, 17)})
			s.expect(t, y.rcq, "the receive before the bad one", []wcWant{{id: 10, status: verbs.WCSuccess,
				op: verbs.WCRecv, checkN: true, n: 17, qpn: y.qp.QPN()}})
			if string(y.buf[100:117]) != "after the bad key" {
				t.Fatalf("SEND payload %q", y.buf[100:117])
			}
			s.quiet(t, x.scq, "send CQ (the request after the bad one was not posted)", time.Millisecond)
			s.quiet(t, y.rcq, "receive CQ", 0)
		})
	}
}

// testOversize posts requests beyond the QP's capabilities (as Query
// reports them): more SGEs than max_send_sge or max_recv_sge, more inline
// data than max_inline_data. Each post fails with verbs.ErrTooLarge naming
// the request; those before it are posted and complete.
func (s *suite) testOversize(t *testing.T) {
	x, y := s.pair(t, verbs.QPTypeRC, 64<<10, s.defaultConn())
	q := x.qp.QPN()
	many := func(e *endpoint, n int) []verbs.SGE {
		out := make([]verbs.SGE, n)
		for i := range out {
			out[i] = e.sge(i*16, 8)[0]
		}
		return out
	}
	write := func(id uint64) verbs.SendWR {
		return verbs.SendWR{ID: id, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGL: x.sge(0, 16),
			RemoteAddr: y.raddr(0), RKey: y.mr.RKey()}
	}
	cases := []struct {
		name string
		wr   verbs.SendWR
	}{
		{fmt.Sprintf("SEND with %d SGEs", x.cap.MaxSendSGE+1),
			verbs.SendWR{Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: many(x, x.cap.MaxSendSGE+1)}},
		{fmt.Sprintf("WRITE with %d SGEs", x.cap.MaxSendSGE+1),
			verbs.SendWR{Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGL: many(x, x.cap.MaxSendSGE+1),
				RemoteAddr: y.raddr(0), RKey: y.mr.RKey()}},
		{fmt.Sprintf("inline SEND of %d bytes", x.cap.MaxInlineData+1),
			verbs.SendWR{Opcode: verbs.WRSend, Flags: verbs.SendSignaled | verbs.SendInline, SGL: x.sge(0, x.cap.MaxInlineData+1)}},
		{fmt.Sprintf("inline WRITE of %d bytes in two SGEs", x.cap.MaxInlineData+1),
			verbs.SendWR{Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled | verbs.SendInline,
				SGL:        append(x.sge(0, x.cap.MaxInlineData/2+1), x.sge(4096, x.cap.MaxInlineData-x.cap.MaxInlineData/2)...),
				RemoteAddr: y.raddr(0), RKey: y.mr.RKey()}},
	}
	id := uint64(100)
	for _, c := range cases {
		c.wr.ID = id + 1
		err := noPanic(t, "post "+c.name, func() error { return x.qp.PostSend([]verbs.SendWR{write(id), c.wr, write(id + 2)}) })
		postErr(t, "post "+c.name, err, 1, verbs.ErrTooLarge)
		s.expect(t, x.scq, "the WRITE before "+c.name, []wcWant{sendWant(q, id, verbs.WRRDMAWrite, 16)})
		id += 10
	}
	rbad := verbs.RecvWR{ID: 2, SGL: many(y, y.cap.MaxRecvSGE+1)}
	err := y.qp.PostRecv([]verbs.RecvWR{{ID: 1, SGL: y.sge(8192, 64)}, rbad})
	postErr(t, fmt.Sprintf("post a receive with %d SGEs", y.cap.MaxRecvSGE+1), err, 1, verbs.ErrTooLarge)
	copy(x.buf[1024:], "fits")
	if err := x.qp.PostSend([]verbs.SendWR{{ID: 9, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: x.sge(1024, 4)}}); err != nil {
		t.Fatal(err)
	}
	s.expect(t, x.scq, "SEND", []wcWant{sendWant(q, 9, verbs.WRSend, 4)})
	s.expect(t, y.rcq, "the receive before the oversize one", []wcWant{{id: 1, status: verbs.WCSuccess,
		op: verbs.WCRecv, checkN: true, n: 4, qpn: y.qp.QPN()}})
	s.quiet(t, x.scq, "send CQ (no refused request ran)", time.Millisecond)
	s.quiet(t, y.rcq, "receive CQ", 0)
}

// testQueueFull fills a send queue towards a peer that never answers (its
// QP stays in INIT) and a receive queue: the request past the capacity Query
// reports fails with verbs.ErrQueueFull and its index; moving the QP to ERR
// flushes every posted request, in order.
func (s *suite) testQueueFull(t *testing.T) {
	x := s.newEndpoint(t, 0, epOpts{typ: verbs.QPTypeRC, buf: 4096, cap: verbs.QPCap{MaxSendWR: 13, MaxRecvWR: 11}})
	z := s.newEndpoint(t, 1, epOpts{typ: verbs.QPTypeRC, buf: 4096})
	p := s.defaultConn()
	p.timeout = 20 // 4.3 s: nothing may time out before the QP is moved to ERR
	x.toInit(t, allAccess, 0)
	z.toInit(t, allAccess, 0)
	x.toRTR(t, z.sd, z.qp.QPN(), p, 0)
	x.toRTS(t, p, 0)
	sq, rq := x.cap.MaxSendWR, x.cap.MaxRecvWR
	wrs := make([]verbs.SendWR, sq+1)
	for i := range wrs {
		wrs[i] = verbs.SendWR{ID: uint64(i), Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGL: x.sge(i, 1),
			RemoteAddr: z.raddr(i), RKey: z.mr.RKey()}
	}
	postErr(t, fmt.Sprintf("post %d sends to a queue of %d", sq+1, sq), x.qp.PostSend(wrs), sq, verbs.ErrQueueFull)
	postErr(t, "post to a full send queue", x.qp.PostSend(wrs[:1]), 0, verbs.ErrQueueFull)
	recvs := make([]verbs.RecvWR, rq+1)
	for i := range recvs {
		recvs[i] = verbs.RecvWR{ID: uint64(1000 + i), SGL: x.sge(i, 1)}
	}
	postErr(t, fmt.Sprintf("post %d receives to a queue of %d", rq+1, rq), x.qp.PostRecv(recvs), rq, verbs.ErrQueueFull)
	x.modify(t, &verbs.QPAttr{State: verbs.QPSErr}, verbs.AttrState)
	var sw, rw []wcWant
	for i := range sq {
		sw = append(sw, statusWant(x.qp.QPN(), uint64(i), verbs.WCWRFlushErr))
	}
	for i := range rq {
		rw = append(rw, statusWant(x.qp.QPN(), uint64(1000+i), verbs.WCWRFlushErr))
	}
	s.expect(t, x.scq, "send queue flushed by ERR", sw)
	s.expect(t, x.rcq, "receive queue flushed by ERR", rw)
	s.quiet(t, x.scq, "send CQ after the flush", time.Millisecond)
	s.quiet(t, x.rcq, "receive CQ after the flush", 0)
}

// testFlushOnError posts receives to a QP of each type in INIT and moves it
// to ERR: every receive completes with WCWRFlushErr, in order.
func (s *suite) testFlushOnError(t *testing.T) {
	for _, typ := range s.qpTypes() {
		t.Run(typ.String(), func(t *testing.T) {
			e := s.newEndpoint(t, 0, epOpts{typ: typ, buf: 4096})
			e.toInit(t, allAccess, udQKey)
			var rw []verbs.RecvWR
			var want []wcWant
			for i := range 5 {
				rw = append(rw, verbs.RecvWR{ID: uint64(0xf100 + i), SGL: e.sge(i*256, 256)})
				want = append(want, statusWant(e.qp.QPN(), uint64(0xf100+i), verbs.WCWRFlushErr))
			}
			// An empty SGL is a valid receive too.
			rw = append(rw, verbs.RecvWR{ID: 0xf1ff})
			want = append(want, statusWant(e.qp.QPN(), 0xf1ff, verbs.WCWRFlushErr))
			if err := e.qp.PostRecv(rw); err != nil {
				t.Fatal(err)
			}
			s.quiet(t, e.rcq, "receive CQ before ERR", time.Millisecond)
			e.modify(t, &verbs.QPAttr{State: verbs.QPSErr}, verbs.AttrState)
			s.expect(t, e.rcq, "receives flushed by ERR", want)
			s.quiet(t, e.scq, "send CQ", 0)
		})
	}
}
