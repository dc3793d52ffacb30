package hostmesh

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"sort"

	"github.com/rdma-appliance/appliance/bench/fabric"
	"github.com/rdma-appliance/appliance/collector/hostmeshanalyzer"
)

// SimConfig drives agents inside the fabric simulator.
type SimConfig struct {
	// Core is every host's agent configuration; in the simulator the
	// intervals are usually scaled down (see Eval).
	Core Config
	// PostDelay and PollDelay bound the host's share of a probe, drawn
	// uniformly per probe: from the application's post (T1) to the RNIC
	// taking the send, and from the receive completion to the
	// application's poll (T4).
	PostDelay, PollDelay [2]int64
	// ICMPEvery is the least time between two ICMP time-exceeded answers
	// of one switch (their CPUs rate-limit them).
	ICMPEvery int64
	// BatchEvery is how often agents upload.
	BatchEvery int64
	// Prio is the class probes travel in (the RDMA class, lossless).
	Prio uint8
	// PGPollEvery is how often a poller reads every switch port's ingress
	// discards of the probes' class (the switches' PG drop counters, as
	// gNMI or SONiC's counterpoll pg-drop sample them) and uploads the
	// changes as a batch of its own; 0 turns the poller off.
	PGPollEvery int64
	Seed        uint64
}

// Probe packet tags: what a simulated UD packet is, and its key.
const (
	tagMagic     = uint64(0x484d) << 48
	tagProbe     = uint64(1) << 44
	tagTrace     = uint64(2) << 44
	tagICMP      = uint64(3) << 44
	tagKindMask  = uint64(0xf) << 44
	tagKeyMask   = uint64(1)<<44 - 1
	udProbeBytes = 70 + ProbeSize // Ethernet, IPv4, UDP, BTH, DETH, ICRC, FCS around the payload
)

// SimAgent runs one agent Core per machine of a simulated cluster, on
// simulated UD packets: probes are fabric packets (KindProbe) sent from
// the RNIC's host node, carrying the Core's 50-byte payload by reference;
// the fabric stamps the sender RNIC's send time and the receiving RNIC's
// arrival, and the Deliver hook (after the host's processing delay) plays
// the receive completion. Path traces send TTL-limited probes of the same
// 5-tuple; the switch where the TTL runs out answers with a time-exceeded
// packet back to the source, as a router's ICMP would. Every RNIC clock of
// a machine runs at an offset of its own from the host clock, so the
// arithmetic is exercised as on hardware.
type SimAgent struct {
	sim   *fabric.Sim
	cfg   SimConfig
	rng   *rand.Rand
	hosts []*simHost
	// by graph node: machine and RNIC index
	nodeHost, nodeRNIC []int
	probes             map[uint64]simProbe
	traces             map[uint64]*simTrace
	nextKey            uint64
	icmpAt             map[int]int64
	sink               func(hostmeshanalyzer.Batch)
	// pauses are each host node's PFC counters of the probes' class, as
	// its RNIC keeps them: [0] the frames it sent, [1] those it received.
	pauses map[int]*[2]pauseAcct
	// pg turns the switch ports' PG drop counters into their changes.
	pg PGPoller
	// Counters of the harness: ICMP answers the switches sent and held
	// back by their rate limit.
	ICMPSent, ICMPLimited uint64
}

type simHost struct {
	name   string
	core   *Core
	nodes  []int
	rnicTo int64 // RNIC clock = simulated time + rnicTo; host clock = simulated time
}

type simProbe struct {
	host, dst int
	seq       uint64
	payload   [ProbeSize]byte
}

type simTrace struct {
	host    int
	t       Trace
	answers map[int]string
	reached int // the smallest TTL that reached the destination
}

// NewSimAgent puts an agent on every machine of the simulation's graph
// (hosts grouped by topo.Node.Machine) and sends its batches to sink.
func NewSimAgent(s *fabric.Sim, cfg SimConfig, sink func(hostmeshanalyzer.Batch)) (*SimAgent, error) {
	g := s.Graph()
	a := &SimAgent{sim: s, cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x51a6)), probes: map[uint64]simProbe{},
		traces: map[uint64]*simTrace{}, icmpAt: map[int]int64{}, sink: sink, pauses: map[int]*[2]pauseAcct{},
		nodeHost: make([]int, len(g.Nodes)), nodeRNIC: make([]int, len(g.Nodes))}
	if a.cfg.Prio == 0 {
		a.cfg.Prio = fabric.PrioData
	}
	a.pg.PG = int(a.cfg.Prio)
	byMachine := map[string][]int{}
	for _, h := range g.Hosts() {
		byMachine[g.Nodes[h].Machine] = append(byMachine[g.Nodes[h].Machine], h)
	}
	names := make([]string, 0, len(byMachine))
	for m := range byMachine {
		names = append(names, m)
	}
	sort.Strings(names)
	for i := range a.nodeHost {
		a.nodeHost[i], a.nodeRNIC[i] = -1, -1
	}
	for _, m := range names {
		nodes := byMachine[m]
		if m == "" || len(nodes) < 2 {
			continue
		}
		var rnics []RNIC
		for k, n := range nodes {
			ip := fabric.HostIP(n)
			rnics = append(rnics, RNIC{Name: fmt.Sprintf("n%d", k), Addr: netip.AddrFrom4([4]byte{byte(ip >> 24), byte(ip >> 16), byte(ip >> 8), byte(ip)})})
			a.nodeHost[n], a.nodeRNIC[n] = len(a.hosts), k
		}
		cc := cfg.Core
		cc.Host, cc.Seed = m, cfg.Seed*1000003+uint64(len(a.hosts))+1
		core, err := NewCore(cc, rnics)
		if err != nil {
			return nil, fmt.Errorf("hostmesh: machine %s: %w", m, err)
		}
		a.hosts = append(a.hosts, &simHost{name: m, core: core, nodes: nodes, rnicTo: a.rng.Int64N(1 << 40)})
	}
	if len(a.hosts) == 0 {
		return nil, fmt.Errorf("hostmesh: no machine with two RNICs in the topology")
	}
	return a, nil
}

// Hosts is how many agents run.
func (a *SimAgent) Hosts() int { return len(a.hosts) }

// Core is machine i's agent core.
func (a *SimAgent) Core(i int) *Core { return a.hosts[i].core }

// Hooks are the fabric hooks the agents need: Deliver (receive
// completions), Packet (switches answering expired traces) and Pause (the
// RNICs' PFC counters).
func (a *SimAgent) Hooks() *fabric.Hooks {
	return &fabric.Hooks{Deliver: a.deliver, Packet: a.switchPacket, Pause: a.pause}
}

// pauseAcct is a PFC counter pair of an RNIC: frames, and the time they
// held the link, counted as the pauses run (a pause a later frame renews
// or an XON ends counts until then, as mlx5's pause duration does).
type pauseAcct struct {
	frames      uint64
	ns          int64
	from, until int64 // the current pause, counted up to from
}

func (p *pauseAcct) settle(now int64) {
	if end := min(now, p.until); end > p.from {
		p.ns += end - p.from
	}
	p.from = max(p.from, now)
}

func (p *pauseAcct) frame(now, d int64) {
	p.settle(now)
	p.frames++
	p.from, p.until = now, now+d
}

// pause counts a PFC frame of the probes' class arriving at a node: at a
// host, its RNIC received it; at a switch port facing a host, that RNIC
// sent it.
func (a *SimAgent) pause(node, port int, prio uint8, quanta uint16) {
	if prio != a.cfg.Prio {
		return
	}
	g := a.sim.Graph()
	ports := g.Ports(node)
	if port < 0 || port >= len(ports) {
		return
	}
	dir, host := 1, node
	if a.nodeHost[node] < 0 {
		dir, host = 0, ports[port].Peer
		if a.nodeHost[host] < 0 {
			return
		}
	}
	acct := a.pauses[host]
	if acct == nil {
		acct = &[2]pauseAcct{}
		a.pauses[host] = acct
	}
	d := int64(math.Ceil(float64(quanta) * 512 * 1e9 / g.Links[ports[port].Link].Bandwidth))
	acct[dir].frame(a.sim.Now(), d)
}

// Start schedules every RNIC's sender, every agent's expiry, tracing and
// uploads from start until end (simulated ns).
func (a *SimAgent) Start(start, end int64) {
	for hi, h := range a.hosts {
		cc := h.core.Config()
		iv := int64(cc.Interval)
		for ri := range h.nodes {
			// Senders start at random phases, as threads do.
			a.every(start+a.rng.Int64N(iv), iv, end, func(now int64) { a.send(hi, ri, now) })
		}
		a.every(start+iv/2, iv, end+int64(cc.Timeout)+iv, func(now int64) { h.core.Expire(now) })
		// Tracers too, and their timers jitter as threads' do (up to a
		// quarter of the period late): agents whose traces left at
		// fixed phases met the switches' ICMP rate limits in a fixed
		// pattern, the same agents' traces failing every time.
		te := int64(cc.TraceEvery)
		var tick func(*fabric.Sim)
		tick = func(s *fabric.Sim) {
			a.trace(hi, s.Now())
			if next := s.Now() + te + a.rng.Int64N(te/4+1); next <= end {
				s.At(next, tick)
			}
		}
		a.sim.At(start+a.rng.Int64N(te), tick)
		be := a.cfg.BatchEvery
		if be <= 0 {
			be = 10 * iv
		}
		a.every(start+be, be, end+int64(cc.Timeout)+2*be, func(int64) { a.flush(hi) })
	}
	if pe := a.cfg.PGPollEvery; pe > 0 {
		// The poller's phase is its own, not drawn from the agents'
		// random source: with it or without it the agents probe alike.
		a.pollSwitches(start)
		a.every(start+pe/2, pe, end+int64(a.hosts[0].core.Config().Timeout)+2*pe, a.pollSwitches)
	}
}

// Flush uploads every agent's batch now, and the switch poller's.
func (a *SimAgent) Flush() {
	for hi := range a.hosts {
		a.flush(hi)
	}
	if a.cfg.PGPollEvery > 0 {
		a.pollSwitches(a.sim.Now())
	}
}

// SimPGPoller is the Host of the simulated switch poller's batches.
const SimPGPoller = "pg-poller"

// pollSwitches reads every switch port's ingress discards of the probes'
// priority group, cumulative as the switch keeps them, and uploads the
// ports' changes since the last poll.
func (a *SimAgent) pollSwitches(now int64) {
	g := a.sim.Graph()
	var recs []hostmeshanalyzer.PGDrop
	for _, sw := range g.Switches() {
		var counts []PGCount
		for port := range a.sim.NumPorts(sw) {
			if st, err := a.sim.PortCounters(sw, port); err == nil {
				counts = append(counts, PGCount{Port: fmt.Sprintf("port%d", port), PG: a.pg.PG, Drops: st.PGDrops[a.cfg.Prio]})
			}
		}
		recs = a.pg.Changes(recs, g.Nodes[sw].Name, counts, now)
	}
	if a.sink != nil && len(recs) > 0 {
		a.sink(hostmeshanalyzer.Batch{Host: SimPGPoller, PGDrops: recs})
	}
}

func (a *SimAgent) flush(hi int) {
	h, now := a.hosts[hi], a.sim.Now()
	for ri, n := range h.nodes {
		var c PFCCounters
		if acct := a.pauses[n]; acct != nil {
			acct[0].settle(now)
			acct[1].settle(now)
			c = PFCCounters{TxPause: acct[0].frames, TxPauseNs: acct[0].ns, RxPause: acct[1].frames, RxPauseNs: acct[1].ns}
		}
		h.core.PFC(ri, now, c)
	}
	b := h.core.Batch()
	if a.sink != nil && (len(b.Results) > 0 || len(b.Paths) > 0 || len(b.Down) > 0 || len(b.PFC) > 0) {
		a.sink(b)
	}
}

// every runs f at t0, t0+period, ... up to end.
func (a *SimAgent) every(t0, period, end int64, f func(now int64)) {
	var tick func(*fabric.Sim)
	tick = func(s *fabric.Sim) {
		f(s.Now())
		if next := s.Now() + period; next <= end {
			s.At(next, tick)
		}
	}
	a.sim.At(t0, tick)
}

func (a *SimAgent) uniform(r [2]int64) int64 {
	if r[1] <= r[0] {
		return r[0]
	}
	return r[0] + a.rng.Int64N(r[1]-r[0])
}

// tupleHash is the 5-tuple's ECMP hash, as a switch computes it.
func tupleHash(src, dst netip.Addr, sport uint16) uint32 {
	var b [14]byte
	s4, d4 := src.As4(), dst.As4()
	copy(b[0:], s4[:])
	copy(b[4:], d4[:])
	binary.BigEndian.PutUint16(b[8:], sport)
	binary.BigEndian.PutUint16(b[10:], 4791)
	b[12] = 17
	h := uint32(2166136261)
	for _, x := range b {
		h = (h ^ uint32(x)) * 16777619
	}
	h ^= h >> 15
	h *= 0x2c1b3c6d
	return h ^ h>>12
}

func (a *SimAgent) send(hi, ri int, now int64) {
	h := a.hosts[hi]
	s, ok := h.core.Next(ri, now)
	if !ok {
		return
	}
	a.nextKey++
	key := a.nextKey
	a.probes[key] = simProbe{host: hi, dst: s.Dst, seq: s.Seq, payload: s.Payload}
	rn := h.core.RNICs()
	p := fabric.Packet{Kind: fabric.KindProbe, Prio: a.cfg.Prio, Size: udProbeBytes, Src: int32(h.nodes[ri]),
		Dst: int32(h.nodes[s.Dst]), Hash: tupleHash(rn[ri].Addr, rn[s.Dst].Addr, s.SPort), Tag: tagMagic | tagProbe | key}
	a.sim.At(now+a.uniform(a.cfg.PostDelay), func(sim *fabric.Sim) {
		if err := sim.Send(h.nodes[ri], 0, p); err != nil {
			h.core.Sent(s.Seq, 0, false)
		}
	})
}

func (a *SimAgent) trace(hi int, now int64) {
	h := a.hosts[hi]
	t, ok := h.core.NextTrace(now)
	if !ok {
		return
	}
	a.nextKey++
	key := a.nextKey
	a.traces[key] = &simTrace{host: hi, t: t, answers: map[int]string{}}
	rn := h.core.RNICs()
	hash := tupleHash(rn[t.Src].Addr, rn[t.Dst].Addr, t.SPort)
	for ttl := 1; ttl <= t.Hops; ttl++ {
		p := fabric.Packet{Kind: fabric.KindProbe, Prio: a.cfg.Prio, Size: udProbeBytes, TTL: uint8(ttl), PSN: int32(ttl),
			Src: int32(h.nodes[t.Src]), Dst: int32(h.nodes[t.Dst]), Hash: hash, Tag: tagMagic | tagTrace | key}
		_ = a.sim.Send(h.nodes[t.Src], 0, p)
	}
	a.sim.At(now+int64(h.core.Config().Timeout), func(sim *fabric.Sim) {
		tr := a.traces[key]
		delete(a.traces, key)
		// Complete when every TTL short of the destination was answered
		// (an answer the switch's rate limit held back, or a lost probe,
		// leaves a gap: the trace is tried again later).
		var hops []string
		complete := tr.reached > 1
		for ttl := 1; ttl <= t.Hops && (tr.reached == 0 || ttl < tr.reached); ttl++ {
			sw, ok := tr.answers[ttl]
			if !ok {
				complete = false
				break
			}
			hops = append(hops, sw)
		}
		h.core.TraceDone(t, hops, complete, sim.Now())
	})
}

// switchPacket answers trace probes whose TTL runs out at a switch.
func (a *SimAgent) switchPacket(sw, port int, p *fabric.Packet) bool {
	if p.Kind != fabric.KindProbe || p.Tag&^(tagKindMask|tagKeyMask) != tagMagic || p.Tag&tagKindMask != tagTrace || p.TTL > 1 {
		return true
	}
	node := a.sim.NodeOfSwitch(sw)
	now := a.sim.Now()
	if last, ok := a.icmpAt[node]; ok && now-last < a.cfg.ICMPEvery {
		a.ICMPLimited++
		return false
	}
	a.icmpAt[node] = now
	out := a.sim.NextHop(node, int(p.Src), p.Hash^0x1c3b)
	if out < 0 {
		return false
	}
	a.ICMPSent++
	reply := fabric.Packet{Kind: fabric.KindProbe, Prio: fabric.PrioControl, Size: fabric.MinFrame + 6, Src: int32(node), Dst: p.Src,
		Hash: p.Hash ^ 0x1c3b, PSN: p.PSN, Flow: int32(node), Tag: tagMagic | tagICMP | p.Tag&tagKeyMask}
	_ = a.sim.Send(node, out, reply)
	return false
}

// deliver plays a receive completion on the RNIC of host node.
func (a *SimAgent) deliver(node int, p *fabric.Packet) {
	if p.Tag&^(tagKindMask|tagKeyMask) != tagMagic {
		return
	}
	key := p.Tag & tagKeyMask
	switch p.Tag & tagKindMask {
	case tagProbe:
		pr, ok := a.probes[key]
		if !ok {
			return
		}
		delete(a.probes, key)
		h := a.hosts[pr.host]
		if a.nodeHost[node] != pr.host {
			return
		}
		ri := a.nodeRNIC[node]
		// The sender's completion (T2) is known once the frame left; the
		// harness hands it over with the arrival, before the poll.
		h.core.Sent(pr.seq, p.Sent+h.rnicTo, true)
		t3 := p.Echo + h.rnicTo
		payload := pr.payload
		a.sim.At(a.sim.Now()+a.uniform(a.cfg.PollDelay), func(sim *fabric.Sim) {
			_ = h.core.Received(ri, payload[:], t3, sim.Now())
		})
	case tagTrace:
		if tr := a.traces[key]; tr != nil && (tr.reached == 0 || int(p.PSN) < tr.reached) {
			tr.reached = int(p.PSN)
		}
	case tagICMP:
		if tr := a.traces[key]; tr != nil {
			tr.answers[int(p.PSN)] = a.sim.Graph().Nodes[p.Flow].Name
		}
	}
}
