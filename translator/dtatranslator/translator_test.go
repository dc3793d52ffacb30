package dtatranslator

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/internal/dtamem"
	"github.com/rdma-appliance/appliance/internal/dtawire"
	"github.com/rdma-appliance/appliance/verbs"
	"github.com/rdma-appliance/appliance/verbs/roce"
	"github.com/rdma-appliance/appliance/verbs/soft"
)

// collectorBed is a soft-RNIC collector on one end of a ring link and the
// translator's port on the other.
type collectorBed struct {
	t    *testing.T
	port dpdk.Port // the translator's
	pool *dpdk.Pool
	mem  []byte
	mr   verbs.MR
	qp   verbs.QP
	regs dtamem.Regions
	conn *Conn
	drop func(i int) bool
	sent int
}

const (
	kwSlots = 1 << 16
	kiSlots = 1 << 10
)

func newCollectorBed(t *testing.T, psn uint32) *collectorBed {
	t.Helper()
	l := ring.NewLink(fmt.Sprintf("dta%p", t), ring.Config{RingSize: 4096})
	transIP, collIP := netip.MustParseAddr("10.9.0.100"), netip.MustParseAddr("10.9.0.1")
	dev, err := soft.NewDevice(fmt.Sprintf("dtacoll%p", t), l.B(), soft.Config{GIDs: []netip.Addr{collIP},
		Neighbors: map[netip.Addr]header.MAC{transIP: header.MAC(l.A().Info().MAC)}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := dev.Start(ctx); err != nil {
		t.Fatal(err)
	}
	pool, err := dpdk.NewPool(fmt.Sprintf("dtat%p", t), 8192, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close(); cancel(); l.A().Close(); l.B().Close(); pool.Close() })
	pd, _ := dev.AllocPD()
	cq, _ := dev.CreateCQ(verbs.CQAttr{CQE: 64})
	kwLen := kwSlots * dtamem.KeyWriteEntryLen(4)
	mem := make([]byte, kwLen+kiSlots*8)
	mr, err := pd.RegMR(mem, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteAtomic)
	if err != nil {
		t.Fatal(err)
	}
	qp, err := pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	const transQPN = 0x77
	steps := []struct {
		a verbs.QPAttr
		m verbs.AttrMask
	}{
		{verbs.QPAttr{State: verbs.QPSInit, Port: 1, AccessFlags: verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteAtomic},
			verbs.AttrState | verbs.AttrPKeyIndex | verbs.AttrPort | verbs.AttrAccessFlags},
		{verbs.QPAttr{State: verbs.QPSRTR, PathMTU: verbs.MTU1024, DestQPN: transQPN, RQPSN: psn, MaxDestRdAtomic: 16,
			MinRNRTimer: 1, AH: verbs.AHAttr{DGID: verbs.GIDFromAddr(transIP), Port: 1}},
			verbs.AttrState | verbs.AttrAV | verbs.AttrPathMTU | verbs.AttrDestQPN | verbs.AttrRQPSN | verbs.AttrMaxDestRdAtomic | verbs.AttrMinRNRTimer},
	}
	for _, s := range steps {
		if err := qp.Modify(&s.a, s.m); err != nil {
			t.Fatal(err)
		}
	}
	b := &collectorBed{t: t, port: l.A(), pool: pool, mem: mem, mr: mr, qp: qp,
		regs: dtamem.Regions{KeyWrite: &dtamem.KeyWriteRegion{Addr: mr.Addr(), RKey: mr.RKey(), Slots: kwSlots, DataWidth: 4},
			KeyIncrement: &dtamem.KeyIncrementRegion{Addr: mr.Addr() + uint64(kwLen), RKey: mr.RKey(), Slots: kiSlots}}}
	b.conn = NewConn(dtamem.Endpoint{MAC: header.MAC(l.A().Info().MAC), GID: roce.GIDFromAddr(transIP), QPN: transQPN},
		dtamem.Endpoint{MAC: header.MAC(l.B().Info().MAC), GID: roce.GIDFromAddr(collIP), QPN: qp.QPN()}, psn)
	return b
}

// emit sends a frame to the collector unless drop says to lose it.
func (b *collectorBed) emit(frame []byte) error {
	i := b.sent
	b.sent++
	if b.drop != nil && b.drop(i) {
		return nil
	}
	p := b.pool.Get()
	for deadline := time.Now().Add(5 * time.Second); p == nil; p = b.pool.Get() {
		// The collector frees what it received back into this pool.
		if time.Now().After(deadline) {
			return fmt.Errorf("pool empty")
		}
		time.Sleep(10 * time.Microsecond)
	}
	p.CopyFrom(frame)
	for deadline := time.Now().Add(5 * time.Second); b.port.TxBurst(0, []*dpdk.Packet{p}) == 0; {
		if time.Now().After(deadline) {
			return fmt.Errorf("ring full")
		}
		time.Sleep(10 * time.Microsecond)
	}
	return nil
}

// answers feeds the collector's ACKs and NAKs to the connection.
func (b *collectorBed) answers() (resyncs int) {
	var burst [32]*dpdk.Packet
	var p roce.Packet
	for n := b.port.RxBurst(0, burst[:]); n > 0; n = b.port.RxBurst(0, burst[:]) {
		for _, pkt := range burst[:n] {
			if roce.Parse(pkt.Data(), &p) == nil && p.AETH(pkt.Data()) != nil {
				if ok, _ := b.conn.Input(&p, pkt.Data()); ok {
					resyncs++
				}
			}
		}
		dpdk.FreeBulk(burst[:n])
	}
	return resyncs
}

// settle waits until the collector acknowledged everything: its RNIC
// has then applied every operation, and the ACKs' way back through the
// ring orders those writes before the test reads the memory.
func (b *collectorBed) settle() {
	b.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); b.conn.Outstanding() > 0; time.Sleep(time.Millisecond) {
		b.answers()
		if time.Now().After(deadline) {
			b.t.Fatalf("%d packets unacknowledged; conn %+v", b.conn.Outstanding(), b.conn.Stats)
		}
	}
}

// TestKeyWriteAndIncrement: reports become WRITEs and FETCH_ADDs that a
// soft RNIC applies to collector memory; every key reads back, an unknown
// key reads as absent, counts are exact (no collisions at this load).
func TestKeyWriteAndIncrement(t *testing.T) {
	b := newCollectorBed(t, 100)
	tr, err := NewTranslator(b.conn, b.regs)
	if err != nil {
		t.Fatal(err)
	}
	const keys = 500
	data := func(k uint32) []byte {
		var d [4]byte
		binary.BigEndian.PutUint32(d[:], k*7+1)
		return d[:]
	}
	for k := uint32(1); k <= keys; k++ {
		r := dtawire.Report{Opcode: dtawire.OpKeyWrite, Redundancy: 2, Key: k, Data: data(k)}
		if err := tr.Translate(&r, b.emit); err != nil {
			t.Fatal(err)
		}
		r = dtawire.Report{Opcode: dtawire.OpKeyIncrement, Redundancy: 2, Key: k % 50, Counter: uint64(k)}
		for deadline := time.Now().Add(5 * time.Second); ; {
			err := tr.Translate(&r, b.emit)
			if err == nil {
				break
			}
			if !errors.Is(err, ErrAtomicWindow) || time.Now().After(deadline) {
				t.Fatal(err)
			}
			b.answers()
		}
		b.answers()
	}
	want := map[uint32]uint64{}
	for k := uint32(1); k <= keys; k++ {
		want[k%50] += uint64(k)
	}
	kwMem := b.mem[:kwSlots*dtamem.KeyWriteEntryLen(4)]
	kiMem := b.mem[kwSlots*dtamem.KeyWriteEntryLen(4):]
	b.settle()
	for k := uint32(1); k <= keys; k++ {
		d, found := dtamem.QueryKeyWrite(kwMem, k, 2, kwSlots, 4)
		if !found || string(d) != string(data(k)) {
			t.Fatalf("key %d: %x %v", k, d, found)
		}
	}
	if _, found := dtamem.QueryKeyWrite(kwMem, keys+1000, 2, kwSlots, 4); found {
		t.Fatal("an unknown key was found")
	}
	for k, v := range want {
		if got := dtamem.QueryKeyIncrement(kiMem, k, 2, kiSlots); got != v {
			t.Fatalf("key %d: count %d, want %d", k, got, v)
		}
	}
	if b.conn.Stats.Resyncs != 0 || b.conn.Stats.ACKs == 0 {
		t.Fatalf("conn %+v", b.conn.Stats)
	}
}

// TestResync: a lost packet makes the collector NAK; the translator moves
// its PSN to the one expected, counts the lost window, and later reports
// land again.
func TestResync(t *testing.T) {
	b := newCollectorBed(t, 100)
	tr, err := NewTranslator(b.conn, b.regs)
	if err != nil {
		t.Fatal(err)
	}
	b.drop = func(i int) bool { return i == 3 } // one WRITE of key 2 (N=2)
	kwMem := b.mem[:kwSlots*dtamem.KeyWriteEntryLen(4)]
	send := func(k uint32) {
		r := dtawire.Report{Opcode: dtawire.OpKeyWrite, Redundancy: 2, Key: k, Data: []byte{0, 0, 0, byte(k)}}
		if err := tr.Translate(&r, b.emit); err != nil {
			t.Fatal(err)
		}
	}
	for k := uint32(1); k <= 5; k++ {
		send(k)
	}
	resynced := 0
	for deadline := time.Now().Add(5 * time.Second); resynced == 0; time.Sleep(time.Millisecond) {
		resynced += b.answers()
		if time.Now().After(deadline) {
			t.Fatalf("no resynchronisation; conn %+v", b.conn.Stats)
		}
	}
	if b.conn.Stats.LostPSNs == 0 {
		t.Fatalf("lost window not counted: %+v", b.conn.Stats)
	}
	for k := uint32(10); k <= 12; k++ {
		send(k)
	}
	b.settle()
	if d, ok := dtamem.QueryKeyWrite(kwMem, 12, 2, kwSlots, 4); !ok || d[3] != 12 {
		t.Fatalf("reports after the resync did not land; conn %+v", b.conn.Stats)
	}
	if d, ok := dtamem.QueryKeyWrite(kwMem, 1, 2, kwSlots, 4); !ok || d[3] != 1 {
		t.Fatal("key 1, before the loss, is missing")
	}
	t.Logf("conn %+v", b.conn.Stats)
}

// benchConn is a connection whose frames go nowhere.
func benchConn() *Conn {
	return NewConn(dtamem.Endpoint{QPN: 1, GID: roce.GIDFromAddr(netip.MustParseAddr("10.0.0.1"))},
		dtamem.Endpoint{QPN: 2, GID: roce.GIDFromAddr(netip.MustParseAddr("10.0.0.2"))}, 0)
}

// BenchmarkTranslateKeyWrite is the translator's rate for Key-Write with
// N = 2: two WRITE frames built with their ICRC per report.
func BenchmarkTranslateKeyWrite(b *testing.B) {
	tr, err := NewTranslator(benchConn(), dtamem.Regions{KeyWrite: &dtamem.KeyWriteRegion{Addr: 1 << 20, RKey: 5, Slots: 1 << 20}})
	if err != nil {
		b.Fatal(err)
	}
	r := dtawire.Report{Opcode: dtawire.OpKeyWrite, Redundancy: 2, Data: []byte{1, 2, 3, 4}}
	frames := 0
	emit := func([]byte) error { frames++; return nil }
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		r.Key = uint32(i)
		if err := tr.Translate(&r, emit); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mreports/s")
}

// TestAppend: entries gathered in batches land in order in each list's
// ring, a partial batch is flushed after the timeout, pollers sharing a
// list read every entry once, and the ring wraps.
func TestAppend(t *testing.T) {
	b := newCollectorBed(t, 7)
	const entries = 64
	// The lists use the key-write table's memory (the bed registers one
	// region).
	regs := b.regs
	regs.Lists = map[uint32]dtamem.ListRegion{
		1: {Addr: b.mr.Addr(), RKey: b.mr.RKey(), Entries: entries},
		2: {Addr: b.mr.Addr() + entries*dtamem.AppendEntryLen, RKey: b.mr.RKey(), Entries: entries},
	}
	regs.Batch = 4
	tr, err := NewTranslator(b.conn, regs)
	if err != nil {
		t.Fatal(err)
	}
	now := int64(0)
	tr.Now = func() int64 { return now }
	send := func(list, v uint32) {
		var d [4]byte
		binary.BigEndian.PutUint32(d[:], v)
		r := dtawire.Report{Opcode: dtawire.OpAppend, ListID: list, Data: d[:]}
		if err := tr.Translate(&r, b.emit); err != nil {
			t.Fatal(err)
		}
	}
	p1 := dtamem.NewPoller(b.mem[:entries*dtamem.AppendEntryLen], entries, 0, 1)
	p2a := dtamem.NewPoller(b.mem[entries*dtamem.AppendEntryLen:2*entries*dtamem.AppendEntryLen], entries, 0, 2)
	p2b := dtamem.NewPoller(b.mem[entries*dtamem.AppendEntryLen:2*entries*dtamem.AppendEntryLen], entries, 1, 2)
	var got1, got2 []uint32
	collect := func() {
		b.settle()
		p1.Poll(1000, func(_ uint64, v uint32) { got1 = append(got1, v) })
		p2a.Poll(1000, func(_ uint64, v uint32) { got2 = append(got2, v) })
		p2b.Poll(1000, func(_ uint64, v uint32) { got2 = append(got2, v) })
	}
	// Two laps of list 1's ring, read as they go; list 2 gets zeros too.
	for v := uint32(0); v < 2*entries; v++ {
		send(1, v+1000)
		if v < 10 {
			send(2, v)
		}
		if v%16 == 15 {
			collect()
		}
	}
	// List 2 has two entries waiting in a batch: not written yet...
	collect()
	if len(got2) != 8 {
		t.Fatalf("list 2: %d entries before the flush", len(got2))
	}
	if err := tr.Flush(time.Millisecond, b.emit); err != nil {
		t.Fatal(err)
	}
	collect()
	if len(got2) != 8 {
		t.Fatal("flushed before the timeout")
	}
	// ...until the timeout passes.
	now += int64(2 * time.Millisecond)
	if err := tr.Flush(time.Millisecond, b.emit); err != nil {
		t.Fatal(err)
	}
	collect()
	if len(got1) != 2*entries || len(got2) != 10 {
		t.Fatalf("read %d and %d entries", len(got1), len(got2))
	}
	for i, v := range got1 {
		if v != uint32(i)+1000 {
			t.Fatalf("list 1 entry %d: %d", i, v)
		}
	}
	seen := map[uint32]bool{}
	for _, v := range got2 {
		seen[v] = true
	}
	if len(seen) != 10 {
		t.Fatalf("list 2: %v", got2)
	}
	if err := tr.Translate(&dtawire.Report{Opcode: dtawire.OpAppend, ListID: 9, Data: []byte{0, 0, 0, 1}}, b.emit); !errors.Is(err, ErrNoRegion) {
		t.Fatalf("unknown list: %v", err)
	}
}

// TestWriteTemplate: the template path builds the same frames as the
// builder, byte for byte, ICRC included, for IPv4 and IPv6.
func TestWriteTemplate(t *testing.T) {
	for _, ips := range [][2]string{{"10.0.0.1", "10.0.0.2"}, {"fd00::1", "fd00::2"}} {
		mk := func() *Conn {
			return NewConn(dtamem.Endpoint{QPN: 5, MAC: header.MAC{2, 0, 0, 0, 0, 1}, GID: roce.GIDFromAddr(netip.MustParseAddr(ips[0]))},
				dtamem.Endpoint{QPN: 9, MAC: header.MAC{2, 0, 0, 0, 0, 2}, GID: roce.GIDFromAddr(netip.MustParseAddr(ips[1]))}, 0xfffffe)
		}
		fast, slow := mk(), mk()
		fast.AckEvery, slow.AckEvery = 3, 3
		a, b := make([]byte, 1024), make([]byte, 1024)
		for i := 0; i < 10; i++ {
			data := []byte{byte(i), 2, 3, 4, 5, 6, 7, byte(i * 3)}
			if i >= 5 {
				data = data[:4] // another size rebuilds the template
			}
			n, err := fast.Write(a, uint64(i)<<20, 0x77, data, nil)
			if err != nil {
				t.Fatal(err)
			}
			// The builder path, as Write takes for frames it cannot template.
			slow.b.Opcode = roce.RCWriteOnly
			slow.b.VA, slow.b.RKey, slow.b.DMALen = uint64(i)<<20, 0x77, uint32(len(data))
			slow.stamp()
			m, err := slow.b.Build(b, data)
			if err != nil {
				t.Fatal(err)
			}
			if string(a[:n]) != string(b[:m]) {
				t.Fatalf("%s frame %d:\n%x\n%x", ips[0], i, a[:n], b[:m])
			}
			var p roce.Packet
			if err := roce.Parse(a[:n], &p); err != nil || p.VerifyICRC(a[:n]) != nil {
				t.Fatalf("frame %d: %v", i, err)
			}
		}
	}
}

// TestStranded: the packet a collector NAKed for is lost again, so the
// collector drops everything after it in silence, pings included; a fill
// (a zero-length WRITE at the first unacknowledged PSN) stands in for the
// lost packet, the next ping draws the NAK that resynchronises the
// connection, every PSN lost is counted, and reports land again.
func TestStranded(t *testing.T) {
	b := newCollectorBed(t, 100)
	tr, err := NewTranslator(b.conn, b.regs)
	if err != nil {
		t.Fatal(err)
	}
	kwMem := b.mem[:kwSlots*dtamem.KeyWriteEntryLen(4)]
	send := func(k uint32) {
		r := dtawire.Report{Opcode: dtawire.OpKeyWrite, Redundancy: 2, Key: k, Data: []byte{0, 0, 0, byte(k)}}
		if err := tr.Translate(&r, b.emit); err != nil {
			t.Fatal(err)
		}
	}
	resyncAt := -1
	b.drop = func(i int) bool { return i == 3 || i == resyncAt }
	for k := uint32(1); k <= 5; k++ {
		send(k)
	}
	for deadline := time.Now().Add(5 * time.Second); b.answers() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no NAK; conn %+v", b.conn.Stats)
		}
	}
	resyncAt = b.sent // the resent window's first packet is lost too
	for k := uint32(10); k <= 12; k++ {
		send(k)
	}
	var frame [256]byte
	ping := func() {
		t.Helper()
		n, err := b.conn.Ping(frame[:])
		if err != nil {
			t.Fatal(err)
		}
		if err := b.emit(frame[:n]); err != nil {
			t.Fatal(err)
		}
	}
	ping()
	time.Sleep(20 * time.Millisecond)
	acks := b.conn.Stats.ACKs
	b.answers()
	if b.conn.Outstanding() == 0 || b.conn.Stats.ACKs != acks {
		t.Fatalf("nothing stranded: %d outstanding; conn %+v", b.conn.Outstanding(), b.conn.Stats)
	}
	lost := b.conn.Stats.LostPSNs
	n, err := b.conn.Fill(frame[:])
	if err != nil {
		t.Fatal(err)
	}
	if err := b.emit(frame[:n]); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); b.conn.Stats.ACKs == acks; time.Sleep(time.Millisecond) {
		b.answers()
		if time.Now().After(deadline) {
			t.Fatal("the fill drew no ACK")
		}
	}
	if b.conn.Stats.Resyncs != 1 || b.conn.Outstanding() == 0 {
		t.Fatalf("the fill alone moved the connection: %d outstanding; conn %+v", b.conn.Outstanding(), b.conn.Stats)
	}
	ping()
	for deadline := time.Now().Add(5 * time.Second); b.conn.Stats.Resyncs == 1; time.Sleep(time.Millisecond) {
		b.answers()
		if time.Now().After(deadline) {
			t.Fatalf("the ping after the fill drew no NAK; conn %+v", b.conn.Stats)
		}
	}
	// Lost: the resent window (key 10's first WRITE, which the fill
	// stands for, and the five after it) and both pings.
	if b.conn.Outstanding() != 0 || b.conn.Stats.LostPSNs-lost != 8 {
		t.Fatalf("after the resync: %d outstanding, %d more lost; %+v", b.conn.Outstanding(), b.conn.Stats.LostPSNs-lost, b.conn.Stats)
	}
	send(20)
	b.settle()
	if d, ok := dtamem.QueryKeyWrite(kwMem, 20, 2, kwSlots, 4); !ok || d[3] != 20 {
		t.Fatal("a report after the resync did not land")
	}
}

// TestFillDuplicate: a fill for packets that did arrive (the collector
// is slow, or its ACK was lost) is a duplicate to the collector: it
// answers where it stands and executes nothing, and nothing counts as
// lost.
func TestFillDuplicate(t *testing.T) {
	b := newCollectorBed(t, 100)
	tr, err := NewTranslator(b.conn, b.regs)
	if err != nil {
		t.Fatal(err)
	}
	kwMem := b.mem[:kwSlots*dtamem.KeyWriteEntryLen(4)]
	var frame [256]byte
	for k := uint32(1); k <= 5; k++ {
		r := dtawire.Report{Opcode: dtawire.OpKeyWrite, Redundancy: 2, Key: k, Data: []byte{0, 0, 0, byte(k)}}
		if err := tr.Translate(&r, b.emit); err != nil {
			t.Fatal(err)
		}
		// A fill right behind each report's WRITEs, before any answer.
		n, err := b.conn.Fill(frame[:])
		if err != nil {
			t.Fatal(err)
		}
		if err := b.emit(frame[:n]); err != nil {
			t.Fatal(err)
		}
	}
	n, err := b.conn.Ping(frame[:])
	if err != nil {
		t.Fatal(err)
	}
	if err := b.emit(frame[:n]); err != nil {
		t.Fatal(err)
	}
	b.settle()
	if st := b.conn.Stats; st.Resyncs != 0 || st.LostPSNs != 0 || st.NAKs != 0 || st.Fills != 5 {
		t.Fatalf("conn %+v", st)
	}
	for k := uint32(1); k <= 5; k++ {
		if d, ok := dtamem.QueryKeyWrite(kwMem, k, 2, kwSlots, 4); !ok || d[3] != byte(k) {
			t.Fatalf("key %d: %x %v", k, d, ok)
		}
	}
}

// TestAppendEmitFails: a batch that could not be sent (no room on the
// port) stays gathered; entries that find it full are refused with
// errTxFull, never written past it, and the batch goes out once the port
// takes frames again.
func TestAppendEmitFails(t *testing.T) {
	b := newCollectorBed(t, 7)
	regs := b.regs
	regs.Lists = map[uint32]dtamem.ListRegion{1: {Addr: b.mr.Addr(), RKey: b.mr.RKey(), Entries: 64}}
	regs.Batch = 4
	tr, err := NewTranslator(b.conn, regs)
	if err != nil {
		t.Fatal(err)
	}
	full := true
	sent := 0
	emit := func(f []byte) error {
		if full {
			return errTxFull
		}
		sent++
		return b.emit(f)
	}
	r := dtawire.Report{Opcode: dtawire.OpAppend, ListID: 1, Data: []byte{0, 0, 0, 1}}
	for i := range 4 {
		if err := tr.Translate(&r, emit); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	for i := range 10 {
		if err := tr.Translate(&r, emit); !errors.Is(err, errTxFull) {
			t.Fatalf("entry %d on a full, unsent batch: %v", 4+i, err)
		}
	}
	full = false
	if err := tr.Translate(&r, emit); err != nil || sent != 1 {
		t.Fatalf("after the port freed up: %v, %d WRITEs", err, sent)
	}
}

// TestEmitFailureKeepsPSN: a frame the port could not take (emit fails)
// gives its PSN back, whatever the operation: the collector sees no gap,
// NAKs nothing, and every report tried again lands.
func TestEmitFailureKeepsPSN(t *testing.T) {
	b := newCollectorBed(t, 500)
	tr, err := NewTranslator(b.conn, b.regs)
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	emit := func(f []byte) error {
		calls++
		if calls%3 == 0 {
			return errTxFull
		}
		return b.emit(f)
	}
	want := map[uint32]uint64{}
	for k := uint32(1); k <= 60; k++ {
		reports := []dtawire.Report{
			{Opcode: dtawire.OpKeyWrite, Redundancy: 2, Key: k, Data: []byte{0, 0, 0, byte(k)}},
			{Opcode: dtawire.OpKeyIncrement, Redundancy: 1, Key: k % 7, Counter: uint64(k)},
		}
		for _, r := range reports {
			for deadline := time.Now().Add(5 * time.Second); ; {
				err := tr.Translate(&r, emit)
				if err == nil {
					break
				}
				if (!errors.Is(err, errTxFull) && !errors.Is(err, ErrAtomicWindow)) || time.Now().After(deadline) {
					t.Fatal(err)
				}
				b.answers()
			}
		}
		want[k%7] += uint64(k)
		b.answers()
	}
	b.settle()
	if st := b.conn.Stats; st.NAKs != 0 || st.Resyncs != 0 || st.LostPSNs != 0 {
		t.Fatalf("a refused frame left a gap: conn %+v", st)
	}
	kwMem := b.mem[:kwSlots*dtamem.KeyWriteEntryLen(4)]
	kiMem := b.mem[kwSlots*dtamem.KeyWriteEntryLen(4):]
	for k := uint32(1); k <= 60; k++ {
		if d, ok := dtamem.QueryKeyWrite(kwMem, k, 2, kwSlots, 4); !ok || d[3] != byte(k) {
			t.Fatalf("key-write %d: %x %v", k, d, ok)
		}
	}
	for k, v := range want {
		if got := dtamem.QueryKeyIncrement(kiMem, k, 1, kiSlots); got != v {
			t.Fatalf("key-increment %d: %d, want %d", k, got, v)
		}
	}
}
