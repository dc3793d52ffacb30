//go:build dpdk

package eal

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/hugemem"
)

// Burst is testpmd's default burst size, so both sides move the same bursts.
const benchBurst = 32

// pinLast pins the benchmark goroutine to the last core it may use, as a
// poll-mode worker would be, and returns a function that undoes it. The
// thread's affinity is restored before it goes back to the scheduler.
func pinLast(b *testing.B) func() {
	var saved unix.CPUSet
	if err := unix.SchedGetaffinity(0, &saved); err != nil {
		b.Fatal(err)
	}
	cores, err := dpdk.AllowedCores()
	if err != nil {
		b.Fatal(err)
	}
	if err := dpdk.Pin(cores[len(cores)-1]); err != nil {
		b.Fatal(err)
	}
	return func() {
		_ = unix.SchedSetaffinity(0, &saved)
		runtime.UnlockOSThread()
	}
}

// BenchmarkRxNull is the receive loop on net_null: one cgo call per burst that
// receives 64-byte packets and copies them into Go buffers. One op is one
// packet.
func BenchmarkRxNull(b *testing.B) {
	pool := newPool(b, 4096, 0)
	port := open(b, "eal:net_null10", dpdk.Config{Pool: pool})
	defer pinLast(b)()
	var burst [benchBurst]*dpdk.Packet
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for got := 0; got < b.N; {
		n := port.RxBurst(0, burst[:])
		dpdk.FreeBulk(burst[:n])
		got += n
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "pkts/s")
}

// BenchmarkReadSlotsNull is the Lumina dumper's receive path on net_null:
// one cgo call per burst that receives 64-byte packets and copies each
// straight from its mbuf into the next slot of a 128 MB arena of 128-byte
// slots (the dumper's default snap length), starting over at its end. The
// arena is larger than any cache, so the copies go to memory as a capture's
// do. One op is one packet.
func BenchmarkReadSlotsNull(b *testing.B) {
	pool := newPool(b, 4096, 0)
	port := open(b, "eal:net_null16", dpdk.Config{Pool: pool})
	const slots, stride = 1 << 20, 128
	arena := make([]byte, slots*stride)
	for i := 0; i < len(arena); i += 4096 {
		arena[i] = 1 // fault the pages in before the clock starts
	}
	lens, wire := make([]uint16, slots), make([]uint32, slots)
	defer pinLast(b)()
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu0 := time.Now(), dpdk.ThreadCPU()
	for got, i := 0, 0; got < b.N; {
		if i+benchBurst > slots {
			i = 0
		}
		n, _ := port.ReadSlots(0, benchBurst, arena[i*stride:(i+benchBurst)*stride], stride, lens[i:i+benchBurst], wire[i:i+benchBurst])
		i += n
		got += n
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "pkts/s")
	// The rate of a poller that owns its core, which on a shared machine
	// the wall clock does not show.
	b.ReportMetric(float64(b.N)/(dpdk.ThreadCPU()-cpu0).Seconds(), "pkts/cpu-s")
}

// BenchmarkReadSlotsParts says where the nanoseconds of a copy on the
// dumper's DPDK path go, beside what dpdk-testpmd --forward-mode=rxonly does
// with a packet: each part below is a C loop over net_null's 64-byte
// packets in bursts of 32 (shim_bench_parts), except readslots, which is the
// Go loop calling ReadSlots 256 packets at a time as the dumper's worker
// does. Slots are 64 bytes, in a 256 MiB arena used round, on 4 KiB pages
// and on transparent huge pages (hugemem.Advise, as the dumper's arena).
// Each reports CPU nanoseconds per packet of its pinned thread:
//   - rxonly: receive and rte_pktmbuf_free_bulk, testpmd rxonly's work;
//   - rx-free: receive and ReadSlots' free;
//   - rx-copy-free: the same with the copy into the arena (non-temporal stores);
//   - shim: shim_rx_slots (adds the lengths and the per-packet checks);
//   - readslots: ReadSlots from Go (adds the cgo call and the counters);
//   - store-only: the copies' stores alone, no packet received.
//
// The difference between rx-copy-free and rx-free is the copy, between
// readslots and rxonly what the dumper's receive costs beyond testpmd's.
func BenchmarkReadSlotsParts(b *testing.B) {
	pool := newPool(b, 4096, 0)
	port := open(b, "eal:net_null17", dpdk.Config{Pool: pool})
	const slots, stride = 1 << 22, 64
	lens, wire := make([]uint16, slots), make([]uint32, slots)
	for _, pages := range []string{"4KiB", "THP"} {
		arena := make([]byte, slots*stride)
		if pages == "THP" {
			if err := hugemem.Advise(arena); err != nil {
				b.Logf("no transparent huge pages: %v", err)
				continue
			}
		}
		for i := 0; i < len(arena); i += 4096 {
			arena[i] = 1
		}
		parts := []string{"rxonly", "rx-free", "rx-copy-free", "shim", "store-only", "readslots"}
		for part, name := range parts {
			b.Run("pages="+pages+"/"+name, func(b *testing.B) {
				defer pinLast(b)()
				b.ReportAllocs()
				b.ResetTimer()
				cpu0 := dpdk.ThreadCPU()
				if name != "readslots" {
					port.benchParts(part, uint64(b.N), arena, stride, lens, wire)
				} else {
					for got, i := 0, 0; got < b.N; {
						if i+256 > slots {
							i = 0
						}
						n, _ := port.ReadSlots(0, benchBurst, arena[i*stride:(i+256)*stride], stride, lens[i:i+256], wire[i:i+256])
						i += n
						got += n
					}
				}
				b.ReportMetric(float64((dpdk.ThreadCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/pkt")
			})
		}
	}
}

// BenchmarkTxNull is the transmit loop on net_null: take a burst from the
// pool, set lengths, one cgo call that copies into mbufs and transmits.
func BenchmarkTxNull(b *testing.B) {
	pool := newPool(b, 4096, 0)
	port := open(b, "eal:net_null11", dpdk.Config{Pool: pool})
	defer pinLast(b)()
	var burst [benchBurst]*dpdk.Packet
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for sent := 0; sent < b.N; {
		n := pool.GetBulk(burst[:])
		for _, p := range burst[:n] {
			_ = p.SetLen(64)
		}
		k := port.TxBurst(0, burst[:n])
		dpdk.FreeBulk(burst[k:n])
		sent += k
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "pkts/s")
}

// ioForward is testpmd's io forwarding on one core: whatever port 0 receives
// goes out of port 1 and the other way round, until n packets were forwarded
// or stop says so. It returns the packets forwarded (both directions).
func ioForward(p0, p1 dpdk.Port, n int, stop func() bool) int {
	var burst [benchBurst]*dpdk.Packet
	fwd := 0
	for i := 0; fwd < n; i++ {
		if i&1023 == 0 && stop != nil && stop() {
			break
		}
		k := p0.RxBurst(0, burst[:])
		s := p1.TxBurst(0, burst[:k])
		dpdk.FreeBulk(burst[s:k])
		fwd += s
		k = p1.RxBurst(0, burst[:])
		s = p0.TxBurst(0, burst[:k])
		dpdk.FreeBulk(burst[s:k])
		fwd += s
	}
	return fwd
}

// BenchmarkIOFwdNull forwards between two net_null ports on one core, the
// same work as testpmd --forward-mode=io. One op is one forwarded packet.
func BenchmarkIOFwdNull(b *testing.B) {
	pool := newPool(b, 4096, 0)
	p0 := open(b, "eal:net_null12", dpdk.Config{Pool: pool})
	p1 := open(b, "eal:net_null13", dpdk.Config{Pool: pool})
	defer pinLast(b)()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	fwd := ioForward(p0, p1, b.N, nil)
	pps := float64(fwd) / time.Since(start).Seconds()
	b.ReportMetric(pps, "pkts/s")
	b.ReportMetric(pps/2, "pkts/s/dir")
}

var vsOnce struct {
	sync.Once
	ours, testpmd float64
	err           error
}

// BenchmarkVsTestpmd runs our io forwarding loop and dpdk-testpmd's for a few
// seconds each on two net_null vdevs without huge pages, and reports the
// per-direction rates and their ratio. Our loop copies each packet twice (into
// a Go buffer and into an mbuf) where testpmd forwards mbuf pointers, so the
// ratio is the price of keeping packets in Go memory. The testpmd half is
// skipped when the binary is absent.
func BenchmarkVsTestpmd(b *testing.B) {
	const runFor = 3 * time.Second
	vsOnce.Do(func() {
		pool := newPool(b, 4096, 0)
		p0 := open(b, "eal:net_null14", dpdk.Config{Pool: pool})
		p1 := open(b, "eal:net_null15", dpdk.Config{Pool: pool})
		unpin := pinLast(b)
		ioForward(p0, p1, 1<<20, nil) // warm up
		start := time.Now()
		deadline := start.Add(runFor)
		fwd := ioForward(p0, p1, 1<<62, func() bool { return time.Now().After(deadline) })
		vsOnce.ours = float64(fwd) / time.Since(start).Seconds() / 2
		unpin()
		vsOnce.testpmd, vsOnce.err = runTestpmd(int(runFor / time.Second))
	})
	b.ReportMetric(vsOnce.ours, "ours-pkts/s/dir")
	if vsOnce.err != nil {
		b.Logf("ours %.2f Mpps per direction; testpmd: %v", vsOnce.ours/1e6, vsOnce.err)
		return
	}
	b.ReportMetric(vsOnce.testpmd, "testpmd-pkts/s/dir")
	b.ReportMetric(vsOnce.ours/vsOnce.testpmd, "ours/testpmd")
	b.Logf("io forward on two net_null, one core, per direction: ours %.2f Mpps, dpdk-testpmd %.2f Mpps, ratio %.2f",
		vsOnce.ours/1e6, vsOnce.testpmd/1e6, vsOnce.ours/vsOnce.testpmd)
}

// runTestpmd runs dpdk-testpmd's io forwarding on two net_null vdevs until it
// has printed n per-second rates after start-up (or a minute has passed) and
// returns the median of port 0's receive rates. stdbuf makes testpmd's stdout
// line-buffered so the rates arrive as they are printed.
func runTestpmd(n int) (float64, error) {
	bin, err := exec.LookPath("dpdk-testpmd")
	if err != nil {
		return 0, err
	}
	args := []string{"-l", "0-1", "--no-huge", "--no-pci", "--no-shconf", "--no-telemetry",
		"-m", "1024", "--vdev", "net_null0", "--vdev", "net_null1", "--",
		"--forward-mode=io", "--nb-cores=1", "--total-num-mbufs=16384", "--stats-period", "1"}
	if sb, err := exec.LookPath("stdbuf"); err == nil {
		args = append([]string{"-oL", bin}, args...)
		bin = sb
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	rates := make(chan float64)
	var tail []string // the last lines, for the error when no rate shows up
	go func() {
		defer close(rates)
		port := -1
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			tail = append(tail[max(0, len(tail)-30):], sc.Text())
			f := strings.Fields(sc.Text())
			switch {
			case len(f) >= 5 && f[1] == "NIC" && f[2] == "statistics":
				port, _ = strconv.Atoi(f[len(f)-2])
			case len(f) >= 2 && f[0] == "Rx-pps:" && port == 0:
				if v, err := strconv.ParseFloat(f[1], 64); err == nil {
					rates <- v
				}
			}
		}
	}()
	// The first non-zero rate covers the start of forwarding: skip it.
	var samples []float64
	started := false
	for v := range rates {
		switch {
		case v == 0:
		case !started:
			started = true
		default:
			samples = append(samples, v)
		}
		if len(samples) == n {
			_ = cmd.Process.Signal(os.Interrupt)
		}
	}
	_ = cmd.Wait()
	if len(samples) == 0 {
		return 0, fmt.Errorf("no forwarding rate from testpmd: %s\n%s", stderr.String(), strings.Join(tail, "\n"))
	}
	sort.Float64s(samples)
	return samples[len(samples)/2], nil
}
