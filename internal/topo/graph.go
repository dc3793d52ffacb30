// Package topo describes the fabric simulator's networks as pure data: nodes
// (RNIC endpoints and switches), links with bandwidth and propagation delay,
// numbered ports, and the equal-cost shortest-path routes switches forward
// on. Generators build fat-trees, leaf-spine and rail-optimized clusters;
// Spec reads any of them, or an explicit graph, from YAML with file:line:key
// errors. Nothing here simulates: bench/fabric turns a Graph and its Routes
// into a running network, so the same topology can also be handed to other
// consumers (the ns-3 peer, plots, Hawkeye's path tracing) unchanged.
package topo

import (
	"fmt"
	"math"
	"strings"
)

// Kind says what a node is.
type Kind uint8

const (
	// Host is an RNIC endpoint: it sends and receives flows and never
	// forwards, so it has exactly one link.
	Host Kind = iota
	// Switch forwards packets between its ports.
	Switch
)

func (k Kind) String() string {
	switch k {
	case Host:
		return "host"
	case Switch:
		return "switch"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Node is a host or a switch.
type Node struct {
	Name string // unique in the graph
	Kind Kind
	// Layer groups switches for per-layer configuration: "tor", "agg",
	// "core", "leaf", "spine", "rail"; "" for hosts.
	Layer string
	// Machine is, for hosts, the server this RNIC belongs to: in a
	// rail-optimized cluster a machine has several RNICs, each on its own
	// rail. "" means the RNIC is a machine of its own.
	Machine string
}

// Link is a full-duplex cable between two nodes.
type Link struct {
	A, B int // node indices
	// APort and BPort are the link's port numbers on A and on B. Ports are
	// numbered per node from 0 in the order the node's links appear in
	// Graph.Links (AddLink and NumberPorts assign them so), which keeps
	// them deterministic for a given link list.
	APort, BPort int
	Bandwidth    float64 // bits per second, each direction
	Delay        int64   // propagation delay, ns
}

// PortRef is what a node's port leads to.
type PortRef struct {
	Link     int // index in Graph.Links
	Peer     int // node at the other end
	PeerPort int // port number on Peer
}

// Graph is a topology. Nodes and Links are plain data; the indexes behind
// Node and Ports are rebuilt whenever the number of nodes or links changes
// (call Reindex after editing existing entries in place).
type Graph struct {
	Nodes []Node
	Links []Link

	byName  map[string]int
	ports   [][]PortRef
	indexed [2]int // len(Nodes), len(Links) when the indexes were built
}

// AddNode appends a node and returns its index.
func (g *Graph) AddNode(n Node) int {
	g.index()
	g.Nodes = append(g.Nodes, n)
	i := len(g.Nodes) - 1
	// Keep the indexes current instead of rebuilding them on the next
	// lookup, so building a graph node by node stays linear.
	if _, dup := g.byName[n.Name]; !dup {
		g.byName[n.Name] = i
	}
	g.ports = append(g.ports, nil)
	g.indexed[0]++
	return i
}

// AddLink connects a and b with the next free port on each and returns the
// link's index.
func (g *Graph) AddLink(a, b int, bw float64, delay int64) int {
	g.index()
	l := Link{A: a, B: b, Bandwidth: bw, Delay: delay, APort: g.degree(a), BPort: g.degree(b)}
	if a == b {
		l.BPort = l.APort + 1
	}
	g.Links = append(g.Links, l)
	i := len(g.Links) - 1
	if a >= 0 && a < len(g.ports) && b >= 0 && b < len(g.ports) && a != b {
		g.ports[a] = append(g.ports[a], PortRef{Link: i, Peer: b, PeerPort: l.BPort})
		g.ports[b] = append(g.ports[b], PortRef{Link: i, Peer: a, PeerPort: l.APort})
		g.indexed[1]++
	} else {
		g.Reindex() // a broken link: let Reindex place what it can
	}
	return i
}

func (g *Graph) degree(n int) int {
	if n < 0 || n >= len(g.ports) {
		return 0
	}
	return len(g.ports[n])
}

// NumberPorts renumbers every node's ports from 0 in the order of Links,
// for graphs whose links were written without port numbers.
func (g *Graph) NumberPorts() {
	next := make([]int, len(g.Nodes))
	for i := range g.Links {
		l := &g.Links[i]
		if l.A >= 0 && l.A < len(next) {
			l.APort = next[l.A]
			next[l.A]++
		}
		if l.B >= 0 && l.B < len(next) {
			l.BPort = next[l.B]
			next[l.B]++
		}
	}
	g.Reindex()
}

// Reindex rebuilds the name and port indexes.
func (g *Graph) Reindex() {
	g.byName = make(map[string]int, len(g.Nodes))
	for i, n := range g.Nodes {
		if _, dup := g.byName[n.Name]; !dup {
			g.byName[n.Name] = i
		}
	}
	g.ports = make([][]PortRef, len(g.Nodes))
	deg := make([]int, len(g.Nodes))
	for _, l := range g.Links {
		for _, end := range [2]int{l.A, l.B} {
			if end >= 0 && end < len(deg) {
				deg[end]++
			}
		}
	}
	for n := range g.ports {
		g.ports[n] = make([]PortRef, deg[n])
		for p := range g.ports[n] {
			g.ports[n][p] = PortRef{Link: -1, Peer: -1, PeerPort: -1}
		}
	}
	// A port number out of range or used twice leaves a hole (Link -1);
	// Validate reports it.
	place := func(n, port int, ref PortRef) {
		if n < 0 || n >= len(g.ports) || port < 0 || port >= len(g.ports[n]) || g.ports[n][port].Link >= 0 {
			return
		}
		g.ports[n][port] = ref
	}
	for i, l := range g.Links {
		place(l.A, l.APort, PortRef{Link: i, Peer: l.B, PeerPort: l.BPort})
		place(l.B, l.BPort, PortRef{Link: i, Peer: l.A, PeerPort: l.APort})
	}
	g.indexed = [2]int{len(g.Nodes), len(g.Links)}
}

func (g *Graph) index() {
	if g.byName == nil || g.indexed != [2]int{len(g.Nodes), len(g.Links)} {
		g.Reindex()
	}
}

// Node finds a node by name.
func (g *Graph) Node(name string) (int, bool) {
	g.index()
	i, ok := g.byName[name]
	return i, ok
}

// Ports lists node n's ports, indexed by port number. The slice is the
// graph's own: do not modify it.
func (g *Graph) Ports(n int) []PortRef {
	g.index()
	if n < 0 || n >= len(g.ports) {
		return nil
	}
	return g.ports[n]
}

// Hosts lists the indices of the host nodes in node order.
func (g *Graph) Hosts() []int {
	var hs []int
	for i, n := range g.Nodes {
		if n.Kind == Host {
			hs = append(hs, i)
		}
	}
	return hs
}

// Switches lists the indices of the switch nodes in node order.
func (g *Graph) Switches() []int {
	var ss []int
	for i, n := range g.Nodes {
		if n.Kind == Switch {
			ss = append(ss, i)
		}
	}
	return ss
}

// Error is one problem of a graph: the node or link it is about (-1 when
// none) and what is wrong. Spec uses Node and Link to point at the YAML
// line that caused it.
type Error struct {
	Node, Link int
	Msg        string
}

func (e *Error) Error() string { return e.Msg }

// Errors is every problem Validate found, one per line in its text.
type Errors []*Error

func (es Errors) Error() string {
	const show = 20
	var b strings.Builder
	for i, e := range es {
		if i == show {
			fmt.Fprintf(&b, "\n... and %d more", len(es)-show)
			break
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Msg)
	}
	return b.String()
}

// Unwrap lets errors.As find the individual problems.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// Validate checks that the graph can be simulated: unique non-empty names,
// known kinds, links between two different existing nodes with positive
// finite bandwidth and non-negative delay, consistent port numbers, hosts
// with exactly one link, and every node reachable from every other. The
// error is an Errors listing every problem found.
func (g *Graph) Validate() error {
	g.Reindex()
	var es Errors
	add := func(node, link int, format string, args ...any) {
		es = append(es, &Error{Node: node, Link: link, Msg: "topo: " + fmt.Sprintf(format, args...)})
	}
	if len(g.Nodes) == 0 {
		add(-1, -1, "no nodes")
		return es
	}
	name := func(n int) string {
		if n >= 0 && n < len(g.Nodes) {
			return fmt.Sprintf("%q", g.Nodes[n].Name)
		}
		return fmt.Sprintf("#%d", n)
	}
	hosts := 0
	for i, n := range g.Nodes {
		switch {
		case n.Name == "":
			add(i, -1, "node %d has no name", i)
		case g.byName[n.Name] != i:
			add(i, -1, "node %d is named %q like node %d", i, n.Name, g.byName[n.Name])
		}
		switch n.Kind {
		case Host:
			hosts++
		case Switch:
		default:
			add(i, -1, "node %s: unknown kind %d", name(i), n.Kind)
		}
	}
	if hosts == 0 {
		add(-1, -1, "no hosts")
	}
	for i, l := range g.Links {
		bad := false
		for _, end := range [2]int{l.A, l.B} {
			if end < 0 || end >= len(g.Nodes) {
				add(-1, i, "link %d (%s - %s) leads to node %d, which does not exist (%d nodes)", i, name(l.A), name(l.B), end, len(g.Nodes))
				bad = true
			}
		}
		if bad {
			continue
		}
		if l.A == l.B {
			add(l.A, i, "link %d connects %s to itself", i, name(l.A))
		}
		if !(l.Bandwidth > 0) || math.IsInf(l.Bandwidth, 0) {
			add(-1, i, "link %d (%s - %s): bandwidth %v bit/s, want a positive number", i, name(l.A), name(l.B), l.Bandwidth)
		}
		if l.Delay < 0 {
			add(-1, i, "link %d (%s - %s): negative delay %d ns", i, name(l.A), name(l.B), l.Delay)
		}
		for _, e := range [2]struct{ n, p int }{{l.A, l.APort}, {l.B, l.BPort}} {
			ps := g.ports[e.n]
			if e.p < 0 || e.p >= len(ps) || ps[e.p].Link != i {
				add(e.n, i, "link %d (%s - %s): port %d of %s is out of range or taken (%s has %d links, numbered 0..%d; NumberPorts assigns them)",
					i, name(l.A), name(l.B), e.p, name(e.n), name(e.n), len(ps), len(ps)-1)
			}
		}
	}
	for i, n := range g.Nodes {
		if n.Kind == Host && len(g.ports[i]) != 1 {
			add(i, -1, "host %s has %d links, want exactly 1 (an RNIC has one port)", name(i), len(g.ports[i]))
		}
	}
	if len(es) > 0 {
		return es // reachability over broken links would only repeat the cause
	}
	// Reachability: the graph is undirected, so one search from node 0
	// decides it. Hosts do not forward, so a host is not a transit node.
	seen := make([]bool, len(g.Nodes))
	seen[0] = true
	queue := []int{0}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		if g.Nodes[n].Kind == Host && n != 0 {
			continue
		}
		for _, p := range g.ports[n] {
			if !seen[p.Peer] {
				seen[p.Peer] = true
				queue = append(queue, p.Peer)
			}
		}
	}
	var unreached []int
	for i, s := range seen {
		if !s {
			unreached = append(unreached, i)
		}
	}
	if len(unreached) > 0 {
		more := ""
		if len(unreached) > 1 {
			more = fmt.Sprintf(" (nor %d other nodes)", len(unreached)-1)
		}
		add(unreached[0], -1, "the topology is disconnected: %s cannot be reached from %s%s", name(unreached[0]), name(0), more)
	}
	if len(es) == 0 {
		return nil
	}
	return es
}
