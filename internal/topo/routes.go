package topo

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// Routes is every switch's forwarding table towards every host: the set of
// ports (the ECMP group) a packet for that host may leave by. The simulator
// looks a next hop up for every packet at every switch, so the table is a
// flat array of small integers into a list of distinct port sets: in a
// fat-tree almost every (switch, host) pair shares one of a handful of sets
// (all uplinks, or one downlink), which keeps a k=16 table near 1 MB.
type Routes struct {
	swOf   []int32  // node index -> switch ordinal, -1 for hosts
	hostOf []int32  // node index -> host ordinal, -1 for switches
	nports []int    // node index -> number of ports, for Override's checks
	nHosts int      // hosts in the graph
	entry  []uint32 // swOrd*nHosts+hostOrd -> index in sets
	sets   [][]int  // distinct ECMP sets; sets[0] is the empty one (no route)
	intern map[string]uint32
}

// ShortestPaths computes, for every switch and every host, the ports of the
// switch that lie on a shortest path (by hop count) to the host. Hosts do
// not forward, so paths run over switches only. The graph should be valid
// (Validate); a switch that cannot reach a host gets no route to it.
func (g *Graph) ShortestPaths() *Routes {
	g.index()
	r := &Routes{
		swOf:   make([]int32, len(g.Nodes)),
		hostOf: make([]int32, len(g.Nodes)),
		nports: make([]int, len(g.Nodes)),
		sets:   [][]int{nil},
		intern: map[string]uint32{"": 0},
	}
	var switches []int
	for i, n := range g.Nodes {
		r.swOf[i], r.hostOf[i] = -1, -1
		r.nports[i] = len(g.ports[i])
		if n.Kind == Host {
			r.hostOf[i] = int32(r.nHosts)
			r.nHosts++
		} else {
			r.swOf[i] = int32(len(switches))
			switches = append(switches, i)
		}
	}
	r.entry = make([]uint32, len(switches)*r.nHosts)

	// A host has one link, so its routes are those of the switch it hangs
	// from (its "edge") plus the last hop: one breadth-first search per
	// edge switch serves all of that switch's hosts.
	byEdge := map[int][]int{} // edge switch -> hosts on it
	var edges []int
	for h, n := range g.Nodes {
		if n.Kind != Host || len(g.ports[h]) != 1 {
			continue
		}
		t := g.ports[h][0].Peer
		if t < 0 || g.Nodes[t].Kind != Switch {
			continue // host to host: no switch is involved
		}
		if _, ok := byEdge[t]; !ok {
			edges = append(edges, t)
		}
		byEdge[t] = append(byEdge[t], h)
	}
	dist := make([]int, len(g.Nodes))
	queue := make([]int, 0, len(switches))
	var set []int
	for _, t := range edges {
		for i := range dist {
			dist[i] = -1
		}
		dist[t] = 0
		queue = append(queue[:0], t)
		for len(queue) > 0 {
			s := queue[0]
			queue = queue[1:]
			for _, p := range g.ports[s] {
				if p.Peer >= 0 && g.Nodes[p.Peer].Kind == Switch && dist[p.Peer] < 0 {
					dist[p.Peer] = dist[s] + 1
					queue = append(queue, p.Peer)
				}
			}
		}
		for _, s := range switches {
			if s == t || dist[s] < 0 {
				continue
			}
			set = set[:0]
			for port, p := range g.ports[s] {
				if p.Peer >= 0 && g.Nodes[p.Peer].Kind == Switch && dist[p.Peer] == dist[s]-1 {
					set = append(set, port)
				}
			}
			id := r.add(set)
			for _, h := range byEdge[t] {
				r.entry[int(r.swOf[s])*r.nHosts+int(r.hostOf[h])] = id
			}
		}
		for _, h := range byEdge[t] {
			// The edge switch delivers on the port the host hangs from.
			r.entry[int(r.swOf[t])*r.nHosts+int(r.hostOf[h])] = r.add([]int{g.ports[h][0].PeerPort})
		}
	}
	return r
}

// add interns a port set and returns its index.
func (r *Routes) add(ports []int) uint32 {
	key := make([]byte, 0, 4*len(ports))
	for _, p := range ports {
		key = binary.LittleEndian.AppendUint32(key, uint32(p))
	}
	if id, ok := r.intern[string(key)]; ok {
		return id
	}
	id := uint32(len(r.sets))
	cp := append([]int(nil), ports...)
	r.sets = append(r.sets, cp[:len(cp):len(cp)])
	r.intern[string(key)] = id
	return id
}

// NextHops returns the ports of switch sw (a node index) on which a packet
// for host (a node index) may leave: the ECMP set, in port order. It is nil
// when sw has no route to host or either index is not what it should be.
// The slice is shared: do not modify it.
func (r *Routes) NextHops(sw, host int) []int {
	if uint(sw) >= uint(len(r.swOf)) || uint(host) >= uint(len(r.hostOf)) {
		return nil
	}
	s, h := r.swOf[sw], r.hostOf[host]
	if s < 0 || h < 0 {
		return nil
	}
	return r.sets[r.entry[int(s)*r.nHosts+int(h)]]
}

// Override replaces switch sw's route towards host with a static set of
// ports, whatever the shortest paths say: a misconfigured route, a route
// around a failed link, or half of a loop that creates cyclic buffer
// dependency. Empty ports removes the route (the switch drops such
// packets). It panics when sw is not a switch, host is not a host or a
// port does not exist, which are programming errors (Spec checks its
// routes before building them).
func (r *Routes) Override(sw, host int, ports []int) {
	if uint(sw) >= uint(len(r.swOf)) || r.swOf[sw] < 0 {
		panic(fmt.Sprintf("topo: Override: node %d is not a switch", sw))
	}
	if uint(host) >= uint(len(r.hostOf)) || r.hostOf[host] < 0 {
		panic(fmt.Sprintf("topo: Override: node %d is not a host", host))
	}
	for _, p := range ports {
		if p < 0 || p >= r.nports[sw] {
			panic(fmt.Sprintf("topo: Override: switch %d has no port %d (it has %d)", sw, p, r.nports[sw]))
		}
	}
	r.entry[int(r.swOf[sw])*r.nHosts+int(r.hostOf[host])] = r.add(ports)
}

// PathLengths follows every ECMP choice from host src to host dst and
// returns the number of links on the shortest and on the longest path (2
// through one switch). It fails, naming the switches, when some choice
// leads into a loop, to a switch with no route, or to the wrong host: what
// a misconfigured Override does. Tests and scenario checks use it; the
// simulator does not.
func (r *Routes) PathLengths(g *Graph, src, dst int) (minLinks, maxLinks int, err error) {
	g.index()
	name := func(n int) string { return g.Nodes[n].Name }
	if src < 0 || src >= len(g.Nodes) || g.Nodes[src].Kind != Host || dst < 0 || dst >= len(g.Nodes) || g.Nodes[dst].Kind != Host {
		return 0, 0, fmt.Errorf("topo: PathLengths: %d and %d must both be hosts", src, dst)
	}
	if len(g.ports[src]) != 1 {
		return 0, 0, fmt.Errorf("topo: host %s has %d links", name(src), len(g.ports[src]))
	}
	if src == dst {
		return 0, 0, nil
	}
	type span struct{ lo, hi int }
	memo := map[int]span{}   // switch -> links from it to dst
	onPath := map[int]bool{} // switches on the current path, for loops
	var path []int
	var walk func(s int) (span, error)
	walk = func(s int) (span, error) {
		if sp, ok := memo[s]; ok {
			return sp, nil
		}
		if onPath[s] {
			i := 0
			for path[i] != s {
				i++
			}
			names := make([]string, 0, len(path)-i+1)
			for _, n := range path[i:] {
				names = append(names, name(n))
			}
			names = append(names, name(s))
			return span{}, fmt.Errorf("topo: routes towards %s loop: %s", name(dst), strings.Join(names, " -> "))
		}
		hops := r.NextHops(s, dst)
		if len(hops) == 0 {
			return span{}, fmt.Errorf("topo: switch %s has no route to %s", name(s), name(dst))
		}
		onPath[s] = true
		path = append(path, s)
		out := span{lo: 1 << 30}
		for _, port := range hops {
			peer := g.ports[s][port].Peer
			var sp span
			switch {
			case peer == dst:
				sp = span{1, 1}
			case g.Nodes[peer].Kind == Host:
				return span{}, fmt.Errorf("topo: switch %s sends traffic for %s to host %s (port %d)", name(s), name(dst), name(peer), port)
			default:
				sub, err := walk(peer)
				if err != nil {
					return span{}, err
				}
				sp = span{sub.lo + 1, sub.hi + 1}
			}
			out.lo, out.hi = min(out.lo, sp.lo), max(out.hi, sp.hi)
		}
		path = path[:len(path)-1]
		delete(onPath, s)
		memo[s] = out
		return out, nil
	}
	first := g.ports[src][0].Peer
	if first == dst {
		return 1, 1, nil
	}
	if g.Nodes[first].Kind == Host {
		return 0, 0, fmt.Errorf("topo: host %s is cabled to host %s, not to %s", name(src), name(first), name(dst))
	}
	sp, err := walk(first)
	if err != nil {
		return 0, 0, err
	}
	return sp.lo + 1, sp.hi + 1, nil
}
