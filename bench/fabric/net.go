package fabric

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/rdma-appliance/appliance/bench/fabric/workload"
	"github.com/rdma-appliance/appliance/internal/topo"
	"github.com/rdma-appliance/appliance/verbs/dcqcn"
)

// Packet kinds.
const (
	KindData  uint8 = iota + 1 // an RC data packet
	KindAck                    // cumulative ACK through PSN
	KindNak                    // go back to PSN
	KindCNP                    // congestion notification for Flow
	KindPause                  // 802.1Qbb PFC frame: Quanta for Prio (0 resumes)
	KindProbe                  // a packet of a switch program or prober, routed like data, handed to hooks
)

// Packet is a frame in flight. Hooks see it; switch programs may use Tag.
type Packet struct {
	Kind   uint8
	Prio   uint8
	ECN    bool // CE marked
	TTL    uint8
	Hops   uint8
	Flow   int32
	PSN    int32
	Size   int32 // bytes of the frame (FCS included, preamble and gap not)
	Src    int32 // host nodes
	Dst    int32
	Hash   uint32 // the 5-tuple's hash, for ECMP
	Quanta uint16 // PAUSE
	Sent   int64  // when its sender transmitted it
	Echo   int64  // ACK: the acknowledged packet's Sent
	Enq    int64  // when it entered its current queue
	Tag    uint64

	inPort int32 // switch ingress port charged while queued
	bucket uint8 // MMU bucket charged
	charge int32
	next   int32 // queue link, or the free list
}

const (
	bucketNone uint8 = iota
	bucketMin
	bucketShared
	bucketHead
)

// queue is a FIFO of packets linked through Packet.next.
type queue struct {
	head, tail int32
	n          int32
	bytes      int64
}

// port is one end of a link: its egress queues and, on a switch, the
// ingress accounting of what arrived through it.
type port struct {
	node, num int32
	peer      int32 // the other end
	bw        float64
	delay     int64
	host, sw  int32 // the node's host or switch index, -1 otherwise
	// xpart is, in a parallel run, the partition of the peer when it is
	// not this port's (frames cross over, parallel.go); -1 otherwise.
	xpart int32
	busy  bool
	cur   int32
	ctrl  queue
	q     [NumPrio]queue
	// queued has bit p set while q[p] holds packets: most kicks find
	// every queue empty, and the scheduler then does nothing but clear
	// the WRR credits, as a pass over empty queues would.
	queued   uint8
	paused   [NumPrio]int64 // paused until
	pausedAt [NumPrio]int64 // when the current pause began (accounting)
	wakeAt   int64
	rr       int
	credit   [NumPrio]int
	pg       [NumPrio]pgState
	st       PortStats
}

// pgState is an ingress priority group's share of the MMU.
type pgState struct {
	min, shared, head int64
	xoff              bool
}

// PortStats are a port's counters.
type PortStats struct {
	TxBytes, TxPackets uint64
	TxData             uint64 // data packets among them
	Drops              uint64 // dropped at admission through this ingress port
	ECNMarks           uint64 // marked in this egress port's queues
	PauseSent          uint64 // XOFF frames sent upstream through this port
	PauseRx            uint64 // PAUSE frames received on this port (XOFF and XON)
	PausedNs           int64  // time this egress spent paused, summed over priorities
	MaxQueue           int64  // deepest egress queue seen, bytes
	// PGDrops are Drops by ingress priority group (the priority here), as
	// switches count them (SAI_INGRESS_PRIORITY_GROUP_STAT_DROPPED_PACKETS,
	// SONiC's `show priority-group drop counters`): a lossless group
	// discards only when its headroom is short or PFC is off for it.
	PGDrops [NumPrio]uint64
}

// switchState is one switch's MMU.
type switchState struct {
	node       int32
	cfg        SwitchConfig
	sharedSize int64
	sharedUsed int64
	ports      []int32
	// rng draws the switch's ECN marks: a stream per switch, seeded from
	// the run's seed and the switch's node, so the draws a switch makes
	// do not depend on what other switches drew before (which differs
	// between a sequential and a partitioned run).
	rng *rand.Rand
}

// hostState is one RNIC.
type hostState struct {
	node        int32
	port        int32
	cfg         HostConfig
	params      dcqcn.Params
	active      []int32 // flows sending
	rr          int
	wakePending bool
	wakeAt      int64
	ctl         queue // ACKs, NAKs, CNPs
	fault       *HostFault
}

// flowState is one RC connection's sender; flowRx (host.go) is its
// receiver.
type flowState struct {
	f         workload.Flow
	npkts     int32
	next, una int32
	rp        dcqcn.RP
	rtoGen    int32
	// rtoAt is when the retransmission timer runs out. Progress moves it
	// without scheduling anything: one timer event per flow is pending
	// (rtoPending), and when it fires early it sleeps again until rtoAt.
	// An event per ACK left the queue full of dead timers (the heap's
	// pop was half of the simulator's time).
	rtoAt      int64
	rtoPending bool
	started    bool
	done       bool
	end        int64
	retrans    uint64
	retries    int32 // timeouts since the last progress
	failed     bool  // retries exhausted (HostConfig.RetryLimit)
	cnps       uint64
	lastPktLen int32
}

// HostFault makes a host send PAUSE frames for Prio every Interval from
// From to Until: a NIC that cannot drain its receive buffer, or a PFC
// storm's origin.
type HostFault struct {
	Host        string
	Prio        uint8
	Quanta      uint16
	Interval    int64
	From, Until int64
}

// network is the simulated fabric.
type network struct {
	s          *Sim
	g          *topo.Graph
	routes     *topo.Routes
	ports      []port
	nodePorts  [][]int32
	nodeSwitch []int32
	nodeHost   []int32
	switches   []switchState
	hosts      []hostState
	flows      []flowState
	rx         []flowRx // by flow, as flows
	hooks      *Hooks
	faults     *linkFaults // injected link and RNIC faults (linkfault.go), nil without
	// portKey[p] is the next-key entry (Sim.next) of port p's node: most
	// events are a port's, and dispatch makes its node the scheduling
	// entity with one load.
	portKey []*uint64
	// par is the parallel runner when this network is a partition's view
	// of the fabric (parallel.go), self that partition's number.
	par  *parallel
	self int32
}

// Hooks let switch programs observe the fabric (Hawkeye's telemetry runs
// on them). Every field may be nil.
type Hooks struct {
	// Enqueue and Dequeue see a packet enter and leave a switch egress
	// queue, with the queue's bytes after the operation.
	Enqueue func(sw, port int, p *Packet, qbytes int64)
	Dequeue func(sw, port int, p *Packet, qbytes int64)
	// Pause sees a PFC frame arrive at a node's port: quanta 0 resumes.
	Pause func(node, port int, prio uint8, quanta uint16)
	// Packet sees every packet arriving at a switch before it is
	// forwarded; returning false consumes it (the hook's program took
	// it, e.g. a polling packet).
	Packet func(sw, port int, p *Packet) bool
	// Deliver sees probe packets reaching their destination host.
	Deliver func(host int, p *Packet)
	// Ack sees a sender's ACK for flow with the round trip of the packet
	// it acknowledges (the receiver echoes its send time): what a host's
	// detection agent watches.
	Ack func(host int, flow int32, rtt int64)
	// Done sees a flow complete (its last packet acknowledged): what an
	// application waiting on its completion queue sees, so a closed-loop
	// workload can post its next message at once.
	Done func(flow int32)
}

// wireNs is how long a frame of size bytes occupies a link of bw bits/s.
func wireNs(size int32, bw float64) int64 {
	return int64(math.Ceil(float64(int64(size)+WireOverhead) * 8e9 / bw))
}

func (n *network) pkt(i int32) *Packet { return &n.s.pkts[i] }

func (n *network) enqueue(q *queue, i int32) {
	p := n.pkt(i)
	p.next = -1
	if q.n == 0 {
		q.head = i
	} else {
		n.pkt(q.tail).next = i
	}
	q.tail = i
	q.n++
	q.bytes += int64(p.Size)
}

func (n *network) dequeue(q *queue) int32 {
	i := q.head
	p := n.pkt(i)
	q.head = p.next
	q.n--
	q.bytes -= int64(p.Size)
	return i
}

// kick starts a port's next transmission if it is idle and has one.
func (n *network) kick(pi int32) {
	pt := &n.ports[pi]
	if pt.busy {
		return
	}
	now := n.s.now
	// Busy while choosing: taking a packet off a queue releases its
	// buffer, which may send an XON out of this very port (a loop's
	// packets leave by the port they came in on) and kick it again.
	pt.busy = true
	var i int32 = -1
	switch {
	case pt.ctrl.n > 0:
		i = n.dequeue(&pt.ctrl)
	case pt.host >= 0:
		i = n.hostNext(pt)
	default:
		i = n.switchNext(pt)
	}
	if i < 0 {
		pt.busy = false
		return
	}
	p := n.pkt(i)
	if p.Kind == KindProbe && pt.host >= 0 {
		p.Sent = now // the sender RNIC's timestamp (linkfault.go)
	}
	pt.busy, pt.cur = true, i
	pt.st.TxBytes += uint64(p.Size)
	pt.st.TxPackets++
	if p.Kind == KindData {
		pt.st.TxData++
	}
	n.s.schedule(now+wireNs(p.Size, pt.bw), evTxDone, pi, 0)
}

// pausedFor says whether a priority is paused now, and schedules a wake
// for when the pause runs out.
func (n *network) pausedFor(pi int32, prio uint8) bool {
	pt := &n.ports[pi]
	until := pt.paused[prio]
	if until <= n.s.now {
		return false
	}
	if pt.wakeAt <= n.s.now || until < pt.wakeAt {
		pt.wakeAt = until
		n.s.schedule(until, evPortWake, pi, 0)
	}
	return true
}

// switchNext picks a switch egress port's next packet: strict priorities
// (weight 0) highest first, then weighted round robin, skipping paused
// priorities.
func (n *network) switchNext(pt *port) int32 {
	if pt.queued == 0 {
		pt.credit = [NumPrio]int{}
		return -1
	}
	pi := n.nodePorts[pt.node][pt.num]
	sw := &n.switches[pt.sw]
	for prio := NumPrio - 1; prio >= 0; prio-- {
		if sw.cfg.Weights[prio] == 0 && pt.q[prio].n > 0 && !n.pausedFor(pi, uint8(prio)) {
			return n.leaveSwitch(pt, pi, prio)
		}
	}
	for tries := 0; tries < 2*NumPrio; tries++ {
		prio := pt.rr
		w := sw.cfg.Weights[prio]
		if w > 0 && pt.q[prio].n > 0 && !n.pausedFor(pi, uint8(prio)) {
			if pt.credit[prio] <= 0 {
				pt.credit[prio] = w
			}
			pt.credit[prio]--
			if pt.credit[prio] == 0 {
				pt.rr = (pt.rr + 1) % NumPrio
			}
			return n.leaveSwitch(pt, pi, prio)
		}
		pt.credit[prio] = 0
		pt.rr = (pt.rr + 1) % NumPrio
	}
	return -1
}

// leaveSwitch dequeues a packet from a switch egress queue and releases
// its buffer at the ingress it was charged to.
func (n *network) leaveSwitch(pt *port, pi int32, prio int) int32 {
	i := n.dequeue(&pt.q[prio])
	if pt.q[prio].n == 0 {
		pt.queued &^= 1 << prio
	}
	p := n.pkt(i)
	if n.hooks != nil && n.hooks.Dequeue != nil {
		n.hooks.Dequeue(int(pt.sw), int(pt.num), p, pt.q[prio].bytes)
	}
	n.release(p)
	return i
}

// portKeys points each port at its node's entry in next (Sim.next).
func (n *network) portKeys(next []uint64) []*uint64 {
	keys := make([]*uint64, len(n.ports))
	for i := range n.ports {
		keys[i] = &next[n.ports[i].node+1]
	}
	return keys
}

// txDone: the frame left; it reaches the peer after the link's delay.
func (n *network) txDone(pi int32) {
	pt := &n.ports[pi]
	i := pt.cur
	pt.busy, pt.cur = false, -1
	if pt.xpart >= 0 {
		n.cross(pi, i, pt.xpart)
	} else {
		n.s.schedule(n.s.now+pt.delay, evArrive, pt.peer, i)
	}
	n.kick(pi)
}

// arrive handles a frame reaching a node through port pi.
func (n *network) arrive(pi, i int32) {
	pt := &n.ports[pi]
	p := n.pkt(i)
	if n.faults != nil && n.faults.lose(pi, i, p, n.s.now) {
		n.s.freePacket(i)
		return
	}
	if p.Kind == KindPause {
		n.pauseRx(pi, p)
		n.s.freePacket(i)
		return
	}
	p.Hops++
	if pt.sw >= 0 {
		n.switchRx(pt, pi, i)
		return
	}
	h := &n.hosts[pt.host]
	if p.Kind == KindProbe && p.inPort != -2 {
		p.Echo = n.s.now // the receiving RNIC's timestamp (linkfault.go)
	}
	if d := h.cfg.ProcessingDelay; d > 0 && p.inPort != -2 {
		p.inPort = -2 // held once
		n.s.schedule(n.s.now+d, evArrive, pi, i)
		p.Hops--
		return
	}
	n.hostRx(h, i)
}

// pauseRx applies a PFC frame to the egress of the port it arrived on.
func (n *network) pauseRx(pi int32, p *Packet) {
	pt := &n.ports[pi]
	now := n.s.now
	pt.st.PauseRx++
	prio := p.Prio
	if pt.paused[prio] > now { // account the pause that ends or extends
		pt.st.PausedNs += now - pt.pausedAt[prio]
	}
	if p.Quanta == 0 {
		pt.paused[prio] = now
	} else {
		pt.paused[prio] = now + int64(math.Ceil(float64(p.Quanta)*512*1e9/pt.bw))
	}
	pt.pausedAt[prio] = now
	if n.hooks != nil && n.hooks.Pause != nil {
		n.hooks.Pause(int(pt.node), int(pt.num), prio, p.Quanta)
	}
	if p.Quanta == 0 {
		n.kick(pi)
	}
}

// sendPause queues a PFC frame out of port pi.
func (n *network) sendPause(pi int32, prio uint8, quanta uint16) {
	i := n.s.allocPacket()
	p := n.pkt(i)
	*p = Packet{Kind: KindPause, Prio: prio, Quanta: quanta, Size: MinFrame, Flow: -1, Src: -1, Dst: -1, Sent: n.s.now,
		inPort: -1, next: -1}
	n.enqueue(&n.ports[pi].ctrl, i)
	n.kick(pi)
}

// switchRx forwards a packet: hooks, TTL, route, MMU admission, ECN,
// egress queue, PFC.
func (n *network) switchRx(in *port, pi, i int32) {
	p := n.pkt(i)
	st := &n.s.stats
	if n.faults != nil && n.faults.denied(n.faults.aclIn, pi, p, n.s.now) {
		n.s.freePacket(i)
		return
	}
	if n.hooks != nil && n.hooks.Packet != nil && !n.hooks.Packet(int(in.sw), int(in.num), p) {
		n.s.freePacket(i)
		return
	}
	// Every routed packet is IP and loses a hop of TTL, control packets
	// too: an ACK or CNP whose route loops (its flow's sender sits
	// behind a misconfigured route) would otherwise circle for ever in
	// the strict-priority control class and starve the data classes.
	if p.TTL <= 1 {
		st.TTLDrops++
		n.s.freePacket(i)
		return
	}
	p.TTL--
	hops := n.routes.NextHops(int(in.node), int(p.Dst))
	if len(hops) == 0 {
		st.NoRoute++
		n.s.freePacket(i)
		return
	}
	oi := n.nodePorts[in.node][hops[ecmp(p.Hash, in.node)%uint32(len(hops))]]
	if n.faults != nil && n.faults.denied(n.faults.aclOut, oi, p, n.s.now) {
		n.s.freePacket(i)
		return
	}
	out := &n.ports[oi]
	sw := &n.switches[in.sw]
	prio := p.Prio
	if !n.admit(sw, in, pi, p) {
		in.st.Drops++
		in.st.PGDrops[prio]++
		st.Drops++
		n.s.freePacket(i)
		return
	}
	// Admission may have sent an XOFF, and a new packet can move the
	// pool: take the packet's address again.
	p = n.pkt(i)
	q := &out.q[prio]
	if p.Kind == KindData && sw.cfg.ECN && !p.ECN {
		if n.mark(sw, q.bytes) {
			p.ECN = true
			out.st.ECNMarks++
			st.ECNMarks++
		}
	}
	p.Enq = n.s.now
	n.enqueue(q, i)
	out.queued |= 1 << prio
	if q.bytes > out.st.MaxQueue {
		out.st.MaxQueue = q.bytes
	}
	if n.hooks != nil && n.hooks.Enqueue != nil {
		n.hooks.Enqueue(int(in.sw), int(out.num), p, q.bytes)
	}
	n.kick(oi)
}

// mark is RED at egress: nothing below Kmin, Pmax rising linearly to
// Kmax, everything above.
func (n *network) mark(sw *switchState, qbytes int64) bool {
	c := &sw.cfg
	switch {
	case qbytes < c.Kmin:
		return false
	case qbytes >= c.Kmax:
		return true
	}
	prob := c.Pmax * float64(qbytes-c.Kmin) / float64(max(c.Kmax-c.Kmin, 1))
	return sw.rng.Float64() < prob
}

// cells rounds a frame up to the MMU's allocation unit.
func cells(size int32, cell int64) int64 { return (int64(size) + cell - 1) / cell * cell }

// admit charges a packet to its ingress priority group: the guaranteed
// bytes first, then the shared pool up to the dynamic threshold, then
// (lossless priorities) the headroom; XOFF goes upstream once a lossless
// group passes its threshold. It reports whether the packet fits.
func (n *network) admit(sw *switchState, in *port, pi int32, p *Packet) bool {
	c := &sw.cfg
	size := cells(p.Size, c.Cell)
	g := &in.pg[p.Prio]
	lossless := c.Lossless&(1<<p.Prio) != 0
	thr := int64(c.Alpha * float64(sw.sharedSize-sw.sharedUsed))
	switch {
	case g.min+size <= c.Guaranteed:
		g.min += size
		p.bucket = bucketMin
	case g.shared+size <= thr && sw.sharedUsed+size <= sw.sharedSize:
		g.shared += size
		sw.sharedUsed += size
		p.bucket = bucketShared
	case lossless && g.head+size <= c.Headroom:
		g.head += size
		p.bucket = bucketHead
	default:
		return false
	}
	p.inPort, p.charge = pi, int32(size)
	if lossless && !g.xoff && (p.bucket == bucketHead || g.shared+size > thr) {
		g.xoff = true
		in.st.PauseSent++
		n.s.stats.PauseFrames++
		n.sendPause(pi, p.Prio, c.PauseQuanta)
		n.s.schedule(n.s.now+n.refreshNs(in, c), evPauseRefresh, pi, int32(p.Prio))
	}
	return true
}

// refreshNs is when an XOFF is renewed: at half its pause time.
func (n *network) refreshNs(pt *port, c *SwitchConfig) int64 {
	return max(int64(float64(c.PauseQuanta)*512*1e9/pt.bw/2), 1)
}

// release frees a packet's buffer at its ingress, and sends XON once the
// group is back under its threshold by the hysteresis.
func (n *network) release(p *Packet) {
	if p.inPort < 0 || p.bucket == bucketNone {
		return
	}
	in := &n.ports[p.inPort]
	sw := &n.switches[in.sw]
	g := &in.pg[p.Prio]
	c := int64(p.charge)
	switch p.bucket {
	case bucketMin:
		g.min -= c
	case bucketShared:
		g.shared -= c
		sw.sharedUsed -= c
	case bucketHead:
		g.head -= c
	}
	p.bucket = bucketNone
	if g.xoff && g.head == 0 && g.shared <= int64(sw.cfg.Alpha*float64(sw.sharedSize-sw.sharedUsed))-sw.cfg.XonOffset {
		g.xoff = false
		n.sendPause(p.inPort, p.Prio, 0)
	}
	p.inPort = -1
}

// pauseRefresh re-sends XOFF while the group stays congested, so the
// upstream does not resume when the last pause runs out.
func (n *network) pauseRefresh(pi int32, prio int) {
	pt := &n.ports[pi]
	if !pt.pg[prio].xoff {
		return
	}
	c := &n.switches[pt.sw].cfg
	pt.st.PauseSent++
	n.s.stats.PauseFrames++
	n.sendPause(pi, uint8(prio), c.PauseQuanta)
	n.s.schedule(n.s.now+n.refreshNs(pt, c), evPauseRefresh, pi, int32(prio))
}

// Validate-time errors of building a network.
func (n *network) build(g *topo.Graph, r *topo.Routes, flows []workload.Flow, cfg *Config) error {
	n.g, n.routes = g, r
	n.nodePorts = make([][]int32, len(g.Nodes))
	n.nodeSwitch = make([]int32, len(g.Nodes))
	n.nodeHost = make([]int32, len(g.Nodes))
	for i, nd := range g.Nodes {
		n.nodeSwitch[i], n.nodeHost[i] = -1, -1
		switch nd.Kind {
		case topo.Switch:
			sc := cfg.Switch
			if l, ok := cfg.Layers[nd.Layer]; ok {
				sc = l
			}
			if c, ok := cfg.Switches[nd.Name]; ok {
				sc = c
			}
			n.nodeSwitch[i] = int32(len(n.switches))
			n.switches = append(n.switches, switchState{node: int32(i), cfg: sc,
				rng: rand.New(rand.NewPCG(cfg.Seed, 0x5eed<<32|uint64(i)))})
		case topo.Host:
			hc := cfg.Host
			if h, ok := cfg.Hosts[nd.Name]; ok {
				hc = h
			}
			n.nodeHost[i] = int32(len(n.hosts))
			n.hosts = append(n.hosts, hostState{node: int32(i), cfg: hc, port: -1})
		}
	}
	for name := range cfg.Switches {
		if i, ok := g.Node(name); !ok || g.Nodes[i].Kind != topo.Switch {
			return fmt.Errorf("fabric: configuration for switch %q: no such switch", name)
		}
	}
	// Ports: both ends of every link, numbered as the graph numbers them.
	for i := range g.Nodes {
		refs := g.Ports(i)
		n.nodePorts[i] = make([]int32, len(refs))
		for num := range refs {
			n.nodePorts[i][num] = int32(len(n.ports))
			n.ports = append(n.ports, port{node: int32(i), num: int32(num), host: n.nodeHost[i], sw: n.nodeSwitch[i], cur: -1, xpart: -1})
		}
	}
	n.portKey = n.portKeys(n.s.next)
	for i := range g.Nodes {
		for num, ref := range g.Ports(i) {
			l := g.Links[ref.Link]
			pt := &n.ports[n.nodePorts[i][num]]
			pt.peer = n.nodePorts[ref.Peer][ref.PeerPort]
			pt.bw, pt.delay = l.Bandwidth, l.Delay
		}
	}
	for si := range n.switches {
		sw := &n.switches[si]
		sw.ports = n.nodePorts[sw.node]
		np := int64(len(sw.ports))
		lossless := int64(0)
		for p := 0; p < NumPrio; p++ {
			if sw.cfg.Lossless&(1<<p) != 0 {
				lossless++
			}
		}
		sw.sharedSize = sw.cfg.Buffer - np*2*sw.cfg.Guaranteed - np*lossless*sw.cfg.Headroom
		if sw.sharedSize <= 0 {
			return fmt.Errorf("fabric: switch %s: %d ports x (2 x %d guaranteed + %d lossless x %d headroom) leave no shared buffer of %d",
				g.Nodes[sw.node].Name, np, sw.cfg.Guaranteed, lossless, sw.cfg.Headroom, sw.cfg.Buffer)
		}
	}
	for hi := range n.hosts {
		h := &n.hosts[hi]
		ps := n.nodePorts[h.node]
		if len(ps) != 1 {
			return fmt.Errorf("fabric: host %s has %d links, want 1", g.Nodes[h.node].Name, len(ps))
		}
		h.port = ps[0]
		if h.cfg.Params != nil {
			h.params = *h.cfg.Params
		} else {
			h.params = dcqcn.Defaults(n.ports[h.port].bw)
		}
		h.params.LineRate = n.ports[h.port].bw
	}
	n.flows = make([]flowState, 0, len(flows))
	n.rx = make([]flowRx, 0, len(flows))
	return n.addFlows(flows)
}

// addFlows checks flows and schedules their starts (a start already past
// begins now). It adds nothing when one of them is refused.
func (n *network) addFlows(flows []workload.Flow) error {
	g := n.g
	for _, f := range flows {
		if f.Src < 0 || f.Src >= len(g.Nodes) || f.Dst < 0 || f.Dst >= len(g.Nodes) ||
			n.nodeHost[f.Src] < 0 || n.nodeHost[f.Dst] < 0 || f.Src == f.Dst {
			return fmt.Errorf("fabric: flow %d: %d -> %d: both ends must be distinct hosts", f.ID, f.Src, f.Dst)
		}
		if f.Prio >= NumPrio {
			return fmt.Errorf("fabric: flow %d: priority %d: 0..7", f.ID, f.Prio)
		}
		if f.Size <= 0 || f.Start < 0 {
			return fmt.Errorf("fabric: flow %d: size %d, start %d", f.ID, f.Size, f.Start)
		}
	}
	for _, f := range flows {
		f.Start = max(f.Start, n.s.now) // its FCT counts from when it could start
		n.s.schedule(f.Start, evFlowStart, n.appendFlow(f), 0)
	}
	return nil
}

// appendFlow adds flow f's sender and receiver state and returns its
// index.
func (n *network) appendFlow(f workload.Flow) int32 {
	mtu := int64(n.hosts[n.nodeHost[f.Src]].cfg.MTU)
	fs := flowState{f: f}
	fs.npkts = int32((f.Size + mtu - 1) / mtu)
	fs.lastPktLen = int32(f.Size - int64(fs.npkts-1)*mtu)
	n.flows = append(n.flows, fs)
	n.rx = append(n.rx, flowRx{src: int32(f.Src), dst: int32(f.Dst), hash: flowHash(f.ID) ^ 0x5bd1e995,
		npkts: fs.npkts, lastCNP: math.MinInt64 / 2})
	return int32(len(n.flows) - 1)
}
