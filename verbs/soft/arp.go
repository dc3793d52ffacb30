package soft

import (
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// Neighbour resolution. A real RNIC gets destination MACs from the kernel's
// neighbour table when an AH or a QP path is set; the soft RNIC has no kernel
// beside it, so it keeps its own table: static entries from the
// configuration, entries learnt by ARP for IPv4 GIDs and by neighbour
// discovery (RFC 4861 solicitations and advertisements) for IPv6 GIDs. A QP
// whose next hop is unknown holds its sends while the loop asks, every
// ARPInterval up to ARPRetries times; if nobody answers, its requests fail.

type neighState uint8

const (
	neighStatic neighState = iota
	neighReachable
	neighIncomplete
	neighFailed
)

type neighbor struct {
	mac   header.MAC
	state neighState
	tries int
	next  int64    // next request (incomplete)
	src   roce.GID // our address the requests come from
}

type resolveResult uint8

const (
	resolved resolveResult = iota
	resolveWait
	resolveFail
)

// resolve returns the MAC of dst, starting resolution when needed.
func (d *Device) resolve(src, dst roce.GID) (header.MAC, resolveResult) {
	n := d.neigh[dst]
	if n != nil {
		switch n.state {
		case neighStatic, neighReachable:
			return n.mac, resolved
		case neighIncomplete:
			return header.MAC{}, resolveWait
		case neighFailed:
			// Report the failure once to whoever waits, then forget it
			// so that a later request asks again.
			delete(d.neigh, dst)
			return header.MAC{}, resolveFail
		}
	}
	if dst.IsIPv4() != src.IsIPv4() {
		return header.MAC{}, resolveFail
	}
	n = &neighbor{state: neighIncomplete, src: src}
	d.neigh[dst] = n
	d.arpPending++
	d.sendSolicit(n, dst)
	return header.MAC{}, resolveWait
}

// sendSolicit asks for dst's MAC: an ARP request for IPv4, a neighbour
// solicitation for IPv6.
func (d *Device) sendSolicit(n *neighbor, dst roce.GID) {
	n.tries++
	n.next = d.now + int64(d.prof.ARPInterval)
	pkt := d.allocTx()
	if pkt == nil {
		return
	}
	var l int
	var err error
	if dst.IsIPv4() {
		l, err = header.WriteARPRequest(pkt.Buffer(), d.mac, n.src.IPv4(), dst.IPv4())
	} else {
		l, err = header.WriteNeighborSolicit(pkt.Buffer(), d.mac, n.src, dst)
	}
	if err != nil {
		pkt.Free()
		return
	}
	_ = pkt.SetLen(l)
	if dst.IsIPv4() {
		d.cnt.inc(CntARPRequestsSent)
	} else {
		d.cnt.inc(CntNDSolicitsSent)
	}
	d.send(pkt)
}

// learn records that ip is at mac (from an ARP or ND message), unless a
// static entry says otherwise.
func (d *Device) learn(ip roce.GID, mac header.MAC) {
	n := d.neigh[ip]
	if n != nil && n.state == neighStatic {
		return
	}
	if n != nil && n.state == neighIncomplete {
		d.arpPending--
	}
	if n == nil {
		n = &neighbor{}
		d.neigh[ip] = n
	}
	n.mac, n.state = mac, neighReachable
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
		d.sendSolicit(n, g)
	}
}

// arpInput answers requests for our IPv4 GIDs and learns from requests to
// us and from replies, as Linux does.
func (d *Device) arpInput(frame []byte, pn *header.Parsed) {
	a := pn.ARP(frame)
	if a == nil || !a.IsValid() {
		d.cnt.inc(CntRxDiscards)
		return
	}
	target := roce.GIDFromIPv4(a.TargetIP())
	if d.gidIndex(target) < 0 {
		return // not for us; a switch floods requests
	}
	d.learn(roce.GIDFromIPv4(a.SenderIP()), a.SenderMAC())
	if a.Op() != header.ARPOpRequest {
		return
	}
	pkt := d.allocTx()
	if pkt == nil {
		return
	}
	l, err := header.WriteARPReplyTo(pkt.Buffer(), a, d.mac, a.TargetIP())
	if err != nil {
		pkt.Free()
		return
	}
	_ = pkt.SetLen(l)
	d.cnt.inc(CntARPRepliesSent)
	d.send(pkt)
}

// ndInput handles IPv6 neighbour discovery: a solicitation for one of our
// IPv6 GIDs is answered and teaches us the solicitor's MAC; an advertisement
// completes a pending resolution. Messages that RFC 4861 says to drop (hop
// limit not 255, bad checksum, short) are counted as discards.
func (d *Device) ndInput(frame []byte, pn *header.Parsed) {
	ip := header.IPv6(frame[pn.L3Off:])
	m := header.ND(frame[pn.L4Off : pn.L4Off+pn.L4Len])
	if !m.IsValid() {
		return // other ICMPv6: not ours to answer
	}
	if ip.HopLimit() != 255 || !header.ICMPv6(m).ChecksumValid(ip.Src(), ip.Dst()) {
		d.cnt.inc(CntRxDiscards)
		return
	}
	target := roce.GID(m.Target())
	if m.Type() == header.ICMPv6NeighborAdvert {
		if mac, ok := m.LinkAddr(header.NDOptTargetLinkAddr); ok {
			if n := d.neigh[target]; n != nil && n.state != neighStatic {
				d.learn(target, mac)
			}
		}
		return
	}
	if d.gidIndex(target) < 0 {
		return
	}
	src := roce.GID(ip.Src())
	mac, ok := m.LinkAddr(header.NDOptSourceLinkAddr)
	if src == (roce.GID{}) || !ok {
		return // duplicate address detection, or nobody to answer to
	}
	d.learn(src, mac)
	pkt := d.allocTx()
	if pkt == nil {
		return
	}
	l, err := header.WriteNeighborAdvert(pkt.Buffer(), d.mac, target, mac, src)
	if err != nil {
		pkt.Free()
		return
	}
	_ = pkt.SetLen(l)
	d.cnt.inc(CntNDAdvertsSent)
	d.send(pkt)
}
