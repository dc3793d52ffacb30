package hawkeyewire

import (
	"encoding/binary"
	"errors"
)

// The polling packet (Figure 5 of the paper; the public P4's polling_t)
// follows an Ethernet header with EtherType 0x6888 and is 19 bytes:
//
//	offset size
//	0      2    type: 1 flow trace (victim path), 2 PFC trace, 3 both
//	2      4    one big-endian 32-bit word:
//	              bits 31..26  pad, zero
//	              bits 25..17  ingress port (9 bits)
//	              bits 16..8   egress port (9 bits)
//	              bits  7..0   event id
//	6      4    victim source IPv4
//	10     4    victim destination IPv4
//	14     1    victim IP protocol (17 for RoCEv2)
//	15     2    victim UDP source port
//	17     2    victim UDP destination port
//
// The layout in REFERENCE.md (type 2 B | pad | ingress 9 b | egress 9 b |
// event id 8 b | 13 B of 5-tuple) leaves 32 bits for pad, the two ports
// and the event id when the whole is 19 bytes, so the pad is 6 bits and
// sits first: the word stays byte aligned (Tofino's parser extracts it
// as one field group) and the 9-bit ports are at fixed bit offsets. The
// ports are the sending switch's: the port the polling packet arrived on
// and the one it left through (for a PFC trace, the paused egress the
// next switch is asked about); a host agent leaves both 0.
//
// The type's two low bits are the paper's polling flag (Table 1: 01
// victim path, 10 PFC causality, 11 both); the other 14 bits are zero.
const (
	EtherType = 0x6888
	// HeaderLen is the polling header after the Ethernet header.
	HeaderLen = 19
	// FrameLen is a polling frame without FCS: Ethernet and the header
	// (the wire pads it to the 64-byte minimum).
	FrameLen = 14 + HeaderLen
)

// Polling types (the flag of Table 1).
const (
	TypeFlow uint16 = 1 // trace along the victim flow's path
	TypePFC  uint16 = 2 // trace along PFC causality
	TypeBoth uint16 = 3
)

// MaxPort is the largest port a 9-bit field holds (Tofino's port ids).
const MaxPort = 1<<9 - 1

// Header is a view of a polling header over the bytes that follow the
// Ethernet header; it reads and writes in place.
type Header []byte

// ErrShort is returned for buffers shorter than a header.
var ErrShort = errors.New("hawkeye: polling header shorter than 19 bytes")

// IsValid reports whether h holds a whole header with a known type, the
// type's high bits and the pad zero.
func (h Header) IsValid() bool {
	if len(h) < HeaderLen {
		return false
	}
	t := h.Type()
	return t >= TypeFlow && t <= TypeBoth && h.word()>>26 == 0
}

func (h Header) word() uint32 { return binary.BigEndian.Uint32(h[2:6]) }

// Type is the polling type (TypeFlow, TypePFC, TypeBoth).
func (h Header) Type() uint16 { return binary.BigEndian.Uint16(h[0:2]) }

// Ingress is the sender's ingress port.
func (h Header) Ingress() uint16 { return uint16(h.word()>>17) & MaxPort }

// Egress is the sender's egress port.
func (h Header) Egress() uint16 { return uint16(h.word()>>8) & MaxPort }

// Event is the polling event's id.
func (h Header) Event() uint8 { return h[5] }

// Victim is the victim flow's 5-tuple.
func (h Header) Victim() FlowKey {
	return FlowKey{
		Src:   binary.BigEndian.Uint32(h[6:10]),
		Dst:   binary.BigEndian.Uint32(h[10:14]),
		Proto: h[14],
		Sport: binary.BigEndian.Uint16(h[15:17]),
		Dport: binary.BigEndian.Uint16(h[17:19]),
	}
}

// SetType writes the type.
func (h Header) SetType(t uint16) { binary.BigEndian.PutUint16(h[0:2], t) }

// SetPorts writes the ingress and egress ports (9 bits each, higher bits
// dropped) and keeps the event id; the pad is cleared.
func (h Header) SetPorts(in, out uint16) {
	w := uint32(in&MaxPort)<<17 | uint32(out&MaxPort)<<8 | uint32(h[5])
	binary.BigEndian.PutUint32(h[2:6], w)
}

// SetEvent writes the event id.
func (h Header) SetEvent(e uint8) { h[5] = e }

// SetVictim writes the victim's 5-tuple.
func (h Header) SetVictim(k FlowKey) {
	binary.BigEndian.PutUint32(h[6:10], k.Src)
	binary.BigEndian.PutUint32(h[10:14], k.Dst)
	h[14] = k.Proto
	binary.BigEndian.PutUint16(h[15:17], k.Sport)
	binary.BigEndian.PutUint16(h[17:19], k.Dport)
}

// Poll is a polling header's content.
type Poll struct {
	Type    uint16
	Ingress uint16
	Egress  uint16
	Event   uint8
	Victim  FlowKey
}

// Poll reads the whole header.
func (h Header) Poll() Poll {
	return Poll{Type: h.Type(), Ingress: h.Ingress(), Egress: h.Egress(), Event: h.Event(), Victim: h.Victim()}
}

// Encode writes p as a header into b (at least HeaderLen bytes) and
// returns the header view.
func (p Poll) Encode(b []byte) (Header, error) {
	if len(b) < HeaderLen {
		return nil, ErrShort
	}
	h := Header(b[:HeaderLen])
	h.SetType(p.Type)
	h[5] = p.Event
	h.SetPorts(p.Ingress, p.Egress)
	h.SetVictim(p.Victim)
	return h, nil
}

// AppendFrame appends a whole polling frame (Ethernet header with
// EtherType 0x6888, then the header; no FCS, no padding) to b.
func (p Poll) AppendFrame(b []byte, dst, src [6]byte) []byte {
	b = append(b, dst[:]...)
	b = append(b, src[:]...)
	b = binary.BigEndian.AppendUint16(b, EtherType)
	n := len(b)
	b = append(b, make([]byte, HeaderLen)...)
	_, _ = p.Encode(b[n:]) // room was made just above
	return b
}

// ParseFrame returns the polling header of an Ethernet frame, or false
// when the frame is not a valid polling packet.
func ParseFrame(f []byte) (Header, bool) {
	if len(f) < FrameLen || binary.BigEndian.Uint16(f[12:14]) != EtherType {
		return nil, false
	}
	h := Header(f[14 : 14+HeaderLen])
	return h, h.IsValid()
}
