package soft

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/verbs"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// FuzzInput drives the device's receive path with packets from a
// hostile peer: every opcode, PSN, key, address, length and payload the
// fuzzer picks, aimed at a fresh RC QP in RTS (and a UD QP), built with a
// valid ICRC so they get past the integrity check to the responder and
// requester logic; some are cut short. Nothing may panic, and the device
// keeps its QP's memory inside the registered region.
func FuzzInput(f *testing.F) {
	id := testSeq.Add(1)
	l := ring.NewLink(fmt.Sprintf("fuzzsoft%d", id), ring.Config{RingSize: 4096})
	d, err := NewDevice(fmt.Sprintf("softfuzz%d", id), l.B(), Config{GIDs: []netip.Addr{netip.MustParseAddr("10.7.0.2")}, PoolSize: 1024})
	must(f, err)
	f.Cleanup(func() { d.Close() })
	peerIP := netip.MustParseAddr("10.7.0.1")
	d.AddNeighbor(peerIP, header.MAC{2, 0, 0, 0, 0, 1})
	rc := newEnd(f, d, verbs.QPTypeRC, 1<<16, false)
	ud := newEnd(f, d, verbs.QPTypeUD, 1<<12, false)
	ud.udUp(f)
	pool, err := dpdk.NewPool(fmt.Sprintf("fuzzsoftp%d", id), 256, 0)
	must(f, err)
	f.Cleanup(func() { pool.Close() })
	tx := l.A()
	var rx [64]*dpdk.Packet
	var wcs [64]verbs.WC
	drain := func() {
		for n := tx.RxBurst(0, rx[:]); n > 0; n = tx.RxBurst(0, rx[:]) {
			dpdk.FreeBulk(rx[:n])
		}
		for _, cq := range []verbs.CQ{rc.scq, rc.rcq, ud.scq, ud.rcq} {
			for n, _ := cq.Poll(wcs[:]); n > 0; n, _ = cq.Poll(wcs[:]) {
			}
		}
	}
	f.Add(uint8(roce.RCWriteOnly), uint8(0), uint16(0), uint32(0), true, uint32(4), uint8(0), []byte("abcd"), uint16(0))
	f.Add(uint8(roce.RCFetchAdd), uint8(0), uint16(0), uint32(8), true, uint32(8), uint8(0), []byte{}, uint16(0))
	f.Add(uint8(roce.RCReadRequest), uint8(0), uint16(1), uint32(65500), true, uint32(4000), uint8(0), []byte{}, uint16(0))
	f.Add(uint8(roce.RCAck), uint8(0), uint16(3), uint32(0), false, uint32(0), uint8(0x60), []byte{}, uint16(0))
	f.Add(uint8(roce.UDSendOnly), uint8(1), uint16(0), uint32(0), false, uint32(0), uint8(0), []byte("hello"), uint16(0))
	f.Add(uint8(roce.RCSendFirst), uint8(0), uint16(0), uint32(0), false, uint32(0), uint8(0), make([]byte, 1024), uint16(30))
	f.Fuzz(func(t *testing.T, op, qpSel uint8, psnOff uint16, vaOff uint32, ownKey bool, dmaLen uint32, syn uint8, payload []byte, cut uint16) {
		if len(payload) > 4096 {
			payload = payload[:4096]
		}
		// A fresh RC QP, so an input means the same whatever came before.
		qp, err := rc.pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: rc.scq, RecvCQ: rc.rcq,
			Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
		must(t, err)
		defer func() { must(t, qp.Destroy()); drain() }()
		must(t, qp.Modify(&verbs.QPAttr{State: verbs.QPSInit, Port: 1, AccessFlags: defaultRC().access},
			verbs.AttrState|verbs.AttrPKeyIndex|verbs.AttrPort|verbs.AttrAccessFlags))
		must(t, qp.PostRecv([]verbs.RecvWR{{SGL: []verbs.SGE{{Addr: rc.mr.Addr(), Length: 100, LKey: rc.mr.LKey()}}}}))
		must(t, qp.Modify(&verbs.QPAttr{State: verbs.QPSRTR, PathMTU: verbs.MTU1024, DestQPN: 0x99, RQPSN: 1000,
			MaxDestRdAtomic: 2, MinRNRTimer: 1, AH: verbs.AHAttr{DGID: verbs.GIDFromAddr(peerIP)}},
			verbs.AttrState|verbs.AttrAV|verbs.AttrPathMTU|verbs.AttrDestQPN|verbs.AttrRQPSN|verbs.AttrMaxDestRdAtomic|verbs.AttrMinRNRTimer))
		must(t, qp.Modify(&verbs.QPAttr{State: verbs.QPSRTS, Timeout: 8, RetryCnt: 1, RNRRetry: 1, SQPSN: 5000, MaxRdAtomic: 2},
			verbs.AttrState|verbs.AttrTimeout|verbs.AttrRetryCnt|verbs.AttrRNRRetry|verbs.AttrSQPSN|verbs.AttrMaxQPRdAtomic))
		// Something of its own outstanding, so ACKs and read responses
		// meet a requester with work.
		_ = qp.PostSend([]verbs.SendWR{{Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, RemoteAddr: 0x1000, RKey: 0x1234,
			SGL: []verbs.SGE{{Addr: rc.mr.Addr(), Length: 64, LKey: rc.mr.LKey()}}}})
		d.Poll()
		drain()

		b := roce.Builder{SrcMAC: header.MAC{2, 0, 0, 0, 0, 1}, DstMAC: d.MAC(), SrcGID: roce.GIDFromAddr(peerIP),
			DstGID: roce.GIDFromAddr(netip.MustParseAddr("10.7.0.2")), HopLimit: 64, PKey: 0xffff}
		b.Opcode = roce.Opcode(op)
		b.DestQP = []uint32{qp.QPN(), ud.qp.QPN(), uint32(qpSel) << 8}[int(qpSel)%3]
		psnBase := uint32(1000)
		switch b.Opcode {
		case roce.RCAck, roce.RCAtomicAck, roce.RCReadResponseFirst, roce.RCReadResponseMiddle,
			roce.RCReadResponseLast, roce.RCReadResponseOnly:
			psnBase = 5000 // the requester's
		}
		b.PSN = roce.AddPSN(psnBase, int(int16(psnOff)))
		b.VA = rc.mr.Addr() + uint64(vaOff)
		b.RKey = uint32(qpSel)<<24 | vaOff&0xffffff
		if ownKey {
			b.RKey = rc.mr.RKey()
		}
		b.DMALen = dmaLen
		b.QKey = testQKey
		b.Syndrome = roce.Syndrome(syn)
		b.AckReq = syn&1 != 0
		pkt := pool.Get()
		if pkt == nil {
			t.Fatal("pool empty")
		}
		n, err := b.Build(pkt.Buffer(), payload)
		if err != nil {
			pkt.Free()
			return
		}
		if int(cut) < n && cut != 0 {
			n = int(cut)
		}
		_ = pkt.SetLen(n)
		if tx.TxBurst(0, []*dpdk.Packet{pkt}) == 0 {
			pkt.Free()
		}
		for range 4 {
			d.Poll()
		}
	})
}
