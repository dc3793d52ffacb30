package topo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/internal/spec"
)

func TestSpecGenerators(t *testing.T) {
	for _, c := range []struct {
		yaml  string
		hosts int
		links int
	}{
		{"kind: fat-tree\nk: 4\n", 16, 48},
		{"kind: leaf-spine\nleaves: 2\nspines: 2\nhosts-per-leaf: 3\nbandwidth: 25G\nfabric-bandwidth: 100G\n", 6, 10},
		{"kind: rail-optimized\nmachines: 3\nnics: 2\nspines: 1\n", 6, 8},
	} {
		s, err := DecodeSpec("topo.yml", []byte(c.yaml))
		if err != nil {
			t.Fatalf("%q: %v", c.yaml, err)
		}
		g, r, err := s.Build()
		if err != nil {
			t.Fatal(err)
		}
		if len(g.Hosts()) != c.hosts || len(g.Links) != c.links || r == nil {
			t.Errorf("%q: %d hosts, %d links", c.yaml, len(g.Hosts()), len(g.Links))
		}
	}
	s, _ := DecodeSpec("topo.yml", []byte("kind: leaf-spine\nleaves: 2\nspines: 2\nhosts-per-leaf: 3\nbandwidth: 25G\nfabric-bandwidth: 100G\ndelay: 2us\n"))
	g, _, _ := s.Build()
	if g.Links[0].Bandwidth != 25e9 || g.Links[len(g.Links)-1].Bandwidth != 100e9 || g.Links[0].Delay != 2000 {
		t.Errorf("links %+v ... %+v", g.Links[0], g.Links[len(g.Links)-1])
	}
	// Defaults: 100G, 1us.
	s, _ = DecodeSpec("topo.yml", []byte("kind: fat-tree\nk: 2\n"))
	g, _, _ = s.Build()
	if g.Links[0].Bandwidth != 100e9 || g.Links[0].Delay != 1000 {
		t.Errorf("default link %+v", g.Links[0])
	}
}

const explicitYAML = `kind: explicit
bandwidth: 100G
delay: 1us
nodes:
  - {name: h0, kind: host, machine: m0}
  - {name: h1, kind: host}
  - {name: s0, kind: switch, layer: tor}
  - {name: s1, kind: switch, layer: tor}
  - {name: s2, kind: switch, layer: spine}
links:
  - {a: h0, b: s0}
  - {a: h1, b: s1, bandwidth: 25G, delay: 3us}
  - {a: s0, b: s1}
  - {a: s0, b: s2}
  - {a: s1, b: s2}
routes:
  # s0 would go straight to s1; send h1's traffic round by s2, and
  # s2 back to s0: a loop between s0 and s2.
  - {switch: s0, host: h1, via: [s2]}
  - {switch: s2, host: h1, via: [s0]}
`

func TestSpecExplicit(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "loop.yml")
	if err := os.WriteFile(path, []byte(explicitYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := LoadSpec(path)
	if err != nil {
		t.Fatal(err)
	}
	g, r, err := s.Build()
	if err != nil {
		t.Fatal(err)
	}
	h0, _ := g.Node("h0")
	h1, _ := g.Node("h1")
	s0, _ := g.Node("s0")
	if g.Nodes[h0].Machine != "m0" || g.Nodes[s0].Layer != "tor" {
		t.Errorf("nodes %+v", g.Nodes)
	}
	if l := g.Links[1]; l.Bandwidth != 25e9 || l.Delay != 3000 {
		t.Errorf("link 1 %+v", l)
	}
	_, _, err = r.PathLengths(g, h0, h1)
	if err == nil || !strings.Contains(err.Error(), "s0 -> s2 -> s0") {
		t.Fatalf("want the s0 - s2 loop, got %v", err)
	}
	// The other direction is untouched: h1 -> s1 -> s0 -> h0.
	if n, _, err := r.PathLengths(g, h1, h0); err != nil || n != 3 {
		t.Fatalf("h1 -> h0: %d links, %v", n, err)
	}
}

// TestSpecErrors: every problem names file:line: key.
func TestSpecErrors(t *testing.T) {
	for _, c := range []struct {
		name, yaml string
		wants      []string
	}{
		{"unknown key", "kind: fat-tree\nk: 4\nbandwith: 100G\n", []string{`t.yml:3: bandwith: unknown key (did you mean "bandwidth"?)`}},
		{"odd k", "kind: fat-tree\nk: 5\n", []string{"t.yml:2: k: fat-tree k=5, want an even number >= 2"}},
		{"missing k", "kind: fat-tree\n", []string{"t.yml:1: kind: a fat-tree needs k"}},
		{"no kind", "k: 4\n", []string{"t.yml: kind: missing: one of", "t.yml:1: k: only for kind fat-tree"}},
		{"bad kind", "kind: torus\n", []string{`t.yml:1: kind: "torus": want one of`}},
		{"foreign key", "kind: leaf-spine\nleaves: 2\nspines: 1\nhosts-per-leaf: 2\nk: 4\n", []string{"t.yml:5: k: only for kind fat-tree"}},
		{"bandwidth", "kind: fat-tree\nk: 4\nbandwidth: 100GB\n", []string{`t.yml:3: bandwidth: bandwidth "100GB": want a rate`}},
		{"delay", "kind: fat-tree\nk: 4\ndelay: 5\n", []string{`t.yml:3: delay: delay "5": want a duration`}},
		{"leaf-spine size", "kind: leaf-spine\nleaves: 2\nhosts-per-leaf: 2\n", []string{"t.yml:1: kind: leaf-spine with 0 spines"}},
		{"negative size", "kind: leaf-spine\nleaves: 2\nspines: -1\nhosts-per-leaf: 2\n", []string{"t.yml:3: spines: leaf-spine with -1 spines"}},
		{"wrong type", "kind: fat-tree\nk: four\n", []string{"t.yml:2: k: cannot unmarshal"}},
		{"explicit", `kind: explicit
nodes:
  - {name: h0, kind: host}
  - {name: h0, kind: host}
  - {name: s0, kind: router}
  - {name: s1, kind: switch}
links:
  - {a: h0, b: s9}
  - {a: s1, b: s1}
  - {a: h0, b: s1, bandwidth: fast}
`, []string{
			`t.yml:4: nodes[1].name: "h0" is also nodes[0]`,
			`t.yml:5: nodes[2].kind: "router": want host or switch`,
			`t.yml:8: links[0].b: unknown node "s9"`,
			`t.yml:9: links[1]: connects "s1" to itself`,
			`t.yml:10: links[2].bandwidth: bandwidth "fast"`,
		}},
		{"disconnected", `kind: explicit
nodes:
  - {name: h0, kind: host}
  - {name: h1, kind: host}
  - {name: s0, kind: switch}
  - {name: s1, kind: switch}
links:
  - {a: h0, b: s0}
  - {a: h1, b: s1}
`, []string{`t.yml:4: nodes[1].name: the topology is disconnected: "h1" cannot be reached from "h0"`}},
		{"host links", `kind: explicit
nodes:
  - {name: h0, kind: host}
  - {name: s0, kind: switch}
  - {name: s1, kind: switch}
links:
  - {a: h0, b: s0}
  - {a: h0, b: s1}
`, []string{`nodes[0].name: host "h0" has 2 links`}},
		{"routes", `kind: fat-tree
k: 4
routes:
  - {switch: agg0, host: h4, via: [core0, tor9, h0]}
  - {switch: h0, host: h4, via: []}
  - {switch: tor0, host: agg1, via: []}
  - {switch: tor0, host: h99}
`, []string{
			`t.yml:4: routes[0].via[1]: "tor9" is not a neighbour of agg0`,
			`t.yml:4: routes[0].via[2]: "h0" is not a neighbour of agg0`,
			`t.yml:5: routes[1].switch: "h0" is a host; only switches route`,
			`t.yml:6: routes[2].host: "agg1" is a switch`,
			`t.yml:7: routes[3].host: unknown node "h99"`,
		}},
	} {
		_, err := DecodeSpec("t.yml", []byte(c.yaml))
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		for _, w := range c.wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error\n%v\ndoes not say\n%s", c.name, err, w)
			}
		}
	}
}

// TestSpecEmbedded: a scenario file that holds the topology under a key
// gets errors at the full key path.
func TestSpecEmbedded(t *testing.T) {
	var sc scenario
	err := spec.DecodeValid("sc.yml", []byte("name: x\ntopology:\n  kind: fat-tree\n  k: 3\n"), &sc)
	if err == nil || !strings.Contains(err.Error(), "sc.yml:4: topology.k: fat-tree k=3") {
		t.Fatalf("got %v", err)
	}
	// Build without Validate reports keys without lines.
	s := Spec{Kind: "fat-tree", K: 3}
	if _, _, err := s.Build(); err == nil || !strings.Contains(err.Error(), "topo: k: fat-tree k=3") {
		t.Fatalf("Build: %v", err)
	}
}

type scenario struct {
	Name     string `yaml:"name"`
	Topology Spec   `yaml:"topology"`
}

func (s *scenario) Validate(doc *spec.Doc) { s.Topology.ValidateAt(doc, "topology") }
