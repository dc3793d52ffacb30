//go:build linux

package afpacket

import (
	"fmt"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
)

// BenchmarkTx measures TxBurst of 64- and 1024-byte frames in bursts of 32
// over a veth pair, for each TX method. Nobody reads the far end: the frames die
// in the peer namespace's IP stack as not addressed to it, so the figure
// is the sending path (ours plus the kernel's veth transmit and receive).
func BenchmarkTx(b *testing.B) {
	for _, tx := range []string{TxRing, TxMmsg} {
		for _, size := range []int{64, 1024} {
			b.Run(fmt.Sprintf("%s/%dB", tx, size), func(b *testing.B) {
				v := newVethPair(b, 1500)
				pool := newPool(b, 1024)
				a := openIn(b, v.NSA, v.IfA, dpdk.Config{Pool: pool, Options: map[string]string{"tx": tx}})
				var burst [32]*dpdk.Packet
				b.ReportAllocs()
				b.ResetTimer()
				start := time.Now()
				for sent := 0; sent < b.N; {
					k := pool.GetBulk(burst[:min(len(burst), b.N-sent)])
					for _, pkt := range burst[:k] {
						_ = pkt.SetLen(buildFrame(pkt.Buffer(), uint32(sent%8), uint32(sent), size))
					}
					n := a.TxBurst(0, burst[:k])
					dpdk.FreeBulk(burst[n:k])
					sent += n
				}
				el := time.Since(start)
				b.StopTimer()
				b.ReportMetric(float64(b.N)/el.Seconds()/1e6, "Mpps")
				if s := a.Stats(); s.TxErrors != 0 {
					b.Fatalf("tx errors: %+v", s)
				}
			})
		}
	}
}

// BenchmarkRx measures RxBurst: the ring is filled with 64-byte frames,
// then read out in bursts of 32 (copy into pool buffers, VLAN check,
// timestamps, block hand-back) and freed. ns/op covers a frame's whole
// trip, sending included, so that b.N stays modest; rx-Mpps is the read
// out alone.
func BenchmarkRx(b *testing.B) {
	v := newVethPair(b, 1500)
	pool := newPool(b, 4096)
	a := openIn(b, v.NSA, v.IfA, dpdk.Config{Pool: pool})
	// A retire timeout longer than a block takes to fill lets the sender
	// fill whole blocks, so the ring holds its ~420k small frames while
	// nobody reads.
	r := openIn(b, v.NSB, v.IfB, dpdk.Config{Pool: pool, Options: map[string]string{"timeout": "5ms"}})
	const fill = 250000
	var burst [32]*dpdk.Packet
	b.ReportAllocs()
	b.ResetTimer()
	var busy time.Duration
	read := 0
	for done := 0; done < b.N; {
		want := min(fill, b.N-done)
		if err := send(a, pool, want, func(i int, buf []byte) int { return buildFrame(buf, 1, uint32(i), 64) }); err != nil {
			b.Fatal(err)
		}
		// Wait until the kernel has handed every block over. The kernel
		// may drop a few frames under load (counted in the port's Dropped):
		// they are reported, and the round reads what arrived.
		sent := want
		for deadline := time.Now().Add(2 * time.Second); r.rx[0].available(want) < want; {
			if time.Now().After(deadline) {
				want = r.rx[0].available(want)
				break
			}
			time.Sleep(time.Millisecond)
		}
		if want == 0 {
			b.Fatalf("no frame of %d visible (stats %+v)", sent, r.Stats())
		}
		t0 := time.Now()
		got := 0
		for got < want {
			n := r.RxBurst(0, burst[:min(len(burst), want-got)])
			got += n
			dpdk.FreeBulk(burst[:n])
		}
		busy += time.Since(t0)
		done += sent
		read += want
	}
	b.ReportMetric(float64(read)/busy.Seconds()/1e6, "rx-Mpps")
	b.ReportMetric(float64(r.Stats().Dropped), "kernel-drops")
}
