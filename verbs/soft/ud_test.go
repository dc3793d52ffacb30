package soft

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/verbs"
)

// TestUDPing sends UD probes both ways over a ring link, with ARP resolving
// the peer, and checks payloads, source QPs, immediates, the GRH flag and
// that the sender's completion timestamp precedes the receiver's.
func TestUDPing(t *testing.T) {
	p := newPair(t, Config{}, Config{}, nil)
	x := newEnd(t, p.a, verbs.QPTypeUD, 4096, true)
	y := newEnd(t, p.b, verbs.QPTypeUD, 4096, true)
	x.udUp(t)
	y.udUp(t)
	gb, _ := p.b.GID(0)
	ah, err := x.pd.CreateAH(verbs.AHAttr{DGID: gb, FlowLabel: 0x12345, Port: 1})
	must(t, err)

	const n = 20
	recvs := make([]verbs.RecvWR, n)
	for i := range recvs {
		recvs[i] = verbs.RecvWR{ID: uint64(1000 + i), SGL: []verbs.SGE{{Addr: y.mr.Addr() + uint64(i*100), Length: 100, LKey: y.mr.LKey()}}}
	}
	must(t, y.qp.PostRecv(recvs))
	for i := 0; i < n; i++ {
		copy(x.buf[i*50:], bytes.Repeat([]byte{byte(i + 1)}, 50))
		wr := verbs.SendWR{ID: uint64(i), Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{{Addr: x.mr.Addr() + uint64(i*50), Length: 50, LKey: x.mr.LKey()}},
			AH:  ah, RemoteQPN: y.qp.QPN(), RemoteQKey: testQKey}
		if i%2 == 1 {
			wr.Opcode, wr.Imm = verbs.WRSendWithImm, 0xdead0000+uint32(i)
		}
		must(t, x.qp.PostSend([]verbs.SendWR{wr}))
	}
	swc := waitWC(t, x.scq, n, 5*time.Second)
	rwc := waitWC(t, y.rcq, n, 5*time.Second)
	for i := 0; i < n; i++ {
		s, r := swc[i], rwc[i]
		if s.Status != verbs.WCSuccess || s.ID != uint64(i) || s.Opcode != verbs.WCSend {
			t.Fatalf("send wc %d: %+v", i, s)
		}
		if r.Status != verbs.WCSuccess || r.ID != uint64(1000+i) || r.ByteLen != 40+50 || r.SrcQP != x.qp.QPN() ||
			r.Flags&verbs.WCWithGRH == 0 || r.QPN != y.qp.QPN() {
			t.Fatalf("recv wc %d: %+v", i, r)
		}
		if (i%2 == 1) != (r.Flags&verbs.WCWithImm != 0) || (i%2 == 1 && r.Imm != 0xdead0000+uint32(i)) {
			t.Fatalf("recv wc %d immediate: %+v", i, r)
		}
		if s.Timestamp == 0 || r.Timestamp == 0 || s.Timestamp > r.Timestamp {
			t.Fatalf("timestamps: send %d recv %d", s.Timestamp, r.Timestamp)
		}
		got := y.buf[i*100+40 : i*100+90]
		if !bytes.Equal(got, bytes.Repeat([]byte{byte(i + 1)}, 50)) {
			t.Fatalf("payload %d: %x", i, got)
		}
		// IPv4 RoCE: 20 zero bytes then the IPv4 header in the GRH area.
		grh := y.buf[i*100 : i*100+40]
		if !bytes.Equal(grh[:20], make([]byte, 20)) || grh[20]>>4 != 4 {
			t.Fatalf("GRH area %x", grh)
		}
	}
	if p.a.Counter(CntARPRequestsSent) == 0 || p.b.Counter(CntARPRepliesSent) == 0 {
		t.Fatalf("ARP was not used: %v / %v", p.a.Counters(), p.b.Counters())
	}
}

// TestUDQKeyAndNoRecv checks that a wrong Q_Key and a missing receive drop
// the datagram (counted), while the sender still completes.
func TestUDQKeyAndNoRecv(t *testing.T) {
	p := newPair(t, Config{}, Config{}, nil)
	staticNeighbors(p)
	x := newEnd(t, p.a, verbs.QPTypeUD, 4096, false)
	y := newEnd(t, p.b, verbs.QPTypeUD, 4096, false)
	x.udUp(t)
	y.udUp(t)
	gb, _ := p.b.GID(0)
	ah, err := x.pd.CreateAH(verbs.AHAttr{DGID: gb})
	must(t, err)
	send := func(qkey uint32) {
		must(t, x.qp.PostSend([]verbs.SendWR{{ID: 7, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{{Addr: x.mr.Addr(), Length: 8, LKey: x.mr.LKey()}}, AH: ah,
			RemoteQPN: y.qp.QPN(), RemoteQKey: qkey}}))
		waitWC(t, x.scq, 1, 5*time.Second)
	}
	send(testQKey) // no receive posted
	send(0x999)    // wrong Q_Key
	deadline := time.Now().Add(5 * time.Second)
	for p.b.Counter(CntOutOfBuffer) != 1 || p.b.Counter(CntRxQKeyViolation) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("counters %v", p.b.Counters())
		}
		time.Sleep(time.Millisecond)
	}
	noWC(t, y.rcq, 10*time.Millisecond)
	if p.a.Counter(CntARPRequestsSent) != 0 {
		t.Fatal("ARP used despite static neighbours")
	}
}

// TestUDIPv6MultiGID uses the second GID (IPv6) of each device with static
// neighbours and checks the GRH area carries the IPv6 header.
func TestUDIPv6MultiGID(t *testing.T) {
	ca := Config{GIDs: []netip.Addr{netip.MustParseAddr("10.1.0.1"), netip.MustParseAddr("fd00::1")}}
	cb := Config{GIDs: []netip.Addr{netip.MustParseAddr("10.1.0.2"), netip.MustParseAddr("fd00::2")}}
	p := newPair(t, ca, cb, nil)
	staticNeighbors(p)
	x := newEnd(t, p.a, verbs.QPTypeUD, 4096, false)
	y := newEnd(t, p.b, verbs.QPTypeUD, 4096, false)
	x.udUp(t)
	y.udUp(t)
	gb, _ := p.b.GID(1)
	ah, err := x.pd.CreateAH(verbs.AHAttr{DGID: gb, SGIDIndex: 1, FlowLabel: 0xabcde})
	must(t, err)
	must(t, y.qp.PostRecv([]verbs.RecvWR{{ID: 1, SGL: []verbs.SGE{{Addr: y.mr.Addr(), Length: 200, LKey: y.mr.LKey()}}}}))
	copy(x.buf, "hello over ipv6")
	must(t, x.qp.PostSend([]verbs.SendWR{{ID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled | verbs.SendInline,
		SGL: []verbs.SGE{{Addr: x.mr.Addr(), Length: 15, LKey: x.mr.LKey()}}, AH: ah, RemoteQPN: y.qp.QPN(),
		RemoteQKey: testQKey}}))
	waitWC(t, x.scq, 1, 5*time.Second)
	r := waitWC(t, y.rcq, 1, 5*time.Second)[0]
	if r.Status != verbs.WCSuccess || r.ByteLen != 55 || string(y.buf[40:55]) != "hello over ipv6" {
		t.Fatalf("wc %+v payload %q", r, y.buf[40:55])
	}
	ip := header.IPv6(y.buf[:40])
	if ip.Version() != 6 || ip.FlowLabel() != 0xabcde {
		t.Fatalf("GRH %x", y.buf[:40])
	}
	// An AH mixing an IPv4 source with an IPv6 destination is refused.
	if _, err := x.pd.CreateAH(verbs.AHAttr{DGID: gb, SGIDIndex: 0}); err == nil {
		t.Fatal("mixed-family AH accepted")
	}
}

// TestUDSmallBuffers: a device sized for probing (MaxMTU 256, a pool of 64
// buffers) makes its own pool's buffers that small, reports the MTU, and
// carries many more UD probes than it has buffers.
func TestUDSmallBuffers(t *testing.T) {
	small := Config{MaxMTU: verbs.MTU256, PoolSize: 64}
	p := newPair(t, small, small, nil)
	if dr := p.a.pool.DataRoom(); dr != dpdk.Headroom+256+256 {
		t.Fatalf("buffers of %d bytes for a 256-byte MTU", dr)
	}
	if pa, _ := p.a.QueryPort(1); pa.ActiveMTU != verbs.MTU256 {
		t.Fatalf("active MTU %v", pa.ActiveMTU)
	}
	x := newEnd(t, p.a, verbs.QPTypeUD, 4096, true)
	y := newEnd(t, p.b, verbs.QPTypeUD, 4096, true)
	x.udUp(t)
	y.udUp(t)
	gb, _ := p.b.GID(0)
	ah, err := x.pd.CreateAH(verbs.AHAttr{DGID: gb, Port: 1})
	must(t, err)
	const rounds, n = 10, 20
	for r := range rounds {
		recvs := make([]verbs.RecvWR, n)
		for i := range recvs {
			recvs[i] = verbs.RecvWR{ID: uint64(i), SGL: []verbs.SGE{{Addr: y.mr.Addr() + uint64(i*100), Length: 100, LKey: y.mr.LKey()}}}
		}
		must(t, y.qp.PostRecv(recvs))
		for i := range n {
			must(t, x.qp.PostSend([]verbs.SendWR{{ID: uint64(i), Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
				SGL: []verbs.SGE{{Addr: x.mr.Addr() + uint64(i*50), Length: 50, LKey: x.mr.LKey()}},
				AH:  ah, RemoteQPN: y.qp.QPN(), RemoteQKey: testQKey}}))
		}
		waitWC(t, x.scq, n, 5*time.Second)
		for i, wc := range waitWC(t, y.rcq, n, 5*time.Second) {
			if wc.Status != verbs.WCSuccess || wc.ByteLen != 40+50 {
				t.Fatalf("round %d: recv wc %d: %+v", r, i, wc)
			}
		}
	}
}
