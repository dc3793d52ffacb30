package topo

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func countKinds(g *Graph) (hosts int, layers map[string]int) {
	layers = map[string]int{}
	for _, n := range g.Nodes {
		if n.Kind == Host {
			hosts++
		} else {
			layers[n.Layer]++
		}
	}
	return hosts, layers
}

func TestFatTreeCounts(t *testing.T) {
	for _, k := range []int{2, 4, 6, 8} {
		g, err := FatTree(k, 100e9, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Validate(); err != nil {
			t.Fatalf("k=%d: %v", k, err)
		}
		hosts, layers := countKinds(g)
		want := map[string]int{"tor": k * k / 2, "agg": k * k / 2, "core": k * k / 4}
		if hosts != k*k*k/4 || !reflect.DeepEqual(layers, want) {
			t.Errorf("k=%d: %d hosts, switches %v; want %d hosts, %v", k, hosts, layers, k*k*k/4, want)
		}
		// Every switch has k ports; links: hosts + tor-agg + agg-core.
		if len(g.Links) != 3*k*k*k/4 {
			t.Errorf("k=%d: %d links, want %d", k, len(g.Links), 3*k*k*k/4)
		}
		for _, s := range g.Switches() {
			if n := len(g.Ports(s)); n != k && !(g.Nodes[s].Layer == "core" && n == k) {
				t.Errorf("k=%d: %s has %d ports, want %d", k, g.Nodes[s].Name, n, k)
			}
		}
		for i, h := range g.Hosts() {
			if h != i || g.Nodes[h].Name != fmt.Sprintf("h%d", i) {
				t.Fatalf("k=%d: host %d is node %d %q", k, i, h, g.Nodes[h].Name)
			}
		}
	}
	for _, k := range []int{0, 3, -2} {
		if _, err := FatTree(k, 100e9, 1000); err == nil {
			t.Errorf("k=%d accepted", k)
		}
	}
	if _, err := FatTree(4, 0, 1000); err == nil {
		t.Error("zero bandwidth accepted")
	}
	if _, err := FatTree(4, 1e9, -1); err == nil {
		t.Error("negative delay accepted")
	}
}

// TestFatTreePorts pins the port layout the simulator and its outputs
// rely on: downlinks first, then uplinks, in node order, identically on
// every call.
func TestFatTreePorts(t *testing.T) {
	g, _ := FatTree(4, 100e9, 1000)
	g2, _ := FatTree(4, 100e9, 1000)
	if !reflect.DeepEqual(g.Nodes, g2.Nodes) || !reflect.DeepEqual(g.Links, g2.Links) {
		t.Fatal("two fat-trees differ")
	}
	name := func(ref PortRef) string { return g.Nodes[ref.Peer].Name }
	peers := func(node string) []string {
		n, ok := g.Node(node)
		if !ok {
			t.Fatalf("no node %s", node)
		}
		var out []string
		for port, ref := range g.Ports(n) {
			out = append(out, name(ref))
			back := g.Ports(ref.Peer)[ref.PeerPort]
			if back.Peer != n || back.PeerPort != port || back.Link != ref.Link {
				t.Errorf("%s port %d -> %s port %d does not lead back", node, port, name(ref), ref.PeerPort)
			}
		}
		return out
	}
	for node, want := range map[string][]string{
		"h5":    {"tor2"},
		"tor2":  {"h4", "h5", "agg2", "agg3"},
		"agg3":  {"tor2", "tor3", "core2", "core3"},
		"core1": {"agg0", "agg2", "agg4", "agg6"},
		"core2": {"agg1", "agg3", "agg5", "agg7"},
	} {
		if got := peers(node); !reflect.DeepEqual(got, want) {
			t.Errorf("%s ports lead to %v, want %v", node, got, want)
		}
	}
}

// allPairs checks that every host reaches every other host over the
// routes and returns the path length (links, equal on every ECMP path) for
// each pair.
func allPairs(t *testing.T, g *Graph, r *Routes) map[[2]int]int {
	t.Helper()
	out := map[[2]int]int{}
	hs := g.Hosts()
	for _, a := range hs {
		for _, b := range hs {
			if a == b {
				continue
			}
			lo, hi, err := r.PathLengths(g, a, b)
			if err != nil {
				t.Fatalf("%s -> %s: %v", g.Nodes[a].Name, g.Nodes[b].Name, err)
			}
			if lo != hi {
				t.Fatalf("%s -> %s: ECMP paths of %d and %d links, want all shortest", g.Nodes[a].Name, g.Nodes[b].Name, lo, hi)
			}
			out[[2]int{a, b}] = lo
		}
	}
	return out
}

func TestFatTreeRoutes(t *testing.T) {
	for _, k := range []int{4, 6} {
		g, _ := FatTree(k, 100e9, 1000)
		r := g.ShortestPaths()
		half := k / 2
		lens := allPairs(t, g, r)
		for pair, n := range lens {
			a, b := pair[0], pair[1]
			want := 6 // other pod: tor, agg, core, agg, tor
			switch {
			case a/half == b/half:
				want = 2 // same tor
			case a/(half*half) == b/(half*half):
				want = 4 // same pod: tor, agg, tor
			}
			if n != want {
				t.Fatalf("k=%d h%d -> h%d: %d links, want %d", k, a, b, n, want)
			}
		}
		// ECMP: a tor has k/2 ways up, an agg k/2 ways to another pod, a
		// core one way down, and down is always one way.
		node := func(name string) int { n, _ := g.Node(name); return n }
		far := k*k*k/4 - 1 // last host, in the last pod
		for _, c := range []struct {
			sw   string
			host int
			want int
		}{
			{"tor0", 0, 1},
			{"tor0", half, half}, // next tor, same pod: up to any agg
			{"tor0", far, half},  // other pod
			{"agg0", far, half},  // other pod: any core of its group
			{"agg0", half, 1},    // own pod: down to that tor
			{"core0", 0, 1},      // down to pod 0
			{"core0", far, 1},    // down to the last pod
			{fmt.Sprintf("tor%d", k*half-1), far, 1},
		} {
			hops := r.NextHops(node(c.sw), c.host)
			if len(hops) != c.want {
				t.Errorf("k=%d %s -> h%d: next hops %v, want %d of them", k, c.sw, c.host, hops, c.want)
			}
		}
		if got := r.NextHops(node("tor0"), node("tor1")); got != nil {
			t.Errorf("route to a switch: %v", got)
		}
		if got := r.NextHops(0, 1); got != nil {
			t.Errorf("route at a host: %v", got)
		}
	}
}

func TestLeafSpine(t *testing.T) {
	g, err := LeafSpine(4, 3, 5, 100e9, 400e9, 500)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	hosts, layers := countKinds(g)
	if hosts != 20 || layers["leaf"] != 4 || layers["spine"] != 3 || len(g.Links) != 20+12 {
		t.Fatalf("%d hosts, %v, %d links", hosts, layers, len(g.Links))
	}
	for _, l := range g.Links {
		hostLink := g.Nodes[l.A].Kind == Host || g.Nodes[l.B].Kind == Host
		if (hostLink && l.Bandwidth != 100e9) || (!hostLink && l.Bandwidth != 400e9) || l.Delay != 500 {
			t.Fatalf("link %+v", l)
		}
	}
	r := g.ShortestPaths()
	for pair, n := range allPairs(t, g, r) {
		want := 4
		if pair[0]/5 == pair[1]/5 {
			want = 2
		}
		if n != want {
			t.Fatalf("h%d -> h%d: %d links, want %d", pair[0], pair[1], n, want)
		}
	}
	leaf0, _ := g.Node("leaf0")
	if hops := r.NextHops(leaf0, 19); len(hops) != 3 {
		t.Errorf("leaf0 -> h19 over %v, want the 3 spines", hops)
	}
	for _, bad := range [][3]int{{0, 1, 1}, {2, 0, 1}, {1, 1, 0}} {
		if _, err := LeafSpine(bad[0], bad[1], bad[2], 1e9, 1e9, 0); err == nil {
			t.Errorf("LeafSpine%v accepted", bad)
		}
	}
	if _, err := LeafSpine(1, 0, 4, 1e9, 1e9, 0); err != nil {
		t.Errorf("one leaf without spines: %v", err)
	}
}

func TestRailOptimized(t *testing.T) {
	g, err := RailOptimized(4, 8, 2, 400e9, 800e9, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	hosts, layers := countKinds(g)
	if hosts != 32 || layers["rail"] != 8 || layers["spine"] != 2 {
		t.Fatalf("%d hosts, %v", hosts, layers)
	}
	h, ok := g.Node("m2n5")
	if !ok || g.Nodes[h].Machine != "m2" || h != 2*8+5 {
		t.Fatalf("m2n5: node %d %+v", h, g.Nodes[h])
	}
	rail5, _ := g.Node("rail5")
	if p := g.Ports(h)[0]; p.Peer != rail5 || p.PeerPort != 2 {
		t.Fatalf("m2n5 is on %s port %d, want rail5 port 2", g.Nodes[p.Peer].Name, p.PeerPort)
	}
	r := g.ShortestPaths()
	for pair, n := range allPairs(t, g, r) {
		want := 4 // across rails through a spine
		if pair[0]%8 == pair[1]%8 {
			want = 2 // same rail
		}
		if n != want {
			t.Fatalf("%s -> %s: %d links, want %d", g.Nodes[pair[0]].Name, g.Nodes[pair[1]].Name, n, want)
		}
	}
	if _, err := RailOptimized(4, 2, 0, 1e9, 1e9, 0); err == nil {
		t.Error("two rails without spines accepted")
	}
	if _, err := RailOptimized(4, 1, 0, 1e9, 1e9, 0); err != nil {
		t.Errorf("one rail without spines: %v", err)
	}
}

// TestOverrideLoop builds the misconfiguration that creates cyclic buffer
// dependency: agg0 and core0 each send h4's traffic to the other.
func TestOverrideLoop(t *testing.T) {
	g, _ := FatTree(4, 100e9, 1000)
	r := g.ShortestPaths()
	node := func(name string) int { n, _ := g.Node(name); return n }
	port := func(from, to string) int {
		for p, ref := range g.Ports(node(from)) {
			if ref.Peer == node(to) {
				return p
			}
		}
		t.Fatalf("%s is not cabled to %s", from, to)
		return -1
	}
	h4 := node("h4")
	before := r.NextHops(node("tor0"), h4)
	r.Override(node("agg0"), h4, []int{port("agg0", "core0")})
	r.Override(node("core0"), h4, []int{port("core0", "agg0")})
	if got := r.NextHops(node("core0"), h4); !reflect.DeepEqual(got, []int{0}) {
		t.Fatalf("core0 -> h4 over %v", got)
	}
	if got := r.NextHops(node("tor0"), h4); !reflect.DeepEqual(got, before) {
		t.Fatalf("tor0's route changed: %v", got)
	}
	_, _, err := r.PathLengths(g, 0, h4)
	if err == nil || !strings.Contains(err.Error(), "agg0 -> core0 -> agg0") {
		t.Fatalf("want a loop agg0 -> core0 -> agg0, got %v", err)
	}
	// Other destinations are untouched.
	if n, _, err := r.PathLengths(g, 0, node("h5")); err != nil || n != 6 {
		t.Fatalf("h0 -> h5: %d links, %v", n, err)
	}
	r.Override(node("tor0"), h4, nil)
	if _, _, err := r.PathLengths(g, 0, h4); err == nil || !strings.Contains(err.Error(), "tor0 has no route to h4") {
		t.Fatalf("removed route: %v", err)
	}
	for _, f := range []func(){
		func() { r.Override(h4, 0, nil) },
		func() { r.Override(node("tor0"), node("agg0"), nil) },
		func() { r.Override(node("tor0"), h4, []int{4}) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("bad Override did not panic")
				}
			}()
			f()
		}()
	}
}

func TestValidateErrors(t *testing.T) {
	base := func() *Graph {
		g := &Graph{}
		h0 := g.AddNode(Node{Name: "h0", Kind: Host})
		h1 := g.AddNode(Node{Name: "h1", Kind: Host})
		s := g.AddNode(Node{Name: "s0", Kind: Switch})
		g.AddLink(h0, s, 1e9, 10)
		g.AddLink(h1, s, 1e9, 10)
		return g
	}
	if err := base().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		edit  func(g *Graph)
		wants []string
	}{
		{"empty", func(g *Graph) { *g = Graph{} }, []string{"no nodes"}},
		{"duplicate", func(g *Graph) { g.Nodes[1].Name = "h0" }, []string{`node 1 is named "h0" like node 0`}},
		{"unnamed", func(g *Graph) { g.Nodes[2].Name = "" }, []string{"node 2 has no name"}},
		{"unknown node", func(g *Graph) { g.Links[1].B = 7 }, []string{"leads to node 7, which does not exist"}},
		{"self link", func(g *Graph) {
			s := g.AddNode(Node{Name: "s1", Kind: Switch})
			g.AddLink(2, s, 1e9, 0)
			g.AddLink(s, s, 1e9, 0)
		}, []string{`connects "s1" to itself`}},
		{"host with two links", func(g *Graph) { g.AddLink(0, 2, 1e9, 0) }, []string{`host "h0" has 2 links`}},
		{"host without links", func(g *Graph) { g.AddNode(Node{Name: "h9", Kind: Host}) }, []string{`host "h9" has 0 links`}},
		{"bandwidth", func(g *Graph) { g.Links[0].Bandwidth = 0 }, []string{"bandwidth 0 bit/s"}},
		{"delay", func(g *Graph) { g.Links[1].Delay = -5 }, []string{"negative delay -5 ns"}},
		{"ports", func(g *Graph) { g.Links[1].BPort = 0; g.Reindex() }, []string{`port 0 of "s0" is out of range or taken`}},
		{"kind", func(g *Graph) { g.Nodes[2].Kind = 9 }, []string{"unknown kind 9"}},
		{"no hosts", func(g *Graph) { g.Nodes[0].Kind, g.Nodes[1].Kind = Switch, Switch }, []string{"no hosts"}},
		{"disconnected", func(g *Graph) {
			s := g.AddNode(Node{Name: "s1", Kind: Switch})
			h := g.AddNode(Node{Name: "h2", Kind: Host})
			g.AddLink(h, s, 1e9, 0)
		}, []string{`disconnected: "s1" cannot be reached from "h0" (nor 1 other nodes)`}},
	} {
		g := base()
		c.edit(g)
		err := g.Validate()
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		var es Errors
		if !errors.As(err, &es) {
			t.Errorf("%s: %T is not Errors", c.name, err)
		}
		for _, w := range c.wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", c.name, err, w)
			}
		}
	}
}

// TestNumberPorts: a graph written as a literal gets its ports from the
// link order.
func TestNumberPorts(t *testing.T) {
	g := &Graph{
		Nodes: []Node{{Name: "h0"}, {Name: "h1"}, {Name: "s", Kind: Switch}},
		Links: []Link{{A: 2, B: 1, Bandwidth: 1e9}, {A: 0, B: 2, Bandwidth: 1e9}},
	}
	if err := g.Validate(); err == nil {
		t.Fatal("clashing ports accepted")
	}
	g.NumberPorts()
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	if p := g.Ports(2); p[0].Peer != 1 || p[1].Peer != 0 || p[1].PeerPort != 0 {
		t.Fatalf("ports of s: %+v", p)
	}
	if i, ok := g.Node("h1"); !ok || i != 1 {
		t.Fatalf("Node(h1) = %d %v", i, ok)
	}
}

func TestParse(t *testing.T) {
	for in, want := range map[string]float64{
		"100G": 100e9, "400Gbps": 400e9, "25Gb/s": 25e9, "1.5T": 1.5e12, "10M": 10e6, "100k": 100e3,
		"1e9": 1e9, "40 Gbit/s": 40e9, "56000": 56000,
	} {
		got, err := ParseBandwidth(in)
		if err != nil || got != want {
			t.Errorf("ParseBandwidth(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "G", "100GB", "fast", "-1G", "0", "NaN", "Inf", "1e400"} {
		if v, err := ParseBandwidth(in); err == nil {
			t.Errorf("ParseBandwidth(%q) = %v, want an error", in, v)
		}
	}
	for in, want := range map[string]int64{"1us": 1000, "500ns": 500, "1.5µs": 1500, "2ms": 2e6, "0": 0, "0s": 0} {
		got, err := ParseDelay(in)
		if err != nil || got != want {
			t.Errorf("ParseDelay(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "1", "-1us", "soon"} {
		if v, err := ParseDelay(in); err == nil {
			t.Errorf("ParseDelay(%q) = %v, want an error", in, v)
		}
	}
}

func BenchmarkNextHops(b *testing.B) {
	g, _ := FatTree(16, 100e9, 1000)
	r := g.ShortestPaths()
	sw, hosts := g.Switches(), g.Hosts()
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for i := 0; b.Loop(); i++ {
		n += len(r.NextHops(sw[i%len(sw)], hosts[i%len(hosts)]))
	}
	_ = n
}

func BenchmarkShortestPathsK16(b *testing.B) {
	g, _ := FatTree(16, 100e9, 1000)
	b.ReportAllocs()
	for b.Loop() {
		g.ShortestPaths()
	}
}
