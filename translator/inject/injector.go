package inject

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// TrafficPort is a port towards a test host.
type TrafficPort struct {
	Name string
	Port dpdk.Port
	// Addrs are the injector's own addresses on this port (the hosts'
	// gateway); it answers ARP for them and, as a proxy, for addresses it
	// routes out of another port, so hosts on one subnet reach each other
	// through it.
	Addrs []netip.Addr
}

// MirrorPort is a port towards a dumper.
type MirrorPort struct {
	Name string
	Port dpdk.Port
	// Weight is the dumper's share of the mirrored copies (its capacity).
	Weight int
}

// Route sends packets for Prefix out of traffic port Port to the next hop
// MAC (the host).
type Route struct {
	Prefix netip.Prefix
	Port   int
	MAC    header.MAC
}

// Balance is how mirrored copies are spread over the dumpers.
type Balance uint8

const (
	// BalanceWRR is Lumina's per-packet weighted round-robin.
	BalanceWRR Balance = iota
	// BalanceFlowHash picks the dumper by a hash of the connection, as a
	// flow-based mirror would.
	BalanceFlowHash
	// BalanceIngressPort sends the copies of traffic port i to dumper i
	// (modulo the dumpers): a switch's per-port mirror session, the
	// baseline of the paper's Figure 7b ("mirror traffic from an ingress
	// port to a specific server").
	BalanceIngressPort
)

// Config configures an Injector.
type Config struct {
	Traffic []TrafficPort
	Mirrors []MirrorPort
	Routes  []Route
	// RewritePort is the mirrored copies' UDP destination port (default
	// DefaultRewritePort).
	RewritePort uint16
	IterMode    intent.IterMode
	Balance     Balance
	// Pool supplies the mirrored copies and ARP replies.
	Pool *dpdk.Pool
	// MirrorSnap truncates mirrored copies to this many bytes (a Tofino
	// mirror session's max_pkt_len); 0 mirrors whole packets.
	MirrorSnap int
	// DecTTL makes forwarding decrement the IP TTL like a router.
	DecTTL bool
	// Burst is the receive burst size (default 32).
	Burst int
	// Seed seeds the mirrored copies' random UDP source ports.
	Seed uint64
	// Backoff paces the idle loop (default dpdk.DefaultBackoff).
	Backoff *dpdk.Backoff
}

// PortCounters are one port's counters; the data path adds, readers load.
type PortCounters struct {
	RxPackets atomic.Uint64
	RxRoCE    atomic.Uint64
	TxPackets atomic.Uint64
	TxDropped atomic.Uint64 // the port's transmit queue stayed full
	Mirrored  atomic.Uint64 // mirror ports: copies sent
	Dropped   atomic.Uint64 // drop events
	ECNMarked atomic.Uint64
	Corrupted atomic.Uint64
	ARPReply  atomic.Uint64
	NoRoute   atomic.Uint64
	Malformed atomic.Uint64 // frames that did not decode
	TTLExpire atomic.Uint64
}

func (c *PortCounters) snapshot(name, role string) mirror.PortStats {
	return mirror.PortStats{Name: name, Role: role, RxPackets: c.RxPackets.Load(), RxRoCE: c.RxRoCE.Load(),
		TxPackets: c.TxPackets.Load(), TxDropped: c.TxDropped.Load(), Mirrored: c.Mirrored.Load(),
		Dropped: c.Dropped.Load(), ECNMarked: c.ECNMarked.Load(), Corrupted: c.Corrupted.Load(),
		ARPReply: c.ARPReply.Load(), NoRoute: c.NoRoute.Load(), Malformed: c.Malformed.Load(), TTLExpire: c.TTLExpire.Load()}
}

func (c *PortCounters) reset() {
	for _, a := range []*atomic.Uint64{&c.RxPackets, &c.RxRoCE, &c.TxPackets, &c.TxDropped, &c.Mirrored, &c.Dropped,
		&c.ECNMarked, &c.Corrupted, &c.ARPReply, &c.NoRoute, &c.Malformed, &c.TTLExpire} {
		a.Store(0)
	}
}

// txq is a transmit batch for one port queue.
type txq struct {
	port dpdk.Port
	q    int
	n    int
	pkts [64]*dpdk.Packet
	cnt  *PortCounters
	// mirror marks a mirror port queue (its sent packets count as Mirrored).
	mirror bool
}

// Injector is Lumina's event injector on dpdk ports: one poll loop (the
// switch's pipeline) receives from every traffic port, assigns each RoCE
// packet its mirror sequence number and ingress timestamp, tracks ITER,
// matches the event table, mirrors the packet with metadata to a dumper
// chosen per packet, applies the event and forwards it. A single loop
// keeps sequence numbers and timestamps in one order, as one Tofino
// pipeline does.
type Injector struct {
	cfg   Config
	table *Table
	burst int

	// mu is held by the loop for one iteration; control operations take
	// it in between.
	mu sync.Mutex
	// loop counts the pipeline loop's passes (its utilisation).
	loop    dpdk.LoopStats
	running atomic.Bool

	traffic []PortCounters
	mirrors []PortCounters
	seq     atomic.Uint64
	rxRoCE  atomic.Uint64
	// nseq is the last sequence number given out; the loop owns it and
	// publishes it to seq once per burst, as it does rxRoCE, instead of
	// paying a locked add per packet.
	nseq   uint64
	routes []Route
	// routes4 are the IPv4 routes as masks, in the order of routes, so
	// IPv4 forwarding neither builds a netip.Addr nor calls Contains.
	routes4 []route4
	wrr     *mirror.WRR
	rnd     uint64
	lastTS  int64
	cache   *dpdk.Cache
	rxb     []*dpdk.Packet
	fwd     [][]txq // per traffic port, per TX queue (queue 0 used)
	mir     [][]txq // per mirror port, per TX queue
	// mirQMask is len(mir[i])-1 when that is a power of two, else -1:
	// the copy's queue is then picked with a mask instead of a division.
	mirQMask []int
	rp       roce.Packet  // rp.Net is the decoded frame of every packet
	outMAC   []header.MAC // each traffic port's MAC, read once
	rxq      []int        // each traffic port's receive queues, read once
	// spare holds copy buffers taken from the cache a burst at a time.
	spare  [32]*dpdk.Packet
	nspare int
	// roce counts the burst's RoCE packets before they reach the atomics.
	roce uint64
}

type route4 struct {
	net, mask uint32
	r         *Route
}

// ErrInjectorConfig is wrapped by New's configuration errors.
var ErrInjectorConfig = errors.New("inject: bad injector configuration")

// New builds an injector; Run starts it.
func New(cfg Config) (*Injector, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInjectorConfig, fmt.Sprintf(format, a...))
	}
	if len(cfg.Traffic) == 0 {
		return nil, bad("no traffic ports")
	}
	if cfg.Pool == nil {
		return nil, bad("no packet pool for mirrored copies")
	}
	if cfg.RewritePort == 0 {
		cfg.RewritePort = mirror.DefaultRewritePort
	}
	if cfg.Burst <= 0 {
		cfg.Burst = 32
	}
	for i, r := range cfg.Routes {
		if r.Port < 0 || r.Port >= len(cfg.Traffic) {
			return nil, bad("route %v: traffic port %d of %d", r.Prefix, r.Port, len(cfg.Traffic))
		}
		if !r.Prefix.IsValid() {
			return nil, bad("route %d: invalid prefix", i)
		}
	}
	in := &Injector{cfg: cfg, table: NewTable(cfg.IterMode), burst: cfg.Burst, rnd: cfg.Seed | 1,
		traffic: make([]PortCounters, len(cfg.Traffic)), mirrors: make([]PortCounters, len(cfg.Mirrors))}
	in.setRoutes(cfg.Routes)
	if len(cfg.Mirrors) > 0 {
		w := make([]int, len(cfg.Mirrors))
		for i, m := range cfg.Mirrors {
			w[i] = m.Weight
		}
		var err error
		if in.wrr, err = newWRR(w); err != nil {
			return nil, bad("%v", err)
		}
	}
	for i, tp := range cfg.Traffic {
		if tp.Port == nil {
			return nil, bad("traffic port %d has no port", i)
		}
		in.fwd = append(in.fwd, []txq{{port: tp.Port, cnt: &in.traffic[i]}})
		in.outMAC = append(in.outMAC, header.MAC(tp.Port.Info().MAC))
		in.rxq = append(in.rxq, max(tp.Port.Info().RxQueues, 1))
	}
	for i, mp := range cfg.Mirrors {
		if mp.Port == nil {
			return nil, bad("mirror port %d has no port", i)
		}
		nq := max(mp.Port.Info().TxQueues, 1)
		qs := make([]txq, nq)
		for q := range qs {
			qs[q] = txq{port: mp.Port, q: q, cnt: &in.mirrors[i], mirror: true}
		}
		in.mir = append(in.mir, qs)
		qmask := -1
		if nq&(nq-1) == 0 {
			qmask = nq - 1
		}
		in.mirQMask = append(in.mirQMask, qmask)
	}
	in.cache = cfg.Pool.NewCache(4 * cfg.Burst)
	in.rxb = make([]*dpdk.Packet, cfg.Burst)
	return in, nil
}

// setRoutes installs routes, longest prefix first so that the first
// match is the best.
func (in *Injector) setRoutes(routes []Route) {
	in.routes = append([]Route(nil), routes...)
	for i := 1; i < len(in.routes); i++ {
		for j := i; j > 0 && in.routes[j].Prefix.Bits() > in.routes[j-1].Prefix.Bits(); j-- {
			in.routes[j], in.routes[j-1] = in.routes[j-1], in.routes[j]
		}
	}
	in.routes4 = in.routes4[:0]
	for i := range in.routes {
		p := in.routes[i].Prefix
		if !p.Addr().Is4() {
			continue // an IPv4 address is in no IPv6 prefix, not even a mapped one
		}
		mask := ^uint32(0) << (32 - p.Bits()) // 0 for /0: shifts past 31 give 0
		in.routes4 = append(in.routes4, route4{net: binary.BigEndian.Uint32(p.Addr().AsSlice()) & mask, mask: mask, r: &in.routes[i]})
	}
}

// newWRR is NewWRR with a weight of 0 counting as 1.
func newWRR(weights []int) (*mirror.WRR, error) {
	w := make([]int, len(weights))
	for i, x := range weights {
		w[i] = max(x, 1)
	}
	return mirror.NewWRR(w)
}

// Apply changes a running injector between two bursts (a configuration
// reload): its routes, mirror weights, balancing, snap length, rewrite
// port and TTL decrement. It checks the update first and changes nothing
// when it is wrong.
func (in *Injector) Apply(u Update) error {
	for i, r := range u.Routes {
		if r.Port < 0 || r.Port >= len(in.cfg.Traffic) || !r.Prefix.IsValid() {
			return fmt.Errorf("%w: route %d (%v): traffic port %d of %d", ErrInjectorConfig, i, r.Prefix, r.Port, len(in.cfg.Traffic))
		}
	}
	if len(u.Weights) != len(in.cfg.Mirrors) {
		return fmt.Errorf("%w: %d mirror weights for %d mirror ports", ErrInjectorConfig, len(u.Weights), len(in.cfg.Mirrors))
	}
	var wrr *mirror.WRR
	if len(u.Weights) > 0 {
		var err error
		if wrr, err = newWRR(u.Weights); err != nil {
			return fmt.Errorf("%w: %v", ErrInjectorConfig, err)
		}
	}
	if u.RewritePort == 0 {
		u.RewritePort = mirror.DefaultRewritePort
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.setRoutes(u.Routes)
	in.wrr = wrr
	for i, w := range u.Weights {
		in.cfg.Mirrors[i].Weight = w
	}
	in.cfg.Balance, in.cfg.MirrorSnap, in.cfg.RewritePort, in.cfg.DecTTL = u.Balance, u.MirrorSnap, u.RewritePort, u.DecTTL
	return nil
}

// Table is the event table the injector matches.
func (in *Injector) Table() *Table { return in.table }

// Load compiles intents against the connections' metadata and loads the
// entries; the next burst matches them. It returns the entries.
func (in *Injector) Load(intents []intent.Intent, conns []intent.Conn, g intent.Geometry, opt intent.Options) ([]intent.Entry, error) {
	es, err := intent.Compile(intents, conns, g, opt)
	if err != nil {
		return nil, err
	}
	return es, in.table.Load(es, conns, g, opt)
}

// Reset zeroes the counters and the mirror sequence and restarts the
// round-robin, as before a test.
func (in *Injector) Reset() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.seq.Store(0)
	in.nseq = 0
	in.rxRoCE.Store(0)
	in.lastTS = 0
	for i := range in.traffic {
		in.traffic[i].reset()
	}
	for i := range in.mirrors {
		in.mirrors[i].reset()
	}
	if in.wrr != nil {
		in.wrr.Reset()
	}
}

// Stats returns the counters.
func (in *Injector) Stats() mirror.InjectorStats {
	s := mirror.InjectorStats{RxRoCE: in.rxRoCE.Load(), Mirrored: in.seq.Load()}
	for i := range in.traffic {
		s.Ports = append(s.Ports, in.traffic[i].snapshot(in.cfg.Traffic[i].Name, "traffic"))
	}
	for i := range in.mirrors {
		s.Ports = append(s.Ports, in.mirrors[i].snapshot(in.cfg.Mirrors[i].Name, "mirror"))
	}
	return s
}

// Run polls the traffic ports until ctx ends. Call it from the goroutine
// (pinned, where it matters) that owns the pipeline.
func (in *Injector) Run(ctx context.Context) error {
	if !in.running.CompareAndSwap(false, true) {
		return fmt.Errorf("inject: already running")
	}
	defer in.running.Store(false)
	bo := dpdk.DefaultBackoff()
	if in.cfg.Backoff != nil {
		bo = *in.cfg.Backoff
	}
	bo.Stats = &in.loop
	for ctx.Err() == nil {
		in.mu.Lock()
		busy := in.Poll()
		in.mu.Unlock()
		if busy {
			bo.Busy()
		} else {
			bo.Idle()
		}
	}
	in.mu.Lock()
	in.flushAll()
	in.cache.Flush()
	in.mu.Unlock()
	return nil
}

// Poll runs one iteration: a burst from every traffic port queue, then
// the transmit flushes. It reports whether there was work. Callers that do
// not use Run (tests stepping the pipeline) call it directly.
func (in *Injector) Poll() bool {
	busy := false
	for i := range in.cfg.Traffic {
		tp := &in.cfg.Traffic[i]
		for q := 0; q < in.rxq[i]; q++ {
			n := tp.Port.RxBurst(q, in.rxb)
			if n == 0 {
				continue
			}
			busy = true
			in.traffic[i].RxPackets.Add(uint64(n))
			in.table.Lock()
			for _, pkt := range in.rxb[:n] {
				in.input(i, pkt)
			}
			in.table.Unlock()
			if in.roce > 0 {
				in.traffic[i].RxRoCE.Add(in.roce)
				in.rxRoCE.Add(in.roce)
				in.seq.Store(in.nseq)
				in.roce = 0
			}
			clear(in.rxb[:n])
		}
	}
	if busy {
		in.flushAll()
		// Unused copy buffers go back to the cache, so none sit in the
		// stash between bursts.
		if in.nspare > 0 {
			in.cache.PutBulk(in.spare[:in.nspare])
			clear(in.spare[:in.nspare])
			in.nspare = 0
		}
	}
	return busy
}

func (in *Injector) flushAll() {
	for i := range in.mir {
		for q := range in.mir[i] {
			in.flush(&in.mir[i][q])
		}
	}
	for i := range in.fwd {
		in.flush(&in.fwd[i][0])
	}
}

// flush transmits a batch, retrying a full queue briefly (a switch buffers
// a burst); what still does not fit is dropped and counted.
func (in *Injector) flush(t *txq) {
	if t.n == 0 {
		return // most queues are idle in a burst: skip their counters' locked adds
	}
	sent := 0
	for try := 0; sent < t.n && try < 64; try++ {
		k := t.port.TxBurst(t.q, t.pkts[sent:t.n])
		sent += k
		if k == 0 {
			runtime.Gosched()
		}
	}
	if t.mirror {
		t.cnt.Mirrored.Add(uint64(sent))
	}
	t.cnt.TxPackets.Add(uint64(sent))
	if sent < t.n {
		t.cnt.TxDropped.Add(uint64(t.n - sent))
		dpdk.FreeBulk(t.pkts[sent:t.n])
	}
	clear(t.pkts[:t.n])
	t.n = 0
}

func (in *Injector) enqueue(t *txq, pkt *dpdk.Packet) {
	if t.n == len(t.pkts) {
		in.flush(t)
	}
	t.pkts[t.n] = pkt
	t.n++
}

func (in *Injector) rand16() uint16 {
	// xorshift64*
	in.rnd ^= in.rnd >> 12
	in.rnd ^= in.rnd << 25
	in.rnd ^= in.rnd >> 27
	return uint16((in.rnd * 2685821657736338717) >> 48)
}

// route4 returns the route for the IPv4 address dst (big-endian), or nil.
func (in *Injector) route4(dst uint32) *Route {
	for i := range in.routes4 {
		if dst&in.routes4[i].mask == in.routes4[i].net {
			return in.routes4[i].r
		}
	}
	return nil
}

// route returns the route for dst, or nil.
func (in *Injector) route(dst netip.Addr) *Route {
	for i := range in.routes {
		if in.routes[i].Prefix.Contains(dst) {
			return &in.routes[i]
		}
	}
	return nil
}

// input handles one frame from traffic port i.
func (in *Injector) input(i int, pkt *dpdk.Packet) {
	frame := pkt.Data()
	cnt := &in.traffic[i]
	np := &in.rp.Net
	if err := header.Decode(frame, np); err != nil {
		cnt.Malformed.Add(1)
		pkt.Free()
		return
	}
	var r *Route
	switch np.L3Proto {
	case header.EtherTypeARP:
		in.arp(i, pkt)
		return
	case header.EtherTypeIPv4:
		r = in.route4(binary.BigEndian.Uint32(frame[np.L3Off+16 : np.L3Off+20]))
	case header.EtherTypeIPv6:
		r = in.route(np.IPv6(frame).DstAddr())
	default:
		cnt.NoRoute.Add(1)
		pkt.Free()
		return
	}
	if r == nil {
		cnt.NoRoute.Add(1)
		pkt.Free()
		return
	}
	ev := mirror.EventNone
	if np.L4Proto == header.IPProtoUDP && np.UDP(frame).DstPort() == roce.UDPPort && !np.Fragment {
		// Every packet to the RoCE port with a whole BTH is RoCE, as
		// for the Tofino program: a malformed one (a length, pad count
		// or opcode a NIC should not send) is counted, and still
		// mirrored and matched, since the NIC under test sent it.
		ok := true
		if err := roce.ParseDecoded(frame, roce.UDPPort, &in.rp); err != nil {
			cnt.Malformed.Add(1)
			ok = bthOnly(frame, &in.rp)
		}
		if ok {
			in.roce++
			ev, _ = in.table.Lookup(&in.rp, frame)
			in.mirror(i, frame, ev, pkt.Timestamp)
		}
	}
	switch ev {
	case mirror.EventDrop:
		cnt.Dropped.Add(1)
		pkt.Free()
		return
	case mirror.EventECN:
		cnt.ECNMarked.Add(1)
		if np.L3Proto == header.EtherTypeIPv4 {
			np.IPv4(frame).SetECNUpdateChecksum(header.ECNCE)
		} else {
			np.IPv6(frame).SetECN(header.ECNCE)
		}
	case mirror.EventBitError:
		cnt.Corrupted.Add(1)
		// Flip bits the ICRC covers but IP does not check, so the packet
		// travels on and the receiver's ICRC check must catch it: the
		// IPv4 identification (with its header checksum kept valid), or,
		// in IPv6 which has no such field, a reserved bit of the BTH
		// (the Tofino program's choice: the ICRC, after the payload, is
		// beyond its parser).
		if np.L3Proto == header.EtherTypeIPv4 {
			ip := np.IPv4(frame)
			ip.SetID(ip.ID() ^ 0x0101)
			ip.UpdateChecksum()
		} else {
			frame[in.rp.BTHOff+8] ^= 0x01
		}
	}
	if in.cfg.DecTTL {
		if np.L3Proto == header.EtherTypeIPv4 {
			if !np.IPv4(frame).DecTTL() {
				cnt.TTLExpire.Add(1)
				pkt.Free()
				return
			}
		} else if frame[np.L3Off+7] <= 1 {
			cnt.TTLExpire.Add(1)
			pkt.Free()
			return
		} else {
			frame[np.L3Off+7]--
		}
	}
	eth := np.Ethernet(frame)
	eth.SetDst(r.MAC)
	eth.SetSrc(in.outMAC[r.Port])
	in.enqueue(&in.fwd[r.Port][0], pkt)
}

// bthOnly fills p from the BTH of a frame that roce.ParseDecoded
// rejected (p.Net decoded), when the frame holds a whole one: the fields
// the event match and the mirror use.
func bthOnly(frame []byte, p *roce.Packet) bool {
	off := p.Net.PayloadOff
	if p.Net.PayloadLen < roce.BTHLen || off+roce.BTHLen > len(frame) {
		return false
	}
	bth := frame[off : off+roce.BTHLen]
	p.Opcode = roce.Opcode(bth[0])
	p.DestQP = binary.BigEndian.Uint32(bth[4:8]) & roce.QPNMask
	p.PSN = binary.BigEndian.Uint32(bth[8:12]) & roce.PSNMask
	p.SrcPort = binary.BigEndian.Uint16(frame[p.Net.L4Off:])
	p.BTHOff = off
	return true
}

// mirror makes the mirrored copy of a RoCE packet (decoded in in.rp),
// received on traffic port port, before its event takes effect.
//
// The ingress timestamp is the driver's receive time when it stamped the
// packet (AF_PACKET: the kernel's, per packet; DPDK: one clock read per
// burst), which is also the more faithful ingress time; only unstamped
// packets (in-process rings) cost a clock read here.
func (in *Injector) mirror(port int, frame []byte, ev mirror.EventType, rxTS int64) {
	in.nseq++
	seq := in.nseq
	ts := rxTS
	if ts == 0 {
		ts = dpdk.Nanotime()
	}
	if ts <= in.lastTS {
		ts = in.lastTS + 1 // strictly increasing, as the trace check expects
	}
	in.lastTS = ts
	if len(in.mir) == 0 {
		return
	}
	if in.nspare == 0 {
		in.nspare = in.cache.GetBulk(in.spare[:])
		if in.nspare == 0 {
			// No buffer: the copy is lost, which the integrity check
			// will see as a sequence gap; count it on the first mirror
			// port.
			in.mirrors[0].TxDropped.Add(1)
			return
		}
	}
	in.nspare--
	c := in.spare[in.nspare]
	in.spare[in.nspare] = nil
	n := len(frame)
	if s := in.cfg.MirrorSnap; s > 0 && s < n {
		n = max(s, in.rp.Net.L4Off+header.UDPHeaderLen)
	}
	buf := c.Buffer()
	if n > len(buf) {
		n = len(buf)
	}
	copy(buf, frame[:n])
	_ = c.SetLen(n)
	sport := in.rand16()
	mirror.WriteCopy(buf[:n], frame, &in.rp.Net, mirror.Meta{Seq: seq, Timestamp: ts, Event: ev, OrigSrcPort: in.rp.SrcPort},
		sport, in.cfg.RewritePort)
	var m int
	switch in.cfg.Balance {
	case BalanceFlowHash:
		h := uint32(in.rp.DestQP)*2654435761 ^ uint32(in.rp.SrcPort)
		m = int(h % uint32(len(in.mir)))
	case BalanceIngressPort:
		m = port % len(in.mir)
	default:
		m = in.wrr.Next()
	}
	qs := in.mir[m]
	// Several transmit queues stand for the dumper NIC's RSS over the
	// random source port (ring links have no RSS of their own).
	q := int(sport) & in.mirQMask[m]
	if in.mirQMask[m] < 0 {
		q = int(sport) % len(qs)
	}
	in.enqueue(&qs[q], c)
}

// arp answers requests for the injector's own addresses and, as a proxy,
// for addresses routed out of another port; everything else is dropped.
func (in *Injector) arp(i int, pkt *dpdk.Packet) {
	frame := pkt.Data()
	a := in.rp.Net.ARP(frame)
	cnt := &in.traffic[i]
	if !a.IsValid() || a.Op() != header.ARPOpRequest {
		pkt.Free()
		return
	}
	target := netip.AddrFrom4(a.TargetIP())
	ours := false
	for _, x := range in.cfg.Traffic[i].Addrs {
		if x == target {
			ours = true
		}
	}
	if !ours {
		if r := in.route(target); r != nil && r.Port != i {
			ours = true
		}
	}
	if !ours {
		pkt.Free()
		return
	}
	mac := header.MAC(in.cfg.Traffic[i].Port.Info().MAC)
	// Answer in place: the request becomes the reply.
	sha, spa := a.SenderMAC(), a.SenderIP()
	a.Encode(header.ARPOpReply, mac, a.TargetIP(), sha, spa)
	eth := in.rp.Net.Ethernet(frame)
	eth.SetDst(sha)
	eth.SetSrc(mac)
	cnt.ARPReply.Add(1)
	in.enqueue(&in.fwd[i][0], pkt)
}
