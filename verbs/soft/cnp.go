package soft

import (
	"github.com/rdma-appliance/appliance/verbs"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// Congestion notification (DCQCN's notification point). A packet that
// arrives with ECN-CE makes the receiver send a CNP back to the sending QP,
// unless the pacer says a CNP went out less than MinTimeBetweenCNPs ago in
// the same scope: the whole port, the destination IP of the CNP, or the
// local QP. The per-IP timers live in a fixed open-addressed table so that
// pacing allocates nothing; a collision just shares a timer, which errs on
// the side of fewer CNPs, as a hardware table would.

const cnpIPSlots = 1024

type cnpPacer struct {
	port int64
	ips  [cnpIPSlots]struct {
		ip   roce.GID
		last int64
	}
}

func gidHash(g roce.GID) uint32 {
	h := uint32(2166136261)
	for _, b := range g {
		h = (h ^ uint32(b)) * 16777619
	}
	return h
}

// allow says whether a CNP to ip for QP q may go now, and if so records it.
func (d *Device) cnpAllow(q *qp, ip roce.GID) bool {
	gap := int64(d.prof.MinTimeBetweenCNPs)
	var last *int64
	switch d.prof.CNPScope {
	case CNPPerPort:
		last = &d.cnp.port
	case CNPPerQP:
		last = &q.cnpLast
	default:
		s := &d.cnp.ips[gidHash(ip)%cnpIPSlots]
		if s.ip != ip {
			s.ip, s.last = ip, 0
		}
		last = &s.last
	}
	if *last != 0 && d.now-*last < gap {
		return false
	}
	*last = d.now
	return true
}

// ecnInput handles the CE mark of a packet for q.
func (d *Device) ecnInput(q *qp, frame []byte, p *roce.Packet) {
	d.cnt.inc(CntNpECNMarkedRocePackets)
	if !d.prof.CNPEnable {
		return
	}
	d.sendCNP(q, frame, p)
}

// sendCNP answers the packet p (received on q) with a paced CNP.
func (d *Device) sendCNP(q *qp, frame []byte, p *roce.Packet) {
	src := p.SrcGID(frame)
	if !d.cnpAllow(q, src) {
		return
	}
	var dqp uint32
	switch q.typ {
	case verbs.QPTypeRC:
		dqp = q.attr.DestQPN
	case verbs.QPTypeUD:
		dh := p.DETH(frame)
		if dh == nil {
			return
		}
		dqp = dh.SrcQP()
	}
	pkt := d.allocTx()
	if pkt == nil {
		return
	}
	eth := p.Net.Ethernet(frame)
	b := &d.bld
	*b = roce.Builder{SrcMAC: d.mac, DstMAC: eth.Src(), SrcGID: p.DstGID(frame), DstGID: src,
		HopLimit: roce.DefaultHopLimit, DontFragment: true, PKey: roce.DefaultPKey, DestQP: dqp,
		SrcPort: p.SrcPort}
	if q.typ == verbs.QPTypeRC {
		b.TrafficClass = q.bld.TrafficClass &^ 3
		b.SrcPort = q.bld.SrcPort
	}
	n, err := b.BuildCNP(pkt.Buffer())
	if err != nil {
		pkt.Free()
		return
	}
	_ = pkt.SetLen(n)
	d.cnt.inc(CntNpCnpSent)
	d.send(pkt)
}

// cnpInput is the reaction point's side: with DCQCN rate control on, the
// CNP cuts the rate of the connected QP it names (rp_cnp_handled);
// otherwise, or for a UD QP, it is counted as ignored.
func (d *Device) cnpInput(frame []byte, p *roce.Packet) {
	d.cnt.inc(CntRxCNP)
	q := d.lookupQP(p.DestQP)
	if q == nil {
		d.cnt.inc(CntRxWrongQP)
		return
	}
	if d.prof.DCQCNRate && q.typ != verbs.QPTypeUD {
		d.cnt.inc(CntRpCnpHandled)
		q.rp.CNP(d.now)
	} else {
		d.cnt.inc(CntRpCnpIgnored)
	}
}
