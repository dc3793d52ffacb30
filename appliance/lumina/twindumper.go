package lumina

// The dumpers of the twin with a clock, with the capacity they have here.
//
// A dumper host's NIC lands the mirrored copies in a receive ring of a
// fixed number of descriptors; the dumper's core takes them a burst at a
// time, and while it works on a burst the ring fills. When copies come
// faster than the core takes them for long enough, the ring is full and the
// NIC discards what arrives (rx_discards_phy on the paper's ConnectX-5
// dumpers): the trace has a gap. On virtual time the core's work would cost
// nothing, so each burst costs what the dumper's own receive path costs on
// this machine: MeasureDumperCost runs the real dumper (package dumper,
// stepped) over a ring port and reads the thread's CPU clock around each
// burst, and the virtual core draws every burst's cost from those samples.
// The CPU clock leaves out the time the measuring thread was preempted,
// which a dumper pinned to its own core does not suffer.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/dumper"
)

// DefaultDumperRing is a dumper NIC's receive ring in the virtual testbed:
// the descriptors of one DPDK receive queue as Lumina's dumper sets it up
// (1024, DPDK's usual RX_RING_SIZE).
const DefaultDumperRing = 1024

// DumperCost is what one dumper core spends per burst of mirrored copies:
// samples of CPU nanoseconds per copy, one per measured burst.
type DumperCost struct {
	// PerCopy holds ns per copy of each measured burst, sorted.
	PerCopy []float64 `json:"-"`
	// Burst is the receive burst the samples were measured with, and
	// CopyLen the copies' length in bytes.
	Burst   int `json:"burst"`
	CopyLen int `json:"copy_len"`
	// Median and P99 summarise PerCopy.
	Median float64 `json:"median_ns_per_copy"`
	P99    float64 `json:"p99_ns_per_copy"`
}

// Rate is the core's capacity in copies per second at its median cost.
func (c *DumperCost) Rate() float64 {
	if c == nil || c.Median <= 0 {
		return 0
	}
	return 1e9 / c.Median
}

// FixedDumperCost is a cost model with one sample: every copy costs ns
// (tests, and a configured capacity in place of a measured one).
func FixedDumperCost(ns float64) *DumperCost {
	return &DumperCost{PerCopy: []float64{ns}, Burst: 32, Median: ns, P99: ns}
}

// burstNs is the virtual cost of a burst of n copies: n times a per-copy
// cost drawn from the samples.
func (c *DumperCost) burstNs(n int, rng *rand.Rand) int64 {
	per := c.PerCopy[0]
	if len(c.PerCopy) > 1 {
		per = c.PerCopy[rng.IntN(len(c.PerCopy))]
	}
	return max(1, int64(per*float64(n)+0.5))
}

// MeasureDumperCost measures the dumper's receive path on this machine:
// bursts of burst copies of copyLen bytes through a ring port into a
// stepped dumper (the path its workers run: receive burst, copy of the
// snap length into the arena, mbufs freed), each timed on the thread's CPU
// clock. The arena is written out at Stop, after the capture, as the
// dumper does; that cost is not the capture's.
func MeasureDumperCost(bursts, burst, copyLen int) (*DumperCost, error) {
	if bursts < 1 || burst < 1 || copyLen < 64 || copyLen > 4096 {
		return nil, errors.New("lumina: dumper cost: bursts and burst must be positive, copy length 64-4096")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	name := fmt.Sprintf("dumpercost%d", time.Now().UnixNano())
	pool, err := dpdk.NewPool(name, 4*burst, dpdk.Headroom+4096)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	l := ring.NewLink(name, ring.Config{Queues: 1, RingSize: 4 * burst})
	defer l.A().Close()
	defer l.B().Close()
	dir, err := os.MkdirTemp("", "dumpercost")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	total := bursts + bursts/10 // the first tenth warms caches and the arena
	// The arena holds every copy: a full one skips the copy, which would
	// make the last bursts look cheap.
	d, err := dumper.New(dumper.Config{Name: "cost", Port: l.B(), Burst: burst, NumPkts: total * burst, Dir: dir,
		Stepped: true})
	if err != nil {
		return nil, err
	}
	defer d.Close()
	if err := d.Start(); err != nil {
		return nil, err
	}
	// A producer on another thread writes every copy's bytes before it
	// sends the burst, as the NIC's DMA (or the injector's core) does: the
	// dumper then reads frames another core wrote, not lines its own
	// cache still holds. The two take turns, so each burst is timed alone.
	template := make([]byte, copyLen)
	for i := range template {
		template[i] = byte(i * 7)
	}
	sent, taken, done := make(chan error), make(chan struct{}), make(chan struct{})
	defer close(done)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		pkts := make([]*dpdk.Packet, burst)
		for range total {
			var err error
			if n := pool.GetBulk(pkts); n != burst {
				err = errors.New("lumina: dumper cost: packet pool empty")
			}
			for _, p := range pkts {
				if err == nil {
					_ = p.SetLen(copyLen)
					copy(p.Data(), template)
				}
			}
			if err == nil && l.A().TxBurst(0, pkts) != burst {
				err = errors.New("lumina: dumper cost: ring refused a burst")
			}
			select {
			case sent <- err:
			case <-done:
				return
			}
			if err != nil {
				return
			}
			select {
			case <-taken:
			case <-done:
				return
			}
		}
	}()
	c := &DumperCost{Burst: burst, CopyLen: copyLen, PerCopy: make([]float64, 0, bursts)}
	var ts unix.Timespec
	cpu := func() int64 {
		_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
		return ts.Nano()
	}
	// The clock read's own cost, taken off every sample.
	t0 := cpu()
	for range 100 {
		cpu()
	}
	clockNs := float64(cpu()-t0) / 101
	for b := range total {
		if err := <-sent; err != nil {
			return nil, err
		}
		start := cpu()
		got := d.Poll()
		ns := float64(cpu()-start) - clockNs
		if got != burst {
			return nil, fmt.Errorf("lumina: dumper cost: dumper took %d of %d", got, burst)
		}
		if b >= total-bursts {
			c.PerCopy = append(c.PerCopy, max(ns, 1)/float64(burst))
		}
		if b < total-1 {
			taken <- struct{}{}
		}
	}
	slices.Sort(c.PerCopy)
	c.Median = c.PerCopy[len(c.PerCopy)/2]
	c.P99 = c.PerCopy[len(c.PerCopy)*99/100]
	return c, nil
}

// dumperNIC is the dumper end of a mirror link in the virtual testbed:
// the link's frames land in the NIC's receive ring, and RxBurst hands the
// core a burst only when it has finished the last one.
type dumperNIC struct {
	info  dpdk.PortInfo
	in    *wire
	clk   *simClock
	ring  []*dpdk.Packet // circular: n descriptors hold frames from head on
	head  int
	n     int
	busy  int64 // when the core finishes the burst it took
	cost  *DumperCost
	rng   *rand.Rand
	stats dpdk.Stats
	// droppedBytes are the bytes of the discarded frames, which the wire
	// counted as delivered.
	droppedBytes uint64
	// scratch takes arrivals from the wire before they find a descriptor.
	scratch [64]*dpdk.Packet
	closed  bool
}

var _ dpdk.Port = (*dumperNIC)(nil)

// admit moves the frames that have arrived into the ring; those that find
// it full are discarded and counted (the NIC's rx_discards_phy).
func (d *dumperNIC) admit() {
	for {
		k := d.in.rx(d.scratch[:])
		for _, p := range d.scratch[:k] {
			if d.n == len(d.ring) {
				d.stats.Dropped++
				d.droppedBytes += uint64(p.Len())
				p.Free()
				continue
			}
			d.ring[(d.head+d.n)%len(d.ring)] = p
			d.n++
		}
		clear(d.scratch[:k])
		if k < len(d.scratch) {
			return
		}
	}
}

func (d *dumperNIC) Info() dpdk.PortInfo { return d.info }

func (d *dumperNIC) RxBurst(q int, pkts []*dpdk.Packet) int {
	if d.closed || q != 0 {
		return 0
	}
	d.admit()
	now := d.clk.t
	if now < d.busy || d.n == 0 {
		return 0
	}
	k := min(d.n, len(pkts))
	for i := range k {
		j := (d.head + i) % len(d.ring)
		pkts[i], d.ring[j] = d.ring[j], nil
	}
	d.head = (d.head + k) % len(d.ring)
	d.n -= k
	d.busy = now + d.cost.burstNs(k, d.rng)
	return k
}

// TxBurst: a dumper sends nothing.
func (d *dumperNIC) TxBurst(int, []*dpdk.Packet) int { return 0 }

func (d *dumperNIC) Stats() dpdk.Stats {
	s := d.stats
	s.RxPackets, s.RxBytes = d.in.stats.RxPackets-d.stats.Dropped, d.in.stats.RxBytes-d.droppedBytes
	return s
}

func (d *dumperNIC) Close() error {
	if d.closed {
		return nil
	}
	d.closed = true
	d.in.drop()
	for i := range d.n {
		d.ring[(d.head+i)%len(d.ring)].Free()
	}
	d.n = 0
	return nil
}

// next is the dumper's next event after now: the core finishing its burst
// while copies wait in the ring.
func (d *dumperNIC) next() (int64, bool) {
	if d.n > 0 && d.busy > d.clk.t {
		return d.busy, true
	}
	return 0, false
}

// newSimDumperLink is a mirror link of the virtual testbed: end a on the
// switch (the injector's mirror port), whose egress buffers, end b the
// dumper's NIC with its receive ring and a core of the given cost (nil: a
// core that costs nothing and a ring without limit, as an in-process link).
func (tb *Testbed) newSimDumperLink(name string, ringSize int, cost *DumperCost, seed uint64) link {
	l := tb.newSimLink(name)
	// newSimLink's end b is the switch's; end a, the host's, becomes the
	// dumper's NIC.
	sw := l.b.(*simPort)
	if cost == nil {
		return link{sw, l.a}
	}
	nic := &dumperNIC{info: l.a.Info(), in: sw.out, clk: tb.clk, ring: make([]*dpdk.Packet, ringSize), cost: cost,
		rng: rand.New(rand.NewPCG(seed, uint64(len(tb.nics))))}
	tb.nics = append(tb.nics, nic)
	tb.ports[len(tb.ports)-2] = nic
	return link{sw, nic}
}
