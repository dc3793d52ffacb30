package roce

import (
	"net/netip"
	"testing"
)

// TestICRCPrefix: a prefix state finished over the BTH onward gives the
// same ICRC as the whole-packet computation, IPv4 and IPv6.
func TestICRCPrefix(t *testing.T) {
	for _, gids := range [][2]string{{"10.0.0.1", "10.0.0.2"}, {"fd00::1", "fd00::2"}} {
		b := Builder{Opcode: RCWriteOnly, DestQP: 0x123, PSN: 77, VA: 0x1000, RKey: 9, DMALen: 8, HopLimit: 64,
			SrcGID: GIDFromAddr(netip.MustParseAddr(gids[0])), DstGID: GIDFromAddr(netip.MustParseAddr(gids[1]))}
		buf := make([]byte, 256)
		n, err := b.Build(buf, []byte{1, 2, 3, 4, 5, 6, 7, 8})
		if err != nil {
			t.Fatal(err)
		}
		var p Packet
		if err := Parse(buf[:n], &p); err != nil {
			t.Fatal(err)
		}
		pre, err := NewICRCPrefix(buf[p.Net.L3Off:n])
		if err != nil {
			t.Fatal(err)
		}
		if got, want := pre.Finish(buf[p.BTHOff:p.ICRCOff]), p.ICRC(buf[:n]); got != want {
			t.Fatalf("%s: prefix ICRC %#x, packet's %#x", gids[0], got, want)
		}
	}
}
