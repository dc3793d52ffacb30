package header

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Sentinel errors of Decode. The errors Decode returns wrap one of these with
// a fixed detail (which header was at fault); test with errors.Is.
var (
	// ErrTruncated means the frame ends before a header or a length field
	// says it should.
	ErrTruncated = errors.New("truncated")
	// ErrMalformed means a header is inconsistent: wrong IP version, IHL or
	// data offset too small, a length field shorter than its header, a UDP
	// length beyond the IP payload.
	ErrMalformed = errors.New("malformed")
	// ErrUnsupported means the frame is well formed so far but carries
	// something Decode does not walk (an unknown EtherType, a third VLAN tag).
	ErrUnsupported = errors.New("unsupported")
	// ErrFragment means the datagram is a non-first IP fragment: the network
	// layer is decoded but there is no transport header to find.
	ErrFragment = errors.New("non-first IP fragment")
)

// The errors below are built once so that returning them allocates nothing;
// each names the layer at fault and wraps a sentinel.
var (
	errEthTruncated     = fmt.Errorf("ethernet header: %w", ErrTruncated)
	errVLANTruncated    = fmt.Errorf("vlan tag: %w", ErrTruncated)
	errVLANTooMany      = fmt.Errorf("more than %d vlan tags: %w", MaxVLANTags, ErrUnsupported)
	errEtherType        = fmt.Errorf("ethertype: %w", ErrUnsupported)
	errARPTruncated     = fmt.Errorf("arp: %w", ErrTruncated)
	errARPKind          = fmt.Errorf("arp for other than ethernet/ipv4: %w", ErrUnsupported)
	errIPv4Truncated    = fmt.Errorf("ipv4 header: %w", ErrTruncated)
	errIPv4Version      = fmt.Errorf("ipv4 version: %w", ErrMalformed)
	errIPv4IHL          = fmt.Errorf("ipv4 ihl: %w", ErrMalformed)
	errIPv4TotalLen     = fmt.Errorf("ipv4 total length below header length: %w", ErrMalformed)
	errIPv4Short        = fmt.Errorf("ipv4 total length beyond frame: %w", ErrTruncated)
	errIPv4Fragment     = fmt.Errorf("ipv4: %w", ErrFragment)
	errIPv6Truncated    = fmt.Errorf("ipv6 header: %w", ErrTruncated)
	errIPv6Version      = fmt.Errorf("ipv6 version: %w", ErrMalformed)
	errIPv6Short        = fmt.Errorf("ipv6 payload length beyond frame: %w", ErrTruncated)
	errIPv6Fragment     = fmt.Errorf("ipv6: %w", ErrFragment)
	errIPv6ExtTruncated = fmt.Errorf("ipv6 extension header: %w", ErrTruncated)
	errIPv6ExtTooMany   = fmt.Errorf("more than %d ipv6 extension headers: %w", MaxIPv6ExtHeaders, ErrUnsupported)
	errUDPTruncated     = fmt.Errorf("udp header: %w", ErrTruncated)
	errUDPLength        = fmt.Errorf("udp length: %w", ErrMalformed)
	errTCPTruncated     = fmt.Errorf("tcp header: %w", ErrTruncated)
	errTCPOffset        = fmt.Errorf("tcp data offset: %w", ErrMalformed)
	errICMPTruncated    = fmt.Errorf("icmp header: %w", ErrTruncated)
)

// Parsed records where the layers of a decoded frame are. All offsets are
// from the start of the frame; an offset of zero means the layer is absent
// (the Ethernet header always occupies offset 0). Lengths are per the
// headers' length fields, so Ethernet padding after a short IP packet is
// excluded; DecodeTruncated clips them to the captured bytes instead.
type Parsed struct {
	// VLANs is the number of VLAN tags (0..MaxVLANTags). VLANOff[i] is the
	// offset of tag i's VLAN view (TCI, then the next EtherType), outermost
	// first; the tag's TPID is the two bytes before it.
	VLANs   int
	VLANOff [MaxVLANTags]int

	// L3Proto is the EtherType after the tags. L3Off is where the network
	// header starts and L3Len the network packet length (IPv4 total length,
	// 40 + IPv6 payload length, 28 for ARP).
	L3Proto uint16
	L3Off   int
	L3Len   int

	// L4Proto is the transport protocol (after IPv6 extension headers).
	// L4Off is where its header starts and L4Len the transport segment length
	// (the UDP length field for UDP, the rest of the IP payload otherwise).
	L4Proto uint8
	L4Off   int
	L4Len   int

	// PayloadOff and PayloadLen delimit the transport payload. For transport
	// protocols Decode does not know, the payload is the whole segment.
	PayloadOff int
	PayloadLen int

	// Fragment is set for any IP fragment (a first fragment decodes fully).
	Fragment bool
	// Truncated is set by DecodeTruncated when the frame ended before a
	// length field said it would and the lengths above were clipped.
	Truncated bool
}

// Decode walks the headers of an Ethernet frame and fills p. It validates
// every header it crosses (lengths, versions, header lengths) but not
// checksums. On error p holds whatever was decoded before the fault, so a
// caller can, say, still count a non-first fragment by its IP addresses.
//
// Decode never allocates and never panics, whatever the input.
func Decode(frame []byte, p *Parsed) error { return decode(frame, p, false) }

// DecodeTruncated is Decode for frames captured with a snap length: when a
// length field points past the end of the frame the lengths are clipped, p.
// Truncated is set, and decoding goes on; headers that are themselves cut
// still fail with ErrTruncated.
func DecodeTruncated(frame []byte, p *Parsed) error { return decode(frame, p, true) }

func decode(frame []byte, p *Parsed, snapped bool) error {
	*p = Parsed{}
	if len(frame) < EthernetHeaderLen {
		return errEthTruncated
	}
	et := binary.BigEndian.Uint16(frame[12:14])
	off := EthernetHeaderLen
	for IsVLANTPID(et) {
		if p.VLANs == MaxVLANTags {
			return errVLANTooMany
		}
		if len(frame)-off < VLANTagLen {
			return errVLANTruncated
		}
		p.VLANOff[p.VLANs] = off
		p.VLANs++
		et = binary.BigEndian.Uint16(frame[off+2 : off+4])
		off += VLANTagLen
	}
	p.L3Proto = et
	p.L3Off = off
	switch et {
	case EtherTypeIPv4:
		return decodeIPv4(frame, p, snapped)
	case EtherTypeIPv6:
		return decodeIPv6(frame, p, snapped)
	case EtherTypeARP:
		if len(frame)-off < ARPLen {
			return errARPTruncated
		}
		p.L3Len = ARPLen
		if !ARP(frame[off:]).IsValid() {
			return errARPKind
		}
		return nil
	}
	return errEtherType
}

func decodeIPv4(frame []byte, p *Parsed, snapped bool) error {
	off := p.L3Off
	ip := frame[off:]
	if len(ip) < IPv4MinHeaderLen {
		return errIPv4Truncated
	}
	if ip[0]>>4 != IPv4Version {
		return errIPv4Version
	}
	hl := int(ip[0]&0x0f) * 4
	if hl < IPv4MinHeaderLen {
		return errIPv4IHL
	}
	if len(ip) < hl {
		return errIPv4Truncated
	}
	tl := int(binary.BigEndian.Uint16(ip[2:4]))
	if tl < hl {
		return errIPv4TotalLen
	}
	if tl > len(ip) {
		if !snapped {
			return errIPv4Short
		}
		p.Truncated = true
		tl = len(ip)
	}
	p.L3Len = tl
	p.L4Proto = ip[9]
	p.L4Off = off + hl
	frag := binary.BigEndian.Uint16(ip[6:8])
	if frag&0x3fff != 0 {
		p.Fragment = true
		if frag&0x1fff != 0 {
			p.L4Len = tl - hl
			p.PayloadOff, p.PayloadLen = p.L4Off, p.L4Len
			return errIPv4Fragment
		}
	}
	return decodeL4(frame, p, tl-hl)
}

func decodeIPv6(frame []byte, p *Parsed, snapped bool) error {
	off := p.L3Off
	ip := frame[off:]
	if len(ip) < IPv6HeaderLen {
		return errIPv6Truncated
	}
	if ip[0]>>4 != IPv6Version {
		return errIPv6Version
	}
	tl := IPv6HeaderLen + int(binary.BigEndian.Uint16(ip[4:6]))
	if tl > len(ip) {
		if !snapped {
			return errIPv6Short
		}
		p.Truncated = true
		tl = len(ip)
	}
	p.L3Len = tl
	proto, extLen, frag, err := SkipIPv6Extensions(ip[IPv6HeaderLen:tl], ip[6])
	p.L4Proto = proto
	p.L4Off = off + IPv6HeaderLen + extLen
	l4len := tl - IPv6HeaderLen - extLen
	if err != nil {
		return err
	}
	if frag != nil {
		p.Fragment = true
		if frag.FragmentOffset() != 0 {
			p.L4Len = l4len
			p.PayloadOff, p.PayloadLen = p.L4Off, l4len
			return errIPv6Fragment
		}
	}
	return decodeL4(frame, p, l4len)
}

// decodeL4 decodes the transport header at p.L4Off, given the l4len bytes the
// network layer says (or, clipped, has) it occupies.
func decodeL4(frame []byte, p *Parsed, l4len int) error {
	off := p.L4Off
	p.L4Len = l4len
	switch p.L4Proto {
	case IPProtoUDP:
		if l4len < UDPHeaderLen {
			return errUDPTruncated
		}
		ul := int(binary.BigEndian.Uint16(frame[off+4 : off+6]))
		if ul < UDPHeaderLen {
			return errUDPLength
		}
		if ul > l4len {
			if !p.Truncated {
				return errUDPLength
			}
			ul = l4len
		}
		p.L4Len = ul
		p.PayloadOff, p.PayloadLen = off+UDPHeaderLen, ul-UDPHeaderLen
	case IPProtoTCP:
		if l4len < TCPMinHeaderLen {
			return errTCPTruncated
		}
		hl := int(frame[off+12]>>4) * 4
		if hl < TCPMinHeaderLen {
			return errTCPOffset
		}
		if hl > l4len {
			if p.Truncated {
				return errTCPTruncated
			}
			return errTCPOffset
		}
		p.PayloadOff, p.PayloadLen = off+hl, l4len-hl
	case IPProtoICMP, IPProtoICMPv6:
		if l4len < ICMPHeaderLen {
			return errICMPTruncated
		}
		p.PayloadOff, p.PayloadLen = off+ICMPHeaderLen, l4len-ICMPHeaderLen
	default:
		p.PayloadOff, p.PayloadLen = off, l4len
	}
	return nil
}

// The accessors below return views of the decoded layers, bounded by the
// decoded lengths, or nil when the layer is absent or of another kind.

// Ethernet returns the Ethernet header view.
func (p *Parsed) Ethernet(frame []byte) Ethernet { return Ethernet(frame[:EthernetHeaderLen]) }

// VLAN returns tag i (0 is outermost) or nil.
func (p *Parsed) VLAN(frame []byte, i int) VLAN {
	if i < 0 || i >= p.VLANs {
		return nil
	}
	o := p.VLANOff[i]
	return VLAN(frame[o : o+VLANTagLen])
}

// IPv4 returns the IPv4 packet (header and payload) or nil.
func (p *Parsed) IPv4(frame []byte) IPv4 {
	n := uint32(p.L3Len)
	if p.L3Proto != EtherTypeIPv4 || n == 0 {
		return nil
	}
	return IPv4(l3View(frame, p.L3Off, n))
}

// IPv6 returns the IPv6 packet (header and payload) or nil.
func (p *Parsed) IPv6(frame []byte) IPv6 {
	n := uint32(p.L3Len)
	if p.L3Proto != EtherTypeIPv6 || n == 0 {
		return nil
	}
	return IPv6(l3View(frame, p.L3Off, n))
}

// l3View returns the n bytes at off, n > 0, with the capacity cut at their
// end. Offsets and lengths within a frame fit in 32 bits; taken as 32-bit
// values, with the caller's test of n, the compiler sees that the end is
// not before the start and that the view is not empty: one bounds check
// (the end against the capacity) instead of two, and no masking that
// keeps an empty view from pointing past the frame (6 instructions
// instead of 13).
func l3View(frame []byte, off int, n uint32) []byte {
	o := int(uint32(off))
	e := o + int(n)
	return frame[o:e:e]
}

// ARP returns the ARP packet or nil.
func (p *Parsed) ARP(frame []byte) ARP {
	if p.L3Proto != EtherTypeARP || p.L3Len == 0 {
		return nil
	}
	return ARP(frame[p.L3Off : p.L3Off+ARPLen])
}

// L4 returns the transport segment (header and payload) or nil.
func (p *Parsed) L4(frame []byte) []byte {
	if p.L4Off == 0 {
		return nil
	}
	return frame[p.L4Off : p.L4Off+p.L4Len]
}

// UDP returns the UDP datagram or nil.
func (p *Parsed) UDP(frame []byte) UDP {
	if p.L4Proto != IPProtoUDP || p.PayloadOff != p.L4Off+UDPHeaderLen {
		return nil
	}
	return UDP(frame[p.L4Off : p.L4Off+p.L4Len])
}

// TCP returns the TCP segment or nil.
func (p *Parsed) TCP(frame []byte) TCP {
	if p.L4Proto != IPProtoTCP || p.PayloadOff == 0 || p.PayloadOff == p.L4Off {
		return nil
	}
	return TCP(frame[p.L4Off : p.L4Off+p.L4Len])
}

// ICMPv4 returns the ICMP message or nil.
func (p *Parsed) ICMPv4(frame []byte) ICMPv4 {
	if p.L4Proto != IPProtoICMP || p.L3Proto != EtherTypeIPv4 || p.PayloadOff == 0 || p.PayloadOff == p.L4Off {
		return nil
	}
	return ICMPv4(frame[p.L4Off : p.L4Off+p.L4Len])
}

// ICMPv6 returns the ICMPv6 message or nil.
func (p *Parsed) ICMPv6(frame []byte) ICMPv6 {
	if p.L4Proto != IPProtoICMPv6 || p.L3Proto != EtherTypeIPv6 || p.PayloadOff == 0 || p.PayloadOff == p.L4Off {
		return nil
	}
	return ICMPv6(frame[p.L4Off : p.L4Off+p.L4Len])
}

// Payload returns the transport payload (nil when there is none to find).
func (p *Parsed) Payload(frame []byte) []byte {
	if p.PayloadOff == 0 {
		return nil
	}
	return frame[p.PayloadOff : p.PayloadOff+p.PayloadLen]
}
