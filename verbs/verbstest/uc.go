package verbstest

import (
	"testing"

	"github.com/rdma-appliance/appliance/verbs"
)

// testUC runs SENDs and WRITEs, with and without immediate data, of one
// and several packets over a UC connection: the requester completes them,
// the data lands, and the receives say what arrived.
func (s *suite) testUC(t *testing.T) {
	if !s.env.UC {
		t.Skip("the provider does not declare UC support (Env.UC)")
	}
	p := s.defaultConn()
	p.mtu = min(s.mtu, verbs.MTU1024)
	p.access = [2]verbs.Access{verbs.AccessLocalWrite | verbs.AccessRemoteWrite, verbs.AccessLocalWrite | verbs.AccessRemoteWrite}
	x, y := s.pair(t, verbs.QPTypeUC, 256<<10, p)
	mtu := p.mtu.Bytes()
	for i := range x.buf {
		x.buf[i] = byte(i*13 + i>>8)
	}
	type xfer struct {
		op       verbs.WROpcode
		src, dst int // offsets: dst in y's buffer (the receive buffer for SENDs)
		n        int
		inline   bool
	}
	xs := []xfer{
		{op: verbs.WRSend, src: 0, dst: 0, n: 3*mtu + 100},
		{op: verbs.WRSendWithImm, src: 8192, dst: 16384, n: 64, inline: x.cap.MaxInlineData >= 64},
		{op: verbs.WRRDMAWrite, src: 20000, dst: 32768, n: 5*mtu - 1},
		{op: verbs.WRRDMAWriteWithImm, src: 40000, dst: 65536, n: 2000},
		{op: verbs.WRSend, src: 0, dst: 100000, n: 0},
		{op: verbs.WRRDMAWrite, src: 50000, dst: 110000, n: mtu},
		{op: verbs.WRSendWithImm, src: 60000, dst: 120000, n: mtu + 1},
	}
	var wrs []verbs.SendWR
	var recvs []verbs.RecvWR
	var sw, rw []wcWant
	imms := make([]uint32, len(xs))
	for i, c := range xs {
		id := uint64(0x0c00 + i)
		wr := verbs.SendWR{ID: id, Opcode: c.op, Flags: verbs.SendSignaled, SGL: x.sge(c.src, c.n)}
		if c.n == 0 {
			wr.SGL = nil
		}
		if c.inline {
			wr.Flags |= verbs.SendInline
		}
		if c.op.HasImm() {
			wr.Imm = 0x0c0c0000 | uint32(i)
			imms[i] = wr.Imm
		}
		rwant := wcWant{id: id, status: verbs.WCSuccess, op: verbs.WCRecv, checkN: true, n: uint32(c.n), qpn: y.qp.QPN()}
		if c.op.HasImm() {
			rwant.imm = &imms[i]
		}
		switch c.op {
		case verbs.WRSend, verbs.WRSendWithImm:
			recvs = append(recvs, verbs.RecvWR{ID: id, SGL: y.sge(c.dst, c.n+8)})
			rw = append(rw, rwant)
		case verbs.WRRDMAWrite, verbs.WRRDMAWriteWithImm:
			wr.RemoteAddr, wr.RKey = y.raddr(c.dst), y.mr.RKey()
			if c.op == verbs.WRRDMAWriteWithImm {
				rwant.op = verbs.WCRecvRDMAWithImm
				recvs = append(recvs, verbs.RecvWR{ID: id})
				rw = append(rw, rwant)
			}
		}
		wrs = append(wrs, wr)
		sw = append(sw, sendWant(x.qp.QPN(), id, c.op, c.n))
	}
	if err := y.qp.PostRecv(recvs); err != nil {
		t.Fatal(err)
	}
	if err := x.qp.PostSend(wrs); err != nil {
		t.Fatal(err)
	}
	s.expect(t, x.scq, "UC requester", sw)
	s.expect(t, y.rcq, "UC responder", rw)
	for i, c := range xs {
		if j := diff(y.buf[c.dst:c.dst+c.n], x.buf[c.src:c.src+c.n]); j >= 0 {
			t.Fatalf("UC %v %d of %d bytes: differs at byte %d", c.op, i, c.n, j)
		}
	}
	s.quiet(t, y.rcq, "UC receive CQ", 0)
	s.quiet(t, x.rcq, "UC requester's receive CQ", 0)
}

// testVanish makes device B disappear while A's RC QP has requests
// outstanding towards it: they end in errors and flushes, A's posted
// receive is flushed, nothing hangs.
func (s *suite) testVanish(t *testing.T) {
	if s.env.Vanish == nil {
		t.Skip("no Env.Vanish hook: the provider cannot make device B disappear")
	}
	p := s.defaultConn()
	p.timeout, p.retry = 10, 2 // 4.2 ms x 3
	x, y := s.pair(t, verbs.QPTypeRC, 1<<20, p)
	s.failPeer(t, x, y, func() {
		s.gone = true
		s.env.Vanish()
	})
}
