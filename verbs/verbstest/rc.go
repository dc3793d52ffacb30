package verbstest

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/verbs"
)

// testRCSigAll: a QP created with SigAll completes every request, signalled
// or not.
func (s *suite) testRCSigAll(t *testing.T) {
	x := s.newEndpoint(t, 0, epOpts{typ: verbs.QPTypeRC, sigAll: true})
	y := s.newEndpoint(t, 1, epOpts{typ: verbs.QPTypeRC})
	s.connect(t, x, y, s.defaultConn())
	copy(x.buf, "signal all of them")
	if err := y.qp.PostRecv([]verbs.RecvWR{{ID: 50, SGL: y.sge(0, 64)}}); err != nil {
		t.Fatal(err)
	}
	wrs := []verbs.SendWR{
		{ID: 1, Opcode: verbs.WRRDMAWrite, SGL: x.sge(0, 18), RemoteAddr: y.raddr(1024), RKey: y.mr.RKey()},
		{ID: 2, Opcode: verbs.WRRDMARead, SGL: x.sge(2048, 18), RemoteAddr: y.raddr(1024), RKey: y.mr.RKey()},
		{ID: 3, Opcode: verbs.WRSend, SGL: x.sge(0, 18)},
		{ID: 4, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGL: x.sge(0, 4), RemoteAddr: y.raddr(4096), RKey: y.mr.RKey()},
	}
	if err := x.qp.PostSend(wrs); err != nil {
		t.Fatal(err)
	}
	q := x.qp.QPN()
	s.expect(t, x.scq, "SigAll send queue", []wcWant{sendWant(q, 1, verbs.WRRDMAWrite, 18),
		sendWant(q, 2, verbs.WRRDMARead, 18), sendWant(q, 3, verbs.WRSend, 18), sendWant(q, 4, verbs.WRRDMAWrite, 4)})
	s.expect(t, y.rcq, "SigAll receive", []wcWant{{id: 50, status: verbs.WCSuccess, op: verbs.WCRecv, checkN: true,
		n: 18, qpn: y.qp.QPN()}})
	if string(y.buf[:18]) != "signal all of them" || string(y.buf[1024:1042]) != "signal all of them" ||
		string(x.buf[2048:2066]) != "signal all of them" || string(y.buf[4096:4100]) != "sign" {
		t.Fatal("SigAll transfers did not land")
	}
}

// testRCInline: inline data is copied when the request is posted, so the
// source may change at once; the request completes with what it held at
// post time, at every size up to the QP's inline limit.
func (s *suite) testRCInline(t *testing.T) {
	x, y := s.pair(t, verbs.QPTypeRC, 64<<10, s.defaultConn())
	maxInl := x.cap.MaxInlineData
	if maxInl == 0 {
		t.Skip("the QP has no inline data")
	}
	var recvs []verbs.RecvWR
	var wrs []verbs.SendWR
	var sizes []int
	for n := 1; n < maxInl; n = n*2 + 1 {
		sizes = append(sizes, n)
	}
	sizes = append(sizes, maxInl)
	type span struct{ src, dst, n int }
	var spans []span
	off := 0
	for i, n := range sizes {
		for j := range n {
			x.buf[off+j] = byte(i*31 + j)
		}
		op := verbs.WRSend
		if i%2 == 1 {
			op = verbs.WRRDMAWrite
		}
		wr := verbs.SendWR{ID: uint64(i), Opcode: op, Flags: verbs.SendInline | verbs.SendSignaled, SGL: x.sge(off, n)}
		if n > 2 && i%3 == 0 {
			// Two SGEs, the second from elsewhere in the buffer.
			wr.SGL = append(x.sge(off, n/2), x.sge(off+n/2, n-n/2)...)
		}
		if op == verbs.WRSend {
			recvs = append(recvs, verbs.RecvWR{ID: uint64(i), SGL: y.sge(off, n)})
		} else {
			wr.RemoteAddr, wr.RKey = y.raddr(off), y.mr.RKey()
		}
		wrs = append(wrs, wr)
		spans = append(spans, span{off, off, n})
		off += n + 16
	}
	want := append([]byte(nil), x.buf[:off]...)
	if err := y.qp.PostRecv(recvs); err != nil {
		t.Fatal(err)
	}
	if err := x.qp.PostSend(wrs); err != nil {
		t.Fatal(err)
	}
	for i := range x.buf[:off] {
		x.buf[i] = ^x.buf[i]
	}
	var sw, rw []wcWant
	for i, wr := range wrs {
		sw = append(sw, sendWant(x.qp.QPN(), wr.ID, wr.Opcode, sizes[i]))
		if wr.Opcode == verbs.WRSend {
			rw = append(rw, wcWant{id: wr.ID, status: verbs.WCSuccess, op: verbs.WCRecv, checkN: true,
				n: uint32(sizes[i]), qpn: y.qp.QPN()})
		}
	}
	s.expect(t, x.scq, "inline sends", sw)
	s.expect(t, y.rcq, "inline receives", rw)
	for i, sp := range spans {
		if j := diff(y.buf[sp.dst:sp.dst+sp.n], want[sp.src:sp.src+sp.n]); j >= 0 {
			t.Fatalf("inline %v of %d bytes (max %d): byte %d is not what the source held at post time",
				wrs[i].Opcode, sp.n, maxInl, j)
		}
	}
}

// accessCase is a remote access violation.
type accessCase struct {
	name string
	// qpAccess are the responder QP's access flags; mrAccess, when set,
	// registers a second responder region with those flags as the target.
	qpAccess verbs.Access
	mrAccess verbs.Access
	wr       func(x, y *endpoint, target verbs.MR) verbs.SendWR
}

func (s *suite) testRCRemoteAccess(t *testing.T) {
	write := func(raddr func(y *endpoint, m verbs.MR) uint64, rkey func(m verbs.MR) uint32, n int) func(x, y *endpoint, m verbs.MR) verbs.SendWR {
		return func(x, y *endpoint, m verbs.MR) verbs.SendWR {
			return verbs.SendWR{Opcode: verbs.WRRDMAWrite, SGL: x.sge(0, n), RemoteAddr: raddr(y, m), RKey: rkey(m)}
		}
	}
	read := func(raddr func(y *endpoint, m verbs.MR) uint64, rkey func(m verbs.MR) uint32, n int) func(x, y *endpoint, m verbs.MR) verbs.SendWR {
		return func(x, y *endpoint, m verbs.MR) verbs.SendWR {
			return verbs.SendWR{Opcode: verbs.WRRDMARead, SGL: x.sge(0, n), RemoteAddr: raddr(y, m), RKey: rkey(m)}
		}
	}
	atomic := func(raddr func(y *endpoint, m verbs.MR) uint64, rkey func(m verbs.MR) uint32) func(x, y *endpoint, m verbs.MR) verbs.SendWR {
		return func(x, y *endpoint, m verbs.MR) verbs.SendWR {
			return verbs.SendWR{Opcode: verbs.WRAtomicFetchAndAdd, CompareAdd: 1, SGL: x.sge(0, 8),
				RemoteAddr: raddr(y, m), RKey: rkey(m)}
		}
	}
	start := func(_ *endpoint, m verbs.MR) uint64 { return m.Addr() }
	nearEnd := func(_ *endpoint, m verbs.MR) uint64 { return m.Addr() + uint64(m.Len()) - 40 }
	pastEnd := func(_ *endpoint, m verbs.MR) uint64 { return m.Addr() + uint64(m.Len()) }
	before := func(_ *endpoint, m verbs.MR) uint64 { return m.Addr() - 64 }
	key := func(m verbs.MR) uint32 { return m.RKey() }
	badKey := func(m verbs.MR) uint32 { return m.RKey() ^ 0x00ffff00 }
	noWrite := verbs.AccessLocalWrite | verbs.AccessRemoteRead | verbs.AccessRemoteAtomic
	noRead := verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteAtomic
	noAtomic := verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead
	cases := []accessCase{
		{name: "BadRKey/Write", wr: write(start, badKey, 100)},
		{name: "BadRKey/Read", wr: read(start, badKey, 100)},
		{name: "BadRKey/Atomic", wr: atomic(start, badKey)},
		{name: "OutOfBounds/WritePastEnd", wr: write(nearEnd, key, 100)},
		{name: "OutOfBounds/ReadBeforeStart", wr: read(before, key, 100)},
		{name: "OutOfBounds/AtomicPastEnd", wr: atomic(pastEnd, key)},
		{name: "NoRemoteWrite/MR", mrAccess: noWrite, wr: write(start, key, 100)},
		{name: "NoRemoteRead/MR", mrAccess: noRead, wr: read(start, key, 100)},
		{name: "NoRemoteAtomic/MR", mrAccess: noAtomic, wr: atomic(start, key)},
		{name: "NoRemoteWrite/QP", qpAccess: noWrite, wr: write(start, key, 100)},
		{name: "NoRemoteRead/QP", qpAccess: noRead, wr: read(start, key, 100)},
		{name: "NoRemoteAtomic/QP", qpAccess: noAtomic, wr: atomic(start, key)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { s.remoteAccess(t, c) })
	}
}

// remoteAccess posts a violating request followed by a WRITE and a SEND:
// the first completes with WCRemAccessErr, the QP goes to ERR, the other two
// and the requester's posted receive are flushed, and the responder's memory
// and receive queue are untouched until the responder is moved to ERR,
// which flushes its receive.
func (s *suite) remoteAccess(t *testing.T, c accessCase) {
	p := s.defaultConn()
	if c.qpAccess != 0 {
		p.access[1] = c.qpAccess
	}
	x, y := s.pair(t, verbs.QPTypeRC, 8192, p)
	target := y.mr
	if c.mrAccess != 0 {
		b, err := s.alloc(4096)
		if err != nil {
			t.Fatal(err)
		}
		if s.free != nil {
			s.teardown(t, y.sd, "free buffer", func() error { return s.free(b) })
		}
		m, err := y.pd.RegMR(b, c.mrAccess)
		if err != nil {
			t.Fatalf("register a region with access %#x: %v", c.mrAccess, err)
		}
		s.teardown(t, y.sd, "deregister MR", m.Dereg)
		target = m
	}
	for i := range x.buf {
		x.buf[i] = byte(i * 7)
	}
	before := append([]byte(nil), target.Buf()...)
	yBefore := append([]byte(nil), y.buf...)
	if err := y.qp.PostRecv([]verbs.RecvWR{{ID: 90, SGL: y.sge(4096, 256)}}); err != nil {
		t.Fatal(err)
	}
	if err := x.qp.PostRecv([]verbs.RecvWR{{ID: 91, SGL: x.sge(4096, 256)}}); err != nil {
		t.Fatal(err)
	}
	bad := c.wr(x, y, target)
	bad.ID, bad.Flags = 1, verbs.SendSignaled
	wrs := []verbs.SendWR{bad,
		{ID: 2, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGL: x.sge(0, 64), RemoteAddr: y.raddr(0), RKey: y.mr.RKey()},
		{ID: 3, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: x.sge(0, 64)},
	}
	if err := x.qp.PostSend(wrs); err != nil {
		t.Fatal(err)
	}
	q := x.qp.QPN()
	s.expect(t, x.scq, "requester after "+c.name, []wcWant{statusWant(q, 1, verbs.WCRemAccessErr),
		statusWant(q, 2, verbs.WCWRFlushErr), statusWant(q, 3, verbs.WCWRFlushErr)})
	s.expect(t, x.rcq, "requester's posted receive", []wcWant{statusWant(q, 91, verbs.WCWRFlushErr)})
	x.wantState(t, verbs.QPSErr, "after a remote access error")
	s.postAfterError(t, x)

	if i := diff(target.Buf(), before); i >= 0 {
		t.Fatalf("%s changed the target region at byte %d", c.name, i)
	}
	if i := diff(y.buf, yBefore); i >= 0 {
		t.Fatalf("the requests flushed after %s changed the responder's memory at byte %d", c.name, i)
	}
	// The SEND behind the violation must not have consumed the receive;
	// moving the responder to ERR flushes it (whether or not the
	// violation already moved it there).
	y.modify(t, &verbs.QPAttr{State: verbs.QPSErr}, verbs.AttrState)
	s.expect(t, y.rcq, "responder's posted receive", []wcWant{statusWant(y.qp.QPN(), 90, verbs.WCWRFlushErr)})
	s.quiet(t, y.rcq, "responder receive queue", 0)
}

// postAfterError checks what a post to a QP in ERR does: it is refused with
// verbs.ErrBadState, or accepted and flushed, as the provider declares.
func (s *suite) postAfterError(t *testing.T, e *endpoint) {
	t.Helper()
	sw := []verbs.SendWR{{ID: 77, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: e.sge(0, 8)}}
	rw := []verbs.RecvWR{{ID: 78, SGL: e.sge(0, 8)}}
	errS, errR := e.qp.PostSend(sw), e.qp.PostRecv(rw)
	if s.env.PostToErrorQPFlushes {
		if errS != nil || errR != nil {
			t.Fatalf("%s in ERR: post send: %v; post receive: %v; want both accepted and flushed", e.desc, errS, errR)
		}
		s.expect(t, e.scq, "send posted in ERR", []wcWant{statusWant(e.qp.QPN(), 77, verbs.WCWRFlushErr)})
		s.expect(t, e.rcq, "receive posted in ERR", []wcWant{statusWant(e.qp.QPN(), 78, verbs.WCWRFlushErr)})
		return
	}
	postErr(t, e.desc+" in ERR: post send", errS, 0, verbs.ErrBadState)
	postErr(t, e.desc+" in ERR: post receive", errR, 0, verbs.ErrBadState)
	s.quiet(t, e.scq, "send queue after a refused post", 0)
	s.quiet(t, e.rcq, "receive queue after a refused post", 0)
}

// testRCPeerError moves the responder QP to ERR while the requester has
// requests outstanding: the requester must end every one of them (some may
// have succeeded first) with an error, then flush, and never hang.
func (s *suite) testRCPeerError(t *testing.T) {
	p := s.defaultConn()
	p.timeout, p.retry = 10, 2 // 4.2 ms x 3
	x, y := s.pair(t, verbs.QPTypeRC, 1<<20, p)
	s.failPeer(t, x, y, func() {
		y.modify(t, &verbs.QPAttr{State: verbs.QPSErr}, verbs.AttrState)
	})
}

// failPeer posts WRITEs from x, runs kill once the first completed, posts
// more, and checks that every request completes: successes, then one
// error, then flushes; x's posted receive is flushed too.
func (s *suite) failPeer(t *testing.T, x, y *endpoint, kill func()) {
	t.Helper()
	const n, size = 8, 64 << 10
	if err := x.qp.PostRecv([]verbs.RecvWR{{ID: 500, SGL: x.sge(0, 64)}}); err != nil {
		t.Fatal(err)
	}
	mk := func(i int) verbs.SendWR {
		return verbs.SendWR{ID: uint64(i), Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
			SGL: x.sge(i%8*size, size), RemoteAddr: y.raddr(i % 8 * size), RKey: y.mr.RKey()}
	}
	var wrs []verbs.SendWR
	for i := range n {
		wrs = append(wrs, mk(i))
	}
	if err := x.qp.PostSend(wrs); err != nil {
		t.Fatal(err)
	}
	descs := make([]string, 2*n)
	for i := range descs {
		descs[i] = fmt.Sprintf("WRITE %d of %d bytes", i, size)
	}
	got := s.await(t, x.scq, "before the peer fails", descs[:1])
	kill()
	wrs = wrs[:0]
	for i := n; i < 2*n; i++ {
		wrs = append(wrs, mk(i))
	}
	want := descs[1:]
	if err := x.qp.PostSend(wrs); err != nil {
		// The requester may already have given up (a starved test
		// goroutine): then the post meets a QP in ERR.
		if s.env.PostToErrorQPFlushes || x.query(t).State != verbs.QPSErr {
			t.Fatalf("posting after the peer failed: %v", err)
		}
		postErr(t, "posting to the requester in ERR", err, 0, verbs.ErrBadState)
		want = descs[1:n]
	}
	got = append(got, s.await(t, x.scq, "after the peer failed", want)...)
	phase := 0 // 0: successes, 1: flushes after the error
	for i, wc := range got {
		if wc.ID != uint64(i) || wc.QPN != x.qp.QPN() {
			t.Fatalf("completion %d: %s, want wr_id %d of QP %#x (in order)", i, wcString(wc), i, x.qp.QPN())
		}
		switch {
		case phase == 0 && wc.Status == verbs.WCSuccess:
		case phase == 0 && wc.Status != verbs.WCWRFlushErr:
			phase = 1
			t.Logf("request %d ended with %q once the peer failed", i, wc.Status.String())
		case phase == 1 && wc.Status == verbs.WCWRFlushErr:
		default:
			t.Fatalf("completion %d: %s; want successes, one error, then flush errors: %s", i, wcString(wc), wcList(got))
		}
	}
	if phase == 0 {
		t.Fatalf("every request succeeded although the peer failed: %s", wcList(got))
	}
	s.expect(t, x.rcq, "requester's posted receive", []wcWant{statusWant(x.qp.QPN(), 500, verbs.WCWRFlushErr)})
	x.wantState(t, verbs.QPSErr, "after its peer failed")
}

// testRCResetReuse takes a connection through ERR and RESET and connects
// it again with new PSNs: the QPs must carry traffic as new ones do, with
// no stale completion.
func (s *suite) testRCResetReuse(t *testing.T) {
	p := s.defaultConn()
	x, y := s.pair(t, verbs.QPTypeRC, 64<<10, p)
	round := func(tag string) {
		t.Helper()
		msg := []byte("round " + tag)
		copy(x.buf, msg)
		if err := y.qp.PostRecv([]verbs.RecvWR{{ID: 7, SGL: y.sge(100, 64)}}); err != nil {
			t.Fatal(err)
		}
		err := x.qp.PostSend([]verbs.SendWR{
			{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: x.sge(0, len(msg))},
			{ID: 2, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, SGL: x.sge(1000, len(msg)),
				RemoteAddr: y.raddr(100), RKey: y.mr.RKey()},
		})
		if err != nil {
			t.Fatal(err)
		}
		s.expect(t, x.scq, tag+": send queue", []wcWant{sendWant(x.qp.QPN(), 1, verbs.WRSend, len(msg)),
			sendWant(x.qp.QPN(), 2, verbs.WRRDMARead, len(msg))})
		s.expect(t, y.rcq, tag+": receive", []wcWant{{id: 7, status: verbs.WCSuccess, op: verbs.WCRecv,
			checkN: true, n: uint32(len(msg)), qpn: y.qp.QPN()}})
		if !bytes.Equal(y.buf[100:100+len(msg)], msg) || !bytes.Equal(x.buf[1000:1000+len(msg)], msg) {
			t.Fatalf("%s: data did not land", tag)
		}
	}
	round("first connection")
	for _, e := range []*endpoint{x, y} {
		e.modify(t, &verbs.QPAttr{State: verbs.QPSErr}, verbs.AttrState)
		e.modify(t, &verbs.QPAttr{State: verbs.QPSReset}, verbs.AttrState)
		e.wantState(t, verbs.QPSReset, "after ERR -> RESET")
	}
	for _, e := range []*endpoint{x, y} {
		s.quiet(t, e.scq, e.desc+" send CQ after reset", time.Millisecond)
		s.quiet(t, e.rcq, e.desc+" receive CQ after reset", 0)
	}
	p.psn = [2]uint32{0xabcdef, 0x123}
	s.connect(t, x, y, p)
	round("second connection")
}

// testRCQueueRefill keeps a send queue and a receive queue exactly full:
// every polled completion frees its slot at once, so posting one request
// per completion must never be refused.
func (s *suite) testRCQueueRefill(t *testing.T) {
	qc := verbs.QPCap{MaxSendWR: 13, MaxRecvWR: 11}
	x := s.newEndpoint(t, 0, epOpts{typ: verbs.QPTypeRC, buf: 4096, cap: qc})
	y := s.newEndpoint(t, 1, epOpts{typ: verbs.QPTypeRC, buf: 4096, cap: qc})
	s.connect(t, x, y, s.defaultConn())
	sq, rq := x.cap.MaxSendWR, y.cap.MaxRecvWR
	total := 15 * sq
	send := func(i int) error {
		return x.qp.PostSend([]verbs.SendWR{{ID: uint64(i), Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
			SGL: x.sge(i%64, 1)}})
	}
	recv := func(i int) error {
		return y.qp.PostRecv([]verbs.RecvWR{{ID: uint64(i), SGL: y.sge(i%64*8, 8)}})
	}
	sent, posted := 0, 0
	for ; posted < min(rq, total); posted++ {
		if err := recv(posted); err != nil {
			t.Fatalf("receive %d of a queue of %d: %v", posted, rq, err)
		}
	}
	for ; sent < min(sq, total); sent++ {
		if err := send(sent); err != nil {
			t.Fatalf("send %d of a queue of %d: %v", sent, sq, err)
		}
	}
	sdone, rdone := 0, 0
	var wcs [16]verbs.WC
	deadline := time.Now().Add(s.timeout)
	for sdone < total || rdone < total {
		n1, err := x.scq.Poll(wcs[:])
		if err != nil {
			t.Fatal(err)
		}
		for _, wc := range wcs[:n1] {
			if wc.Status != verbs.WCSuccess || wc.ID != uint64(sdone) {
				t.Fatalf("send completion %d: %s", sdone, wcString(wc))
			}
			sdone++
			if sent < total {
				if err := send(sent); err != nil {
					var more [32]verbs.WC
					k, _ := x.scq.Poll(more[:])
					t.Fatalf("send %d right after polling the completion of %d (queue of %d): %v; completions queued since: %s",
						sent, sdone-1, sq, err, wcList(more[:k]))
				}
				sent++
			}
		}
		n2, err := y.rcq.Poll(wcs[:])
		if err != nil {
			t.Fatal(err)
		}
		for _, wc := range wcs[:n2] {
			if wc.Status != verbs.WCSuccess || wc.ID != uint64(rdone) || wc.ByteLen != 1 {
				t.Fatalf("receive completion %d: %s", rdone, wcString(wc))
			}
			rdone++
			if posted < total {
				if err := recv(posted); err != nil {
					t.Fatalf("receive %d right after polling the completion of %d (queue of %d): %v", posted, rdone-1, rq, err)
				}
				posted++
			}
		}
		if n1+n2 > 0 {
			continue
		}
		left := time.Until(deadline)
		if left <= 0 {
			t.Fatalf("timeout: %d of %d sends and %d of %d receives completed", sdone, total, rdone, total)
		}
		select {
		case <-x.scq.Notify():
		case <-y.rcq.Notify():
		case <-time.After(min(left, 5*time.Millisecond)):
		}
	}
}
