// Package soft is a software RoCEv2 RNIC: the verbs API of package verbs
// implemented in Go on any dpdk.Port, so that every RDMA service of the
// appliance runs, and is tested end to end, without RDMA hardware.
//
// A Device owns one queue of a port. One goroutine, the poll loop started by
// Start, owns all protocol state: it receives bursts, parses and checks them
// (ICRC included), runs the requester and responder state machines of every
// QP, fires timers, and transmits bursts. Applications reach it through
// per-QP send and receive rings (PostSend and PostRecv lock only the ring
// they fill) and through completion queues; control operations (Modify,
// Query, Destroy) take the loop lock between two iterations.
//
// What it implements: RC and UC (SEND, SEND with immediate, inline data, RDMA WRITE
// with and without immediate, RDMA READ, ATOMIC FETCH_ADD and CMP_SWAP) with
// path-MTU segmentation, PSN tracking, coalesced ACKs, NAK sequence error and
// go-back-N, the retransmission timer (4.096 us x 2^timeout) with retry_cnt,
// RNR NAK with rnr_retry, implied NAK for READ, responder resources with
// replay of duplicate READs and atomics; UD SEND with DETH and Q_Key check;
// several IPv4 and IPv6 GIDs per device, a static neighbour table plus ARP
// and IPv6 neighbour discovery;
// ICRC on transmit and receive; ECN-CE to CNP with a pacer whose scope is
// per port, per destination IP or per QP; optionally DCQCN rate control at
// the reaction point, pacing each RC QP (package dcqcn); mlx5-named
// counters; completion timestamps from dpdk.Nanotime or the clock the caller
// gives (Config.Clock, for virtual time). Behaviours in which
// ConnectX generations differ come from a Profile.
//
// UC QPs carry SEND and WRITE over a connection without acknowledgements.
//
// Not modelled yet: shared receive queues, memory windows.
//
// Steady-state operation allocates nothing per packet: work requests are
// copied into preallocated ring slots, frames are built in place into packet
// buffers from a pool, and parsing uses views.
package soft

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/verbs"
	"github.com/rdma-appliance/appliance/verbs/dcqcn"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// Config configures a Device.
type Config struct {
	// GIDs are the device's addresses (GID table entries 0, 1, ...), IPv4
	// and IPv6 mixed as needed. At least one is required.
	GIDs []netip.Addr
	// MAC is the source MAC; zero means the port's MAC.
	MAC header.MAC
	// Profile selects behaviours; the zero value means ProfileCX5.
	Profile Profile
	// Pool supplies transmit buffers. Nil makes the device create its own
	// of PoolSize buffers (default 8192), each large enough for MaxMTU
	// (4096 bytes when unset). A device that only ever sends small
	// messages, such as a prober's 50-byte UD probes, sets both low
	// (MaxMTU 256, a few hundred buffers): its memory is then a few
	// hundred kilobytes instead of 36 MB.
	Pool     *dpdk.Pool
	PoolSize int
	// Neighbors are static neighbour entries: IP address to MAC. Other
	// neighbours are resolved with ARP (IPv4) or neighbour discovery (IPv6).
	Neighbors map[netip.Addr]header.MAC
	// Queue is the port queue (RX and TX) the device polls.
	Queue int
	// MaxMTU caps the path MTU (default: 4096, or less if the port or the
	// pool's buffers cannot carry it), and sizes the buffers of the
	// device's own pool.
	MaxMTU verbs.MTU
	// Burst is the receive and transmit burst size (default 32).
	Burst int
	// Backoff paces the idle loop (default dpdk.DefaultBackoff with a
	// 50 us longest sleep).
	Backoff *dpdk.Backoff
	// Clock is the device's time source in nanoseconds: the loop's time
	// (timers, CNP pacing), completion timestamps and the DCQCN rate
	// limiter all read it. Nil means dpdk.Nanotime. A simulation that
	// steps the device with Poll gives it virtual time, so the device's
	// timing is the model's and not the host's; such a clock must not be
	// zero (zero means "unset" for the device's timers).
	Clock func() int64
	// Reproducible, for simulations whose traces must not change between
	// runs: memory keys come from a generator seeded with Seed instead of
	// crypto/rand, and regions get addresses from a per-device counter
	// (an I/O virtual address space, as an IOMMU gives) instead of their
	// host addresses, which differ from run to run. Keys are then
	// guessable: for tests and twins, never for a device peers can reach.
	Reproducible bool
	Seed         uint64
}

// Device is a software RNIC on one port queue. It implements verbs.Device.
type Device struct {
	name  string
	port  dpdk.Port
	queue int
	prof  Profile
	mac   header.MAC
	gids  []roce.GID
	info  verbs.DeviceInfo
	pool  *dpdk.Pool
	owned bool // the pool is ours
	burst int
	bo    dpdk.Backoff
	clock func() int64 // Config.Clock or dpdk.Nanotime
	// Reproducible mode (under objMu): the key generator and the next
	// region address.
	keyRNG   *rand.Rand
	nextIOVA uint64

	maxMTU int

	// objMu guards object creation (key table writes).
	objMu sync.Mutex
	keys  keyTable

	// mu is the loop lock: the poll loop holds it for one iteration at a
	// time; control operations take it in between (ctlWaiters makes the
	// loop step aside promptly).
	mu         sync.Mutex
	ctlWaiters atomic.Int32
	doorbell   atomic.Bool

	closed  atomic.Bool
	running bool // under runMu
	runMu   sync.Mutex
	cancel  context.CancelFunc
	done    chan struct{}

	cnt counters

	events   chan verbs.AsyncEvent
	evClosed bool // under mu

	// Loop-owned state (under mu).
	qps        []*qp // by QPN index
	qpGen      []uint8
	active     []*qp // live QPs, for the output and timer passes
	neigh      map[roce.GID]*neighbor
	arpPending int
	cnp        cnpPacer
	cache      *dpdk.Cache
	rxb        []*dpdk.Packet
	txq        []*dpdk.Packet
	txlen      []int // the queued packets' lengths: once handed to the port a packet may be freed and reused at once
	txn        int
	rp         roce.Packet
	bld        roce.Builder
	now        int64
	rr         int // the QP the next output pass starts with
}

var (
	_ verbs.Device      = (*Device)(nil)
	_ verbs.EventSource = (*Device)(nil)
)

// ErrConfig is wrapped by NewDevice errors about the configuration.
var ErrConfig = errors.New("soft: bad configuration")

// NewDevice creates a soft RNIC called name on a port queue and registers it
// with the "soft" provider, so verbs.DeviceList lists it and
// verbs.OpenDevice(name) finds it. Call Start to run its poll loop.
func NewDevice(name string, port dpdk.Port, cfg Config) (*Device, error) {
	if name == "" || port == nil {
		return nil, fmt.Errorf("%w: a name and a port are required", ErrConfig)
	}
	if len(cfg.GIDs) == 0 {
		return nil, fmt.Errorf("%w: at least one GID is required", ErrConfig)
	}
	pi := port.Info()
	if cfg.Queue < 0 || (pi.RxQueues > 0 && cfg.Queue >= pi.RxQueues) {
		return nil, fmt.Errorf("%w: queue %d of %d", ErrConfig, cfg.Queue, pi.RxQueues)
	}
	d := &Device{name: name, port: port, queue: cfg.Queue, prof: cfg.Profile.withDefaults(), mac: cfg.MAC,
		neigh: map[roce.GID]*neighbor{}, events: make(chan verbs.AsyncEvent, eventQueue), clock: cfg.Clock}
	if d.clock == nil {
		d.clock = dpdk.Nanotime
	}
	if cfg.Reproducible {
		d.keyRNG = rand.New(rand.NewPCG(cfg.Seed, 0x6b657973))
		d.nextIOVA = iovaBase
	}
	if d.mac.IsZero() {
		d.mac = pi.MAC
	}
	if d.prof.DCQCNRate {
		if d.prof.DCQCN.LineRate == 0 {
			speed := pi.SpeedMbps
			if speed <= 0 {
				speed = 100000
			}
			d.prof.DCQCN = dcqcn.Defaults(float64(speed) * 1e6)
		}
		if err := d.prof.DCQCN.Validate(); err != nil {
			return nil, fmt.Errorf("%w: profile %s: %w", ErrConfig, d.prof.Name, err)
		}
	}
	seen := map[roce.GID]bool{}
	for _, a := range cfg.GIDs {
		if !a.IsValid() {
			return nil, fmt.Errorf("%w: invalid GID address", ErrConfig)
		}
		g := roce.GIDFromAddr(a)
		if seen[g] {
			return nil, fmt.Errorf("%w: GID %v listed twice", ErrConfig, a)
		}
		seen[g] = true
		d.gids = append(d.gids, g)
	}
	for a, m := range cfg.Neighbors {
		d.neigh[roce.GIDFromAddr(a)] = &neighbor{mac: m, state: neighStatic}
	}
	d.burst = cfg.Burst
	if d.burst <= 0 {
		d.burst = 32
	}
	if cfg.Backoff != nil {
		d.bo = *cfg.Backoff
	} else {
		d.bo = dpdk.DefaultBackoff()
		d.bo.MaxSleep = 50 * time.Microsecond
	}
	if cfg.MaxMTU != 0 && cfg.MaxMTU.Bytes() == 0 {
		return nil, fmt.Errorf("%w: max MTU %v", ErrConfig, cfg.MaxMTU)
	}
	d.pool = cfg.Pool
	if d.pool == nil {
		n := cfg.PoolSize
		if n <= 0 {
			n = 8192
		}
		mtu := 4096
		if cfg.MaxMTU != 0 {
			mtu = cfg.MaxMTU.Bytes()
		}
		p, err := dpdk.NewPool("soft-"+name, n, dpdk.Headroom+mtu+256)
		if err != nil {
			return nil, fmt.Errorf("soft: device %s: %w", name, err)
		}
		d.pool, d.owned = p, true
	}
	// The MTU is what both the buffers and the port can carry.
	room := d.pool.DataRoom() - dpdk.Headroom - roce.MaxFrameOverhead
	maxMTU := verbs.MTU4096
	if cfg.MaxMTU != 0 {
		maxMTU = cfg.MaxMTU
	}
	for maxMTU > verbs.MTU256 && (maxMTU.Bytes() > room || (pi.MTU > 0 && maxMTU.Bytes()+roce.MaxFrameOverhead-18 > pi.MTU)) {
		maxMTU--
	}
	if maxMTU.Bytes() > room {
		return nil, fmt.Errorf("%w: pool buffers of %d bytes cannot carry a 256-byte MTU", ErrConfig, d.pool.DataRoom())
	}
	d.maxMTU = maxMTU.Bytes()
	d.cache = d.pool.NewCache(4 * d.burst)
	d.rxb = make([]*dpdk.Packet, d.burst)
	txCap := 4 * d.burst
	if d.prof.TxPipeline > 0 {
		txCap = max(d.prof.TxPipeline, d.burst)
	}
	d.txq = make([]*dpdk.Packet, txCap)
	d.txlen = make([]int, txCap)
	d.info = verbs.DeviceInfo{Name: name, Provider: "soft", Netdev: pi.Name, NodeGUID: macToGUID(d.mac), Ports: 1,
		MaxQP: maxQPs, MaxQPWR: maxQPWR, MaxSGE: maxSGE, MaxCQE: maxCQE, MaxMRSize: maxMRSize,
		MaxQPRdAtom: maxRdAtomic, MaxInline: maxInline, CompletionTimestamps: true, ClockHz: 1e9}
	if err := register(d); err != nil {
		return nil, err
	}
	return d, nil
}

// macToGUID makes an EUI-64 from a MAC, as RoCE NICs derive their node GUID.
func macToGUID(m header.MAC) uint64 {
	return uint64(m[0]^2)<<56 | uint64(m[1])<<48 | uint64(m[2])<<40 | 0xff<<32 | 0xfe<<24 |
		uint64(m[3])<<16 | uint64(m[4])<<8 | uint64(m[5])
}

// Name is the device name.
func (d *Device) Name() string { return d.name }

// MAC is the device's source MAC.
func (d *Device) MAC() header.MAC { return d.mac }

// GID returns entry i of the GID table.
func (d *Device) GID(i int) (verbs.GID, bool) {
	if i < 0 || i >= len(d.gids) {
		return verbs.GID{}, false
	}
	return verbs.GID(d.gids[i]), true
}

// Profile returns the device's behaviour profile.
func (d *Device) Profile() Profile { return d.prof }

// Counter reads one counter.
func (d *Device) Counter(c Counter) uint64 {
	if c < 0 || c >= numCounters {
		return 0
	}
	return d.cnt.get(c)
}

// Counters returns every counter by its mlx5 name.
func (d *Device) Counters() map[string]uint64 { return d.cnt.snapshot() }

// QPRate reports the DCQCN state of a QP: its current rate in bits/s and
// whether it is paced below line rate. ok is false for an unknown QP or when
// the profile has no DCQCN reaction point.
func (d *Device) QPRate(qpn uint32) (rate float64, limited, ok bool) {
	d.lockLoop()
	defer d.unlockLoop()
	q := d.lookupQP(qpn)
	if q == nil || !d.prof.DCQCNRate || q.typ == verbs.QPTypeUD {
		return 0, false, false
	}
	q.rp.Advance(d.clock())
	return q.rp.Rate(), q.rp.Limited(), true
}

// Info implements verbs.Device.
func (d *Device) Info() verbs.DeviceInfo { return d.info }

// QueryPort implements verbs.Device.
func (d *Device) QueryPort(port int) (verbs.PortAttr, error) {
	if port != 1 {
		return verbs.PortAttr{}, fmt.Errorf("soft: query port %d: %w", port, verbs.ErrInvalidArgument)
	}
	st := verbs.PortActive
	if d.closed.Load() {
		st = verbs.PortDown
	}
	gids := make([]verbs.GID, len(d.gids))
	for i, g := range d.gids {
		gids[i] = verbs.GID(g)
	}
	mtu := verbs.MTUFromBytes(d.maxMTU)
	return verbs.PortAttr{State: st, MaxMTU: mtu, ActiveMTU: mtu, GIDs: gids,
		SpeedMbps: d.port.Info().SpeedMbps}, nil
}

// AllocPD implements verbs.Device.
func (d *Device) AllocPD() (verbs.PD, error) {
	if d.closed.Load() {
		return nil, fmt.Errorf("soft: alloc pd: %w", verbs.ErrClosed)
	}
	return &pd{dev: d}, nil
}

// AddNeighbor adds or replaces a static neighbour entry.
func (d *Device) AddNeighbor(ip netip.Addr, mac header.MAC) {
	d.lockLoop()
	d.neigh[roce.GIDFromAddr(ip)] = &neighbor{mac: mac, state: neighStatic}
	d.unlockLoop()
}

// Start runs the poll loop on a new goroutine until ctx ends or Close.
func (d *Device) Start(ctx context.Context) error {
	d.runMu.Lock()
	defer d.runMu.Unlock()
	if d.closed.Load() {
		return fmt.Errorf("soft: start %s: %w", d.name, verbs.ErrClosed)
	}
	if d.running {
		return fmt.Errorf("soft: start %s: %w: already running", d.name, verbs.ErrBusy)
	}
	ctx, d.cancel = context.WithCancel(ctx)
	d.done = make(chan struct{})
	d.running = true
	go d.run(ctx, d.done)
	return nil
}

// Close stops the loop and unregisters the device. The port stays open: it
// belongs to the caller.
func (d *Device) Close() error {
	if d.closed.Swap(true) {
		return fmt.Errorf("soft: close %s: %w", d.name, verbs.ErrClosed)
	}
	d.runMu.Lock()
	if d.running {
		d.cancel()
		<-d.done
		d.running = false
	}
	d.runMu.Unlock()
	unregister(d)
	d.lockLoop()
	dpdk.FreeBulk(d.txq[:d.txn])
	d.txn = 0
	d.cache.Flush()
	d.evClosed = true
	close(d.events)
	d.unlockLoop()
	if d.owned {
		// The pool refuses while the port's peer still holds packets we
		// sent; those buffers stay mapped until the process ends rather
		// than pointing the peer at unmapped memory.
		_ = d.pool.Close()
	}
	return nil
}

// eventQueue is how many asynchronous events wait for a reader.
const eventQueue = 256

// AsyncEvents implements verbs.EventSource.
func (d *Device) AsyncEvents() <-chan verbs.AsyncEvent { return d.events }

// event reports an asynchronous event; the caller holds the loop lock.
func (d *Device) event(ev verbs.AsyncEvent) {
	if d.evClosed {
		return
	}
	select {
	case d.events <- ev:
	default:
		d.cnt.inc(CntAsyncEventsDropped)
	}
}

func (d *Device) lockLoop() {
	d.ctlWaiters.Add(1)
	d.mu.Lock()
}

func (d *Device) unlockLoop() {
	d.mu.Unlock()
	d.ctlWaiters.Add(-1)
}

// kick tells the loop new work was posted, so an idle loop counts its next
// iteration as busy and stops backing off.
func (d *Device) kick() { d.doorbell.Store(true) }

func (d *Device) run(ctx context.Context, done chan struct{}) {
	defer close(done)
	bo := d.bo
	for {
		select {
		case <-ctx.Done():
			return
		default:
		}
		d.mu.Lock()
		busy := d.poll()
		d.mu.Unlock()
		for d.ctlWaiters.Load() > 0 {
			runtime.Gosched()
		}
		if busy || d.doorbell.Swap(false) {
			bo.Busy()
		} else {
			bo.Idle()
		}
	}
}

// Poll runs one iteration of the loop on the caller's goroutine, for callers
// that drive the device themselves instead of calling Start (a single
// goroutine owning several devices, or a test stepping time). It reports
// whether there was work.
func (d *Device) Poll() bool {
	d.lockLoop()
	defer d.unlockLoop()
	return d.poll()
}

// poll is one loop iteration: receive and process a burst, flush the ACKs
// the burst made due, run timers, let QPs transmit, transmit the burst.
func (d *Device) poll() bool {
	d.now = d.clock()
	n := d.port.RxBurst(d.queue, d.rxb)
	for i := 0; i < n; i++ {
		d.input(d.rxb[i])
	}
	if n > 0 {
		dpdk.FreeBulk(d.rxb[:n])
		clear(d.rxb[:n])
	}
	busy := n > 0
	d.arpTimers()
	// The QPs take turns at the transmit queue, starting one further on
	// each pass, as a NIC arbitrates between its send queues: in a fixed
	// order the first QP would take every slot a port that paces at line
	// rate frees, and the others would wait for it to finish (Lumina's
	// Table 3 has three QPs' packets interleaved on one port).
	if k := len(d.active); k > 0 {
		d.rr++
		if d.rr >= k {
			d.rr = 0
		}
		for i := range k {
			j := d.rr + i
			if j >= k {
				j -= k
			}
			if d.active[j].output() {
				busy = true
			}
		}
	}
	if d.txn > 0 {
		d.flushTx()
		busy = true
	}
	return busy
}

// allocTx returns a transmit buffer, or nil when the pool is empty or the
// transmit queue is full (the caller retries on a later iteration).
func (d *Device) allocTx() *dpdk.Packet {
	if d.txn == len(d.txq) {
		d.flushTx()
		if d.txn == len(d.txq) {
			return nil
		}
	}
	var one [1]*dpdk.Packet
	if d.cache.GetBulk(one[:]) == 0 {
		d.cnt.inc(CntTxNoBuf)
		return nil
	}
	return one[0]
}

// send queues a built packet for transmission.
func (d *Device) send(pkt *dpdk.Packet) {
	d.txq[d.txn] = pkt
	d.txlen[d.txn] = pkt.Len()
	d.txn++
	if d.txn >= d.burst {
		d.flushTx()
	}
}

func (d *Device) flushTx() {
	if d.txn == 0 {
		return
	}
	n := d.port.TxBurst(d.queue, d.txq[:d.txn])
	if n > 0 {
		// The lengths recorded when queued: the port owns the packets
		// now (an AF_PACKET port has copied and freed them already, and
		// another poller may be reusing their buffers).
		var bytes uint64
		for _, l := range d.txlen[:n] {
			bytes += uint64(l)
		}
		d.cnt.add(CntTxPackets, uint64(n))
		d.cnt.add(CntTxBytes, bytes)
		copy(d.txq, d.txq[n:d.txn])
		copy(d.txlen, d.txlen[n:d.txn])
		clear(d.txq[d.txn-n : d.txn])
		d.txn -= n
	}
}

// txRoom says whether a packet can be queued now.
func (d *Device) txRoom() bool {
	if d.txn < len(d.txq) {
		return true
	}
	d.flushTx()
	return d.txn < len(d.txq)
}

// input handles one received frame.
func (d *Device) input(pkt *dpdk.Packet) {
	frame := pkt.Data()
	p := &d.rp
	if err := roce.Parse(frame, p); err != nil {
		if p.Net.L3Proto == header.EtherTypeARP && p.Net.L3Off > 0 {
			d.arpInput(frame, &p.Net)
			return
		}
		if p.Net.L4Proto == header.IPProtoICMPv6 && p.Net.L4Off > 0 && p.Net.L3Proto == header.EtherTypeIPv6 {
			d.ndInput(frame, &p.Net)
			return
		}
		d.cnt.inc(CntRxDiscards)
		return
	}
	d.cnt.inc(CntRxPackets)
	d.cnt.add(CntRxBytes, uint64(len(frame)))
	if p.VerifyICRC(frame) != nil {
		d.cnt.inc(CntRxICRCEncapsulated)
		return
	}
	dst := p.DstGID(frame)
	gi := d.gidIndex(dst)
	if gi < 0 {
		d.cnt.inc(CntRxDiscards)
		return
	}
	if p.Opcode == roce.OpCNP {
		d.cnpInput(frame, p)
		return
	}
	q := d.lookupQP(p.DestQP)
	if q == nil {
		d.cnt.inc(CntRxWrongQP)
		return
	}
	if p.ECN == header.ECNCE {
		d.ecnInput(q, frame, p)
	}
	switch q.typ {
	case verbs.QPTypeUD:
		d.udInput(q, frame, p, gi)
	case verbs.QPTypeRC:
		if p.Opcode.Transport() != roce.TransportRC {
			d.cnt.inc(CntRxDiscards)
			return
		}
		if p.SrcGID(frame) != q.dstGID || gi != q.sgidIdx {
			d.cnt.inc(CntRxWrongQP)
			return
		}
		if opIsResponse(p.Opcode) {
			q.requesterInput(frame, p)
		} else {
			q.responderInput(frame, p)
		}
	case verbs.QPTypeUC:
		if p.Opcode.Transport() != roce.TransportUC {
			d.cnt.inc(CntRxDiscards)
			return
		}
		if p.SrcGID(frame) != q.dstGID || gi != q.sgidIdx {
			d.cnt.inc(CntRxWrongQP)
			return
		}
		q.ucInput(frame, p)
	}
}

func opIsResponse(op roce.Opcode) bool {
	return op >= roce.RCReadResponseFirst && op <= roce.RCAtomicAck
}

func (d *Device) gidIndex(g roce.GID) int {
	for i := range d.gids {
		if d.gids[i] == g {
			return i
		}
	}
	return -1
}

// pathGIDs checks an address vector and returns its source and destination.
func (d *Device) pathGIDs(ah *verbs.AHAttr) (src, dst roce.GID, err error) {
	if ah.SGIDIndex < 0 || ah.SGIDIndex >= len(d.gids) {
		return src, dst, fmt.Errorf("%w: sgid_index %d (the table has %d)", verbs.ErrInvalidArgument, ah.SGIDIndex, len(d.gids))
	}
	if ah.Port != 0 && ah.Port != 1 {
		return src, dst, fmt.Errorf("%w: port %d", verbs.ErrInvalidArgument, ah.Port)
	}
	src, dst = d.gids[ah.SGIDIndex], roce.GID(ah.DGID)
	if src.IsIPv4() != dst.IsIPv4() {
		return src, dst, fmt.Errorf("%w: sgid %v and dgid %v are of different IP versions", verbs.ErrInvalidArgument, src, dst)
	}
	if ah.FlowLabel > roce.FlowLabelMask {
		return src, dst, fmt.Errorf("%w: flow label %#x", verbs.ErrInvalidArgument, ah.FlowLabel)
	}
	return src, dst, nil
}

// QPN layout: the low 16 bits index the QP table (from qpnIndexBase), the
// high 8 a generation, so a destroyed QP's number is not reused at once and
// stray packets for it do not land on its successor.
func (d *Device) addQP(q *qp) error {
	d.lockLoop()
	defer d.unlockLoop()
	if d.closed.Load() {
		return fmt.Errorf("soft: create qp: %w", verbs.ErrClosed)
	}
	idx := -1
	for i := qpnIndexBase; i < len(d.qps); i++ {
		if d.qps[i] == nil {
			idx = i
			break
		}
	}
	if idx < 0 {
		if len(d.qps) == 0 {
			d.qps = make([]*qp, qpnIndexBase)
			d.qpGen = make([]uint8, qpnIndexBase)
		}
		if len(d.qps) >= qpnIndexBase+maxQPs {
			return fmt.Errorf("soft: create qp: %w: %d QPs", verbs.ErrNoMemory, maxQPs)
		}
		idx = len(d.qps)
		d.qps = append(d.qps, nil)
		d.qpGen = append(d.qpGen, 0)
	}
	d.qpGen[idx]++
	q.qpn = uint32(d.qpGen[idx])<<16 | uint32(idx)
	d.qps[idx] = q
	d.active = append(d.active, q)
	return nil
}

func (d *Device) removeQP(q *qp) {
	idx := int(q.qpn & 0xffff)
	if idx < len(d.qps) && d.qps[idx] == q {
		d.qps[idx] = nil
	}
	for i, a := range d.active {
		if a == q {
			d.active = append(d.active[:i], d.active[i+1:]...)
			break
		}
	}
}

func (d *Device) lookupQP(qpn uint32) *qp {
	idx := int(qpn & 0xffff)
	if idx >= len(d.qps) {
		return nil
	}
	if q := d.qps[idx]; q != nil && q.qpn == qpn {
		return q
	}
	return nil
}

// The "soft" provider: devices register on creation and leave on Close.
var (
	regMu   sync.Mutex
	devices = map[string]*Device{}
)

type provider struct{}

func (provider) Name() string { return "soft" }

func (provider) Devices() ([]verbs.DeviceInfo, error) {
	regMu.Lock()
	defer regMu.Unlock()
	out := make([]verbs.DeviceInfo, 0, len(devices))
	for _, d := range devices {
		out = append(out, d.info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Open returns the device itself: a soft RNIC has one context, so closing
// what Open returned closes the device.
func (provider) Open(name string) (verbs.Device, error) {
	regMu.Lock()
	defer regMu.Unlock()
	d := devices[name]
	if d == nil {
		return nil, fmt.Errorf("%w: soft:%s", verbs.ErrNoDevice, name)
	}
	return d, nil
}

func register(d *Device) error {
	regMu.Lock()
	defer regMu.Unlock()
	if devices[d.name] != nil {
		return fmt.Errorf("%w: device name %q in use", ErrConfig, d.name)
	}
	devices[d.name] = d
	return nil
}

func unregister(d *Device) {
	regMu.Lock()
	defer regMu.Unlock()
	if devices[d.name] == d {
		delete(devices, d.name)
	}
}

func init() { verbs.Register(provider{}) }

// NextEvent reports the earliest time, on the device's clock, at which one
// of its timers is due: a retransmission deadline, the end of an RNR or
// NAK-reaction hold, a delayed NAK, a DCQCN pacing slot of a QP with
// requests waiting, a neighbour solicitation retry. ok is false when no timer
// runs. A discrete-event simulation that steps the device with Poll jumps
// its virtual clock to this time when nothing else is due; a timer that is
// already due reports a time at or before the device's last poll.
func (d *Device) NextEvent() (t int64, ok bool) {
	d.lockLoop()
	defer d.unlockLoop()
	take := func(v int64) {
		if v != 0 && (!ok || v < t) {
			t, ok = v, true
		}
	}
	for _, q := range d.active {
		r := &q.req
		take(r.deadline)
		take(r.holdUntil)
		if r.nakPending {
			take(r.nakAt)
		}
		if q.resp.ctlPending {
			take(q.resp.ctlAt)
		}
		if d.prof.DCQCNRate && q.typ != verbs.QPTypeUD {
			pending := r.next != q.sq.tail.Load()
			if q.typ == verbs.QPTypeUC {
				pending = q.sqCons != q.sq.tail.Load()
			}
			if pending {
				take(q.rp.NextTx())
			}
		}
	}
	if d.arpPending > 0 {
		for _, n := range d.neigh {
			if n.state == neighIncomplete {
				take(n.next)
			}
		}
	}
	return t, ok
}
