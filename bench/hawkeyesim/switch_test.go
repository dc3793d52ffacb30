package hawkeyesim

import (
	"context"
	"fmt"
	"hash/crc32"
	"slices"
	"testing"

	"github.com/rdma-appliance/appliance/bench/fabric"
	"github.com/rdma-appliance/appliance/bench/fabric/workload"
	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
	"github.com/rdma-appliance/appliance/internal/topo"
)

const (
	g100 = 100e9
	g400 = 400e9
)

// net is a test fabric: the graph and node lookups by name.
type net struct {
	g *topo.Graph
	r *topo.Routes
}

func (n *net) node(t testing.TB, name string) int {
	t.Helper()
	i, ok := n.g.Node(name)
	if !ok {
		t.Fatalf("no node %s", name)
	}
	return i
}

// build makes a graph of switches and hosts from links "a-b" (switch
// names start with s); host links run at 100G, switch links at 400G, all
// 1 us.
func build(t testing.TB, links ...string) *net {
	t.Helper()
	g := &topo.Graph{}
	id := func(name string) int {
		if i, ok := g.Node(name); ok {
			return i
		}
		k := topo.Host
		if name[0] == 's' {
			k = topo.Switch
		}
		return g.AddNode(topo.Node{Name: name, Kind: k})
	}
	for _, l := range links {
		var a, b string
		for i := range l {
			if l[i] == '-' {
				a, b = l[:i], l[i+1:]
			}
		}
		ai, bi := id(a), id(b)
		bw := g400
		if a[0] != 's' || b[0] != 's' {
			bw = g100
		}
		g.AddLink(ai, bi, bw, 1000)
	}
	g.NumberPorts()
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	return &net{g: g, r: g.ShortestPaths()}
}

// noCC is PFC without ECN or DCQCN, so incasts pause rather than slow.
func noCC() fabric.Config {
	cfg := fabric.DefaultConfig()
	cfg.Switch.ECN = false
	cfg.Host.DCQCN = false
	return cfg
}

func newSim(t testing.TB, n *net, cfg fabric.Config, flows ...workload.Flow) *fabric.Sim {
	t.Helper()
	for i := range flows {
		flows[i].ID = i
	}
	s, err := fabric.New(n.g, n.r, flows, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func runTo(t testing.TB, s *fabric.Sim, until int64) {
	t.Helper()
	if _, err := s.Run(context.Background(), until); err != nil {
		t.Fatal(err)
	}
}

// incastByHand is incastNet's incast with the switches configured by cfg
// and an agent that polls only when the test calls Agent.Poll.
func incastByHand(t *testing.T, cfg Config) (*net, *fabric.Sim, *System) {
	t.Helper()
	n := incastNet(t)
	s := newSim(t, n, noCC(), incastFlows(t, n)...)
	acfg := DefaultAgentConfig()
	acfg.Threshold = 1 << 30
	sys, err := Attach(s, cfg, acfg)
	if err != nil {
		t.Fatal(err)
	}
	return n, s, sys
}

// incastNet: a victim a0 -> v crosses s1, s2, s3; a1..a4 (on s1) and y
// (on s5) send to r behind s4, whose 100G host link is the bottleneck.
// s4 pauses s2, s2 pauses s1 and s5, and the victim stalls at s1. s6
// and its host z only watch.
func incastNet(t testing.TB) *net {
	return build(t, "a0-s1", "a1-s1", "a2-s1", "a3-s1", "a4-s1", "s1-s2", "s2-s3", "s3-v", "s2-s4", "s4-r",
		"s5-s2", "y-s5", "s6-s2", "z-s6")
}

func incastFlows(t testing.TB, n *net) []workload.Flow {
	fl := []workload.Flow{{Src: n.node(t, "a0"), Dst: n.node(t, "v"), Size: 64 << 20}}
	for _, h := range []string{"a1", "a2", "a3", "a4", "y"} {
		fl = append(fl, workload.Flow{Src: n.node(t, h), Dst: n.node(t, "r"), Size: 64 << 20})
	}
	return fl
}

// TestEpochRing: the ring keeps the 4 newest epochs, each slot is reset
// when a new epoch lands in it, and the report's per-epoch counts equal
// a ground truth counted by a second, chained Enqueue hook.
func TestEpochRing(t *testing.T) {
	n := build(t, "h0-s1", "h1-s1")
	s := newSim(t, n, noCC(), workload.Flow{Src: n.node(t, "h0"), Dst: n.node(t, "h1"), Size: 1 << 20})
	cfg := DefaultConfig()
	cfg.EpochShift = 12 // 4 us epochs
	pr, err := New(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	truth := map[int64]uint32{}
	s.SetHooks(ChainHooks(pr.Hooks(), &fabric.Hooks{Enqueue: func(_, _ int, p *fabric.Packet, _ int64) {
		if p.Kind == fabric.KindData {
			truth[s.Now()>>12]++
		}
	}}))
	for _, until := range []int64{30_000, 51_000, 77_777} {
		runTo(t, s, until)
		r := pr.Collect(0)
		cur := s.Now() >> 12
		if len(r.Epochs) == 0 || len(r.Epochs) > Epochs {
			t.Fatalf("at %d: %d epochs", until, len(r.Epochs))
		}
		for i, e := range r.Epochs {
			ep := e.Start >> 12
			if ep <= cur-Epochs || ep > cur || (i > 0 && e.Start <= r.Epochs[i-1].Start) || e.ID != uint32(ep>>2) {
				t.Fatalf("at %d (epoch %d): epoch %d id %d out of the ring or order", until, cur, ep, e.ID)
			}
			var pk uint32
			for _, p := range e.Ports {
				pk += p.Packets
			}
			if pk != truth[ep] {
				t.Errorf("epoch %d: %d packets reported, %d enqueued", ep, pk, truth[ep])
			}
		}
	}
	// Straight on the ring: a slot reused four epochs on starts empty.
	st := &pr.sw[0]
	sl := st.slot(1<<30, 12)
	sl.ports[0].packets = 9
	if st.slot(1<<30+3<<12, 12) == sl || st.slot(1<<30+4<<12, 12) != sl || sl.ports[0].packets != 0 {
		t.Fatal("slot not reset on wrap-around")
	}
}

// TestFlowCollisions: a one-slot flow table keeps one flow an epoch and
// evicts the other to the CPU, whose bounded ring marks the report
// truncated once it loses some.
func TestFlowCollisions(t *testing.T) {
	n := build(t, "h0-s1", "h1-s1", "h2-s1")
	s := newSim(t, n, noCC(),
		workload.Flow{Src: n.node(t, "h0"), Dst: n.node(t, "h2"), Size: 1 << 20},
		workload.Flow{Src: n.node(t, "h1"), Dst: n.node(t, "h2"), Size: 1 << 20})
	cfg := DefaultConfig()
	cfg.Flows, cfg.MaxEvicted = 1, 4
	pr, err := New(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.SetHooks(pr.Hooks())
	runTo(t, s, 40_000)
	r := pr.Collect(0)
	if pr.Stats.Evictions < 10 || len(r.Evicted) == 0 || len(r.Evicted) > 4 || !r.Truncated {
		t.Fatalf("evictions %d, %d evicted reported (truncated %v)", pr.Stats.Evictions, len(r.Evicted), r.Truncated)
	}
	keys := map[hawkeyewire.FlowKey]bool{FlowKeyOf(s, 0): true, FlowKeyOf(s, 1): true}
	for _, e := range r.Epochs {
		if len(e.Flows) != 1 || !keys[e.Flows[0].Key] {
			t.Fatalf("epoch %d flows %+v", e.ID, e.Flows)
		}
	}
	for _, f := range r.Evicted {
		if !keys[f.Key] || f.Packets == 0 || f.Out != 2 {
			t.Fatalf("evicted %+v", f)
		}
	}
	// With room for every flow, none is evicted.
	s2 := newSim(t, n, noCC(),
		workload.Flow{Src: n.node(t, "h0"), Dst: n.node(t, "h2"), Size: 1 << 20},
		workload.Flow{Src: n.node(t, "h1"), Dst: n.node(t, "h2"), Size: 1 << 20})
	pr2, _ := New(s2, DefaultConfig())
	s2.SetHooks(pr2.Hooks())
	runTo(t, s2, 40_000)
	if pr2.Stats.Evictions != 0 {
		t.Fatalf("%d evictions in 4096 slots", pr2.Stats.Evictions)
	}
}

// TestFlowIndex: the table's hash is CRC-32 (IEEE) over the 13 key bytes
// in header order, the hash p4/hawkeyetofino computes.
func TestFlowIndex(t *testing.T) {
	k := hawkeyewire.FlowKey{Src: 0x0a000001, Dst: 0x0a000009, Proto: 17, Sport: 0xc123, Dport: 4791}
	b := make([]byte, hawkeyewire.HeaderLen)
	h, _ := (hawkeyewire.Poll{Type: hawkeyewire.TypeFlow, Victim: k}).Encode(b)
	if got, want := flowIndex(k.Src, k.Dst, k.Proto, k.Sport, k.Dport), crc32.ChecksumIEEE(h[6:19]); got != want {
		t.Fatalf("flowIndex %08x, crc32 %08x", got, want)
	}
}

// TestPausedCounts: in the incast, the victim's egress at s1 is paused by
// s2: paused packets, PFC frames and the pause timer show at s1, and
// nothing is paused without PFC.
func TestPausedCounts(t *testing.T) {
	for _, pfc := range []bool{true, false} {
		n := incastNet(t)
		cfg := noCC()
		if !pfc {
			cfg.Switch.Lossless = 0
		}
		s := newSim(t, n, cfg, incastFlows(t, n)...)
		pr, _ := New(s, DefaultConfig())
		s.SetHooks(pr.Hooks())
		runTo(t, s, 600_000)
		s1 := s.SwitchOf(n.node(t, "s1"))
		up := portTo(t, n, "s1", "s2")
		r := pr.Collect(s1)
		var paused, frames, vpaused uint32
		var pausedNow bool
		for _, e := range r.Epochs {
			for _, p := range e.Ports {
				if p.Port == up {
					paused += p.Paused
					frames += p.PauseFrames
					pausedNow = pausedNow || p.PausedNow
				}
			}
			for _, f := range e.Flows {
				if f.Key == FlowKeyOf(s, 0) {
					vpaused += f.Paused
				}
			}
		}
		if pfc && (paused == 0 || frames == 0 || vpaused == 0 || pausedNow != s.Paused(n.node(t, "s1"), up, fabric.PrioData)) {
			t.Errorf("PFC: s1 port %d paused %d, frames %d, paused now %v, victim paused %d", up, paused, frames, pausedNow, vpaused)
		}
		if !pfc && (paused != 0 || frames != 0 || vpaused != 0) {
			t.Errorf("no PFC: paused %d, frames %d, victim paused %d", paused, frames, vpaused)
		}
	}
}

// portTo is a's port towards b.
func portTo(t testing.TB, n *net, a, b string) int {
	t.Helper()
	ai, bi := n.node(t, a), n.node(t, b)
	for p, ref := range n.g.Ports(ai) {
		if ref.Peer == bi {
			return p
		}
	}
	t.Fatalf("%s has no port to %s", a, b)
	return -1
}

// TestIncastAgentPolls: the default agent polls for flows of an incast
// once their RTT passes 300% of the path's, at most once per flow per
// interval.
func TestIncastAgentPolls(t *testing.T) {
	n := incastNet(t)
	s := newSim(t, n, noCC(), incastFlows(t, n)...)
	sys, err := Attach(s, DefaultConfig(), DefaultAgentConfig())
	if err != nil {
		t.Fatal(err)
	}
	runTo(t, s, 1_000_000)
	polls := sys.Agent.Polls()
	if len(polls) == 0 {
		t.Fatal("no polls in an incast")
	}
	last := map[int32]int64{}
	for _, p := range polls {
		if p.RTT*100 <= p.Base*300 || p.Base <= 0 {
			t.Errorf("poll %+v under the threshold", p)
		}
		if l, ok := last[p.Flow]; ok && p.Time-l < DefaultAgentConfig().Interval {
			t.Errorf("flow %d polled again after %d ns", p.Flow, p.Time-l)
		}
		last[p.Flow] = p.Time
		if p.Victim != FlowKeyOf(s, p.Flow) || p.Host != n.g.Nodes[mustSrc(s, p.Flow)].Name {
			t.Errorf("poll %+v: wrong victim or host", p)
		}
	}
	if _, ok := last[0]; !ok {
		t.Errorf("the paused victim a0 -> v was never polled (polls %v)", polls)
	}
	if len(sys.Collector.Incidents()) == 0 {
		t.Fatal("no incident collected")
	}
	t.Logf("%d polls, first at %d ns; %d incidents; stats %+v", len(polls), polls[0].Time,
		len(sys.Collector.Incidents()), sys.Program.Stats)
}

func mustSrc(s *fabric.Sim, f int32) int { src, _ := s.FlowEnds(f); return src }

// TestTraceIncast: a poll for the victim walks its path (s1, s2, s3) and
// the PFC trace leaves it at s2 for s4, the switch whose pauses started
// it, and goes nowhere else: not to s5, which is paused by s2 too but
// only feeds the congestion, nor to the idle s6. The incast's PFC has
// reached the victim's sender by then (s1 pauses a0's NIC), so the poll
// reaches s1 with the PFC bit already set; s1's only paused egress fed by
// a0 is the victim's own. Every switch reached reports once, into one
// incident.
func TestTraceIncast(t *testing.T) {
	n, s, sys := incastByHand(t, DefaultConfig())
	var visits []Visit
	sys.Program.OnVisit = func(v Visit) { visits = append(visits, v) }
	runTo(t, s, 500_000)
	p, err := sys.Agent.Poll(0)
	if err != nil {
		t.Fatal(err)
	}
	runTo(t, s, 520_000)
	got := map[string]uint16{}
	for _, v := range visits {
		if v.Event == p.Event {
			got[v.Switch] |= v.Type
		}
	}
	want := map[string]uint16{"s1": hawkeyewire.TypeBoth, "s2": hawkeyewire.TypeBoth, "s3": hawkeyewire.TypeFlow, "s4": hawkeyewire.TypePFC}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("visits %v, want %v (all: %+v)", got, want, visits)
	}
	if !p.NICPaused {
		t.Error("the poll does not say that a0's NIC was paused")
	}
	tel := sys.Collector.Incident(p.Event)
	if tel == nil || tel.Victim != FlowKeyOf(s, 0) || tel.Time != p.Time {
		t.Fatalf("incident %+v", tel)
	}
	var sws []string
	for _, r := range tel.Reports {
		sws = append(sws, r.Switch)
	}
	slices.Sort(sws)
	if !slices.Equal(sws, []string{"s1", "s2", "s3", "s4"}) {
		t.Fatalf("reports from %v", sws)
	}
	if len(tel.Hosts) != 9 || tel.Hosts["v"] != fabric.HostIP(n.node(t, "v")) || len(tel.Links) != len(n.g.Links) {
		t.Fatalf("topology: %d hosts, %d links", len(tel.Hosts), len(tel.Links))
	}
	checkReports(t, tel.Reports, DefaultConfig())
}

// TestTraceStorm: a host injecting pauses (r) stalls s4's port to it;
// the trace from the victim's side (y -> r through s5, s2, s4) ends at
// s4, whose report shows the port paused now.
func TestTraceStorm(t *testing.T) {
	n := incastNet(t)
	s := newSim(t, n, noCC(), workload.Flow{Src: n.node(t, "y"), Dst: n.node(t, "r"), Size: 64 << 20},
		workload.Flow{Src: n.node(t, "a1"), Dst: n.node(t, "r"), Size: 64 << 20})
	if err := s.AddFault(fabric.HostFault{Host: "r", Prio: fabric.PrioData, Quanta: 0xffff, Interval: 20_000,
		From: 100_000, Until: 10_000_000}); err != nil {
		t.Fatal(err)
	}
	acfg := DefaultAgentConfig()
	acfg.Threshold = 1 << 30
	sys, _ := Attach(s, DefaultConfig(), acfg)
	runTo(t, s, 400_000)
	p, _ := sys.Agent.Poll(0)
	runTo(t, s, 420_000)
	tel := sys.Collector.Incident(p.Event)
	got := map[string]bool{}
	for _, r := range tel.Reports {
		got[r.Switch] = true
		if r.Switch != "s4" {
			continue
		}
		rp := portTo(t, n, "s4", "r")
		last := r.Epochs[len(r.Epochs)-1]
		i := slices.IndexFunc(last.Ports, func(p hawkeyewire.PortRecord) bool { return p.Port == rp })
		if i < 0 || !last.Ports[i].PausedNow || last.Ports[i].PauseLeftNs <= 0 {
			t.Errorf("s4 port to r not paused now: %+v", last.Ports)
		}
	}
	if !got["s5"] || !got["s2"] || !got["s4"] || len(got) != 3 {
		t.Fatalf("reports from %v, want s5, s2, s4", got)
	}
}

// checkReports: no empty entries, sizes as the record layout counts
// them, within the MTU.
func checkReports(t *testing.T, rs []hawkeyewire.SwitchReport, cfg Config) {
	t.Helper()
	for _, r := range rs {
		recs := 0
		for _, e := range r.Epochs {
			if len(e.Ports)+len(e.Flows)+len(e.Meters) == 0 {
				t.Errorf("%s: empty epoch %d reported", r.Switch, e.ID)
			}
			for _, p := range e.Ports {
				if p.Packets == 0 && p.Paused == 0 && p.PauseFrames == 0 && p.PauseSent == 0 && !p.PausedNow {
					t.Errorf("%s: empty port record %+v", r.Switch, p)
				}
			}
			for _, m := range e.Meters {
				if m.Bytes == 0 {
					t.Errorf("%s: empty meter %+v", r.Switch, m)
				}
			}
			for _, f := range e.Flows {
				if f.Packets == 0 {
					t.Errorf("%s: empty flow %+v", r.Switch, f)
				}
			}
			recs += hawkeyewire.EpochRecordLen + hawkeyewire.PortRecordLen*len(e.Ports) + hawkeyewire.MeterRecordLen*len(e.Meters) + hawkeyewire.FlowRecordLen*len(e.Flows)
		}
		recs += hawkeyewire.EvictedRecordLen * len(r.Evicted)
		room := cfg.MTU - 36
		minPkts := (recs + room - 1) / room
		if r.Packets < minPkts || r.Bytes < recs+r.Packets*hawkeyewire.ReportOverhead || r.Bytes > r.Packets*(cfg.MTU+18) {
			t.Errorf("%s: %d record bytes in %d packets of %d bytes", r.Switch, recs, r.Packets, r.Bytes)
		}
	}
}

// TestRateLimit: a switch collected for one event is not collected for
// another inside CollectInterval (the trace still goes on), and is again
// after it.
func TestRateLimit(t *testing.T) {
	cfg := DefaultConfig()
	cfg.CollectInterval = 100_000
	_, s, sys := incastByHand(t, cfg)
	var visits []Visit
	sys.Program.OnVisit = func(v Visit) { visits = append(visits, v) }
	runTo(t, s, 300_000)
	p1, _ := sys.Agent.Poll(0)
	runTo(t, s, 350_000)
	p2, _ := sys.Agent.Poll(0)
	runTo(t, s, 420_000)
	p3, _ := sys.Agent.Poll(0)
	runTo(t, s, 450_000)
	count := func(ev uint8) (reports, visited int) {
		for _, v := range visits {
			if v.Event == ev {
				visited++
			}
		}
		if tel := sys.Collector.Incident(ev); tel != nil {
			reports = len(tel.Reports)
		}
		return
	}
	r1, v1 := count(p1.Event)
	r2, v2 := count(p2.Event)
	r3, v3 := count(p3.Event)
	// The rate-limited event gets the switches' reports from the first
	// collection (Reuse), at no collection cost.
	if r1 != 4 || r2 != 4 || r3 != 4 || v1 == 0 || v2 != v1 || v3 != v1 {
		t.Fatalf("reports %d %d %d, visits %d %d %d", r1, r2, r3, v1, v2, v3)
	}
	for _, r := range sys.Collector.Incident(p2.Event).Reports {
		if r.Bytes != 0 || r.Packets != 0 {
			t.Fatalf("a reused report was charged: %+v", r)
		}
	}
	if sys.Program.Stats.Collections != 8 {
		t.Fatalf("%d collections, want two events' 4 each", sys.Program.Stats.Collections)
	}
	if sys.Program.Stats.RateLimited < 4 {
		t.Fatalf("rate limited %d", sys.Program.Stats.RateLimited)
	}
}

// TestDuplicates: a switch handles an event once per type: the same
// polling packet sent twice is traced once.
func TestDuplicates(t *testing.T) {
	n := incastNet(t)
	s := newSim(t, n, noCC(), incastFlows(t, n)...)
	pr, _ := New(s, DefaultConfig())
	s.SetHooks(pr.Hooks())
	runTo(t, s, 300_000)
	a0 := n.node(t, "a0")
	for range 2 {
		if err := s.Send(a0, 0, PollPacket(s, 0, 77, fabric.PrioControl)); err != nil {
			t.Fatal(err)
		}
	}
	runTo(t, s, 320_000)
	if pr.Stats.Duplicates == 0 || pr.Stats.Collections != 4 {
		t.Fatalf("stats %+v", pr.Stats)
	}
}

// TestEventIDReuse: a poll for another victim that reuses an event id
// inside the dedup interval (ids are 8 bits: a fabric's hosts wrap them
// within it) is traced as a new event, not dropped as a duplicate.
func TestEventIDReuse(t *testing.T) {
	n := incastNet(t)
	flows := incastFlows(t, n)
	if len(flows) < 2 {
		t.Fatal("the incast needs two flows")
	}
	s := newSim(t, n, noCC(), flows...)
	pr, _ := New(s, DefaultConfig())
	s.SetHooks(pr.Hooks())
	var visits []Visit
	pr.OnVisit = func(v Visit) { visits = append(visits, v) }
	runTo(t, s, 300_000)
	for f := range int32(2) {
		src, _ := s.FlowEnds(f)
		if err := s.Send(src, 0, PollPacket(s, f, 77, fabric.PrioControl)); err != nil {
			t.Fatal(err)
		}
		runTo(t, s, 300_000+int64(f+1)*20_000)
	}
	if pr.Stats.Duplicates != 0 || len(visits) < 4 {
		t.Fatalf("%d visits, stats %+v", len(visits), pr.Stats)
	}
	first := visits[0].Switch
	n2 := 0
	for _, v := range visits {
		if v.Switch == first {
			n2++
		}
	}
	if n2 != 2 {
		t.Fatalf("switch %s handled event 77 %d times, want once per victim", first, n2)
	}
}

// TestQuietHops: with QuietQdepth, a flow-trace hop where the victim's
// egress was neither paused nor queued is not collected; the hops of the
// incast's queue and its PFC trace are.
func TestQuietHops(t *testing.T) {
	for _, quiet := range []float64{0, 2000} {
		cfg := DefaultConfig()
		cfg.QuietQdepth = quiet
		_, s, sys := incastByHand(t, cfg)
		var visits []Visit
		sys.Program.OnVisit = func(v Visit) { visits = append(visits, v) }
		runTo(t, s, 500_000)
		if _, err := sys.Agent.Poll(0); err != nil {
			t.Fatal(err)
		}
		runTo(t, s, 520_000)
		var loud, hushed int
		for _, v := range visits {
			switch {
			case v.Quiet && v.Type&hawkeyewire.TypePFC != 0:
				t.Fatalf("a PFC trace at %s was quiet", v.Switch)
			case v.Quiet:
				hushed++
			default:
				loud++
			}
		}
		if int(sys.Program.Stats.Collections) != loud {
			t.Fatalf("quiet %v: %d collections for %d collected visits", quiet, sys.Program.Stats.Collections, loud)
		}
		if quiet == 0 && hushed != 0 || quiet > 0 && (hushed == 0 || loud == 0) {
			t.Fatalf("quiet %v: %d quiet visits, %d collected: %+v", quiet, hushed, loud, visits)
		}
	}
}

// TestChainHooks: every hook sees each event in order; a consumed packet
// stops there.
func TestChainHooks(t *testing.T) {
	var seen []string
	h := func(name string, consume bool) *fabric.Hooks {
		return &fabric.Hooks{
			Packet:  func(int, int, *fabric.Packet) bool { seen = append(seen, name); return !consume },
			Enqueue: func(int, int, *fabric.Packet, int64) { seen = append(seen, name+"e") },
			Ack:     func(int, int32, int64) { seen = append(seen, name+"a") },
		}
	}
	c := ChainHooks(h("a", false), nil, h("b", true), h("c", false))
	if c.Packet(0, 0, &fabric.Packet{}) {
		t.Fatal("consumed packet passed on")
	}
	c.Enqueue(0, 0, nil, 0)
	c.Ack(0, 0, 0)
	if fmt.Sprint(seen) != "[a b ae be ce aa ba ca]" || c.Pause != nil || c.Dequeue != nil {
		t.Fatalf("%v", seen)
	}
	one := &fabric.Hooks{Deliver: func(int, *fabric.Packet) {}}
	if ChainHooks(one).Deliver == nil {
		t.Fatal("single hook dropped")
	}
}

// BenchmarkEnqueue is the per-packet cost of the telemetry: the Packet
// and Enqueue hooks as the fabric calls them for a data packet, over 512
// flows on one switch port.
func BenchmarkEnqueue(b *testing.B) {
	n := build(b, "h0-s1", "h1-s1")
	var flows []workload.Flow
	for range 512 {
		flows = append(flows, workload.Flow{Src: n.node(b, "h0"), Dst: n.node(b, "h1"), Size: 1 << 20})
	}
	s := newSim(b, n, noCC(), flows...)
	pr, err := New(s, DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	h := pr.Hooks()
	pkts := make([]fabric.Packet, 512)
	for i := range pkts {
		pkts[i] = fabric.Packet{Kind: fabric.KindData, Prio: fabric.PrioData, Flow: int32(i), Size: 1086}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := &pkts[i&511]
		h.Packet(0, 0, p)
		h.Enqueue(0, 1, p, int64(i&63)*1086)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "packets/s")
}

// TestReportBytes: pricing a report from its records gives what the
// poller charged for it (every epoch it read held records), a report
// with records removed costs less, and PackedBytes frames fixed-size
// records the same way.
func TestReportBytes(t *testing.T) {
	n := incastNet(t)
	s := newSim(t, n, noCC(), incastFlows(t, n)...)
	pr, _ := New(s, DefaultConfig())
	s.SetHooks(pr.Hooks())
	runTo(t, s, 1_300_000)
	r := pr.Collect(s.SwitchOf(n.node(t, "s2")))
	b, pk := hawkeyewire.ReportBytes(r, 1500)
	if b != r.Bytes || pk != r.Packets || b == 0 {
		t.Fatalf("priced %d B in %d packets, collected %d B in %d", b, pk, r.Bytes, r.Packets)
	}
	ports := r
	ports.Epochs = nil
	for _, e := range r.Epochs {
		e.Flows = nil
		ports.Epochs = append(ports.Epochs, e)
	}
	if pb, _ := hawkeyewire.ReportBytes(ports, 1500); pb >= b || pb == 0 {
		t.Fatalf("without flow records %d B, with %d B", pb, b)
	}
	// 100 records of 36 B: 40 to a 1500-byte packet (1464 B of room).
	if pb, pk := hawkeyewire.PackedBytes(100, 36, 1500); pk != 3 || pb != 3*hawkeyewire.ReportOverhead+100*36 {
		t.Fatalf("packed %d B in %d packets", pb, pk)
	}
}

// TestNoPoller: with the CPU pollers off, polls are still traced through
// the data plane but nothing is collected.
func TestNoPoller(t *testing.T) {
	cfg := DefaultConfig()
	cfg.NoPoller = true
	_, s, sys := incastByHand(t, cfg)
	visited := 0
	sys.Program.OnVisit = func(Visit) { visited++ }
	runTo(t, s, 300_000)
	if _, err := sys.Agent.Poll(0); err != nil {
		t.Fatal(err)
	}
	runTo(t, s, 400_000)
	if visited == 0 || sys.Program.Stats.Collections != 0 || len(sys.Collector.Incidents()) != 1 ||
		len(sys.Collector.Incidents()[0].Reports) != 0 {
		t.Fatalf("visits %d, collections %d, incidents %d", visited, sys.Program.Stats.Collections, len(sys.Collector.Incidents()))
	}
}

// TestNICPausedPoll: a1 sends into the incast (to r) and to w, on its own
// switch. s1 pauses a1's NIC, so the flow to w stalls though its one hop
// (s1 to w) is neither paused nor queued: a flow trace alone would end
// at a quiet s1 and collect nothing. The agent sees its NIC paused and
// sets the PFC bit; s1 then reports and traces PFC from a1's port to the
// paused uplink, on to s2 and s4, where the incast is.
func TestNICPausedPoll(t *testing.T) {
	n := build(t, "a0-s1", "a1-s1", "a2-s1", "a3-s1", "a4-s1", "w-s1", "s1-s2", "s2-s3", "s3-v", "s2-s4", "s4-r",
		"s5-s2", "y-s5", "s6-s2", "z-s6")
	flows := append(incastFlows(t, n), workload.Flow{Src: n.node(t, "a1"), Dst: n.node(t, "w"), Size: 64 << 20})
	victim := int32(len(flows) - 1)
	s := newSim(t, n, noCC(), flows...)
	cfg := DefaultConfig()
	cfg.QuietQdepth = 2000
	sys, seen := attachByHand(t, s, cfg)
	runTo(t, s, 500_000)
	if !s.Paused(n.node(t, "a1"), 0, fabric.PrioData) {
		t.Fatal("setup: s1 does not pause a1's NIC")
	}
	p, err := sys.Agent.Poll(victim)
	if err != nil {
		t.Fatal(err)
	}
	if !p.NICPaused {
		t.Fatal("the poll does not say that a1's NIC is paused")
	}
	runTo(t, s, 520_000)
	got := map[string]uint16{}
	for _, v := range *seen {
		if v.Event == p.Event && !v.Quiet {
			got[v.Switch] |= v.Type
		}
	}
	want := map[string]uint16{"s1": hawkeyewire.TypeBoth, "s2": hawkeyewire.TypePFC, "s4": hawkeyewire.TypePFC}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("collected visits %v, want %v (all: %+v)", got, want, *seen)
	}
	tel := sys.Collector.Incident(p.Event)
	if tel == nil {
		t.Fatal("no incident")
	}
	var sws []string
	for _, r := range tel.Reports {
		sws = append(sws, r.Switch)
	}
	slices.Sort(sws)
	if !slices.Equal(sws, []string{"s1", "s2", "s4"}) {
		t.Fatalf("reports from %v, want s1, s2, s4", sws)
	}
}

// TestRetrace: a poll that passed before the pause spread traces nothing
// of it; with Config.Retrace the switches' CPUs, when they take the
// mirrored poll, send the PFC polling packets the data plane would send
// now, and the trace reaches the port the storming host pauses.
func TestRetrace(t *testing.T) {
	for _, retrace := range []bool{false, true} {
		n := incastNet(t)
		s := newSim(t, n, noCC(), workload.Flow{Src: n.node(t, "y"), Dst: n.node(t, "r"), Size: 64 << 20})
		if err := s.AddFault(fabric.HostFault{Host: "r", Prio: fabric.PrioData, Quanta: 0xffff, Interval: 20_000,
			From: 100_000, Until: 10_000_000}); err != nil {
			t.Fatal(err)
		}
		cfg := DefaultConfig()
		cfg.ReadDelay = 200_000
		cfg.Retrace = retrace
		sys, seen := attachByHand(t, s, cfg)
		runTo(t, s, 50_000)
		p, err := sys.Agent.Poll(0)
		if err != nil {
			t.Fatal(err)
		}
		runTo(t, s, 300_000)
		var pfc []string
		for _, v := range *seen {
			if v.Event != p.Event || v.Flow != 0 {
				t.Fatalf("visit of event %d flow %d, polled event %d flow 0", v.Event, v.Flow, p.Event)
			}
			if v.Type&hawkeyewire.TypePFC != 0 {
				if v.Time < 50_000+cfg.ReadDelay {
					t.Fatalf("a PFC trace at %s at %d ns, before the CPUs re-traced", v.Switch, v.Time)
				}
				pfc = append(pfc, v.Switch)
			}
		}
		switch {
		case !retrace && (len(pfc) > 0 || sys.Program.Stats.Retraced > 0):
			t.Fatalf("without Retrace: PFC traces at %v, %d re-traced", pfc, sys.Program.Stats.Retraced)
		case retrace && (!slices.Contains(pfc, "s4") || sys.Program.Stats.Retraced == 0):
			t.Fatalf("with Retrace: PFC traces at %v (want s4, the storm's switch), %d re-traced", pfc, sys.Program.Stats.Retraced)
		}
	}
}

// attachByHand attaches Hawkeye with cfg and an agent that polls only
// when the test calls Agent.Poll, and records every visit.
func attachByHand(t *testing.T, s *fabric.Sim, cfg Config) (*System, *[]Visit) {
	t.Helper()
	acfg := DefaultAgentConfig()
	acfg.Threshold = 1 << 30
	sys, err := Attach(s, cfg, acfg)
	if err != nil {
		t.Fatal(err)
	}
	var visits []Visit
	sys.Program.OnVisit = func(v Visit) { visits = append(visits, v) }
	return sys, &visits
}

// TestReportBudget: a whole switch's report under a 1-packet budget is cut
// and says so.
func TestReportBudget(t *testing.T) {
	nt := incastNet(t)
	s := newSim(t, nt, noCC(), incastFlows(t, nt)...)
	cfg := DefaultConfig()
	cfg.MTU, cfg.MaxPackets = 576, 1
	pr, _ := New(s, cfg)
	s.SetHooks(pr.Hooks())
	runTo(t, s, 1_300_000) // two epochs of records: more than a packet
	r := pr.Collect(s.SwitchOf(nt.node(t, "s2")))
	if !r.Truncated || r.Packets != 1 {
		t.Fatalf("budgeted report: %d packets, truncated %v", r.Packets, r.Truncated)
	}
}
