package perftest

import (
	"context"
	"testing"
)

// benchLoop runs a perftest test of b.N messages between two soft RNICs on
// a ring link and reports perftest's figures. Setup (devices, QPs, the
// exchange) is inside the timing, so allocs/op approach the per-message
// cost only at large b.N; the run itself allocates nothing per message.
func benchLoop(b *testing.B, p Params) {
	p.Iters = max(b.N, 5)
	b.ReportAllocs()
	b.ResetTimer()
	c, _, err := Loopback(context.Background(), p, LoopbackOptions{})
	if err != nil {
		b.Fatal(err)
	}
	r := c[0]
	if r.Lat != nil {
		b.ReportMetric(r.Lat.Typical, "us-typical")
		b.ReportMetric(r.Lat.P99, "us-p99")
		return
	}
	b.ReportMetric(r.MsgRate, "msgs/s")
	b.ReportMetric(BWIn(r.AvgBps, true), "Gbit/s")
}

// BenchmarkWriteBW64B is ib_write_bw -s 64: the message rate.
func BenchmarkWriteBW64B(b *testing.B) { benchLoop(b, Params{Verb: Write, Size: 64}) }

// BenchmarkWriteBW64KiB is ib_write_bw -s 65536 -m 4096: goodput.
func BenchmarkWriteBW64KiB(b *testing.B) { benchLoop(b, Params{Verb: Write, Size: 65536, MTU: 4096}) }

// BenchmarkSendBW4KiB is ib_send_bw -s 4096.
func BenchmarkSendBW4KiB(b *testing.B) { benchLoop(b, Params{Verb: Send, Size: 4096}) }

// BenchmarkReadBW64KiB is ib_read_bw -s 65536 -m 4096.
func BenchmarkReadBW64KiB(b *testing.B) { benchLoop(b, Params{Verb: Read, Size: 65536, MTU: 4096}) }

// BenchmarkAtomicBW is ib_atomic_bw (FETCH_AND_ADD).
func BenchmarkAtomicBW(b *testing.B) { benchLoop(b, Params{Verb: Atomic}) }

// BenchmarkSendLat is ib_send_lat -s 2.
func BenchmarkSendLat(b *testing.B) { benchLoop(b, Params{Verb: Send, Latency: true, Inline: -1}) }

// BenchmarkReadLat is ib_read_lat -s 2.
func BenchmarkReadLat(b *testing.B) { benchLoop(b, Params{Verb: Read, Latency: true}) }
