// Package hawkeyeanalyzer is Hawkeye's analyzer (SIGCOMM 2025): it turns the
// telemetry that switches' CPU pollers collected for one incident (a
// translator/hawkeye Telemetry: per-epoch flow, port and port-pair meter
// records along the victim path and the PFC causality path) into the
// heterogeneous wait-for provenance graph of the paper's Algorithm 1, and
// diagnoses it as Algorithm 2 does with the Table 2 signatures: micro-burst
// incast PFC backpressure, PFC storm from host injection, initiator-in-loop
// and initiator-out-of-loop deadlocks (flow contention or host injection
// outside the loop), and normal flow contention. Unlike the public Python
// analyzer it ranks the root causes, and when the telemetry is incomplete it
// says what is missing instead of naming a root cause it cannot support.
//
// Edge directions follow the paper: an edge means "waits for". A paused
// egress port waits for the downstream egress port whose queue holds its
// traffic (port -> port), a flow paused at a port waits for it (flow ->
// port), and a congested port waits for the flows that fill its queue
// (port -> flow). The initial congestion point of a PFC spreading path is
// therefore a port with no port-level out-edge.
package hawkeyeanalyzer

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
)

// Options are the analyzer's thresholds; a zero field takes its default.
type Options struct {
	// MinQdepth (bytes): the average queue depth at which an egress port
	// counts as congested, so that a paused upstream port can be waiting
	// for it. Default 1000.
	MinQdepth float64
	// MinContention (bytes): the queue that local flow contention (the
	// unpaused share of the average queue) must build at a port before
	// its flows count as contention root causes. Default 2000.
	MinContention float64
	// EdgeFraction: port-level out-edges to unpaused ports lighter than
	// this fraction of the heaviest out-edge of the same port are pruned,
	// so that an upstream port waits only for the downstream queues that
	// really hold its traffic. Default 0.1.
	EdgeFraction float64
	// RootFraction: a flow is a contributor (root-cause candidate) at a
	// port when its contribution is at least this fraction of the largest
	// contribution there. Default 0.2.
	RootFraction float64
	// VictimPath are the egress ports the victim's polling packet left
	// by, in path order. Port-level telemetry (no flow records) cannot
	// place the victim otherwise; the data plane knows its path from
	// forwarding the polling packet. Used only when no flow record names
	// the victim: each port then stands for the victim's hop with the
	// port's own counters.
	VictimPath []PortID
}

func (o Options) withDefaults() Options {
	if !(o.MinQdepth > 0) {
		o.MinQdepth = 1000
	}
	if !(o.MinContention > 0) {
		o.MinContention = 2000
	}
	if !(o.EdgeFraction > 0) {
		o.EdgeFraction = 0.1
	}
	if !(o.RootFraction > 0) {
		o.RootFraction = 0.2
	}
	return o
}

// PortID names a switch's egress port.
type PortID struct {
	Switch string `json:"switch"`
	Port   int    `json:"port"`
}

func (p PortID) String() string { return p.Switch + ":" + strconv.Itoa(p.Port) }

func comparePortID(a, b PortID) int {
	if c := cmp.Compare(a.Switch, b.Switch); c != 0 {
		return c
	}
	return cmp.Compare(a.Port, b.Port)
}

// PortNode is an egress port with its counters summed over the epochs read.
type PortNode struct {
	ID   string `json:"id"` // switch:port
	Port PortID `json:"port"`
	// Peer is what the port leads to: "switch:port", "host NAME", or ""
	// when the topology does not say.
	Peer     string `json:"peer,omitempty"`
	PeerHost string `json:"peer_host,omitempty"`
	// Record is false when the switch sent no port record for it (the
	// counters below are then summed from its flows).
	Record      bool    `json:"record"`
	Packets     uint64  `json:"packets"`
	Paused      uint64  `json:"paused"`
	QdepthSum   float64 `json:"qdepth_sum"`
	PauseFrames uint64  `json:"pause_frames"`
	// PauseSent: XOFF frames the switch sent out of the port (its
	// ingress queue from there paused the neighbour).
	PauseSent   uint64 `json:"pause_sent,omitempty"`
	PausedNow   bool   `json:"paused_now,omitempty"`
	PauseLeftNs int64  `json:"pause_left_ns,omitempty"`
	// Qdepth is the average queue depth at enqueue (bytes).
	Qdepth float64 `json:"qdepth"`
	// Contention (bytes) is the part of the average queue built by local
	// flow contention rather than by PFC: the paper excludes paused
	// packets from the port-flow edges (see portCounters).
	Contention float64 `json:"contention"`
	// FlowCoverage is the fraction of the port's packets that its flow
	// records account for (below 1 after evictions or truncation).
	FlowCoverage float64 `json:"flow_coverage"`
	Truncated    bool    `json:"truncated,omitempty"`
	// pauseFrom and contendedFrom: the first epoch (its start) in which
	// the port received PAUSE frames, and the first in which it was
	// contended (math.MaxInt64: none; 0 for a graph not built from
	// epochs).
	pauseFrom, contendedFrom int64
}

// pausedFirst says whether the port received PAUSE frames in an epoch
// before any in which it was contended: what paused it came first, and
// a queue it had later (the packets the pause held, draining) followed
// from it.
func (p *PortNode) pausedFirst() bool { return p.pauseFrom < p.contendedFrom }

// IsPaused says whether the port was paused by PFC in the epochs read.
func (p *PortNode) IsPaused() bool { return p.PauseFrames > 0 || p.Paused > 0 || p.PausedNow }

// FlowNode is a flow (5-tuple) seen at one or more switches.
type FlowNode struct {
	Name string              `json:"name"`
	Key  hawkeyewire.FlowKey `json:"key"`
}

// PortEdge is a port-level wait-for edge: From (a paused egress port)
// waits for To (the downstream egress port its traffic is queued at).
// Weight is the paper's paused_num[From] * meter share * qdepth[To].
type PortEdge struct {
	From   string  `json:"from"`
	To     string  `json:"to"`
	Weight float64 `json:"weight"`
	// Paused is the pause count of From used in the weight (paused
	// packets, else pause frames), Share the fraction of the traffic
	// entering To's switch from From that went out of To, Qdepth the
	// average queue at To.
	Paused float64 `json:"paused"`
	Share  float64 `json:"share"`
	Qdepth float64 `json:"qdepth"`
	// Route marks an edge known from the flows' routes rather than the
	// meters (Share is then the flows' share of From's packets).
	Route bool `json:"route,omitempty"`
	from  int
	to    int
}

// FlowPortEdge says a flow was paused at a port: Paused packets of it
// were enqueued while the port was paused.
type FlowPortEdge struct {
	Flow   string `json:"flow"`
	Port   string `json:"port"`
	Paused uint64 `json:"paused"`
	flow   int
	port   int
}

// PortFlowEdge is a port's wait for a flow in its queue, from the queue
// replay. Contribution (bytes) is the flow's share of the contention queue
// at the port; Net is the paper's signed wait-for balance (what the others
// waited on this flow minus what it waited on the others: positive for
// contributors, negative for victims). Contributor marks the flows that
// count as contention root-cause candidates at this port.
type PortFlowEdge struct {
	Port         string  `json:"port"`
	Flow         string  `json:"flow"`
	Contribution float64 `json:"contribution"`
	Share        float64 `json:"share"`
	Net          float64 `json:"net"`
	Contributor  bool    `json:"contributor,omitempty"`
	port         int
	flow         int
}

// hop is one flow's counters at one egress port, summed over epochs.
type hop struct {
	port, flow int
	in         int
	packets    uint64
	paused     uint64
	qdepthSum  float64
}

// Graph is the provenance graph of one incident (Algorithm 1) plus what
// the diagnosis needs from the telemetry: the victim, the topology and the
// problems found in the input.
type Graph struct {
	Victim        hawkeyewire.FlowKey `json:"victim"`
	Ports         []PortNode          `json:"ports"`
	Flows         []FlowNode          `json:"flows"`
	PortEdges     []PortEdge          `json:"port_edges"`
	FlowPortEdges []FlowPortEdge      `json:"flow_port_edges"`
	PortFlowEdges []PortFlowEdge      `json:"port_flow_edges"`
	// Problems are what the telemetry lacks or gets wrong, in the order
	// found (missing switches, truncated reports, empty epochs...).
	Problems []string `json:"problems,omitempty"`

	opt     Options
	portIdx map[PortID]int
	flowIdx map[hawkeyewire.FlowKey]int
	hops    []hop
	// pathHops: the victim's hops made from Options.VictimPath.
	pathHops []int
	portHops [][]int // hops at each port
	flowHops [][]int // hops of each flow
	out      [][]int // port edges out of each port
	in       [][]int // port edges into each port
	pfEdges  [][]int // port-flow edges of each port
	// pausing: ports whose switch sent XOFF out of an ingress port that
	// fed them (a port-pair meter from a port with PauseSent): their
	// queue paused a neighbour, polled or not.
	pausing  map[int]bool
	topo     *topology
	reported map[string]bool
	hostName map[uint32]string
	// cause says, for a paused port without out-edges, why nothing
	// downstream explains its pause.
	cause map[int]string
	// nic are the hosts whose NIC a switch paused (XOFF sent out of the
	// port facing the host), by host name: the NIC's egress is a paused
	// port like a switch's, so it waits for the switch's congested egress
	// ports that the host's traffic went to.
	nic map[string]*nicWait
}

// nicWait is a host's NIC paused by its switch: Port is the switch's
// port facing the host (its PauseSent counts the XOFF frames the NIC
// got), Edges the NIC's waits, weighted as port edges are (the XOFF
// frames standing for the NIC's paused packets, which no switch counts).
type nicWait struct {
	Port  int
	Edges []PortEdge
}

// peer is the far end of a switch port.
type peer struct {
	sw   string
	port int
	host string
}

type topology struct {
	links    map[PortID]peer
	switches map[string]bool
}

func newTopology(links []hawkeyewire.Link, problem func(string, ...any)) *topology {
	t := &topology{links: make(map[PortID]peer), switches: make(map[string]bool)}
	add := func(a PortID, p peer) {
		if old, ok := t.links[a]; ok {
			if old != p {
				problem("topology: port %s is linked twice (to %s and %s); keeping the first", a, old, p)
			}
			return
		}
		t.links[a] = p
	}
	for _, l := range links {
		if l.A == "" {
			problem("topology: a link has no switch on its A side")
			continue
		}
		t.switches[l.A] = true
		a := PortID{l.A, l.APort}
		switch {
		case l.B != "":
			t.switches[l.B] = true
			add(a, peer{sw: l.B, port: l.BPort})
			add(PortID{l.B, l.BPort}, peer{sw: l.A, port: l.APort})
		case l.Host != "":
			add(a, peer{host: l.Host})
		default:
			problem("topology: link from %s leads nowhere (neither switch nor host)", a)
		}
	}
	return t
}

func (p peer) String() string {
	if p.host != "" {
		return "host " + p.host
	}
	return PortID{p.sw, p.port}.String()
}

// FlowName renders a 5-tuple as src:sport->dst:dport/proto with dotted
// IPv4 addresses.
func FlowName(k hawkeyewire.FlowKey) string { return string(appendFlowName(make([]byte, 0, 48), k)) }

func appendFlowName(b []byte, k hawkeyewire.FlowKey) []byte {
	b = appendIP(b, k.Src)
	b = append(b, ':')
	b = strconv.AppendUint(b, uint64(k.Sport), 10)
	b = append(b, "->"...)
	b = appendIP(b, k.Dst)
	b = append(b, ':')
	b = strconv.AppendUint(b, uint64(k.Dport), 10)
	b = append(b, '/')
	return strconv.AppendUint(b, uint64(k.Proto), 10)
}

func appendIP(b []byte, ip uint32) []byte {
	for i := 3; i >= 0; i-- {
		b = strconv.AppendUint(b, uint64(ip>>(8*i)&0xff), 10)
		if i > 0 {
			b = append(b, '.')
		}
	}
	return b
}

func compareFlowKey(a, b hawkeyewire.FlowKey) int {
	if c := cmp.Compare(a.Src, b.Src); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Dst, b.Dst); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Sport, b.Sport); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Dport, b.Dport); c != 0 {
		return c
	}
	return cmp.Compare(a.Proto, b.Proto)
}

// finite keeps NaN and infinities (from absurd counters) out of the
// weights, so that the graph always encodes as JSON.
func finite(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}

type portAgg struct {
	record      bool
	packets     uint64
	paused      uint64
	qdepthSum   float64
	pauseFrames uint64
	pauseSent   uint64
	pausedNow   bool
	pauseLeft   int64
	truncated   bool
	// pauseFrom and contendedFrom: the start of the first epoch in which
	// the port received PAUSE frames, and of the first in which its
	// unpaused packets met a contention queue (math.MaxInt64: none).
	pauseFrom, contendedFrom int64
}

type meterKey struct {
	sw      string
	in, out int
}

type epochKey struct {
	sw    string
	id    uint32
	start int64
}

// Build constructs the provenance graph of Algorithm 1 from one incident's
// telemetry, aggregating every epoch reported. It never fails: problems in
// the input are listed in Graph.Problems. t may be nil.
func Build(t *hawkeyewire.Telemetry, opt Options) *Graph {
	g := &Graph{
		opt:      opt.withDefaults(),
		reported: make(map[string]bool),
		hostName: make(map[uint32]string),
		cause:    make(map[int]string),
		nic:      make(map[string]*nicWait),
	}
	if t == nil {
		g.problem("no telemetry")
		t = &hawkeyewire.Telemetry{}
	}
	g.readTopology(t)
	s := newEpochSums(t)
	s.addReports(g, t)
	portPerm := g.addPortVertices(s)
	flowPerm := g.addFlowVertices(s)
	g.indexHops(s.hops, portPerm, flowPerm)

	g.portCounters()
	g.buildPortEdges(s.meters)
	g.buildFlowPortEdges()
	g.buildPortFlowEdges()
	g.portPathHops()
	return g
}

// portPathHops stands in for the victim's flow records when the telemetry
// has none: a hop per port of Options.VictimPath, with the port's
// counters. They are kept apart from the flows' hops (no port or flow
// index lists them), so nothing but the victim's path sees them.
func (g *Graph) portPathHops() {
	if _, ok := g.flowIdx[g.Victim]; ok || len(g.opt.VictimPath) == 0 {
		return
	}
	for _, id := range g.opt.VictimPath {
		pi, ok := g.portIdx[id]
		if !ok {
			g.problem("victim path port %s is in no report", id)
			continue
		}
		p := &g.Ports[pi]
		g.pathHops = append(g.pathHops, len(g.hops))
		g.hops = append(g.hops, hop{port: pi, flow: -1, in: -1, packets: p.Packets, paused: uint64(g.pausedCount(p)), qdepthSum: p.QdepthSum})
	}
}

func (g *Graph) problem(format string, args ...any) {
	g.Problems = append(g.Problems, fmt.Sprintf(format, args...))
}

// readTopology takes Algorithm 1's input N (the network topology and the
// hosts' addresses): without it PFC causality cannot cross switches.
func (g *Graph) readTopology(t *hawkeyewire.Telemetry) {
	g.Victim = t.Victim
	g.topo = newTopology(t.Links, g.problem)
	names := make([]string, 0, len(t.Hosts))
	for name := range t.Hosts {
		names = append(names, name)
	}
	// Sorted, so that of two names for one address the first in order
	// wins on every run.
	slices.Sort(names)
	for _, name := range names {
		if _, dup := g.hostName[t.Hosts[name]]; !dup {
			g.hostName[t.Hosts[name]] = name
		}
	}
	if len(t.Links) == 0 {
		g.problem("no topology: PFC causality between switches cannot be traced")
	}
	if len(t.Reports) == 0 {
		g.problem("no switch reports")
	}
}

// epochSums are Algorithm 1's inputs P and F summed over every epoch read.
// Ports and flows get temporary ids as they are met (an int-keyed lookup
// per record instead of hashing switch names), and their final, sorted ids
// once all are known: an incident can hold tens of thousands of flow
// records and the diagnosis has a 10 ms budget.
type epochSums struct {
	portIDs   []PortID
	ports     []portAgg
	swPorts   map[string]map[int]int
	flowTmp   map[hawkeyewire.FlowKey]int
	flowKeys  []hawkeyewire.FlowKey
	hopIdx    map[uint64]int
	hops      []hop
	meters    map[meterKey]uint64
	seen      map[epochKey]bool
	truncated map[string]bool
}

// newEpochSums sizes the flow and hop tables for every flow record of the
// incident, so that they never grow while the records are summed.
func newEpochSums(t *hawkeyewire.Telemetry) *epochSums {
	nrec := 0
	for ri := range t.Reports {
		nrec += len(t.Reports[ri].Evicted)
		for ei := range t.Reports[ri].Epochs {
			nrec += len(t.Reports[ri].Epochs[ei].Flows)
		}
	}
	return &epochSums{
		swPorts:   make(map[string]map[int]int),
		flowTmp:   make(map[hawkeyewire.FlowKey]int, nrec),
		hopIdx:    make(map[uint64]int, nrec),
		hops:      make([]hop, 0, nrec),
		meters:    make(map[meterKey]uint64),
		seen:      make(map[epochKey]bool),
		truncated: make(map[string]bool),
	}
}

// portsOf is one switch's port -> temporary id table.
func (s *epochSums) portsOf(sw string) map[int]int {
	m := s.swPorts[sw]
	if m == nil {
		m = make(map[int]int)
		s.swPorts[sw] = m
	}
	return m
}

// portOf gives a port its temporary id the first time it is met.
func (s *epochSums) portOf(m map[int]int, sw string, port int) int {
	i, ok := m[port]
	if !ok {
		i = len(s.ports)
		m[port] = i
		s.portIDs = append(s.portIDs, PortID{sw, port})
		s.ports = append(s.ports, portAgg{pauseFrom: math.MaxInt64, contendedFrom: math.MaxInt64})
	}
	return i
}

// addFlow sums a flow record into its hop (flow at egress port): the
// paper's paused_num(f, p) and the queue depths its packets met.
func (s *epochSums) addFlow(m map[int]int, sw string, f *hawkeyewire.FlowRecord) {
	pi := s.portOf(m, sw, f.Out)
	fi, ok := s.flowTmp[f.Key]
	if !ok {
		fi = len(s.flowKeys)
		s.flowTmp[f.Key] = fi
		s.flowKeys = append(s.flowKeys, f.Key)
	}
	k := uint64(pi)<<32 | uint64(fi)
	i, ok := s.hopIdx[k]
	if !ok {
		i = len(s.hops)
		s.hopIdx[k] = i
		s.hops = append(s.hops, hop{port: pi, flow: fi, in: f.In})
	}
	h := &s.hops[i]
	h.packets += uint64(f.Packets)
	h.paused += uint64(f.Paused)
	h.qdepthSum += float64(f.QdepthSum)
}

// addReports sums every switch's report, listing on g what a report lacks
// or repeats: a diagnosis must say when its evidence is incomplete.
func (s *epochSums) addReports(g *Graph, t *hawkeyewire.Telemetry) {
	for ri := range t.Reports {
		r := &t.Reports[ri]
		name := r.Switch
		if name == "" {
			g.problem("report %d names no switch; ignored", ri)
			continue
		}
		g.reported[name] = true
		if len(t.Links) > 0 && !g.topo.switches[name] {
			g.problem("switch %s reported but is not in the topology: its ports cannot be placed on a PFC path", name)
		}
		if r.Truncated {
			s.truncated[name] = true
			g.problem("switch %s's report was truncated: its counters may be incomplete", name)
		}
		if len(r.Epochs) == 0 && len(r.Evicted) == 0 {
			g.problem("switch %s sent no epochs", name)
		}
		m := s.portsOf(name)
		for ei := range r.Epochs {
			s.addEpoch(g, m, name, &r.Epochs[ei])
		}
		// Evicted flows lost their register slot to a colliding flow;
		// their counters still belong to the epochs read.
		for fi := range r.Evicted {
			s.addFlow(m, name, &r.Evicted[fi])
		}
	}
	for i := range s.ports {
		s.ports[i].truncated = s.truncated[s.portIDs[i].Switch]
	}
}

// addEpoch sums one epoch's port, flow and meter records; an epoch a
// switch sent twice is counted once so that no counter doubles.
func (s *epochSums) addEpoch(g *Graph, m map[int]int, name string, e *hawkeyewire.EpochReport) {
	ek := epochKey{name, e.ID, e.Start}
	if s.seen[ek] {
		g.problem("switch %s: epoch %d (start %d ns) reported twice; counted once", name, e.ID, e.Start)
		return
	}
	s.seen[ek] = true
	if len(e.Ports) == 0 && len(e.Flows) == 0 && len(e.Meters) == 0 {
		g.problem("switch %s: epoch %d (start %d ns) is empty", name, e.ID, e.Start)
		return
	}
	for pi := range e.Ports {
		pr := &e.Ports[pi]
		p := &s.ports[s.portOf(m, name, pr.Port)]
		p.record = true
		p.packets += uint64(pr.Packets)
		p.paused += uint64(pr.Paused)
		p.qdepthSum += float64(pr.QdepthSum)
		p.pauseFrames += uint64(pr.PauseFrames)
		p.pauseSent += uint64(pr.PauseSent)
		p.pausedNow = p.pausedNow || pr.PausedNow
		p.pauseLeft = max(p.pauseLeft, pr.PauseLeftNs)
		if pr.PauseFrames > 0 {
			p.pauseFrom = min(p.pauseFrom, e.Start)
		}
		if pr.Packets > 0 && contention(float64(pr.QdepthSum)/float64(pr.Packets), float64(pr.Paused)/float64(pr.Packets)) >= g.opt.MinContention {
			p.contendedFrom = min(p.contendedFrom, e.Start)
		}
	}
	for fi := range e.Flows {
		s.addFlow(m, name, &e.Flows[fi])
	}
	for mi := range e.Meters {
		mr := &e.Meters[mi]
		s.meters[meterKey{name, mr.In, mr.Out}] += mr.Bytes
	}
}

// addPortVertices is Algorithm 1's G.AddVertex(p, PORTLEVEL) for every
// port, in switch:port order so that every output is stable; it returns
// the temporary id -> sorted id map.
func (g *Graph) addPortVertices(s *epochSums) []int {
	order := make([]int, len(s.portIDs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return comparePortID(s.portIDs[a], s.portIDs[b]) })
	portPerm := make([]int, len(s.portIDs))
	g.portIdx = make(map[PortID]int, len(order))
	g.Ports = make([]PortNode, len(order))
	for i, tmp := range order {
		id, a := s.portIDs[tmp], &s.ports[tmp]
		portPerm[tmp] = i
		g.portIdx[id] = i
		n := PortNode{ID: id.String(), Port: id, Record: a.record, Packets: a.packets, Paused: a.paused,
			QdepthSum: a.qdepthSum, PauseFrames: a.pauseFrames, PauseSent: a.pauseSent, PausedNow: a.pausedNow,
			PauseLeftNs: a.pauseLeft, Truncated: a.truncated, pauseFrom: a.pauseFrom, contendedFrom: a.contendedFrom}
		if p, ok := g.topo.links[id]; ok {
			n.Peer = p.String()
			n.PeerHost = p.host
		}
		g.Ports[i] = n
	}
	return portPerm
}

// addFlowVertices is Algorithm 1's G.AddVertex(f, FLOWLEVEL) for every
// flow, in 5-tuple order; it returns the temporary id -> sorted id map and
// turns s.flowTmp into g.flowIdx.
func (g *Graph) addFlowVertices(s *epochSums) []int {
	flowKeys := s.flowKeys
	// Packed into two words, so that ten thousand flows sort without a
	// five-field comparison each time.
	type packed struct {
		hi, lo uint64
		tmp    int
	}
	pk := make([]packed, len(flowKeys))
	for i, k := range flowKeys {
		pk[i] = packed{uint64(k.Src)<<32 | uint64(k.Dst), uint64(k.Sport)<<24 | uint64(k.Dport)<<8 | uint64(k.Proto), i}
	}
	slices.SortFunc(pk, func(a, b packed) int {
		switch {
		case a.hi < b.hi:
			return -1
		case a.hi > b.hi:
			return 1
		case a.lo < b.lo:
			return -1
		case a.lo > b.lo:
			return 1
		}
		return 0
	})
	flowPerm := make([]int, len(flowKeys))
	g.Flows = make([]FlowNode, len(flowKeys))
	// One buffer for every flow's name: ten thousand small strings
	// would be ten thousand allocations.
	buf := make([]byte, 0, 40*len(flowKeys))
	ends := make([]int, len(flowKeys))
	for i, p := range pk {
		flowPerm[p.tmp] = i
		buf = appendFlowName(buf, flowKeys[p.tmp])
		ends[i] = len(buf)
	}
	allNames := string(buf)
	for i, p := range pk {
		from := 0
		if i > 0 {
			from = ends[i-1]
		}
		g.Flows[i] = FlowNode{Name: allNames[from:ends[i]], Key: flowKeys[p.tmp]}
	}
	for k, tmp := range s.flowTmp {
		s.flowTmp[k] = flowPerm[tmp]
	}
	g.flowIdx = s.flowTmp
	return flowPerm
}

// indexHops renumbers the hops to the sorted ids and sorts them by port
// then flow, without comparisons: bucket them by flow, then walk the flows
// in order into per-port buckets. Every later step of Algorithm 1 walks a
// port's or a flow's hops through g.portHops and g.flowHops.
func (g *Graph) indexHops(hops []hop, portPerm, flowPerm []int) {
	nf := make([]int, len(g.Flows)+1)
	np := make([]int, len(g.Ports)+1)
	for i := range hops {
		h := &hops[i]
		h.port = portPerm[h.port]
		h.flow = flowPerm[h.flow]
		nf[h.flow+1]++
		np[h.port+1]++
	}
	for i := 1; i < len(nf); i++ {
		nf[i] += nf[i-1]
	}
	for i := 1; i < len(np); i++ {
		np[i] += np[i-1]
	}
	byFlow := make([]int, len(hops))
	next := slices.Clone(nf[:len(g.Flows)])
	for i := range hops {
		f := hops[i].flow
		byFlow[next[f]] = i
		next[f]++
	}
	g.hops = make([]hop, len(hops))
	at := slices.Clone(np[:len(g.Ports)])
	for _, i := range byFlow {
		h := hops[i]
		g.hops[at[h.port]] = h
		at[h.port]++
	}
	all := make([]int, len(g.hops))
	for i := range all {
		all[i] = i
	}
	g.portHops = make([][]int, len(g.Ports))
	for p := range g.Ports {
		g.portHops[p] = all[np[p]:np[p+1]:np[p+1]]
	}
	flat := make([]int, len(g.hops))
	g.flowHops = make([][]int, len(g.Flows))
	for f := range g.Flows {
		g.flowHops[f] = flat[nf[f]:nf[f]:nf[f+1]]
	}
	for i := range g.hops {
		f := g.hops[i].flow
		g.flowHops[f] = append(g.flowHops[f], i)
	}
}

// portCounters fills each port's averages; ports without a record take
// their counters from their flows.
func (g *Graph) portCounters() {
	for i := range g.Ports {
		p := &g.Ports[i]
		var fp, fpaused uint64
		var fq float64
		for _, hi := range g.portHops[i] {
			h := &g.hops[hi]
			fp += h.packets
			fpaused += h.paused
			fq += h.qdepthSum
		}
		if !p.Record {
			p.Packets, p.Paused, p.QdepthSum = fp, fpaused, fq
		}
		if p.Packets > 0 {
			p.Qdepth = finite(p.QdepthSum / float64(p.Packets))
			p.Contention = contention(p.Qdepth, float64(p.Paused)/float64(p.Packets))
			p.FlowCoverage = min(1, float64(fp)/float64(p.Packets))
		}
	}
}

// contention is the part of an average queue q (bytes) that local flow
// contention built when a share f of the packets were enqueued paused:
// only the unpaused packets (a share 1-f) count, and the queue they saw
// still holds what the pauses left behind (to first order the same share
// f), so (1-f)^2 of the average queue. A port a host keeps paused thus
// shows next to none.
func contention(q, f float64) float64 {
	u := 1 - min(1, f)
	return finite(q * u * u)
}

func (g *Graph) pausedCount(p *PortNode) float64 {
	switch {
	case p.Paused > 0:
		return float64(p.Paused)
	case p.PauseFrames > 0:
		return float64(p.PauseFrames)
	case p.PausedNow:
		return 1
	}
	return 0
}

// buildPortEdges adds the port-level edges. A PAUSE travels upstream: when
// switch S's ingress i (fed by upstream U's egress j) passes its
// threshold, U:j is paused. The bytes that came in on i sit in S's egress
// queues, so U:j waits for every congested egress o of S that i feeds,
// weighted by its paused count, the meter share meter[i][o]/sum_o'
// meter[i][o'] and o's queue depth.
func (g *Graph) buildPortEdges(meters map[meterKey]uint64) {
	mk := make([]meterKey, 0, len(meters))
	inTotal := make(map[PortID]uint64)
	for k, b := range meters {
		if b == 0 {
			continue
		}
		mk = append(mk, k)
		inTotal[PortID{k.sw, k.in}] += b
	}
	slices.SortFunc(mk, func(a, b meterKey) int {
		if c := cmp.Compare(a.sw, b.sw); c != 0 {
			return c
		}
		if c := cmp.Compare(a.in, b.in); c != 0 {
			return c
		}
		return cmp.Compare(a.out, b.out)
	})
	g.pausing = map[int]bool{}
	for _, k := range mk {
		in, ok1 := g.portIdx[PortID{k.sw, k.in}]
		out, ok2 := g.portIdx[PortID{k.sw, k.out}]
		if ok1 && ok2 && g.Ports[in].PauseSent > 0 {
			g.pausing[out] = true
		}
	}
	cand := make([][]PortEdge, len(g.Ports))
	for _, k := range mk {
		up, ok := g.topo.links[PortID{k.sw, k.in}]
		if !ok {
			continue // fed by nothing the topology knows
		}
		if up.host != "" {
			g.nicEdge(up.host, k, meters[k], inTotal[PortID{k.sw, k.in}])
			continue
		}
		from, ok := g.portIdx[PortID{up.sw, up.port}]
		if !ok {
			continue
		}
		fp := &g.Ports[from]
		if !fp.IsPaused() {
			continue
		}
		to, ok := g.portIdx[PortID{k.sw, k.out}]
		if !ok || to == from {
			continue
		}
		share := float64(meters[k]) / float64(inTotal[PortID{k.sw, k.in}])
		if e, ok := g.waitEdge(fp.ID, from, g.pausedCount(fp), to, share); ok {
			cand[from] = append(cand[from], e)
		}
	}
	g.routeEdges(cand)
	g.out = make([][]int, len(g.Ports))
	g.in = make([][]int, len(g.Ports))
	for from, es := range cand {
		for _, e := range g.heavy(es) {
			g.out[from] = append(g.out[from], len(g.PortEdges))
			g.in[e.to] = append(g.in[e.to], len(g.PortEdges))
			g.PortEdges = append(g.PortEdges, e)
		}
	}
	for _, w := range g.nic {
		w.Edges = g.heavy(w.Edges)
	}
	// Say, for each paused port nothing downstream explains, why.
	for i := range g.Ports {
		p := &g.Ports[i]
		if !p.IsPaused() || len(g.out[i]) > 0 {
			continue
		}
		pr, ok := g.topo.links[p.Port]
		switch {
		case !ok:
			g.cause[i] = fmt.Sprintf("port %s is paused but the topology does not say what it leads to", p.ID)
		case pr.host != "":
			// Paused by a host: the diagnosis judges it.
		case !g.reported[pr.sw]:
			g.cause[i] = fmt.Sprintf("port %s is paused by switch %s, which sent no telemetry", p.ID, pr.sw)
		default:
			g.cause[i] = fmt.Sprintf("port %s is paused by %s, but %s reports no congested egress fed by its port %d (meters or port records missing?)",
				p.ID, pr.sw, pr.sw, pr.port)
		}
	}
}

// nicEdge adds host's NIC's wait for egress k.out of its switch when the
// switch paused the NIC (sent XOFF out of k.in, the port facing the
// host): the paper's port edge from a paused port to a congested egress
// its traffic is queued at, with the host's NIC as the paused port. A
// flow whose sender's NIC is paused gets no ACKs and shows no pause at
// any switch egress; its wait is this one.
func (g *Graph) nicEdge(host string, k meterKey, bytes, total uint64) {
	in, ok := g.portIdx[PortID{k.sw, k.in}]
	if !ok || g.Ports[in].PauseSent == 0 {
		return
	}
	to, ok := g.portIdx[PortID{k.sw, k.out}]
	if !ok || to == in {
		return
	}
	e, ok := g.waitEdge("host "+host, -1, float64(g.Ports[in].PauseSent), to, float64(bytes)/float64(total))
	if !ok {
		return
	}
	w := g.nic[host]
	if w == nil {
		w = &nicWait{Port: in}
		g.nic[host] = w
	}
	w.Edges = append(w.Edges, e)
}

// waitEdge is the wait of a paused port (id, index from, its pause count
// paused) for egress to of the next switch, which share of the traffic
// the paused port sent there went to: paused x share x to's queue. No
// edge when to holds too little to pause anyone.
func (g *Graph) waitEdge(id string, from int, paused float64, to int, share float64) (PortEdge, bool) {
	tp := &g.Ports[to]
	if tp.Qdepth < g.opt.MinQdepth && !tp.IsPaused() {
		return PortEdge{}, false
	}
	// A paused port whose queue saw no enqueue in the epochs read (a
	// settled deadlock) still holds the traffic: count it as 1 B.
	qd := max(tp.Qdepth, 1)
	return PortEdge{From: id, To: tp.ID, Weight: finite(paused * share * qd), Paused: paused, Share: share, Qdepth: tp.Qdepth,
		from: from, to: to}, true
}

// heavy are the edges out of one paused port that it really waits for:
// those at least EdgeFraction of the heaviest, and every one to a paused
// port, which is the PFC chain itself, however little of the traffic
// goes there (the few packets circling a deadlock loop close the loop).
func (g *Graph) heavy(es []PortEdge) []PortEdge {
	var top float64
	for _, e := range es {
		top = max(top, e.Weight)
	}
	return slices.DeleteFunc(es, func(e PortEdge) bool {
		return e.Weight < g.opt.EdgeFraction*top && !g.Ports[e.to].IsPaused()
	})
}

// routeEdges adds the buffer dependencies the flows' routes show where
// the meters saw no traffic: a paused port S:o holding packets of flow f,
// whose next switch U sends f out of U:o', waits for U:o' too. In a
// deadlock the packets that would close the loop are stuck in the paused
// queue, so the meters of the epochs read may never have counted them;
// the flow records (each switch's egress for f) still show the cycle.
// Weight as for meter edges, with f's share of S:o's packets as the
// share.
func (g *Graph) routeEdges(cand [][]PortEdge) {
	type pair struct{ from, to int }
	share := make(map[pair]float64)
	var order []pair
	for from := range g.Ports {
		fp := &g.Ports[from]
		if !fp.IsPaused() || fp.Packets == 0 {
			continue
		}
		pr, ok := g.topo.links[fp.Port]
		if !ok || pr.host != "" {
			continue
		}
		for _, hi := range g.portHops[from] {
			h := &g.hops[hi]
			for _, hj := range g.flowHops[h.flow] {
				to := g.hops[hj].port
				if to == from || g.Ports[to].Port.Switch != pr.sw {
					continue
				}
				k := pair{from, to}
				if _, ok := share[k]; !ok {
					order = append(order, k)
				}
				share[k] += float64(h.packets) / float64(fp.Packets)
			}
		}
	}
	for _, k := range order {
		if slices.ContainsFunc(cand[k.from], func(e PortEdge) bool { return e.to == k.to }) {
			continue // the meters already tell
		}
		fp, tp := &g.Ports[k.from], &g.Ports[k.to]
		if tp.Qdepth < g.opt.MinQdepth && !tp.IsPaused() {
			continue
		}
		sh := min(1, share[k])
		paused := g.pausedCount(fp)
		cand[k.from] = append(cand[k.from], PortEdge{From: fp.ID, To: tp.ID, Weight: finite(paused * sh * max(tp.Qdepth, 1)),
			Paused: paused, Share: sh, Qdepth: tp.Qdepth, Route: true, from: k.from, to: k.to})
	}
}

func (g *Graph) buildFlowPortEdges() {
	// Hops are sorted by port then flow; flow-port edges are listed by
	// flow then port.
	order := make([]int, 0, len(g.hops))
	for i := range g.hops {
		if g.hops[i].paused > 0 {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int {
		ha, hb := &g.hops[a], &g.hops[b]
		if c := cmp.Compare(ha.flow, hb.flow); c != 0 {
			return c
		}
		return cmp.Compare(ha.port, hb.port)
	})
	g.FlowPortEdges = make([]FlowPortEdge, 0, len(order))
	for _, i := range order {
		h := &g.hops[i]
		g.FlowPortEdges = append(g.FlowPortEdges, FlowPortEdge{Flow: g.Flows[h.flow].Name, Port: g.Ports[h.port].ID,
			Paused: h.paused, flow: h.flow, port: h.port})
	}
}

// buildPortFlowEdges replays each port's queue. The paper spreads each
// flow's packets evenly over the epoch, sorts them and counts, for every
// packet, the packets of each flow ahead of it in the queue. In that
// replay the packets ahead of any packet are interleaved in proportion to
// the flows' presence in the queue, so the replay has a closed form: flow
// j holds the share s_j of the queue, where s_j weighs j's unpaused
// packets by the queue depth they saw (a flow whose packets arrived into a
// deep queue was in that queue). A flow's contribution is its share of the
// port's contention queue (the unpaused part of the average queue: paused
// packets wait for PFC, not for their neighbours); Net is the paper's
// balance sum_j w(j,f) - sum_j w(f,j) with w(i,j) = qdepth_i * s_j.
// The closed form costs O(flows) per port instead of O(packets * qdepth).
func (g *Graph) buildPortFlowEdges() {
	g.pfEdges = make([][]int, len(g.Ports))
	g.PortFlowEdges = make([]PortFlowEdge, 0, len(g.hops))
	idx := make([]int, len(g.hops))
	for pi := range g.Ports {
		p := &g.Ports[pi]
		hs := g.portHops[pi]
		if len(hs) == 0 || p.Qdepth <= 0 {
			continue
		}
		var total, sumQ float64
		for _, hi := range hs {
			h := &g.hops[hi]
			if h.packets == 0 || h.paused >= h.packets {
				continue
			}
			u := float64(h.packets - h.paused)
			total += h.qdepthSum * u / float64(h.packets)
			sumQ += h.qdepthSum / float64(h.packets)
		}
		if !(total > 0) {
			continue
		}
		first := len(g.PortFlowEdges)
		var top float64
		for _, hi := range hs {
			h := &g.hops[hi]
			if h.packets == 0 || h.paused >= h.packets {
				continue
			}
			u := float64(h.packets - h.paused)
			q := h.qdepthSum / float64(h.packets)
			s := finite(q * u / total)
			e := PortFlowEdge{Port: p.ID, Flow: g.Flows[h.flow].Name, Share: s,
				Contribution: finite(s * p.Contention), Net: finite(s*sumQ - q), port: pi, flow: h.flow}
			top = max(top, e.Contribution)
			g.PortFlowEdges = append(g.PortFlowEdges, e)
		}
		for i := first; i < len(g.PortFlowEdges); i++ {
			e := &g.PortFlowEdges[i]
			e.Contributor = p.Contention >= g.opt.MinContention && e.Contribution > 0 &&
				e.Contribution >= g.opt.RootFraction*top
			idx[i] = i
		}
		g.pfEdges[pi] = idx[first:len(g.PortFlowEdges):len(g.PortFlowEdges)]
	}
}

// Port returns the node of switch:port, or nil.
func (g *Graph) Port(sw string, port int) *PortNode {
	if i, ok := g.portIdx[PortID{sw, port}]; ok {
		return &g.Ports[i]
	}
	return nil
}

// Edge returns the port-level edge from -> to (names "switch:port"), or
// nil when the graph has none.
func (g *Graph) Edge(from, to string) *PortEdge {
	for i := range g.PortEdges {
		if g.PortEdges[i].From == from && g.PortEdges[i].To == to {
			return &g.PortEdges[i]
		}
	}
	return nil
}

// Contributions returns the port-flow edges of port "switch:port", the
// heaviest first.
func (g *Graph) Contributions(port string) []PortFlowEdge {
	var out []PortFlowEdge
	for i := range g.PortFlowEdges {
		if g.PortFlowEdges[i].Port == port {
			out = append(out, g.PortFlowEdges[i])
		}
	}
	slices.SortStableFunc(out, func(a, b PortFlowEdge) int { return cmp.Compare(b.Contribution, a.Contribution) })
	return out
}

// PausedAt returns the paused packets of flow at port (the flow-port
// edge's weight), 0 when there is no edge.
func (g *Graph) PausedAt(flow hawkeyewire.FlowKey, port string) uint64 {
	fi, ok := g.flowIdx[flow]
	if !ok {
		return 0
	}
	for _, hi := range g.flowHops[fi] {
		h := &g.hops[hi]
		if g.Ports[h.port].ID == port {
			return h.paused
		}
	}
	return 0
}
