package hawkeyesim

import (
	"testing"

	"github.com/rdma-appliance/appliance/bench/fabric"
	"github.com/rdma-appliance/appliance/bench/fabric/workload"
	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
)

// TestBaseMax: with BaseMax every flow is compared with the fabric's
// longest round trip (the paper's "maximum RTT, determined by the maximum
// hop count"), here h1 to h3 across three switches, also the flow that
// stays on one switch; BasePath compares each with its own path.
func TestBaseMax(t *testing.T) {
	n := build(t, "h1-s1", "h2-s1", "s1-s2", "s2-s3", "s3-h3")
	h1, h2, h3 := n.node(t, "h1"), n.node(t, "h2"), n.node(t, "h3")
	sim := newSim(t, n, fabric.DefaultConfig(),
		workload.Flow{Src: h1, Dst: h2, Size: 1 << 10, Prio: fabric.PrioData},
		workload.Flow{Src: h1, Dst: h3, Size: 1 << 10, Prio: fabric.PrioData})
	cfg := DefaultAgentConfig()
	short, long := PathRTT(sim, 0, cfg.FrameBytes), PathRTT(sim, 1, cfg.FrameBytes)
	if short <= 0 || long <= short {
		t.Fatalf("path RTTs %d (one switch) and %d (three)", short, long)
	}
	if m := MaxRTT(n.g, cfg.FrameBytes); m != long {
		t.Fatalf("MaxRTT %d, want the longest path's %d", m, long)
	}
	if hawkeyewire.WireOverhead != fabric.WireOverhead || hawkeyewire.MinFrame != fabric.MinFrame {
		t.Fatal("hawkeyewire's framing (the real agent's base) differs from the fabric's")
	}
	cfg.Base = BaseMax
	a, err := NewAgent(sim, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if a.Base(0) != long || a.Base(1) != long {
		t.Fatalf("BaseMax bases %d and %d, want %d for both", a.Base(0), a.Base(1), long)
	}
	cfg.Base = BasePath
	if a, err = NewAgent(sim, cfg); err != nil || a.Base(0) != short || a.Base(1) != long {
		t.Fatalf("BasePath bases %d and %d (%v), want %d and %d", a.Base(0), a.Base(1), err, short, long)
	}
	cfg.Base = BaseMax + 1
	if _, err := NewAgent(sim, cfg); err == nil {
		t.Fatal("an unknown base was accepted")
	}
}
