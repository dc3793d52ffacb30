package topo

import (
	"fmt"
	"math"
)

// The generators add hosts first, so a host's node index is its number
// (node i is "h<i>" in a fat-tree or leaf-spine): flow files and the ns-3
// peer can then name hosts by index without a lookup. Links are added
// downlinks first, then uplinks, so on every switch the ports facing down
// come before the ports facing up, in the order of the nodes they reach.

func checkLink(what string, bw float64, delay int64) error {
	if !(bw > 0) || math.IsInf(bw, 0) {
		return fmt.Errorf("topo: %s bandwidth %v bit/s, want a positive number", what, bw)
	}
	if delay < 0 {
		return fmt.Errorf("topo: negative link delay %d ns", delay)
	}
	return nil
}

// FatTree builds the k-ary fat-tree of Al-Fares et al.: k pods of k/2 edge
// switches ("tor", each with k/2 hosts) and k/2 aggregation switches
// ("agg"), and (k/2)^2 core switches ("core"). Aggregation switch j of every
// pod connects to cores j*k/2 .. j*k/2+k/2-1. That is k^3/4 hosts
// h0..h{k^3/4-1}, k^2/2 tors, k^2/2 aggs and k^2/4 cores; every link has
// bandwidth bw (bit/s) and the given delay (ns).
func FatTree(k int, bw float64, delay int64) (*Graph, error) {
	if k < 2 || k%2 != 0 {
		return nil, fmt.Errorf("topo: fat-tree k=%d, want an even number >= 2", k)
	}
	if k > 128 {
		return nil, fmt.Errorf("topo: fat-tree k=%d is %d hosts, more than this simulator is meant for (k <= 128)", k, k*k*k/4)
	}
	if err := checkLink("link", bw, delay); err != nil {
		return nil, err
	}
	half := k / 2
	nHosts, nEdge, nCore := k*k*k/4, k*half, half*half
	g := &Graph{
		Nodes: make([]Node, 0, nHosts+2*nEdge+nCore),
		Links: make([]Link, 0, 3*nHosts),
	}
	for i := range nHosts {
		g.AddNode(Node{Name: fmt.Sprintf("h%d", i), Kind: Host})
	}
	tor0 := len(g.Nodes)
	for i := range nEdge {
		g.AddNode(Node{Name: fmt.Sprintf("tor%d", i), Kind: Switch, Layer: "tor"})
	}
	agg0 := len(g.Nodes)
	for i := range nEdge {
		g.AddNode(Node{Name: fmt.Sprintf("agg%d", i), Kind: Switch, Layer: "agg"})
	}
	core0 := len(g.Nodes)
	for i := range nCore {
		g.AddNode(Node{Name: fmt.Sprintf("core%d", i), Kind: Switch, Layer: "core"})
	}
	for h := range nHosts {
		g.AddLink(h, tor0+h/half, bw, delay)
	}
	for t := range nEdge {
		pod := t / half
		for j := range half {
			g.AddLink(tor0+t, agg0+pod*half+j, bw, delay)
		}
	}
	for a := range nEdge {
		j := a % half
		for c := range half {
			g.AddLink(agg0+a, core0+j*half+c, bw, delay)
		}
	}
	return g, nil
}

// LeafSpine builds a two-tier Clos: leaves ("leaf0"..) with hostsPerLeaf
// hosts each ("h0"..) on hostBW links, every leaf connected to every spine
// ("spine0"..) on fabricBW links.
func LeafSpine(leaves, spines, hostsPerLeaf int, hostBW, fabricBW float64, delay int64) (*Graph, error) {
	switch {
	case leaves < 1:
		return nil, fmt.Errorf("topo: leaf-spine with %d leaves, want at least 1", leaves)
	case spines < 0 || (spines == 0 && leaves > 1):
		return nil, fmt.Errorf("topo: leaf-spine with %d spines and %d leaves, want at least 1 spine", spines, leaves)
	case hostsPerLeaf < 1:
		return nil, fmt.Errorf("topo: leaf-spine with %d hosts per leaf, want at least 1", hostsPerLeaf)
	case leaves*hostsPerLeaf > 1<<20 || leaves*spines > 1<<20:
		return nil, fmt.Errorf("topo: leaf-spine %d x %d x %d is too large", leaves, spines, hostsPerLeaf)
	}
	if err := checkLink("host link", hostBW, delay); err != nil {
		return nil, err
	}
	if err := checkLink("fabric link", fabricBW, delay); err != nil {
		return nil, err
	}
	g := &Graph{}
	for i := range leaves * hostsPerLeaf {
		g.AddNode(Node{Name: fmt.Sprintf("h%d", i), Kind: Host})
	}
	leaf0 := len(g.Nodes)
	for i := range leaves {
		g.AddNode(Node{Name: fmt.Sprintf("leaf%d", i), Kind: Switch, Layer: "leaf"})
	}
	spine0 := len(g.Nodes)
	for i := range spines {
		g.AddNode(Node{Name: fmt.Sprintf("spine%d", i), Kind: Switch, Layer: "spine"})
	}
	for h := range leaves * hostsPerLeaf {
		g.AddLink(h, leaf0+h/hostsPerLeaf, hostBW, delay)
	}
	for l := range leaves {
		for s := range spines {
			g.AddLink(leaf0+l, spine0+s, fabricBW, delay)
		}
	}
	return g, nil
}

// RailOptimized builds a rail-optimized cluster as used for GPU training:
// machines ("m0".."m{machines-1}") with nicsPerMachine RNICs each (host
// "m{m}n{r}", Machine "m{m}"), RNIC r of every machine on rail switch r
// ("rail{r}", hostBW links), and the rails joined by spines ("spine0"..,
// every rail to every spine on fabricBW links). Traffic between RNICs of
// the same rail stays on the rail; traffic across rails goes through a
// spine. Host nodes come machine by machine, RNICs in order.
func RailOptimized(machines, nicsPerMachine, spines int, hostBW, fabricBW float64, delay int64) (*Graph, error) {
	switch {
	case machines < 1:
		return nil, fmt.Errorf("topo: rail-optimized with %d machines, want at least 1", machines)
	case nicsPerMachine < 1:
		return nil, fmt.Errorf("topo: rail-optimized with %d RNICs per machine, want at least 1", nicsPerMachine)
	case spines < 0 || (spines == 0 && nicsPerMachine > 1):
		return nil, fmt.Errorf("topo: rail-optimized with %d rails and %d spines, want at least 1 spine to join the rails", nicsPerMachine, spines)
	case machines*nicsPerMachine > 1<<20 || nicsPerMachine*spines > 1<<20:
		return nil, fmt.Errorf("topo: rail-optimized %d x %d x %d is too large", machines, nicsPerMachine, spines)
	}
	if err := checkLink("host link", hostBW, delay); err != nil {
		return nil, err
	}
	if err := checkLink("fabric link", fabricBW, delay); err != nil {
		return nil, err
	}
	g := &Graph{}
	for m := range machines {
		for r := range nicsPerMachine {
			g.AddNode(Node{Name: fmt.Sprintf("m%dn%d", m, r), Kind: Host, Machine: fmt.Sprintf("m%d", m)})
		}
	}
	rail0 := len(g.Nodes)
	for r := range nicsPerMachine {
		g.AddNode(Node{Name: fmt.Sprintf("rail%d", r), Kind: Switch, Layer: "rail"})
	}
	spine0 := len(g.Nodes)
	for s := range spines {
		g.AddNode(Node{Name: fmt.Sprintf("spine%d", s), Kind: Switch, Layer: "spine"})
	}
	// Rail switches take their machines in machine order: port m of rail r
	// is machine m's RNIC r.
	for r := range nicsPerMachine {
		for m := range machines {
			g.AddLink(m*nicsPerMachine+r, rail0+r, hostBW, delay)
		}
	}
	for r := range nicsPerMachine {
		for s := range spines {
			g.AddLink(rail0+r, spine0+s, fabricBW, delay)
		}
	}
	return g, nil
}
