package inject

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/verbs"
	"github.com/rdma-appliance/appliance/verbs/roce"
	"github.com/rdma-appliance/appliance/verbs/soft"
)

func TestWRR(t *testing.T) {
	w, err := mirror.NewWRR([]int{1, 1, 2})
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	counts := make([]int, 3)
	for i := 0; i < 400; i++ {
		n := w.Next()
		counts[n]++
		if i < 8 {
			got = append(got, n)
		}
	}
	if counts[0] != 100 || counts[1] != 100 || counts[2] != 200 {
		t.Fatalf("counts %v", counts)
	}
	// Smooth: the heavy target never takes two turns in a row here.
	if fmt.Sprint(got) != "[2 0 1 2 2 0 1 2]" {
		t.Fatalf("sequence %v", got)
	}
	if _, err := mirror.NewWRR([]int{1, 0}); err == nil {
		t.Fatal("zero weight accepted")
	}
}

// collector stands in for the dumpers: it drains mirror ports and keeps
// every restored copy.
type collector struct {
	mu     sync.Mutex
	copies map[uint64][]byte
	meta   map[uint64]mirror.Meta
	bad    int
	dup    int
}

func (c *collector) drain(p dpdk.Port) int {
	var burst [32]*dpdk.Packet
	total := 0
	for q := 0; q < max(p.Info().RxQueues, 1); q++ {
		n := p.RxBurst(q, burst[:])
		total += n
		c.mu.Lock()
		for _, pkt := range burst[:n] {
			f := append([]byte(nil), pkt.Data()...)
			var np header.Parsed
			if header.Decode(f, &np) != nil {
				c.bad++
				continue
			}
			if np.UDP(f).DstPort() != mirror.DefaultRewritePort {
				c.bad++
				continue
			}
			m, err := mirror.Restore(f, &np)
			if err != nil {
				c.bad++
				continue
			}
			if _, dup := c.copies[m.Seq]; dup {
				c.dup++
			}
			c.copies[m.Seq], c.meta[m.Seq] = f, m
		}
		c.mu.Unlock()
		dpdk.FreeBulk(burst[:n])
	}
	return total
}

// lumina is the in-process Lumina data path: requester and responder soft
// RNICs, each on a ring link to the injector, and two mirror links.
type lumina struct {
	req, resp *soft.Device
	inj       *Injector
	mirrors   []dpdk.Port
	col       *collector
	reqIP     netip.Addr
	respIP    netip.Addr
}

func newLumina(t *testing.T, mcfg func(*Config)) *lumina {
	t.Helper()
	id := time.Now().UnixNano()
	pool, err := dpdk.NewPool(fmt.Sprintf("inj%d", id), 8192, dpdk.Headroom+4096+256)
	if err != nil {
		t.Fatal(err)
	}
	la := ring.NewLink(fmt.Sprintf("ia%d", id), ring.Config{RingSize: 4096})
	lb := ring.NewLink(fmt.Sprintf("ib%d", id), ring.Config{RingSize: 4096})
	m1 := ring.NewLink(fmt.Sprintf("m1%d", id), ring.Config{RingSize: 4096, Queues: 2})
	m2 := ring.NewLink(fmt.Sprintf("m2%d", id), ring.Config{RingSize: 4096, Queues: 2})
	l := &lumina{reqIP: netip.MustParseAddr("10.0.0.1"), respIP: netip.MustParseAddr("10.0.1.1"),
		col: &collector{copies: map[uint64][]byte{}, meta: map[uint64]mirror.Meta{}}, mirrors: []dpdk.Port{m1.B(), m2.B()}}
	// No static neighbours: the hosts resolve each other with ARP, which
	// the injector answers as a proxy.
	if l.req, err = soft.NewDevice(fmt.Sprintf("req%d", id), la.A(), soft.Config{GIDs: []netip.Addr{l.reqIP}, PoolSize: 4096}); err != nil {
		t.Fatal(err)
	}
	if l.resp, err = soft.NewDevice(fmt.Sprintf("resp%d", id), lb.B(), soft.Config{GIDs: []netip.Addr{l.respIP}, PoolSize: 4096}); err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Traffic: []TrafficPort{{Name: "p0", Port: la.B()}, {Name: "p1", Port: lb.A()}},
		Mirrors: []MirrorPort{{Name: "dumper1", Port: m1.A(), Weight: 1}, {Name: "dumper2", Port: m2.A(), Weight: 1}},
		Routes: []Route{{Prefix: netip.PrefixFrom(l.reqIP, 32), Port: 0, MAC: header.MAC(la.A().Info().MAC)},
			{Prefix: netip.PrefixFrom(l.respIP, 32), Port: 1, MAC: header.MAC(lb.B().Info().MAC)}},
		Pool: pool, Seed: 1,
	}
	if mcfg != nil {
		mcfg(&cfg)
	}
	if l.inj, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = l.inj.Run(ctx) }()
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			n := 0
			for _, p := range l.mirrors {
				n += l.col.drain(p)
			}
			if n == 0 {
				time.Sleep(20 * time.Microsecond)
			}
		}
	}()
	for _, d := range []*soft.Device{l.req, l.resp} {
		if err := d.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		l.req.Close()
		l.resp.Close()
		cancel()
		wg.Wait()
		for _, p := range []dpdk.Port{la.A(), la.B(), lb.A(), lb.B(), m1.A(), m1.B(), m2.A(), m2.B()} {
			p.Close()
		}
		pool.Close()
	})
	return l
}

// qpEnd is one side of an RC connection.
type qpEnd struct {
	qp  verbs.QP
	cq  verbs.CQ
	mr  verbs.MR
	buf []byte
	psn uint32
}

func rcEnd(t *testing.T, d *soft.Device, size int, psn uint32) *qpEnd {
	t.Helper()
	pd, err := d.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := d.CreateCQ(verbs.CQAttr{CQE: 256})
	if err != nil {
		t.Fatal(err)
	}
	qp, err := pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, size)
	mr, err := pd.RegMR(buf, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	return &qpEnd{qp: qp, cq: cq, mr: mr, buf: buf, psn: psn}
}

func connectRC(t *testing.T, e *qpEnd, peer *qpEnd, dgid netip.Addr) {
	t.Helper()
	steps := []struct {
		a verbs.QPAttr
		m verbs.AttrMask
	}{
		{verbs.QPAttr{State: verbs.QPSInit, Port: 1, AccessFlags: verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead},
			verbs.AttrState | verbs.AttrPKeyIndex | verbs.AttrPort | verbs.AttrAccessFlags},
		{verbs.QPAttr{State: verbs.QPSRTR, PathMTU: verbs.MTU1024, DestQPN: peer.qp.QPN(), RQPSN: peer.psn, MaxDestRdAtomic: 4,
			MinRNRTimer: 1, AH: verbs.AHAttr{DGID: verbs.GIDFromAddr(dgid), Port: 1}},
			verbs.AttrState | verbs.AttrAV | verbs.AttrPathMTU | verbs.AttrDestQPN | verbs.AttrRQPSN | verbs.AttrMaxDestRdAtomic | verbs.AttrMinRNRTimer},
		{verbs.QPAttr{State: verbs.QPSRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, SQPSN: e.psn, MaxRdAtomic: 4},
			verbs.AttrState | verbs.AttrTimeout | verbs.AttrRetryCnt | verbs.AttrRNRRetry | verbs.AttrSQPSN | verbs.AttrMaxQPRdAtomic},
	}
	for _, s := range steps {
		if err := e.qp.Modify(&s.a, s.m); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEndToEnd is the acceptance run: three QPs of WRITEs through the
// injector with a drop, an ECN mark and a corruption on different QPs. The
// mirrored copies form a complete trace in which exactly the targeted
// packets carry their event; the dropped packet is retransmitted, the
// marked one draws a CNP, the corrupted one fails the receiver's ICRC check
// and is retransmitted; memory ends up correct. Each intent names one packet
// (Lumina's controller keys events at initial PSN + psn), so every message's
// packet has its own intent, all in round 1. In the paper's ITER mode a
// retransmission moves the connection to round 2 for good, so the drop and
// the corruption hit only the first message; in the public P4 mode rounds
// restart with every message and they hit both.
func TestEndToEnd(t *testing.T) {
	for _, mode := range []intent.IterMode{intent.IterPaper, intent.IterP4} {
		t.Run(mode.String(), func(t *testing.T) { endToEnd(t, mode) })
	}
}

func endToEnd(t *testing.T, mode intent.IterMode) {
	l := newLumina(t, func(c *Config) { c.IterMode = mode })
	const nqp, msgs, size = 3, 2, 4096 // 4 packets per message at MTU 1024
	var reqs, resps []*qpEnd
	var conns []intent.Conn
	for i := 0; i < nqp; i++ {
		r := rcEnd(t, l.req, msgs*size, uint32(0x100*(i+1)))
		s := rcEnd(t, l.resp, msgs*size, uint32(0xfffffe-i))
		connectRC(t, r, s, l.respIP)
		connectRC(t, s, r, l.reqIP)
		reqs, resps = append(reqs, r), append(resps, s)
		conns = append(conns, intent.Conn{RequesterIP: l.reqIP, RequesterQPN: r.qp.QPN(), RequesterIPSN: r.psn,
			ResponderIP: l.respIP, ResponderQPN: s.qp.QPN(), ResponderIPSN: s.psn})
	}
	g := intent.Geometry{Verb: intent.VerbWrite, MessageSize: size, MTU: 1024, NumMessages: msgs}
	var intents []intent.Intent
	for _, in := range []intent.Intent{{QP: 0, PSN: 2, Iter: 1, Type: mirror.EventDrop}, {QP: 1, PSN: 1, Iter: 1, Type: mirror.EventECN},
		{QP: 2, PSN: 3, Iter: 1, Type: mirror.EventBitError}} {
		for m := 0; m < msgs; m++ {
			in := in
			in.PSN += m * g.PacketsPerMessage()
			intents = append(intents, in)
		}
	}
	es, err := l.inj.Load(intents, conns, g, intent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 3*msgs {
		t.Fatalf("%d entries", len(es))
	}
	l.inj.Reset()
	// tx-depth 1: one message at a time per QP, as Lumina requires for
	// non-ECN events.
	for m := 0; m < msgs; m++ {
		for i, r := range reqs {
			for j := range size {
				r.buf[m*size+j] = byte(i*7 + m*3 + j)
			}
			wr := verbs.SendWR{ID: uint64(m), Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
				SGL:        []verbs.SGE{{Addr: r.mr.Addr() + uint64(m*size), Length: size, LKey: r.mr.LKey()}},
				RemoteAddr: resps[i].mr.Addr() + uint64(m*size), RKey: resps[i].mr.RKey()}
			if err := r.qp.PostSend([]verbs.SendWR{wr}); err != nil {
				t.Fatal(err)
			}
		}
		for i, r := range reqs {
			wc := make([]verbs.WC, 1)
			deadline := time.Now().Add(10 * time.Second)
			for {
				n, _ := r.cq.Poll(wc)
				if n == 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("QP %d message %d: no completion; injector %+v", i, m, l.inj.Stats())
				}
				time.Sleep(50 * time.Microsecond)
			}
			if wc[0].Status != verbs.WCSuccess {
				t.Fatalf("QP %d message %d: %v", i, m, wc[0].Status)
			}
		}
	}
	for i := range reqs {
		if !bytes.Equal(reqs[i].buf, resps[i].buf) {
			t.Fatalf("QP %d: responder memory differs", i)
		}
	}
	// Let the last ACKs and copies drain, then compare the trace with the
	// injector's counters.
	var st mirror.InjectorStats
	for deadline := time.Now().Add(5 * time.Second); ; {
		time.Sleep(20 * time.Millisecond)
		st = l.inj.Stats()
		l.col.mu.Lock()
		n := len(l.col.copies)
		l.col.mu.Unlock()
		if uint64(n) == st.Mirrored || time.Now().After(deadline) {
			break
		}
	}
	col := l.col
	col.mu.Lock()
	defer col.mu.Unlock()
	if col.bad != 0 || col.dup != 0 {
		t.Fatalf("%d bad and %d duplicate copies", col.bad, col.dup)
	}
	if st.Mirrored != st.RxRoCE || uint64(len(col.copies)) != st.Mirrored {
		t.Fatalf("trace %d packets, mirrored %d, RoCE received %d", len(col.copies), st.Mirrored, st.RxRoCE)
	}
	seqs := make([]uint64, 0, len(col.copies))
	for s := range col.copies {
		seqs = append(seqs, s)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	var lastTS int64
	events := map[mirror.EventType][]uint32{}
	var p roce.Packet
	psnSeen := map[[2]uint32]int{}
	cnps := 0
	for i, s := range seqs {
		if s != uint64(i+1) {
			t.Fatalf("sequence %d at position %d", s, i)
		}
		m := col.meta[s]
		if m.Timestamp <= lastTS {
			t.Fatalf("timestamp goes back at seq %d", s)
		}
		lastTS = m.Timestamp
		f := col.copies[s]
		if err := roce.Parse(f, &p); err != nil || p.VerifyICRC(f) != nil {
			t.Fatalf("seq %d: restored copy %v", s, err)
		}
		if p.Opcode == roce.OpCNP {
			cnps++
		}
		if p.Info().Payload {
			psnSeen[[2]uint32{p.DestQP, p.PSN}]++
		}
		if m.Event != mirror.EventNone {
			events[m.Event] = append(events[m.Event], p.PSN)
			if m.Event == mirror.EventECN && p.ECN != header.ECNCE {
				t.Fatalf("seq %d: ECN event but ECN %d after restore", s, p.ECN)
			}
		}
	}
	// Exactly the targeted packets carry events.
	hitsWanted := map[mirror.EventType]int{mirror.EventECN: msgs, mirror.EventDrop: 1, mirror.EventBitError: 1}
	if mode == intent.IterP4 {
		hitsWanted[mirror.EventDrop], hitsWanted[mirror.EventBitError] = msgs, msgs
	}
	_, hits := l.inj.Table().Entries()
	for k, e := range es {
		// Entries go intent by intent, message by message.
		if m := k % msgs; m >= hitsWanted[e.Event] {
			if hits[k] != 0 {
				t.Errorf("entry %d %v (message %d) hit, but its round has passed", k, e, m)
			}
			continue
		}
		if hits[k] != 1 {
			t.Errorf("entry %d %v: %d hits", k, e, hits[k])
		}
		psns := events[e.Event]
		found := false
		for _, x := range psns {
			if x == e.Key.PSN {
				found = true
			}
		}
		if !found {
			t.Errorf("entry %d %v: no mirrored packet carries it", k, e)
		}
	}
	for ev, want := range hitsWanted {
		if len(events[ev]) != want {
			t.Errorf("%v on %d packets %v, want %d", ev, len(events[ev]), events[ev], want)
		}
	}
	// The dropped and the corrupted packets were sent again.
	for k, e := range es {
		if e.Event == mirror.EventECN || hits[k] == 0 {
			continue
		}
		if n := psnSeen[[2]uint32{e.Key.DstQPN, e.Key.PSN}]; n < 2 {
			t.Errorf("%v: packet seen %d times, want a retransmission", e, n)
		}
	}
	// The ECN marks drew CNPs; the corruptions failed the receiver's ICRC.
	if got := l.resp.Counter(soft.CntNpCnpSent); got == 0 || cnps == 0 {
		t.Errorf("np_cnp_sent %d, CNPs in the trace %d", got, cnps)
	}
	if got := l.resp.Counter(soft.CntRxICRCEncapsulated); got != uint64(hitsWanted[mirror.EventBitError]) {
		t.Errorf("receiver ICRC drops %d, want %d", got, hitsWanted[mirror.EventBitError])
	}
	var tp mirror.PortStats
	for _, ps := range st.Ports {
		if ps.Name == "p0" {
			tp = ps
		}
	}
	if tp.Dropped != uint64(hitsWanted[mirror.EventDrop]) || tp.Corrupted != uint64(hitsWanted[mirror.EventBitError]) ||
		tp.ECNMarked != msgs || tp.ARPReply == 0 {
		t.Errorf("port p0 counters %+v", tp)
	}
	mirrored := uint64(0)
	for _, ps := range st.Ports {
		if ps.Role == "mirror" {
			mirrored += ps.Mirrored
			if ps.Mirrored == 0 {
				t.Errorf("mirror port %s got nothing", ps.Name)
			}
		}
	}
	if mirrored != st.Mirrored {
		t.Errorf("mirror ports sent %d, sequence says %d", mirrored, st.Mirrored)
	}
	t.Logf("trace %d packets, %d CNPs; injector %+v", len(seqs), cnps, st)
}
