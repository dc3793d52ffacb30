package hawkeyesim

import (
	"fmt"
	"math"

	"github.com/rdma-appliance/appliance/bench/fabric"
	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
	"github.com/rdma-appliance/appliance/internal/topo"
)

// BaseRTT says what a flow's RTT is compared with.
type BaseRTT uint8

const (
	// BasePath is the path's RTT without queues: propagation both ways,
	// a data frame's serialisation at every hop out and an ACK's back.
	// It does not depend on when a flow starts, so a flow born into a
	// congested fabric is still caught.
	BasePath BaseRTT = iota
	// BaseMin is the smallest RTT the flow has shown so far (what an
	// agent that knows nothing of the topology can do).
	BaseMin
	// BaseMax is the fabric's largest RTT without queues, the same for
	// every flow: the paper's §5, "the detection threshold is usually
	// 2-4 times the maximum RTT (determined by the maximum hop count)".
	// A flow on a short path then waits longer before it is caught.
	BaseMax
)

// AgentConfig is the detection agent's.
type AgentConfig struct {
	// Threshold is the RTT, in percent of the base RTT, above which the
	// agent polls (300: three times the base).
	Threshold int
	// Interval: one poll per flow within it (the paper's duplicate
	// suppression at the source).
	Interval int64
	Base     BaseRTT
	// FrameBytes is a data frame's size for BasePath (the MTU and
	// fabric.HeaderBytes; 1024 + 62 by default, the fabric's).
	FrameBytes int
	// Prio is the polling packets' class (fabric.PrioControl).
	Prio uint8
	// StallCheck is how often the agent looks for stalled flows: packets
	// outstanding and no ACK for longer than the threshold allows. A flow
	// caught in a deadlock or behind a storm gets no ACK at all, so no
	// RTT sample would ever cross the threshold. 0 takes the default;
	// negative turns the check off.
	StallCheck int64
}

// DefaultAgentConfig: 300% of the fabric's largest RTT (BaseMax, as the
// paper's §5 sets the threshold and the evaluation detects), a flow
// polled at most every 2 ms.
func DefaultAgentConfig() AgentConfig {
	return AgentConfig{Threshold: 300, Interval: 2_000_000, Base: BaseMax, FrameBytes: 1024 + fabric.HeaderBytes,
		Prio: fabric.PrioControl, StallCheck: 50_000}
}

// PollEvent is a poll an agent sent: what an evaluation matches against
// the anomalies it injected.
type PollEvent struct {
	Time   int64               `json:"time_ns"`
	Host   string              `json:"host"`
	Flow   int32               `json:"flow"`
	Victim hawkeyewire.FlowKey `json:"victim"`
	Event  uint8               `json:"event"`
	RTT    int64               `json:"rtt_ns"`  // the RTT that crossed the threshold
	Base   int64               `json:"base_ns"` // the base it was compared with
	// Stall: the poll came from the stall check (no ACK for longer than
	// the threshold), not from an RTT sample; RTT is then the wait.
	Stall bool `json:"stall,omitempty"`
	// NICPaused: the sender's NIC was paused by PFC for the victim's
	// class when the poll left, so the poll carried the PFC bit.
	NICPaused bool `json:"nic_paused,omitempty"`
}

// Agent is the detection agent of every host of a simulation: it watches
// each flow's RTTs at its sender (the Ack hook) and sends a polling
// packet for the flow from the sender's port when one passes the
// threshold. Event ids count up over all hosts, so in one simulation
// they are unique until 256 polls.
type Agent struct {
	cfg   AgentConfig
	sim   *fabric.Sim
	base  []int64 // per flow; 0 unknown
	max   int64   // the fabric's largest RTT, for BaseMax
	last  []int64 // last poll per flow; -1 none
	acked []int64 // last ACK per flow; 0 none yet
	next  uint8
	polls []PollEvent
	// OnPoll, when set, sees every poll as it is sent (Collector.Begin
	// fits).
	OnPoll func(PollEvent)
}

// NewAgent is the agent for sim's hosts. Zero fields of cfg take the
// defaults.
func NewAgent(sim *fabric.Sim, cfg AgentConfig) (*Agent, error) {
	d := DefaultAgentConfig()
	if cfg.Threshold == 0 {
		cfg.Threshold = d.Threshold
	}
	if cfg.Interval == 0 {
		cfg.Interval = d.Interval
	}
	if cfg.FrameBytes == 0 {
		cfg.FrameBytes = d.FrameBytes
	}
	if cfg.Prio == 0 {
		cfg.Prio = d.Prio
	}
	if cfg.StallCheck == 0 {
		cfg.StallCheck = d.StallCheck
	}
	if cfg.Threshold < 100 || cfg.Interval < 0 || cfg.Prio >= fabric.NumPrio || cfg.Base > BaseMax {
		return nil, fmt.Errorf("hawkeye: agent threshold %d%% (at least 100), interval %d, priority %d, base %d",
			cfg.Threshold, cfg.Interval, cfg.Prio, cfg.Base)
	}
	n := sim.Flows()
	a := &Agent{cfg: cfg, sim: sim, base: make([]int64, n), last: make([]int64, n), acked: make([]int64, n)}
	for i := range a.last {
		a.last[i] = -1
	}
	if cfg.Base == BaseMax {
		a.max = MaxRTT(sim.Graph(), cfg.FrameBytes)
	}
	if cfg.StallCheck > 0 && n > 0 {
		sim.At(sim.Now()+cfg.StallCheck, a.stalls)
	}
	return a, nil
}

// Hooks is the agent's Ack hook.
func (a *Agent) Hooks() *fabric.Hooks { return &fabric.Hooks{Ack: a.ack} }

// Polls are the polls sent so far, in time order.
func (a *Agent) Polls() []PollEvent { return a.polls }

// Base is flow's base RTT (0 before BaseMin has a sample).
func (a *Agent) Base(flow int32) int64 {
	if a.cfg.Base == BaseMax {
		return a.max
	}
	if a.base[flow] == 0 && a.cfg.Base == BasePath {
		a.base[flow] = PathRTT(a.sim, flow, a.cfg.FrameBytes)
	}
	return a.base[flow]
}

func (a *Agent) ack(host int, flow int32, rtt int64) {
	if flow < 0 || int(flow) >= len(a.base) || rtt <= 0 {
		return
	}
	a.acked[flow] = a.sim.Now()
	base := a.Base(flow)
	if a.cfg.Base == BaseMin && (base == 0 || rtt < base) {
		a.base[flow] = rtt
		return
	}
	if rtt*100 <= base*int64(a.cfg.Threshold) {
		return
	}
	now := a.sim.Now()
	if l := a.last[flow]; l >= 0 && now-l < a.cfg.Interval {
		return
	}
	a.send(host, flow, rtt, base, false)
}

// stalls polls for flows whose oldest outstanding packet has waited past
// the threshold without an ACK, and checks again later while any flow is
// unfinished.
func (a *Agent) stalls(sim *fabric.Sim) {
	now := sim.Now()
	pending := false
	for f := range a.base {
		flow := int32(f)
		started, done, sent, acked, start := sim.FlowProgress(flow)
		if done {
			continue
		}
		pending = true
		if !started || sent <= acked {
			continue
		}
		since := max(a.acked[f], start)
		base := a.Base(flow)
		if base <= 0 || (now-since)*100 <= base*int64(a.cfg.Threshold) {
			continue
		}
		if l := a.last[f]; l >= 0 && now-l < a.cfg.Interval {
			continue
		}
		src, _ := sim.FlowEnds(flow)
		_, _ = a.send(src, flow, now-since, base, true)
	}
	if pending {
		sim.At(now+a.cfg.StallCheck, a.stalls)
	}
}

// Poll sends a polling packet for flow from its source now, whatever its
// RTT (tests and baselines trigger incidents by hand).
func (a *Agent) Poll(flow int32) (PollEvent, error) {
	if flow < 0 || int(flow) >= len(a.base) {
		return PollEvent{}, fmt.Errorf("hawkeye: no flow %d", flow)
	}
	src, _ := a.sim.FlowEnds(flow)
	return a.send(src, flow, 0, a.Base(flow), false)
}

// send polls for flow from host. A sender whose NIC is paused for the
// victim's class (its switch sent it PAUSE frames) has the victim's first
// paused egress in the NIC itself: the poll carries the PFC bit, as a
// switch sets it on a paused egress (the paper's Figure 6), so that the
// switch which paused the NIC traces its own PFC causality from the port
// the poll came in by. Such a victim sends nothing and, its last packets
// short of the receiver's ACK batch, gets no ACK; no switch egress on its
// path is paused or queued for it, and without the bit none would report.
func (a *Agent) send(host int, flow int32, rtt, base int64, stall bool) (PollEvent, error) {
	ev := a.next
	pkt := PollPacket(a.sim, flow, ev, a.cfg.Prio)
	nic := a.sim.Paused(host, 0, a.sim.FlowPrio(flow))
	if nic {
		pkt.Tag = PollTag(hawkeyewire.TypeFlow|hawkeyewire.TypePFC, 0, 0, ev)
	}
	if err := a.sim.Send(host, 0, pkt); err != nil {
		return PollEvent{}, err
	}
	a.next++
	now := a.sim.Now()
	a.last[flow] = now
	p := PollEvent{Time: now, Host: a.sim.Graph().Nodes[host].Name, Flow: flow, Victim: FlowKeyOf(a.sim, flow),
		Event: ev, RTT: rtt, Base: base, Stall: stall, NICPaused: nic}
	a.polls = append(a.polls, p)
	if a.OnPoll != nil {
		a.OnPoll(p)
	}
	return p, nil
}

// PathRTT is flow's round trip without queues: along its ECMP path, each
// link's delay twice, a frame of frameBytes serialised at every hop out
// and a minimum frame (the ACK) back. The ACK may hash onto another
// equal-cost path; on the symmetric topologies simulated it has the
// same links' delays and speeds.
func PathRTT(sim *fabric.Sim, flow int32, frameBytes int) int64 {
	g := sim.Graph()
	src, dst := sim.FlowEnds(flow)
	h := sim.FlowHash(flow)
	node, port := src, 0
	var rtt float64
	for hops := 0; hops < 64; hops++ {
		rtt += hopRTT(g.Links[g.Ports(node)[port].Link], frameBytes)
		node, _ = sim.Peer(node, port)
		if node == dst || sim.SwitchOf(node) < 0 {
			break
		}
		if port = sim.NextHop(node, dst, h); port < 0 {
			break
		}
	}
	return int64(rtt)
}

// hopRTT is a link's share of a round trip: its delay both ways, a frame
// of frameBytes serialised out and a minimum frame (the ACK) back
// (hawkeyewire.HopRTT, which the real host's agent uses too).
func hopRTT(l topo.Link, frameBytes int) float64 {
	return hawkeyewire.HopRTT(float64(l.Delay), l.Bandwidth, frameBytes)
}

// MaxRTT is the largest round trip without queues between two hosts of
// g, each along its shortest path (what the routes take; on a fat-tree,
// host to host across a core): the base of BaseMax. Paths do not cross a
// host.
func MaxRTT(g *topo.Graph, frameBytes int) int64 {
	var worst float64
	dist := make([]float64, len(g.Nodes))
	done := make([]bool, len(g.Nodes))
	for _, src := range g.Hosts() {
		for i := range dist {
			dist[i], done[i] = math.Inf(1), false
		}
		dist[src] = 0
		for {
			u := -1
			for i := range dist {
				if !done[i] && !math.IsInf(dist[i], 1) && (u < 0 || dist[i] < dist[u]) {
					u = i
				}
			}
			if u < 0 {
				break
			}
			done[u] = true
			if g.Nodes[u].Kind == topo.Host {
				if u != src {
					worst = max(worst, dist[u])
					continue
				}
			}
			for _, ref := range g.Ports(u) {
				if d := dist[u] + hopRTT(g.Links[ref.Link], frameBytes); d < dist[ref.Peer] {
					dist[ref.Peer] = d
				}
			}
		}
	}
	return int64(worst)
}

// System is Hawkeye on a simulation: the switch program, the hosts'
// agent and a collector, wired together.
type System struct {
	Program   *Program
	Agent     *Agent
	Collector *Collector
}

// Attach runs Hawkeye on sim: the program on every switch, the agent on
// every host, reports and polls going to a new Collector. The sim's hooks
// become Hawkeye's chained with others (an evaluation's recorders, in
// order after Hawkeye's). cfg.Report, when set, is called after the
// collector.
func Attach(sim *fabric.Sim, cfg Config, acfg AgentConfig, others ...*fabric.Hooks) (*System, error) {
	c := NewCollector(sim)
	report := cfg.Report
	cfg.Report = func(ev uint8, v hawkeyewire.FlowKey, r hawkeyewire.SwitchReport) {
		c.Report(ev, v, r)
		if report != nil {
			report(ev, v, r)
		}
	}
	if cfg.Reuse == nil {
		cfg.Reuse = c.Reuse
	}
	pr, err := New(sim, cfg)
	if err != nil {
		return nil, err
	}
	ag, err := NewAgent(sim, acfg)
	if err != nil {
		return nil, err
	}
	ag.OnPoll = c.Begin
	sim.SetHooks(ChainHooks(append([]*fabric.Hooks{pr.Hooks(), ag.Hooks()}, others...)...))
	return &System{Program: pr, Agent: ag, Collector: c}, nil
}
