package roce

import (
	"fmt"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk/header"
)

// reportRate adds per-packet and, when bytes > 0, throughput metrics to a
// benchmark that handled one packet per iteration.
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

var sinkU32 uint32

func BenchmarkParse(b *testing.B) {
	for _, v := range loadVectors(b) {
		switch v.name {
		case "RC SEND_ONLY v4", "RC WRITE_ONLY v4", "RC ACK v4", "UD SEND_ONLY_IMM v6", "CNP v4":
		default:
			continue
		}
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			var p Packet
			for i := 0; i < b.N; i++ {
				if err := Parse(v.frame, &p); err != nil {
					b.Fatal(err)
				}
			}
			sinkU32 = p.PSN
			reportRate(b, 0)
		})
	}
	// All fourteen vectors in turn, as a mixed stream.
	vs := loadVectors(b)
	b.Run("mix", func(b *testing.B) {
		b.ReportAllocs()
		var p Packet
		for i := 0; i < b.N; i++ {
			if err := Parse(vs[i%len(vs)].frame, &p); err != nil {
				b.Fatal(err)
			}
		}
		sinkU32 = p.PSN
		reportRate(b, 0)
	})
}

func BenchmarkParseVerifyICRC(b *testing.B) {
	bl := v4Base()
	bl.Opcode = RCWriteOnly
	for _, n := range []int{0, 1024, 4096} {
		frame := make([]byte, 5000)
		fl, err := bl.Build(frame, make([]byte, n))
		if err != nil {
			b.Fatal(err)
		}
		frame = frame[:fl]
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(fl))
			var p Packet
			for i := 0; i < b.N; i++ {
				if err := Parse(frame, &p); err != nil {
					b.Fatal(err)
				}
				if err := p.VerifyICRC(frame); err != nil {
					b.Fatal(err)
				}
			}
			reportRate(b, fl)
		})
	}
}

// BenchmarkICRC hashes packets whose ICRC-covered part (IP header to end of
// pad) is exactly 64, 1024 and 4096 bytes: an RC WRITE Only over IPv4 has 56
// bytes of headers there.
func BenchmarkICRC(b *testing.B) {
	bl := v4Base()
	bl.Opcode = RCWriteOnly
	const hdr = header.IPv4MinHeaderLen + header.UDPHeaderLen + BTHLen + RETHLen
	for _, size := range []int{64, 1024, 4096} {
		frame := make([]byte, 5000)
		payload := make([]byte, size-hdr)
		for i := range payload {
			payload[i] = byte(i)
		}
		fl, err := bl.Build(frame, payload)
		if err != nil {
			b.Fatal(err)
		}
		frame = frame[:fl]
		var p Packet
		if err := Parse(frame, &p); err != nil {
			b.Fatal(err)
		}
		if p.ICRCOff-p.Net.L3Off != size {
			b.Fatalf("covered %d bytes, want %d", p.ICRCOff-p.Net.L3Off, size)
		}
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(size))
			var c uint32
			for i := 0; i < b.N; i++ {
				c += p.ComputeICRC(frame)
			}
			sinkU32 = c
			reportRate(b, size)
		})
	}
}

func BenchmarkBuild(b *testing.B) {
	exp := expected()
	write := v4Base()
	write.Opcode, write.VA, write.RKey, write.DMALen, write.AckReq = RCWriteOnly, 0x1000, 7, 1024, true
	cases := []struct {
		name    string
		b       Builder
		payload []byte
	}{
		{"ack-v4", exp["RC ACK v4"].b, nil},
		{"ud-probe-v6", exp["UD SEND_ONLY_IMM v6"].b, make([]byte, 50)},
		{"write-64-v4", write, make([]byte, 64)},
		{"write-1024-v4", write, make([]byte, 1024)},
		{"write-4096-v4", write, make([]byte, 4096)},
	}
	buf := make([]byte, 8192)
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			n, _ := c.b.FrameLen(len(c.payload))
			b.SetBytes(int64(n))
			bl := c.b
			for i := 0; i < b.N; i++ {
				bl.PSN = uint32(i) & PSNMask
				if _, err := bl.Build(buf, c.payload); err != nil {
					b.Fatal(err)
				}
			}
			reportRate(b, n)
		})
	}
}

func BenchmarkBuildCNP(b *testing.B) {
	bl := v4Base()
	bl.DestQP = 0x19
	buf := make([]byte, 128)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := bl.BuildCNP(buf); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, 0)
}
