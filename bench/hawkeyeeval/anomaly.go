// Package hawkeyeeval is Hawkeye's evaluation harness (the paper's §4.2-4.3,
// Figures 7-11): it generates fabric traces with one injected performance
// anomaly each, placed at random on a fat-tree of 100 Gbps links with 2 us
// delay under the paper's long-tailed workload at a random load, runs the
// hosts' detection agent, the switches' telemetry and polling, and scores
// every detection the agents raise, diagnosed from the telemetry each
// method collects (Hawkeye and the paper's baselines), against the
// injected ground truth as the paper defines precision and recall.
package hawkeyeeval

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/rdma-appliance/appliance/bench/fabric"
	"github.com/rdma-appliance/appliance/bench/fabric/workload"
	"github.com/rdma-appliance/appliance/internal/topo"
)

// Anomaly is an injected performance anomaly: the six cases of the
// paper's Table 2.
type Anomaly int

const (
	// Incast: a synchronized micro-burst from many senders into one
	// receiver; PFC backpressure spreads upstream from its ToR.
	Incast Anomaly = iota
	// Storm: a host keeps sending PAUSE frames (a NIC that cannot
	// drain): its ToR's port to it stops, and the pause spreads.
	Storm
	// InLoopDeadlock: routes misconfigured into a loop, and a burst whose
	// own packets circle it fills the loop's buffers: every loop port
	// pauses the next.
	InLoopDeadlock
	// OutLoopContention: the same kind of loop with only a trickle in it,
	// and an incast outside it whose backpressure reaches the loop and
	// closes it.
	OutLoopContention
	// OutLoopInjection: the loop closed by a storm from a host outside it.
	OutLoopInjection
	// Contention: flows contend for one port without any PFC (the
	// buffer absorbs them): plain queueing.
	Contention
)

// Anomalies are every type, in table order.
var Anomalies = []Anomaly{Incast, Storm, InLoopDeadlock, OutLoopContention, OutLoopInjection, Contention}

func (a Anomaly) String() string {
	switch a {
	case Incast:
		return "incast-backpressure"
	case Storm:
		return "pfc-storm"
	case InLoopDeadlock:
		return "in-loop-deadlock"
	case OutLoopContention:
		return "out-of-loop-deadlock-contention"
	case OutLoopInjection:
		return "out-of-loop-deadlock-injection"
	case Contention:
		return "flow-contention"
	}
	return fmt.Sprintf("anomaly(%d)", int(a))
}

// Deadlock says whether a is one of the deadlock types.
func (a Anomaly) Deadlock() bool {
	return a == InLoopDeadlock || a == OutLoopContention || a == OutLoopInjection
}

// PFC says whether a is about PFC (every type but plain contention).
func (a Anomaly) PFC() bool { return a != Contention }

// NoAnomaly is a verdict's type when the diagnosis named none of the six.
const NoAnomaly Anomaly = -1

// Truth is what was injected.
type Truth struct {
	Anomaly Anomaly
	// Flows are the root-cause flows (IDs in Trace.Flows), Host the
	// injecting host.
	Flows []int
	Host  string
	// Loop are the switches of a routing loop in forwarding order,
	// LoopPorts each one's egress to the next.
	Loop      []string
	LoopPorts []int
	// At is when the anomaly starts (ns).
	At int64
	// Injected are the anomaly's own flows (the burst's, the trickle
	// circling a loop, those into a storming host): victims whatever the
	// counterfactual run shows.
	Injected []int
	// Outside is, for the out-of-loop deadlocks, the type of the cause
	// outside the loop (an incast or a storm) that its own victims, away
	// from the loop, suffer; NoAnomaly otherwise.
	Outside Anomaly
	// Receiver is the host at the anomaly's centre: the incast's or the
	// contention's receiver, the storming host, the out-of-loop cause's
	// host. Ports are the egress ports where the root cause acts (the
	// receiver's ToR's port to it, the loop's ports) and Where their
	// switches: the end of every causal chain.
	Receiver string
	Ports    []SwitchPort
	Where    []string
}

// SwitchPort is a switch's egress port.
type SwitchPort struct {
	Switch string
	Port   int
}

// Trace is one generated case: a fabric, its traffic, the anomaly.
type Trace struct {
	Topology Topology
	Seed     uint64
	Load     float64
	Graph    *topo.Graph
	Routes   *topo.Routes
	Flows    []workload.Flow
	Faults   []fabric.HostFault
	Config   fabric.Config
	Duration int64
	Truth    Truth
	// Flows holds the background first, then what the counterfactual
	// keeps of the anomaly (an out-of-loop deadlock's loop and trickle:
	// Context of them), then the rest of the anomaly, so that a flow's
	// ID, and with it its ECMP hash, is the same in both runs.
	Background, Context int
	// keepRoutes: the counterfactual keeps the misconfigured routes.
	keepRoutes bool
}

const (
	evalBW    = 100e9
	evalDelay = 2000
	// traceNs is a trace's length: the anomaly starts at 200-300 us and
	// the switches' CPUs read their registers 500 us after a poll.
	traceNs = 3_000_000
	// warmupNs: the background arrivals that run before a trace, for its
	// flows in progress (four times the largest flow alone at line rate).
	warmupNs = 100_000_000
)

// Generate builds trace number seed of anomaly a on topology tp:
// background flows from the paper's distribution at a load drawn from
// [0.2, 0.5] between random hosts, and the anomaly at a random time
// between 200 and 300 us, placed at random (receiver, senders, storming
// host, the loop's switches and length, the trickle's sender, the
// out-of-loop cause's host), DCQCN on everywhere.
func Generate(tp Topology, a Anomaly, seed uint64) (*Trace, error) {
	ft, err := newFatTree(tp.K)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, uint64(a)+1+uint64(tp.K)<<8))
	t := &Trace{Topology: tp, Seed: seed, Load: 0.2 + 0.3*rng.Float64(), Graph: ft.g, Routes: ft.g.ShortestPaths(),
		Config: fabric.DefaultConfig(), Duration: traceNs}
	t.Config.Seed = seed
	at := 200_000 + rng.Int64N(100_000)
	t.Truth = Truth{Anomaly: a, At: at, Outside: NoAnomaly}
	g := &generator{t: t, ft: ft, rng: rng, at: at}
	// The paper's workload as it states it (§4.1): sizes from its
	// long-tailed distribution, flows of 100 to 300 MB included, Poisson
	// arrivals at the rate that makes the load. A flow of 300 MB takes
	// 24 ms at line rate, so a 3 ms trace that started from an empty
	// fabric would carry a fraction of that load: the trace starts with
	// the flows still running after 100 ms of the same arrivals
	// (workload.InProgress, a fluid model of the hosts' links), and the
	// arrivals go on from there.
	bg := append(workload.InProgress(ft.g.Hosts(), evalBW, t.Load, workload.Hawkeye, warmupNs, seed),
		workload.Poisson(ft.g.Hosts(), evalBW, t.Load, workload.Hawkeye, t.Duration, seed)...)
	var loopDst = -1
	switch a {
	case InLoopDeadlock, OutLoopContention, OutLoopInjection:
		loopDst = rng.IntN(ft.hosts())
	}
	for _, f := range bg {
		// Traffic to a loop's destination would circle the loop too, and
		// a loop filled by whichever background flow came first has no
		// ground truth: the misconfigured destination gets none.
		if loopDst >= 0 && f.Dst == ft.host(loopDst) {
			continue
		}
		g.add(f)
	}
	t.Background = len(t.Flows)
	switch a {
	case Incast:
		r := rng.IntN(ft.hosts())
		senders := g.others(r, 8+rng.IntN(9))
		t.Truth.Flows = g.burst(r, senders, 512<<10+rng.Int64N(512<<10), at)
		t.Truth.Injected = slices.Clone(t.Truth.Flows)
		g.centre(r)
	case Storm:
		h := rng.IntN(ft.hosts())
		// "configure a host to continuously inject PFC frames" (§4.1):
		// until the trace ends.
		g.storm(h, t.Duration)
		// Traffic to the storming host, so that its ToR's port has
		// something to hold.
		t.Truth.Injected = g.burst(h, g.others(h, 3), 512<<10, at)
		g.centre(h)
	case InLoopDeadlock:
		entry := g.loop(loopDst)
		var senders []int
		for _, i := range rng.Perm(len(entry))[:min(len(entry), 2+rng.IntN(2))] {
			senders = append(senders, entry[i])
		}
		slices.Sort(senders)
		t.Truth.Flows = g.burst(loopDst, senders, 2<<20+rng.Int64N(2<<20), at)
		t.Truth.Injected = slices.Clone(t.Truth.Flows)
	case OutLoopContention, OutLoopInjection:
		// Shallow buffers (2 MB a switch): the dynamic threshold, a
		// fraction of the free buffer, falls as the outside cause fills
		// the loop's switches, until the few packets circling the loop
		// are enough to pause it. The loop alone carries a trickle that
		// cannot fill it (128 KB per pair of loop switches: less than a
		// loop switch's ingress group holds before it pauses while its
		// buffer is empty); what closes it is a host next to it,
		// congested by a large incast or pausing its ToR, whose traffic
		// crosses the loop's links, so that its backpressure holds the
		// loop's buffers. The trickle enters 100 us into that
		// congestion; a TTL of 64 lets its packets go round many times
		// and its sender resends them every timeout.
		t.Config.Switch.Buffer = 2 << 20
		entry := g.loop(loopDst)
		src := entry[rng.IntN(len(entry))]
		t.Truth.Injected = g.burst(loopDst, []int{src}, int64(len(t.Truth.Loop)/2)*128<<10, at+100_000)
		t.Context = len(t.Flows) - t.Background
		t.keepRoutes = true
		o, senders, err := g.outside(loopDst, 12+rng.IntN(5))
		if err != nil {
			return nil, err
		}
		if a == OutLoopContention {
			t.Truth.Outside = Incast
			t.Truth.Flows = g.burst(o, senders, 2<<20, at)
		} else {
			t.Truth.Outside = Storm
			// Here the storm stops after 1.5 ms: a loop still held
			// for the last 500 us of the trace (settle) is then
			// deadlocked, not merely paused by a storm that goes on.
			g.storm(o, at+1_500_000)
			g.burst(o, senders[:3], 2<<20, at)
		}
		for _, f := range t.Flows[t.Background+t.Context:] {
			t.Truth.Injected = append(t.Truth.Injected, f.ID)
		}
		g.centre(o)
	case Contention:
		// A buffer deep enough that the contention never crosses a PFC
		// threshold: the port's queue absorbs it. PFC stays on, so a
		// trace where it paused anyway shows as not manifested.
		t.Config.Switch.Buffer = 64 << 20
		t.Config.Switch.Alpha = 8
		r := rng.IntN(ft.hosts())
		t.Truth.Flows = g.burst(r, g.others(r, 4+rng.IntN(5)), 512<<10, at)
		t.Truth.Injected = slices.Clone(t.Truth.Flows)
		g.centre(r)
	default:
		return nil, fmt.Errorf("hawkeyeeval: no anomaly %d", int(a))
	}
	if err := t.fabricShares(); err != nil {
		return nil, err
	}
	return t, nil
}

// fabricShares sets the rate each flow in progress resumes at to its
// max-min fair share over every link of its path, the fabric's as the
// routes and its ECMP hash take it as well as its hosts'. The warm-up's
// fluid model (workload.InProgress) shares only the hosts' links and
// takes the fabric as non-blocking; with ECMP it is not: flows hashed
// onto one aggregation or core link can be offered twice what it
// carries. Resumed at those shares, they built queues in the trace's
// first 100-200 us that DCQCN then cut: a transient no steady state has,
// whose RTTs crossed the detection threshold on flows no anomaly touched
// (at k=8, 95 of the 109 such detections of seeds 1-10).
func (t *Trace) fabricShares() error {
	sim, err := t.Sim()
	if err != nil {
		return err
	}
	links := map[[2]int]int{} // (node, egress port) -> link number
	var paths [][]int
	var idx []int
	for i := range t.Flows {
		f := &t.Flows[i]
		if f.Start != 0 || !(f.Rate > 0) {
			continue
		}
		var path []int
		hop := func(node, port int) {
			k := [2]int{node, port}
			l, ok := links[k]
			if !ok {
				l = len(links)
				links[k] = l
			}
			path = append(path, l)
		}
		h := sim.FlowHash(int32(f.ID))
		hop(f.Src, 0)
		node, _ := sim.Peer(f.Src, 0)
		for hops := 0; hops < 16 && node != f.Dst && sim.SwitchOf(node) >= 0; hops++ {
			p := sim.NextHop(node, f.Dst, h)
			if p < 0 {
				break
			}
			hop(node, p)
			node, _ = sim.Peer(node, p)
		}
		paths = append(paths, path)
		idx = append(idx, i)
	}
	for j, r := range workload.MaxMin(paths, len(links), evalBW) {
		t.Flows[idx[j]].Rate = r
	}
	return nil
}

// generator places one trace's anomaly.
type generator struct {
	t   *Trace
	ft  *fatTree
	rng *rand.Rand
	at  int64
}

func (g *generator) add(f workload.Flow) int {
	f.ID = len(g.t.Flows)
	g.t.Flows = append(g.t.Flows, f)
	return f.ID
}

// burst starts a flow of size bytes from every sender to dst at start.
func (g *generator) burst(dst int, senders []int, size, start int64) []int {
	var ids []int
	for _, s := range senders {
		ids = append(ids, g.add(workload.Flow{Src: g.ft.host(s), Dst: g.ft.host(dst), Size: size, Start: start, Prio: fabric.PrioData}))
	}
	return ids
}

// others picks n distinct hosts at random, none of them dst or under
// dst's ToR (their bursts cross the fabric).
func (g *generator) others(dst, n int) []int {
	var out []int
	for _, h := range g.rng.Perm(g.ft.hosts()) {
		if g.ft.torOf(h) != g.ft.torOf(dst) && len(out) < n {
			out = append(out, h)
		}
	}
	slices.Sort(out)
	return out
}

// storm makes host h inject pause frames from the anomaly's start until
// until: a full quanta every 100 us, so the port never resumes.
func (g *generator) storm(h int, until int64) {
	name := g.ft.g.Nodes[g.ft.host(h)].Name
	g.t.Truth.Host = name
	g.t.Faults = append(g.t.Faults, fabric.HostFault{Host: name, Prio: fabric.PrioData, Quanta: 0xffff,
		Interval: 100_000, From: g.at, Until: until})
}

// centre records host h as the anomaly's centre and its ToR's port to it
// as where the root cause acts.
func (g *generator) centre(h int) {
	ft := g.ft
	g.t.Truth.Receiver = ft.g.Nodes[ft.host(h)].Name
	tor := ft.torName(ft.torOf(h))
	g.t.Truth.Ports = append(g.t.Truth.Ports, SwitchPort{tor, ft.portTo(ft.node(tor), ft.host(h))})
	if !slices.Contains(g.t.Truth.Where, tor) {
		g.t.Truth.Where = append(g.t.Truth.Where, tor)
	}
}

// loop misconfigures the routes to host dst into a loop placed at random
// outside dst's pod: between ToRs and aggregation switches of one pod, or
// between aggregation switches of several pods and cores, of 2, 4 or 6
// switches (as many as the fat-tree has room for). It returns the hosts
// whose traffic to dst enters the loop; their ToRs' routes to dst lead
// into it.
func (g *generator) loop(dst int) []int {
	ft, rng := g.ft, g.rng
	h := ft.half
	m := 1 + rng.IntN(min(h, 3))
	dpod := ft.podOf(dst)
	var pods []int
	for _, p := range rng.Perm(ft.k) {
		if p != dpod {
			pods = append(pods, p)
		}
	}
	var names []string
	var entry []int
	if rng.IntN(2) == 0 {
		// ToR t_i -> agg a_i -> ToR t_i+1 ... in one pod.
		pod := pods[0]
		tors, aggs := rng.Perm(h)[:m], rng.Perm(h)[:m]
		for i := range m {
			t := pod*h + tors[i]
			names = append(names, ft.torName(t), ft.aggName(pod, aggs[i]))
			entry = append(entry, ft.hostsOfTor(t)...)
		}
	} else {
		// agg(p_i, j) -> core(j, x_i) -> agg(p_i+1, j) ...
		m = min(m, len(pods))
		j := rng.IntN(h)
		cores := rng.Perm(h)[:m]
		for i := range m {
			names = append(names, ft.aggName(pods[i], j), ft.coreName(j, cores[i]))
		}
		for i := range m {
			// Every ToR of the loop's pods sends its traffic to dst
			// into the loop's aggregation switch.
			agg := ft.node(ft.aggName(pods[i], j))
			for t := pods[i] * h; t < (pods[i]+1)*h; t++ {
				tor := ft.node(ft.torName(t))
				g.t.Routes.Override(tor, ft.host(dst), []int{ft.portTo(tor, agg)})
				entry = append(entry, ft.hostsOfTor(t)...)
			}
		}
	}
	d := ft.host(dst)
	for i, n := range names {
		a, b := ft.node(n), ft.node(names[(i+1)%len(names)])
		p := ft.portTo(a, b)
		g.t.Routes.Override(a, d, []int{p})
		g.t.Truth.Loop = append(g.t.Truth.Loop, n)
		g.t.Truth.LoopPorts = append(g.t.Truth.LoopPorts, p)
		g.t.Truth.Ports = append(g.t.Truth.Ports, SwitchPort{n, p})
		g.t.Truth.Where = append(g.t.Truth.Where, n)
	}
	return entry
}

// outside picks the out-of-loop cause's host, one whose ToR is a loop
// switch or hangs off one (never the loop's destination), and n senders
// whose flows to it, numbered as the next flows will be, cross a link of
// the loop where their hashes let them: that traffic is what backs up
// into the loop. The first host found with most of its senders crossing
// wins, else the one with the most.
func (g *generator) outside(dst, n int) (int, []int, error) {
	ft := g.ft
	loop := map[string]bool{}
	links := map[[2]int]bool{}
	for i, name := range g.t.Truth.Loop {
		loop[name] = true
		links[[2]int{ft.node(name), g.t.Truth.LoopPorts[i]}] = true
	}
	var cand []int
	for hst := range ft.hosts() {
		tor := ft.node(ft.torName(ft.torOf(hst)))
		near := loop[ft.torName(ft.torOf(hst))]
		for _, ref := range ft.g.Ports(tor) {
			near = near || loop[ft.g.Nodes[ref.Peer].Name]
		}
		if near && hst != dst {
			cand = append(cand, hst)
		}
	}
	// A flow's ECMP path depends only on its ID (its hash) and its
	// ends: a simulation of one flow per slot, numbered as the senders'
	// flows will be, shows each slot's path from any sender.
	base := len(g.t.Flows)
	probe := make([]workload.Flow, n)
	for i := range probe {
		probe[i] = workload.Flow{ID: base + i, Src: ft.host(0), Dst: ft.host(1), Size: 1, Prio: fabric.PrioData}
	}
	sim, err := fabric.New(ft.g, g.t.Routes, probe, g.t.Config)
	if err != nil {
		return 0, nil, err
	}
	crosses := func(slot, src, o int) bool {
		h := sim.FlowHash(int32(slot))
		node, _ := sim.Peer(ft.host(src), 0)
		for hops := 0; hops < 8 && node != ft.host(o) && sim.SwitchOf(node) >= 0; hops++ {
			p := sim.NextHop(node, ft.host(o), h)
			if p < 0 {
				return false
			}
			if links[[2]int{node, p}] {
				return true
			}
			node, _ = sim.Peer(node, p)
		}
		return false
	}
	n = min(n, ft.hosts()-ft.half)
	best, bestCrossing := 0, 0
	var bestSenders []int
	for _, ci := range g.rng.Perm(len(cand)) {
		o := cand[ci]
		var senders []int
		crossing := 0
		for slot := range n {
			pick := -1
			for _, s := range g.rng.Perm(ft.hosts()) {
				if ft.torOf(s) == ft.torOf(o) || slices.Contains(senders, s) {
					continue
				}
				if crosses(slot, s, o) {
					pick = s
					crossing++
					break
				}
				if pick < 0 {
					pick = s
				}
			}
			senders = append(senders, pick)
		}
		// Some slots' hashes lead around the loop from every sender:
		// the host whose senders cross it most, most of them if it can.
		if crossing > bestCrossing {
			best, bestSenders, bestCrossing = o, senders, crossing
		}
		if 2*crossing >= n {
			break
		}
	}
	if bestCrossing == 0 {
		return 0, nil, fmt.Errorf("hawkeyeeval: no host next to loop %v has a sender whose traffic crosses it", g.t.Truth.Loop)
	}
	return best, bestSenders, nil
}

// Sim builds the trace's simulation.
func (t *Trace) Sim() (*fabric.Sim, error) {
	s, err := fabric.New(t.Graph, t.Routes, t.Flows, t.Config)
	if err != nil {
		return nil, err
	}
	for _, f := range t.Faults {
		if err := s.AddFault(f); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Counterfactual is the trace without its anomaly: the same background
// (same flow IDs, so the same paths), the same fabric configuration, no
// fault; an out-of-loop deadlock keeps its loop and trickle and loses only
// the cause outside the loop. A background flow the agents catch in both
// runs was not the anomaly's victim; an out-of-loop loop that deadlocks
// here too was not closed from outside.
func (t *Trace) Counterfactual() *Trace {
	c := *t
	c.Flows = t.Flows[:t.Background+t.Context]
	c.Faults = nil
	if !t.keepRoutes {
		c.Routes = t.Graph.ShortestPaths()
	}
	return &c
}
