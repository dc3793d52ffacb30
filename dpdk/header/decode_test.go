package header

import (
	"errors"
	"testing"
)

func goldenFrames(tb testing.TB) map[string][]byte {
	return map[string][]byte{
		"vlan-ipv4-udp":   unhexFrame(tb, vlanIPv4UDP),
		"qinq-ipv6-ext":   unhexFrame(tb, qinqIPv6Ext),
		"time-exceeded":   unhexFrame(tb, timeExceeded),
		"icmpv6-echo":     unhexFrame(tb, icmpv6Echo),
		"roce-v4":         unhexFrame(tb, roceV4),
		"arp-request-pad": unhexFrame(tb, arpRequest),
	}
}

// checkInvariants verifies what every successful (or partial) decode promises:
// the recorded layers lie inside the frame and in order.
func checkInvariants(tb testing.TB, f []byte, p *Parsed) {
	tb.Helper()
	n := len(f)
	in := func(off, l int) bool { return off >= 0 && l >= 0 && off+l <= n }
	if p.VLANs < 0 || p.VLANs > MaxVLANTags {
		tb.Fatalf("VLANs %d", p.VLANs)
	}
	for i := 0; i < p.VLANs; i++ {
		if !in(p.VLANOff[i], VLANTagLen) {
			tb.Fatalf("vlan %d out of frame: %+v", i, p)
		}
	}
	if p.L3Off != 0 && !in(p.L3Off, p.L3Len) {
		tb.Fatalf("L3 out of frame: %+v (len %d)", p, n)
	}
	if p.PayloadOff != 0 {
		if !in(p.L4Off, p.L4Len) || !in(p.PayloadOff, p.PayloadLen) || p.PayloadOff < p.L4Off ||
			p.PayloadOff+p.PayloadLen > p.L4Off+p.L4Len || p.L4Off+p.L4Len > p.L3Off+p.L3Len {
			tb.Fatalf("L4 out of bounds: %+v (len %d)", p, n)
		}
	}
	// The accessors must not panic and must return bounded views.
	_ = p.Payload(f)
	_ = p.L4(f)
	if u := p.UDP(f); u != nil && !u.IsValid() && !p.Truncated {
		tb.Fatalf("invalid UDP view % x", u)
	}
	if ip := p.IPv4(f); ip != nil && !ip.IsValid() {
		tb.Fatalf("invalid IPv4 view")
	}
	if ip := p.IPv6(f); ip != nil && !ip.IsValid() {
		tb.Fatalf("invalid IPv6 view")
	}
	if tc := p.TCP(f); tc != nil && !tc.IsValid() {
		tb.Fatalf("invalid TCP view")
	}
	if m := p.ICMPv4(f); m != nil && !m.IsValid() {
		tb.Fatalf("invalid ICMP view")
	}
	if m := p.ICMPv6(f); m != nil && !m.IsValid() {
		tb.Fatalf("invalid ICMPv6 view")
	}
	if a := p.ARP(f); a != nil && len(a) != ARPLen {
		tb.Fatalf("ARP view")
	}
	for i := 0; i < p.VLANs; i++ {
		_ = p.VLAN(f, i).VID()
	}
}

func TestDecodeEveryTruncation(t *testing.T) {
	for name, f := range goldenFrames(t) {
		var full Parsed
		if err := Decode(f, &full); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		end := full.L3Off + full.L3Len // beyond it is Ethernet padding
		for n := 0; n < len(f); n++ {
			var p Parsed
			err := Decode(f[:n], &p)
			if n < end {
				if !errors.Is(err, ErrTruncated) {
					t.Errorf("%s cut at %d: err %v, want ErrTruncated", name, n, err)
				}
			} else if err != nil {
				t.Errorf("%s cut at %d (in padding): %v", name, n, err)
			}
			checkInvariants(t, f[:n], &p)

			// The snap-length decoder accepts a cut inside the payload.
			err = DecodeTruncated(f[:n], &p)
			checkInvariants(t, f[:n], &p)
			if err == nil && n < end && !p.Truncated {
				t.Errorf("%s snapped at %d: Truncated not set", name, n)
			}
			if err != nil && !errors.Is(err, ErrTruncated) {
				t.Errorf("%s snapped at %d: %v", name, n, err)
			}
			if n >= full.PayloadOff && full.L3Proto != EtherTypeARP && err != nil {
				t.Errorf("%s snapped at %d after the headers: %v", name, n, err)
			}
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	base := unhexFrame(t, vlanIPv4UDP) // IPv4 at 18, UDP at 42
	six := unhexFrame(t, qinqIPv6Ext)  // IPv6 at 22, ext at 62, UDP at 86
	mod := func(b []byte, f func([]byte)) []byte {
		c := append([]byte(nil), b...)
		f(c)
		return c
	}
	cases := []struct {
		name  string
		frame []byte
		want  error
	}{
		{"empty", nil, ErrTruncated},
		{"ethertype", mod(base, func(b []byte) { b[16], b[17] = 0x88, 0xb5 }), ErrUnsupported},
		{"three tags", mod(six, func(b []byte) { b[20], b[21] = 0x81, 0x00 }), ErrUnsupported},
		{"ipv4 version", mod(base, func(b []byte) { b[18] = 0x56 }), ErrMalformed},
		{"ipv4 ihl 4", mod(base, func(b []byte) { b[18] = 0x44 }), ErrMalformed},
		{"ipv4 ihl 15", mod(base, func(b []byte) { b[18] = 0x4f }), ErrTruncated},
		{"ipv4 total < ihl", mod(base, func(b []byte) { b[20], b[21] = 0, 23 }), ErrMalformed},
		{"ipv4 total > frame", mod(base, func(b []byte) { b[21] = 37 }), ErrTruncated},
		{"udp len < 8", mod(base, func(b []byte) { b[47] = 7 }), ErrMalformed},
		{"udp len > ip", mod(base, func(b []byte) { b[47] = 13 }), ErrMalformed},
		{"ipv4 fragment", mod(base, func(b []byte) { b[25] = 1 }), ErrFragment},
		{"ipv6 version", mod(six, func(b []byte) { b[22] = 0x4b }), ErrMalformed},
		{"ipv6 plen > frame", mod(six, func(b []byte) { b[27] = 0x26 }), ErrTruncated},
		{"ipv6 ext len", mod(six, func(b []byte) { b[63] = 9 }), ErrTruncated},
		{"ipv6 fragment", mod(six, func(b []byte) { b[80] = 0x01 }), ErrFragment},
		{"tcp offset", mod(base, func(b []byte) { b[27] = IPProtoTCP }), ErrTruncated},
		{"icmp short", mod(base, func(b []byte) { b[27] = IPProtoICMP; b[21] = 24 + 7 }), ErrTruncated},
		{"arp not ipv4", mod(unhexFrame(t, arpRequest), func(b []byte) { b[17] = 6 }), ErrUnsupported},
	}
	for _, c := range cases {
		var p Parsed
		err := Decode(c.frame, &p)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.want)
		}
		checkInvariants(t, c.frame, &p)
	}
	// A non-first fragment still reports its network layer.
	var p Parsed
	f := mod(base, func(b []byte) { b[25] = 1 })
	if err := Decode(f, &p); !errors.Is(err, ErrFragment) || !p.Fragment || p.IPv4(f) == nil || p.UDP(f) != nil {
		t.Errorf("fragment: %v %+v", err, p)
	}
	// Error strings name the layer.
	if err := Decode(base[:20], &p); err == nil || err.Error() != "ipv4 header: truncated" {
		t.Errorf("error text %q", err)
	}
}

func TestDecodeTCPAndUnknownL4(t *testing.T) {
	// Reuse the VLAN frame, turning UDP into a 20-byte TCP header plus data.
	f := unhexFrame(t, `020000000002 020000000001 0800
		45 00 002c 0000 4000 40 06 0000 0a000001 0a000002
		c350 0016 00000001 00000002 50 12 ffff 0000 0000
		01020304`)
	IPv4(f[14:]).UpdateChecksum()
	var p Parsed
	if err := Decode(f, &p); err != nil {
		t.Fatal(err)
	}
	tc := p.TCP(f)
	if tc == nil || tc.SrcPort() != 50000 || tc.DstPort() != 22 || tc.Seq() != 1 || tc.Ack() != 2 ||
		tc.HeaderLen() != 20 || tc.Flags() != TCPFlagSYN|TCPFlagACK || tc.Window() != 0xffff ||
		tc.Checksum() != 0 || len(tc.Payload()) != 4 || p.PayloadLen != 4 {
		t.Fatalf("tcp %+v", p)
	}
	tc.SetSrcPort(1)
	tc.SetDstPort(2)
	tc.SetChecksum(3)
	if tc.SrcPort() != 1 || tc.DstPort() != 2 || tc.Checksum() != 3 {
		t.Error("tcp setters")
	}
	f[23] = 132 // SCTP: not decoded, payload is the whole segment
	if err := Decode(f, &p); err != nil || p.L4Proto != 132 || p.PayloadOff != p.L4Off || p.PayloadLen != 24 ||
		p.TCP(f) != nil || p.UDP(f) != nil {
		t.Fatalf("unknown l4: %v %+v", err, p)
	}
}
