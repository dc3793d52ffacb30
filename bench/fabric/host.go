package fabric

import (
	"math"
	"unsafe"
)

// flowStart puts a flow on its sender's active list.
func (n *network) flowStart(fi int32) {
	fs := &n.flows[fi]
	h := &n.hosts[n.nodeHost[fs.f.Src]]
	fs.started = true
	if h.cfg.DCQCN {
		// A flow already running when the simulation starts resumes at
		// its rate (workload.Flow.Rate); a new one starts at line rate.
		fs.rp.Resume(&h.params, fs.f.Rate, n.s.now)
	}
	h.active = append(h.active, fi)
	n.armRTO(fi)
	n.kick(h.port)
}

// hostNext picks an RNIC's next frame: ACKs, NAKs and CNPs first, then a
// data packet of the next flow in round robin that its DCQCN pacer allows,
// unless the data priority is paused.
func (n *network) hostNext(pt *port) int32 {
	h := &n.hosts[pt.host]
	pi := h.port
	if h.ctl.n > 0 && !n.pausedFor(pi, PrioControl) {
		return n.dequeue(&h.ctl)
	}
	if len(h.active) == 0 {
		return -1
	}
	now := n.s.now
	var wake int64 = math.MaxInt64
	for tries := 0; tries < len(h.active); tries++ {
		k := h.rr % len(h.active)
		h.rr = k + 1
		fi := h.active[k]
		fs := &n.flows[fi]
		if fs.next >= fs.npkts {
			continue // all sent, waiting for ACKs
		}
		if n.pausedFor(pi, fs.prio()) {
			continue
		}
		if h.cfg.DCQCN && !fs.rp.Allowed(now) {
			wake = min(wake, fs.rp.NextTx())
			continue
		}
		return n.dataPacket(h, fi, fs)
	}
	if wake != math.MaxInt64 && (!h.wakePending || wake < h.wakeAt) {
		h.wakePending, h.wakeAt = true, wake
		n.s.schedule(wake, evHostWake, pt.host, 0)
	}
	return -1
}

// dataPacket builds a flow's next data packet.
func (n *network) dataPacket(h *hostState, fi int32, fs *flowState) int32 {
	payload := int32(h.cfg.MTU)
	if fs.next == fs.npkts-1 {
		payload = fs.lastPktLen
	}
	i := n.s.allocPacket()
	p := n.pkt(i)
	*p = Packet{Kind: KindData, Prio: fs.prio(), TTL: n.s.cfg.TTL, Flow: fi, PSN: fs.next, Size: payload + HeaderBytes,
		Src: int32(fs.f.Src), Dst: int32(fs.f.Dst), Hash: flowHash(fs.f.ID), Sent: n.s.now, inPort: -1, next: -1}
	if p.Size < MinFrame {
		p.Size = MinFrame
	}
	if h.cfg.DCQCN {
		fs.rp.Sent(n.s.now, int(p.Size))
	}
	fs.next++
	return i
}

// flowHash is a flow's 5-tuple hash: its UDP source port differs per QP.
func flowHash(id int) uint32 {
	x := uint32(id)*0x9e3779b9 + 0x7f4a7c15
	x ^= x >> 16
	x *= 0x85ebca6b
	x ^= x >> 13
	return x
}

// flowRx is a flow's receiver, apart from its sender (flowState) and a
// cache line of its own: in a parallel run the two ends of a flow are
// often in different partitions, and so are the receivers of flows next
// to each other, and receiver state in the sender's lines (or a
// neighbour's) made those lines move between cores at every packet. It
// holds copies of what the receiver reads of the flow.
type flowRx struct {
	src, dst int32  // the flow's hosts (nodes)
	hash     uint32 // the ECMP hash of its ACKs, NAKs and CNPs
	npkts    int32
	expected int32
	sinceAck int32
	lastCNP  int64
	nakSent  bool
	_        [31]byte // to 64 bytes, which the next line checks
}

var _ = [1]struct{}{}[unsafe.Sizeof(flowRx{})-64]

// Senders of flows next to each other are in different partitions as
// often: a flowState that is a whole number of cache lines shares none
// with its neighbours (the check fails to compile otherwise).
var _ = [1]struct{}{}[unsafe.Sizeof(flowState{})%64]

// control queues an ACK, NAK or CNP from host h about flow fi.
func (n *network) control(h *hostState, kind uint8, fi, psn int32) {
	rx := &n.rx[fi]
	i := n.s.allocPacket()
	p := n.pkt(i)
	*p = Packet{Kind: kind, Prio: PrioControl, TTL: n.s.cfg.TTL, Flow: fi, PSN: psn, Size: MinFrame,
		Src: rx.dst, Dst: rx.src, Hash: rx.hash, Sent: n.s.now, inPort: -1, next: -1}
	n.enqueue(&h.ctl, i)
	n.kick(h.port)
}

// hostRx handles a packet at its destination RNIC.
func (n *network) hostRx(h *hostState, i int32) {
	p := n.pkt(i)
	now := n.s.now
	switch p.Kind {
	case KindData:
		fs := &n.rx[p.Flow]
		if p.ECN && now-fs.lastCNP >= h.cfg.CNPInterval {
			fs.lastCNP = now
			n.s.stats.CNPs++
			n.control(h, KindCNP, p.Flow, p.PSN)
		}
		switch {
		case p.PSN == fs.expected:
			fs.expected++
			fs.nakSent = false
			fs.sinceAck++
			if fs.sinceAck >= int32(h.cfg.AckEvery) || fs.expected == fs.npkts {
				fs.sinceAck = 0
				n.control(h, KindAck, p.Flow, fs.expected-1)
				n.pkt(h.ctl.tail).Echo = p.Sent
			}
		case p.PSN > fs.expected:
			if !fs.nakSent {
				fs.nakSent = true
				n.control(h, KindNak, p.Flow, fs.expected)
			}
		default: // a duplicate: tell the sender again where the receiver is
			if fs.expected > 0 {
				n.control(h, KindAck, p.Flow, fs.expected-1)
			}
		}
	case KindAck, KindNak:
		if p.Kind == KindAck && p.Echo > 0 && n.hooks != nil && n.hooks.Ack != nil {
			n.hooks.Ack(int(h.node), p.Flow, now-p.Echo)
		}
		n.ackRx(p)
	case KindCNP:
		fs := &n.flows[p.Flow]
		fs.cnps++
		if h.cfg.DCQCN && !fs.done {
			fs.rp.CNP(now)
		}
	case KindProbe:
		if n.hooks != nil && n.hooks.Deliver != nil {
			n.hooks.Deliver(int(h.node), p)
		}
	}
	n.s.freePacket(i)
}

// ackRx moves a sender forward on an ACK, or back on a NAK (go-back-N).
func (n *network) ackRx(p *Packet) {
	fi := p.Flow
	fs := &n.flows[fi]
	if fs.done || fs.failed {
		return
	}
	una := p.PSN + 1
	if p.Kind == KindNak {
		una = p.PSN
		if fs.next > p.PSN {
			fs.retrans += uint64(fs.next - p.PSN)
			n.s.stats.Retransmits += uint64(fs.next - p.PSN)
			fs.next = p.PSN
		}
	}
	if una > fs.una {
		fs.una, fs.retries = una, 0
		n.armRTO(fi)
	}
	if fs.next < fs.una {
		fs.next = fs.una
	}
	if fs.una >= fs.npkts {
		fs.done, fs.end = true, n.s.now
		fs.rtoGen++
		n.retire(fi)
		if n.hooks != nil && n.hooks.Done != nil {
			n.hooks.Done(fi)
		}
		return
	}
	n.kick(n.hosts[n.nodeHost[fs.f.Src]].port)
}

// retire takes a finished flow off its sender's active list.
func (n *network) retire(fi int32) {
	h := &n.hosts[n.nodeHost[n.flows[fi].f.Src]]
	for k, x := range h.active {
		if x == fi {
			h.active = append(h.active[:k], h.active[k+1:]...)
			break
		}
	}
}

// armRTO restarts a flow's retransmission timer.
func (n *network) armRTO(fi int32) {
	fs := &n.flows[fi]
	h := &n.hosts[n.nodeHost[fs.f.Src]]
	fs.rtoAt = n.s.now + h.cfg.RTO
	if !fs.rtoPending {
		fs.rtoPending = true
		n.s.schedule(fs.rtoAt, evRTO, fi, fs.rtoGen)
	}
}

// rto: no progress for a timeout; send again from the first
// unacknowledged packet.
func (n *network) rto(fi, gen int32) {
	fs := &n.flows[fi]
	if fs.done || fs.failed || gen != fs.rtoGen {
		return
	}
	fs.rtoPending = false
	if fs.rtoAt > n.s.now {
		// Progress since the event was scheduled: sleep until then.
		fs.rtoPending = true
		n.s.schedule(fs.rtoAt, evRTO, fi, gen)
		return
	}
	if fs.next > fs.una {
		fs.retries++
		if lim := n.hosts[n.nodeHost[fs.f.Src]].cfg.RetryLimit; lim > 0 && fs.retries > int32(lim) {
			// Retries exhausted: an RC QP goes to the error state and
			// sends nothing more.
			fs.failed = true
			fs.rtoGen++
			n.retire(fi)
			return
		}
		fs.retrans += uint64(fs.next - fs.una)
		n.s.stats.Retransmits += uint64(fs.next - fs.una)
		n.s.stats.Timeouts++
		fs.next = fs.una
	}
	n.armRTO(fi)
	n.kick(n.hosts[n.nodeHost[fs.f.Src]].port)
}

// inject sends a faulty host's PAUSE and schedules the next.
func (n *network) inject(hi int32) {
	h := &n.hosts[hi]
	f := h.fault
	if f == nil || n.s.now > f.Until {
		return
	}
	n.s.stats.InjectedPauses++
	n.sendPause(h.port, f.Prio, f.Quanta)
	if next := n.s.now + f.Interval; next <= f.Until {
		n.s.schedule(next, evInject, hi, 0)
	}
}

// prio is the class a flow's data travels in.
func (fs *flowState) prio() uint8 {
	if fs.f.Prio != 0 {
		return fs.f.Prio
	}
	return PrioData
}
