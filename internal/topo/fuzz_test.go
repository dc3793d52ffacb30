package topo

import (
	"testing"

	"github.com/rdma-appliance/appliance/internal/spec"
)

// FuzzDecodeSpec: a topology file is accepted or refused with spec.Errors
// naming its lines and keys, never a panic; what is accepted builds
// (validation and Build agree) into a graph with hosts and routes.
func FuzzDecodeSpec(f *testing.F) {
	f.Add("kind: fat-tree\nk: 4\n")
	f.Add("kind: leaf-spine\nleaves: 2\nspines: 2\nhosts-per-leaf: 3\nbandwidth: 25G\nfabric-bandwidth: 100G\ndelay: 2us\n")
	f.Add("kind: rail-optimized\nmachines: 3\nnics: 2\nspines: 1\n")
	f.Add(explicitYAML)
	f.Add("kind: fat-tree\nk: 3\nbandwidth: 1GB\n")
	f.Fuzz(func(t *testing.T, yml string) {
		if len(yml) > 4096 {
			return // topology files are a few lines; the generators' sizes are bounded by their keys
		}
		s, err := DecodeSpec("topo.yml", []byte(yml))
		if err != nil {
			if err := spec.CheckRefusal(err, "topo.yml"); err != nil {
				t.Fatal(err)
			}
			return
		}
		// The generated fabrics up to their bounds take seconds to
		// route; the fuzzer's time goes further on small ones.
		if s.K > 16 || s.Leaves*s.Spines*s.HostsPerLeaf > 4096 || s.Machines*s.NICs*max(s.Spines, 1) > 4096 {
			return
		}
		g, r, err := s.Build()
		if err != nil {
			t.Fatalf("accepted but does not build: %v", err)
		}
		if g == nil || r == nil || len(g.Hosts()) == 0 {
			t.Fatalf("accepted an empty topology: %+v", s)
		}
	})
}
