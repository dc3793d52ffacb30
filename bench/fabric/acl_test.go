package fabric

import (
	"net/netip"
	"testing"

	"github.com/rdma-appliance/appliance/bench/fabric/workload"
	"github.com/rdma-appliance/appliance/internal/topo"
)

// TestACL: an ACL denies what its first matching rule denies, in the
// direction and time it is bound to, and nothing else.
func TestACL(t *testing.T) {
	// The rig's probes go m0n0 -> rail0 -> spine0 -> rail1 -> m0n1.
	g, err := topo.RailOptimized(2, 2, 1, gbps100, gbps100, 1000)
	if err != nil {
		t.Fatal(err)
	}
	dst := netip.PrefixFrom(HostAddr(host(g, "m0n1")), 32)
	src := netip.PrefixFrom(HostAddr(host(g, "m0n0")), 32)
	for _, tc := range []struct {
		name string
		acl  ACL
		lost int
	}{
		{"egress to the RNIC", ACL{Switch: "rail1", Port: "m0n1", Egress: true, Rules: []ACLRule{{Dst: dst, Deny: true}}}, 100},
		{"ingress from the sender", ACL{Switch: "rail0", Port: "m0n0", Rules: []ACLRule{{Src: src, Deny: true}}}, 100},
		// Bound to the ingress of the RNIC's port, a rule on its
		// address as destination sees nothing.
		{"wrong direction", ACL{Switch: "rail1", Port: "m0n1", Rules: []ACLRule{{Dst: dst, Deny: true}}}, 0},
		{"other class", ACL{Switch: "rail1", Port: "spine0", Rules: []ACLRule{{Dst: dst, Classes: 1 << PrioControl, Deny: true}}}, 0},
		{"RDMA class", ACL{Switch: "rail1", Port: "spine0", Rules: []ACLRule{{Dst: dst, Classes: 1 << PrioData, Deny: true}}}, 100},
		{"permit first", ACL{Switch: "rail1", Port: "spine0", Rules: []ACLRule{{Src: src}, {Deny: true}}}, 0},
		{"deny a subnet", ACL{Switch: "spine0", Port: "rail0", Rules: []ACLRule{{Dst: netip.MustParsePrefix("10.0.0.0/24"), Deny: true}}}, 100},
		{"pushed at 500 us", ACL{Switch: "rail1", Port: "spine0", Start: 500_000, Rules: []ACLRule{{Dst: dst, Deny: true}}}, 50},
	} {
		r := newProbeRig(t, DefaultConfig())
		if err := r.s.AddACL(tc.acl); err != nil {
			t.Fatal(err)
		}
		run(t, r.s, 2e6)
		if lost := 100 - r.got; lost != tc.lost || r.s.FaultStats().ACL != uint64(tc.lost) {
			t.Errorf("%s: %d probes lost, %d denied, want %d", tc.name, lost, r.s.FaultStats().ACL, tc.lost)
		}
	}
	r := newProbeRig(t, DefaultConfig())
	for _, bad := range []ACL{{Switch: "m0n0", Port: "rail0", Rules: []ACLRule{{Deny: true}}},
		{Switch: "rail0", Port: "m0n1", Rules: []ACLRule{{Deny: true}}}, {Switch: "rail0", Port: "m0n0"}} {
		if err := r.s.AddACL(bad); err == nil {
			t.Errorf("ACL %+v accepted", bad)
		}
	}
}

// TestSwitchHeadroom: one switch configured with too little PFC headroom
// for its cables (or without PFC) drops frames under an incast that its
// correctly configured twin absorbs losslessly. The senders have no rate
// control, so PFC alone holds them: with DCQCN, ECN keeps these queues
// far below the PFC threshold and any headroom is enough.
func TestSwitchHeadroom(t *testing.T) {
	g, err := topo.RailOptimized(4, 1, 0, gbps100, gbps100, 1000)
	if err != nil {
		t.Fatal(err)
	}
	drops := func(sw map[string]SwitchConfig) uint64 {
		cfg := DefaultConfig()
		cfg.Switches = sw
		cfg.Host.DCQCN = false
		var flows []workload.Flow
		for k := 1; k < 4; k++ {
			flows = append(flows, workload.Flow{ID: k, Src: host(g, "m0n0") + k, Dst: host(g, "m0n0"), Size: 2 << 20})
		}
		s, err := New(g, g.ShortestPaths(), flows, cfg)
		if err != nil {
			t.Fatal(err)
		}
		res := run(t, s, 1e8)
		for _, f := range res.Flows {
			if !f.Done {
				t.Fatalf("flow %+v did not finish", f)
			}
		}
		return res.Stats.Drops
	}
	if d := drops(nil); d != 0 {
		t.Fatalf("default headroom: %d drops", d)
	}
	small := DefaultConfig().Switch
	small.Headroom = 1 << 10
	if d := drops(map[string]SwitchConfig{"rail0": small}); d == 0 {
		t.Fatal("1 KB headroom on 1 us cables: no drops")
	}
	off := DefaultConfig().Switch
	off.Lossless = 0
	if d := drops(map[string]SwitchConfig{"rail0": off}); d == 0 {
		t.Fatal("PFC off: no drops")
	}
	cfg := DefaultConfig()
	cfg.Switches = map[string]SwitchConfig{"m0n0": small}
	if _, err := New(g, g.ShortestPaths(), nil, cfg); err == nil {
		t.Fatal("configuration for a host accepted as a switch's")
	}
}
