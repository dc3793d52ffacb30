package hawkeyeeval

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/rdma-appliance/appliance/bench/fabric"
	"github.com/rdma-appliance/appliance/bench/hawkeyesim"
	"github.com/rdma-appliance/appliance/collector/hawkeyeanalyzer"
	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
)

// Params are the detection and telemetry parameters: Figure 7's axes.
// Every method runs with the same ones.
type Params struct {
	// EpochShift: telemetry epochs of 2^EpochShift ns (20: 1.05 ms). The
	// data plane picks epochs by timestamp bits, so they are powers of
	// two.
	EpochShift uint `json:"epoch_shift"`
	// Threshold: the agent polls when a flow's RTT passes this percent
	// of the fabric's largest RTT without queues (hawkeyesim.BaseMax).
	Threshold int `json:"threshold_percent"`
}

// DefaultParams: 1 ms epochs, 300% of the fabric's largest RTT.
func DefaultParams() Params { return Params{EpochShift: 20, Threshold: 300} }

// Epoch is the epoch length.
func (p Params) Epoch() time.Duration { return time.Duration(int64(1) << p.EpochShift) }

func (p Params) String() string {
	return fmt.Sprintf("epoch %v, threshold %d%%", p.Epoch(), p.Threshold)
}

// Validate checks the parameters against what the switch program and the
// agent take.
func (p Params) Validate() error {
	if p.EpochShift < 10 || p.EpochShift > 30 {
		return fmt.Errorf("epoch of 2^%d ns: 2^10 (1 us) .. 2^30 (1 s)", p.EpochShift)
	}
	if p.Threshold < 110 || p.Threshold > 10000 {
		return fmt.Errorf("threshold %d%%: 110 .. 10000", p.Threshold)
	}
	return nil
}

const (
	// readDelay is how long after a poll the switches' CPUs read their
	// registers (the paper's pollers take tens of milliseconds; by then
	// the epochs hold the anomaly as it developed, not only its first
	// microseconds).
	readDelay = 500_000
	// retraceLead: the switches' CPUs take the mirrored polls and
	// re-trace (hawkeyesim.Config.Retrace) this long before the
	// registers are read: the re-trace's polling packets cross the
	// fabric at line rate, 2 us and a hop's handling each, so by the read
	// they have reached every switch a trace of 20 hops would.
	retraceLead = 50_000
	// collectInterval: a switch collected less than this ago is not read
	// again for another incident; its last report serves (the paper's
	// interval between two collections of one switch), for every method.
	collectInterval = 100_000
	// sameDetection: a background flow the agents catch in the
	// counterfactual run within this of its detection in the trace was
	// caught for reasons of its own, not the anomaly's.
	sameDetection = 500_000
	// settle is the end of a trace over which a deadlocked loop must
	// carry no data.
	settle = 500_000
	// drain: an incast's or a storm's queue still delays flows this long
	// after its last flow finished.
	drain = 200_000
	// quietQdepth (bytes): the analyzer's MinContention.
	quietQdepth = 2000
	// pauseWindow: the pauses that can have delayed a flow caught at t
	// are those of the last half millisecond (a PAUSE holds a 100G port
	// for at most 335 us; a lasting one is refreshed).
	pauseWindow = 500_000
)

// Incident is one detection an agent raised, its ground truth and what
// every method made of it.
type Incident struct {
	Time int64 `json:"time_ns"`
	Flow int   `json:"flow"`
	// RTT is what crossed the agent's threshold (a stalled flow's wait
	// for an ACK), Base what it was compared with.
	RTT  int64 `json:"rtt_ns"`
	Base int64 `json:"base_ns"`
	// Stall: the agent's stall check raised it (no ACK for longer than
	// the threshold), not an RTT sample.
	Stall bool `json:"stall,omitempty"`
	// Victim: the flow suffered the injected anomaly (one of the
	// anomaly's own flows, or a background flow caught after the anomaly
	// began that the counterfactual run did not catch). Expect are the
	// types a right diagnosis may name for it, Causal the switches on its
	// path and on the PFC chains from its path to the root cause.
	Victim  bool      `json:"victim"`
	Expect  []Anomaly `json:"expect,omitempty"`
	Causal  []string  `json:"causal,omitempty"`
	Results []Result  `json:"results"`
}

// Result is one method's diagnosis of an incident.
type Result struct {
	Method  Method  `json:"method"`
	Verdict Verdict `json:"verdict"`
	// Bytes is the telemetry the diagnosis read (the paper's processing
	// overhead, Figure 9a): its NPA's, processed once and shared among
	// the NPA's detections; Collected what was read from the switches
	// for it, reports collected less than the interval before serving
	// again at no cost.
	Bytes     int      `json:"bytes"`
	Collected int      `json:"collected"`
	Switches  []string `json:"switches"`
	// Telemetry is what the method collected, kept when asked for.
	Telemetry *hawkeyewire.Telemetry `json:"-"`
}

// TraceResult is one trace's run.
type TraceResult struct {
	Topology Topology
	Anomaly  Anomaly
	Seed     uint64
	// Manifested: the fabric showed the anomaly as injected; Reason says
	// why not.
	Manifested bool
	Reason     string
	Truth      Truth
	Incidents  []Incident
	// Keys are the root-cause flows' 5-tuples.
	Keys []hawkeyewire.FlowKey
}

// RunOptions say what Run runs.
type RunOptions struct {
	Params  Params
	Methods []Method
	// Keep keeps every method's telemetry in the results (for the lab's
	// gallery); an evaluation drops it once diagnosed.
	Keep bool
}

// Run simulates a trace with Hawkeye on every switch and host, and its
// counterfactual; diagnoses every detection the agents raised with every
// method's telemetry; and settles each detection's ground truth.
func Run(ctx context.Context, tr *Trace, o RunOptions) (*TraceResult, error) {
	if err := o.Params.Validate(); err != nil {
		return nil, err
	}
	a, err := runTrace(ctx, tr, o, true)
	if err != nil {
		return nil, err
	}
	b, err := runTrace(ctx, tr.Counterfactual(), o, false)
	if err != nil {
		return nil, fmt.Errorf("counterfactual: %w", err)
	}
	res := &TraceResult{Topology: tr.Topology, Anomaly: tr.Truth.Anomaly, Seed: tr.Seed, Truth: tr.Truth}
	for _, f := range tr.Truth.Flows {
		res.Keys = append(res.Keys, hawkeyesim.FlowKeyOf(a.sim, int32(f)))
	}
	res.Manifested, res.Reason = tr.manifested(a, b)
	later := map[int][]int64{}
	for _, p := range b.polls {
		later[int(p.Flow)] = append(later[int(p.Flow)], p.Time)
	}
	injected := map[int]bool{}
	for _, f := range tr.Truth.Injected {
		injected[f] = true
	}
	end := a.active(tr)
	for _, in := range a.incidents {
		inc := in.Incident
		switch {
		case inc.Time < tr.Truth.At:
		case injected[inc.Flow]:
			inc.Victim = true
		case inc.Flow < tr.Background:
			// A background flow is the anomaly's victim when the
			// counterfactual run did not catch it about then, the
			// anomaly was still at work, and a path of its own or of
			// paused links leads from the flow to it: a run that
			// diverged from the counterfactual only by chance (ECN
			// marks drawn at random, retransmissions) hurts no one.
			inc.Victim = inc.Time <= end && !slices.ContainsFunc(later[inc.Flow], func(t int64) bool {
				return t >= tr.Truth.At && t > inc.Time-sameDetection && t < inc.Time+sameDetection
			}) && a.connected(tr, int32(inc.Flow), inc.Time)
		}
		if inc.Victim {
			inc.Expect = a.expect(tr, inc.Flow, inc.Time, in.read)
			inc.Causal = in.causal
		}
		res.Incidents = append(res.Incidents, inc)
	}
	return res, nil
}

// run is one simulation of a trace with Hawkeye attached.
type run struct {
	sim       *fabric.Sim
	sys       *hawkeyesim.System
	polls     []hawkeyesim.PollEvent
	incidents []*pending
	// xoff are the PFC pauses switches sent: the port that received
	// each, and when.
	xoff []pauseEvent
	// loopPaused and nearLoop: when each flow first had a packet queued
	// paused at one of the loop's egress ports, or at any port of a loop
	// switch.
	loopPaused, nearLoop map[int32]int64
	deadlocked           bool
	names                []string // switch index -> name
	res                  *fabric.Results
}

type pauseEvent struct {
	node, port int
	t          int64
}

type pending struct {
	Incident
	poll   hawkeyesim.PollEvent
	visits []hawkeyesim.Visit
	read   int64
	causal []string
	// path is the victim's egress ports; got what each method read
	// for the detection, diagnosed with its incident's (npa).
	path []hawkeyeanalyzer.PortID
	got  [][]gotReport
}

// gotReport is one switch's report as a method read it for a detection.
type gotReport struct {
	sw    int
	rep   hawkeyewire.SwitchReport
	bytes int
}

// runTrace simulates tr; full also collects and diagnoses every
// incident (the counterfactual only needs the detections and the loop's
// fate).
func runTrace(ctx context.Context, tr *Trace, o RunOptions, full bool) (*run, error) {
	sim, err := tr.Sim()
	if err != nil {
		return nil, err
	}
	r := &run{sim: sim, loopPaused: map[int32]int64{}, nearLoop: map[int32]int64{}}
	cfg := hawkeyesim.DefaultConfig()
	cfg.EpochShift = o.Params.EpochShift
	cfg.ReadDelay = readDelay - retraceLead
	cfg.CollectInterval = collectInterval
	// A hop where the victim met neither pause nor a queue of the
	// analyzer's least contention has nothing to say about its delay.
	cfg.QuietQdepth = quietQdepth
	// The trace follows the pause as far as it spread by the time the
	// registers are read, not only as it stood when the poll passed.
	cfg.Retrace = true
	// The evaluation reads the switches itself, for every method alike
	// (same moment, same epochs, same interval between two collections
	// of a switch): Hawkeye's own CPU pollers would only read the same
	// registers again.
	cfg.NoPoller = true
	acfg := hawkeyesim.DefaultAgentConfig()
	acfg.Threshold = o.Params.Threshold
	// The paper's §5: "the detection threshold is usually 2-4 times the
	// maximum RTT (determined by the maximum hop count)"; §4.2 sweeps it
	// as a percentage of RTT. One base for every flow, the longest path's.
	acfg.Base = hawkeyesim.BaseMax
	loopSw := map[int]bool{}
	loopPort := map[[2]int]bool{}
	for i, n := range tr.Truth.Loop {
		node, _ := tr.Graph.Node(n)
		sw := sim.SwitchOf(node)
		loopSw[sw] = true
		loopPort[[2]int{sw, tr.Truth.LoopPorts[i]}] = true
	}
	rec := &fabric.Hooks{Pause: func(node, port int, prio uint8, quanta uint16) {
		if quanta > 0 && sim.SwitchOf(r.peer(node, port)) >= 0 {
			r.xoff = append(r.xoff, pauseEvent{node, port, sim.Now()})
		}
	}}
	if len(loopSw) > 0 {
		rec.Enqueue = func(sw, port int, p *fabric.Packet, _ int64) {
			if !loopSw[sw] || p.Kind != fabric.KindData || !sim.Paused(sim.NodeOfSwitch(sw), port, p.Prio) {
				return
			}
			if _, ok := r.nearLoop[p.Flow]; !ok {
				r.nearLoop[p.Flow] = sim.Now()
			}
			if _, ok := r.loopPaused[p.Flow]; !ok && loopPort[[2]int{sw, port}] {
				r.loopPaused[p.Flow] = sim.Now()
			}
		}
	}
	sys, err := hawkeyesim.Attach(sim, cfg, acfg, rec)
	if err != nil {
		return nil, err
	}
	r.sys = sys
	for i := range sys.Program.Switches() {
		r.names = append(r.names, sys.Program.SwitchName(i))
	}
	current := map[uint8]*pending{}
	sys.Program.OnVisit = func(v hawkeyesim.Visit) {
		if p := current[v.Event]; p != nil && p.poll.Flow == v.Flow {
			p.visits = append(p.visits, v)
		}
	}
	col := newCollector(r, tr, o)
	sys.Agent.OnPoll = func(p hawkeyesim.PollEvent) {
		if p.Time > tr.Duration {
			return
		}
		r.polls = append(r.polls, p)
		if !full {
			return
		}
		in := &pending{Incident: Incident{Time: p.Time, Flow: int(p.Flow), RTT: p.RTT, Base: p.Base, Stall: p.Stall}, poll: p, read: p.Time + readDelay}
		current[p.Event] = in
		r.incidents = append(r.incidents, in)
		sim.At(in.read, func(*fabric.Sim) { col.read(in) })
	}
	var before []uint64
	loopData := func(res *fabric.Results) []uint64 {
		var out []uint64
		for i, n := range tr.Truth.Loop {
			out = append(out, res.Port(n, tr.Truth.LoopPorts[i]).TxData)
		}
		return out
	}
	res, err := sim.Run(ctx, tr.Duration-settle)
	if err == nil {
		before = loopData(res)
		res, err = sim.Run(ctx, tr.Duration)
	}
	if err != nil {
		return nil, err
	}
	r.res = res
	if len(tr.Truth.Loop) > 0 {
		r.deadlocked = slices.Equal(before, loopData(res))
		for i, n := range tr.Truth.Loop {
			node, _ := tr.Graph.Node(n)
			r.deadlocked = r.deadlocked && sim.Paused(node, tr.Truth.LoopPorts[i], fabric.PrioData)
		}
	}
	if full {
		// The reads of detections near the end.
		if _, err := sim.Run(ctx, tr.Duration+readDelay); err != nil {
			return nil, err
		}
		for _, in := range r.incidents {
			if in.Results == nil {
				return nil, errors.New("hawkeyeeval: an incident was never read")
			}
		}
		col.diagnose()
	}
	return r, nil
}

func (r *run) peer(node, port int) int {
	n, _ := r.sim.Peer(node, port)
	return n
}

// route is flow's path as the routes and its ECMP hash send it: the
// switches and their egress ports in order, each switch once (a loop is
// followed round once).
func (r *run) route(flow int32) (nodes, ports []int) {
	src, dst := r.sim.FlowEnds(flow)
	h := r.sim.FlowHash(flow)
	node, _ := r.sim.Peer(src, 0)
	for len(nodes) < 64 && node != dst && r.sim.SwitchOf(node) >= 0 && !slices.Contains(nodes, node) {
		p := r.sim.NextHop(node, dst, h)
		if p < 0 {
			break
		}
		nodes, ports = append(nodes, node), append(ports, p)
		node, _ = r.sim.Peer(node, p)
	}
	return nodes, ports
}

// expect are the types a right diagnosis may name for flow's incident,
// detected at t and read at read. An out-of-loop deadlock is two
// injected anomalies at once, the cause outside the loop and the
// deadlock it closes, with one root cause (the paper's Table 2: an
// out-of-loop deadlock's root cause is the flow contention or the host
// PFC injection outside the loop, found at the end of "a PFC path" from
// "a port node in the loop"). A flow that waited on the loop before it
// was caught, its packets paused at a loop port or its path paused by a
// chain of PFC through one (or the trickle, which only circles the
// loop), suffered the deadlock; one that waited on it only after, or was
// paused at another port of a loop switch, waited on both, and the
// telemetry read shows both; any other suffered the outside cause alone.
func (r *run) expect(tr *Trace, flow int, t, read int64) []Anomaly {
	a := tr.Truth.Anomaly
	if tr.Truth.Outside == NoAnomaly || flow == tr.Truth.Injected[0] {
		return []Anomaly{a}
	}
	lp, inLoop := r.loopPaused[int32(flow)]
	np, near := r.nearLoop[int32(flow)]
	nodes, _ := r.route(int32(flow))
	var loop []int
	for _, n := range tr.Truth.Loop {
		i, _ := tr.Graph.Node(n)
		loop = append(loop, i)
	}
	chain := func(x int64) bool {
		fwd, _ := r.pausedLinks(max(tr.Truth.At, x-pauseWindow), x)
		return throughLoop(nodes, fwd, loop)
	}
	switch {
	case inLoop && lp <= t, chain(t):
		return []Anomaly{a}
	case inLoop && lp <= read, near && np <= read, chain(read):
		return []Anomaly{a, tr.Truth.Outside}
	}
	return []Anomaly{tr.Truth.Outside}
}

// throughLoop says whether a chain of paused links (fwd: from a paused
// switch to the switches that paused it) leads from a switch of path to
// one of loop's ports (loop's switches in forwarding order, each paused
// by the next).
func throughLoop(path []int, fwd map[int][]int, loop []int) bool {
	f := reach(path, fwd)
	for i, n := range loop {
		if f[n] && slices.Contains(fwd[n], loop[(i+1)%len(loop)]) {
			return true
		}
	}
	return false
}

// pausedLinks are the links paused by PFC between from and to (an egress
// port that received a PAUSE from the switch at its far end), by switch:
// fwd from the paused switch to the one that paused it, back the reverse.
func (r *run) pausedLinks(from, to int64) (fwd, back map[int][]int) {
	fwd, back = map[int][]int{}, map[int][]int{}
	for _, e := range r.xoff {
		if e.t < from || e.t > to {
			continue
		}
		p := r.peer(e.node, e.port)
		fwd[e.node] = append(fwd[e.node], p)
		back[p] = append(back[p], e.node)
	}
	return fwd, back
}

// reach is every node reachable from start over adj.
func reach(start []int, adj map[int][]int) map[int]bool {
	seen := map[int]bool{}
	queue := slices.Clone(start)
	for _, n := range start {
		seen[n] = true
	}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, m := range adj[n] {
			if !seen[m] {
				seen[m] = true
				queue = append(queue, m)
			}
		}
	}
	return seen
}

func (r *run) where(tr *Trace) []int {
	var out []int
	for _, n := range tr.Truth.Where {
		if i, ok := tr.Graph.Node(n); ok {
			out = append(out, i)
		}
	}
	return out
}

// connected says whether flow, caught at t, could have suffered the
// anomaly: its path crosses a port where the root cause acts, or a chain
// of links PFC paused since the anomaly began leads from its path to a
// switch where it acts.
func (r *run) connected(tr *Trace, flow int32, t int64) bool {
	nodes, ports := r.route(flow)
	for i, n := range nodes {
		if slices.Contains(tr.Truth.Ports, SwitchPort{tr.Graph.Nodes[n].Name, ports[i]}) {
			return true
		}
	}
	fwd, _ := r.pausedLinks(max(tr.Truth.At, t-pauseWindow), t)
	f := reach(nodes, fwd)
	return slices.ContainsFunc(r.where(tr), func(n int) bool { return f[n] })
}

// active is until when the anomaly can hurt a flow: a deadlock for good;
// an incast, contention or storm until its last flow finished (and the
// storm stopped), with a margin for the queue it left to drain.
func (r *run) active(tr *Trace) int64 {
	if tr.Truth.Anomaly.Deadlock() {
		return tr.Duration
	}
	end := tr.Truth.At
	for _, f := range tr.Truth.Injected {
		fr := r.res.Flows[f]
		if !fr.Done {
			return tr.Duration
		}
		end = max(end, fr.Start+fr.FCT)
	}
	for _, f := range tr.Faults {
		end = max(end, f.Until)
	}
	return end + drain
}

// causal are the switches causally relevant to flow's incident at t,
// from the simulation's own record of pauses: the flow's path, and every
// switch on a chain of links paused about then (from pauseWindow before
// the detection until it) from a switch of that path to where the root
// cause acts.
func (r *run) causal(tr *Trace, flow int32, t int64) []string {
	nodes, _ := r.route(flow)
	fwd, back := r.pausedLinks(max(tr.Truth.At, t-pauseWindow), t)
	f, b := reach(nodes, fwd), reach(r.where(tr), back)
	set := map[string]bool{}
	for _, n := range nodes {
		set[tr.Graph.Nodes[n].Name] = true
	}
	for n := range f {
		if b[n] {
			set[tr.Graph.Nodes[n].Name] = true
		}
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// collector reads the switches for every method at each incident, as
// each would have: the same registers at the same moment, each method
// over its own switches and with its own memory of when it last
// collected each one.
type collector struct {
	r     *run
	tr    *Trace
	o     RunOptions
	hosts map[string]uint32
	links []hawkeyewire.Link
	// last[m][sw]: the method's latest collection of a switch.
	last []map[int]snapshot
}

type snapshot struct {
	at int64
	r  hawkeyewire.SwitchReport
}

func newCollector(r *run, tr *Trace, o RunOptions) *collector {
	c := &collector{r: r, tr: tr, o: o}
	c.hosts, c.links = hawkeyesim.Topology(r.sim)
	for range o.Methods {
		c.last = append(c.last, map[int]snapshot{})
	}
	return c
}

// read collects and diagnoses an incident for every method.
func (c *collector) read(in *pending) {
	r := c.r
	now := r.sim.Now()
	idx := map[string]int{}
	for i, n := range r.names {
		idx[n] = i
	}
	traced, onPath := map[int]bool{}, map[int]bool{}
	for _, v := range in.visits {
		// The victim-only baseline polls the whole path; Hawkeye's
		// switches where the victim was neither paused nor queued
		// mirror the poll to no CPU (hawkeyesim.Config.QuietQdepth).
		if v.Type&hawkeyewire.TypeFlow != 0 {
			onPath[idx[v.Switch]] = true
		}
		if !v.Quiet {
			traced[idx[v.Switch]] = true
		}
	}
	fresh := map[int]hawkeyewire.SwitchReport{}
	readSw := func(sw int) hawkeyewire.SwitchReport {
		rep, ok := fresh[sw]
		if !ok {
			rep = r.sys.Program.Collect(sw)
			fresh[sw] = rep
		}
		return rep
	}
	nodes, ports := r.route(in.poll.Flow)
	var path []hawkeyeanalyzer.PortID
	for i, n := range nodes {
		path = append(path, hawkeyeanalyzer.PortID{Switch: c.tr.Graph.Nodes[n].Name, Port: ports[i]})
	}
	in.causal = r.causal(c.tr, in.poll.Flow, in.poll.Time)
	in.path = path
	in.got = make([][]gotReport, len(c.o.Methods))
	for mi, m := range c.o.Methods {
		res := Result{Method: m}
		for sw := range r.names {
			switch m.scope() {
			case scopeTraced:
				if !traced[sw] {
					continue
				}
			case scopeVictim:
				if !onPath[sw] {
					continue
				}
			}
			last, ok := c.last[mi][sw]
			reuse := ok && !m.streams() && now-last.at < collectInterval
			if !reuse {
				last = snapshot{now, readSw(sw)}
				c.last[mi][sw] = last
			}
			rep, b := m.shape(last.r)
			if reuse {
				rep.Bytes = 0
			} else {
				res.Collected += b
			}
			in.got[mi] = append(in.got[mi], gotReport{sw, rep, b})
			res.Switches = append(res.Switches, r.names[sw])
		}
		slices.Sort(res.Switches)
		in.Results = append(in.Results, res)
	}
}

// npa is one network performance anomaly as the analyzer sees it: the
// detections whose polling packets' paths overlap, each raised while the
// diagnosis of the ones before was still open (its telemetry not yet all
// read). The paper's §3.4 collects the polls of one anomaly's victims
// (F1-F4 of its Figure 1(c)) together, and diagnoses NPAs independently
// only when their paths do not overlap; Algorithm 2 then runs from each
// victim over the NPA's provenance graph.
type npa struct {
	members  []*pending
	switches map[string]bool // the switches its polling packets visited
	first    int64           // its first detection
	close    int64           // its last read
}

// npas groups the run's detections, in detection order: a detection joins
// every open NPA its polling packet's path overlaps (merging them), as
// long as the NPA's last read still holds the epoch of its first
// detection (the switches keep Epochs epochs); otherwise it opens one.
func (c *collector) npas() []*npa {
	var out []*npa
	shift := c.o.Params.EpochShift
	for _, in := range c.r.incidents {
		sw := map[string]bool{}
		for _, v := range in.visits {
			sw[v.Switch] = true
		}
		var into *npa
		for _, n := range out {
			if n.members == nil || in.Time > n.close || (in.read>>shift)-(n.first>>shift) >= hawkeyesim.Epochs ||
				!overlaps(sw, n.switches) {
				continue
			}
			if into == nil {
				into = n
				continue
			}
			// The detection joins two open NPAs: they are one.
			into.members = append(into.members, n.members...)
			maps.Copy(into.switches, n.switches)
			into.first, into.close = min(into.first, n.first), max(into.close, n.close)
			n.members = nil
		}
		if into == nil {
			into = &npa{switches: map[string]bool{}, first: in.Time, close: in.read}
			out = append(out, into)
		}
		into.members = append(into.members, in)
		maps.Copy(into.switches, sw)
		into.close = max(into.close, in.read)
	}
	return slices.DeleteFunc(out, func(n *npa) bool { return n.members == nil })
}

// overlaps says a and b share a switch.
func overlaps(a, b map[string]bool) bool {
	for s := range a {
		if b[s] {
			return true
		}
	}
	return false
}

// diagnose diagnoses every detection, once the run is over, as the
// analyzer would once each NPA's telemetry is all read: each method over
// the latest report of every switch it read for the NPA, from each
// member's victim. The NPA's telemetry is processed once: its bytes are
// shared among its members' diagnoses.
func (c *collector) diagnose() {
	for _, n := range c.npas() {
		slices.SortStableFunc(n.members, func(a, b *pending) int { return cmp.Compare(a.read, b.read) })
		for mi, m := range c.o.Methods {
			latest := map[int]gotReport{}
			for _, in := range n.members {
				for _, g := range in.got[mi] {
					latest[g.sw] = g
				}
			}
			sws := slices.Sorted(maps.Keys(latest))
			total := 0
			for _, sw := range sws {
				total += latest[sw].bytes
			}
			for i, in := range n.members {
				t := &hawkeyewire.Telemetry{Event: in.poll.Event, Victim: in.poll.Victim, Time: in.poll.Time, Hosts: c.hosts, Links: c.links}
				for _, sw := range sws {
					t.Reports = append(t.Reports, latest[sw].rep)
				}
				res := &in.Results[mi]
				res.Bytes = total / len(n.members)
				if i < total%len(n.members) {
					res.Bytes++
				}
				res.Verdict = m.diagnose(t, in.path)
				if c.o.Keep {
					res.Telemetry = t
				}
			}
			deadlockNPA(n.members, mi)
			for _, in := range n.members {
				in.got[mi] = nil
			}
		}
	}
}

// deadlockNPA gives an NPA's members the deadlock one of them found,
// where their own diagnosis traced the pause to the same initial
// congestion point without meeting the loop (the loop was not closed yet
// when their telemetry was read, or their pause reached the origin by
// another branch): the paper's Table 2 matches signatures on the NPA's
// provenance graph, where a loop of paused ports makes the anomaly a
// deadlock, and Algorithm 2 names the loop's root cause at the end of the
// PFC path out of it. Members traced to another origin keep theirs.
// The member takes the diagnosis (and, kept, the telemetry it was made
// from, so that the lab's gallery draws what was scored).
func deadlockNPA(members []*pending, mi int) {
	found := map[string]*Result{}
	for _, in := range members {
		r := &in.Results[mi]
		if _, ok := found[r.Verdict.initiator]; !ok && r.Verdict.Anomaly.Deadlock() && r.Verdict.initiator != "" {
			found[r.Verdict.initiator] = r
		}
	}
	for _, in := range members {
		r := &in.Results[mi]
		if d, ok := found[r.Verdict.initiator]; ok && r.Verdict.Anomaly != NoAnomaly && !r.Verdict.Anomaly.Deadlock() {
			r.Verdict, r.Telemetry = d.Verdict, d.Telemetry
		}
	}
}

// manifested checks the two runs for the anomaly as injected.
func (tr *Trace) manifested(a, b *run) (bool, string) {
	rcv := -1
	if tr.Truth.Receiver != "" {
		h, _ := tr.Graph.Node(tr.Truth.Receiver)
		rcv, _ = a.sim.Peer(h, 0)
	}
	// fromToR: the receiver's ToR sent PFC upstream after the anomaly
	// began.
	fromToR := slices.ContainsFunc(a.xoff, func(e pauseEvent) bool {
		return e.t >= tr.Truth.At && a.peer(e.node, e.port) == rcv
	})
	switch tr.Truth.Anomaly {
	case Incast:
		if !fromToR {
			return false, "the incast drew no PFC from the receiver's ToR"
		}
	case Storm:
		if !fromToR {
			return false, "the storm did not spread past the host's ToR"
		}
	case Contention:
		if slices.ContainsFunc(a.xoff, func(e pauseEvent) bool { return e.t >= tr.Truth.At }) {
			return false, "PFC paused a port: not plain contention"
		}
	case InLoopDeadlock:
		if !a.deadlocked {
			return false, "the loop did not deadlock"
		}
	case OutLoopContention, OutLoopInjection:
		switch {
		case !a.deadlocked:
			return false, "the loop did not deadlock"
		case b.deadlocked:
			return false, "the loop deadlocked without its outside cause"
		}
	}
	return true, ""
}
