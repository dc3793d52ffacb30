package header

import "testing"

func TestZeroAllocs(t *testing.T) {
	frames := goldenFrames(t)
	bad := append([]byte(nil), frames["vlan-ipv4-udp"]...)
	bad[18] = 0x44 // bad IHL: error paths must not allocate either
	out := make([]byte, 64)
	payload := make([]byte, 4096)
	var p Parsed
	cases := map[string]func(){
		"Decode": func() {
			for _, f := range frames {
				_ = Decode(f, &p)
			}
		},
		"DecodeError":     func() { _ = Decode(bad, &p) },
		"DecodeTruncated": func() { _ = DecodeTruncated(frames["roce-v4"][:50], &p) },
		"Checksum":        func() { sinkSum = Checksum(payload) },
		"UDPChecksumIPv6": func() { sinkSum = UDPChecksumIPv6(v6a, v6b, payload) },
		"IPv4Checksum":    func() { IPv4(frames["roce-v4"][14:]).UpdateChecksum() },
		"ARPReply": func() {
			_, _ = WriteARPReply(out, mac1, [4]byte{1, 2, 3, 4}, mac2, [4]byte{5, 6, 7, 8})
		},
		"Views": func() {
			f := frames["qinq-ipv6-ext"]
			_ = Decode(f, &p)
			ip := p.IPv6(f)
			sinkInt = int(ip.FlowLabel()) + int(p.UDP(f).DstPort()) + int(p.VLAN(f, 1).VID())
			_ = ip.SrcAddr()
		},
	}
	for name, fn := range cases {
		if n := testing.AllocsPerRun(100, fn); n != 0 {
			t.Errorf("%s: %v allocs per run", name, n)
		}
	}
}
