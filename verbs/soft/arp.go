package soft

import (
	dnet "github.com/rdma-appliance/appliance/dpdk/net"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// Neighbour resolution. A real RNIC gets destination MACs from the kernel's
// neighbour table when an AH or a QP path is set; the soft RNIC has no kernel
// beside it, so it keeps its own table: static entries from the
// configuration, and entries learnt by ARP for IPv4 GIDs. A QP whose next
// hop is unknown holds its sends while the loop asks, every ARPInterval up
// to ARPRetries times; if nobody answers, its requests fail.

type neighState uint8

const (
	neighStatic neighState = iota
	neighReachable
	neighIncomplete
	neighFailed
)

type neighbor struct {
	mac   dnet.MAC
	state neighState
	tries int
	next  int64   // next ARP request (incomplete)
	src   [4]byte // our address the requests come from
}

type resolveResult uint8

const (
	resolved resolveResult = iota
	resolveWait
	resolveFail
)

// resolve returns the MAC of dst, starting resolution when needed.
func (d *Device) resolve(src, dst roce.GID) (dnet.MAC, resolveResult) {
	n := d.neigh[dst]
	if n != nil {
		switch n.state {
		case neighStatic, neighReachable:
			return n.mac, resolved
		case neighIncomplete:
			return dnet.MAC{}, resolveWait
		case neighFailed:
			// Report the failure once to whoever waits, then forget it
			// so that a later request asks again.
			delete(d.neigh, dst)
			return dnet.MAC{}, resolveFail
		}
	}
	if !dst.IsIPv4() || !src.IsIPv4() {
		// No neighbour discovery for IPv6: it needs a static entry.
		return dnet.MAC{}, resolveFail
	}
	n = &neighbor{state: neighIncomplete, src: src.IPv4()}
	d.neigh[dst] = n
	d.arpPending++
	d.sendARPRequest(n, dst)
	return dnet.MAC{}, resolveWait
}

func (d *Device) sendARPRequest(n *neighbor, dst roce.GID) {
	n.tries++
	n.next = d.now + int64(d.prof.ARPInterval)
	pkt := d.allocTx()
	if pkt == nil {
		return
	}
	l, err := dnet.WriteARPRequest(pkt.Buffer(), d.mac, n.src, dst.IPv4())
	if err != nil {
		pkt.Free()
		return
	}
	_ = pkt.SetLen(l)
	d.cnt.inc(CntARPRequestsSent)
	d.send(pkt)
}

// arpTimers retries or fails incomplete entries.
func (d *Device) arpTimers() {
	if d.arpPending == 0 {
		return
	}
	for g, n := range d.neigh {
		if n.state != neighIncomplete || d.now < n.next {
			continue
		}
		if n.tries >= d.prof.ARPRetries {
			n.state = neighFailed
			d.arpPending--
			d.cnt.inc(CntARPFailed)
			continue
		}
		d.sendARPRequest(n, g)
	}
}

// arpInput answers requests for our IPv4 GIDs and learns from requests to
// us and from replies, as Linux does.
func (d *Device) arpInput(frame []byte, pn *dnet.Parsed) {
	a := pn.ARP(frame)
	if a == nil || !a.IsValid() {
		d.cnt.inc(CntRxDiscards)
		return
	}
	target := roce.GIDFromIPv4(a.TargetIP())
	if d.gidIndex(target) < 0 {
		return // not for us; a switch floods requests
	}
	sender := roce.GIDFromIPv4(a.SenderIP())
	if n := d.neigh[sender]; n == nil || n.state != neighStatic {
		if n != nil && n.state == neighIncomplete {
			d.arpPending--
		}
		if n == nil {
			n = &neighbor{}
			d.neigh[sender] = n
		}
		n.mac, n.state = a.SenderMAC(), neighReachable
	}
	if a.Op() != dnet.ARPOpRequest {
		return
	}
	pkt := d.allocTx()
	if pkt == nil {
		return
	}
	l, err := dnet.WriteARPReplyTo(pkt.Buffer(), a, d.mac, a.TargetIP())
	if err != nil {
		pkt.Free()
		return
	}
	_ = pkt.SetLen(l)
	d.cnt.inc(CntARPRepliesSent)
	d.send(pkt)
}
