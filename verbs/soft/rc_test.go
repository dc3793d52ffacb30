package soft

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/verbs"
)

func fill(b []byte, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 7))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
}

// TestRCBasic runs one of each operation over an RC connection.
func TestRCBasic(t *testing.T) {
	p := newPair(t, Config{}, Config{}, nil)
	x := newEnd(t, p.a, verbs.QPTypeRC, 1<<16, false)
	y := newEnd(t, p.b, verbs.QPTypeRC, 1<<16, false)
	connect(t, x, y, defaultRC())
	fill(x.buf, 1)

	// SEND with immediate, 3000 bytes over a 1024 MTU (first/middle/last).
	must(t, y.qp.PostRecv([]verbs.RecvWR{{ID: 9, SGL: []verbs.SGE{{Addr: y.mr.Addr(), Length: 4096, LKey: y.mr.LKey()}}}}))
	must(t, x.qp.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.WRSendWithImm, Imm: 77, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{{Addr: x.mr.Addr(), Length: 3000, LKey: x.mr.LKey()}}}}))
	if wc := waitWC(t, x.scq, 1, 5*time.Second)[0]; wc.Status != verbs.WCSuccess || wc.Opcode != verbs.WCSend || wc.ID != 1 {
		t.Fatalf("send wc %+v", wc)
	}
	if wc := waitWC(t, y.rcq, 1, 5*time.Second)[0]; wc.Status != verbs.WCSuccess || wc.ByteLen != 3000 || wc.Imm != 77 || wc.Opcode != verbs.WCRecv {
		t.Fatalf("recv wc %+v", wc)
	}
	if !bytes.Equal(y.buf[:3000], x.buf[:3000]) {
		t.Fatal("SEND payload differs")
	}

	// WRITE of 5000 bytes into y at offset 8192.
	must(t, x.qp.PostSend([]verbs.SendWR{{ID: 2, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGL:        []verbs.SGE{{Addr: x.mr.Addr() + 100, Length: 5000, LKey: x.mr.LKey()}},
		RemoteAddr: y.mr.Addr() + 8192, RKey: y.mr.RKey()}}))
	if wc := waitWC(t, x.scq, 1, 5*time.Second)[0]; wc.Status != verbs.WCSuccess || wc.Opcode != verbs.WCRDMAWrite {
		t.Fatalf("write wc %+v", wc)
	}
	if !bytes.Equal(y.buf[8192:8192+5000], x.buf[100:5100]) {
		t.Fatal("WRITE data differs")
	}

	// READ 4100 bytes back from y into x at 20000.
	fill(y.buf[30000:34100], 2)
	must(t, x.qp.PostSend([]verbs.SendWR{{ID: 3, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
		SGL:        []verbs.SGE{{Addr: x.mr.Addr() + 20000, Length: 4100, LKey: x.mr.LKey()}},
		RemoteAddr: y.mr.Addr() + 30000, RKey: y.mr.RKey()}}))
	if wc := waitWC(t, x.scq, 1, 5*time.Second)[0]; wc.Status != verbs.WCSuccess || wc.Opcode != verbs.WCRDMARead || wc.ByteLen != 4100 {
		t.Fatalf("read wc %+v", wc)
	}
	if !bytes.Equal(x.buf[20000:24100], y.buf[30000:34100]) {
		t.Fatal("READ data differs")
	}

	// FETCH_ADD and CMP_SWAP.
	binary.NativeEndian.PutUint64(y.buf[40000:], 1000)
	must(t, x.qp.PostSend([]verbs.SendWR{
		{ID: 4, Opcode: verbs.WRAtomicFetchAndAdd, Flags: verbs.SendSignaled, CompareAdd: 5,
			SGL: []verbs.SGE{{Addr: x.mr.Addr() + 40000, Length: 8, LKey: x.mr.LKey()}}, RemoteAddr: y.mr.Addr() + 40000, RKey: y.mr.RKey()},
		{ID: 5, Opcode: verbs.WRAtomicCmpAndSwp, Flags: verbs.SendSignaled, CompareAdd: 1005, Swap: 42,
			SGL: []verbs.SGE{{Addr: x.mr.Addr() + 40008, Length: 8, LKey: x.mr.LKey()}}, RemoteAddr: y.mr.Addr() + 40000, RKey: y.mr.RKey()},
	}))
	wcs := waitWC(t, x.scq, 2, 5*time.Second)
	if wcs[0].Status != verbs.WCSuccess || wcs[0].Opcode != verbs.WCFetchAdd || wcs[1].Opcode != verbs.WCCompSwap {
		t.Fatalf("atomic wcs %+v", wcs)
	}
	if got := binary.NativeEndian.Uint64(x.buf[40000:]); got != 1000 {
		t.Fatalf("fetch_add returned %d", got)
	}
	if got := binary.NativeEndian.Uint64(x.buf[40008:]); got != 1005 {
		t.Fatalf("cmp_swap returned %d", got)
	}
	if got := binary.NativeEndian.Uint64(y.buf[40000:]); got != 42 {
		t.Fatalf("remote word %d", got)
	}
}
