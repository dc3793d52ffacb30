package header

import (
	"net/netip"
	"testing"
)

// TestNDRoundTrip writes a solicitation and an advertisement and reads them
// back through Decode: addresses, options and ICMPv6 checksums.
func TestNDRoundTrip(t *testing.T) {
	me := MAC{0x02, 0, 0, 0, 0, 1}
	peer := MAC{0x02, 0, 0, 0, 0, 2}
	src := netip.MustParseAddr("fd00::1").As16()
	tgt := netip.MustParseAddr("fd00::1234:5678").As16()
	buf := make([]byte, NDFrameLen)
	n, err := WriteNeighborSolicit(buf, me, src, tgt)
	if err != nil || n != NDFrameLen {
		t.Fatal(n, err)
	}
	var p Parsed
	if err := Decode(buf[:n], &p); err != nil {
		t.Fatal(err)
	}
	ip := IPv6(buf[p.L3Off:])
	if p.L4Proto != IPProtoICMPv6 || ip.HopLimit() != 255 {
		t.Fatalf("proto %d hop limit %d", p.L4Proto, ip.HopLimit())
	}
	if got := netip.AddrFrom16(ip.Dst()).String(); got != "ff02::1:ff34:5678" {
		t.Fatalf("solicited-node group %s", got)
	}
	if got := Ethernet(buf).Dst(); got != (MAC{0x33, 0x33, 0xff, 0x34, 0x56, 0x78}) {
		t.Fatalf("multicast MAC %v", got)
	}
	m := ND(buf[p.L4Off : p.L4Off+p.L4Len])
	if !m.IsValid() || m.Type() != ICMPv6NeighborSolicit || m.Target() != tgt {
		t.Fatalf("NS view %x", []byte(m))
	}
	if mac, ok := m.LinkAddr(NDOptSourceLinkAddr); !ok || mac != me {
		t.Fatalf("source link-layer option %v %v", mac, ok)
	}
	if !ICMPv6(m).ChecksumValid(ip.Src(), ip.Dst()) {
		t.Fatal("NS checksum")
	}
	n, err = WriteNeighborAdvert(buf, peer, tgt, me, src)
	if err != nil {
		t.Fatal(err)
	}
	if err := Decode(buf[:n], &p); err != nil {
		t.Fatal(err)
	}
	ip = IPv6(buf[p.L3Off:])
	m = ND(buf[p.L4Off : p.L4Off+p.L4Len])
	if m.Type() != ICMPv6NeighborAdvert || m.Flags() != NAFlagSolicited|NAFlagOverride || ip.Src() != tgt || ip.Dst() != src {
		t.Fatalf("NA %x", []byte(m))
	}
	if mac, ok := m.LinkAddr(NDOptTargetLinkAddr); !ok || mac != peer {
		t.Fatalf("target link-layer option %v %v", mac, ok)
	}
	if !ICMPv6(m).ChecksumValid(ip.Src(), ip.Dst()) {
		t.Fatal("NA checksum")
	}
	if _, err := WriteNeighborSolicit(buf[:10], me, src, tgt); err == nil {
		t.Fatal("short buffer accepted")
	}
}

// TestNDBadOptions: a zero-length or truncated option yields no address.
func TestNDBadOptions(t *testing.T) {
	m := make(ND, NDMessageLen+8)
	m[0] = ICMPv6NeighborAdvert
	m[NDMessageLen] = NDOptTargetLinkAddr
	if _, ok := m.LinkAddr(NDOptTargetLinkAddr); ok {
		t.Fatal("zero-length option accepted")
	}
	m[NDMessageLen+1] = 2 // 16 bytes, only 8 present
	if _, ok := m.LinkAddr(NDOptTargetLinkAddr); ok {
		t.Fatal("truncated option accepted")
	}
	if ND(m[:10]).IsValid() {
		t.Fatal("short ND valid")
	}
}

func FuzzND(f *testing.F) {
	buf := make([]byte, NDFrameLen)
	n, _ := WriteNeighborAdvert(buf, MAC{2}, [16]byte{15: 1}, MAC{3}, [16]byte{15: 2})
	f.Add(buf[EthernetHeaderLen+IPv6HeaderLen : n])
	f.Fuzz(func(t *testing.T, b []byte) {
		m := ND(b)
		if !m.IsValid() {
			return
		}
		_ = m.Flags()
		_ = m.Target()
		m.LinkAddr(NDOptSourceLinkAddr)
		m.LinkAddr(NDOptTargetLinkAddr)
	})
}
