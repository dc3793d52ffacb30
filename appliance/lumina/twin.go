package lumina

// The twin with a clock: the testbed on virtual time.
//
// On wall-clock time the RNICs, the injector and the dumpers run on their
// own goroutines, so every latency the analyzers read from the trace is
// this host's scheduling as much as the NIC model's, and no two runs
// agree. In the virtual mode nothing runs on its own: one goroutine (the
// traffic generator's, while it waits for completions) steps every RNIC,
// the injector and the dumpers in a discrete-event loop. The links between
// the RNICs and the switch have a rate (the switch's port speed) and a
// propagation delay, the switch's egress a buffer, and the RNICs' own
// processing delays come from their profiles; when every part is idle
// the clock jumps to the next event (a frame arriving, a transmitter
// freeing, an RNIC timer). The same test then gives the same trace, byte
// for byte, and the trace's timings are the model's.

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
)

// Defaults of the virtual testbed's links.
const (
	// DefaultSpeedMbps is the links' rate when the test names none.
	DefaultSpeedMbps = 100000
	// DefaultPropDelay is each link's one-way propagation delay: a few
	// metres of fibre and the PHYs.
	DefaultPropDelay = 50 * time.Nanosecond
	// DefaultSwitchBuffer is the switch's buffer per egress port.
	DefaultSwitchBuffer = 1 << 20
	// wireOverhead is what a frame costs on the wire beyond its bytes:
	// preamble and start delimiter (8), FCS (4), inter-frame gap (12).
	wireOverhead = 24
	// virtualEpoch is where virtual time starts (2025-01-01 UTC): the
	// traces carry plausible dates, and a zero time, which the RNICs'
	// timers read as "unset", never occurs.
	virtualEpoch = int64(1735689600) * 1e9
	// virtualHorizon bounds one run in virtual time: a test that has not
	// finished after this long (seven retries of the longest timeouts
	// take minutes) is stopped rather than simulated forever.
	virtualHorizon = int64(30 * time.Minute)
	// maxRounds bounds the polling at one instant: a part that claims
	// work forever without moving a packet cannot hang the loop.
	maxRounds = 100000
)

// ErrStalled is returned when the traffic waits for something that can
// no longer happen in the virtual testbed: no frame in flight, no timer.
var ErrStalled = errors.New("lumina: virtual testbed stalled: nothing left to happen")

// simClock is the virtual time, in Unix nanoseconds.
type simClock struct{ t int64 }

func (c *simClock) now() int64 { return c.t }

// inflight is a frame on a wire and the time its last bit arrives.
type inflight struct {
	pkt *dpdk.Packet
	at  int64
}

// wire is one direction of a link: a transmitter that serialises frames
// at the link's rate, then the propagation delay.
type wire struct {
	clk       *simClock
	nsPerByte float64
	prop      int64
	// buffer is the bytes the transmitter may hold waiting (a switch's
	// egress buffer; beyond it frames are dropped and counted); 0 holds
	// the sender back instead, as a NIC's port only takes a frame when
	// its transmitter is free.
	buffer int
	free   int64 // when the transmitter finishes what it took
	// blocked says the sender was refused: it retries when free comes.
	blocked bool
	q       []inflight
	head    int
	moved   *uint64 // the testbed's progress count
	stats   dpdk.Stats
}

func (w *wire) tx(pkts []*dpdk.Packet) int {
	now := w.clk.t
	for i, p := range pkts {
		start := max(now, w.free)
		if w.buffer == 0 && start > now {
			w.blocked = true
			return i
		}
		n := p.Len()
		if w.buffer > 0 && float64(start-now)/w.nsPerByte+float64(n) > float64(w.buffer) {
			w.stats.TxErrors++
			p.Free()
			continue
		}
		end := start + int64(math.Ceil(float64(n+wireOverhead)*w.nsPerByte))
		w.free = end
		w.q = append(w.q, inflight{p, end + w.prop})
		w.stats.TxPackets++
		w.stats.TxBytes += uint64(n)
		*w.moved++
	}
	w.blocked = false
	return len(pkts)
}

func (w *wire) rx(pkts []*dpdk.Packet) int {
	n := 0
	for n < len(pkts) && w.head < len(w.q) && w.q[w.head].at <= w.clk.t {
		f := w.q[w.head]
		w.q[w.head] = inflight{}
		w.head++
		f.pkt.Timestamp = f.at
		pkts[n] = f.pkt
		n++
		w.stats.RxPackets++
		w.stats.RxBytes += uint64(f.pkt.Len())
	}
	if w.head == len(w.q) {
		w.q, w.head = w.q[:0], 0
	}
	if n > 0 {
		*w.moved++
	}
	return n
}

// next is the wire's next event after now: its first frame's arrival, or
// the transmitter freeing for a sender it refused.
func (w *wire) next() (int64, bool) {
	t, ok := int64(0), false
	if w.head < len(w.q) {
		t, ok = w.q[w.head].at, true
	}
	if w.blocked && (!ok || w.free < t) {
		t, ok = w.free, true
	}
	return t, ok
}

func (w *wire) drop() {
	for _, f := range w.q[w.head:] {
		f.pkt.Free()
	}
	w.q, w.head = nil, 0
}

// simPort is one end of a virtual link.
type simPort struct {
	info   dpdk.PortInfo
	in     *wire // frames to this end
	out    *wire // frames from this end
	closed bool
}

func (p *simPort) Info() dpdk.PortInfo { return p.info }

func (p *simPort) RxBurst(q int, pkts []*dpdk.Packet) int {
	if p.closed || q != 0 {
		return 0
	}
	return p.in.rx(pkts)
}

func (p *simPort) TxBurst(q int, pkts []*dpdk.Packet) int {
	if p.closed || q != 0 {
		return 0
	}
	return p.out.tx(pkts)
}

func (p *simPort) Stats() dpdk.Stats {
	return dpdk.Stats{RxPackets: p.in.stats.RxPackets, RxBytes: p.in.stats.RxBytes,
		TxPackets: p.out.stats.TxPackets, TxBytes: p.out.stats.TxBytes, TxErrors: p.out.stats.TxErrors}
}

func (p *simPort) Close() error {
	if !p.closed {
		p.closed = true
		p.in.drop()
	}
	return nil
}

// newSimLink is a link of the virtual testbed: end a on a host, whose
// port holds its sender back, end b on the switch, whose egress buffers.
// MACs are derived from the name, so two runs of a test put the same
// bytes on the wire.
func (tb *Testbed) newSimLink(name string) link {
	c := &tb.Cfg
	nsPerByte := 8e3 / float64(c.SpeedMbps)
	ab := &wire{clk: tb.clk, nsPerByte: nsPerByte, prop: int64(c.PropDelay), moved: &tb.moved}
	ba := &wire{clk: tb.clk, nsPerByte: nsPerByte, prop: int64(c.PropDelay), buffer: c.SwitchBuffer, moved: &tb.moved}
	h := fnv.New32a()
	h.Write([]byte(name))
	id := h.Sum32()
	mk := func(end byte, in, out *wire) *simPort {
		return &simPort{in: in, out: out, info: dpdk.PortInfo{Name: "sim:" + name + "." + string(end), Driver: "sim",
			MTU: 9000, RxQueues: 1, TxQueues: 1, SpeedMbps: c.SpeedMbps, NUMANode: -1,
			MAC: [6]byte{0x02, 0x53, byte(id >> 16), byte(id >> 8), byte(id), end}}}
	}
	a, b := mk('a', ba, ab), mk('b', ab, ba)
	tb.ports = append(tb.ports, a, b)
	tb.wires = append(tb.wires, ab, ba)
	return link{a, b}
}

// round polls every part once at the current virtual time and says
// whether anything moved.
func (tb *Testbed) round() bool {
	before := tb.moved
	tb.Req.Poll()
	tb.Resp.Poll()
	busy := tb.Injector.Poll()
	for _, d := range tb.Dumpers {
		if d.Poll() > 0 {
			busy = true
		}
	}
	return busy || tb.moved != before
}

// runNow polls until nothing moves at the current time.
func (tb *Testbed) runNow() {
	for i := 0; i < maxRounds && tb.round(); i++ {
	}
}

// nextEvent is the earliest event after now: a frame arriving, a
// transmitter freeing for a held-back sender, an RNIC timer.
func (tb *Testbed) nextEvent() (int64, bool) {
	now := tb.clk.t
	t, ok := int64(0), false
	take := func(v int64, has bool) {
		if has && v > now && (!ok || v < t) {
			t, ok = v, true
		}
	}
	for _, w := range tb.wires {
		take(w.next())
	}
	for _, d := range tb.nics {
		take(d.next())
	}
	take(tb.Req.NextEvent())
	take(tb.Resp.NextEvent())
	return t, ok
}

// Now implements trafficgen.Driver: the virtual time.
func (tb *Testbed) Now() time.Time { return time.Unix(0, tb.clk.t) }

// Wait implements trafficgen.Driver: it runs the virtual testbed until
// notify has a value, the time reaches until (when set), or nothing is
// left to happen (ErrStalled).
func (tb *Testbed) Wait(ctx context.Context, notify <-chan struct{}, until time.Time) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		tb.runNow()
		select {
		case <-notify:
			return nil
		default:
		}
		if !until.IsZero() && tb.clk.t >= until.UnixNano() {
			return nil
		}
		t, ok := tb.nextEvent()
		if !until.IsZero() && (!ok || until.UnixNano() < t) {
			t, ok = until.UnixNano(), true
		}
		if !ok {
			return ErrStalled
		}
		if t-virtualEpoch > virtualHorizon {
			return fmt.Errorf("lumina: virtual testbed: the test runs past %v of virtual time", time.Duration(virtualHorizon))
		}
		tb.clk.t = t
	}
}

// drain runs the virtual testbed until nothing is left to happen: every
// frame delivered, every copy captured, every timer done (at most a
// virtual second more).
func (tb *Testbed) drain() {
	end := tb.clk.t + int64(time.Second)
	for {
		tb.runNow()
		t, ok := tb.nextEvent()
		if !ok || t > end {
			return
		}
		tb.clk.t = t
	}
}

// virtualBurst is the RNICs' burst in the virtual mode: their transmit
// queue (4 x burst frames, about 1.4 us of 1 KB frames at 100 Gbit/s) is
// the pipeline a retransmission waits behind.
const virtualBurst = 4
