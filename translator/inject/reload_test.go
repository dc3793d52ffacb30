package inject

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/internal/mirror"
)

// TestReload: a changed spec's Update names what needs a restart; Apply
// installs new routes, weights and balancing on a running injector, and
// refuses an update that does not fit its ports without changing it.
func TestReload(t *testing.T) {
	base := Spec{Listen: ":1", Balance: "wrr", Ports: []PortSpec{
		{Name: "req", Role: "traffic", Port: "ring:a"}, {Name: "resp", Role: "traffic", Port: "ring:b"},
		{Name: "d0", Role: "mirror", Port: "ring:m0"}, {Name: "d1", Role: "mirror", Port: "ring:m1", Weight: 2}},
		Routes: []RouteSpec{{Prefix: "10.0.0.0/8", Port: "req", MAC: "02:00:00:00:00:01"}}}
	next := base
	next.Ports = append([]PortSpec(nil), base.Ports...)
	next.Ports[1].Port = "ring:c"
	if _, err := next.Update(&base); err == nil || !strings.Contains(err.Error(), "ports[1] (resp) changed") {
		t.Fatalf("port change: %v", err)
	}
	core := 3
	next = base
	next.Core = &core
	if _, err := next.Update(&base); err == nil || !strings.Contains(err.Error(), "core changed") {
		t.Fatalf("core change: %v", err)
	}
	next = base
	next.Balance = "flow-hash"
	next.Ports = append([]PortSpec(nil), base.Ports...)
	next.Ports[3].Weight = 5
	next.Routes = append(next.Routes, RouteSpec{Prefix: "10.9.0.0/16", Port: "resp", MAC: "02:00:00:00:00:02"})
	u, err := next.Update(&base)
	if err != nil {
		t.Fatal(err)
	}
	if u.Balance != BalanceFlowHash || len(u.Routes) != 2 || fmt.Sprint(u.Weights) != "[1 5]" || u.RewritePort != mirror.DefaultRewritePort {
		t.Fatalf("update %+v", u)
	}

	id := time.Now().UnixNano()
	l := ring.NewLink(fmt.Sprintf("rl%d", id), ring.Config{RingSize: 64})
	m := ring.NewLink(fmt.Sprintf("rm%d", id), ring.Config{RingSize: 64})
	for _, p := range []dpdk.Port{l.A(), l.B(), m.A(), m.B()} {
		defer p.Close()
	}
	pool, err := dpdk.NewPool(fmt.Sprintf("rl%d", id), 64, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	in, err := New(Config{Traffic: []TrafficPort{{Port: l.A()}, {Port: l.B()}}, Mirrors: []MirrorPort{{Port: m.A()}, {Port: m.B(), Weight: 2}},
		Routes: []Route{{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Port: 0}}, Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	dst := binary.BigEndian.Uint32([]byte{10, 9, 1, 1})
	if r := in.route4(dst); r == nil || r.Port != 0 {
		t.Fatalf("before: %+v", r)
	}
	if err := in.Apply(u); err != nil {
		t.Fatal(err)
	}
	if r := in.route4(dst); r == nil || r.Port != 1 {
		t.Fatalf("after: %+v", r)
	}
	if in.cfg.Balance != BalanceFlowHash || in.cfg.Mirrors[1].Weight != 5 {
		t.Fatalf("config %+v", in.cfg)
	}
	// Five of six copies go to the second mirror now.
	n := 0
	for range 600 {
		if in.wrr.Next() == 1 {
			n++
		}
	}
	if n != 500 {
		t.Fatalf("%d of 600 to weight 5 of 6", n)
	}
	bad := u
	bad.Weights = []int{1}
	bad.Routes = nil
	if err := in.Apply(bad); err == nil {
		t.Fatal("one weight for two mirrors applied")
	}
	if r := in.route4(dst); r == nil || r.Port != 1 {
		t.Fatalf("a refused update changed the routes: %+v", r)
	}
}
