package hawkeyesim

import (
	"slices"

	"github.com/rdma-appliance/appliance/bench/fabric"
	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
)

// Polling packets in the simulator are fabric Packets of Kind KindProbe
// whose Tag carries the polling header's first six bytes and a marker:
//
//	Tag bits 63..48  0x6888 (the EtherType: marks Hawkeye's probes apart
//	                 from other programs')
//	     bits 47..32  type
//	     bits 31..0   the header's second word (pad, ingress, egress, event)
//
// and whose Flow is the victim flow's index: its 5-tuple is
// FlowKeyOf(sim, Flow), the 13 bytes the header would carry, so the
// simulator does not copy them into every probe. Hash is the victim's
// hash, so a probe routed like data would take the victim's path; Src and
// Dst are the victim's hosts. Size is the 64-byte minimum frame (14 + 19
// bytes and the FCS, padded).

// PollTag is a probe's Tag for a polling header.
func PollTag(t, in, out uint16, event uint8) uint64 {
	return uint64(hawkeyewire.EtherType)<<48 | uint64(t)<<32 | uint64(in&hawkeyewire.MaxPort)<<17 | uint64(out&hawkeyewire.MaxPort)<<8 | uint64(event)
}

// IsPollTag says whether a probe's Tag is a polling header.
func IsPollTag(tag uint64) bool { return tag>>48 == hawkeyewire.EtherType }

// TagPoll reads a probe's polling header back (the victim from the
// simulation's flow).
func TagPoll(sim *fabric.Sim, p *fabric.Packet) hawkeyewire.Poll {
	return hawkeyewire.Poll{Type: uint16(p.Tag >> 32), Ingress: uint16(p.Tag>>17) & hawkeyewire.MaxPort, Egress: uint16(p.Tag>>8) & hawkeyewire.MaxPort,
		Event: uint8(p.Tag), Victim: FlowKeyOf(sim, p.Flow)}
}

// PollPacket is the probe a host sends for victim flow, event id event.
func PollPacket(sim *fabric.Sim, flow int32, event uint8, prio uint8) fabric.Packet {
	src, dst := sim.FlowEnds(flow)
	return fabric.Packet{Kind: fabric.KindProbe, Prio: prio, Flow: flow, Size: fabric.MinFrame, Src: int32(src),
		Dst: int32(dst), Hash: sim.FlowHash(flow), Tag: PollTag(hawkeyewire.TypeFlow, 0, 0, event), PSN: -1}
}

// Visit is one switch's handling of a polling packet, for tests and
// evaluations: which event, of which type, where it came in, and the
// copies it sent on.
type Visit struct {
	Time    int64
	Switch  string
	Event   uint8
	Type    uint16
	Ingress int
	// Sent are the ports the switch sent polling packets through, with
	// the type each carried.
	Sent []SentPoll
	// Quiet: a flow trace only, at a hop where the victim's egress was
	// neither paused nor queued (Config.QuietQdepth): not collected.
	Quiet bool
	// Flow is the victim (the simulation's flow index): event ids wrap,
	// the victim and the event together name an incident.
	Flow int32
}

// SentPoll is a polling packet a switch sent on.
type SentPoll struct {
	Port int
	Type uint16
}

// poll handles a polling packet at switch sw, arrived on port in: the
// data-plane half of Figure 6. Flow trace: unicast to the victim's
// egress (the ECMP port of the victim's hash towards its destination),
// with the PFC bit set when that egress is paused so the next switch
// (which sent the pause) looks at its own causality. PFC trace: the
// ports causally behind the port the packet came from, i.e. egress ports
// that the arrival port's traffic went to (port-pair meter) and that
// are paused themselves, get a PFC-trace copy: the trace follows PFC
// towards where it started. Copies never go to hosts: a paused port
// facing a host ends the trace there (host injection), an unpaused one
// ends it at the congestion point. Each switch handles an event once
// per type and hands it to its CPU poller.
func (pr *Program) poll(sw, in int, p *fabric.Packet) {
	pr.Stats.Polls++
	st := &pr.sw[sw]
	now := pr.sim.Now()
	flow := p.Flow
	if flow < 0 || int(flow) >= pr.sim.Flows() {
		return // no victim we know of: a malformed probe
	}
	ev := uint8(p.Tag)
	victimPort := func() int {
		_, dst := pr.sim.FlowEnds(flow)
		return pr.sim.NextHop(st.node, dst, pr.sim.FlowHash(flow))
	}
	send := func(o int, t uint16) bool { return pr.send(st, o, p, t, in, ev) }
	visit, handled := pr.trace(st, now, in, uint16(p.Tag>>32), ev, flow, victimPort, send)
	if !handled {
		return
	}
	if pr.OnVisit != nil {
		pr.OnVisit(visit)
	}
	if !visit.Quiet {
		pr.trigger(st, ev, FlowKeyOf(pr.sim, flow), now)
		if pr.cfg.Retrace {
			pr.scheduleRetrace(st, in, visit, *p)
		}
	}
}

// scheduleRetrace has st's CPU look at the trace of visit again when it
// takes the mirrored polling packet p (Config.Retrace): every port that
// the data plane would send a PFC copy to now and did not then gets one.
func (pr *Program) scheduleRetrace(st *switchState, in int, visit Visit, p fabric.Packet) {
	var done []int
	for _, s := range visit.Sent {
		if s.Type&hawkeyewire.TypePFC != 0 {
			done = append(done, s.Port)
		}
	}
	t, ev := visit.Type, visit.Event
	pr.sim.At(visit.Time+pr.cfg.ReadDelay, func(sim *fabric.Sim) {
		now := sim.Now()
		var buf [Epochs]*epochSlot
		slots := pr.recent(st, now, &buf)
		try := func(o int) {
			if o < 0 || o == in || !st.peerSw[o] || slices.Contains(done, o) || !pr.paused(st, slots, o, now) {
				return
			}
			done = append(done, o)
			if pr.send(st, o, &p, hawkeyewire.TypePFC, in, ev) {
				pr.Stats.PollsSent++
				pr.Stats.PFCCopies++
				pr.Stats.Retraced++
			}
		}
		if t&hawkeyewire.TypeFlow != 0 {
			// The victim's egress, paused since the flow trace passed.
			_, dst := sim.FlowEnds(p.Flow)
			try(sim.NextHop(st.node, dst, sim.FlowHash(p.Flow)))
		}
		if t&hawkeyewire.TypePFC != 0 {
			for o := range st.nports {
				if pr.meter(st, slots, in, o) > 0 {
					try(o)
				}
			}
		}
	})
}

// trace is the data-plane decision of a polling packet of type t, event
// ev, for the victim numbered victim (what duplicates are told apart by),
// that reached st on port in at now: victimPort is the port the victim's
// destination is routed through (-1 none), asked only for a new flow
// trace, and send puts a polling packet of a type out of a port,
// reporting whether it left. handled is false for a duplicate. The
// simulator's Packet hook and Switch.Packet share it.
func (pr *Program) trace(st *switchState, now int64, in int, t uint16, ev uint8, victim int32, victimPort func() int,
	send func(o int, t uint16) bool) (visit Visit, handled bool) {
	var buf [Epochs]*epochSlot
	slots := pr.recent(st, now, &buf)
	visit = Visit{Time: now, Switch: st.name, Event: ev, Type: t, Ingress: in, Flow: victim}
	sendOn := func(o int, t uint16) {
		if !send(o, t) {
			return
		}
		pr.Stats.PollsSent++
		if t&hawkeyewire.TypePFC != 0 {
			pr.Stats.PFCCopies++
		}
		visit.Sent = append(visit.Sent, SentPoll{Port: o, Type: t})
	}
	victimOut := -1
	if t&hawkeyewire.TypeFlow != 0 && pr.firstTime(st, victim, ev, 0, now) {
		handled = true
		o := victimPort()
		if o >= 0 && st.peerSw[o] {
			out := hawkeyewire.TypeFlow
			if pr.paused(st, slots, o, now) {
				out |= hawkeyewire.TypePFC
				victimOut = o
			}
			sendOn(o, out)
		}
		visit.Quiet = pr.cfg.QuietQdepth > 0 && t&hawkeyewire.TypePFC == 0 && o >= 0 &&
			!pr.paused(st, slots, o, now) && queue(slots, o) < pr.cfg.QuietQdepth
	}
	if t&hawkeyewire.TypePFC != 0 && pr.firstTime(st, victim, ev, 1, now) {
		handled = true
		for o := range st.nports {
			if o == in || o == victimOut || !st.peerSw[o] {
				continue
			}
			if pr.meter(st, slots, in, o) > 0 && pr.paused(st, slots, o, now) {
				sendOn(o, hawkeyewire.TypePFC)
			}
		}
	}
	if !handled {
		pr.Stats.Duplicates++
	}
	return visit, handled
}

// queue is port o's average queue at enqueue (bytes) over the epochs
// read, 0 without packets.
func queue(slots []*epochSlot, o int) float64 {
	var n uint32
	var q uint64
	for _, s := range slots {
		n += s.ports[o].packets
		q += s.ports[o].qsum
	}
	if n == 0 {
		return 0
	}
	return float64(q) / float64(n)
}

// seenKey is what a switch deduplicates polling packets by: the victim
// (its 5-tuple, which the polling header carries; the paper drops
// polling packets "with the same 5-tuple within a certain time
// interval"), the event id and the trace kind. The 8-bit event id alone
// wraps after 256 polls: with a fabric's hosts detecting hundreds of
// victims within the interval, a new victim's poll reusing an id was
// dropped as a duplicate and its anomaly went untraced.
// (p4/hawkeyetofino keys its seen registers by a 12-bit hash of the two.)
type seenKey struct {
	victim int32
	ev     uint8
	k      uint8
}

// firstTime marks event ev of victim flow's trace kind k handled at st,
// reporting whether it was new.
func (pr *Program) firstTime(st *switchState, flow int32, ev uint8, k uint8, now int64) bool {
	key := seenKey{flow, ev, k}
	if at, ok := st.seen[key]; ok && now-at < pr.cfg.DedupNs {
		return false
	}
	st.seen[key] = now
	return true
}

// paused says whether egress port o counts as paused: its pause timer
// runs now, or it received a PAUSE (XOFF) or packets were enqueued paused
// in the epochs read. A pause that held only packets already queued (the
// port's traffic came earlier) still paused it, as the analyzer sees it.
func (pr *Program) paused(st *switchState, slots []*epochSlot, o int, now int64) bool {
	if st.pauseLeft(o, now) > 0 {
		return true
	}
	var n uint32
	for _, s := range slots {
		if s.ports[o].pauseFrames > 0 {
			return true
		}
		n += s.ports[o].paused
	}
	return n >= pr.cfg.MinPaused
}

// meter is the bytes from in to out over the epochs read.
func (pr *Program) meter(st *switchState, slots []*epochSlot, in, out int) uint64 {
	var b uint64
	for _, s := range slots {
		b += s.meters[in*st.nports+out]
	}
	return b
}

// send emits a polling packet of type t out of port o, copied from p,
// reporting whether the simulator took it.
func (pr *Program) send(st *switchState, o int, p *fabric.Packet, t uint16, in int, ev uint8) bool {
	q := fabric.Packet{Kind: fabric.KindProbe, Prio: pr.cfg.PollPrio, Flow: p.Flow, Size: fabric.MinFrame,
		Src: p.Src, Dst: p.Dst, Hash: p.Hash, PSN: -1, Tag: PollTag(t, uint16(in), uint16(o), ev)}
	return pr.sim.Send(st.node, o, q) == nil
}
