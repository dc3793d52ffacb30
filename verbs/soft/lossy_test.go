package soft

import (
	"sync"
	"sync/atomic"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// fate is what a lossyPort does with a transmitted packet.
type fate uint8

const (
	pass fate = iota
	drop
	corrupt // flip a bit of the IP ID, which the ICRC covers
	hold    // reorder: send after the next packet
	markCE  // set ECN to congestion experienced, as a switch would
)

// lossyPort wraps a port and applies a per-packet decision to what the
// device transmits. decide sees the index of the RoCE packet (from 0) and
// the parsed packet; ARP and other frames always pass.
type lossyPort struct {
	dpdk.Port
	mu      sync.Mutex
	decide  func(i int, p *roce.Packet, frame []byte) fate
	n       int
	held    *dpdk.Packet
	dropped atomic.Int64
	rp      roce.Packet
	out     []*dpdk.Packet
}

func (l *lossyPort) setDecide(f func(i int, p *roce.Packet, frame []byte) fate) {
	l.mu.Lock()
	l.decide = f
	l.mu.Unlock()
}

func (l *lossyPort) TxBurst(q int, pkts []*dpdk.Packet) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.decide == nil {
		return l.Port.TxBurst(q, pkts)
	}
	l.out = l.out[:0]
	for _, pkt := range pkts {
		frame := pkt.Data()
		f := pass
		if roce.Parse(frame, &l.rp) == nil {
			f = l.decide(l.n, &l.rp, frame)
			l.n++
		}
		switch f {
		case drop:
			l.dropped.Add(1)
			pkt.Free()
			continue
		case corrupt:
			frame[l.rp.Net.L3Off+4] ^= 0x40
		case markCE:
			if ip := l.rp.Net.IPv4(frame); ip != nil {
				ip.SetECNUpdateChecksum(header.ECNCE)
			}
		case hold:
			if l.held == nil {
				l.held = pkt
				continue
			}
		}
		l.out = append(l.out, pkt)
		if l.held != nil && l.held != pkt {
			l.out = append(l.out, l.held)
			l.held = nil
		}
	}
	n := l.Port.TxBurst(q, l.out)
	// The ring is sized so that tests never fill it; free the rest.
	dpdk.FreeBulk(l.out[n:])
	return len(pkts)
}
