package header

import (
	"encoding/binary"
	"net/netip"
)

// IPv6 header sizes.
const (
	IPv6HeaderLen         = 40
	IPv6Version           = 6
	IPv6FragmentHeaderLen = 8
	// MaxIPv6ExtHeaders bounds the extension header chain SkipIPv6Extensions
	// walks, so that a hostile chain costs a bounded amount of work.
	MaxIPv6ExtHeaders = 8
)

// IPv6 is a view of an IPv6 header followed by its payload. The accessors
// of the fixed header's fields need the whole 40 bytes (IsValid) and read
// through an ipv6Header, as IPv4's do.
type IPv6 []byte

// ipv6Header is the fixed IPv6 header.
type ipv6Header = [IPv6HeaderLen]byte

// IsValid reports whether the view holds a complete fixed header of version 6.
// It does not require the payload to be present.
func (ip IPv6) IsValid() bool { return len(ip) >= IPv6HeaderLen && ip[0]>>4 == IPv6Version }

// Version returns the version nibble.
func (ip IPv6) Version() uint8 { return (*ipv6Header)(ip)[0] >> 4 }

// TrafficClass returns the 8-bit traffic class (DSCP << 2 | ECN).
func (ip IPv6) TrafficClass() uint8 {
	return uint8(binary.BigEndian.Uint16((*ipv6Header)(ip)[0:2]) >> 4)
}

// DSCP returns the 6-bit differentiated services code point.
func (ip IPv6) DSCP() uint8 { return ip.TrafficClass() >> 2 }

// ECN returns the 2-bit ECN field.
func (ip IPv6) ECN() uint8 { return ip.TrafficClass() & 3 }

// FlowLabel returns the 20-bit flow label.
func (ip IPv6) FlowLabel() uint32 { return binary.BigEndian.Uint32((*ipv6Header)(ip)[0:4]) & 0xfffff }

// PayloadLength returns the length of everything after the fixed header
// (extension headers included).
func (ip IPv6) PayloadLength() uint16 { return binary.BigEndian.Uint16((*ipv6Header)(ip)[4:6]) }

// NextHeader returns the type of the header after the fixed header.
func (ip IPv6) NextHeader() uint8 { return (*ipv6Header)(ip)[6] }

// HopLimit returns the hop limit.
func (ip IPv6) HopLimit() uint8 { return (*ipv6Header)(ip)[7] }

// Src returns the source address.
func (ip IPv6) Src() [16]byte { return [16]byte((*ipv6Header)(ip)[8:24]) }

// Dst returns the destination address.
func (ip IPv6) Dst() [16]byte { return [16]byte((*ipv6Header)(ip)[24:40]) }

// SrcAddr returns the source address as a netip.Addr.
func (ip IPv6) SrcAddr() netip.Addr { return netip.AddrFrom16(ip.Src()) }

// DstAddr returns the destination address as a netip.Addr.
func (ip IPv6) DstAddr() netip.Addr { return netip.AddrFrom16(ip.Dst()) }

// Payload returns the bytes after the fixed header up to the payload length,
// or to the end of the view if it is shorter.
func (ip IPv6) Payload() []byte {
	end := IPv6HeaderLen + int(ip.PayloadLength())
	if end > len(ip) {
		end = len(ip)
	}
	return ip[IPv6HeaderLen:end]
}

// SetTrafficClass sets the traffic class, keeping version and flow label.
func (ip IPv6) SetTrafficClass(tc uint8) {
	h := (*ipv6Header)(ip)
	v := binary.BigEndian.Uint32(h[0:4])
	binary.BigEndian.PutUint32(h[0:4], v&^0x0ff00000|uint32(tc)<<20)
}

// SetDSCP sets the DSCP, keeping the ECN bits.
func (ip IPv6) SetDSCP(dscp uint8) { ip.SetTrafficClass(dscp<<2 | ip.ECN()) }

// SetECN sets the ECN bits, keeping the DSCP.
func (ip IPv6) SetECN(ecn uint8) { ip.SetTrafficClass(ip.TrafficClass()&^3 | ecn&3) }

// SetFlowLabel sets the 20-bit flow label.
func (ip IPv6) SetFlowLabel(fl uint32) {
	h := (*ipv6Header)(ip)
	v := binary.BigEndian.Uint32(h[0:4])
	binary.BigEndian.PutUint32(h[0:4], v&^0xfffff|fl&0xfffff)
}

// SetPayloadLength sets the payload length.
func (ip IPv6) SetPayloadLength(n uint16) { binary.BigEndian.PutUint16((*ipv6Header)(ip)[4:6], n) }

// SetNextHeader sets the next header type.
func (ip IPv6) SetNextHeader(p uint8) { (*ipv6Header)(ip)[6] = p }

// SetHopLimit sets the hop limit.
func (ip IPv6) SetHopLimit(h uint8) { (*ipv6Header)(ip)[7] = h }

// SetSrc sets the source address.
func (ip IPv6) SetSrc(a [16]byte) { copy((*ipv6Header)(ip)[8:24], a[:]) }

// SetDst sets the destination address.
func (ip IPv6) SetDst(a [16]byte) { copy((*ipv6Header)(ip)[24:40], a[:]) }

// Encode writes a whole fixed header.
func (ip IPv6) Encode(tc uint8, flowLabel uint32, payloadLen uint16, next, hopLimit uint8, src, dst [16]byte) {
	_ = ip[39]
	binary.BigEndian.PutUint32(ip[0:4], IPv6Version<<28|uint32(tc)<<20|flowLabel&0xfffff)
	binary.BigEndian.PutUint16(ip[4:6], payloadLen)
	ip[6] = next
	ip[7] = hopLimit
	copy(ip[8:24], src[:])
	copy(ip[24:40], dst[:])
}

// IPv6Fragment is a view of an IPv6 fragment extension header.
type IPv6Fragment []byte

// IsValid reports whether the view holds a complete fragment header.
func (f IPv6Fragment) IsValid() bool { return len(f) >= IPv6FragmentHeaderLen }

// NextHeader returns the type of the fragmentable part's first header.
func (f IPv6Fragment) NextHeader() uint8 { return f[0] }

// FragmentOffset returns the offset of this fragment in bytes.
func (f IPv6Fragment) FragmentOffset() uint16 { return binary.BigEndian.Uint16(f[2:4]) &^ 7 }

// MoreFragments reports the M flag.
func (f IPv6Fragment) MoreFragments() bool { return f[3]&1 != 0 }

// ID returns the 32-bit identification.
func (f IPv6Fragment) ID() uint32 { return binary.BigEndian.Uint32(f[4:8]) }

// IsIPv6ExtHeader reports whether proto is an extension header that
// SkipIPv6Extensions walks over.
func IsIPv6ExtHeader(proto uint8) bool {
	switch proto {
	case IPProtoHopByHop, IPProtoRouting, IPProtoFragment, IPProtoDstOpts, IPProtoAH:
		return true
	}
	return false
}

// SkipIPv6Extensions walks the extension header chain at the start of b (an
// IPv6 payload) whose first header type is next: hop-by-hop options, routing,
// fragment, destination options and AH. It returns the upper-layer protocol,
// its offset in b, and the fragment header if there was one (nil otherwise).
//
// A non-first fragment stops the walk at the fragment header: what follows is
// not the start of an upper-layer header, so proto is the fragment header's
// next header and off points at the fragment data; the caller recognises the
// case from frag.FragmentOffset() != 0. ESP and "no next header" also end the
// walk, since nothing after them can be parsed.
func SkipIPv6Extensions(b []byte, next uint8) (proto uint8, off int, frag IPv6Fragment, err error) {
	for i := 0; i <= MaxIPv6ExtHeaders; i++ {
		var n int
		switch next {
		case IPProtoHopByHop, IPProtoRouting, IPProtoDstOpts:
			if len(b)-off < 8 {
				return next, off, frag, errIPv6ExtTruncated
			}
			n = (int(b[off+1]) + 1) * 8
		case IPProtoAH:
			if len(b)-off < 8 {
				return next, off, frag, errIPv6ExtTruncated
			}
			n = (int(b[off+1]) + 2) * 4
		case IPProtoFragment:
			if len(b)-off < IPv6FragmentHeaderLen {
				return next, off, frag, errIPv6ExtTruncated
			}
			frag = IPv6Fragment(b[off : off+IPv6FragmentHeaderLen])
			next = b[off]
			off += IPv6FragmentHeaderLen
			if frag.FragmentOffset() != 0 {
				return next, off, frag, nil
			}
			continue
		default:
			return next, off, frag, nil
		}
		if len(b)-off < n {
			return next, off, frag, errIPv6ExtTruncated
		}
		next = b[off]
		off += n
	}
	return next, off, frag, errIPv6ExtTooMany
}
