package header

import (
	"bytes"
	"encoding/hex"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// unhexFrame decodes a hex string, ignoring spaces and newlines so that the
// golden frames below can be laid out one header per line.
func unhexFrame(tb testing.TB, s string) []byte {
	tb.Helper()
	s = strings.Join(strings.Fields(s), "")
	b, err := hex.DecodeString(s)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// The golden frames are written by hand, field by field; the checksums in
// them were computed with an independent 16-bit word-at-a-time reference.

// vlanIPv4UDP: Ethernet, one 802.1Q tag (PCP 3, DEI 1, VID 100), IPv4 with
// four bytes of options (NOP NOP NOP EOL), DSCP 46, DF, UDP 12345 -> 4791.
const vlanIPv4UDP = `
020000000002 020000000001 8100
7064 0800
46 b8 0024 abcd 4000 40 11 092a c0a80001 c0a800c7 01010100
3039 12b7 000c 9d2f
deadbeef`

// qinqIPv6Ext: Ethernet, 802.1ad tag VID 10, 802.1Q tag PCP 5 VID 20, IPv6
// (DSCP 46, ECT(1), flow label 0xabcde) with hop-by-hop, destination options
// and an atomic fragment header before UDP.
const qinqIPv6Ext = `
020000000002 020000000001 88a8
000a 8100
a014 86dd
6b9abcde 0025 00 40 20010db8000000000000000000000001 20010db8000000000000000000000002
3c00 0104 00000000
2c00 0104 00000000
1100 0000 01020304
3039 12b7 000d 1d9d
68656c6c6f`

// timeExceeded: an ICMP time exceeded from a router 10.0.0.254 quoting a UDP
// probe 10.0.0.1:49152 -> 10.0.0.99:33470 whose TTL ran out.
const timeExceeded = `
020000000001 0200000000fe 0800
45 c0 0038 0000 0000 40 01 6507 0a0000fe 0a000001
0b 00 b238 00000000
45 00 001c 0001 0000 40 11 666d 0a000001 0a000063
c000 82be 0008 0000`

// icmpv6Echo: an ICMPv6 echo request with two bytes of data.
const icmpv6Echo = `
020000000002 020000000001 86dd
60000000 000a 3a ff 20010db8000000000000000000000001 20010db8000000000000000000000002
80 00 b0ae 1234 0001 6162`

// arpRequest: who has 10.0.0.2, tell 10.0.0.1, padded to 60 bytes.
const arpRequest = `
ffffffffffff 020000000001 0806
0001 0800 06 04 0001 020000000001 0a000001 000000000000 0a000002
000000000000000000000000000000000000`

// roceV4 is the first RoCEv2 known-answer frame (RC SEND Only over IPv4).
const roceV4 = `020000000002020000000001080045680034123440004011141b0a0000010a000002c00012b7002000000400ffff000000110000000161626364656667686745b41c`

var (
	mac1 = MAC{2, 0, 0, 0, 0, 1}
	mac2 = MAC{2, 0, 0, 0, 0, 2}
	v6a  = [16]byte(netip.MustParseAddr("2001:db8::1").As16())
	v6b  = [16]byte(netip.MustParseAddr("2001:db8::2").As16())
)

func TestGoldenVLANIPv4UDP(t *testing.T) {
	f := unhexFrame(t, vlanIPv4UDP)
	var p Parsed
	if err := Decode(f, &p); err != nil {
		t.Fatal(err)
	}
	want := Parsed{VLANs: 1, VLANOff: [2]int{14, 0}, L3Proto: EtherTypeIPv4, L3Off: 18, L3Len: 36,
		L4Proto: IPProtoUDP, L4Off: 42, L4Len: 12, PayloadOff: 50, PayloadLen: 4}
	if p != want {
		t.Fatalf("parsed %+v, want %+v", p, want)
	}
	eth := p.Ethernet(f)
	if eth.Dst() != mac2 || eth.Src() != mac1 || eth.EtherType() != EtherTypeVLAN {
		t.Errorf("ethernet %v %v %#x", eth.Dst(), eth.Src(), eth.EtherType())
	}
	v := p.VLAN(f, 0)
	if v.PCP() != 3 || !v.DEI() || v.VID() != 100 || v.EtherType() != EtherTypeIPv4 || v.TCI() != MakeTCI(3, true, 100) {
		t.Errorf("vlan pcp %d dei %v vid %d type %#x", v.PCP(), v.DEI(), v.VID(), v.EtherType())
	}
	if p.VLAN(f, 1) != nil || p.IPv6(f) != nil || p.TCP(f) != nil {
		t.Error("absent layers returned views")
	}
	ip := p.IPv4(f)
	if !ip.IsValid() || ip.Version() != 4 || ip.IHL() != 6 || ip.HeaderLen() != 24 || ip.TOS() != 0xb8 ||
		ip.DSCP() != 46 || ip.ECN() != ECNNotECT || ip.TotalLength() != 36 || ip.ID() != 0xabcd ||
		ip.Flags() != IPv4FlagDontFragment || !ip.DontFragment() || ip.MoreFragments() || ip.IsFragment() ||
		ip.FragmentOffset() != 0 || ip.TTL() != 64 || ip.Protocol() != IPProtoUDP || ip.Checksum() != 0x092a {
		t.Errorf("ipv4 fields wrong: % x", ip[:24])
	}
	if ip.Src() != [4]byte{192, 168, 0, 1} || ip.DstAddr() != netip.MustParseAddr("192.168.0.199") ||
		ip.SrcAddr() != netip.MustParseAddr("192.168.0.1") {
		t.Errorf("ipv4 addresses %v %v", ip.SrcAddr(), ip.DstAddr())
	}
	if !bytes.Equal(ip.Options(), []byte{1, 1, 1, 0}) {
		t.Errorf("options % x", ip.Options())
	}
	if !ip.ChecksumValid() || ip.CalculateChecksum() != 0x092a {
		t.Errorf("ipv4 checksum %#04x", ip.CalculateChecksum())
	}
	u := p.UDP(f)
	if !u.IsValid() || u.SrcPort() != 12345 || u.DstPort() != 4791 || u.Length() != 12 || u.Checksum() != 0x9d2f {
		t.Errorf("udp % x", u)
	}
	if u.CalculateChecksumIPv4(ip.Src(), ip.Dst()) != 0x9d2f || !u.ChecksumValidIPv4(ip.Src(), ip.Dst()) {
		t.Errorf("udp checksum %#04x", u.CalculateChecksumIPv4(ip.Src(), ip.Dst()))
	}
	if !bytes.Equal(p.Payload(f), []byte{0xde, 0xad, 0xbe, 0xef}) || !bytes.Equal(u.Payload(), p.Payload(f)) {
		t.Errorf("payload % x", p.Payload(f))
	}
}

func TestGoldenQinQIPv6Ext(t *testing.T) {
	f := unhexFrame(t, qinqIPv6Ext)
	var p Parsed
	if err := Decode(f, &p); err != nil {
		t.Fatal(err)
	}
	want := Parsed{VLANs: 2, VLANOff: [2]int{14, 18}, L3Proto: EtherTypeIPv6, L3Off: 22, L3Len: 77,
		L4Proto: IPProtoUDP, L4Off: 86, L4Len: 13, PayloadOff: 94, PayloadLen: 5, Fragment: true}
	if p != want {
		t.Fatalf("parsed %+v, want %+v", p, want)
	}
	if p.Ethernet(f).EtherType() != EtherTypeQinQ {
		t.Error("outer TPID")
	}
	outer, inner := p.VLAN(f, 0), p.VLAN(f, 1)
	if outer.VID() != 10 || outer.PCP() != 0 || outer.EtherType() != EtherTypeVLAN ||
		inner.VID() != 20 || inner.PCP() != 5 || inner.DEI() || inner.EtherType() != EtherTypeIPv6 {
		t.Errorf("tags %x %x", outer, inner)
	}
	ip := p.IPv6(f)
	if !ip.IsValid() || ip.Version() != 6 || ip.TrafficClass() != 0xb9 || ip.DSCP() != 46 || ip.ECN() != ECNECT1 ||
		ip.FlowLabel() != 0xabcde || ip.PayloadLength() != 37 || ip.NextHeader() != IPProtoHopByHop ||
		ip.HopLimit() != 64 || ip.Src() != v6a || ip.Dst() != v6b || ip.DstAddr() != netip.AddrFrom16(v6b) {
		t.Errorf("ipv6 fields wrong: % x", ip[:40])
	}
	proto, off, frag, err := SkipIPv6Extensions(ip.Payload(), ip.NextHeader())
	if err != nil || proto != IPProtoUDP || off != 24 || frag == nil || frag.ID() != 0x01020304 ||
		frag.FragmentOffset() != 0 || frag.MoreFragments() || frag.NextHeader() != IPProtoUDP {
		t.Errorf("ext: %d %d %x %v", proto, off, frag, err)
	}
	u := p.UDP(f)
	if u.CalculateChecksumIPv6(ip.Src(), ip.Dst()) != 0x1d9d || !u.ChecksumValidIPv6(ip.Src(), ip.Dst()) {
		t.Errorf("udp6 checksum %#04x", u.CalculateChecksumIPv6(ip.Src(), ip.Dst()))
	}
	if string(p.Payload(f)) != "hello" {
		t.Errorf("payload %q", p.Payload(f))
	}
}

func TestGoldenTimeExceeded(t *testing.T) {
	f := unhexFrame(t, timeExceeded)
	var p Parsed
	if err := Decode(f, &p); err != nil {
		t.Fatal(err)
	}
	if p.L4Proto != IPProtoICMP || p.L4Off != 34 || p.L4Len != 36 || p.PayloadOff != 42 || p.PayloadLen != 28 {
		t.Fatalf("parsed %+v", p)
	}
	ip := p.IPv4(f)
	if !ip.ChecksumValid() || ip.TOS() != 0xc0 || ip.SrcAddr() != netip.MustParseAddr("10.0.0.254") {
		t.Error("outer ipv4")
	}
	m := p.ICMPv4(f)
	if !m.IsValid() || m.Type() != ICMPv4TimeExceeded || m.Code() != ICMPv4CodeTTLExceeded || !m.IsError() ||
		m.Checksum() != 0xb238 || !m.ChecksumValid() || m.CalculateChecksum() != 0xb238 {
		t.Errorf("icmp % x", m[:8])
	}
	o := m.Original()
	if !o.IsValid() || o.TTL() != 64 || o.Protocol() != IPProtoUDP || o.ID() != 1 || !o.ChecksumValid() ||
		o.DstAddr() != netip.MustParseAddr("10.0.0.99") {
		t.Errorf("original % x", o)
	}
	ou := UDP(o.Payload())
	if ou.SrcPort() != 0xc000 || ou.DstPort() != 33470 {
		t.Errorf("original udp % x", ou)
	}
}

func TestGoldenICMPv6Echo(t *testing.T) {
	f := unhexFrame(t, icmpv6Echo)
	var p Parsed
	if err := Decode(f, &p); err != nil {
		t.Fatal(err)
	}
	m := p.ICMPv6(f)
	if m == nil || m.Type() != ICMPv6EchoRequest || m.Code() != 0 || m.ID() != 0x1234 || m.Seq() != 1 || m.IsError() ||
		m.CalculateChecksum(v6a, v6b) != 0xb0ae || !m.ChecksumValid(v6a, v6b) || string(m.Payload()) != "ab" {
		t.Errorf("icmpv6 % x (checksum %#04x)", m, m.CalculateChecksum(v6a, v6b))
	}
	// Turn it into the reply in place and check the checksum still verifies.
	m.SetType(ICMPv6EchoReply)
	m.UpdateChecksum(v6b, v6a)
	if !m.ChecksumValid(v6b, v6a) {
		t.Error("reply checksum")
	}
}

func TestGoldenARP(t *testing.T) {
	want := unhexFrame(t, arpRequest)
	buf := make([]byte, 64)
	n, err := WriteARPRequest(buf, mac1, [4]byte{10, 0, 0, 1}, [4]byte{10, 0, 0, 2})
	if err != nil || n != ARPFrameLen || !bytes.Equal(buf[:n], want) {
		t.Fatalf("request %d %v\n got % x\nwant % x", n, err, buf[:n], want)
	}
	var p Parsed
	if err := Decode(buf[:n], &p); err != nil {
		t.Fatal(err)
	}
	a := p.ARP(buf)
	if !a.IsValid() || a.HardwareType() != 1 || a.ProtocolType() != EtherTypeIPv4 || a.HardwareLen() != 6 ||
		a.ProtocolLen() != 4 || a.Op() != ARPOpRequest || a.SenderMAC() != mac1 ||
		a.SenderIP() != [4]byte{10, 0, 0, 1} || !a.TargetMAC().IsZero() || !a.IsRequestFor([4]byte{10, 0, 0, 2}) {
		t.Errorf("arp % x", a)
	}
	reply := make([]byte, 60)
	n, err = WriteARPReplyTo(reply, a, mac2, [4]byte{10, 0, 0, 2})
	if err != nil || n != 60 {
		t.Fatal(n, err)
	}
	wantReply := unhexFrame(t, `020000000001 020000000002 0806
		0001 0800 06 04 0002 020000000002 0a000002 020000000001 0a000001
		000000000000000000000000000000000000`)
	if !bytes.Equal(reply, wantReply) {
		t.Errorf("reply\n got % x\nwant % x", reply, wantReply)
	}
	if _, err := WriteARPRequest(make([]byte, 59), mac1, [4]byte{}, [4]byte{}); !errors.Is(err, ErrShortBuffer) {
		t.Errorf("short buffer: %v", err)
	}
	if (ARP(buf[14:41])).IsValid() {
		t.Error("27-byte ARP valid")
	}
}

func TestGoldenRoCEFrame(t *testing.T) {
	f := unhexFrame(t, roceV4)
	var p Parsed
	if err := Decode(f, &p); err != nil {
		t.Fatal(err)
	}
	want := Parsed{L3Proto: EtherTypeIPv4, L3Off: 14, L3Len: 52, L4Proto: IPProtoUDP, L4Off: 34, L4Len: 32,
		PayloadOff: 42, PayloadLen: 24}
	if p != want {
		t.Fatalf("parsed %+v, want %+v", p, want)
	}
	ip := p.IPv4(f)
	if ip.DSCP() != 26 || ip.ECN() != 0 || !ip.ChecksumValid() || p.UDP(f).Checksum() != 0 ||
		!p.UDP(f).ChecksumValidIPv4(ip.Src(), ip.Dst()) {
		t.Error("roce frame fields")
	}
}

// TestBuildHeaders writes headers with the setters and Encode methods and
// checks them against the golden frames.
func TestBuildHeaders(t *testing.T) {
	want := unhexFrame(t, vlanIPv4UDP)
	f := make([]byte, len(want))
	Ethernet(f).Encode(mac2, mac1, EtherTypeVLAN)
	v := VLAN(f[14:])
	v.SetPCP(3)
	v.SetDEI(true)
	v.SetVID(100)
	v.SetEtherType(EtherTypeIPv4)
	ip := IPv4(f[18:])
	ip.SetVersionIHL(24)
	ip.SetDSCP(46)
	ip.SetECN(ECNNotECT)
	ip.SetTotalLength(36)
	ip.SetID(0xabcd)
	ip.SetFlagsFragmentOffset(IPv4FlagDontFragment, 0)
	ip.SetTTL(64)
	ip.SetProtocol(IPProtoUDP)
	ip.SetSrc([4]byte{192, 168, 0, 1})
	ip.SetDst([4]byte{192, 168, 0, 199})
	copy(ip.Options(), []byte{1, 1, 1, 0})
	ip.UpdateChecksum()
	u := UDP(f[42:])
	u.Encode(12345, 4791, 12, 0)
	copy(u.Payload(), []byte{0xde, 0xad, 0xbe, 0xef})
	u.SetChecksum(u.CalculateChecksumIPv4(ip.Src(), ip.Dst()))
	if !bytes.Equal(f, want) {
		t.Fatalf("\n got % x\nwant % x", f, want)
	}

	want6 := unhexFrame(t, icmpv6Echo)
	f6 := make([]byte, len(want6))
	Ethernet(f6).Encode(mac2, mac1, EtherTypeIPv6)
	ip6 := IPv6(f6[14:])
	ip6.Encode(0xff, 0xfffff, 10, IPProtoICMPv6, 255, v6a, v6b)
	ip6.SetTrafficClass(0)
	ip6.SetFlowLabel(0)
	m := ICMPv6(f6[54:])
	m.SetType(ICMPv6EchoRequest)
	m.SetID(0x1234)
	m.SetSeq(1)
	copy(m.Payload(), "ab")
	m.UpdateChecksum(v6a, v6b)
	if !bytes.Equal(f6, want6) {
		t.Fatalf("\n got % x\nwant % x", f6, want6)
	}
	ip6.SetDSCP(46)
	ip6.SetECN(ECNCE)
	ip6.SetHopLimit(1)
	ip6.SetNextHeader(IPProtoUDP)
	ip6.SetPayloadLength(7)
	if ip6.TrafficClass() != 46<<2|3 || ip6.FlowLabel() != 0 || ip6.Version() != 6 || ip6.HopLimit() != 1 ||
		ip6.NextHeader() != IPProtoUDP || ip6.PayloadLength() != 7 || len(ip6.Payload()) != 7 {
		t.Errorf("ipv6 setters: % x", ip6[:8])
	}

	wantTE := unhexFrame(t, timeExceeded)
	te := make([]byte, len(wantTE))
	Ethernet(te).Encode(mac1, MAC{2, 0, 0, 0, 0, 0xfe}, EtherTypeIPv4)
	IPv4(te[14:]).Encode(0xc0, 56, 0, 0, 64, IPProtoICMP, [4]byte{10, 0, 0, 254}, [4]byte{10, 0, 0, 1})
	im := ICMPv4(te[34:])
	im.SetType(ICMPv4TimeExceeded)
	im.SetCode(ICMPv4CodeTTLExceeded)
	im.SetRest(0)
	copy(im.Payload(), wantTE[42:])
	im.UpdateChecksum()
	if !bytes.Equal(te, wantTE) {
		t.Fatalf("\n got % x\nwant % x", te, wantTE)
	}
}

func TestEthernetVLANSetters(t *testing.T) {
	f := make([]byte, 18)
	e := Ethernet(f)
	e.SetDst(mac2)
	e.SetSrc(mac1)
	e.SetEtherType(EtherTypeQinQ)
	e.SwapAddrs()
	if e.Dst() != mac1 || e.Src() != mac2 || e.EtherType() != EtherTypeQinQ || !e.IsValid() || len(e.Payload()) != 4 {
		t.Errorf("ethernet % x", f)
	}
	v := VLAN(e.Payload())
	v.SetTCI(0xffff)
	v.SetDEI(false)
	v.SetPCP(2)
	v.SetVID(4095)
	if v.TCI() != 0x4fff || v.DEI() || v.PCP() != 2 || v.VID() != 4095 || !v.IsValid() {
		t.Errorf("tci %#04x", v.TCI())
	}
	if MakeTCI(7, false, 1) != 0xe001 || MakeTCI(0, true, 0xffff) != 0x1fff {
		t.Error("MakeTCI")
	}
	if Ethernet(f[:13]).IsValid() || VLAN(f[:3]).IsValid() {
		t.Error("short views valid")
	}
}

func TestMAC(t *testing.T) {
	m := MAC{0x02, 0xab, 0xcd, 0xef, 0x00, 0x01}
	if m.String() != "02:ab:cd:ef:00:01" {
		t.Error(m.String())
	}
	for _, s := range []string{"02:ab:cd:ef:00:01", "02-AB-CD-EF-00-01"} {
		if got, err := ParseMAC(s); err != nil || got != m {
			t.Errorf("ParseMAC(%q) = %v, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "02:ab:cd:ef:00:0g", "02:ab:cd:ef:00:012", "02.ab:cd:ef:00:01"} {
		if _, err := ParseMAC(s); !errors.Is(err, ErrBadMAC) {
			t.Errorf("ParseMAC(%q) err %v", s, err)
		}
	}
	if !BroadcastMAC.IsBroadcast() || !BroadcastMAC.IsMulticast() || m.IsMulticast() || m.IsZero() {
		t.Error("predicates")
	}
	if MACFromUint64(0x0123456789ab).Uint64() != 0x0123456789ab || MACFromUint64(1<<48|5) != (MAC{0, 0, 0, 0, 0, 5}) {
		t.Error("uint64 round trip")
	}
}
