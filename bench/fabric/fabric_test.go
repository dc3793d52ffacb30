package fabric

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/rdma-appliance/appliance/bench/fabric/workload"
	"github.com/rdma-appliance/appliance/internal/topo"
)

const gbps100 = 100e9

// star is n hosts on one switch, every link bw and delay.
func star(t testing.TB, n int, bw float64, delay int64) (*topo.Graph, *topo.Routes) {
	t.Helper()
	g := &topo.Graph{}
	sw := g.AddNode(topo.Node{Name: "sw", Kind: topo.Switch, Layer: "tor"})
	for i := range n {
		h := g.AddNode(topo.Node{Name: fmt.Sprintf("h%d", i), Kind: topo.Host})
		g.AddLink(h, sw, bw, delay)
	}
	g.NumberPorts()
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	return g, g.ShortestPaths()
}

func run(t testing.TB, s *Sim, until int64) *Results {
	t.Helper()
	r, err := s.Run(context.Background(), until)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func host(g *topo.Graph, name string) int {
	i, _ := g.Node(name)
	return i
}

// TestSingleFlowLineRate: one flow alone reaches the line rate less the
// headers, preamble and gap of every packet.
func TestSingleFlowLineRate(t *testing.T) {
	g, r := star(t, 2, gbps100, 1000)
	cfg := DefaultConfig()
	const size = 20 << 20
	s, err := New(g, r, []workload.Flow{{ID: 0, Src: host(g, "h0"), Dst: host(g, "h1"), Size: size}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, s, 1e9)
	f := res.Flows[0]
	if !f.Done || f.Retransmits != 0 {
		t.Fatalf("flow %+v", f)
	}
	mtu := float64(cfg.Host.MTU)
	want := gbps100 / 1e9 * mtu / (mtu + HeaderBytes + WireOverhead)
	// The FCT includes one path's latency and the last ACK's way back:
	// a few microseconds of 1.7 ms.
	if f.Gbps > want || f.Gbps < want*0.99 {
		t.Fatalf("goodput %.2f Gbps, want %.2f (line rate less headers) within 1%%", f.Gbps, want)
	}
	t.Logf("goodput %.3f Gbps of %.3f", f.Gbps, want)
}

// TestResumedFlowRate: a flow already running when the simulation starts
// (workload.Flow.Rate) is paced at its rate by DCQCN, not sent at line
// rate; DCQCN's recovery then raises it only slowly (fast recovery keeps
// the target, additive steps are 40 Mbit/s each 55 us).
func TestResumedFlowRate(t *testing.T) {
	g, r := star(t, 2, gbps100, 1000)
	cfg := DefaultConfig()
	const size = 1 << 20
	s, err := New(g, r, []workload.Flow{{ID: 0, Src: host(g, "h0"), Dst: host(g, "h1"), Size: size, Rate: 10e9}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := run(t, s, 1e9).Flows[0]
	// 1 MB at 10 Gbit/s takes 839 us on the wire (headers included), at
	// line rate 84 us.
	if !f.Done || f.Gbps > 11 || f.Gbps < 8 {
		t.Fatalf("flow resumed at 10 Gbit/s: %+v", f)
	}
}

// incastConfig is a switch without ECN or DCQCN whose whole buffer is
// one pool a group may fill (alpha huge), byte cells: the closed form's
// buffer.
func incastConfig(headroom int64, pfc bool) Config {
	cfg := DefaultConfig()
	cfg.Switch.Buffer, cfg.Switch.Cell, cfg.Switch.Guaranteed, cfg.Switch.Alpha = 2<<20, 1, 0, 1e9
	cfg.Switch.Headroom, cfg.Switch.XonOffset = headroom, 0
	cfg.Switch.ECN = false
	cfg.Host.DCQCN = false
	if !pfc {
		cfg.Switch.Lossless = 0
	}
	return cfg
}

// TestIncastFillTime: N senders at R into one receiver at C = R fill a
// buffer B in B / (N R - C): the first drop (PFC off) comes then.
func TestIncastFillTime(t *testing.T) {
	const n = 4
	g, r := star(t, n+1, gbps100, 1000)
	var flows []workload.Flow
	for i := range n {
		flows = append(flows, workload.Flow{ID: i, Src: host(g, fmt.Sprintf("h%d", i+1)), Dst: host(g, "h0"), Size: 4 << 20})
	}
	cfg := incastConfig(0, false)
	s, err := New(g, r, flows, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var firstDrop int64 = -1
	s.SetHooks(&Hooks{Enqueue: func(_, _ int, _ *Packet, _ int64) {}})
	step := int64(200)
	for now := int64(0); now < 2e6 && firstDrop < 0; now += step {
		res := run(t, s, now)
		if res.Stats.Drops > 0 {
			firstDrop = now
		}
	}
	if firstDrop < 0 {
		t.Fatal("no drop")
	}
	frame := float64(cfg.Host.MTU + HeaderBytes)
	growth := float64(n-1) * gbps100 / 8 * frame / (frame + WireOverhead) // bytes/s of queue
	shared := float64(s.net.switches[0].sharedSize)
	// The queue starts to build once the senders' first frames arrive:
	// one frame time plus the link delay.
	start := 1000 + float64(wireNs(int32(frame), gbps100))
	want := start + shared/growth*1e9
	if math.Abs(float64(firstDrop)-want)/want > 0.03 {
		t.Fatalf("first drop at %d ns, closed form B/(NR-C) gives %.0f ns", firstDrop, want)
	}
	t.Logf("first drop at %d ns; B/(NR-C) %.0f ns", firstDrop, want)
}

// TestIncastHeadroom: with PFC, enough headroom (a round trip of data
// at line rate plus a frame or two) loses nothing; too little loses.
func TestIncastHeadroom(t *testing.T) {
	const n = 8
	g, r := star(t, n+1, gbps100, 2000)
	var flows []workload.Flow
	for i := range n {
		flows = append(flows, workload.Flow{ID: i, Src: host(g, fmt.Sprintf("h%d", i+1)), Dst: host(g, "h0"), Size: 2 << 20})
	}
	// In flight after XOFF: the pause's way up (2 us + its frame), the
	// upstream finishing its frame, data's way down (2 us): about 2
	// delays of line rate plus two MTUs.
	rtt := 2 * 2000e-9 * gbps100 / 8
	for _, tc := range []struct {
		headroom int64
		lossless bool
	}{{int64(rtt) + 4*2048, true}, {2048, false}} {
		s, err := New(g, r, flows, incastConfig(tc.headroom, true))
		if err != nil {
			t.Fatal(err)
		}
		res := run(t, s, 50e6)
		done := 0
		for _, f := range res.Flows {
			if f.Done {
				done++
			}
		}
		if tc.lossless && (res.Stats.Drops != 0 || done != n || res.Stats.PauseFrames == 0) {
			t.Fatalf("headroom %d: %d drops, %d flows done, %d pauses", tc.headroom, res.Stats.Drops, done, res.Stats.PauseFrames)
		}
		if !tc.lossless && res.Stats.Drops == 0 {
			t.Fatalf("headroom %d: no drop", tc.headroom)
		}
		// The drops are the ingress priority groups' of the flows'
		// priority, as a switch counts them per port and group.
		var pg [NumPrio]uint64
		for _, pr := range res.Ports {
			for p, d := range pr.PGDrops {
				pg[p] += d
			}
		}
		if prio := PrioData; pg[prio] != res.Stats.Drops || pg[prio] != sumAll(pg) {
			t.Fatalf("headroom %d: %d drops, by priority group %v (flows on %d, the default)", tc.headroom, res.Stats.Drops, pg, prio)
		}
		t.Logf("headroom %d B: drops %d, pauses %d, flows done %d", tc.headroom, res.Stats.Drops, res.Stats.PauseFrames, done)
	}
}

// TestREDCurve: the marking probability is 0 below Kmin, rises linearly
// to Pmax at Kmax, and is 1 above.
func TestREDCurve(t *testing.T) {
	g, r := star(t, 2, gbps100, 1000)
	s, err := New(g, r, nil, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	sw := &s.net.switches[0]
	sw.cfg = SwitchConfig{Kmin: 10000, Kmax: 110000, Pmax: 0.2}
	c := sw.cfg
	for _, q := range []int64{0, 9999, 10000, 35000, 60000, 85000, 109999, 110000, 500000} {
		want := 0.0
		switch {
		case q >= c.Kmax:
			want = 1
		case q >= c.Kmin:
			want = c.Pmax * float64(q-c.Kmin) / float64(c.Kmax-c.Kmin)
		}
		const trials = 200000
		marked := 0
		for range trials {
			if s.net.mark(sw, q) {
				marked++
			}
		}
		got := float64(marked) / trials
		if math.Abs(got-want) > 4*math.Sqrt(want*(1-want)/trials)+1e-9 {
			t.Fatalf("queue %d: marked %.4f, RED says %.4f", q, got, want)
		}
	}
}

// loopNet is three hosts on two switches joined twice (s0-s1 over two
// links); h2 sits on s1. With loop set, s1 sends traffic for h2 back to
// s0 and s0 to s1: a routing loop.
func loopNet(t testing.TB, loop bool) (*topo.Graph, *topo.Routes) {
	g := &topo.Graph{}
	s0 := g.AddNode(topo.Node{Name: "s0", Kind: topo.Switch, Layer: "tor"})
	s1 := g.AddNode(topo.Node{Name: "s1", Kind: topo.Switch, Layer: "tor"})
	h0 := g.AddNode(topo.Node{Name: "h0", Kind: topo.Host})
	h1 := g.AddNode(topo.Node{Name: "h1", Kind: topo.Host})
	h2 := g.AddNode(topo.Node{Name: "h2", Kind: topo.Host})
	g.AddLink(h0, s0, gbps100, 1000)
	g.AddLink(h1, s0, gbps100, 1000)
	g.AddLink(s0, s1, gbps100, 1000)
	g.AddLink(h2, s1, gbps100, 1000)
	g.NumberPorts()
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	r := g.ShortestPaths()
	if loop {
		// s1's port towards s0 is its port 0 (its first link).
		r.Override(s1, h2, []int{0})
	}
	return g, r
}

// TestRoutingLoopDeadlock: traffic into a routing loop fills both
// switches' buffers, PFC pauses every loop port, and throughput stops
// for good; the same traffic without the loop completes.
func TestRoutingLoopDeadlock(t *testing.T) {
	for _, loop := range []bool{true, false} {
		g, r := loopNet(t, loop)
		flows := []workload.Flow{
			{ID: 0, Src: host(g, "h0"), Dst: host(g, "h2"), Size: 8 << 20},
			{ID: 1, Src: host(g, "h1"), Dst: host(g, "h2"), Size: 8 << 20},
		}
		cfg := DefaultConfig()
		cfg.Switch.ECN, cfg.Host.DCQCN = false, false
		cfg.Switch.Buffer = 1 << 20
		s, err := New(g, r, flows, cfg)
		if err != nil {
			t.Fatal(err)
		}
		res := run(t, s, 5e6)
		s0s1, s1s0 := res.Port("s0", 2), res.Port("s1", 0)
		if !loop {
			for _, f := range res.Flows {
				if !f.Done {
					t.Fatalf("no loop: flow %+v not done", f)
				}
			}
			continue
		}
		moved := s0s1.TxData + s1s0.TxData
		res = run(t, s, 10e6)
		// Only PFC frames still move: XOFF refreshes.
		stuck := res.Port("s0", 2).TxData+res.Port("s1", 0).TxData == moved
		paused := s.net.ports[s.net.nodePorts[host(g, "s0")][2]].paused[PrioData] > s.Now() &&
			s.net.ports[s.net.nodePorts[host(g, "s1")][0]].paused[PrioData] > s.Now()
		if !stuck || !paused || res.Flows[0].Done || res.Flows[1].Done {
			t.Fatalf("loop: stuck %v, both loop ports paused %v, flows %+v; s0->s1 %+v s1->s0 %+v",
				stuck, paused, res.Flows, s0s1, s1s0)
		}
	}
}

// TestLoopedControlPacketsExpire: a flow whose ACKs route into a loop
// (its sender sits behind the misconfigured route) loses them to the
// TTL like data, instead of their circling for ever in the strict
// control class.
func TestLoopedControlPacketsExpire(t *testing.T) {
	g, r := loopNet(t, true)
	flows := []workload.Flow{{ID: 0, Src: host(g, "h2"), Dst: host(g, "h0"), Size: 64 << 10}}
	s, err := New(g, r, flows, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, s, 2e6)
	// 17 ACKs a round, at most 64 hops each, a round every timeout:
	// a few thousand frames; circling for ever, 2 ms of line rate.
	if res.Stats.TTLDrops == 0 || res.Port("s0", 2).TxPackets > 20_000 {
		t.Fatalf("TTL drops %d, s0->s1 frames %d", res.Stats.TTLDrops, res.Port("s0", 2).TxPackets)
	}
}

// TestDCQCNFairness: two long flows on one bottleneck converge to within
// 10% of each other's throughput.
func TestDCQCNFairness(t *testing.T) {
	g, r := star(t, 3, gbps100, 1000)
	flows := []workload.Flow{
		{ID: 0, Src: host(g, "h1"), Dst: host(g, "h0"), Size: 1 << 30},
		{ID: 1, Src: host(g, "h2"), Dst: host(g, "h0"), Size: 1 << 30, Start: 100_000},
	}
	s, err := New(g, r, flows, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	run(t, s, 20e6) // converge
	a0, a1 := s.net.flows[0].una, s.net.flows[1].una
	run(t, s, 40e6)
	d0, d1 := float64(s.net.flows[0].una-a0), float64(s.net.flows[1].una-a1)
	if d0 == 0 || d1 == 0 || math.Abs(d0-d1)/max(d0, d1) > 0.1 {
		t.Fatalf("packets delivered over 20 ms: %.0f and %.0f", d0, d1)
	}
	res, _ := s.Run(context.Background(), 40e6)
	if res.Stats.CNPs == 0 {
		t.Fatal("no CNP: DCQCN was not exercised")
	}
	t.Logf("over 20 ms: %.0f and %.0f packets (%.1f%% apart), %d CNPs", d0, d1, 100*math.Abs(d0-d1)/max(d0, d1), res.Stats.CNPs)
}

// TestDeterminism: the same seed gives byte-identical results (and
// TestParallelMatchesSequential: the same ones on 2 and 4 partitions).
func TestDeterminism(t *testing.T) {
	out := func() []byte {
		g, r := star(t, 6, gbps100, 1000)
		var flows []workload.Flow
		for i := range 20 {
			flows = append(flows, workload.Flow{ID: i, Src: host(g, fmt.Sprintf("h%d", i%5+1)), Dst: host(g, "h0"),
				Size: int64(1+i) * 50000, Start: int64(i) * 3000})
		}
		cfg := DefaultConfig()
		cfg.Seed = 7
		cfg.SampleInterval = 10_000
		s, err := New(g, r, flows, cfg)
		if err != nil {
			t.Fatal(err)
		}
		var series bytes.Buffer
		s.SetSeries(&series)
		res := run(t, s, 1e9)
		var b bytes.Buffer
		if err := res.WriteJSON(&b); err != nil {
			t.Fatal(err)
		}
		return append(b.Bytes(), series.Bytes()...)
	}
	a, b := out(), out()
	if !bytes.Equal(a, b) {
		t.Fatal("two runs with one seed differ")
	}
}

// TestBadInput: flows between non-hosts, a buffer with no shared part.
func TestBadInput(t *testing.T) {
	g, r := star(t, 2, gbps100, 1000)
	if _, err := New(g, r, []workload.Flow{{Src: 0, Dst: 1, Size: 10}}, DefaultConfig()); err == nil {
		t.Fatal("a flow from a switch")
	}
	cfg := DefaultConfig()
	cfg.Switch.Buffer = 1000
	if _, err := New(g, r, nil, cfg); err == nil {
		t.Fatal("no shared buffer")
	}
	cfg = DefaultConfig()
	cfg.Host.MTU = 10
	if _, err := New(g, r, nil, cfg); err == nil {
		t.Fatal("MTU 10")
	}
}

// TestPFCStorm: a receiver that keeps sending PAUSE stalls the flows to
// it; its switch fills and pauses the senders in turn (the storm spreads
// upstream); once the storm ends, every flow completes.
func TestPFCStorm(t *testing.T) {
	g, r := star(t, 4, gbps100, 1000)
	flows := []workload.Flow{
		{ID: 0, Src: host(g, "h1"), Dst: host(g, "h0"), Size: 16 << 20},
		{ID: 1, Src: host(g, "h2"), Dst: host(g, "h0"), Size: 16 << 20},
	}
	cfg := DefaultConfig()
	cfg.Switch.Buffer = 2 << 20
	s, err := New(g, r, flows, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddFault(HostFault{Host: "h0", Prio: PrioData, Quanta: 0xffff, Interval: 100_000, From: 200_000, Until: 3_000_000}); err != nil {
		t.Fatal(err)
	}
	run(t, s, 1_000_000)
	u0, u1 := s.net.flows[0].una, s.net.flows[1].una
	res := run(t, s, 2_500_000)
	if s.net.flows[0].una != u0 || s.net.flows[1].una != u1 {
		t.Fatalf("flows moved during the storm: %d->%d, %d->%d", u0, s.net.flows[0].una, u1, s.net.flows[1].una)
	}
	toSenders := res.Port("sw", 1).PauseSent + res.Port("sw", 2).PauseSent
	if res.Stats.InjectedPauses == 0 || toSenders == 0 || res.Port("sw", 0).PausedNs == 0 {
		t.Fatalf("storm did not spread: injected %d, XOFF to senders %d, sw->h0 paused %d ns",
			res.Stats.InjectedPauses, toSenders, res.Port("sw", 0).PausedNs)
	}
	res = run(t, s, 50e6)
	for _, f := range res.Flows {
		if !f.Done {
			t.Fatalf("after the storm: %+v", f)
		}
	}
	if err := s.AddFault(HostFault{Host: "nobody", Interval: 1}); err == nil {
		t.Fatal("a fault on no host")
	}
}

// TestWRR: two classes with weights 3 and 1 share an egress in that
// ratio while both are backlogged.
func TestWRR(t *testing.T) {
	g, r := star(t, 3, gbps100, 1000)
	flows := []workload.Flow{
		{ID: 0, Src: host(g, "h1"), Dst: host(g, "h0"), Size: 1 << 30, Prio: 1},
		{ID: 1, Src: host(g, "h2"), Dst: host(g, "h0"), Size: 1 << 30, Prio: 2},
	}
	cfg := DefaultConfig()
	cfg.Switch.ECN, cfg.Host.DCQCN = false, false
	cfg.Switch.Lossless = 1<<1 | 1<<2
	cfg.Switch.Weights = [NumPrio]int{1, 3, 1, 1, 1, 1, 0, 0}
	s, err := New(g, r, flows, cfg)
	if err != nil {
		t.Fatal(err)
	}
	run(t, s, 1e6)
	a0, a1 := s.net.flows[0].una, s.net.flows[1].una
	res := run(t, s, 3e6)
	d0, d1 := float64(s.net.flows[0].una-a0), float64(s.net.flows[1].una-a1)
	if ratio := d0 / d1; math.Abs(ratio-3) > 0.1 || res.Stats.Drops != 0 {
		t.Fatalf("weights 3:1 gave %.0f:%.0f packets (%.2f), %d drops", d0, d1, ratio, res.Stats.Drops)
	}
}

// TestECMP: in a fat-tree, flows between pods spread over every uplink of
// their edge switch.
func TestECMP(t *testing.T) {
	g, err := topo.FatTree(4, gbps100, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var flows []workload.Flow
	for i := range 64 {
		flows = append(flows, workload.Flow{ID: i, Src: host(g, "h0"), Dst: host(g, fmt.Sprintf("h%d", 4+i%12)), Size: 64 << 10,
			Start: int64(i) * 1000})
	}
	s, err := New(g, g.ShortestPaths(), flows, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, s, 1e9)
	tor, _ := g.Node("tor0")
	used := 0
	for num, ref := range g.Ports(tor) {
		if g.Nodes[ref.Peer].Kind == topo.Switch && res.Port("tor0", num).TxData > 0 {
			used++
		}
	}
	if used != 2 {
		t.Fatalf("tor0 used %d of its 2 uplinks", used)
	}
	for _, f := range res.Flows {
		if !f.Done {
			t.Fatalf("flow %+v", f)
		}
	}
}

// TestProcessingDelay: a receiver that holds each packet d before
// handling it delays the last ACK, so the flow's FCT grows by d.
func TestProcessingDelay(t *testing.T) {
	g, r := star(t, 2, gbps100, 1000)
	fct := func(d int64) int64 {
		cfg := DefaultConfig()
		cfg.Hosts = map[string]HostConfig{"h1": func() HostConfig { h := cfg.Host; h.ProcessingDelay = d; return h }()}
		s, err := New(g, r, []workload.Flow{{Src: host(g, "h0"), Dst: host(g, "h1"), Size: 1 << 20}}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return run(t, s, 1e9).Flows[0].FCT
	}
	base, slow := fct(0), fct(10_000)
	if d := slow - base; d < 10_000 || d > 10_100 {
		t.Fatalf("FCT %d -> %d with 10 us processing delay", base, slow)
	}
}

// TestRailOptimized: all-to-all among a rail-optimized cluster's RNICs
// finishes without loss.
func TestRailOptimized(t *testing.T) {
	g, err := topo.RailOptimized(4, 4, 2, gbps100, gbps100*2, 1000)
	if err != nil {
		t.Fatal(err)
	}
	flows := workload.AllToAll(g.Hosts(), 256<<10, 0)
	s, err := New(g, g.ShortestPaths(), flows, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, s, 1e9)
	for _, f := range res.Flows {
		if !f.Done {
			t.Fatalf("flow %+v", f)
		}
	}
	if res.Stats.Drops != 0 || len(res.Flows) != 16*15 {
		t.Fatalf("%d flows, %d drops", len(res.Flows), res.Stats.Drops)
	}
	t.Logf("%d flows, p99 FCT %d ns, %d CNPs, %d XOFF", len(res.Flows), res.FCTPercentile(99), res.Stats.CNPs, res.Stats.PauseFrames)
}

func sumAll(v [NumPrio]uint64) (n uint64) {
	for _, x := range v {
		n += x
	}
	return n
}
