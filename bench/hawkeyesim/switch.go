package hawkeyesim

import (
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/rdma-appliance/appliance/bench/fabric"
	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
)

// Config is the switch program's: registers, tracing and the CPU poller.
// Zero fields take the defaults of DefaultConfig.
type Config struct {
	// EpochShift is log2 of the epoch length in ns: a packet's epoch is
	// its enqueue timestamp >> EpochShift, its ring slot the next two
	// bits down (ts[21:20] for 20, about 1 ms), the epoch id the bits
	// above them. Epochs are powers of two because the data plane picks
	// them with a bit slice, not a division.
	EpochShift uint
	// Flows is the flow table's slots per epoch (a power of two: the
	// hash's low bits index it).
	Flows int
	// MaxEvicted bounds the flows a switch CPU keeps after collisions
	// evicted them (a ring: the oldest go first, and a report reading an
	// epoch that lost some is marked Truncated).
	MaxEvicted int
	// ReadEpochs is how many of the newest epochs a poll reads (1..4),
	// and how far back tracing looks for paused packets and meters.
	ReadEpochs int
	// CollectInterval is the least time between two collections of one
	// switch: polls of other events inside it are answered by the data
	// plane (tracing goes on) but not collected again.
	CollectInterval int64
	// DedupNs: a switch handles an event id once per polling type within
	// this (ids are 8 bits and come round again).
	DedupNs int64
	// MTU of the report packets (IP bytes).
	MTU int
	// MaxPackets cuts a report after this many packets (0: no limit) and
	// marks it Truncated: what a lossy or budgeted report channel loses.
	MaxPackets int
	// PollPrio is the class polling packets travel in: a lossy class
	// PFC never pauses, strict above data, as the paper puts them with
	// CNPs.
	PollPrio uint8
	// QuietQdepth (bytes), when positive, keeps a switch's CPU out of a
	// flow trace where the victim's egress was neither paused nor queued
	// (an average queue below this over the epochs read): the polling
	// packet goes on, but the switch mirrors it to no CPU, and its
	// telemetry, which holds nothing about the victim's delay, is not
	// collected (the paper's poller drops useless telemetry; this drops
	// it in the data plane, per switch). A PFC trace always collects.
	// On Tofino the switch CPU decides it (hawkeyetofino.CPU's
	// QuietQdepth): the data plane copies the poll to the CPU in ingress,
	// before the victim's queue (egress state) is known, and the CPU
	// reads the registers and reports nothing.
	QuietQdepth float64
	// Retrace: a switch's CPU, when it takes the mirrored polling packet
	// (ReadDelay after the poll reached the switch), looks at the
	// trace's ports again and sends the PFC polling packets the data
	// plane would send now. The data plane traces once, at line rate,
	// as the pause stood when the poll passed; a pause that reached the
	// victim's egress later (a loop that closed after the detection, the
	// backpressure still spreading), or a port the poll's arrival port
	// feeds that was paused since, is in the registers the CPU reads but
	// was never traced: the analyzer then sees a paused port whose
	// upstream switch sent nothing. The re-trace's copies are ordinary
	// PFC polling packets, so the trace follows the pause hop by hop,
	// round a loop, as far as it has spread by then. Switches that
	// mirrored nothing to their CPU (Quiet) do not re-trace. It works
	// with NoPoller too (the re-trace is the CPU's, the collection is
	// left to the caller). hawkeyetofino.CPU's Retrace does it on Tofino,
	// through telemetry.p4's from_cpu.
	Retrace bool
	// MinPaused is how many paused packets in the epochs read make a port
	// count as paused for tracing when its pause timer has run out.
	MinPaused uint32
	// ReadDelay: the CPU reads the registers this long after the polling
	// packet reached the switch (the mirror to the CPU and the driver's
	// latency); 0 reads at once.
	ReadDelay int64
	// Report receives each collection (the analyzer's input); a
	// Collector's Report method fits.
	Report func(event uint8, victim hawkeyewire.FlowKey, r hawkeyewire.SwitchReport)
	// NoPoller leaves the switches' CPUs idle: polls are traced through
	// the data plane as ever, but nothing is collected on them. An
	// evaluation that reads every switch itself (Program.Collect), for
	// several collection methods alike, sets it.
	NoPoller bool
	// Reuse is told of a switch a poll reached while its collection was
	// rate-limited: the central collector holds its report from less
	// than CollectInterval ago and can file it under this incident too,
	// instead of leaving the switch out. A Collector's Reuse method fits.
	Reuse func(event uint8, victim hawkeyewire.FlowKey, sw string)
}

// DefaultConfig: 1 ms epochs (ts[21:20]), 4096 flows, all 4 epochs read,
// a switch collected at most every 2 ms, 1500-byte report packets,
// polling packets in the control class.
func DefaultConfig() Config {
	return Config{EpochShift: 20, Flows: 4096, MaxEvicted: 4096, ReadEpochs: 4, CollectInterval: 2_000_000,
		DedupNs: 100_000_000, MTU: 1500, PollPrio: fabric.PrioControl, MinPaused: 1}
}

func (c *Config) fill() error {
	d := DefaultConfig()
	if c.EpochShift == 0 {
		c.EpochShift = d.EpochShift
	}
	if c.Flows == 0 {
		c.Flows = d.Flows
	}
	if c.MaxEvicted == 0 {
		c.MaxEvicted = d.MaxEvicted
	}
	if c.ReadEpochs == 0 {
		c.ReadEpochs = d.ReadEpochs
	}
	if c.CollectInterval == 0 {
		c.CollectInterval = d.CollectInterval
	}
	if c.DedupNs == 0 {
		c.DedupNs = d.DedupNs
	}
	if c.MTU == 0 {
		c.MTU = d.MTU
	}
	if c.PollPrio == 0 {
		c.PollPrio = d.PollPrio
	}
	if c.MinPaused == 0 {
		c.MinPaused = d.MinPaused
	}
	switch {
	case c.EpochShift < 10 || c.EpochShift > 40:
		return fmt.Errorf("hawkeye: epoch shift %d: 10..40 (1 us .. 18 min)", c.EpochShift)
	case c.Flows < 1 || c.Flows&(c.Flows-1) != 0:
		return fmt.Errorf("hawkeye: %d flow slots: a power of two", c.Flows)
	case c.ReadEpochs < 1 || c.ReadEpochs > Epochs:
		return fmt.Errorf("hawkeye: read %d epochs: 1..%d", c.ReadEpochs, Epochs)
	case c.MTU < 576 || c.MTU > 9216:
		return fmt.Errorf("hawkeye: report MTU %d: 576..9216", c.MTU)
	case c.PollPrio >= fabric.NumPrio:
		return fmt.Errorf("hawkeye: polling priority %d", c.PollPrio)
	case c.MaxEvicted < 0 || c.MaxPackets < 0 || c.ReadDelay < 0 || c.CollectInterval < 0 || c.DedupNs < 0:
		return errors.New("hawkeye: negative bound")
	}
	return nil
}

// Epochs is the ring's size: two timestamp bits.
const Epochs = 4

// flowEntry is a flow table slot: the key (for the XOR compare of the
// paper) and the counters, 32 bytes.
type flowEntry struct {
	src, dst     uint32
	sport, dport uint16
	proto        uint8
	valid        bool
	in, out      uint16
	packets      uint32
	paused       uint32
	qsum         uint64
}

func (f *flowEntry) key() hawkeyewire.FlowKey {
	return hawkeyewire.FlowKey{Src: f.src, Dst: f.dst, Sport: f.sport, Dport: f.dport, Proto: f.proto}
}

func (f *flowEntry) record() hawkeyewire.FlowRecord {
	return hawkeyewire.FlowRecord{Key: f.key(), In: int(f.in), Out: int(f.out), Packets: f.packets, QdepthSum: f.qsum, Paused: f.paused}
}

// portCounters is an egress port's epoch registers.
type portCounters struct {
	packets, paused, pauseFrames uint32
	// pauseSent: XOFF frames this switch sent out of the port.
	pauseSent uint32
	qsum      uint64
}

// epochSlot is one epoch of the ring.
type epochSlot struct {
	epoch  int64 // timestamp >> EpochShift; -1: never used
	flows  []flowEntry
	ports  []portCounters
	meters []uint64 // [in*nports + out] bytes
}

// evicted is a flow the CPU received from the data plane.
type evicted struct {
	epoch int64
	rec   flowEntry
}

// switchState is one switch's registers and CPU.
type switchState struct {
	node, sw int
	name     string
	nports   int
	bw       []float64 // per port, for the pause timer
	peerSw   []bool    // the port leads to a switch
	ring     [Epochs]epochSlot
	// pauseUntil is the pause timer per port and priority, set from the
	// quanta of received PFC frames ([port*NumPrio + prio]).
	pauseUntil []int64
	ev         []evicted // ring of MaxEvicted
	evHead     int
	evN        int
	evLost     int64 // newest epoch that lost an evicted flow to the ring's bound; MinInt64 none
	// seen: when each event of each victim was handled, per trace kind
	// (0 flow trace, 1 PFC trace).
	seen        map[seenKey]int64
	lastCollect int64
	lastEvent   int   // event id of the last collection, -1 none
	lastEventAt int64 // when
	// lastReused/At: the event a rate-limited poll last passed to Reuse.
	lastReused   int
	lastReusedAt int64
}

// Stats are a program's counters.
type Stats struct {
	Packets     uint64 // data packets the telemetry counted
	Evictions   uint64 // flow slots taken over by a colliding flow
	EvictedLost uint64 // evicted flows the CPU's bound dropped
	Polls       uint64 // polling packets reaching switches
	PollsSent   uint64 // polling packets switches sent on (victim path and PFC copies)
	PFCCopies   uint64 // of them carrying the PFC trace
	Duplicates  uint64 // polling packets a switch had already handled
	Retraced    uint64 // PFC polling packets CPUs sent when they re-traced (Config.Retrace)
	Collections uint64 // CPU collections
	RateLimited uint64 // polls not collected because the switch was collected within CollectInterval
	ReportBytes uint64 // report bytes on the wire
	ReportPkts  uint64
}

// Program is Hawkeye's switch program on every switch of a simulation:
// the data-plane registers and polling logic, and each switch's CPU
// poller. It is single-threaded, like the simulation it hooks into.
type Program struct {
	cfg   Config
	sim   *fabric.Sim
	sw    []switchState
	mask  uint32
	Stats Stats
	// OnVisit, when set, sees every switch's handling of a polling
	// packet (the path a trace took).
	OnVisit func(Visit)

	// The Packet hook sees a packet at a switch right before the
	// Enqueue hook sees the same packet queued (fabric's switchRx calls
	// them in that order, or drops it in between), and only the former
	// gets the ingress port: remember it for the meters and the flow's
	// In, as Tofino bridges ingress_port to the egress pipeline.
	lastPkt *fabric.Packet
	lastSw  int
	lastIn  int
}

// New builds the program for every switch of sim. Attach its Hooks (with
// ChainHooks when others need them too).
func New(sim *fabric.Sim, cfg Config) (*Program, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	g := sim.Graph()
	pr := &Program{cfg: cfg, sim: sim, mask: uint32(cfg.Flows - 1), lastSw: -1}
	for si := 0; ; si++ {
		if !hasSwitch(sim, si) {
			break
		}
		node := sim.NodeOfSwitch(si)
		np := sim.NumPorts(node)
		st := switchState{node: node, sw: si, name: g.Nodes[node].Name, nports: np, bw: make([]float64, np), seen: map[seenKey]int64{},
			peerSw: make([]bool, np), pauseUntil: make([]int64, np*fabric.NumPrio), ev: make([]evicted, cfg.MaxEvicted),
			evLost: math.MinInt64, lastCollect: math.MinInt64 / 2, lastEvent: -1, lastReused: -1}
		for p, ref := range g.Ports(node) {
			st.bw[p] = g.Links[ref.Link].Bandwidth
			st.peerSw[p] = sim.SwitchOf(ref.Peer) >= 0
		}
		for k := range st.ring {
			st.ring[k] = epochSlot{epoch: -1, flows: make([]flowEntry, cfg.Flows), ports: make([]portCounters, np),
				meters: make([]uint64, np*np)}
		}
		pr.sw = append(pr.sw, st)
	}
	return pr, nil
}

// hasSwitch reports whether switch index si exists: the fabric numbers
// switches in graph order, so count the graph's switches.
func hasSwitch(sim *fabric.Sim, si int) bool {
	return si < len(sim.Graph().Switches())
}

// Config is the program's configuration with defaults filled in.
func (pr *Program) Config() Config { return pr.cfg }

// Hooks are the program's fabric hooks: Packet (ingress port, polling
// packets), Enqueue (telemetry) and Pause (PFC status).
func (pr *Program) Hooks() *fabric.Hooks {
	return &fabric.Hooks{Packet: pr.packet, Enqueue: pr.enqueue, Pause: pr.pause}
}

// SwitchName is the name of switch index sw.
func (pr *Program) SwitchName(sw int) string { return pr.sw[sw].name }

// slot returns the ring slot of the epoch of time now, reset when a new
// epoch lands in it (the wrap-around of the paper: the stored epoch id is
// older than the packet's).
func (st *switchState) slot(now int64, shift uint) *epochSlot {
	e := now >> shift
	s := &st.ring[e&(Epochs-1)]
	if s.epoch != e {
		clear(s.flows)
		clear(s.ports)
		clear(s.meters)
		s.epoch = e
	}
	return s
}

// flowIndex is the CRC-32 (IEEE) of the 5-tuple in the polling header's
// order (src, dst, proto, sport, dport, big-endian), as p4/hawkeyetofino's
// Hash<bit<32>>(CRC32) over the same fields computes it; the low bits
// index the table. Byte by byte over the table, so it allocates nothing.
func flowIndex(src, dst uint32, proto uint8, sport, dport uint16) uint32 {
	t := crc32.IEEETable
	c := ^uint32(0)
	for _, b := range [13]byte{byte(src >> 24), byte(src >> 16), byte(src >> 8), byte(src),
		byte(dst >> 24), byte(dst >> 16), byte(dst >> 8), byte(dst), proto,
		byte(sport >> 8), byte(sport), byte(dport >> 8), byte(dport)} {
		c = t[byte(c)^b] ^ c>>8
	}
	return ^c
}

// ProtoUDP is RoCEv2's IP protocol.
const ProtoUDP = 17

// FlowKeyOf is a simulated flow's 5-tuple as switches hash it.
func FlowKeyOf(sim *fabric.Sim, flow int32) hawkeyewire.FlowKey {
	src, dst, sport, dport := sim.FlowTuple(flow)
	return hawkeyewire.FlowKey{Src: src, Dst: dst, Sport: sport, Dport: dport, Proto: ProtoUDP}
}

// packet is the Packet hook: remember the ingress port of what may be
// enqueued next, and take polling packets.
func (pr *Program) packet(sw, port int, p *fabric.Packet) bool {
	if p.Kind == fabric.KindProbe && IsPollTag(p.Tag) {
		pr.poll(sw, port, p)
		return false
	}
	pr.lastPkt, pr.lastSw, pr.lastIn = p, sw, port
	return true
}

// enqueue is the Enqueue hook: the epoch telemetry of the data class.
// ACKs, NAKs and CNPs ride the lossy control class, which PFC never
// pauses and which holds no queue worth the name; counting them would
// only dilute the data queues' figures.
func (pr *Program) enqueue(sw, port int, p *fabric.Packet, qbytes int64) {
	if p.Kind != fabric.KindData {
		return
	}
	st := &pr.sw[sw]
	in := -1
	if p == pr.lastPkt && sw == pr.lastSw {
		in = pr.lastIn
	}
	// The depth the packet found: the queue ahead of it.
	depth := uint64(max(qbytes-int64(p.Size), 0))
	src, dst, sport, dport := pr.sim.FlowTuple(p.Flow)
	pr.count(st, pr.sim.Now(), in, port, int(p.Size), depth, pr.sim.Paused(st.node, port, p.Prio), src, dst, sport, dport)
}

// count is the data plane's telemetry of one data packet queued at
// egress port out of st at time now (in: its ingress port, -1 unknown):
// the epoch's port counters and port-pair meter, and the flow table slot
// of its 5-tuple, which a colliding flow takes over (the old entry goes
// to the CPU). The simulator's Enqueue hook and Switch.Packet share it.
func (pr *Program) count(st *switchState, now int64, in, out, size int, depth uint64, paused bool, src, dst uint32, sport, dport uint16) {
	pr.Stats.Packets++
	s := st.slot(now, pr.cfg.EpochShift)
	pc := &s.ports[out]
	pc.packets++
	pc.qsum += depth
	if paused {
		pc.paused++
	}
	if in >= 0 {
		s.meters[in*st.nports+out] += uint64(size)
	}
	fe := &s.flows[flowIndex(src, dst, ProtoUDP, sport, dport)&pr.mask]
	if !fe.valid || fe.src != src || fe.dst != dst || fe.sport != sport || fe.dport != dport || fe.proto != ProtoUDP {
		if fe.valid {
			pr.evict(st, s.epoch, fe)
		}
		*fe = flowEntry{src: src, dst: dst, sport: sport, dport: dport, proto: ProtoUDP, valid: true,
			in: uint16(max(in, 0)), out: uint16(out)}
	}
	fe.packets++
	fe.qsum += depth
	if paused {
		fe.paused++
	}
}

// evict hands a flow that lost its slot to the CPU.
func (pr *Program) evict(st *switchState, epoch int64, fe *flowEntry) {
	pr.Stats.Evictions++
	if len(st.ev) == 0 {
		pr.Stats.EvictedLost++
		st.evLost = max(st.evLost, epoch)
		return
	}
	i := (st.evHead + st.evN) % len(st.ev)
	if st.evN == len(st.ev) {
		pr.Stats.EvictedLost++
		st.evLost = max(st.evLost, st.ev[st.evHead].epoch)
		st.evHead = (st.evHead + 1) % len(st.ev)
		st.evN--
	}
	st.ev[i] = evicted{epoch: epoch, rec: *fe}
	st.evN++
}

// pause is the Pause hook: PFC frames received by a switch port set its
// pause timer from the quanta (512 bit times each at the port's speed;
// 0 resumes) and count in the epoch's port registers; an XOFF a switch
// sent counts at its own port too (the MAC's transmitted-PFC counter,
// which the CPU poller reads with the registers).
func (pr *Program) pause(node, port int, prio uint8, quanta uint16) {
	if quanta > 0 {
		if peer, pp := pr.sim.Peer(node, port); pr.sim.SwitchOf(peer) >= 0 {
			st := &pr.sw[pr.sim.SwitchOf(peer)]
			st.slot(pr.sim.Now(), pr.cfg.EpochShift).ports[pp].pauseSent++
		}
	}
	si := pr.sim.SwitchOf(node)
	if si < 0 {
		return
	}
	pr.pauseRx(&pr.sw[si], pr.sim.Now(), port, prio, quanta, true)
}

// pauseRx is a PFC pause time for priority prio received on port of st
// at now: the port's pause timer for that priority runs for quanta x 512
// bit times at the port's speed (0 resumes), and, with frame, a frame
// with pause time counts in the epoch's port registers (a frame pausing
// several priorities counts once).
func (pr *Program) pauseRx(st *switchState, now int64, port int, prio uint8, quanta uint16, frame bool) {
	until := now
	if quanta > 0 {
		until = now + int64(math.Ceil(float64(quanta)*512*1e9/st.bw[port]))
		if frame {
			st.slot(now, pr.cfg.EpochShift).ports[port].pauseFrames++
		}
	}
	st.pauseUntil[port*fabric.NumPrio+int(prio)] = until
}

// pauseLeft is how long port stays paused (any priority) by its timer.
func (st *switchState) pauseLeft(port int, now int64) int64 {
	var left int64
	for _, u := range st.pauseUntil[port*fabric.NumPrio : (port+1)*fabric.NumPrio] {
		left = max(left, u-now)
	}
	return left
}

// recent returns the ring slots of the ReadEpochs newest epochs up to
// now, oldest first, into buf.
func (pr *Program) recent(st *switchState, now int64, buf *[Epochs]*epochSlot) []*epochSlot {
	cur := now >> pr.cfg.EpochShift
	out := buf[:0]
	for e := cur - int64(pr.cfg.ReadEpochs) + 1; e <= cur; e++ {
		if e < 0 {
			continue
		}
		if s := &st.ring[e&(Epochs-1)]; s.epoch == e {
			out = append(out, s)
		}
	}
	return out
}

// ChainHooks joins several programs' hooks: each event goes to every
// hook in order; a Packet hook that consumes a packet (returns false)
// stops it there, so later hooks do not see it. Nil hooks and fields are
// skipped; a field only one program sets is passed through as it is, at
// no extra cost per packet.
func ChainHooks(hs ...*fabric.Hooks) *fabric.Hooks {
	var (
		enq, deq []func(int, int, *fabric.Packet, int64)
		pause    []func(int, int, uint8, uint16)
		pkt      []func(int, int, *fabric.Packet) bool
		deliver  []func(int, *fabric.Packet)
		ack      []func(int, int32, int64)
	)
	for _, h := range hs {
		if h == nil {
			continue
		}
		if h.Enqueue != nil {
			enq = append(enq, h.Enqueue)
		}
		if h.Dequeue != nil {
			deq = append(deq, h.Dequeue)
		}
		if h.Pause != nil {
			pause = append(pause, h.Pause)
		}
		if h.Packet != nil {
			pkt = append(pkt, h.Packet)
		}
		if h.Deliver != nil {
			deliver = append(deliver, h.Deliver)
		}
		if h.Ack != nil {
			ack = append(ack, h.Ack)
		}
	}
	out := &fabric.Hooks{}
	queueHook := func(fs []func(int, int, *fabric.Packet, int64)) func(int, int, *fabric.Packet, int64) {
		switch len(fs) {
		case 0:
			return nil
		case 1:
			return fs[0]
		}
		return func(sw, port int, p *fabric.Packet, q int64) {
			for _, f := range fs {
				f(sw, port, p, q)
			}
		}
	}
	out.Enqueue, out.Dequeue = queueHook(enq), queueHook(deq)
	switch len(pause) {
	case 0:
	case 1:
		out.Pause = pause[0]
	default:
		out.Pause = func(n, p int, prio uint8, q uint16) {
			for _, f := range pause {
				f(n, p, prio, q)
			}
		}
	}
	switch len(pkt) {
	case 0:
	case 1:
		out.Packet = pkt[0]
	default:
		out.Packet = func(sw, port int, p *fabric.Packet) bool {
			for _, f := range pkt {
				if !f(sw, port, p) {
					return false
				}
			}
			return true
		}
	}
	switch len(deliver) {
	case 0:
	case 1:
		out.Deliver = deliver[0]
	default:
		out.Deliver = func(h int, p *fabric.Packet) {
			for _, f := range deliver {
				f(h, p)
			}
		}
	}
	switch len(ack) {
	case 0:
	case 1:
		out.Ack = ack[0]
	default:
		out.Ack = func(h int, f int32, rtt int64) {
			for _, g := range ack {
				g(h, f, rtt)
			}
		}
	}
	return out
}
