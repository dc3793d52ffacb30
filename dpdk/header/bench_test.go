package header

import (
	"fmt"
	"testing"
)

// reportRate adds per-packet and, when bytes > 0, throughput metrics to a
// benchmark that processed one packet per iteration.
func reportRate(b *testing.B, bytes int) {
	ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	if ns <= 0 {
		return
	}
	b.ReportMetric(ns, "ns/pkt")
	b.ReportMetric(1e9/ns, "pkts/s")
	if bytes > 0 {
		b.ReportMetric(float64(bytes)/ns, "GB/s")
	}
}

var sinkInt int

func BenchmarkDecode(b *testing.B) {
	for _, name := range []string{"roce-v4", "vlan-ipv4-udp", "qinq-ipv6-ext", "time-exceeded"} {
		f := goldenFrames(b)[name]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			var p Parsed
			for i := 0; i < b.N; i++ {
				if err := Decode(f, &p); err != nil {
					b.Fatal(err)
				}
			}
			sinkInt = p.PayloadOff
			reportRate(b, 0)
		})
	}
}

var sinkSum uint16

func BenchmarkChecksum(b *testing.B) {
	for _, n := range []int{20, 64, 1024, 4096} {
		buf := make([]byte, n)
		for i := range buf {
			buf[i] = byte(i)
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(n))
			var s uint16
			for i := 0; i < b.N; i++ {
				s += Checksum(buf)
			}
			sinkSum = s
			reportRate(b, n)
		})
	}
}

func BenchmarkIPv4HeaderChecksum(b *testing.B) {
	h := IPv4(goldenFrames(b)["roce-v4"][14:34])
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		h.UpdateChecksum()
	}
	reportRate(b, 0)
}

func BenchmarkUDPChecksumIPv6(b *testing.B) {
	seg := make([]byte, 1032)
	UDP(seg).Encode(49152, 4791, uint16(len(seg)), 0)
	b.ReportAllocs()
	b.SetBytes(int64(len(seg)))
	var s uint16
	for i := 0; i < b.N; i++ {
		s += UDPChecksumIPv6(v6a, v6b, seg)
	}
	sinkSum = s
	reportRate(b, len(seg))
}

func BenchmarkARPReply(b *testing.B) {
	req := unhexFrame(b, arpRequest)
	out := make([]byte, 64)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		var p Parsed
		if err := Decode(req, &p); err != nil {
			b.Fatal(err)
		}
		a := p.ARP(req)
		if !a.IsRequestFor([4]byte{10, 0, 0, 2}) {
			b.Fatal("not for us")
		}
		n, _ := WriteARPReplyTo(out, a, mac2, [4]byte{10, 0, 0, 2})
		sinkInt = n
	}
	reportRate(b, 0)
}

// BenchmarkEncodeHeaders writes Ethernet, IPv4 (with its checksum) and UDP
// headers in front of a payload, the work of a UDP transmit path.
func BenchmarkEncodeHeaders(b *testing.B) {
	f := make([]byte, 14+20+8+64)
	src, dst := [4]byte{10, 0, 0, 1}, [4]byte{10, 0, 0, 2}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		Ethernet(f).Encode(mac2, mac1, EtherTypeIPv4)
		IPv4(f[14:]).Encode(0x68, uint16(len(f)-14), uint16(i), IPv4FlagDontFragment, 64, IPProtoUDP, src, dst)
		UDP(f[34:]).Encode(49152, 4791, uint16(len(f)-34), 0)
	}
	reportRate(b, 0)
}
