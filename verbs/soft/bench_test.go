package soft

import (
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/verbs"
)

// benchWrite measures RC WRITE throughput of size-byte messages over one ring
// link pair: batches of 32 WRs with the last one signalled (perftest's
// selective signalling), at most depth outstanding.
func benchWrite(b *testing.B, size int, mtu verbs.MTU) {
	p := newPair(b, Config{}, Config{}, nil)
	staticNeighbors(p)
	x := newEnd(b, p.a, verbs.QPTypeRC, max(size, 64)*64, false)
	y := newEnd(b, p.b, verbs.QPTypeRC, max(size, 64)*64, false)
	prm := defaultRC()
	prm.mtu = mtu
	prm.timeout = 14
	connect(b, x, y, prm)
	const batch, depth = 32, 512
	wrs := make([]verbs.SendWR, batch)
	sges := make([]verbs.SGE, batch)
	for i := range wrs {
		sges[i] = verbs.SGE{Addr: x.mr.Addr() + uint64(i%64*size), Length: uint32(size), LKey: x.mr.LKey()}
		wrs[i] = verbs.SendWR{ID: uint64(i), Opcode: verbs.WRRDMAWrite, SGL: sges[i : i+1],
			RemoteAddr: y.mr.Addr() + uint64(i%64*size), RKey: y.mr.RKey()}
	}
	wrs[batch-1].Flags = verbs.SendSignaled
	wcs := make([]verbs.WC, 16)
	posted, done := 0, 0
	poll := func() {
		n, _ := x.scq.Poll(wcs)
		for _, wc := range wcs[:n] {
			if wc.Status != verbs.WCSuccess {
				b.Fatalf("wc %+v", wc)
			}
		}
		done += n * batch
	}
	b.ReportAllocs()
	b.SetBytes(int64(size))
	b.ResetTimer()
	start := time.Now()
	for posted < b.N {
		if posted-done+batch > depth {
			poll()
			continue
		}
		if err := x.qp.PostSend(wrs); err != nil {
			poll()
			continue
		}
		posted += batch
	}
	for done < posted {
		poll()
	}
	el := time.Since(start).Seconds()
	b.ReportMetric(float64(posted)/el, "msgs/s")
	b.ReportMetric(float64(posted)*float64(size)*8/el/1e9, "Gbit/s")
}

// BenchmarkRCWrite64B is the message rate of 64-byte WRITEs.
func BenchmarkRCWrite64B(b *testing.B) { benchWrite(b, 64, verbs.MTU4096) }

// BenchmarkRCWrite64KiB is the goodput of 64 KiB WRITEs at a 4096 MTU.
func BenchmarkRCWrite64KiB(b *testing.B) { benchWrite(b, 64<<10, verbs.MTU4096) }
