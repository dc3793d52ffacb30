package dtatranslator

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/internal/dtamem"
	"github.com/rdma-appliance/appliance/internal/dtawire"
	"github.com/rdma-appliance/appliance/verbs"
	"github.com/rdma-appliance/appliance/verbs/soft"
)

// exchangeCollector is the least a collector needs to serve the
// translator service: a soft RNIC, one registered region holding every
// primitive, and the exchange (an RC QP to RTR per Hello). The real
// collector service lives in collector/dtacollector; this one keeps the
// translator's tests within the package.
type exchangeCollector struct {
	t    testing.TB
	dev  *soft.Device
	pd   verbs.PD
	mem  []byte
	mr   verbs.MR
	regs dtamem.Regions
	ip   netip.Addr
	ln   net.Listener
	mu   sync.Mutex
	qps  []verbs.QP
	tcps []net.Conn
}

const (
	ecKW     = 1 << 14
	ecKI     = 1 << 12
	ecList   = 1 << 12
	ecSketch = 7
)

func newExchangeCollector(t testing.TB, port dpdk.Port, ip netip.Addr) *exchangeCollector {
	t.Helper()
	dev, err := soft.NewDevice(fmt.Sprintf("ec%p-%s", t, ip), port, soft.Config{GIDs: []netip.Addr{ip}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := dev.Start(ctx); err != nil {
		t.Fatal(err)
	}
	pd, _ := dev.AllocPD()
	sk := dtamem.SketchRegion{Kind: dtawire.SketchCountMin, Columns: 256, Rows: 4, Reporters: 2}
	pc := dtamem.PostcardRegion{Slots: 1 << 12, Hops: 5}
	kwLen, kiLen, lLen := ecKW*dtamem.KeyWriteEntryLen(4), ecKI*8, ecList*dtamem.AppendEntryLen
	total := kwLen + kiLen + 2*lLen + sk.Len() + int(pc.Slots)*pc.RecordLen()
	mem := make([]byte, total)
	mr, err := pd.RegMR(mem, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteAtomic)
	if err != nil {
		t.Fatal(err)
	}
	a, k := mr.Addr(), mr.RKey()
	off := uint64(0)
	at := func(n int) uint64 { o := off; off += uint64(n); return a + o }
	regs := dtamem.Regions{KeyWrite: &dtamem.KeyWriteRegion{Addr: at(kwLen), RKey: k, Slots: ecKW, DataWidth: 4},
		KeyIncrement: &dtamem.KeyIncrementRegion{Addr: at(kiLen), RKey: k, Slots: ecKI},
		Lists:        map[uint32]dtamem.ListRegion{1: {Addr: at(lLen), RKey: k, Entries: ecList}, 2: {Addr: at(lLen), RKey: k, Entries: ecList}},
		Batch:        4}
	sk.Addr, sk.RKey = at(sk.Len()), k
	regs.Sketches = map[uint16]dtamem.SketchRegion{ecSketch: sk}
	pc.Addr, pc.RKey = at(int(pc.Slots)*pc.RecordLen()), k
	regs.Postcards = &pc
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &exchangeCollector{t: t, dev: dev, pd: pd, mem: mem, mr: mr, regs: regs, ip: ip, ln: ln}
	go c.serve()
	t.Cleanup(func() { ln.Close(); c.drop(); dev.Close(); cancel() })
	return c
}

// region is the memory of a region that starts at addr.
func (c *exchangeCollector) region(addr uint64, n int) []byte {
	o := addr - c.mr.Addr()
	return c.mem[o : o+uint64(n)]
}

func (c *exchangeCollector) serve() {
	for {
		tcp, err := c.ln.Accept()
		if err != nil {
			return
		}
		var h dtamem.Hello
		if err := dtamem.ReadMsg(dtamem.NewMsgReader(tcp), &h); err != nil {
			tcp.Close()
			continue
		}
		qp, err := c.accept(&h)
		o := dtamem.Offer{Name: "ec", IP: c.ip, MAC: c.dev.MAC().String(), MTU: 1024, MaxAtomic: 16, Regions: c.regs, Redundancy: 2}
		if err != nil {
			o.Error = err.Error()
		} else {
			o.QPN = qp.QPN()
		}
		_ = dtamem.WriteMsg(tcp, &o)
		c.mu.Lock()
		c.tcps = append(c.tcps, tcp)
		c.mu.Unlock()
	}
}

func (c *exchangeCollector) accept(h *dtamem.Hello) (verbs.QP, error) {
	mac, err := header.ParseMAC(h.MAC)
	if err != nil {
		return nil, err
	}
	c.dev.AddNeighbor(h.IP, mac)
	cq, err := c.dev.CreateCQ(verbs.CQAttr{CQE: 256})
	if err != nil {
		return nil, err
	}
	qp, err := c.pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return nil, err
	}
	if err := qp.Modify(&verbs.QPAttr{State: verbs.QPSInit, Port: 1, AccessFlags: verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteAtomic},
		verbs.AttrState|verbs.AttrPKeyIndex|verbs.AttrPort|verbs.AttrAccessFlags); err != nil {
		return nil, err
	}
	if err := qp.Modify(&verbs.QPAttr{State: verbs.QPSRTR, PathMTU: verbs.MTU1024, DestQPN: h.QPN, RQPSN: h.PSN, MaxDestRdAtomic: 16,
		MinRNRTimer: 1, AH: verbs.AHAttr{DGID: verbs.GIDFromAddr(h.IP), Port: 1}},
		verbs.AttrState|verbs.AttrAV|verbs.AttrPathMTU|verbs.AttrDestQPN|verbs.AttrRQPSN|verbs.AttrMaxDestRdAtomic|verbs.AttrMinRNRTimer); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.qps = append(c.qps, qp)
	c.mu.Unlock()
	return qp, nil
}

// drop closes every exchange connection and destroys the QPs: the
// collector restarting, as the translator sees it.
func (c *exchangeCollector) drop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, tcp := range c.tcps {
		tcp.Close()
	}
	for _, qp := range c.qps {
		qp.Destroy()
	}
	c.tcps, c.qps = nil, nil
}

// serviceBed is reporters, the translator service and a collector on one
// bridged segment.
type serviceBed struct {
	coll *exchangeCollector
	svc  *Service
	rep  []dpdk.Port
	pool *dpdk.Pool
	// repPool, when set, is the reporters' own pool (else they share
	// the translator's).
	repPool *dpdk.Pool
	stop    func()
	br      *ring.Bridge
	trIP    netip.Addr
	trMAC   header.MAC
}

func newServiceBed(t testing.TB, reporters int, edit func(*Spec)) *serviceBed {
	t.Helper()
	name := fmt.Sprintf("sb%p", t)
	cfg := ring.Config{RingSize: 4096}
	lt, lc := ring.NewLink(name+"t", cfg), ring.NewLink(name+"c", cfg)
	far := []dpdk.Port{lt.B(), lc.B()}
	var reps []dpdk.Port
	for i := range reporters {
		l := ring.NewLink(fmt.Sprintf("%sr%d", name, i), cfg)
		reps = append(reps, l.A())
		far = append(far, l.B())
	}
	t.Cleanup(func() {
		for _, p := range append(reps, far...) {
			p.Close()
		}
	})
	return buildServiceBed(t, lt.A(), lc.A(), reps, far, edit)
}

// buildServiceBed runs the bed on given ports: the translator's, the
// collector's and the reporters', joined by a bridge between the far
// ends.
func buildServiceBed(t testing.TB, trPort, collPort dpdk.Port, reps, far []dpdk.Port, edit func(*Spec)) *serviceBed {
	t.Helper()
	pool, err := dpdk.NewPool(fmt.Sprintf("sbp%p", t), 16384, 0)
	if err != nil {
		t.Fatal(err)
	}
	coll := newExchangeCollector(t, collPort, netip.MustParseAddr("10.9.0.1"))
	s, err := DecodeSpec("t.yml", []byte(fmt.Sprintf("ip: 10.9.0.100\ncollectors:\n  - name: ec\n    exchange: %s\n", coll.ln.Addr())))
	if err != nil {
		t.Fatal(err)
	}
	s.ReconnectMin = 20 * time.Millisecond
	if edit != nil {
		edit(&s)
	}
	svc, err := NewService(s, trPort, pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	br := ring.NewBridge(far...)
	wg.Add(2)
	go func() { defer wg.Done(); br.Run(ctx) }()
	go func() { defer wg.Done(); _ = svc.Run(ctx) }()
	b := &serviceBed{coll: coll, svc: svc, rep: reps, pool: pool, br: br, trIP: netip.MustParseAddr("10.9.0.100"),
		trMAC: header.MAC(trPort.Info().MAC)}
	b.stop = func() { cancel(); wg.Wait() }
	t.Cleanup(func() {
		b.stop()
		pool.Close()
	})
	b.waitUp(t, 1)
	return b
}

// waitUp waits until the collector's connection came up n times.
func (b *serviceBed) waitUp(t testing.TB, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		st := b.svc.Status()
		if c := st.Collectors[0]; c.Up && c.Connects >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("collector not up: %+v", st.Collectors)
		}
	}
}

// settle waits until the translator has nothing unacknowledged, nothing
// queued, and its counters stopped moving.
func (b *serviceBed) settle(t testing.TB) Status {
	t.Helper()
	var last ServiceStats
	// Fresh statuses: the last publication may predate the reports.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(60 * time.Millisecond) {
		st, _ := b.svc.FreshStatus(ctx)
		c := st.Collectors[0]
		if st.Stats == last && st.Settled() && c.Conn.Packets > 0 && c.Conn.ACKs > 0 {
			return st
		}
		last = st.Stats
		if time.Now().After(deadline) {
			t.Fatalf("translator did not settle: %+v", st)
		}
	}
}

func (b *serviceBed) reporter(t testing.TB, i int, cfg ReporterConfig) *Reporter {
	t.Helper()
	cfg.ID = uint16(i)
	cfg.SrcMAC = header.MAC(b.rep[i].Info().MAC)
	cfg.SrcIP = netip.AddrFrom4([4]byte{10, 9, 0, byte(10 + i)})
	cfg.DstIP = b.trIP
	pool := b.pool
	if b.repPool != nil {
		pool = b.repPool
	}
	r, err := NewReporter(cfg, b.rep[i], pool)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := r.Resolve(ctx); err != nil {
		t.Fatal(err)
	}
	if r.cfg.DstMAC != b.trMAC {
		t.Fatalf("ARP resolved %v, want %v", r.cfg.DstMAC, b.trMAC)
	}
	return r
}

// checkTruth compares the collector's memory with what the reporters
// reported.
func (b *serviceBed) checkTruth(t *testing.T, reps ...*Reporter) {
	t.Helper()
	c, g := b.coll, b.coll.regs
	kw := c.region(g.KeyWrite.Addr, ecKW*dtamem.KeyWriteEntryLen(4))
	ki := c.region(g.KeyIncrement.Addr, ecKI*8)
	found, keys := 0, 0
	counts := map[uint32]uint64{}
	for _, r := range reps {
		for k, v := range r.Truth.KeyWrite {
			keys++
			d, ok := dtamem.QueryKeyWrite(kw, k, 2, ecKW, 4)
			if ok {
				found++
				// Two reporters may write one key: either value is right.
				if got := binary.BigEndian.Uint32(d); got != v && !otherWrote(reps, r, k, got) {
					t.Fatalf("key-write %d: %d, want %d", k, got, v)
				}
			}
		}
		for k, v := range r.Truth.KeyIncrement {
			counts[k] += v
		}
	}
	if keys > 0 && found < keys*9/10 {
		t.Fatalf("only %d of %d key-write keys answer", found, keys)
	}
	for k, v := range counts {
		// Count-min never undercounts; with these loads it is exact.
		if got := dtamem.QueryKeyIncrement(ki, k, 2, ecKI); got < v {
			t.Fatalf("key-increment %d: %d < %d", k, got, v)
		}
	}
	// Append: every list's entries in order (one reporter per list).
	for id, lr := range g.Lists {
		var want []uint32
		for _, r := range reps {
			want = append(want, r.Truth.Append[id]...)
		}
		var got []uint32
		dtamem.NewPoller(c.region(lr.Addr, int(lr.Entries)*dtamem.AppendEntryLen), lr.Entries, 0, 1).Poll(1<<30, func(_ uint64, v uint32) { got = append(got, v) })
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("list %d: %d entries, want %d in the order sent", id, len(got), len(want))
		}
	}
	pc := g.Postcards
	pmem := c.region(pc.Addr, int(pc.Slots)*pc.RecordLen())
	// Every hop of a record is checked, of an incomplete one those it
	// holds; only complete records count as paths answered.
	paths, okPaths, incomplete := 0, 0, 0
	for _, r := range reps {
		for k, want := range r.Truth.Postcards {
			paths++
			p, ok := dtamem.QueryPostcard(pmem, pc, k)
			if !ok {
				continue
			}
			if !pathOf(reps, k, p) {
				t.Fatalf("flow %d: path %v (mask %#x), want %v", k, p.Hops, p.Mask, want)
			}
			if !p.Complete() {
				incomplete++
				continue
			}
			okPaths++
		}
	}
	if paths > 0 && okPaths < paths*9/10 {
		t.Fatalf("only %d of %d paths answer complete (%d incomplete)", okPaths, paths, incomplete)
	}
}

// runReporters runs reporters side by side to their end, and until the
// translator has acknowledged every report (up to 10 s: a translator
// slowed down by the race detector and a busy machine may take seconds
// to work through a storm of resent reports).
func runReporters(t testing.TB, reps []*Reporter) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(reps))
	for i, r := range reps {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = r.Run(context.Background(), 10*time.Second) }()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for _, r := range reps {
		if r.cfg.Retransmittable && r.Stats.Unacknowledged != 0 {
			t.Fatalf("reporter %d: %d reports never acknowledged; %+v", r.cfg.ID, r.Stats.Unacknowledged, r.Stats)
		}
	}
}

// pathOf: every hop path holds is some reporter's for flow k (two
// reporters may draw the same flow key, and the last one's record
// stands).
func pathOf(reps []*Reporter, k uint32, path dtamem.Path) bool {
	for _, r := range reps {
		if want, ok := r.Truth.Postcards[k]; ok && len(path.Wrong(want)) == 0 {
			return true
		}
	}
	return false
}

// otherWrote: some reporter reported v for k at some point (another
// reporter's, or an older value whose successor's RDMA packets were lost).
func otherWrote(reps []*Reporter, self *Reporter, k, v uint32) bool {
	for _, r := range reps {
		if slices.Contains(r.Truth.KeyWriteAll[k], v) {
			return true
		}
	}
	return false
}

// TestServiceEndToEnd: two reporters send every primitive through the
// translator service into a soft-RNIC collector, with 1% of reports lost
// on the way and retransmission on: the collector's memory holds what was
// reported, nothing retransmittable is lost, and the merged sketch is the
// two reporters' sum.
func TestServiceEndToEnd(t *testing.T) {
	b := newServiceBed(t, 2, nil)
	sk := b.coll.regs.Sketches[ecSketch]
	var reps []*Reporter
	for i := range 2 {
		cfg := ReporterConfig{Keys: 3000, Redundancy: 2, Lists: []uint32{uint32(i + 1)}, Hops: 5,
			Sketch: &sk, SketchID: ecSketch, Retransmittable: true, Loss: 0.01, Count: 6000, Seed: 5, Rate: 200000}
		cfg.Mix.KeyWrite, cfg.Mix.Append, cfg.Mix.KeyIncrement, cfg.Mix.Postcarder = 3, 2, 2, 1
		reps = append(reps, b.reporter(t, i, cfg))
	}
	runReporters(t, reps)
	st := b.settle(t)
	var lost, resent uint64
	for _, r := range reps {
		lost += r.Stats.Lost
		resent += r.Stats.Resent
		if r.Stats.Unresendable != 0 {
			t.Fatalf("reporter %d: NACKs for reports it no longer had: %+v", r.cfg.ID, r.Stats)
		}
	}
	if lost == 0 || st.Seq.NACKs == 0 || resent < lost {
		t.Fatalf("loss not exercised: lost %d, resent %d, %+v", lost, resent, st.Seq)
	}
	if st.Stats.Malformed != 0 || st.Stats.Refused != 0 || st.Stats.CollectorDown != 0 {
		t.Fatalf("stats %+v", st.Stats)
	}
	if t.Failed() {
		return
	}
	t.Logf("status %+v", st)
	b.checkTruth(t, reps...)
	// The merged sketch: counter-wise sums of the two reporters'.
	mem := b.coll.region(sk.Addr, sk.Len())
	for i := range reps[0].Truth.Sketch.C {
		want := reps[0].Truth.Sketch.C[i] + reps[1].Truth.Sketch.C[i]
		if got := binary.BigEndian.Uint32(mem[4*i:]); got != want {
			t.Fatalf("sketch counter %d: %d, want %d", i, got, want)
		}
	}
	t.Logf("lost %d, resent %d, NACKs %d, reports %d, RDMA out %d", lost, resent, st.Seq.NACKs, st.Stats.Reports, st.Stats.RDMAOut)
}

// TestServiceCollectorRestart: the collector goes away (its QPs destroyed,
// the exchange closed): reports for it are counted as dropped, the
// translator sets up a fresh connection, reports the window it lost, and
// later reports land.
func TestServiceCollectorRestart(t *testing.T) {
	b := newServiceBed(t, 1, nil)
	cfg := ReporterConfig{Keys: 1000, Redundancy: 2, Count: 500, Seed: 9}
	cfg.Mix.KeyWrite = 1
	r := b.reporter(t, 0, cfg)
	if err := r.Run(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	b.settle(t)
	b.coll.drop()
	b.waitUp(t, 2)
	r2 := b.reporter(t, 0, ReporterConfig{Keys: 1000, Redundancy: 2, Count: 500, Seed: 10, Mix: cfg.Mix})
	if err := r2.Run(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	st := b.settle(t)
	if c := st.Collectors[0]; c.Connects != 2 {
		t.Fatalf("connects %d", c.Connects)
	}
	b.checkTruth(t, r2)
}

// TestServiceMeter: over the meter's rate, low-priority reports are
// dropped, high-priority ones queued and written later, and reporters
// hear of the congestion.
func TestServiceMeter(t *testing.T) {
	b := newServiceBed(t, 1, func(s *Spec) {
		s.FlowControl.Rate = 20000 // RDMA packets a second
		s.FlowControl.Burst = 64
	})
	cfg := ReporterConfig{Keys: 5000, Redundancy: 2, Count: 3000, Seed: 3, HighShare: 0.5}
	cfg.Mix.KeyWrite = 1
	r := b.reporter(t, 0, cfg)
	if err := r.Run(context.Background(), 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	st := b.settle(t)
	s := st.Stats
	if s.MeteredDrops == 0 || s.Queued == 0 || s.Notices == 0 || r.Stats.Congestion == 0 {
		t.Fatalf("meter not exercised: %+v, reporter %+v", s, r.Stats)
	}
	written := st.Collectors[0].Translate.Reports[dtawire.OpKeyWrite]
	if written+s.MeteredDrops+s.QueueDrops != s.Reports {
		t.Fatalf("%d written + %d dropped + %d queue drops != %d reports", written, s.MeteredDrops, s.QueueDrops, s.Reports)
	}
	t.Logf("%d reports: %d written, %d dropped low, %d queued high, %d notices", s.Reports, written, s.MeteredDrops, s.Queued, s.Notices)
}

// TestServiceMeterHighOnly: the DTA paper's flow control end to end.
// Only high-priority reports are retransmittable; at twice the meter's
// rate every one of them is taken (none refused for good: every one
// acknowledged), the low-priority ones are taken or dropped and counted,
// never lost unaccounted, and the reporter slows down on the notices.
func TestServiceMeterHighOnly(t *testing.T) {
	b := newServiceBed(t, 1, func(s *Spec) {
		s.FlowControl.Rate = 20000 // RDMA packets a second
		s.FlowControl.Burst = 64
	})
	// Key-Write N=2: 2 RDMA packets a report, 20000 reports a second
	// offer twice the meter's rate.
	cfg := ReporterConfig{Keys: 5000, Redundancy: 2, Count: 4000, Seed: 5, HighShare: 0.25, Retransmittable: true, HighOnly: true, Rate: 20000}
	cfg.Mix.KeyWrite = 1
	r := b.reporter(t, 0, cfg)
	if err := r.Run(context.Background(), 2*time.Second); err != nil {
		t.Fatal(err)
	}
	st := b.settle(t)
	s := st.Stats
	low := r.Stats.Sent - r.Stats.SentHigh
	switch {
	case r.Stats.Unacknowledged != 0:
		t.Fatalf("%d high-priority reports never acknowledged", r.Stats.Unacknowledged)
	case s.TakenHigh != r.Stats.SentHigh:
		t.Fatalf("%d high-priority reports taken, %d sent", s.TakenHigh, r.Stats.SentHigh)
	case s.TakenLow+s.DroppedLow != low || s.DroppedLow == 0:
		t.Fatalf("low priority: %d taken + %d dropped != %d sent", s.TakenLow, s.DroppedLow, low)
	case r.Stats.Congestion == 0 || r.Stats.SentSlowed == 0:
		t.Fatalf("the reporter did not slow down: %+v", r.Stats)
	}
	t.Logf("high %d sent, all taken (%d refused then resent); low %d sent: %d taken, %d dropped; %d notices, %d reports sent slowed",
		r.Stats.SentHigh, s.RefusedHigh, low, s.TakenLow, s.DroppedLow, r.Stats.Congestion, r.Stats.SentSlowed)
}

// TestServiceBadInput: malformed reports and frames for others are
// counted and dropped; the loop goes on.
func TestServiceBadInput(t *testing.T) {
	b := newServiceBed(t, 1, nil)
	var frame [256]byte
	src := [4]byte{10, 9, 0, 10}
	send := func(payload []byte, dport uint16) {
		n, _ := WriteUDP4(frame[:], header.MAC(b.rep[0].Info().MAC), b.trMAC, src, b.trIP.As4(), dtawire.GeneratorPort, dport, 0, payload)
		p := b.pool.Get()
		p.CopyFrom(frame[:n])
		for b.rep[0].TxBurst(0, []*dpdk.Packet{p}) == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	send([]byte{0x09, 0, 0, 1, 2, 3}, dtawire.ReportPort)       // unknown opcode
	send([]byte{0x01, 0, 0, 9, 0, 0, 0, 1}, dtawire.ReportPort) // redundancy 9, cut short
	send([]byte{0x05, 0, 0, 0, 1, 0, 0, 0}, dtawire.ReportPort) // sketch header cut short
	send([]byte{0x02, 0, 0, 0, 0, 0, 9, 0, 0, 0, 1}, 9999)      // another port
	send([]byte{0x02, 0, 0, 0, 0, 0, 9, 0, 0, 0, 1}, dtawire.ReportPort)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		st := b.svc.Status()
		if st.Stats.Malformed == 3 && st.Stats.NotForUs >= 1 && st.Stats.NoCollector == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v", st.Stats)
		}
	}
}

// BenchmarkServiceEndToEnd is reports collected a second end to end: a
// reporter at full speed, the translator service, a soft-RNIC collector,
// each on its own goroutine over ring links and a bridge, Key-Write N=2
// and Append mixed; a report counts once the collector acknowledged its
// RDMA packets.
func BenchmarkServiceEndToEnd(b *testing.B) {
	bed := newServiceBed(b, 1, nil)
	cfg := ReporterConfig{Keys: 1 << 14, Redundancy: 2, Lists: []uint32{1}, Count: uint64(b.N), Seed: 1}
	cfg.Mix.KeyWrite, cfg.Mix.Append = 1, 1
	r := bed.reporter(b, 0, cfg)
	b.ReportAllocs()
	b.ResetTimer()
	if err := r.Run(context.Background(), 0); err != nil {
		b.Fatal(err)
	}
	st := bed.settle(b)
	b.StopTimer()
	got := st.Collectors[0].Translate.Reports[dtawire.OpKeyWrite] + st.Collectors[0].Translate.Reports[dtawire.OpAppend]
	b.ReportMetric(float64(got)/b.Elapsed().Seconds(), "reports/s")
	b.ReportMetric(float64(st.Stats.RDMAOut)/b.Elapsed().Seconds(), "rdma-pkts/s")
	if lost := st.Stats.TxDropped; lost > 0 {
		b.ReportMetric(float64(lost), "tx-dropped")
	}
}

// TestServiceNoCollector: a collector that is not there is retried with
// backoff, and the status says why.
func TestServiceNoCollector(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	l := ring.NewLink(fmt.Sprintf("nc%p", t), ring.Config{})
	pool, err := dpdk.NewPool(fmt.Sprintf("nc%p", t), 512, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { l.A().Close(); l.B().Close(); pool.Close() }()
	s, err := DecodeSpec("t.yml", []byte(fmt.Sprintf("ip: 10.9.0.100\nreconnect-min: 5ms\nreconnect-max: 20ms\ncollectors:\n  - name: gone\n    exchange: %s\n", addr)))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := NewService(s, l.A(), pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- svc.Run(ctx) }()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		st := svc.Status()
		if c := st.Collectors[0]; strings.Contains(c.LastError, "refused") && !c.Up && st.Running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status %+v", st.Collectors)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestServiceTwoCollectors: keyed reports go to collector KeyChecksum(key)
// mod 2 and only there; Append goes to the collector that holds the list.
func TestServiceTwoCollectors(t *testing.T) {
	name := fmt.Sprintf("tc%p", t)
	cfg := ring.Config{RingSize: 4096}
	var near, far []dpdk.Port
	for i := range 4 { // translator, collector 0, collector 1, reporter
		l := ring.NewLink(fmt.Sprintf("%s%d", name, i), cfg)
		near, far = append(near, l.A()), append(far, l.B())
	}
	t.Cleanup(func() {
		for _, p := range append(near, far...) {
			p.Close()
		}
	})
	pool, err := dpdk.NewPool(name, 16384, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	colls := []*exchangeCollector{newExchangeCollector(t, near[1], netip.MustParseAddr("10.9.0.1")),
		newExchangeCollector(t, near[2], netip.MustParseAddr("10.9.0.2"))}
	s, err := DecodeSpec("t.yml", fmt.Appendf(nil, "ip: 10.9.0.100\ncollectors:\n  - {name: c0, exchange: '%s'}\n  - {name: c1, exchange: '%s'}\n",
		colls[0].ln.Addr(), colls[1].ln.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := NewService(s, near[0], pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); ring.NewBridge(far...).Run(ctx) }()
	go func() { defer wg.Done(); _ = svc.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	b := &serviceBed{svc: svc, rep: near[3:], pool: pool, trIP: netip.MustParseAddr("10.9.0.100"), trMAC: header.MAC(near[0].Info().MAC)}
	waitStatus(t, svc, func(st *Status) bool { return st.Collectors[0].Up && st.Collectors[1].Up })
	rc := ReporterConfig{Keys: 2000, Redundancy: 2, Lists: []uint32{2}, Count: 3000, Seed: 4, Rate: 200000}
	rc.Mix.KeyWrite, rc.Mix.Append = 2, 1
	r := b.reporter(t, 0, rc)
	runReporters(t, []*Reporter{r})
	var last ServiceStats
	waitStatus(t, svc, func(st *Status) bool { ok := st.Settled() && st.Stats == last; last = st.Stats; return ok })
	kw := func(c *exchangeCollector) []byte {
		return c.region(c.regs.KeyWrite.Addr, ecKW*dtamem.KeyWriteEntryLen(4))
	}
	// A key sits at its home collector only; a few may be overwritten
	// there by keys sharing both their slots (N = 2).
	found := 0
	for k := range r.Truth.KeyWrite {
		home := dtamem.KeyChecksum(k) % 2
		_, at := dtamem.QueryKeyWrite(kw(colls[home]), k, 2, ecKW, 4)
		_, other := dtamem.QueryKeyWrite(kw(colls[1-home]), k, 2, ecKW, 4)
		if other {
			t.Fatalf("key %d (home %d) found at the other collector", k, home)
		}
		if at {
			found++
		}
	}
	if found < len(r.Truth.KeyWrite)*95/100 {
		t.Fatalf("%d of %d keys found at home", found, len(r.Truth.KeyWrite))
	}
	l2 := colls[0].regs.Lists[2]
	var got []uint32
	dtamem.NewPoller(colls[0].region(l2.Addr, int(l2.Entries)*dtamem.AppendEntryLen), l2.Entries, 0, 1).Poll(1<<20, func(_ uint64, v uint32) { got = append(got, v) })
	if !slices.Equal(got, r.Truth.Append[2]) {
		t.Fatalf("list 2 at collector 0: %d entries, want %d", len(got), len(r.Truth.Append[2]))
	}
	st := svc.Status()
	if n0, n1 := st.Collectors[0].Translate.Reports[dtawire.OpKeyWrite], st.Collectors[1].Translate.Reports[dtawire.OpKeyWrite]; n0 == 0 || n1 == 0 {
		t.Fatalf("key-writes per collector: %d, %d", n0, n1)
	}
}

// waitStatus polls the translator's status, fresh (see FreshStatus),
// until ok.
func waitStatus(t testing.TB, svc *Service, ok func(*Status) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st, _ := svc.FreshStatus(ctx)
		if ok(&st) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("status %+v", st)
		}
	}
}
