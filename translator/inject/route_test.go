package inject

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/ring"
)

// TestRoute4: the IPv4 masks pick the route netip.Prefix.Contains picks,
// with unmasked, default, host and IPv4-mapped IPv6 prefixes in the table.
func TestRoute4(t *testing.T) {
	id := time.Now().UnixNano()
	l := ring.NewLink(fmt.Sprintf("rt%d", id), ring.Config{RingSize: 64})
	defer l.A().Close()
	defer l.B().Close()
	pool, err := dpdk.NewPool(fmt.Sprintf("rt%d", id), 64, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var routes []Route
	for i, p := range []string{"10.1.2.3/8", "10.1.0.0/16", "10.1.2.3/32", "::ffff:10.0.0.0/104", "::/0",
		"192.168.0.0/23", "0.0.0.0/0", "10.1.128.0/17"} {
		routes = append(routes, Route{Prefix: netip.MustParsePrefix(p), Port: i % 2})
	}
	in, err := New(Config{Traffic: []TrafficPort{{Port: l.A()}, {Port: l.B()}}, Routes: routes, Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	check := func(a [4]byte) {
		t.Helper()
		want := in.route(netip.AddrFrom4(a))
		if got := in.route4(binary.BigEndian.Uint32(a[:])); got != want {
			t.Fatalf("%v: route4 %v, route %v", netip.AddrFrom4(a), got, want)
		}
	}
	for _, s := range []string{"10.1.2.3", "10.1.2.4", "10.1.200.1", "10.2.0.1", "192.168.1.255", "192.168.2.0", "8.8.8.8", "0.0.0.0"} {
		check(netip.MustParseAddr(s).As4())
	}
	for range 10000 {
		var a [4]byte
		binary.BigEndian.PutUint32(a[:], r.Uint32())
		switch r.IntN(3) {
		case 0:
			a[0] = 10
		case 1:
			a[0], a[1] = 192, 168
		}
		check(a)
	}
	// Without a default route, addresses outside every prefix have none.
	in2, err := New(Config{Traffic: []TrafficPort{{Port: l.A()}, {Port: l.B()}}, Routes: routes[:3], Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	if in2.route4(binary.BigEndian.Uint32([]byte{11, 0, 0, 1})) != nil {
		t.Fatal("11.0.0.1 routed")
	}
}
