package soft

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/verbs"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// TestMalformedInput feeds a device random frames: garbage, truncated
// frames, bad ICRCs, and well-formed RoCE packets with random opcodes, PSNs,
// keys and lengths aimed at its RC and UD QPs. Nothing may panic, bad
// frames are counted, and the device keeps working (it still answers ARP).
func TestMalformedInput(t *testing.T) {
	l := ring.NewLink("malformed", ring.Config{RingSize: 4096})
	d, err := NewDevice("softmal", l.B(), Config{GIDs: []netip.Addr{netip.MustParseAddr("10.7.0.2")}, PoolSize: 1024})
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	must(t, d.Start(ctx))
	defer d.Close()
	peerIP := netip.MustParseAddr("10.7.0.1")
	d.AddNeighbor(peerIP, header.MAC{2, 0, 0, 0, 0, 1})

	rc := newEnd(t, d, verbs.QPTypeRC, 1<<16, false)
	must(t, rc.qp.Modify(&verbs.QPAttr{State: verbs.QPSInit, Port: 1, AccessFlags: defaultRC().access},
		verbs.AttrState|verbs.AttrPKeyIndex|verbs.AttrPort|verbs.AttrAccessFlags))
	must(t, rc.qp.PostRecv([]verbs.RecvWR{{SGL: []verbs.SGE{{Addr: rc.mr.Addr(), Length: 100, LKey: rc.mr.LKey()}}}}))
	must(t, rc.qp.Modify(&verbs.QPAttr{State: verbs.QPSRTR, PathMTU: verbs.MTU1024, DestQPN: 0x99, RQPSN: 1000,
		MaxDestRdAtomic: 2, MinRNRTimer: 1, AH: verbs.AHAttr{DGID: verbs.GIDFromAddr(peerIP)}},
		verbs.AttrState|verbs.AttrAV|verbs.AttrPathMTU|verbs.AttrDestQPN|verbs.AttrRQPSN|verbs.AttrMaxDestRdAtomic|verbs.AttrMinRNRTimer))
	must(t, rc.qp.Modify(&verbs.QPAttr{State: verbs.QPSRTS, Timeout: 8, RetryCnt: 1, RNRRetry: 1, SQPSN: 5000, MaxRdAtomic: 2},
		verbs.AttrState|verbs.AttrTimeout|verbs.AttrRetryCnt|verbs.AttrRNRRetry|verbs.AttrSQPSN|verbs.AttrMaxQPRdAtomic))
	ud := newEnd(t, d, verbs.QPTypeUD, 1<<12, false)
	ud.udUp(t)
	must(t, ud.qp.PostRecv([]verbs.RecvWR{{SGL: []verbs.SGE{{Addr: ud.mr.Addr(), Length: 100, LKey: ud.mr.LKey()}}}}))

	pool, err := dpdk.NewPool("mal", 512, 0)
	must(t, err)
	r := rand.New(rand.NewPCG(1, 2))
	tx := l.A()
	var rx [64]*dpdk.Packet
	drain := func() {
		for n := tx.RxBurst(0, rx[:]); n > 0; n = tx.RxBurst(0, rx[:]) {
			dpdk.FreeBulk(rx[:n])
		}
	}
	b := roce.Builder{SrcMAC: header.MAC{2, 0, 0, 0, 0, 1}, DstMAC: d.MAC(), SrcGID: roce.GIDFromAddr(peerIP),
		DstGID: roce.GIDFromAddr(netip.MustParseAddr("10.7.0.2")), HopLimit: 64, PKey: 0xffff}
	payload := make([]byte, 2048)
	for i := 0; i < 20000; i++ {
		pkt := pool.Get()
		if pkt == nil {
			drain()
			time.Sleep(100 * time.Microsecond)
			continue
		}
		buf := pkt.Buffer()
		switch r.IntN(5) {
		case 0: // garbage
			n := r.IntN(200)
			for j := 0; j < n; j++ {
				buf[j] = byte(r.Uint32())
			}
			_ = pkt.SetLen(n)
		default:
			b.Opcode = roce.Opcode(r.IntN(0x30))
			if r.IntN(4) == 0 {
				b.Opcode = []roce.Opcode{roce.UDSendOnly, roce.UDSendOnlyImm, roce.OpCNP, 0x70}[r.IntN(4)]
			}
			b.DestQP = []uint32{rc.qp.QPN(), ud.qp.QPN(), r.Uint32() & 0xffffff}[r.IntN(3)]
			b.PSN = roce.AddPSN(1000, r.IntN(20)-5)
			b.VA = rc.mr.Addr() + uint64(r.IntN(1<<17)) - 1<<16
			b.RKey = []uint32{rc.mr.RKey(), r.Uint32()}[r.IntN(2)]
			b.DMALen = uint32(r.IntN(5000))
			b.QKey = []uint32{testQKey, r.Uint32()}[r.IntN(2)]
			b.Syndrome = roce.Syndrome(r.Uint32())
			b.AckReq = r.IntN(2) == 0
			pl := []int{0, 4, 1024, 1023, 2048}[r.IntN(5)]
			n, err := b.Build(buf, payload[:pl])
			if err != nil {
				pkt.Free()
				continue
			}
			switch r.IntN(6) {
			case 0:
				n = r.IntN(n) // truncated
			case 1:
				buf[r.IntN(n)] ^= 1 << r.IntN(8) // corrupted
			}
			_ = pkt.SetLen(n)
		}
		if tx.TxBurst(0, []*dpdk.Packet{pkt}) == 0 {
			pkt.Free()
		}
		if i%256 == 0 {
			drain()
		}
	}
	// The device must still be alive: it answers an ARP request.
	deadline := time.Now().Add(5 * time.Second)
	answered := false
	for !answered && time.Now().Before(deadline) {
		pkt := pool.Get()
		if pkt == nil {
			drain()
			continue
		}
		n, _ := header.WriteARPRequest(pkt.Buffer(), header.MAC{2, 0, 0, 0, 0, 1}, [4]byte{10, 7, 0, 1}, [4]byte{10, 7, 0, 2})
		_ = pkt.SetLen(n)
		if tx.TxBurst(0, []*dpdk.Packet{pkt}) == 0 {
			pkt.Free()
		}
		time.Sleep(time.Millisecond)
		for k := tx.RxBurst(0, rx[:]); k > 0; k = tx.RxBurst(0, rx[:]) {
			for _, p := range rx[:k] {
				var pn header.Parsed
				if header.Decode(p.Data(), &pn) == nil && pn.L3Proto == header.EtherTypeARP && pn.ARP(p.Data()).Op() == header.ARPOpReply {
					answered = true
				}
			}
			dpdk.FreeBulk(rx[:k])
		}
	}
	if !answered {
		t.Fatal("device stopped answering ARP after malformed input")
	}
	c := d.Counters()
	if c["rx_discards"] == 0 || c["rx_icrc_encapsulated"] == 0 || c["rx_wrong_qp"] == 0 {
		t.Fatalf("counters %v", nonzero(c))
	}
	t.Logf("counters %v", nonzero(c))
}
