package soft

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/verbs"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// connectUC brings two UC ends to RTS with the attributes UC takes.
func connectUC(t testing.TB, x, y *end, mtu verbs.MTU) {
	t.Helper()
	up := func(e, peer *end, sq, rq uint32) {
		must(t, e.qp.Modify(&verbs.QPAttr{State: verbs.QPSInit, Port: 1, AccessFlags: verbs.AccessLocalWrite | verbs.AccessRemoteWrite},
			verbs.AttrState|verbs.AttrPKeyIndex|verbs.AttrPort|verbs.AttrAccessFlags))
		dgid, _ := peer.dev.GID(peer.gidx)
		must(t, e.qp.Modify(&verbs.QPAttr{State: verbs.QPSRTR, PathMTU: mtu, DestQPN: peer.qp.QPN(), RQPSN: rq,
			AH: verbs.AHAttr{DGID: dgid, SGIDIndex: e.gidx, Port: 1}},
			verbs.AttrState|verbs.AttrAV|verbs.AttrPathMTU|verbs.AttrDestQPN|verbs.AttrRQPSN))
		must(t, e.qp.Modify(&verbs.QPAttr{State: verbs.QPSRTS, SQPSN: sq}, verbs.AttrState|verbs.AttrSQPSN))
	}
	up(x, y, 0xfffffe, 7)
	up(y, x, 7, 0xfffffe)
}

func ucPair(t *testing.T) (*end, *end, [2]*lossyPort) {
	var ports [2]*lossyPort
	p := newPair(t, Config{}, Config{}, func(side int, pt dpdk.Port) dpdk.Port {
		ports[side] = &lossyPort{Port: pt}
		return ports[side]
	})
	x := newEnd(t, p.a, verbs.QPTypeUC, 1<<20, false)
	y := newEnd(t, p.b, verbs.QPTypeUC, 1<<20, false)
	connectUC(t, x, y, verbs.MTU1024)
	return x, y, ports
}

func recvWR(e *end, id uint64, off, n int) verbs.RecvWR {
	return verbs.RecvWR{ID: id, SGL: []verbs.SGE{{Addr: e.mr.Addr() + uint64(off), Length: uint32(n), LKey: e.mr.LKey()}}}
}

func sendWR(e *end, id uint64, op verbs.WROpcode, off, n int, imm uint32) verbs.SendWR {
	return verbs.SendWR{ID: id, Opcode: op, Flags: verbs.SendSignaled, Imm: imm,
		SGL: []verbs.SGE{{Addr: e.mr.Addr() + uint64(off), Length: uint32(n), LKey: e.mr.LKey()}}}
}

// TestUC sends multi-packet SENDs and WRITEs with and without immediate
// over UC: data lands, completions carry the right opcodes, lengths and
// immediates, and the packets are UC opcodes with consecutive PSNs across
// the 24-bit wrap.
func TestUC(t *testing.T) {
	x, y, ports := ucPair(t)
	var ops []roce.Opcode
	var psns []uint32
	ports[0].setDecide(func(i int, p *roce.Packet, _ []byte) fate {
		ops = append(ops, p.Opcode)
		psns = append(psns, p.PSN)
		return pass
	})
	fill(x.buf[:1<<19], 3)
	must(t, y.qp.PostRecv([]verbs.RecvWR{recvWR(y, 10, 0, 8192), recvWR(y, 11, 8192, 64), recvWR(y, 12, 0, 0)}))
	w := write(x, y, 3, 65536, 5000)
	wi := write(x, y, 4, 131072, 3000)
	wi.Opcode, wi.Imm = verbs.WRRDMAWriteWithImm, 0xabcd
	must(t, x.qp.PostSend([]verbs.SendWR{
		sendWR(x, 1, verbs.WRSend, 0, 2500, 0),
		sendWR(x, 2, verbs.WRSendWithImm, 2500, 64, 0x1234),
		w, wi,
	}))
	swc := waitWC(t, x.scq, 4, 5*time.Second)
	for i, wc := range swc {
		if wc.Status != verbs.WCSuccess || wc.ID != uint64(i+1) {
			t.Fatalf("send completion %d: %+v", i, wc)
		}
	}
	rwc := waitWC(t, y.rcq, 3, 5*time.Second)
	want := []struct {
		id   uint64
		op   verbs.WCOpcode
		n    uint32
		imm  uint32
		flag bool
	}{{10, verbs.WCRecv, 2500, 0, false}, {11, verbs.WCRecv, 64, 0x1234, true}, {12, verbs.WCRecvRDMAWithImm, 3000, 0xabcd, true}}
	for i, wc := range rwc {
		e := want[i]
		if wc.Status != verbs.WCSuccess || wc.ID != e.id || wc.Opcode != e.op || wc.ByteLen != e.n ||
			wc.Imm != e.imm || (wc.Flags&verbs.WCWithImm != 0) != e.flag || wc.SrcQP != x.qp.QPN() {
			t.Fatalf("receive completion %d: %+v, want %+v", i, wc, e)
		}
	}
	if !bytes.Equal(y.buf[:2500], x.buf[:2500]) || !bytes.Equal(y.buf[8192:8192+64], x.buf[2500:2564]) ||
		!bytes.Equal(y.buf[65536:65536+5000], x.buf[65536:65536+5000]) ||
		!bytes.Equal(y.buf[131072:131072+3000], x.buf[131072:131072+3000]) {
		t.Fatal("data differs")
	}
	wantOps := []roce.Opcode{roce.UCSendFirst, roce.UCSendMiddle, roce.UCSendLast, roce.UCSendOnlyImm,
		roce.UCWriteFirst, roce.UCWriteMiddle, roce.UCWriteMiddle, roce.UCWriteMiddle, roce.UCWriteLast,
		roce.UCWriteFirst, roce.UCWriteMiddle, roce.UCWriteLastImm}
	if len(ops) != len(wantOps) {
		t.Fatalf("opcodes %v, want %v", ops, wantOps)
	}
	for i := range ops {
		if ops[i] != wantOps[i] || psns[i] != roce.AddPSN(0xfffffe, i) {
			t.Fatalf("packet %d: %v psn %#x, want %v psn %#x", i, ops[i], psns[i], wantOps[i], roce.AddPSN(0xfffffe, i))
		}
	}
}

// TestUCLoss drops one middle packet of the first of three SENDs: the
// requester completes all three (UC has no acknowledgements), the responder
// discards the damaged message without consuming a receive request, so the
// second and third messages land in the first and second receive requests.
func TestUCLoss(t *testing.T) {
	x, y, ports := ucPair(t)
	dropped := false
	ports[0].setDecide(func(i int, p *roce.Packet, _ []byte) fate {
		if !dropped && p.Opcode == roce.UCSendMiddle {
			dropped = true
			return drop
		}
		return pass
	})
	fill(x.buf[:3*4096], 9)
	must(t, y.qp.PostRecv([]verbs.RecvWR{recvWR(y, 1, 0, 4096), recvWR(y, 2, 4096, 4096), recvWR(y, 3, 8192, 4096)}))
	must(t, x.qp.PostSend([]verbs.SendWR{sendWR(x, 1, verbs.WRSend, 0, 3000, 0),
		sendWR(x, 2, verbs.WRSend, 4096, 3000, 0), sendWR(x, 3, verbs.WRSend, 8192, 1000, 0)}))
	for _, wc := range waitWC(t, x.scq, 3, 5*time.Second) {
		if wc.Status != verbs.WCSuccess {
			t.Fatalf("send completion %+v", wc)
		}
	}
	rwc := waitWC(t, y.rcq, 2, 5*time.Second)
	if rwc[0].ID != 1 || rwc[0].ByteLen != 3000 || rwc[1].ID != 2 || rwc[1].ByteLen != 1000 {
		t.Fatalf("receive completions %+v", rwc)
	}
	if !bytes.Equal(y.buf[:3000], x.buf[4096:4096+3000]) || !bytes.Equal(y.buf[4096:5096], x.buf[8192:9192]) {
		t.Fatal("the surviving messages did not land in the first two receive requests")
	}
	noWC(t, y.rcq, 20*time.Millisecond)
	if n := y.dev.Counter(CntOutOfSequence); n != 1 {
		t.Fatalf("out_of_sequence %d, want 1", n)
	}
}

// TestUCErrors: READ and atomics are rejected at post on UC; a WRITE with a
// bad R_Key is dropped silently by the responder (UC cannot NAK) while the
// requester completes it, and the next message still arrives.
func TestUCErrors(t *testing.T) {
	x, y, _ := ucPair(t)
	rd := write(x, y, 1, 0, 64)
	rd.Opcode = verbs.WRRDMARead
	var pe *verbs.PostError
	if err := x.qp.PostSend([]verbs.SendWR{rd}); !errors.As(err, &pe) || !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Fatalf("READ on UC: %v", err)
	}
	at := verbs.SendWR{ID: 2, Opcode: verbs.WRAtomicFetchAndAdd, SGL: []verbs.SGE{{Addr: x.mr.Addr(), Length: 8, LKey: x.mr.LKey()}},
		RemoteAddr: y.mr.Addr(), RKey: y.mr.RKey()}
	if err := x.qp.PostSend([]verbs.SendWR{at}); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Fatalf("atomic on UC: %v", err)
	}
	fill(x.buf[:4096], 1)
	bad := write(x, y, 3, 0, 2048)
	bad.RKey ^= 0x5a5a00
	good := write(x, y, 4, 2048, 2048)
	// A SEND behind the WRITEs: its receive completion says the
	// responder is past them (and orders their memory writes before
	// this goroutine's reads, which polling the memory would not).
	must(t, y.qp.PostRecv([]verbs.RecvWR{recvWR(y, 20, 8192, 64)}))
	must(t, x.qp.PostSend([]verbs.SendWR{bad, good, sendWR(x, 5, verbs.WRSend, 0, 16, 0)}))
	for _, wc := range waitWC(t, x.scq, 3, 5*time.Second) {
		if wc.Status != verbs.WCSuccess {
			t.Fatalf("UC requester completion %+v", wc)
		}
	}
	if wc := waitWC(t, y.rcq, 1, 5*time.Second)[0]; wc.Status != verbs.WCSuccess || wc.ID != 20 {
		t.Fatalf("receive completion of the SEND behind the WRITEs: %+v", wc)
	}
	if !bytes.Equal(y.buf[2048:4096], x.buf[2048:4096]) {
		t.Fatal("the WRITE after a bad one did not land")
	}
	if !bytes.Equal(y.buf[:2048], make([]byte, 2048)) {
		t.Fatal("a WRITE with a bad R_Key changed memory")
	}
	if a, err := y.qp.Query(); err != nil || a.State != verbs.QPSRTS {
		t.Fatalf("responder state %v %v", a.State, err)
	}
}
