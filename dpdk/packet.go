package dpdk

import "errors"

// Headroom is the space kept free in front of received data so that a header
// can be prepended (an encapsulation, a VLAN tag) without copying the packet.
const Headroom = 128

// DefaultDataRoom is the buffer size of a default pool: room for a 1500-byte
// MTU frame after the headroom with space to spare for jumbo-ish RoCE frames
// carrying a 4096-byte path MTU when the pool is created with a larger room.
const DefaultDataRoom = 2048 + Headroom

// ErrNoRoom is returned when a packet operation would exceed the buffer.
var ErrNoRoom = errors.New("dpdk: not enough room in packet buffer")

// Packet is a packet buffer from a Pool, the counterpart of an rte_mbuf. Its
// data is a window [off, off+n) of a fixed buffer; the buffer lives in the
// pool's arena, which is outside the Go heap, so its address may be handed to C
// (the eal driver copies bursts into it in one cgo call).
type Packet struct {
	buf []byte // the whole data room; len(buf) == cap(buf) == pool data room
	off int    // start of data
	n   int    // length of data

	// Timestamp is the receive time in nanoseconds since the Unix epoch, set by
	// the driver (one clock read per burst) or by the kernel for AF_PACKET.
	Timestamp int64
	// WireLen is the frame's length on the wire when the driver received
	// only part of it (a snap length); 0 means the data is the whole frame.
	WireLen int
	// Hash is the RSS hash of the packet when the driver computed one.
	Hash uint32
	// Port and Queue say where the packet was received.
	Port  uint16
	Queue uint16

	pool *Pool
	free bool // true while the packet is in the pool's free list
}

// Data returns the packet's bytes. The slice aliases the buffer.
func (p *Packet) Data() []byte { return p.buf[p.off : p.off+p.n : len(p.buf)] }

// Len is the length of the packet data.
func (p *Packet) Len() int { return p.n }

// Tailroom is the room left after the data.
func (p *Packet) Tailroom() int { return len(p.buf) - p.off - p.n }

// Headroom is the room left in front of the data.
func (p *Packet) Headroom() int { return p.off }

// Room is the largest length the packet can have at its current offset.
func (p *Packet) Room() int { return len(p.buf) - p.off }

// SetLen sets the data length, keeping the offset; it fails if n exceeds Room.
func (p *Packet) SetLen(n int) error {
	if n < 0 || n > p.Room() {
		return ErrNoRoom
	}
	p.n = n
	return nil
}

// Buffer returns the whole room from the current offset, for drivers and
// builders that write a packet and then call SetLen.
func (p *Packet) Buffer() []byte { return p.buf[p.off:] }

// Prepend grows the data by n bytes at the front and returns them.
func (p *Packet) Prepend(n int) ([]byte, error) {
	if n < 0 || n > p.off {
		return nil, ErrNoRoom
	}
	p.off -= n
	p.n += n
	return p.buf[p.off : p.off+n], nil
}

// Adj removes n bytes from the front of the data (rte_pktmbuf_adj).
func (p *Packet) Adj(n int) error {
	if n < 0 || n > p.n {
		return ErrNoRoom
	}
	p.off += n
	p.n -= n
	return nil
}

// Trim removes n bytes from the end of the data (rte_pktmbuf_trim).
func (p *Packet) Trim(n int) error {
	if n < 0 || n > p.n {
		return ErrNoRoom
	}
	p.n -= n
	return nil
}

// CopyFrom sets the data to a copy of b, truncated to the room available.
// It returns the number of bytes copied.
func (p *Packet) CopyFrom(b []byte) int {
	p.off = Headroom
	if p.off > len(p.buf) {
		p.off = 0
	}
	p.n = copy(p.buf[p.off:], b)
	return p.n
}

// Reset restores the default headroom and an empty data window.
func (p *Packet) Reset() {
	p.off = Headroom
	if p.off > len(p.buf) {
		p.off = 0
	}
	p.n = 0
	p.Timestamp = 0
	p.WireLen = 0
	p.Hash = 0
	p.Port = 0
	p.Queue = 0
}

// OrigLen is the frame's length on the wire: WireLen when the driver cut
// the frame short, else the data length. Captures write it as pcap's
// original length.
func (p *Packet) OrigLen() int {
	if p.WireLen > p.n {
		return p.WireLen
	}
	return p.n
}

// Pool returns the pool the packet belongs to.
func (p *Packet) Pool() *Pool { return p.pool }

// Free returns the packet to its pool. Freeing many packets at once is cheaper
// with FreeBulk.
func (p *Packet) Free() { p.pool.Put(p) }

// FreeBulk returns packets to their pools, taking each pool's lock once per run
// of packets from the same pool. Nil entries are skipped.
func FreeBulk(pkts []*Packet) {
	for len(pkts) > 0 {
		if pkts[0] == nil {
			pkts = pkts[1:]
			continue
		}
		pool := pkts[0].pool
		i := 1
		for i < len(pkts) && pkts[i] != nil && pkts[i].pool == pool {
			i++
		}
		pool.PutBulk(pkts[:i])
		pkts = pkts[i:]
	}
}
