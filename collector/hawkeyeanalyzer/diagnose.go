package hawkeyeanalyzer

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
)

// Anomaly is a diagnosed anomaly type: the six of the paper's Table 2 (the
// out-of-loop deadlock split by its initiator), plus none and unknown.
type Anomaly string

const (
	// Incast is PFC backpressure by flow contention (micro-burst incast):
	// the PFC spreading path ends at a port congested by contending flows.
	Incast Anomaly = "pfc_backpressure_incast"
	// Storm is a PFC storm from host injection: the path ends at a port
	// towards a host that keeps pausing it, without flow contention.
	Storm Anomaly = "pfc_storm_host_injection"
	// DeadlockInLoop is an initiator-in-loop deadlock: a loop of paused
	// ports whose initial congestion is flow contention inside the loop.
	DeadlockInLoop Anomaly = "deadlock_initiator_in_loop"
	// DeadlockOutOfLoopContention is an initiator-out-of-loop deadlock
	// started by flow contention at a port outside the loop.
	DeadlockOutOfLoopContention Anomaly = "deadlock_out_of_loop_contention"
	// DeadlockOutOfLoopInjection is an initiator-out-of-loop deadlock
	// started by a host injecting pause frames outside the loop.
	DeadlockOutOfLoopInjection Anomaly = "deadlock_out_of_loop_injection"
	// Contention is normal flow contention: the victim waits in a
	// congested queue without PFC involvement.
	Contention Anomaly = "flow_contention"
	// None: the victim was neither paused nor in a contended queue.
	None Anomaly = "none"
	// Unknown: the telemetry lacks what the diagnosis needs (see
	// Diagnosis.Problems).
	Unknown Anomaly = "unknown"
)

// Anomalies lists the six anomaly types the diagnosis tells apart.
var Anomalies = []Anomaly{Incast, Storm, DeadlockInLoop, DeadlockOutOfLoopContention, DeadlockOutOfLoopInjection, Contention}

// Deadlock says whether a is one of the deadlock types.
func (a Anomaly) Deadlock() bool {
	return a == DeadlockInLoop || a == DeadlockOutOfLoopContention || a == DeadlockOutOfLoopInjection
}

// Describe is the anomaly in words.
func (a Anomaly) Describe() string {
	switch a {
	case Incast:
		return "PFC backpressure by flow contention (micro-burst incast)"
	case Storm:
		return "PFC storm from host PFC injection"
	case DeadlockInLoop:
		return "PFC deadlock, initiator in the loop (flow contention)"
	case DeadlockOutOfLoopContention:
		return "PFC deadlock, initiator out of the loop (flow contention)"
	case DeadlockOutOfLoopInjection:
		return "PFC deadlock, initiator out of the loop (host PFC injection)"
	case Contention:
		return "normal flow contention"
	case None:
		return "no anomaly found"
	}
	return "unknown (telemetry incomplete)"
}

// RootCause is a root cause: a flow that filled the initially congested
// queue, or a host that injected pause frames.
type RootCause struct {
	Kind string `json:"kind"` // "flow" or "host"
	// Name is the flow's 5-tuple (FlowName) or the host's name.
	Name string               `json:"name"`
	Flow *hawkeyewire.FlowKey `json:"flow,omitempty"`
	Host string               `json:"host,omitempty"`
	// Port is where it acted: the congested egress port, or the egress
	// port towards the host that paused it.
	Port string `json:"port"`
	// Contribution is, for a flow, its share of the contention queue at
	// Port in bytes; for a host, the pause frames it sent to Port (or the
	// packets paused there when the switch did not count frames).
	Contribution float64 `json:"contribution"`
	// Share is the flow's share of the queue at Port (1 for a host).
	Share float64 `json:"share"`
	// Victim marks the victim flow itself when it is also a contributor.
	Victim bool `json:"victim,omitempty"`
}

// Origin is an initial congestion point the victim's PFC leads to.
type Origin struct {
	Port string `json:"port"`
	// Kind: "contention" (flows filled the queue), "host_injection" (the
	// host the port leads to paused it), "unexplained" (the telemetry
	// does not say why it was paused or congested).
	Kind string `json:"kind"`
	Host string `json:"host,omitempty"`
	// Weight is the fraction of the victim's paused packets that the PFC
	// graph leads to this origin (loop exits: of the exits' weight).
	Weight     float64 `json:"weight"`
	Contention float64 `json:"contention"`
	Why        string  `json:"why,omitempty"`
	port       int
}

// Hop is the victim at one egress port of its path.
type Hop struct {
	Port    string  `json:"port"`
	Packets uint64  `json:"packets"`
	Paused  uint64  `json:"paused"`
	Qdepth  float64 `json:"qdepth"`
	// PFC is set when the victim was paused there (a flow-port edge);
	// Contention is the port's local contention queue (bytes).
	PFC        bool    `json:"pfc"`
	Contention float64 `json:"contention"`
}

// Diagnosis is the result of Algorithm 2 on one incident.
type Diagnosis struct {
	Type      Anomaly             `json:"type"`
	Summary   string              `json:"summary"`
	Victim    string              `json:"victim"`
	VictimKey hawkeyewire.FlowKey `json:"victim_key"`
	// RootCauses are ranked by contribution, the largest first.
	RootCauses []RootCause `json:"root_causes"`
	// Initiator is the initial congestion point (port).
	Initiator string `json:"initiator,omitempty"`
	// Path is the PFC spreading path in the order the pause spread: the
	// initiator first, the port where the victim was paused last.
	Path []string `json:"path,omitempty"`
	// Loops are the loops of paused ports found, each in spreading order
	// starting at the port where the pause entered it (the initiator for
	// an in-loop deadlock).
	Loops   [][]string `json:"loops,omitempty"`
	Origins []Origin   `json:"origins,omitempty"`
	// VictimPath is the victim's hops in path order.
	VictimPath []Hop `json:"victim_path"`
	// SpreadingFlows are flows paused on two consecutive ports of Path:
	// the ones that carried the PFC from one hop to the next.
	SpreadingFlows []string `json:"spreading_flows,omitempty"`
	// Confidence in [0,1] lowers with missing or ambiguous evidence;
	// Explanation says how the type and root causes were reached.
	Confidence  float64  `json:"confidence"`
	Explanation []string `json:"explanation"`
	// Problems are what the telemetry lacked or got wrong.
	Problems []string `json:"problems,omitempty"`
	// PortEdges are the port-level edges of the graph (the PFC causality).
	PortEdges []PortEdge `json:"port_edges"`

	// Graph is the provenance graph diagnosed.
	Graph *Graph `json:"-"`
}

// RootFlows returns the root-cause flows, ranked.
func (d *Diagnosis) RootFlows() []hawkeyewire.FlowKey {
	var out []hawkeyewire.FlowKey
	for _, r := range d.RootCauses {
		if r.Flow != nil {
			out = append(out, *r.Flow)
		}
	}
	return out
}

// RootHosts returns the root-cause hosts.
func (d *Diagnosis) RootHosts() []string {
	var out []string
	for _, r := range d.RootCauses {
		if r.Kind == "host" {
			out = append(out, r.Host)
		}
	}
	return out
}

// Diagnose builds the provenance graph of t and diagnoses it.
func Diagnose(t *hawkeyewire.Telemetry, opt Options) *Diagnosis { return Build(t, opt).Diagnose() }

func (d *Diagnosis) explain(format string, args ...any) {
	d.Explanation = append(d.Explanation, fmt.Sprintf(format, args...))
}

func (d *Diagnosis) problem(format string, args ...any) {
	d.Problems = append(d.Problems, fmt.Sprintf(format, args...))
}

// Diagnose runs Algorithm 2 from the victim: at each hop where the victim
// was paused it follows the port-level edges to the initial congestion
// points, looks for loops of paused ports, and matches the Table 2
// signatures; when the victim was never paused it analyses the flow
// contention on its path.
func (g *Graph) Diagnose() *Diagnosis {
	d := &Diagnosis{Graph: g, Victim: FlowName(g.Victim), VictimKey: g.Victim, Confidence: 1,
		Problems: slices.Clone(g.Problems), PortEdges: g.PortEdges, RootCauses: []RootCause{}}
	defer d.finish()
	var path []int
	nic := g.nic[g.hostName[g.Victim.Src]]
	if nic != nil && len(nic.Edges) == 0 {
		nic = nil
	}
	if vf, ok := g.flowIdx[g.Victim]; ok {
		path = g.victimPath(vf)
	} else if len(g.pathHops) > 0 {
		path = g.pathHops
		d.explain("no flow record names the victim: its hops are the ports its polling packet took, with the ports' counters")
	} else if nic == nil {
		d.Type = Unknown
		d.Confidence = 0
		d.problem("victim %s appears in no switch's flow records: its path, and so the anomaly, cannot be traced", d.Victim)
		return d
	}
	var starts []start
	for _, hi := range path {
		h := &g.hops[hi]
		p := &g.Ports[h.port]
		d.VictimPath = append(d.VictimPath, Hop{Port: p.ID, Packets: h.packets, Paused: h.paused,
			Qdepth: finite(h.qdepthSum / float64(max(h.packets, 1))), PFC: h.paused > 0, Contention: p.Contention})
		if h.paused > 0 {
			starts = append(starts, start{h.port, float64(h.paused)})
			d.explain("the victim was paused at %s (%d of its %d packets there)", p.ID, h.paused, h.packets)
		}
	}
	if len(starts) == 0 && nic != nil {
		// The victim's own NIC was paused: the first paused port on its
		// path is the sender's egress, and its wait spreads from there.
		starts = g.nicStarts(d, nic)
	}
	if len(starts) == 0 {
		g.diagnoseUnpaused(d, path)
		return d
	}
	reach := g.reach(starts)
	loops := g.loops(reach)
	if len(loops) > 0 {
		g.diagnoseDeadlock(d, starts, loops)
	} else {
		g.diagnoseTree(d, starts, reach)
	}
	return d
}

// finish fills the summary and applies the input's problems to the
// confidence: a truncated report may have lost the counters that would
// have changed the answer.
func (d *Diagnosis) finish() {
	g := d.Graph
	for _, id := range append([]string{d.Initiator}, d.Path...) {
		if id == "" {
			continue
		}
		if i, ok := g.portIdx[parsePortID(id)]; ok && g.Ports[i].Truncated {
			d.Confidence *= 0.7
			d.problem("port %s on the diagnosis path comes from a truncated report", id)
			break
		}
	}
	if d.Type == Unknown {
		d.Confidence = 0
	}
	d.Confidence = finite(min(1, max(0, d.Confidence)))
	d.Summary = fmt.Sprintf("%s: %s", d.Victim, d.Type.Describe())
	switch {
	case len(d.RootCauses) > 0 && d.RootCauses[0].Kind == "host":
		d.Summary += fmt.Sprintf("; root cause host %s (at %s)", d.RootCauses[0].Host, d.RootCauses[0].Port)
	case len(d.RootCauses) > 0:
		d.Summary += fmt.Sprintf("; %d root-cause flow(s) at %s", len(d.RootCauses), d.RootCauses[0].Port)
	}
	d.Problems = dedupe(d.Problems)
}

func dedupe(s []string) []string {
	seen := make(map[string]bool, len(s))
	out := s[:0]
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

func parsePortID(s string) PortID {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == ':' {
			n := 0
			neg := false
			for j, c := range s[i+1:] {
				if j == 0 && c == '-' {
					neg = true
					continue
				}
				if c < '0' || c > '9' {
					return PortID{Switch: s}
				}
				n = n*10 + int(c-'0')
			}
			if neg {
				n = -n
			}
			return PortID{s[:i], n}
		}
	}
	return PortID{Switch: s}
}

// victimPath orders the victim's hops along its path: from the hop it
// entered by (its ingress not fed by another of its hops) through each
// egress port's neighbour. Hops the links cannot order follow, sorted.
func (g *Graph) victimPath(vf int) []int {
	hs := g.flowHops[vf]
	byIn := make(map[PortID]int, len(hs))
	for _, hi := range hs {
		h := &g.hops[hi]
		byIn[PortID{g.Ports[h.port].Port.Switch, h.in}] = hi
	}
	fed := make(map[int]bool, len(hs))
	next := make(map[int]int, len(hs))
	for _, hi := range hs {
		p := g.Ports[g.hops[hi].port].Port
		if pr, ok := g.topo.links[p]; ok && pr.host == "" {
			if n, ok := byIn[PortID{pr.sw, pr.port}]; ok && n != hi {
				next[hi] = n
				fed[n] = true
			}
		}
	}
	var out []int
	done := make(map[int]bool, len(hs))
	walk := func(hi int) {
		for !done[hi] {
			done[hi] = true
			out = append(out, hi)
			n, ok := next[hi]
			if !ok {
				return
			}
			hi = n
		}
	}
	for _, hi := range hs {
		if !fed[hi] {
			walk(hi)
		}
	}
	for _, hi := range hs {
		walk(hi)
	}
	return out
}

// start is a port where the victim's wait enters the port graph, and
// how much of it: a hop of the victim's where it was paused (its paused
// packets), or a port its paused NIC waited for (the NIC's wait split by
// the edges' weights).
type start struct {
	port int
	mass float64
}

// nicStarts are the starts of a victim that no switch paused but whose
// sender's NIC its switch did: the switch's congested egress ports the
// NIC's traffic went to, each with its share of the NIC's wait.
func (g *Graph) nicStarts(d *Diagnosis, w *nicWait) []start {
	var total float64
	for _, e := range w.Edges {
		total += e.Weight
	}
	host := g.hostName[g.Victim.Src]
	d.explain("the victim was paused at no switch egress, but its sender's NIC was: %s sent host %s %d PAUSE frames",
		g.Ports[w.Port].ID, host, g.Ports[w.Port].PauseSent)
	var out []start
	for _, e := range w.Edges {
		m := 1 / float64(len(w.Edges))
		if total > 0 {
			m = e.Weight / total
		}
		out = append(out, start{e.to, m})
		d.PortEdges = append(slices.Clip(d.PortEdges), e)
		d.explain("host %s's NIC waits for %s (%.0f%% of its traffic there, average queue %.0f B)", host, e.To, 100*e.Share, e.Qdepth)
	}
	return out
}

// reach returns the ports reachable over port-level edges from the start
// ports, in breadth-first order.
func (g *Graph) reach(starts []start) []int {
	seen := make(map[int]bool)
	var order []int
	for _, st := range starts {
		p := st.port
		if !seen[p] {
			seen[p] = true
			order = append(order, p)
		}
	}
	for i := 0; i < len(order); i++ {
		for _, ei := range g.out[order[i]] {
			if t := g.PortEdges[ei].to; !seen[t] {
				seen[t] = true
				order = append(order, t)
			}
		}
	}
	return order
}

// loops returns the strongly connected components of more than one port
// among the reachable ports (Tarjan, iteratively), in the order their
// first port was reached.
func (g *Graph) loops(reach []int) [][]int {
	inReach := make(map[int]bool, len(reach))
	for _, p := range reach {
		inReach[p] = true
	}
	index := make(map[int]int, len(reach))
	low := make(map[int]int, len(reach))
	onStack := make(map[int]bool, len(reach))
	var stack []int
	var sccs [][]int
	next := 0
	type frame struct{ v, ei int }
	for _, root := range reach {
		if _, ok := index[root]; ok {
			continue
		}
		call := []frame{{root, 0}}
		index[root], low[root] = next, next
		next++
		stack = append(stack, root)
		onStack[root] = true
		for len(call) > 0 {
			f := &call[len(call)-1]
			v := f.v
			if f.ei < len(g.out[v]) {
				w := g.PortEdges[g.out[v][f.ei]].to
				f.ei++
				if !inReach[w] {
					continue
				}
				if _, ok := index[w]; !ok {
					index[w], low[w] = next, next
					next++
					stack = append(stack, w)
					onStack[w] = true
					call = append(call, frame{w, 0})
				} else if onStack[w] {
					low[v] = min(low[v], index[w])
				}
				continue
			}
			call = call[:len(call)-1]
			if len(call) > 0 {
				u := call[len(call)-1].v
				low[u] = min(low[u], low[v])
			}
			if low[v] == index[v] {
				var scc []int
				for {
					w := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					onStack[w] = false
					scc = append(scc, w)
					if w == v {
						break
					}
				}
				if len(scc) > 1 {
					sccs = append(sccs, scc)
				}
			}
		}
	}
	pos := make(map[int]int, len(reach))
	for i, p := range reach {
		pos[p] = i
	}
	for _, s := range sccs {
		slices.SortFunc(s, func(a, b int) int { return cmp.Compare(pos[a], pos[b]) })
	}
	slices.SortFunc(sccs, func(a, b []int) int { return cmp.Compare(pos[a[0]], pos[b[0]]) })
	return sccs
}

// cycle returns a simple cycle of the loop through entry, in spreading
// order (each port is paused by the one before it): it follows the
// heaviest wait-for edge inside the loop, then reverses.
func (g *Graph) cycle(loop []int, entry int) []string {
	in := make(map[int]bool, len(loop))
	for _, p := range loop {
		in[p] = true
	}
	walk := []int{entry}
	at := map[int]int{entry: 0}
	v := entry
	for {
		best := -1
		for _, ei := range g.out[v] {
			e := &g.PortEdges[ei]
			if in[e.to] && (best < 0 || e.Weight > g.PortEdges[best].Weight) {
				best = ei
			}
		}
		if best < 0 {
			break
		}
		v = g.PortEdges[best].to
		if i, ok := at[v]; ok {
			walk = walk[i:]
			break
		}
		at[v] = len(walk)
		walk = append(walk, v)
	}
	// Wait-for order a -> b -> c -> a spreads as a, c, b.
	out := []string{g.Ports[walk[0]].ID}
	for i := len(walk) - 1; i > 0; i-- {
		out = append(out, g.Ports[walk[i]].ID)
	}
	return out
}

// spreadPath is the shortest wait-for path to target from the first port
// on the victim's path where it was paused (or, when target is not
// reachable from there, from any of them), in spreading order: target
// first, the victim's port last.
func (g *Graph) spreadPath(starts []start, target int) []string {
	if len(starts) > 1 {
		if p := g.spreadPath(starts[:1], target); p != nil {
			return p
		}
	}
	parent := make(map[int]int)
	var queue []int
	for _, st := range starts {
		p := st.port
		if _, ok := parent[p]; !ok {
			parent[p] = -1
			queue = append(queue, p)
		}
	}
	for i := 0; i < len(queue); i++ {
		v := queue[i]
		if v == target {
			break
		}
		for _, ei := range g.out[v] {
			if t := g.PortEdges[ei].to; t != v {
				if _, ok := parent[t]; !ok {
					parent[t] = v
					queue = append(queue, t)
				}
			}
		}
	}
	if _, ok := parent[target]; !ok {
		return nil
	}
	var out []string
	for v := target; v >= 0; v = parent[v] {
		out = append(out, g.Ports[v].ID)
	}
	return out
}

// contributors returns port pi's contributors as root causes, ranked.
func (g *Graph) contributors(pi int) []RootCause {
	var out []RootCause
	for _, ei := range g.pfEdges[pi] {
		e := &g.PortFlowEdges[ei]
		if !e.Contributor {
			continue
		}
		k := g.Flows[e.flow].Key
		out = append(out, RootCause{Kind: "flow", Name: e.Flow, Flow: &k, Port: e.Port,
			Contribution: e.Contribution, Share: e.Share, Victim: k == g.Victim})
	}
	slices.SortStableFunc(out, func(a, b RootCause) int {
		if c := cmp.Compare(b.Contribution, a.Contribution); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return out
}

// classify judges an initial congestion point (AnalyzeFlowContention of
// Algorithm 2): flow contention when flows built a contention queue there;
// host injection when the port leads to a host that paused it and there
// is no stronger contention; otherwise unexplained, with the reason.
func (g *Graph) classify(pi int) Origin {
	p := &g.Ports[pi]
	o := Origin{Port: p.ID, Contention: p.Contention, port: pi}
	contributors := g.contributors(pi)
	contended := p.Contention >= g.opt.MinContention
	hostPaused := p.PeerHost != "" && p.IsPaused()
	pausedFrac := 0.0
	if p.Packets > 0 {
		pausedFrac = float64(p.Paused) / float64(p.Packets)
	}
	// A queue that a single flow holds at a port its host paused is the
	// pause's, not contention: on links of one speed one flow cannot
	// outrun its last hop, so only the pause can have queued it (the
	// port's average queue mixes the packets before the pause with
	// those behind it, so its contention estimate is not zero).
	single := len(contributors) < 2
	// The host paused the port in an epoch before any in which it was
	// contended: the queue it has since is what the pause held back,
	// draining (a storm that stopped, its senders' backlog released at
	// once), not what started the pause.
	first := p.pausedFirst()
	switch {
	case hostPaused && (!contended || pausedFrac >= 0.5 || p.Packets == 0 || single || first):
		o.Kind, o.Host = "host_injection", p.PeerHost
		o.Why = fmt.Sprintf("paused by host %s (%d pause frames, %d of %d packets enqueued paused) with %.0f B of local contention",
			p.PeerHost, p.PauseFrames, p.Paused, p.Packets, p.Contention)
	case p.IsPaused() && p.PeerHost == "":
		// A pause from a switch came from further downstream: this port
		// cannot be the initial congestion point, whatever its queue.
		o.Kind = "unexplained"
		o.Why = g.cause[pi]
		if o.Why == "" {
			o.Why = fmt.Sprintf("port %s is paused but nothing downstream explains it", p.ID)
		}
	case contended:
		o.Kind = "contention"
		o.Why = fmt.Sprintf("average queue %.0f B, %.0f B of it local contention, %d contributing flows", p.Qdepth, p.Contention, len(contributors))
		if hostPaused {
			o.Why += fmt.Sprintf(" (host %s also sent %d pause frames)", p.PeerHost, p.PauseFrames)
		}
	case p.IsPaused():
		o.Kind = "unexplained"
		o.Why = g.cause[pi]
		if o.Why == "" {
			o.Why = fmt.Sprintf("port %s is paused but nothing downstream explains it", p.ID)
		}
	default:
		o.Kind = "unexplained"
		o.Why = fmt.Sprintf("port %s is congested (average queue %.0f B) without pause and with only %.0f B of local contention",
			p.ID, p.Qdepth, p.Contention)
	}
	return o
}

// rootCauses turns an origin into root causes.
func (g *Graph) rootCauses(d *Diagnosis, o Origin) {
	switch o.Kind {
	case "host_injection":
		p := &g.Ports[o.port]
		pauses := float64(p.PauseFrames)
		if pauses == 0 {
			pauses = g.pausedCount(p)
		}
		d.RootCauses = append(d.RootCauses, RootCause{Kind: "host", Name: o.Host, Host: o.Host, Port: o.Port,
			Contribution: pauses, Share: 1})
	case "contention":
		d.RootCauses = append(d.RootCauses, g.contributors(o.port)...)
		p := &g.Ports[o.port]
		if len(d.RootCauses) == 0 {
			d.Confidence *= 0.3
			d.problem("%s has %.0f B of contention but no flow records: the contending flows are unknown", o.Port, p.Contention)
		} else if p.FlowCoverage < 0.5 {
			d.Confidence *= 0.7
			d.problem("the flow records at %s account for only %.0f%% of its packets (evictions or truncation): other contributors may be missing",
				o.Port, 100*p.FlowCoverage)
		}
	}
}

// diagnoseUnpaused handles a victim never paused: normal flow contention
// at its most contended hop, unless that queue is itself the initial
// congestion of a PFC path (it paused upstream ports): then the victim
// sits in the incast that caused the backpressure.
func (g *Graph) diagnoseUnpaused(d *Diagnosis, path []int) {
	best := -1
	for _, hi := range path {
		p := g.hops[hi].port
		if best < 0 || g.Ports[p].Contention > g.Ports[best].Contention {
			best = p
		}
	}
	if best < 0 || g.Ports[best].Contention < g.opt.MinContention {
		d.Type = None
		d.Confidence = 0.5
		d.explain("the victim was never paused and no port on its path holds %.0f B of contention", g.opt.MinContention)
		if best >= 0 {
			d.explain("the most contended hop is %s with %.0f B", g.Ports[best].ID, g.Ports[best].Contention)
		}
		return
	}
	// The most contended hop may itself be paused from further down the
	// path (an incast's upstream neighbour): the origin is the most
	// contended hop that can be one.
	o := g.classify(best)
	if o.Kind == "unexplained" {
		bestValid := -1
		for _, hi := range path {
			pi := g.hops[hi].port
			if g.Ports[pi].Contention < g.opt.MinContention || (bestValid >= 0 && g.Ports[pi].Contention <= g.Ports[bestValid].Contention) {
				continue
			}
			if g.classify(pi).Kind != "unexplained" {
				bestValid = pi
			}
		}
		if bestValid >= 0 {
			best = bestValid
			o = g.classify(best)
		}
	}
	p := &g.Ports[best]
	o.Weight = 1
	d.Origins = []Origin{o}
	d.Initiator = p.ID
	if o.Kind == "host_injection" {
		d.Type = Storm
		d.Path = g.upstreamPath(best)
		d.explain("the victim was never paused, but its hop %s is paused by host %s: %s", p.ID, o.Host, o.Why)
	} else if len(g.in[best]) > 0 {
		d.Type = Incast
		d.Path = g.upstreamPath(best)
		d.explain("the victim was never paused, but its hop %s is congested by flow contention (%.0f B) and pauses %d upstream port(s): the victim is inside the initially congested queue",
			p.ID, p.Contention, len(g.in[best]))
	} else if g.pausing[best] {
		// The paused neighbours were not polled (the victim was never
		// paused, so its polling packet traced no PFC), but the switch's
		// own counters say the queue paused them.
		d.Type = Incast
		d.Path = []string{p.ID}
		d.explain("the victim was never paused, but its hop %s is congested by flow contention (%.0f B) and its switch sent PFC pauses out of ports that feed it: the victim is inside the initially congested queue",
			p.ID, p.Contention)
	} else {
		d.Type = Contention
		d.explain("the victim was never paused; its hop %s holds %.0f B of local flow contention and pauses no upstream port", p.ID, p.Contention)
	}
	g.rootCauses(d, o)
	g.spreading(d)
}

// upstreamPath follows the heaviest wait-for edges into pi upstream: the
// spreading path from an initiator the victim was not paused behind.
func (g *Graph) upstreamPath(pi int) []string {
	out := []string{g.Ports[pi].ID}
	seen := map[int]bool{pi: true}
	for {
		best := -1
		for _, ei := range g.in[pi] {
			e := &g.PortEdges[ei]
			if !seen[e.from] && (best < 0 || e.Weight > g.PortEdges[best].Weight) {
				best = ei
			}
		}
		if best < 0 {
			return out
		}
		pi = g.PortEdges[best].from
		seen[pi] = true
		out = append(out, g.Ports[pi].ID)
	}
}

// diagnoseTree handles a PFC graph without loops: the victim's paused
// packets are spread over the wait-for edges (in proportion to their
// weights, in topological order) down to the initial congestion points,
// and the heaviest one decides (Table 2: incast or storm).
func (g *Graph) diagnoseTree(d *Diagnosis, starts []start, reach []int) {
	inReach := make(map[int]bool, len(reach))
	for _, p := range reach {
		inReach[p] = true
	}
	indeg := make(map[int]int, len(reach))
	for _, p := range reach {
		for _, ei := range g.out[p] {
			indeg[g.PortEdges[ei].to]++
		}
	}
	mass := make(map[int]float64, len(reach))
	var total float64
	for _, st := range starts {
		mass[st.port] += st.mass
		total += st.mass
	}
	var queue []int
	for _, p := range reach {
		if indeg[p] == 0 {
			queue = append(queue, p)
		}
	}
	var origins []Origin
	for i := 0; i < len(queue); i++ {
		v := queue[i]
		var w float64
		for _, ei := range g.out[v] {
			w += g.PortEdges[ei].Weight
		}
		if len(g.out[v]) == 0 {
			o := g.classify(v)
			o.Weight = finite(mass[v] / total)
			origins = append(origins, o)
			continue
		}
		for _, ei := range g.out[v] {
			e := &g.PortEdges[ei]
			if w > 0 {
				mass[e.to] += mass[v] * e.Weight / w
			} else {
				mass[e.to] += mass[v] / float64(len(g.out[v]))
			}
			if indeg[e.to]--; indeg[e.to] == 0 {
				queue = append(queue, e.to)
			}
		}
	}
	slices.SortStableFunc(origins, func(a, b Origin) int {
		if c := cmp.Compare(b.Weight, a.Weight); c != 0 {
			return c
		}
		return cmp.Compare(a.port, b.port)
	})
	d.Origins = origins
	if len(origins) == 0 {
		d.Type = Unknown
		d.problem("the PFC graph from the victim has no initial congestion point")
		return
	}
	o := origins[0]
	d.Initiator = o.Port
	d.Path = g.spreadPath(starts, o.port)
	share := 0.0
	for _, x := range origins {
		if x.Kind == o.Kind {
			share += x.Weight
		}
	}
	d.Confidence *= share
	if len(origins) > 1 {
		d.explain("the victim's pause leads to %d initial congestion points; %s carries %.0f%% of it", len(origins), o.Port, 100*o.Weight)
	}
	switch o.Kind {
	case "contention":
		d.Type = Incast
		d.explain("the PFC spreading path ends at %s: %s", o.Port, o.Why)
	case "host_injection":
		d.Type = Storm
		d.explain("the PFC spreading path ends at %s, towards host %s: %s", o.Port, o.Host, o.Why)
	default:
		d.Type = Unknown
		d.Initiator = ""
		d.problem("%s", o.Why)
		d.explain("the PFC spreading path, as far as the telemetry reaches, ends at %s, and the telemetry does not say what paused or congested it", o.Port)
		return
	}
	for _, x := range origins[1:] {
		if x.Kind == "unexplained" && x.Weight > 0.1 {
			d.problem("%s", x.Why)
		}
	}
	g.rootCauses(d, o)
	g.spreading(d)
}

// diagnoseDeadlock handles loops of paused ports (Table 2's deadlock
// signatures). The initiator is out of the loop when a loop port also
// waits for a port outside the loop (out-degree above 1) that leads to
// host injection, or to flow contention the loop port waits for at least
// as much as for the loop itself; otherwise it is the contended port
// inside the loop. An edge's weight is the paper's measure of how much
// the downstream port holds the paused one (paused packets x traffic
// share x queue): a loop that its own burst filled also feeds congested
// ports next to it (long flows of the background), and the edges to them
// make its ports' out-degree 2, but the loop port waits mostly for the
// loop. Only when no loop port holds flow contention (nothing inside
// could have started it) does a lighter exit to contention decide.
func (g *Graph) diagnoseDeadlock(d *Diagnosis, starts []start, loops [][]int) {
	inLoop := make(map[int]bool)
	for _, l := range loops {
		for _, p := range l {
			inLoop[p] = true
		}
	}
	loop := loops[0]
	mine := make(map[int]bool, len(loop))
	for _, p := range loop {
		mine[p] = true
	}
	d.explain("%d port(s) form a loop of PFC pauses (cyclic buffer dependency): a deadlock", len(loop))
	// inner: each loop port's heaviest wait inside the loop.
	inner := make(map[int]float64, len(loop))
	for _, p := range loop {
		for _, ei := range g.out[p] {
			if e := &g.PortEdges[ei]; mine[e.to] {
				inner[p] = max(inner[p], e.Weight)
			}
		}
	}
	// Exits: edges from the loop to ports outside any loop, followed down
	// to their initial congestion points.
	type cand struct {
		o     Origin
		entry int
		w     float64
		// minor: the loop port waits for this exit less than for the
		// loop.
		minor bool
	}
	var cands []cand
	var exitW float64
	for _, p := range loop {
		for _, ei := range g.out[p] {
			e := &g.PortEdges[ei]
			if mine[e.to] {
				continue
			}
			exitW += e.Weight
			seen := map[int]bool{e.to: true}
			queue := []int{e.to}
			for i := 0; i < len(queue); i++ {
				v := queue[i]
				if len(g.out[v]) == 0 && !inLoop[v] {
					o := g.classify(v)
					cands = append(cands, cand{o, p, e.Weight, e.Weight < inner[p]})
					continue
				}
				for _, ej := range g.out[v] {
					if t := g.PortEdges[ej].to; !seen[t] && !mine[t] {
						seen[t] = true
						queue = append(queue, t)
					}
				}
			}
		}
	}
	// The loop port with the most local contention: the initiator if it
	// is inside (Algorithm 2 analyses every loop port's flows).
	init := -1
	for _, p := range loop {
		if g.Ports[p].Contention >= g.opt.MinContention && len(g.contributors(p)) > 0 &&
			(init < 0 || g.Ports[p].Contention > g.Ports[init].Contention) {
			init = p
		}
	}
	var best *cand
	for i := range cands {
		c := &cands[i]
		if c.o.Kind == "unexplained" || (c.o.Kind == "contention" && c.minor && init >= 0) {
			continue
		}
		if best == nil || c.w > best.w || (c.w == best.w && c.o.port < best.o.port) {
			best = c
		}
	}
	for _, c := range cands {
		c.o.Weight = finite(c.w / exitW)
		d.Origins = append(d.Origins, c.o)
	}
	if best != nil {
		o := best.o
		o.Weight = finite(best.w / exitW)
		d.Initiator = o.Port
		d.Loops = append(d.Loops, g.cycle(loop, best.entry))
		d.Path = g.spreadPath(starts, o.port)
		if o.Kind == "host_injection" {
			d.Type = DeadlockOutOfLoopInjection
			d.explain("loop port %s also waits for %s outside the loop, which is paused by host %s: %s",
				g.Ports[best.entry].ID, o.Port, o.Host, o.Why)
		} else {
			d.Type = DeadlockOutOfLoopContention
			d.explain("loop port %s also waits for %s outside the loop, congested by flow contention: %s",
				g.Ports[best.entry].ID, o.Port, o.Why)
		}
		g.rootCauses(d, o)
	} else {
		// Initiator in the loop.
		d.Type = DeadlockInLoop
		for _, c := range cands {
			switch {
			case c.o.Kind == "unexplained":
				d.problem("loop port %s leads out of the loop to %s, which is unexplained: %s", g.Ports[c.entry].ID, c.o.Port, c.o.Why)
				d.Confidence *= 0.4
			case c.minor:
				d.explain("loop port %s also waits for %s outside the loop (contention %.0f B), but less than for the loop itself (edge weight %.3g against %.3g): not what closed the loop",
					g.Ports[c.entry].ID, c.o.Port, c.o.Contention, c.w, inner[c.entry])
			}
		}
		if init < 0 {
			d.Loops = append(d.Loops, g.cycle(loop, loop[0]))
			d.Confidence *= 0.3
			d.problem("no port of the loop holds %.0f B of flow contention: the deadlock's initiator is not in the telemetry", g.opt.MinContention)
			d.explain("every loop port waits only for the next one (out-degree 1), so the initiator would be inside the loop")
		} else {
			// In a loop every port is paused; its local contention
			// decides, not classify's "paused, so not an origin".
			ip := &g.Ports[init]
			o := Origin{Port: ip.ID, Kind: "contention", Contention: ip.Contention, Weight: 1, port: init,
				Why: fmt.Sprintf("average queue %.0f B, %.0f B of it local contention, %d contributing flows",
					ip.Qdepth, ip.Contention, len(g.contributors(init)))}
			d.Origins = append(d.Origins, o)
			d.Initiator = o.Port
			d.Loops = append(d.Loops, g.cycle(loop, init))
			d.Path = g.spreadPath(starts, init)
			d.explain("no loop port waits mostly for a congested port outside the loop; %s has the most local contention (%.0f B): the initiator is in the loop",
				o.Port, g.Ports[init].Contention)
			g.rootCauses(d, o)
		}
	}
	for _, l := range loops[1:] {
		d.Loops = append(d.Loops, g.cycle(l, l[0]))
	}
	g.spreading(d)
}

// spreading lists the flows paused at two consecutive ports of the path:
// the paper's "PFC-spreading" contributors (F2 in its Figure 12(a)).
func (g *Graph) spreading(d *Diagnosis) {
	if len(d.Path) < 2 {
		return
	}
	set := make(map[string]bool)
	for i := 0; i+1 < len(d.Path); i++ {
		a, okA := g.portIdx[parsePortID(d.Path[i])]
		b, okB := g.portIdx[parsePortID(d.Path[i+1])]
		if !okA || !okB {
			continue
		}
		pausedAtB := make(map[int]bool)
		for _, hi := range g.portHops[b] {
			if g.hops[hi].paused > 0 {
				pausedAtB[g.hops[hi].flow] = true
			}
		}
		for _, hi := range g.portHops[a] {
			if pausedAtB[g.hops[hi].flow] {
				set[g.Flows[g.hops[hi].flow].Name] = true
			}
		}
	}
	for f := range set {
		d.SpreadingFlows = append(d.SpreadingFlows, f)
	}
	slices.Sort(d.SpreadingFlows)
}
