package ring

import (
	"context"

	"github.com/rdma-appliance/appliance/dpdk"
)

// Bridge is a learning Ethernet switch between ports: what a top-of-rack
// switch is to the software twins that share one L2 segment in tests and
// the lab (reporters, a translator and collectors; several RNICs of one
// host). It learns source MACs per port, forwards known unicast without
// copying, and floods broadcast, multicast and unknown destinations
// (copies from the frame's own pool). One goroutine runs it.
type Bridge struct {
	ports []dpdk.Port
	fdb   map[[6]byte]int
	burst []*dpdk.Packet
	out   [][]*dpdk.Packet
	// from[o] has bit i set while frames from port i wait for port o.
	from []uint64
	// Lossless makes the bridge a lossless (PFC) class, as RoCE runs
	// on: frames a port does not take wait for it, and the ports that
	// sent them are not read (paused) while more than XOFF frames wait,
	// instead of being dropped. Up to 64 ports. A port that never takes
	// frames pauses everything that sends to it, as a PFC storm would.
	Lossless bool
	// Stats: frames forwarded, flooded, and dropped (a full port, an
	// empty pool for a flooded copy); Paused counts input polls skipped
	// by a pause.
	Forwarded, Flooded, Dropped, Paused uint64
}

// XOFF is how many frames may wait for one port of a lossless bridge
// before the ports feeding it are paused.
const XOFF = 256

// NewBridge switches between ports (queue 0 of each).
func NewBridge(ports ...dpdk.Port) *Bridge {
	b := &Bridge{ports: ports, fdb: map[[6]byte]int{}, burst: make([]*dpdk.Packet, 32), out: make([][]*dpdk.Packet, len(ports)),
		from: make([]uint64, len(ports))}
	for i := range b.out {
		b.out[i] = make([]*dpdk.Packet, 0, 64*len(ports))
	}
	return b
}

// Run polls until ctx ends.
func (b *Bridge) Run(ctx context.Context) {
	back := dpdk.DefaultBackoff()
	for ctx.Err() == nil {
		if b.Poll() {
			back.Busy()
		} else {
			back.Idle()
		}
	}
	// What still waits for a port goes back to its pool.
	for i, q := range b.out {
		dpdk.FreeBulk(q)
		b.out[i], b.from[i] = q[:0], 0
	}
}

// Poll moves one burst from every port and reports whether any moved.
func (b *Bridge) Poll() bool {
	work := false
	var paused uint64
	if b.Lossless {
		for o, q := range b.out {
			if len(q) > XOFF {
				paused |= b.from[o]
			}
		}
	}
	for in, p := range b.ports {
		if paused&(1<<uint(in%64)) != 0 {
			b.Paused++
			continue
		}
		n := p.RxBurst(0, b.burst)
		for _, pkt := range b.burst[:n] {
			b.switchOne(in, pkt)
		}
		work = work || n > 0
	}
	for i, q := range b.out {
		if len(q) == 0 {
			continue
		}
		sent := b.ports[i].TxBurst(0, q)
		work = work || sent > 0
		switch {
		case sent == len(q):
			b.out[i], b.from[i] = q[:0], 0
		case b.Lossless:
			b.out[i] = q[:copy(q, q[sent:])]
		default:
			b.Dropped += uint64(len(q) - sent)
			dpdk.FreeBulk(q[sent:])
			b.out[i] = q[:0]
		}
	}
	return work
}

func (b *Bridge) switchOne(in int, pkt *dpdk.Packet) {
	f := pkt.Data()
	if len(f) < 14 {
		b.Dropped++
		pkt.Free()
		return
	}
	var dst, src [6]byte
	copy(dst[:], f[0:6])
	copy(src[:], f[6:12])
	if src[0]&1 == 0 {
		if cur, ok := b.fdb[src]; !ok || cur != in {
			b.fdb[src] = in
		}
	}
	if out, ok := b.fdb[dst]; ok && dst[0]&1 == 0 {
		if out == in {
			pkt.Free()
			return
		}
		b.Forwarded++
		b.out[out] = append(b.out[out], pkt)
		b.from[out] |= 1 << uint(in%64)
		return
	}
	b.Flooded++
	for i := range b.ports {
		if i == in {
			continue
		}
		c := pkt.Pool().Get()
		if c == nil {
			b.Dropped++
			continue
		}
		c.CopyFrom(f)
		b.out[i] = append(b.out[i], c)
		b.from[i] |= 1 << uint(in%64)
	}
	pkt.Free()
}
