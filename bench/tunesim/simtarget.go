package tunesim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/bench/fabric"
	"github.com/rdma-appliance/appliance/bench/fabric/workload"
	"github.com/rdma-appliance/appliance/internal/topo"
	"github.com/rdma-appliance/appliance/tuning"
)

// SimScenario is one of the paper's experiments rebuilt on the fabric
// simulator: a topology, a workload, what to tune and what to watch.
type SimScenario struct {
	Name        string
	Description string
	// Build makes the topology (with its routes) and the flows.
	Build func() (*topo.Graph, *topo.Routes, []workload.Flow, error)
	// Base is the fabric configuration watermarks are applied onto.
	Base fabric.Config
	// Hosts overrides host behaviour per host name (TCP senders without
	// DCQCN).
	Hosts map[string]fabric.HostConfig
	// Scopes are the scopes the scenario tunes (receiver-side layers).
	Scopes []string
	// Objective is the scenario's objective (Eq. 15 for multi-host).
	Objective tuning.Objective
	// Duration is the simulated time of one evaluation.
	Duration time.Duration
	// Capacity and RTT are the bottleneck's rate (bits/s) and the base
	// round trip (ns), for the baselines that derive from them.
	Capacity float64
	RTT      int64
	// Loop, when set, is the workload instead of Build's flows: posted
	// as the run goes by applications waiting on completions. Posting
	// stops at the evaluation's duration; the run then goes on for at
	// most Drain so the messages in flight complete and their FCTs are
	// measured (telemetry stays the posting window's).
	Loop  *Loop
	Drain time.Duration
	// WholeRun extends a loop's telemetry from the posting window to the
	// whole run: posting and the drain, up to the last completion. The
	// paper's tuner reads a 1 s telemetry period on traffic that keeps
	// coming, so every burst's whole life (its queue build-up and its
	// drain) is inside what it judges; a window that ends with the
	// posting misses the drain of a burst that outlasts it (a 39-to-1
	// burst of 50 QPs x 64 KB drains for 40 ms after a 3 ms posting
	// window), which is where the tail FCTs are made.
	WholeRun bool
	// PathTelemetry watches every switch some flow crosses instead of
	// only those that deliver to a receiver (the paper's compression).
	PathTelemetry bool
}

// Link rates and delay of the paper's first cluster (Section 6.1):
// 25G access, 100G aggregation.
const (
	simAccessBW = 25e9
	simFabricBW = 100e9
	simDelay    = 1000 // ns per link
)

// simBase is the fabric the scenarios run on: the paper's 32 MB shared
// buffer in 256-byte cells (Trident 3), PFC on the RDMA class, DCQCN
// with Table 4's parameters, 1 KB MTU.
func simBase() fabric.Config {
	c := fabric.DefaultConfig()
	c.Switch.Buffer = 32 << 20
	c.Switch.Cell = tuning.PaperCell
	c.Seed = 1
	return c
}

// leafSpine is the two-tier fabric of the incast scenarios: 2 leaves of
// 20 hosts (25G) under 2 spines (100G).
func leafSpine() (*topo.Graph, *topo.Routes, error) {
	g, err := topo.LeafSpine(2, 2, 20, simAccessBW, simFabricBW, simDelay)
	if err != nil {
		return nil, nil, err
	}
	return g, g.ShortestPaths(), nil
}

// qps makes n queue pairs from each sender to dst, each sending size
// bytes every interval, bursts times, starting together: the perftest
// traffic of the paper's experiments.
func qps(senders []int, dst, n int, size int64, bursts int, interval int64) []workload.Flow {
	var sets [][]workload.Flow
	for range n {
		sets = append(sets, workload.Incast(senders, dst, size, bursts, interval, 0))
	}
	return workload.Merge(sets...)
}

func hostRange(lo, hi int) []int {
	var out []int
	for i := lo; i < hi; i++ {
		out = append(out, i)
	}
	return out
}

// SimScenarios are the paper's scenarios on the simulator, by name:
//
//   - incast-2: 2-to-1, 10 QPs per sender, 1024 KB messages (Sec. 2.3,
//     Scene I);
//   - incast-24: 24-to-1 RDMA incast, 50 QPs per sender, a 64 KB burst
//     per QP every 1000 us (Scene II);
//   - incast-39: 39-to-1 incast, 10 QPs per sender, 64 KB bursts every
//     1000 us (Sec. 6.2, the 10-QP, 64 KB case);
//   - mixed: 2-to-1 RDMA with two TCP senders on a lossy class (Case III);
//   - multihost: the multi-host RNIC of Scene III (Fig. 4).
//
// Each evaluation runs a few milliseconds of simulated time, so the
// bursts' first millisecond or two (the convergence the watermarks
// govern) is what is scored.
func SimScenarios() map[string]SimScenario {
	m := map[string]SimScenario{}
	incast := func(name, desc string, senders []int, dst, nqp int, size int64, bursts int, interval int64, dur time.Duration) SimScenario {
		o := tuning.DefaultObjective()
		// Incast queues reach megabytes: a fixed normalisation at half a
		// megabyte (2000 cells, the middle of the paper's Kmin range)
		// still tells them apart.
		o.QueueRef = 512 << 10
		return SimScenario{Name: name, Description: desc, Base: simBase(), Scopes: []string{"leaf"},
			Objective: o, Duration: dur, Capacity: simAccessBW, RTT: 8 * simDelay,
			Build: func() (*topo.Graph, *topo.Routes, []workload.Flow, error) {
				g, r, err := leafSpine()
				if err != nil {
					return nil, nil, nil, err
				}
				return g, r, qps(senders, dst, nqp, size, bursts, interval), nil
			}}
	}
	m["incast-2"] = incast("incast-2", "2-to-1: h0 (leaf0) and h20 (leaf1) to h21, 10 QPs each, 1024 KB messages",
		[]int{0, 20}, 21, 10, 1<<20, 1, 0, 2*time.Millisecond)
	m["incast-24"] = incast("incast-24", "24-to-1 RDMA incast to h39: 50 QPs per sender, 64 KB per QP every 1000 us",
		append(hostRange(0, 20), 20, 21, 22, 23), 39, 50, 64<<10, 3, 1_000_000, 3*time.Millisecond)
	m["incast-39"] = incast("incast-39", "39-to-1 RDMA incast to h39: 10 QPs per sender, 64 KB per QP every 1000 us",
		hostRange(0, 39), 39, 10, 64<<10, 3, 1_000_000, 3*time.Millisecond)

	mixed := incast("mixed", "", nil, 0, 0, 0, 0, 0, 2*time.Millisecond)
	mixed.Description = "TCP/RDMA mixed: h0, h1 RDMA (10 QPs, 1024 KB) and h2, h3 TCP (lossy class 1, no DCQCN, 64 KB every 50 us) to h21"
	mixed.Hosts = map[string]fabric.HostConfig{}
	for _, h := range []string{"h2", "h3"} {
		hc := mixed.Base.Host
		hc.DCQCN = false
		mixed.Hosts[h] = hc
	}
	mixed.Build = func() (*topo.Graph, *topo.Routes, []workload.Flow, error) {
		g, r, err := leafSpine()
		if err != nil {
			return nil, nil, nil, err
		}
		rdma := qps([]int{0, 1}, 21, 10, 1<<20, 1, 0)
		// TCP is approximated: a lossy class without congestion control,
		// paced only by its bursts (about 10 Gbit/s offered per sender),
		// losses recovered by go-back-N. The fabric has no TCP stack.
		tcp := workload.Incast([]int{2, 3}, 21, 64<<10, 40, 50_000, 0)
		for i := range tcp {
			tcp[i].Prio = 1
		}
		return g, r, workload.Merge(rdma, tcp), nil
	}
	m["mixed"] = mixed

	mh := SimScenario{Name: "multihost", Base: simBase(), Scopes: []string{"nic"}, Duration: 2 * time.Millisecond,
		Capacity: 50e9, RTT: 6*simDelay + 200,
		Description: "multi-host RNIC (Fig. 4): A->C1 and B->C1 100 QPs each, B->C2 1 QP; C's RNIC (layer nic, 100G to its ToR, 50G PCIe per PF) runs NIC-ECN and TX-PFC; Eq. 15 fairness"}
	mh.Objective = tuning.DefaultObjective()
	mh.Objective.Fairness = true
	// The RNIC's shared receive buffer is far smaller than a switch's.
	nic := mh.Base.Switch
	nic.Buffer = 4 << 20
	mh.Base.Layers = map[string]fabric.SwitchConfig{"nic": nic}
	mh.Build = func() (*topo.Graph, *topo.Routes, []workload.Flow, error) {
		g := &topo.Graph{}
		a := g.AddNode(topo.Node{Name: "a", Kind: topo.Host})
		b := g.AddNode(topo.Node{Name: "b", Kind: topo.Host})
		c1 := g.AddNode(topo.Node{Name: "c1", Kind: topo.Host, Machine: "c"})
		c2 := g.AddNode(topo.Node{Name: "c2", Kind: topo.Host, Machine: "c"})
		t0 := g.AddNode(topo.Node{Name: "tor0", Kind: topo.Switch, Layer: "tor"})
		t1 := g.AddNode(topo.Node{Name: "tor1", Kind: topo.Switch, Layer: "tor"})
		t2 := g.AddNode(topo.Node{Name: "tor2", Kind: topo.Switch, Layer: "tor"})
		sp := g.AddNode(topo.Node{Name: "spine0", Kind: topo.Switch, Layer: "spine"})
		nc := g.AddNode(topo.Node{Name: "nic0", Kind: topo.Switch, Layer: "nic"})
		g.AddLink(a, t0, 100e9, simDelay)
		g.AddLink(b, t1, 100e9, simDelay)
		g.AddLink(c1, nc, 50e9, 100)
		g.AddLink(c2, nc, 50e9, 100)
		g.AddLink(nc, t2, 100e9, simDelay)
		for _, t := range []int{t0, t1, t2} {
			g.AddLink(t, sp, 200e9, simDelay)
		}
		if err := g.Validate(); err != nil {
			return nil, nil, nil, err
		}
		// 500 QPs per yellow flow in the paper; 100 here keep an
		// evaluation fast and still dwarf the single red QP.
		flows := workload.Merge(qps([]int{a}, c1, 100, 1<<20, 1, 0), qps([]int{b}, c1, 100, 1<<20, 1, 0), qps([]int{b}, c2, 1, 8<<20, 1, 0))
		return g, g.ShortestPaths(), flows, nil
	}
	m["multihost"] = mh
	return m
}

// SimScenarioNames are the scenarios in a stable order.
func SimScenarioNames() []string {
	return []string{"incast-2", "incast-24", "incast-39", "mixed", "multihost"}
}

// SimTarget runs a scenario in the fabric simulator with the applied
// watermarks. It is deterministic: the same configuration gives the same
// telemetry. One SimTarget serves one goroutine.
type SimTarget struct {
	Sc SimScenario
	// SampleNs is the queue sampling period (default 2 us).
	SampleNs int64
	// INTSampleRate, when positive, reports throughput only as INT
	// report counts (one report per 1/rate data packets) for Eq. 16.
	INTSampleRate float64
	// Telemetry names the switches watched; empty: the switches that
	// deliver to a receiver (the paper's receiver-side collection).
	Telemetry []string

	g      *topo.Graph
	routes *topo.Routes
	flows  []workload.Flow
	cfg    *tuning.Config
	// Last is the last run's raw results (reports).
	Last *fabric.Results
	// Ops are the last run's request/response exchanges (a Loop with
	// replies), Skipped its bursts a busy QP skipped and Posted its
	// messages (requests) posted.
	Ops     []Op
	Skipped uint64
	Posted  uint64
}

// NewSimTarget builds the scenario's topology and workload once.
func NewSimTarget(sc SimScenario) (*SimTarget, error) {
	g, r, fl, err := sc.Build()
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", sc.Name, err)
	}
	t := &SimTarget{Sc: sc, SampleNs: 2000, g: g, routes: r, flows: fl}
	if sc.Loop != nil {
		if err := sc.Loop.validate(g); err != nil {
			return nil, fmt.Errorf("scenario %s: %w", sc.Name, err)
		}
		if len(fl) > 0 {
			return nil, fmt.Errorf("scenario %s: a loop workload and static flows", sc.Name)
		}
	}
	if len(t.Telemetry) == 0 {
		var dem []tuning.Demand
		for _, p := range t.demands() {
			dem = append(dem, tuning.Demand{Src: p[0], Dst: p[1]})
		}
		comp := tuning.Compress(g, r, dem, tuning.CompressOptions{PerLayer: true, OnPathOnly: true, ReceiverSide: !sc.PathTelemetry})
		t.Telemetry = comp.Telemetry
	}
	return t, nil
}

// Graph, Routes and Flows are the scenario's.
func (t *SimTarget) Graph() (*topo.Graph, *topo.Routes, []workload.Flow) {
	return t.g, t.routes, t.flows
}

// FabricConfig is the simulator configuration with c's watermarks on
// their layers or switches. A switch scope becomes a layer of its own;
// port scopes cannot be simulated (the simulator configures switches).
func (t *SimTarget) FabricConfig(c tuning.Config) (fabric.Config, *topo.Graph, error) {
	fc := t.Sc.Base
	fc.Layers = map[string]fabric.SwitchConfig{}
	for k, v := range t.Sc.Base.Layers {
		fc.Layers[k] = v
	}
	if t.Sc.Hosts != nil {
		fc.Hosts = t.Sc.Hosts
	}
	g := t.g
	layers := map[string]bool{}
	for _, n := range g.Nodes {
		if n.Kind == topo.Switch {
			layers[n.Layer] = true
		}
	}
	for _, s := range c.ScopeNames() {
		kind, name, _, err := tuning.ParseScope(s)
		if err != nil {
			return fc, nil, err
		}
		w := c.Scopes[s]
		switch kind {
		case "layer":
			if !layers[name] {
				return fc, nil, fmt.Errorf("%w: no switch of layer %q in scenario %s", tuning.ErrUnreachable, name, t.Sc.Name)
			}
			base, ok := fc.Layers[name]
			if !ok {
				base = fc.Switch
			}
			fc.Layers[name] = applyWatermark(base, w, c.Cell)
		case "switch":
			i, ok := g.Node(name)
			if !ok || g.Nodes[i].Kind != topo.Switch {
				return fc, nil, fmt.Errorf("%w: no switch %q in scenario %s", tuning.ErrUnreachable, name, t.Sc.Name)
			}
			if g == t.g {
				g = cloneGraph(t.g)
			}
			base, ok := fc.Layers[g.Nodes[i].Layer]
			if !ok {
				base = fc.Switch
			}
			g.Nodes[i].Layer = s
			fc.Layers[s] = applyWatermark(base, w, c.Cell)
		case "port":
			return fc, nil, fmt.Errorf("scope %s: the simulator sets watermarks per switch, not per port", s)
		}
	}
	return fc, g, nil
}

func cloneGraph(g *topo.Graph) *topo.Graph {
	ng := &topo.Graph{}
	for _, n := range g.Nodes {
		ng.AddNode(n)
	}
	for _, l := range g.Links {
		ng.AddLink(l.A, l.B, l.Bandwidth, l.Delay)
	}
	return ng
}

// applyWatermark sets a switch's ECN and PFC thresholds from w.
func applyWatermark(sc fabric.SwitchConfig, w tuning.Watermark, cell int64) fabric.SwitchConfig {
	sc.ECN = true
	sc.Kmin, sc.Kmax = w.Kmin*cell, w.Kmax*cell
	sc.Pmax = w.Pmax / 100
	sc.Headroom = w.Headroom * cell
	sc.Alpha = w.Alpha * tuning.AlphaUnit
	return sc
}

// Apply takes the configuration for the next Measure.
func (t *SimTarget) Apply(_ context.Context, c tuning.Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if _, _, err := t.FabricConfig(c); err != nil {
		return err
	}
	t.cfg = &c
	return nil
}

// Measure runs the scenario for d of simulated time (the scenario's
// duration when d is 0) and reports the watched switches' data ports:
// throughput from the bytes they sent, queue statistics from samples
// every SampleNs, and per source-destination pair the data bytes
// delivered (Eq. 15's flows: the paper's flows are groups of QPs).
func (t *SimTarget) Measure(ctx context.Context, d time.Duration) (tuning.Telemetry, error) {
	if t.cfg == nil {
		return tuning.Telemetry{}, errors.New("simulator: measure before apply")
	}
	if d <= 0 {
		d = t.Sc.Duration
	}
	fc, g, err := t.FabricConfig(*t.cfg)
	if err != nil {
		return tuning.Telemetry{}, err
	}
	routes := t.routes
	if g != t.g {
		routes = g.ShortestPaths()
	}
	sim, err := fabric.New(g, routes, t.flows, fc)
	if err != nil {
		return tuning.Telemetry{}, fmt.Errorf("simulator: %w", err)
	}
	type watch struct {
		node    int
		samples [][]float64 // per port
		pkts    []uint64
		bytes   []uint64
	}
	var ws []*watch
	swIdx := map[int]*watch{}
	for _, name := range t.Telemetry {
		i, ok := g.Node(name)
		if !ok {
			return tuning.Telemetry{}, fmt.Errorf("%w: telemetry switch %q", tuning.ErrUnreachable, name)
		}
		n := sim.NumPorts(i)
		w := &watch{node: i, samples: make([][]float64, n), pkts: make([]uint64, n), bytes: make([]uint64, n)}
		ws = append(ws, w)
		swIdx[sim.SwitchOf(i)] = w
	}
	type pair struct{ src, dst int }
	pairOf := map[pair]int{}
	var pairs []pair
	for _, d := range t.demands() {
		p := pair{d[0], d[1]}
		if _, ok := pairOf[p]; !ok {
			pairOf[p] = len(pairs)
			pairs = append(pairs, p)
		}
	}
	pairBytes := make([]float64, len(pairs))
	pairQueue := make([]float64, len(pairs))
	pairQN := make([]float64, len(pairs))
	nextPSN := make([]int32, len(t.flows))
	var loop *loopRun
	hooks := &fabric.Hooks{}
	// horizon is the last instant telemetry covers: the posting window,
	// or with WholeRun the drain's end (cut back to the last completion
	// below).
	horizon := int64(d)
	var lastDone int64
	if t.Sc.Loop != nil {
		loop = newLoopRun(t.Sc.Loop, int64(d))
		loop.start(sim)
		hooks.Done = func(fi int32) {
			lastDone = sim.Now()
			loop.done(sim, fi)
		}
		if t.Sc.WholeRun {
			horizon += int64(t.Sc.Drain)
		}
	}
	hooks.Dequeue = func(sw, port int, p *fabric.Packet, qbytes int64) {
		w := swIdx[sw]
		// Without WholeRun telemetry is the posting window's: a loop's
		// drain after it is only for the FCTs.
		if w == nil || p.Kind != fabric.KindData || sim.Now() > horizon {
			return
		}
		if _, ok := pairOf[pair{int(p.Src), int(p.Dst)}]; !ok && loop != nil {
			// A loop's replies are not the workload the objective
			// judges: a port carrying only replies would score a few
			// bytes a second of throughput.
			return
		}
		for int(p.Flow) >= len(nextPSN) {
			nextPSN = append(nextPSN, 0)
		}
		w.pkts[port]++
		if peer, _ := sim.Peer(w.node, port); peer != int(p.Dst) || p.PSN == nextPSN[p.Flow] {
			w.bytes[port] += uint64(p.Size)
		}
		// Only in-order new data counts toward a flow group's
		// throughput: go-back-N's receiver drops the rest, so this is
		// goodput, and losses cost what their retransmissions cost.
		if peer, _ := sim.Peer(w.node, port); peer == int(p.Dst) && p.PSN == nextPSN[p.Flow] {
			nextPSN[p.Flow]++
			if k, ok := pairOf[pair{int(p.Src), int(p.Dst)}]; ok {
				pairBytes[k] += float64(p.Size)
				pairQueue[k] += float64(qbytes)
				pairQN[k]++
			}
		}
	}
	sim.SetHooks(hooks)
	var sample func(*fabric.Sim)
	sample = func(s *fabric.Sim) {
		for _, w := range ws {
			for port := range w.samples {
				var q int64
				for prio := range uint8(fabric.NumPrio) {
					q += s.QueueBytes(w.node, port, prio)
				}
				w.samples[port] = append(w.samples[port], float64(q))
			}
		}
		if next := s.Now() + t.SampleNs; next <= horizon && (next <= int64(d) || (loop != nil && loop.pending(s))) {
			s.At(next, sample)
		}
	}
	sim.At(0, sample)
	res, err := sim.Run(ctx, int64(d))
	if err != nil {
		return tuning.Telemetry{}, fmt.Errorf("simulator: %w", err)
	}
	t.Last = res
	t.Ops, t.Skipped, t.Posted = nil, 0, 0
	if loop != nil {
		// The drain: no new posts, the messages in flight run to their
		// completion (or the drain's end, unfinished).
		until := int64(d) + int64(t.Sc.Drain)
		for now := sim.Now(); now < until && loop.pending(sim); now = sim.Now() {
			if t.Last, err = sim.Run(ctx, min(now+100_000, until)); err != nil {
				return tuning.Telemetry{}, fmt.Errorf("simulator: %w", err)
			}
			if sim.Now() == now {
				break // nothing left to happen
			}
		}
		t.Ops, t.Skipped, t.Posted = loop.ops, loop.skipped, loop.posted
		if t.Sc.WholeRun {
			res = t.Last
		}
	}
	end := int64(d)
	if loop != nil && t.Sc.WholeRun {
		// The run ends with its last completion, or with the drain when
		// messages are left unfinished.
		end = max(end, lastDone)
		if loop.pending(sim) {
			end = horizon
		}
	}
	tel := tuning.Telemetry{Duration: end, Drops: res.Stats.Drops, Pauses: res.Stats.PauseFrames, Source: "simulator:" + t.Sc.Name}
	secs := float64(end) / 1e9
	// Samples were taken every SampleNs from 0: keep those inside the
	// window.
	keep := int(end/t.SampleNs) + 1
	for _, w := range ws {
		ss := tuning.SwitchStats{Name: g.Nodes[w.node].Name, Layer: g.Nodes[w.node].Layer}
		for port, smp := range w.samples {
			if w.pkts[port] == 0 {
				continue // carried no data: ACK-only uplinks and idle ports
			}
			ps := tuning.PortStats{Port: port, Capacity: g.Links[g.Ports(w.node)[port].Link].Bandwidth}
			pr := res.Port(g.Nodes[w.node].Name, port)
			if pr != nil {
				ps.Drops, ps.PausedNs = pr.Drops, pr.PausedNs
				ps.QueueMax = float64(pr.MaxQueue)
			}
			if t.INTSampleRate > 0 {
				ps.Reports = uint64(math.Floor(float64(w.pkts[port]) * t.INTSampleRate))
				ps.SampleRate = t.INTSampleRate
				ps.AvgPacket = float64(w.bytes[port]) / float64(w.pkts[port])
			} else {
				ps.Throughput = float64(w.bytes[port]) * 8 / secs
			}
			smp = smp[:min(len(smp), keep)]
			sum := 0.0
			for _, v := range smp {
				sum += v
			}
			if len(smp) > 0 {
				ps.QueueMean = sum / float64(len(smp))
			}
			ps.QueueP99 = tuning.Percentile(smp, 99)
			ss.Ports = append(ss.Ports, ps)
		}
		tel.Switches = append(tel.Switches, ss)
	}
	for k := range pairs {
		fs := tuning.FlowStats{ID: k, Throughput: pairBytes[k] * 8 / secs}
		if pairQN[k] > 0 {
			fs.Queue = pairQueue[k] / pairQN[k]
		}
		tel.Flows = append(tel.Flows, fs)
	}
	return tel, nil
}

// demands are the source-destination pairs of the workload: its flows',
// or its loop's requests (replies are a few bytes back).
func (t *SimTarget) demands() [][2]int {
	var out [][2]int
	if l := t.Sc.Loop; l != nil {
		for _, s := range l.Senders {
			out = append(out, [2]int{s, l.Dst})
		}
		return out
	}
	for _, f := range t.flows {
		out = append(out, [2]int{f.Src, f.Dst})
	}
	return out
}

// PairNames names Measure's flow groups ("a->c1") in their order.
func (t *SimTarget) PairNames() []string {
	seen := map[[2]int]bool{}
	var out []string
	for _, f := range t.flows {
		k := [2]int{f.Src, f.Dst}
		if !seen[k] {
			seen[k] = true
			out = append(out, t.g.Nodes[f.Src].Name+"->"+t.g.Nodes[f.Dst].Name)
		}
	}
	return out
}

// scenarioList is the names joined for messages.
func scenarioList() string {
	n := SimScenarioNames()
	sort.Strings(n)
	return strings.Join(slices.Clip(n), ", ")
}

// NewSimTargetNamed builds a named scenario's target.
func NewSimTargetNamed(name string) (*SimTarget, error) {
	sc, ok := SimScenarios()[name]
	if !ok {
		return nil, fmt.Errorf("simulator scenario %q: %s", name, scenarioList())
	}
	return NewSimTarget(sc)
}

// Inventory is the simulated fabric's switches with one interface per port,
// so the chosen watermarks can be rendered in any dialect.
func (t *SimTarget) Inventory() []tuning.Switch {
	g, _, _ := t.Graph()
	var out []tuning.Switch
	for i, n := range g.Nodes {
		if n.Kind != topo.Switch {
			continue
		}
		sw := tuning.Switch{Name: n.Name, Layer: n.Layer, Dialect: "comware", Prio: 3}
		for p := range g.Ports(i) {
			sw.Ports = append(sw.Ports, fmt.Sprintf("Ethernet%d", 4*p))
		}
		out = append(out, sw)
	}
	return out
}

var _ tuning.Inventoried = (*SimTarget)(nil)

// Simulator serves run files' simulator target kind with the scenarios of
// SimScenarios.
type Simulator struct{}

var _ tuning.Simulator = Simulator{}

// Scenarios are the scenario names, sorted: the online ones or the
// others.
func (Simulator) Scenarios(online bool) []string {
	n := SimScenarioNames()
	if online {
		n = LiveScenarioNames()
	}
	sort.Strings(n)
	return n
}

// Defaults are a scenario's scopes and objective.
func (Simulator) Defaults(name string, online bool) ([]string, tuning.Objective, bool) {
	if online {
		sc, ok := LiveScenarios()[name]
		return sc.Scopes, sc.Objective, ok
	}
	sc, ok := SimScenarios()[name]
	return sc.Scopes, sc.Objective, ok
}

// Open makes the target of a run file's scenario: for an online one, the
// fabric starts running here and runs on until the tuner is done, with the
// file's duration as its telemetry window.
func (Simulator) Open(ts tuning.TargetSpec) (tuning.Target, float64, int64, error) {
	if ts.Online {
		sc, ok := LiveScenarios()[ts.Scenario]
		if !ok {
			return nil, 0, 0, fmt.Errorf("online scenario %q: %s", ts.Scenario, strings.Join(LiveScenarioNames(), ", "))
		}
		if ts.Duration != "" {
			d, err := time.ParseDuration(ts.Duration)
			if err != nil || d <= 0 {
				return nil, 0, 0, fmt.Errorf("online window %q: like 1ms", ts.Duration)
			}
			sc.Window = d
		}
		lt, err := NewLiveTarget(sc)
		if err != nil {
			return nil, 0, 0, err
		}
		return lt, sc.Capacity, sc.RTT, nil
	}
	st, err := NewSimTargetNamed(ts.Scenario)
	if err != nil {
		return nil, 0, 0, err
	}
	st.INTSampleRate = ts.INTSampleRate
	return st, st.Sc.Capacity, st.Sc.RTT, nil
}
