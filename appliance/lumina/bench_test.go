package lumina

import (
	"context"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/translator/inject"
)

// BenchmarkBalance runs the per-packet load-balancing experiment of the
// Lumina paper (Figure 7b) on the twin as the paper ran it: 100 rounds of
// 100 KB, 500 KB and 1 MB messages at line rate (100, 400 and 800
// Gbit/s), mirrored by per-packet WRR over a pool of four dumpers or per
// ingress port, each dumper a 1024-descriptor ring and a core whose cost
// per copy is measured on this machine first. It prints the table; the
// paper measured 100% integrity with per-packet balancing and down to 23%
// per port at 100 Gbit/s.
func BenchmarkBalance(b *testing.B) {
	for i := 0; i < b.N; i++ {
		start := time.Now()
		res, err := RunBalance(context.Background(), BalanceConfig{Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		b.Log("\n" + res.Table())
		wrr, port := res.Total(inject.BalanceWRR, 0), res.Total(inject.BalanceIngressPort, 0)
		b.ReportMetric(100*wrr.PassRate(), "wrr-integrity-%")
		b.ReportMetric(100*port.PassRate(), "per-port-integrity-%")
		b.ReportMetric(res.CapacityPPS, "dumper-copies/s")
		b.ReportMetric(float64(wrr.Rounds+port.Rounds)/time.Since(start).Seconds(), "rounds/s")
	}
}

// BenchmarkTwinWire is the virtual link's per-frame path (the twin's hot
// path: every frame of a run crosses two wires): a frame transmitted at
// 100 Gbit/s, the clock moved to its arrival, the frame received.
func BenchmarkTwinWire(b *testing.B) {
	tb := &Testbed{Cfg: TestbedConfig{SpeedMbps: DefaultSpeedMbps, PropDelay: DefaultPropDelay, SwitchBuffer: DefaultSwitchBuffer},
		clk: &simClock{t: virtualEpoch}}
	l := tb.newSimLink("bench")
	pool, err := dpdk.NewPool("twinbench", 64, dpdk.Headroom+2048)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	one := make([]*dpdk.Packet, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := pool.Get()
		_ = p.SetLen(1078)
		one[0] = p
		if l.a.TxBurst(0, one) != 1 {
			b.Fatal("the free transmitter refused a frame")
		}
		t, _ := tb.wires[0].next()
		tb.clk.t = t
		if l.b.RxBurst(0, one) != 1 {
			b.Fatal("the frame did not arrive")
		}
		one[0].Free()
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
}

// BenchmarkTwinRun runs the ready-made 20 KB fast-retransmission sweep on
// the virtual testbed (20 QPs, 20 drops, one 67 ms timeout in virtual
// time) and reports how many trace packets it simulates per wall-clock
// second.
func BenchmarkTwinRun(b *testing.B) {
	b.ReportAllocs()
	var pkts uint64
	for i := 0; i < b.N; i++ {
		tt, err := LoadReadyMade("fast-retrans-20k")
		if err != nil {
			b.Fatal(err)
		}
		tt.Spec.ResultPath = b.TempDir()
		sum, err := (&Runner{Test: tt, Lab: true}).Run(context.Background())
		if err != nil || !sum.Repeats[0].Valid {
			b.Fatalf("%v %+v", err, sum)
		}
		pkts += sum.Repeats[0].Packets
	}
	b.ReportMetric(float64(pkts)/b.Elapsed().Seconds(), "trace-pkts/s")
}
