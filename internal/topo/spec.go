package topo

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/internal/spec"
)

// Spec is a topology as written in YAML: a generator with its sizes, or an
// explicit list of nodes and links, plus static routes that override the
// shortest paths. For example
//
//	kind: fat-tree
//	k: 4
//	bandwidth: 100G
//	delay: 1us
//	routes:                       # a misconfiguration that loops
//	  - {switch: agg0, host: h0, via: [core0]}
//
// or
//
//	kind: explicit
//	bandwidth: 100G               # default for links that do not say
//	nodes:
//	  - {name: h0, kind: host}
//	  - {name: s0, kind: switch, layer: tor}
//	links:
//	  - {a: h0, b: s0, delay: 2us}
type Spec struct {
	// Kind is fat-tree, leaf-spine, rail-optimized or explicit.
	Kind string `yaml:"kind"`
	// K is the fat-tree's arity.
	K int `yaml:"k"`
	// Leaves, Spines and HostsPerLeaf size a leaf-spine; Spines also the
	// spines of a rail-optimized cluster.
	Leaves       int `yaml:"leaves"`
	Spines       int `yaml:"spines"`
	HostsPerLeaf int `yaml:"hosts-per-leaf"`
	// Machines and NICs (RNICs per machine, so rails) size a
	// rail-optimized cluster.
	Machines int `yaml:"machines"`
	NICs     int `yaml:"nics"`
	// Bandwidth is the host links' rate ("100G", "400Gbps", "25Gb/s";
	// default 100G), FabricBandwidth the switch-to-switch links' (default
	// Bandwidth). A fat-tree has one rate throughout: Bandwidth.
	Bandwidth       string `yaml:"bandwidth"`
	FabricBandwidth string `yaml:"fabric-bandwidth"`
	// Delay is every link's propagation delay ("1us", "500ns"; default
	// 1us).
	Delay string `yaml:"delay"`

	Nodes  []NodeSpec  `yaml:"nodes"`
	Links  []LinkSpec  `yaml:"links"`
	Routes []RouteSpec `yaml:"routes"`
}

// NodeSpec is a node of an explicit graph.
type NodeSpec struct {
	Name    string `yaml:"name"`
	Kind    string `yaml:"kind"` // host or switch
	Layer   string `yaml:"layer"`
	Machine string `yaml:"machine"`
}

// LinkSpec is a link of an explicit graph; empty Bandwidth and Delay take
// the Spec's.
type LinkSpec struct {
	A         string `yaml:"a"`
	B         string `yaml:"b"`
	Bandwidth string `yaml:"bandwidth"`
	Delay     string `yaml:"delay"`
}

// RouteSpec makes Switch send traffic for Host to the neighbours named in
// Via (every link to each of them is in the ECMP set); an empty Via leaves
// the switch without a route to the host.
type RouteSpec struct {
	Switch string   `yaml:"switch"`
	Host   string   `yaml:"host"`
	Via    []string `yaml:"via"`
}

// Kinds of Spec.
const (
	KindFatTree       = "fat-tree"
	KindLeafSpine     = "leaf-spine"
	KindRailOptimized = "rail-optimized"
	KindExplicit      = "explicit"
)

// LoadSpec reads and validates a topology file; every problem is reported
// with its file, line and key.
func LoadSpec(path string) (Spec, error) {
	return spec.LoadAs[Spec](path)
}

// DecodeSpec is LoadSpec for YAML held in memory; name is used in errors.
func DecodeSpec(name string, data []byte) (Spec, error) {
	return spec.DecodeAs[Spec](name, data)
}

// Validate records every problem of s in doc, building the topology to
// find them (so a disconnected graph or a route via a node that is not a
// neighbour is reported at its line).
func (s *Spec) Validate(doc *spec.Doc) { s.ValidateAt(doc, "") }

// ValidateAt is Validate for a Spec embedded in a larger document under
// the key path prefix (e.g. "topology"), so errors name the right keys.
func (s *Spec) ValidateAt(doc *spec.Doc, prefix string) {
	s.build(func(key, format string, args ...any) {
		if prefix != "" {
			if key == "" {
				key = prefix
			} else {
				key = prefix + "." + key
			}
		}
		doc.Errorf(key, format, args...)
	})
}

// Build turns the Spec into a graph and its routes: the generator's or the
// explicit graph, shortest paths, then the static routes. The error lists
// every problem as "key: message".
func (s *Spec) Build() (*Graph, *Routes, error) {
	var errs []error
	g, r := s.build(func(key, format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		if key != "" {
			msg = key + ": " + msg
		}
		errs = append(errs, errors.New("topo: "+msg))
	})
	if len(errs) > 0 {
		return nil, nil, errors.Join(errs...)
	}
	return g, r, nil
}

type reportFunc func(key, format string, args ...any)

func (s *Spec) build(report reportFunc) (*Graph, *Routes) {
	bw, fabric, delay := 100e9, 0.0, int64(1000)
	ok := true
	if s.Bandwidth != "" {
		v, err := ParseBandwidth(s.Bandwidth)
		if err != nil {
			report("bandwidth", "%v", err)
			ok = false
		}
		bw = v
	}
	fabric = bw
	if s.FabricBandwidth != "" {
		v, err := ParseBandwidth(s.FabricBandwidth)
		if err != nil {
			report("fabric-bandwidth", "%v", err)
			ok = false
		}
		fabric = v
	}
	if s.Delay != "" {
		v, err := ParseDelay(s.Delay)
		if err != nil {
			report("delay", "%v", err)
			ok = false
		}
		delay = v
	}
	// Keys that belong to another kind are mistakes, not noise: a "k"
	// under leaf-spine means the author expected it to matter.
	only := func(key string, set bool, kinds ...string) {
		if !set {
			return
		}
		for _, k := range kinds {
			if s.Kind == k {
				return
			}
		}
		report(key, "only for kind %s", strings.Join(kinds, " or "))
		ok = false
	}
	only("k", s.K != 0, KindFatTree)
	only("leaves", s.Leaves != 0, KindLeafSpine)
	only("hosts-per-leaf", s.HostsPerLeaf != 0, KindLeafSpine)
	only("spines", s.Spines != 0, KindLeafSpine, KindRailOptimized)
	only("machines", s.Machines != 0, KindRailOptimized)
	only("nics", s.NICs != 0, KindRailOptimized)
	only("fabric-bandwidth", s.FabricBandwidth != "", KindLeafSpine, KindRailOptimized)
	only("nodes", s.Nodes != nil, KindExplicit)
	only("links", s.Links != nil, KindExplicit)

	var g *Graph
	var err error
	switch s.Kind {
	case KindFatTree:
		if s.K == 0 {
			// An absent key has no line: point at the kind that needs it.
			report("kind", "a fat-tree needs k, its arity (even, e.g. 4)")
			return nil, nil
		}
		if !ok {
			return nil, nil
		}
		if g, err = FatTree(s.K, bw, delay); err != nil {
			report("k", "%v", trim(err))
		}
	case KindLeafSpine:
		if !ok {
			return nil, nil
		}
		if g, err = LeafSpine(s.Leaves, s.Spines, s.HostsPerLeaf, bw, fabric, delay); err != nil {
			report(s.sizeKey("leaves", "spines", "hosts-per-leaf"), "%v", trim(err))
		}
	case KindRailOptimized:
		if !ok {
			return nil, nil
		}
		if g, err = RailOptimized(s.Machines, s.NICs, s.Spines, bw, fabric, delay); err != nil {
			report(s.sizeKey("machines", "nics", "spines"), "%v", trim(err))
		}
	case KindExplicit:
		g = s.explicit(bw, delay, report)
		if !ok {
			return nil, nil
		}
	case "":
		report("kind", "missing: one of %s, %s, %s, %s", KindFatTree, KindLeafSpine, KindRailOptimized, KindExplicit)
	default:
		report("kind", "%q: want one of %s, %s, %s, %s", s.Kind, KindFatTree, KindLeafSpine, KindRailOptimized, KindExplicit)
	}
	if g == nil {
		return nil, nil
	}
	if err := g.Validate(); err != nil {
		var es Errors
		if !errors.As(err, &es) {
			report("", "%v", err)
			return nil, nil
		}
		for _, e := range es {
			key := "kind"
			if s.Kind == KindExplicit {
				switch {
				case e.Link >= 0:
					key = fmt.Sprintf("links[%d]", e.Link)
				case e.Node >= 0:
					key = fmt.Sprintf("nodes[%d].name", e.Node)
				default:
					key = "nodes"
				}
			}
			report(key, "%s", trim(e))
		}
		return nil, nil
	}
	r := g.ShortestPaths()
	if !s.routes(g, r, report) {
		return nil, nil
	}
	return g, r
}

// sizeKey picks the key a generator's size error most likely refers to:
// the first one not positive, else the first. A key left out (zero) has
// no line to point at, so the error goes to "kind", the block that needs
// it; the generator's message names the missing size.
func (s *Spec) sizeKey(keys ...string) string {
	vals := map[string]int{"leaves": s.Leaves, "spines": s.Spines, "hosts-per-leaf": s.HostsPerLeaf,
		"machines": s.Machines, "nics": s.NICs}
	for _, k := range keys {
		if vals[k] < 0 {
			return k
		}
		if vals[k] == 0 && !(k == "spines" && s.Kind == KindRailOptimized && s.NICs == 1) {
			return "kind"
		}
	}
	return keys[0]
}

func trim(err error) string { return strings.TrimPrefix(err.Error(), "topo: ") }

func (s *Spec) explicit(bw float64, delay int64, report reportFunc) *Graph {
	if len(s.Nodes) == 0 {
		report("nodes", "an explicit topology needs nodes")
		return nil
	}
	g := &Graph{}
	ok := true
	for i, n := range s.Nodes {
		key := fmt.Sprintf("nodes[%d]", i)
		var kind Kind
		switch n.Kind {
		case "host":
			kind = Host
			if n.Layer != "" {
				report(key+".layer", "a host has no layer")
				ok = false
			}
		case "switch":
			kind = Switch
			if n.Machine != "" {
				report(key+".machine", "only hosts belong to machines")
				ok = false
			}
		case "":
			report(key+".kind", "missing: host or switch")
			ok = false
		default:
			report(key+".kind", "%q: want host or switch", n.Kind)
			ok = false
		}
		if n.Name == "" {
			report(key+".name", "missing")
			ok = false
		} else if j, dup := g.Node(n.Name); dup {
			report(key+".name", "%q is also nodes[%d]", n.Name, j)
			ok = false
		}
		g.AddNode(Node{Name: n.Name, Kind: kind, Layer: n.Layer, Machine: n.Machine})
	}
	if len(s.Links) == 0 {
		report("links", "an explicit topology needs links")
		return nil
	}
	for i, l := range s.Links {
		key := fmt.Sprintf("links[%d]", i)
		a, aok := g.Node(l.A)
		b, bok := g.Node(l.B)
		for _, e := range [2]struct {
			k, v string
			ok   bool
		}{{"a", l.A, aok}, {"b", l.B, bok}} {
			switch {
			case e.v == "":
				report(key+"."+e.k, "missing: a node name")
			case !e.ok:
				report(key+"."+e.k, "unknown node %q", e.v)
			}
		}
		if !aok || !bok {
			ok = false
			continue
		}
		if a == b {
			report(key, "connects %q to itself", l.A)
			ok = false
			continue
		}
		lbw, ld := bw, delay
		if l.Bandwidth != "" {
			v, err := ParseBandwidth(l.Bandwidth)
			if err != nil {
				report(key+".bandwidth", "%v", err)
				ok = false
			}
			lbw = v
		}
		if l.Delay != "" {
			v, err := ParseDelay(l.Delay)
			if err != nil {
				report(key+".delay", "%v", err)
				ok = false
			}
			ld = v
		}
		g.AddLink(a, b, lbw, ld)
	}
	if !ok {
		return nil
	}
	return g
}

// routes applies the static routes, reporting names that are not a
// switch, a host or a neighbour.
func (s *Spec) routes(g *Graph, r *Routes, report reportFunc) bool {
	allOK := true
	for i, rt := range s.Routes {
		ok := true
		key := fmt.Sprintf("routes[%d]", i)
		sw, found := g.Node(rt.Switch)
		switch {
		case rt.Switch == "":
			report(key+".switch", "missing")
			ok = false
		case !found:
			report(key+".switch", "unknown node %q", rt.Switch)
			ok = false
		case g.Nodes[sw].Kind != Switch:
			report(key+".switch", "%q is a host; only switches route", rt.Switch)
			ok = false
		}
		h, hfound := g.Node(rt.Host)
		switch {
		case rt.Host == "":
			report(key+".host", "missing")
			ok = false
		case !hfound:
			report(key+".host", "unknown node %q", rt.Host)
			ok = false
		case g.Nodes[h].Kind != Host:
			report(key+".host", "%q is a switch; routes lead to hosts", rt.Host)
			ok = false
		}
		if !ok {
			continue
		}
		var ports []int
		for j, via := range rt.Via {
			n := 0
			for port, p := range g.Ports(sw) {
				if g.Nodes[p.Peer].Name == via {
					ports = append(ports, port)
					n++
				}
			}
			if n == 0 {
				report(fmt.Sprintf("%s.via[%d]", key, j), "%q is not a neighbour of %s", via, rt.Switch)
				ok = false
			}
		}
		if ok {
			r.Override(sw, h, ports)
		}
		allOK = allOK && ok
	}
	return allOK
}

// ParseBandwidth reads a link rate in bits per second: a number with an
// optional SI prefix (k, M, G, T) and an optional unit (bps, b/s, bit/s),
// as in "100G", "400Gbps", "25Gb/s", "1e9". Bytes ("GB") are refused, not
// guessed.
func ParseBandwidth(s string) (float64, error) {
	in := strings.TrimSpace(s)
	t := in
	for _, unit := range []string{"bit/s", "bps", "b/s"} {
		if strings.HasSuffix(t, unit) {
			t = strings.TrimSuffix(t, unit)
			break
		}
	}
	mult := 1.0
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'k', 'K':
			mult = 1e3
		case 'M':
			mult = 1e6
		case 'G':
			mult = 1e9
		case 'T':
			mult = 1e12
		}
		if mult != 1 {
			t = t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("bandwidth %q: want a rate such as 100G, 400Gbps or 25Gb/s", in)
	}
	v *= mult
	if v <= 0 || math.IsInf(v, 0) {
		return 0, fmt.Errorf("bandwidth %q: want a positive rate", in)
	}
	return v, nil
}

// ParseDelay reads a propagation delay as a Go duration ("1us", "500ns",
// "1.5µs") into nanoseconds; a bare 0 is allowed, other numbers need a
// unit.
func ParseDelay(s string) (int64, error) {
	in := strings.TrimSpace(s)
	if in == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(in)
	if err != nil {
		return 0, fmt.Errorf("delay %q: want a duration such as 1us or 500ns", in)
	}
	if d < 0 {
		return 0, fmt.Errorf("delay %q: negative", in)
	}
	return int64(d), nil
}
