package soft

import (
	"net/netip"
	"testing"

	"github.com/rdma-appliance/appliance/verbs/verbstest"
)

// TestConformance runs the provider-agnostic verbs suite over two soft
// RNICs joined by an in-process ring link, once over IPv4 GIDs and once
// over IPv6 GIDs at index 1 (behind an IPv4 entry at index 0).
func TestConformance(t *testing.T) {
	for _, c := range []struct {
		name   string
		a, b   Config
		gindex int
	}{
		{"IPv4", Config{}, Config{}, 0},
		{"IPv6", Config{GIDs: []netip.Addr{netip.MustParseAddr("10.3.0.1"), netip.MustParseAddr("fd00:3::1")}},
			Config{GIDs: []netip.Addr{netip.MustParseAddr("10.3.0.2"), netip.MustParseAddr("fd00:3::2")}}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPair(t, c.a, c.b, nil)
			staticNeighbors(p)
			verbstest.Run(t, verbstest.Env{
				A: p.a, B: p.b,
				GIDIndexA: c.gindex, GIDIndexB: c.gindex,
				// Both devices stamp completions with dpdk.Nanotime.
				SameClock: true,
				UC:        true,
				// fillSend and fillRecv resolve every SGE when posting.
				PostChecksKeys: true,
				// B's loop stops and its port goes unread: A's
				// requests time out and run out of retries.
				Vanish: func() {
					if err := p.b.Close(); err != nil {
						t.Errorf("closing device B: %v", err)
					}
				},
			})
		})
	}
}
