package hostmesh

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/collector/hostmeshanalyzer"
	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/internal/service"
	"github.com/rdma-appliance/appliance/verbs"
	"github.com/rdma-appliance/appliance/verbs/soft"
)

// TestSplitGolden: the four timestamps' arithmetic, with clock offsets
// between the host and the RNICs that must cancel.
func TestSplitGolden(t *testing.T) {
	for _, tc := range []struct {
		ts        Timestamps
		net, proc int64
		bad       bool
	}{
		// Host clock at 1000, RNIC clock at 5e9: 2 us posting, 4 us on the
		// wire, 3 us to the poll.
		{Timestamps{T1: 1000, T2: 5e9 + 2000, T3: 5e9 + 6000, T4: 1000 + 9000}, 4000, 5000, false},
		// The same probe with the RNIC clock behind the host's.
		{Timestamps{T1: 7e12, T2: 100 + 2000, T3: 100 + 6000, T4: 7e12 + 9000}, 4000, 5000, false},
		// No time on the host at all.
		{Timestamps{T1: 50, T2: 70, T3: 90, T4: 70}, 20, 0, false},
		{Timestamps{T1: 1, T2: 0, T3: 10, T4: 20}, 0, 0, true},        // no send timestamp
		{Timestamps{T1: 1, T2: 30, T3: 10, T4: 20}, 0, 0, true},       // arrived before it left
		{Timestamps{T1: 100, T2: 1, T3: 500, T4: 200}, 0, 0, true},    // wire longer than the whole
		{Timestamps{T1: 100, T2: 1, T3: 5, T4: 50}, 0, 0, true},       // polled before posted
		{Timestamps{T1: 100, T2: 1e9, T3: 1e9, T4: 100}, 0, 0, false}, // all at once
	} {
		n, p, err := tc.ts.Split()
		if (err != nil) != tc.bad || n != tc.net || p != tc.proc {
			t.Errorf("%+v: network %d processing %d err %v; want %d %d bad %v", tc.ts, n, p, err, tc.net, tc.proc, tc.bad)
		}
	}
}

func TestProbeCodec(t *testing.T) {
	p := Probe{HostID: 0x1122334455667788, Src: 3, Dst: 7, SPort: 0xc123, Seq: 99, T1: -5, Epoch: 4}
	var b [ProbeSize]byte
	p.Encode(b[:])
	var q Probe
	if err := q.Decode(b[:]); err != nil || q != p {
		t.Fatalf("%+v %v", q, err)
	}
	b[20] ^= 1
	if q.Decode(b[:]) != ErrBadCRC || q.Decode(b[:10]) != ErrShortProbe || q.Decode(make([]byte, 60)) != ErrNotProbe {
		t.Fatal("corrupt probes accepted")
	}
}

// TestCore: targets are other live RNICs, the pool rotates, late and
// foreign probes are refused and counted, timeouts expire.
func TestCore(t *testing.T) {
	rn := []RNIC{{"a", netip.MustParseAddr("10.0.0.1")}, {"b", netip.MustParseAddr("10.0.0.2")}, {"c", netip.MustParseAddr("10.0.0.3")}}
	c, err := NewCore(Config{Host: "h", Seed: 1, Interval: time.Millisecond, Timeout: 10 * time.Millisecond, Rotate: time.Millisecond, PoolSize: 2}, rn)
	if err != nil {
		t.Fatal(err)
	}
	ports := map[uint16]bool{}
	var sends []Send
	for k := range 40 {
		s, ok := c.Next(k%3, int64(k)*int64(time.Millisecond))
		if !ok || s.Dst == k%3 {
			t.Fatalf("probe %d: %+v %v", k, s, ok)
		}
		ports[s.SPort] = true
		sends = append(sends, s)
	}
	if len(ports) < 4 {
		t.Fatalf("the pool did not rotate: %d ports", len(ports))
	}
	s := sends[39]
	c.Sent(s.Seq, 1000, true)
	if err := c.Received(s.Dst, s.Payload[:], 5000, 39*int64(time.Millisecond)+9000); err != nil {
		t.Fatal(err)
	}
	if err := c.Received(s.Dst, s.Payload[:], 5000, 0); err == nil {
		t.Fatal("duplicate accepted")
	}
	other, _ := NewCore(Config{Host: "x", Seed: 2}, rn)
	o, _ := other.Next(0, 0)
	if err := c.Received(o.Dst, o.Payload[:], 1, 2); err == nil {
		t.Fatal("foreign probe accepted")
	}
	if err := c.Received(0, []byte("garbage"), 1, 2); err == nil {
		t.Fatal("malformed accepted")
	}
	c.Expire(100 * int64(time.Millisecond))
	cnt := c.Counters()
	if cnt.Received != 1 || cnt.Unexpected != 1 || cnt.Foreign != 1 || cnt.Malformed != 1 || cnt.Timeouts != 39 {
		t.Fatalf("%+v", cnt)
	}
	b := c.Batch()
	if len(b.Results) != 40 || b.Results[0].Host != "h" {
		t.Fatalf("batch of %d", len(b.Results))
	}
	c.MarkDown(1)
	for k := range 10 {
		if s, ok := c.Next(0, 1e9+int64(k)); !ok || s.Dst == 1 {
			t.Fatalf("probe to a down RNIC: %+v", s)
		}
	}
	if _, ok := c.Next(1, 2e9); ok {
		t.Fatal("a down RNIC probes")
	}
	if b := c.Batch(); len(b.Down) != 1 || b.Down[0] != "b" {
		t.Fatalf("down %v", b.Down)
	}
}

// TestTraceOrder: a round of traces covers every (source, target, pool
// port) once, consecutive traces leave from different RNICs, and two agents
// with different seeds start their rounds at different places.
func TestTraceOrder(t *testing.T) {
	var rn []RNIC
	for i := range 8 {
		rn = append(rn, RNIC{fmt.Sprintf("n%d", i), netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)})})
	}
	first := map[Trace]bool{}
	for seed := range uint64(4) {
		c, err := NewCore(Config{Host: "h", Seed: seed + 1, TraceEvery: time.Microsecond}, rn)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[Trace]bool{}
		var prev Trace
		for k := range 8 * 7 * 8 {
			tr, ok := c.NextTrace(int64(k+1) * int64(time.Microsecond))
			if !ok || seen[tr] || tr.Src == tr.Dst {
				t.Fatalf("seed %d trace %d: %+v %v (seen %v)", seed, k, tr, ok, seen[tr])
			}
			if k > 0 && tr.Src == prev.Src {
				t.Fatalf("seed %d trace %d: two in a row from RNIC %d", seed, k, tr.Src)
			}
			if k == 0 {
				first[tr] = true
			}
			seen[tr], prev = true, tr
		}
	}
	if len(first) < 3 {
		t.Fatalf("agents of 4 seeds start their rounds at %d places", len(first))
	}
}

var rigSeq atomic.Int64

// softHost is n soft RNICs on ring links joined by a learning switch: one
// host's RNICs, each on its own port of the "fabric".
type softHost struct {
	devs  []*soft.Device
	ports []dpdk.Port
}

func newSoftHost(t testing.TB, n int) *softHost {
	t.Helper()
	id := rigSeq.Add(1)
	h := &softHost{}
	var far []dpdk.Port
	ctx, cancel := context.WithCancel(context.Background())
	for i := range n {
		l := ring.NewLink(fmt.Sprintf("hm%d-%d", id, i), ring.Config{RingSize: 1024})
		d, err := soft.NewDevice(fmt.Sprintf("hm%d-%d", id, i), l.A(), SoftRNICConfig(netip.AddrFrom4([4]byte{10, 77, byte(id), byte(i + 1)})))
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Start(ctx); err != nil {
			t.Fatal(err)
		}
		h.devs = append(h.devs, d)
		h.ports = append(h.ports, l.A())
		far = append(far, l.B())
	}
	br := ring.NewBridge(far...)
	done := make(chan struct{})
	go func() { br.Run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		for _, d := range h.devs {
			d.Close()
		}
	})
	return h
}

func (h *softHost) devices() []Device {
	var out []Device
	for i, d := range h.devs {
		out = append(out, Device{Name: fmt.Sprintf("r%d", i), Dev: d})
	}
	return out
}

// analyzerServer is the analyzer service over HTTP for a test.
func analyzerServer(t *testing.T, cfg hostmeshanalyzer.Config) (*hostmeshanalyzer.Analyzer, string) {
	a := hostmeshanalyzer.NewAnalyzer(cfg)
	h := service.New("hostmesh-test", "127.0.0.1:0", nil)
	hostmeshanalyzer.NewService(a, h.Log).Register(h)
	srv := httptest.NewServer(h.Handler())
	t.Cleanup(srv.Close)
	return a, srv.URL
}

// TestAgentSoftRNICs runs the agent on four soft RNICs of one host behind a
// software switch, with the analyzer over HTTP: probes flow, latencies are
// positive, no alert. Then bad input: a foreign probe, a malformed one,
// an RNIC that disappears, an analyzer that goes down; the other RNICs
// keep probing throughout.
func TestAgentSoftRNICs(t *testing.T) {
	h := newSoftHost(t, 5)
	an, url := analyzerServer(t, hostmeshanalyzer.Config{Window: time.Second})
	up := NewUploader(url, 1000)
	cfg := AgentConfig{Config: Config{Host: "h0", Interval: 10 * time.Millisecond, Timeout: 200 * time.Millisecond, Seed: 3},
		BatchEvery: 100 * time.Millisecond}
	// PFC counters: the first RNIC pauses its switch now and then (a
	// two-hundredth of the time, no storm), the second's cannot be read.
	devs := h.devices()[:4]
	t0 := dpdk.Nanotime()
	var unreadable atomic.Int64
	cfg.ReadPFC = func(_ context.Context, d Device) (PFCCounters, error) {
		switch d.Name {
		case "r0":
			n := dpdk.Nanotime() - t0
			return PFCCounters{TxPause: uint64(n / 1e6), TxPauseNs: n / 200}, nil
		case "r1":
			unreadable.Add(1)
			return PFCCounters{}, errors.New("no ethtool here")
		}
		return PFCCounters{}, nil
	}
	ag, err := NewAgent(cfg, devs, up, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ag.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ag.Run(ctx) }()
	// A failing check must stop the agent before Close frees what its
	// senders use, or the panic hides the failure.
	stopped := false
	defer func() {
		if !stopped {
			cancel()
			<-done
		}
	}()
	time.Sleep(time.Second)
	rep := an.Analyze(dpdk.Nanotime())
	c, _ := ag.Status()
	if rep.Probes < 200 || rep.Timeouts > rep.Probes/20 || rep.Network.P50 <= 0 || rep.Processing.P50 <= 0 || rep.First(hostmeshanalyzer.KindRNIC) != "" {
		t.Fatalf("report: %d probes %d timeouts net %+v proc %+v rnics %+v; counters %+v", rep.Probes, rep.Timeouts, rep.Network, rep.Processing, rep.RNICs, c)
	}
	if len(rep.PFC) != 1 || rep.PFC[0].RNIC != "h0/r0" || rep.PFC[0].TxPause == 0 || rep.PFC[0].Storming || unreadable.Load() != 1 {
		t.Fatalf("pfc %+v, unreadable read %d times", rep.PFC, unreadable.Load())
	}
	t.Logf("one second: %d probes, network P50 %v P99 %v, processing P50 %v", rep.Probes, time.Duration(rep.Network.P50),
		time.Duration(rep.Network.P99), time.Duration(rep.Processing.P50))

	// A probe of another agent and a malformed datagram from the fifth
	// RNIC, a stranger on the same switch.
	x := h.devs[4]
	pd, _ := x.AllocPD()
	cq, _ := x.CreateCQ(verbs.CQAttr{CQE: 16})
	qp, _ := pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeUD, SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	for _, s := range []struct {
		a verbs.QPAttr
		m verbs.AttrMask
	}{{verbs.QPAttr{State: verbs.QPSInit, Port: 1, QKey: 1}, verbs.AttrState | verbs.AttrPKeyIndex | verbs.AttrPort | verbs.AttrQKey},
		{verbs.QPAttr{State: verbs.QPSRTR}, verbs.AttrState}, {verbs.QPAttr{State: verbs.QPSRTS}, verbs.AttrState | verbs.AttrSQPSN}} {
		if err := qp.Modify(&s.a, s.m); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, 128)
	mr, _ := pd.RegMR(buf, verbs.AccessLocalWrite)
	foreign := Probe{HostID: 12345, Src: 1, Dst: 0, Seq: 1}
	foreign.Encode(buf)
	copy(buf[64:], "not a probe at all")
	ah, err := pd.CreateAH(verbs.AHAttr{DGID: ag.rnics[0].gid, Port: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, sge := range []verbs.SGE{{Addr: mr.Addr(), Length: ProbeSize, LKey: mr.LKey()}, {Addr: mr.Addr() + 64, Length: 18, LKey: mr.LKey()}} {
		if err := qp.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.WRSend, SGL: []verbs.SGE{sge}, AH: ah, RemoteQPN: ag.rnics[0].qp.QPN(),
			RemoteQKey: ag.cfg.QKey}}); err != nil {
			t.Fatal(err)
		}
	}
	// RNIC r3 disappears; the analyzer goes away.
	h.devs[3].Close()
	before := ag.Core().Counters().Received
	time.Sleep(time.Second)
	an2, url2 := analyzerServer(t, hostmeshanalyzer.Config{})
	up.SetAnalyzer("127.0.0.1:1") // nobody listens
	time.Sleep(500 * time.Millisecond)
	c = ag.Core().Counters()
	if c.Foreign != 1 || c.Malformed != 1 || !ag.Core().Down(3) || c.Received-before < 100 {
		t.Fatalf("counters %+v, r3 down %v, received since %d", c, ag.Core().Down(3), c.Received-before)
	}
	if up.Stats().Failures == 0 || up.Held() == 0 || up.Held() > 1000+200 {
		t.Fatalf("uploader: %d failures, %d held", up.Stats().Failures, up.Held())
	}
	// The analyzer is back (elsewhere): what was held arrives.
	up.SetAnalyzer(url2)
	time.Sleep(300 * time.Millisecond)
	cancel()
	<-done
	stopped = true
	if _, _, ok := an2.Span(); up.Held() != 0 || !ok {
		t.Fatalf("after the analyzer came back: %d held, results there %v", up.Held(), ok)
	}
	t.Logf("counters %+v; uploader %+v", c, up.Stats())
}
