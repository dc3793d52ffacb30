// Package ring is the in-process port driver: a Link joins two ports with one
// bounded single-producer single-consumer ring per queue and direction, like
// DPDK's net_ring PMD. Transmitting hands packet pointers to the peer, so a
// burst costs a few atomic operations and copies nothing.
//
// Links are what tests and the lab wire software twins together with. A link
// can be named, so that services opened from port strings find each other:
// "ring:lab0.a" and "ring:lab0.b" are the two ends of link "lab0".
package ring

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/rdma-appliance/appliance/dpdk"
)

// DefaultRingSize is the per-queue ring size when Config.RingSize is 0.
const DefaultRingSize = 1024

type cacheLinePad [64]byte

// spsc is a bounded lock-free queue for one producer and one consumer. Each
// side caches the other's index to touch the shared cache line only when its
// cached view says the ring is full (producer) or empty (consumer).
type spsc struct {
	_          cacheLinePad
	head       atomic.Uint64 // next slot to consume; written by the consumer
	_          cacheLinePad
	tail       atomic.Uint64 // next slot to fill; written by the producer
	_          cacheLinePad
	cachedHead uint64 // producer's view of head
	_          cacheLinePad
	cachedTail uint64 // consumer's view of tail
	_          cacheLinePad
	mask       uint64
	slots      []*dpdk.Packet
}

func newSPSC(size int) *spsc {
	n := 1
	for n < size {
		n <<= 1
	}
	return &spsc{mask: uint64(n - 1), slots: make([]*dpdk.Packet, n)}
}

func (r *spsc) enqueue(pkts []*dpdk.Packet) int {
	tail := r.tail.Load()
	free := r.mask + 1 - (tail - r.cachedHead)
	if free < uint64(len(pkts)) {
		r.cachedHead = r.head.Load()
		free = r.mask + 1 - (tail - r.cachedHead)
	}
	n := min(uint64(len(pkts)), free)
	for i := uint64(0); i < n; i++ {
		r.slots[(tail+i)&r.mask] = pkts[i]
	}
	r.tail.Store(tail + n)
	return int(n)
}

func (r *spsc) dequeue(pkts []*dpdk.Packet) int {
	head := r.head.Load()
	avail := r.cachedTail - head
	if avail < uint64(len(pkts)) {
		r.cachedTail = r.tail.Load()
		avail = r.cachedTail - head
	}
	n := min(uint64(len(pkts)), avail)
	for i := uint64(0); i < n; i++ {
		j := (head + i) & r.mask
		pkts[i] = r.slots[j]
		r.slots[j] = nil
	}
	r.head.Store(head + n)
	return int(n)
}

func (r *spsc) len() int { return int(r.tail.Load() - r.head.Load()) }

// Port is one end of a Link.
type Port struct {
	info   dpdk.PortInfo
	id     uint16
	rx     []*spsc // rings this end receives from
	tx     []*spsc // rings this end transmits into (the peer's rx)
	rxq    []dpdk.QueueCounters
	txq    []dpdk.QueueCounters
	closed atomic.Bool
	peer   *Port
	link   *Link
}

var _ dpdk.Port = (*Port)(nil)

// Link is a pair of connected ports.
type Link struct {
	name string
	a, b *Port
}

// Config shapes a link. Queues are symmetric: queue i of one end feeds queue i
// of the other.
type Config struct {
	Queues   int // default 1
	RingSize int // default DefaultRingSize
	MTU      int // default 9000
}

// NewLink creates a connected pair of ports named name.a and name.b.
func NewLink(name string, cfg Config) *Link {
	if cfg.Queues <= 0 {
		cfg.Queues = 1
	}
	if cfg.RingSize <= 0 {
		cfg.RingSize = DefaultRingSize
	}
	if cfg.MTU <= 0 {
		cfg.MTU = 9000
	}
	l := &Link{name: name}
	ab := make([]*spsc, cfg.Queues)
	ba := make([]*spsc, cfg.Queues)
	for i := range ab {
		ab[i], ba[i] = newSPSC(cfg.RingSize), newSPSC(cfg.RingSize)
	}
	mk := func(end string, rx, tx []*spsc) *Port {
		id := dpdk.NewPortID()
		p := &Port{id: id, rx: rx, tx: tx, link: l,
			rxq: make([]dpdk.QueueCounters, cfg.Queues), txq: make([]dpdk.QueueCounters, cfg.Queues)}
		p.info = dpdk.PortInfo{Name: "ring:" + name + "." + end, Driver: "ring", MTU: cfg.MTU,
			RxQueues: cfg.Queues, TxQueues: cfg.Queues, NUMANode: -1,
			// A locally administered unicast address that says which link end it is.
			MAC: [6]byte{0x02, 0x52, 0x4e, byte(id >> 8), byte(id), end[0]}}
		return p
	}
	l.a = mk("a", ba, ab)
	l.b = mk("b", ab, ba)
	l.a.peer, l.b.peer = l.b, l.a
	return l
}

// Name is the link's name.
func (l *Link) Name() string { return l.name }

// A is the first end.
func (l *Link) A() *Port { return l.a }

// B is the second end.
func (l *Link) B() *Port { return l.b }

// Info describes the port.
func (p *Port) Info() dpdk.PortInfo { return p.info }

// Peer is the other end of the link.
func (p *Port) Peer() *Port { return p.peer }

// SetMAC changes the port's reported MAC address (software twins configure it).
func (p *Port) SetMAC(mac [6]byte) { p.info.MAC = mac }

// RxBurst implements dpdk.Port.
func (p *Port) RxBurst(q int, pkts []*dpdk.Packet) int {
	if q < 0 || q >= len(p.rx) {
		return 0
	}
	n := p.rx[q].dequeue(pkts)
	if n == 0 {
		return 0
	}
	var bytes uint64
	for _, pkt := range pkts[:n] {
		pkt.Port = p.id
		pkt.Queue = uint16(q)
		bytes += uint64(pkt.Len())
	}
	c := &p.rxq[q]
	c.RxPackets.Add(uint64(n))
	c.RxBytes.Add(bytes)
	return n
}

// TxBurst implements dpdk.Port. When the peer's ring is full it accepts what
// fits and leaves the rest with the caller, as a full hardware TX ring would.
// Timestamps are not touched: the receiver sees the sender's transmit time
// unless the receiving service stamps packets itself.
func (p *Port) TxBurst(q int, pkts []*dpdk.Packet) int {
	if q < 0 || q >= len(p.tx) || len(pkts) == 0 || p.closed.Load() || p.peer.closed.Load() {
		return 0
	}
	// Count bytes before the handoff: once enqueued, a packet belongs to
	// the receiver, which may free it and see it reused at once. The
	// packets left behind stay ours and are taken off again.
	var bytes uint64
	for _, pkt := range pkts {
		bytes += uint64(pkt.Len())
	}
	n := p.tx[q].enqueue(pkts)
	if n == 0 {
		return 0
	}
	for _, pkt := range pkts[n:] {
		bytes -= uint64(pkt.Len())
	}
	c := &p.txq[q]
	c.TxPackets.Add(uint64(n))
	c.TxBytes.Add(bytes)
	return n
}

// Pending is the number of packets waiting in the receive rings.
func (p *Port) Pending() int {
	n := 0
	for _, r := range p.rx {
		n += r.len()
	}
	return n
}

// Stats implements dpdk.Port.
func (p *Port) Stats() dpdk.Stats {
	s := dpdk.SumCounters(p.rxq)
	s.Add(dpdk.SumCounters(p.txq))
	return s
}

// Close stops the port: transmits in either direction fail from now on, and
// packets still queued towards this port are freed.
func (p *Port) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	var burst [64]*dpdk.Packet
	for _, r := range p.rx {
		for n := r.dequeue(burst[:]); n > 0; n = r.dequeue(burst[:]) {
			dpdk.FreeBulk(burst[:n])
		}
	}
	return nil
}

// Named links, so ports can be opened by string through dpdk.Open.
var (
	namedMu sync.Mutex
	named   = map[string]*Link{}
)

// Named returns the link called name, creating it with cfg the first time.
func Named(name string, cfg Config) *Link {
	namedMu.Lock()
	defer namedMu.Unlock()
	if l := named[name]; l != nil {
		return l
	}
	l := NewLink(name, cfg)
	named[name] = l
	return l
}

// Forget removes a named link so a later Named call creates a fresh one.
func Forget(name string) {
	namedMu.Lock()
	defer namedMu.Unlock()
	delete(named, name)
}

type driver struct{}

// Open opens "LINK.a" or "LINK.b", creating the named link on first use.
func (driver) Open(dev string, cfg dpdk.Config) (dpdk.Port, error) {
	name, end, ok := strings.Cut(dev, ".")
	if !ok || name == "" || (end != "a" && end != "b") {
		return nil, fmt.Errorf("%w: ring device %q: want LINK.a or LINK.b", dpdk.ErrNoDevice, dev)
	}
	q := max(cfg.RxQueues, cfg.TxQueues)
	l := Named(name, Config{Queues: q, RingSize: cfg.RingSize})
	p := l.a
	if end == "b" {
		p = l.b
	}
	if len(p.rx) < q {
		return nil, fmt.Errorf("ring link %q has %d queues, %d asked", name, len(p.rx), q)
	}
	return p, nil
}

func init() { dpdk.RegisterDriver("ring", driver{}) }
