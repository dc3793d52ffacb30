package dtatranslator

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/rdma-appliance/appliance/internal/dtamem"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// Conn is the translator's side of one RC connection to a collector: a
// requester without a host. Like the Tofino translator it keeps no copy
// of what it sent: a report is turned into RDMA operations and forgotten.
// It counts PSNs, asks for an ACK now and then, and when the collector's
// RNIC NAKs a sequence error (it lost packets, or restarted), it moves its
// PSN to the one the collector expects, so the connection recovers and the
// lost window is counted. Every packet carries a valid ICRC (the public
// translator left it invalid and needed the collector's check disabled).
//
// The connection's packets take one path (one UDP source port), so they
// reach the collector in the order sent or not at all. Recovery relies on
// it and on nothing else: it never moves the PSN on a timer, since a
// collector that is only slow would then execute packets still on their
// way and take the ones sent again under their PSNs for duplicates, which
// it acknowledges without executing (see Fill).
type Conn struct {
	b roce.Builder
	// next is the PSN of the next packet; acked the highest PSN the
	// collector acknowledged.
	next, acked uint32
	sinceAck    int
	// AckEvery asks for an ACK every this many packets (default 64).
	AckEvery int
	// MaxAtomic is the collector QP's responder resources
	// (max_dest_rd_atomic): atomics may not be outstanding beyond it, or
	// the collector's RNIC refuses them. Default 16.
	MaxAtomic int
	atomics   [256]uint32 // PSNs of outstanding atomics, a ring
	ahead     int
	atail     int

	// tmpl is a WRITE Only frame of tmplLen data bytes: every packet of
	// that size shares its headers but for PSN, AckReq, VA and payload, so
	// a write copies it, patches those, and finishes the ICRC from the
	// precomputed state of the unchanging IP and UDP headers.
	tmpl     []byte
	tmplLen  int
	tmplBTH  int
	tmplICRC int
	prefix   roce.ICRCPrefix

	// last is what the last operation built changed, for Unsend.
	last struct {
		ok       bool
		sinceAck int
		bytes    int
		atomic   bool
		ping     bool
	}
	// filled is the PSN of the last Fill while one may still stand for
	// a lost packet (see resyncTo).
	filled    uint32
	hasFilled bool

	Stats ConnStats
}

// ConnStats are a connection's counters.
type ConnStats struct {
	Packets   uint64 `json:"packets"`
	Bytes     uint64 `json:"bytes"`
	ACKs      uint64 `json:"acks"`
	NAKs      uint64 `json:"naks"`
	Resyncs   uint64 `json:"resyncs"`
	LostPSNs  uint64 `json:"lost_psns"` // PSNs skipped by resynchronisation
	Malformed uint64 `json:"malformed"`
	Pings     uint64 `json:"pings"` // zero-length WRITEs asking for an ACK when idle
	Fills     uint64 `json:"fills"` // zero-length WRITEs at the first unacknowledged PSN (see Fill)
	RNRNAKs   uint64 `json:"rnr_naks"`
	CNPs      uint64 `json:"cnps"` // congestion notifications from the collector's RNIC
}

// NewConn makes the translator's side of a connection from local to the
// collector's QP, starting at psn.
func NewConn(local, collector dtamem.Endpoint, psn uint32) *Conn {
	return NewConnWith(local, collector, psn, ConnHeaders{})
}

// ConnHeaders are header fields of a connection's packets that do not
// follow from its endpoints: a translator configured apart from them (the
// Tofino translator's control plane installs each in a table entry) sets
// them here.
type ConnHeaders struct {
	// UDPSrcPort is the packets' UDP source port (0: derived from the
	// QPNs, roce.FlowLabelFromQPNs).
	UDPSrcPort uint16
	// DSCP marks the packets (0..63).
	DSCP uint8
}

// NewConnWith is NewConn with the header fields h.
func NewConnWith(local, collector dtamem.Endpoint, psn uint32, h ConnHeaders) *Conn {
	c := &Conn{next: psn & roce.PSNMask, acked: (psn - 1) & roce.PSNMask, AckEvery: 64, MaxAtomic: 16}
	// DF and the default partition key, as RNICs send (verbs/soft does
	// too): a responder checks the partition key, and the Tofino
	// translator's packets carry the same headers, ICRC included.
	c.b = roce.Builder{SrcMAC: local.MAC, DstMAC: collector.MAC, SrcGID: local.GID, DstGID: collector.GID,
		HopLimit: roce.DefaultHopLimit, DontFragment: true, PKey: roce.DefaultPKey, DestQP: collector.QPN,
		FlowLabel: roce.FlowLabelFromQPNs(local.QPN, collector.QPN), SrcPort: h.UDPSrcPort, TrafficClass: h.DSCP << 2}
	return c
}

// PSN is the next packet's PSN.
func (c *Conn) PSN() uint32 { return c.next }

// Outstanding is how many packets the collector has not acknowledged yet.
// At zero every operation sent has been applied to collector memory.
func (c *Conn) Outstanding() int { return int(roce.ComparePSN(c.next, c.acked)) - 1 }

func (c *Conn) stamp() {
	c.last.ok, c.last.sinceAck, c.last.bytes, c.last.atomic, c.last.ping = true, c.sinceAck, 0, false, false
	c.b.PSN = c.next
	c.next = (c.next + 1) & roce.PSNMask
	c.sinceAck++
	c.b.AckReq = c.sinceAck >= c.AckEvery
	if c.b.AckReq {
		c.sinceAck = 0
	}
}

// Write builds an RDMA WRITE Only of data to va/rkey into buf and returns
// the frame length; with imm it is a WRITE with immediate, which the
// collector's RNIC completes on its receive queue (a push notification).
func (c *Conn) Write(buf []byte, va uint64, rkey uint32, data []byte, imm *uint32) (int, error) {
	if imm == nil && len(data) > 0 && len(data)%4 == 0 && len(data) <= 256 {
		return c.writeFast(buf, va, rkey, data)
	}
	c.b.Opcode = roce.RCWriteOnly
	if imm != nil {
		c.b.Opcode, c.b.Imm = roce.RCWriteOnlyImm, *imm
	}
	c.b.VA, c.b.RKey, c.b.DMALen = va, rkey, uint32(len(data))
	c.stamp()
	if imm != nil {
		c.b.AckReq = true
	}
	n, err := c.b.Build(buf, data)
	if err != nil {
		c.unstamp()
		return 0, err
	}
	c.sent(n)
	return n, nil
}

// sent counts the packet of n bytes just built.
func (c *Conn) sent(n int) {
	c.last.bytes = n
	c.Stats.Packets++
	c.Stats.Bytes += uint64(n)
}

// unstamp gives back the PSN (and atomic slot) of the operation just
// stamped, whose frame was never built.
func (c *Conn) unstamp() {
	if !c.last.ok {
		return
	}
	c.next = (c.next - 1) & roce.PSNMask
	c.sinceAck = c.last.sinceAck
	if c.last.atomic {
		c.atail--
	}
	c.last.ok = false
}

// Unsend takes back the operation built last, whose frame could not be
// sent (no transmit buffer): the next operation reuses its PSN. A PSN
// taken and never sent would be a gap to the collector, which NAKs the
// packets after it and drops them: a lost window for a full queue. Call
// it at once, before anything else is built or received.
func (c *Conn) Unsend() {
	if !c.last.ok {
		return
	}
	c.Stats.Packets--
	c.Stats.Bytes -= uint64(c.last.bytes)
	if c.last.ping {
		c.Stats.Pings--
	}
	c.unstamp()
}

// Ping builds a zero-length WRITE that asks for an ACK. A translator
// asks for an ACK only every AckEvery packets, so when reports stop, the
// last packets would stay unacknowledged for good; pinging once idle
// tells it they landed, or draws the NAK that resynchronises it. A
// zero-length transfer touches no memory and checks no key.
func (c *Conn) Ping(buf []byte) (int, error) {
	c.b.Opcode = roce.RCWriteOnly
	c.b.VA, c.b.RKey, c.b.DMALen = 0, 0, 0
	c.stamp()
	c.b.AckReq, c.sinceAck = true, 0
	n, err := c.b.Build(buf, nil)
	if err != nil {
		c.unstamp()
		return 0, err
	}
	c.sent(n)
	c.last.ping = true
	c.Stats.Pings++
	return n, nil
}

// Fill builds a zero-length WRITE at the first unacknowledged PSN, for a
// connection whose ping went unanswered. A requester that never
// retransmits can be stranded: when the packet a collector NAKed for is
// lost again (or the NAK is), the collector drops everything after it in
// silence, the translator's pings included. The fill stands in for that
// packet, which the translator cannot send again.
//
// It is safe whatever the collector's state, because the connection's
// packets arrive in order: if the packet first sent with that PSN
// reached the collector, it did so before the fill, and the fill is a
// duplicate, which the collector acknowledges (with the last PSN it
// executed, so the translator learns where it stands) and does not
// execute. Only if that packet never arrived does the collector execute
// the fill, which touches no memory (a zero-length transfer checks no
// key); the next packet after it then draws the NAK that resynchronises
// the connection, with the lost window counted. Nothing is decided on a
// timer: a slow collector is not taken for a stranded one.
func (c *Conn) Fill(buf []byte) (int, error) {
	b := c.b
	psn := (c.acked + 1) & roce.PSNMask
	b.Opcode, b.PSN, b.AckReq = roce.RCWriteOnly, psn, true
	b.VA, b.RKey, b.DMALen = 0, 0, 0
	c.last.ok = false
	n, err := b.Build(buf, nil)
	if err != nil {
		return 0, err
	}
	c.filled, c.hasFilled = psn, true
	c.Stats.Fills++
	return n, nil
}

// ErrAtomicWindow is returned by FetchAdd while MaxAtomic atomics await
// their answers: the caller keeps the operation and tries again once
// Input has seen ACKs.
var ErrAtomicWindow = errors.New("dta: atomic window full")

// AtomicRoom is how many more atomics may be sent now.
func (c *Conn) AtomicRoom() int {
	return min(c.MaxAtomic, len(c.atomics)) - (c.atail - c.ahead)
}

// writeFast is Write for small, padding-free WRITE Only frames.
func (c *Conn) writeFast(buf []byte, va uint64, rkey uint32, data []byte) (int, error) {
	if c.tmplLen != len(data) || c.tmpl == nil {
		if err := c.makeTemplate(len(data)); err != nil {
			return 0, err
		}
	}
	n := len(c.tmpl)
	if len(buf) < n {
		return 0, roce.ErrShortBuffer
	}
	copy(buf, c.tmpl)
	c.stamp()
	psn := c.b.PSN
	if c.b.AckReq {
		psn |= 1 << 31
	}
	bth := buf[c.tmplBTH:]
	binary.BigEndian.PutUint32(bth[8:12], psn)
	reth := bth[roce.BTHLen:]
	binary.BigEndian.PutUint64(reth[0:8], va)
	binary.BigEndian.PutUint32(reth[8:12], rkey)
	copy(reth[16:], data)
	binary.LittleEndian.PutUint32(buf[c.tmplICRC:], c.prefix.Finish(buf[c.tmplBTH:c.tmplICRC]))
	c.sent(n)
	return n, nil
}

func (c *Conn) makeTemplate(dataLen int) error {
	b := c.b
	b.Opcode, b.PSN, b.AckReq, b.VA, b.RKey, b.DMALen = roce.RCWriteOnly, 0, false, 0, 0, uint32(dataLen)
	frame := make([]byte, 512)
	n, err := b.Build(frame, make([]byte, dataLen))
	if err != nil {
		return err
	}
	var p roce.Packet
	if err := roce.Parse(frame[:n], &p); err != nil {
		return err
	}
	pre, err := roce.NewICRCPrefix(frame[p.Net.L3Off:n])
	if err != nil {
		return err
	}
	c.tmpl, c.tmplLen, c.tmplBTH, c.tmplICRC, c.prefix = frame[:n], dataLen, p.BTHOff, p.ICRCOff, pre
	return nil
}

// FetchAdd builds an ATOMIC FETCH_ADD of add at va/rkey. The original
// value the collector answers with is not needed and is dropped.
func (c *Conn) FetchAdd(buf []byte, va uint64, rkey uint32, add uint64) (int, error) {
	if c.AtomicRoom() <= 0 {
		return 0, ErrAtomicWindow
	}
	c.atomics[c.atail%len(c.atomics)] = c.next
	c.atail++
	c.b.Opcode = roce.RCFetchAdd
	c.b.VA, c.b.RKey, c.b.SwapAdd, c.b.Compare = va, rkey, add, 0
	c.stamp()
	c.last.atomic = true
	n, err := c.b.Build(buf, nil)
	if err != nil {
		c.unstamp()
		return 0, err
	}
	c.sent(n)
	return n, nil
}

// ErrNotForConn is returned for packets of another connection.
var ErrNotForConn = errors.New("dta: not this connection's packet")

// Input handles a packet from the collector (decoded in p): ACKs advance
// the acknowledged PSN, a NAK sequence error moves the next PSN to the
// one the collector expects. It returns whether the connection
// resynchronised.
func (c *Conn) Input(p *roce.Packet, frame []byte) (bool, error) {
	c.last.ok = false
	if p.Opcode == roce.OpCNP {
		// The collector's RNIC saw congestion (or, on a ConnectX-like
		// profile, sends one with every sequence NAK). The translator has
		// no rate to lower; it counts them.
		c.Stats.CNPs++
		return false, nil
	}
	h := p.AETH(frame)
	if h == nil {
		c.Stats.Malformed++
		return false, fmt.Errorf("dta: %v from the collector has no AETH", p.Opcode)
	}
	syn := h.Syndrome()
	switch syn.Type() {
	case roce.AckTypeACK:
		c.Stats.ACKs++
		if roce.ComparePSN(p.PSN, c.acked) > 0 && roce.ComparePSN(p.PSN, c.next) < 0 {
			c.acked = p.PSN
		}
		if c.hasFilled && roce.ComparePSN(c.acked, c.filled) > 0 {
			c.hasFilled = false // the collector went past the fill's PSN
		}
		// ACKs are cumulative: every atomic up to the PSN is answered.
		for c.ahead < c.atail && roce.ComparePSN(c.atomics[c.ahead%len(c.atomics)], c.acked) <= 0 {
			c.ahead++
		}
	case roce.AckTypeRNRNAK:
		// The collector had no receive posted for a WRITE with
		// immediate. A requester would retry after the RNR timer; the
		// translator keeps nothing to retry with, so it goes on from the
		// refused PSN, which is lost, like a sequence error's window.
		c.Stats.RNRNAKs++
		return c.resyncTo(p.PSN), nil
	case roce.AckTypeNAK:
		c.Stats.NAKs++
		if syn.NAKCode() != roce.NAKPSNSequenceError {
			return false, nil
		}
		return c.resyncTo(p.PSN), nil
	}
	return false, nil
}

// resyncTo continues from psn, the PSN the collector expects: what was
// sent from there on is lost to it (it drops out-of-order packets), and
// everything the translator sends must continue from there.
func (c *Conn) resyncTo(psn uint32) bool {
	if roce.ComparePSN(psn, c.acked) <= 0 || roce.ComparePSN(psn, c.next) > 0 {
		return false // outside the window: a stale answer
	}
	if lost := roce.ComparePSN(c.next, psn); lost > 0 {
		c.Stats.LostPSNs += uint64(lost)
	}
	if c.hasFilled && c.filled == (psn-1)&roce.PSNMask {
		// The collector stands right after the last fill: it executed
		// the fill in place of a packet it never got, which is lost
		// too. (Or it had that packet and lost the next; the two look
		// the same from here, and the count errs on the side of loss.)
		c.Stats.LostPSNs++
	}
	c.hasFilled = false
	c.next = psn
	c.acked = (psn - 1) & roce.PSNMask
	c.sinceAck = 0
	// Atomics before psn were executed, those from psn on were
	// discarded: either way none is outstanding any more.
	c.ahead = c.atail
	c.Stats.Resyncs++
	return true
}
