package verbstest

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/verbs"
)

// udQKey is the Q_Key of the suite's UD QPs.
const udQKey = 0x1234abcd

// grhLen is the room ibverbs requires at the start of every UD receive
// buffer: the GRH, or for RoCEv2 over IPv4 twenty undefined bytes and the
// IPv4 header.
const grhLen = 40

// udUp brings a UD QP to RTS.
func (e *endpoint) udUp(t *testing.T) {
	t.Helper()
	e.toInit(t, 0, udQKey)
	e.modify(t, &verbs.QPAttr{State: verbs.QPSRTR}, verbs.AttrState)
	e.modify(t, &verbs.QPAttr{State: verbs.QPSRTS, SQPSN: 0x42}, verbs.AttrState|verbs.AttrSQPSN)
}

// ah creates an address handle from e towards peer.
func (s *suite) ah(t *testing.T, e *endpoint, peer *side) verbs.AH {
	t.Helper()
	a, err := e.pd.CreateAH(e.av(peer))
	if err != nil {
		t.Fatalf("%s: create AH to %v: %v", e.desc, peer.gid, err)
	}
	s.teardown(t, e.sd, "destroy AH", a.Destroy)
	if got := a.Attr(); got.DGID != peer.gid || got.SGIDIndex != e.sd.gidx {
		t.Fatalf("AH attributes %+v, created with DGID %v SGID index %d", got, peer.gid, e.sd.gidx)
	}
	return a
}

// testUDPing sends datagrams of several sizes, with and without immediate
// data, both ways: payload after the 40-byte GRH area, the GRH naming both
// GIDs, byte_len counting the GRH, the source QP, and completion timestamps
// when the devices have them.
func (s *suite) testUDPing(t *testing.T) {
	ts := s.sides[0].info.CompletionTimestamps && s.sides[1].info.CompletionTimestamps
	if !ts {
		t.Log("completion timestamps not checked: a device does not have them")
	}
	x := s.newEndpoint(t, 0, epOpts{typ: verbs.QPTypeUD, buf: 64 << 10, ts: ts})
	y := s.newEndpoint(t, 1, epOpts{typ: verbs.QPTypeUD, buf: 64 << 10, ts: ts})
	x.udUp(t)
	y.udUp(t)
	mtu := s.mtu.Bytes()
	sizes := []int{0, 1, 60, 61, mtu - 1, mtu, 200, 1000}
	for dir, ends := range [][2]*endpoint{{x, y}, {y, x}} {
		src, dst := ends[0], ends[1]
		ah := s.ah(t, src, dst.sd)
		var sends []verbs.SendWR
		var recvs []verbs.RecvWR
		var sw, rw []wcWant
		type slot struct{ off, n, room int }
		var slots []slot
		imms := make([]uint32, len(sizes))
		off := 0
		for i, n := range sizes {
			n = min(n, mtu)
			room := grhLen + n + 16
			for j := range room {
				dst.buf[off+j] = 0xee
			}
			for j := range n {
				src.buf[off+j] = byte(dir*100 + i + j*3)
			}
			id := uint64(dir<<8 | i)
			wr := verbs.SendWR{ID: id, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: src.sge(off, n),
				AH: ah, RemoteQPN: dst.qp.QPN(), RemoteQKey: udQKey}
			if n == 0 {
				wr.SGL = nil
			}
			rwant := wcWant{id: id + 0x1000, status: verbs.WCSuccess, op: verbs.WCRecv, checkN: true,
				n: uint32(grhLen + n), qpn: dst.qp.QPN(), srcQP: src.qp.QPN(), grh: true}
			if i%2 == 1 {
				wr.Opcode, wr.Imm = verbs.WRSendWithImm, 0xdada0000|uint32(i)
				imms[i] = wr.Imm
				rwant.imm = &imms[i]
			}
			if n > 0 && n <= src.cap.MaxInlineData && i%3 == 0 {
				wr.Flags |= verbs.SendInline
			}
			sends = append(sends, wr)
			// Receives alternate between one SGE and two, the first
			// holding exactly the GRH.
			sgl := dst.sge(off, room)
			if i%2 == 0 {
				sgl = append(dst.sge(off, grhLen), dst.sge(off+grhLen, room-grhLen)...)
			}
			recvs = append(recvs, verbs.RecvWR{ID: id + 0x1000, SGL: sgl})
			sw = append(sw, wcWant{id: id, status: verbs.WCSuccess, op: verbs.WCSend, qpn: src.qp.QPN()})
			rw = append(rw, rwant)
			slots = append(slots, slot{off, n, room})
			off += room + 64
		}
		if err := dst.qp.PostRecv(recvs); err != nil {
			t.Fatal(err)
		}
		for i := range sends {
			// One at a time: UD may drop what a receiver cannot take,
			// and a burst is not what this test is about.
			if err := src.qp.PostSend(sends[i : i+1]); err != nil {
				t.Fatalf("UD %v of %d bytes: %v", sends[i].Opcode, slots[i].n, err)
			}
		}
		what := fmt.Sprintf("UD %s -> %s", src.sd.name, dst.sd.name)
		swc := s.expect(t, src.scq, what+": sends", sw)
		rwc := s.expect(t, dst.rcq, what+": receives", rw)
		for i, sl := range slots {
			b := dst.buf[sl.off : sl.off+sl.room]
			if j := diff(b[grhLen:grhLen+sl.n], src.buf[sl.off:sl.off+sl.n]); j >= 0 {
				t.Fatalf("%s: datagram %d (%d bytes): payload differs at byte %d", what, i, sl.n, j)
			}
			if !bytes.Equal(b[grhLen+sl.n:], bytes.Repeat([]byte{0xee}, sl.room-grhLen-sl.n)) {
				t.Fatalf("%s: datagram %d (%d bytes) wrote past its end", what, i, sl.n)
			}
			if err := checkGRH(b[:grhLen], src.sd.gid, dst.sd.gid); err != nil {
				t.Fatalf("%s: datagram %d: %v", what, i, err)
			}
			if ts {
				checkStamps(t, what, i, swc, rwc, s.env.SameClock)
			}
		}
	}
}

// checkGRH checks the GRH area of a UD receive: an IPv6 header, or twenty
// bytes and an IPv4 header, from src to dst.
func checkGRH(b []byte, src, dst verbs.GID) error {
	var s, d netip.Addr
	if src.IsIPv4() {
		ip := b[20:]
		if ip[0]>>4 != 4 {
			return fmt.Errorf("GRH area %x: no IPv4 header at byte 20", b)
		}
		s, d = netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20]))
	} else {
		if b[0]>>4 != 6 {
			return fmt.Errorf("GRH area %x: not an IPv6 header", b)
		}
		s, d = netip.AddrFrom16([16]byte(b[8:24])), netip.AddrFrom16([16]byte(b[24:40]))
	}
	if s != src.Addr() || d != dst.Addr() {
		return fmt.Errorf("GRH from %v to %v, want %v to %v", s, d, src, dst)
	}
	return nil
}

// checkStamps checks the timestamps of datagram i: set, not going back on
// either CQ, and with one clock the send's no later than the receive's.
func checkStamps(t *testing.T, what string, i int, swc, rwc []verbs.WC, same bool) {
	t.Helper()
	s, r := swc[i].Timestamp, rwc[i].Timestamp
	if s == 0 || r == 0 {
		t.Fatalf("%s: datagram %d: timestamps send %d receive %d, want both set", what, i, s, r)
	}
	if i > 0 && (s < swc[i-1].Timestamp || r < rwc[i-1].Timestamp) {
		t.Fatalf("%s: datagram %d: timestamps went back: send %d after %d, receive %d after %d", what, i, s,
			swc[i-1].Timestamp, r, rwc[i-1].Timestamp)
	}
	if same && s > r {
		t.Fatalf("%s: datagram %d: sent at %d, received at %d on the same clock", what, i, s, r)
	}
}

// testUDQKey sends a datagram with a wrong Q_Key, then one with the right
// one: the first is dropped without a receive completion, so the second
// lands in the first receive; the sender completes both.
func (s *suite) testUDQKey(t *testing.T) {
	x := s.newEndpoint(t, 0, epOpts{typ: verbs.QPTypeUD, buf: 8192})
	y := s.newEndpoint(t, 1, epOpts{typ: verbs.QPTypeUD, buf: 8192})
	x.udUp(t)
	y.udUp(t)
	ah := s.ah(t, x, y.sd)
	for i := range y.buf[:512] {
		y.buf[i] = 0xee
	}
	if err := y.qp.PostRecv([]verbs.RecvWR{{ID: 1, SGL: y.sge(0, 256)}, {ID: 2, SGL: y.sge(256, 256)}}); err != nil {
		t.Fatal(err)
	}
	copy(x.buf, "wrong key!")
	copy(x.buf[64:], "right key")
	send := func(id uint64, off, n int, qkey uint32) {
		if err := x.qp.PostSend([]verbs.SendWR{{ID: id, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
			SGL: x.sge(off, n), AH: ah, RemoteQPN: y.qp.QPN(), RemoteQKey: qkey}}); err != nil {
			t.Fatal(err)
		}
		s.expect(t, x.scq, fmt.Sprintf("UD send with Q_Key %#x", qkey), []wcWant{{id: id, status: verbs.WCSuccess,
			op: verbs.WCSend, qpn: x.qp.QPN()}})
	}
	send(7, 0, 10, udQKey^0x10)
	s.quiet(t, y.rcq, "receive CQ after a datagram with a wrong Q_Key", 20*time.Millisecond)
	send(8, 64, 9, udQKey)
	s.expect(t, y.rcq, "datagram with the right Q_Key", []wcWant{{id: 1, status: verbs.WCSuccess, op: verbs.WCRecv,
		checkN: true, n: grhLen + 9, qpn: y.qp.QPN(), srcQP: x.qp.QPN(), grh: true}})
	if got := string(y.buf[grhLen : grhLen+9]); got != "right key" {
		t.Fatalf("the first receive holds %q", got)
	}
	s.quiet(t, y.rcq, "receive CQ", 10*time.Millisecond)
	if !bytes.Equal(y.buf[256:512], bytes.Repeat([]byte{0xee}, 256)) {
		t.Fatalf("the second receive buffer was written: %x", y.buf[256:256+64])
	}
}
