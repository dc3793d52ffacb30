package inject

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/mirror"
)

// TestEntryMap checks the open-addressed entry map against a Go map,
// including key 0, replaced keys and growth.
func TestEntryMap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var m entryMap
	want := map[uint64]int32{}
	if _, ok := m.get(0); ok {
		t.Fatal("empty map has key 0")
	}
	for i := range 5000 {
		k := r.Uint64() & (1<<40 - 1)
		if i%7 == 0 {
			k = uint64(r.IntN(64)) // small keys, often repeated
		}
		m.set(k, int32(i))
		want[k] = int32(i)
	}
	for k, v := range want {
		if got, ok := m.get(k); !ok || got != v {
			t.Fatalf("key %#x: %d %v, want %d", k, got, ok, v)
		}
	}
	if m.n != len(want) || 2*m.n > len(m.slots) {
		t.Fatalf("%d keys in %d slots, want %d at most half full", m.n, len(m.slots), len(want))
	}
	for range 5000 {
		k := r.Uint64() & (1<<40 - 1)
		if _, ok := want[k]; ok {
			continue
		}
		if _, ok := m.get(k); ok {
			t.Fatalf("absent key %#x found", k)
		}
	}
}

// TestTableLookupAddresses: connections over IPv6 and IPv4 whose keys
// differ only in one address byte or the family match only their own
// entries.
func TestTableLookupAddresses(t *testing.T) {
	addrs := [][2]string{
		{"fd00::1", "fd00::2"},
		{"fd01::1", "fd00::2"}, // source differs only in its upper half
		{"fd00::1", "fd01::2"}, // destination likewise
		{"10.0.0.1", "10.0.0.2"},
		{"10.0.0.1", "10.1.0.2"},
		{"::a00:1", "::a00:2"}, // IPv4-compatible, not IPv4-mapped: a different key
	}
	conns := make([]intent.Conn, len(addrs))
	for i, a := range addrs {
		conns[i] = intent.Conn{RequesterIP: netip.MustParseAddr(a[0]), RequesterQPN: 0x10, RequesterIPSN: 100,
			ResponderIP: netip.MustParseAddr(a[1]), ResponderQPN: 0x20, ResponderIPSN: 200}
	}
	g := intent.Geometry{Verb: intent.VerbWrite, MessageSize: 4096, MTU: 1024, NumMessages: 4}
	for i := range conns {
		es, err := intent.Compile([]intent.Intent{{QP: i, PSN: 3, Iter: 1, Type: mirror.EventECN}}, conns, g, intent.Options{})
		if err != nil {
			t.Fatal(err)
		}
		tab := NewTable(intent.IterPaper)
		if err := tab.Load(es, conns, g, intent.Options{}); err != nil {
			t.Fatal(err)
		}
		for j, c := range conns {
			s := newSender(t, tab, c, 4)
			for rel := range 8 {
				ev, iter := s.send(t, 100, rel)
				wantEv := mirror.EventNone
				if j == i && rel == 3 { // the first message's packet 3 only
					wantEv = mirror.EventECN
				}
				if ev != wantEv || iter != 1 {
					t.Fatalf("entry on %v, packet %d of %v: %v round %d, want %v round 1", addrs[i], rel, addrs[j], ev, iter, wantEv)
				}
			}
		}
	}
}
