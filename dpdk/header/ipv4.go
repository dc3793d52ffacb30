package header

import (
	"encoding/binary"
	"net/netip"
)

// IPv4 header sizes and field values.
const (
	IPv4MinHeaderLen = 20
	IPv4MaxHeaderLen = 60
	IPv4Version      = 4

	// IPv4FlagMoreFragments and IPv4FlagDontFragment are bits of the 3-bit
	// flags field as returned by IPv4.Flags.
	IPv4FlagMoreFragments = 1
	IPv4FlagDontFragment  = 2
)

// IP protocol numbers (IPv4 protocol / IPv6 next header).
const (
	IPProtoHopByHop uint8 = 0
	IPProtoICMP     uint8 = 1
	IPProtoTCP      uint8 = 6
	IPProtoUDP      uint8 = 17
	IPProtoRouting  uint8 = 43
	IPProtoFragment uint8 = 44
	IPProtoESP      uint8 = 50
	IPProtoAH       uint8 = 51
	IPProtoICMPv6   uint8 = 58
	IPProtoNoNext   uint8 = 59
	IPProtoDstOpts  uint8 = 60
)

// ECN codepoints (RFC 3168), the low two bits of the TOS / traffic class.
const (
	ECNNotECT uint8 = 0 // not ECN-capable
	ECNECT1   uint8 = 1
	ECNECT0   uint8 = 2
	ECNCE     uint8 = 3 // congestion experienced
)

// IPv4 is a view of an IPv4 header followed by its payload. The accessors
// of the fixed header's fields need the whole 20 bytes (IsValid): each
// reads through an ipv4Header, so that one length check, which the
// compiler shares between the accessors a caller inlines, covers all the
// fields it reads.
type IPv4 []byte

// ipv4Header is the fixed IPv4 header, without options.
type ipv4Header = [IPv4MinHeaderLen]byte

// IsValid reports whether the view holds a sane IPv4 header: at least 20
// bytes, version 4, IHL of at least 5 words and within the slice, and a total
// length no shorter than the header. It does not require the whole datagram to
// be present (a snapped capture may stop early) nor check the checksum.
func (ip IPv4) IsValid() bool {
	if len(ip) < IPv4MinHeaderLen || ip[0]>>4 != IPv4Version {
		return false
	}
	hl := ip.HeaderLen()
	return hl >= IPv4MinHeaderLen && hl <= len(ip) && int(ip.TotalLength()) >= hl
}

// Version returns the version nibble.
func (ip IPv4) Version() uint8 { return (*ipv4Header)(ip)[0] >> 4 }

// IHL returns the header length in 32-bit words.
func (ip IPv4) IHL() uint8 { return (*ipv4Header)(ip)[0] & 0x0f }

// HeaderLen returns the header length in bytes (IHL x 4).
func (ip IPv4) HeaderLen() int { return int((*ipv4Header)(ip)[0]&0x0f) * 4 }

// TOS returns the whole type-of-service byte (DSCP << 2 | ECN).
func (ip IPv4) TOS() uint8 { return (*ipv4Header)(ip)[1] }

// DSCP returns the 6-bit differentiated services code point.
func (ip IPv4) DSCP() uint8 { return (*ipv4Header)(ip)[1] >> 2 }

// ECN returns the 2-bit ECN field.
func (ip IPv4) ECN() uint8 { return (*ipv4Header)(ip)[1] & 3 }

// TotalLength returns the length of header plus payload.
func (ip IPv4) TotalLength() uint16 { return binary.BigEndian.Uint16((*ipv4Header)(ip)[2:4]) }

// ID returns the identification field.
func (ip IPv4) ID() uint16 { return binary.BigEndian.Uint16((*ipv4Header)(ip)[4:6]) }

// Flags returns the 3-bit flags field (see IPv4FlagDontFragment and
// IPv4FlagMoreFragments).
func (ip IPv4) Flags() uint8 { return (*ipv4Header)(ip)[6] >> 5 }

// DontFragment reports the DF flag.
func (ip IPv4) DontFragment() bool { return (*ipv4Header)(ip)[6]&0x40 != 0 }

// MoreFragments reports the MF flag.
func (ip IPv4) MoreFragments() bool { return (*ipv4Header)(ip)[6]&0x20 != 0 }

// FragmentOffset returns the fragment offset in bytes (the field is in units
// of eight bytes).
func (ip IPv4) FragmentOffset() uint16 {
	return binary.BigEndian.Uint16((*ipv4Header)(ip)[6:8]) & 0x1fff << 3
}

// IsFragment reports whether the datagram is a fragment (MF set or a nonzero
// offset).
func (ip IPv4) IsFragment() bool { return binary.BigEndian.Uint16((*ipv4Header)(ip)[6:8])&0x3fff != 0 }

// TTL returns the time to live.
func (ip IPv4) TTL() uint8 { return (*ipv4Header)(ip)[8] }

// Protocol returns the payload protocol number.
func (ip IPv4) Protocol() uint8 { return (*ipv4Header)(ip)[9] }

// Checksum returns the header checksum field.
func (ip IPv4) Checksum() uint16 { return binary.BigEndian.Uint16((*ipv4Header)(ip)[10:12]) }

// Src returns the source address.
func (ip IPv4) Src() [4]byte { return [4]byte((*ipv4Header)(ip)[12:16]) }

// Dst returns the destination address.
func (ip IPv4) Dst() [4]byte { return [4]byte((*ipv4Header)(ip)[16:20]) }

// SrcAddr returns the source address as a netip.Addr.
func (ip IPv4) SrcAddr() netip.Addr { return netip.AddrFrom4(ip.Src()) }

// DstAddr returns the destination address as a netip.Addr.
func (ip IPv4) DstAddr() netip.Addr { return netip.AddrFrom4(ip.Dst()) }

// Options returns the option bytes between the fixed header and the payload.
func (ip IPv4) Options() []byte { return ip[IPv4MinHeaderLen:ip.HeaderLen()] }

// Payload returns the payload: the bytes after the header up to the total
// length, or to the end of the view if it is shorter (a snapped capture) or
// the total length is inconsistent.
func (ip IPv4) Payload() []byte {
	hl, tl := ip.HeaderLen(), int(ip.TotalLength())
	if tl > len(ip) || tl < hl {
		tl = len(ip)
	}
	return ip[hl:tl]
}

// SetVersionIHL sets version 4 and the header length in bytes (a multiple of
// four between 20 and 60).
func (ip IPv4) SetVersionIHL(headerLen int) {
	(*ipv4Header)(ip)[0] = IPv4Version<<4 | uint8(headerLen/4)&0x0f
}

// SetTOS sets the type-of-service byte.
func (ip IPv4) SetTOS(tos uint8) { (*ipv4Header)(ip)[1] = tos }

// SetDSCP sets the DSCP, keeping the ECN bits.
func (ip IPv4) SetDSCP(dscp uint8) {
	h := (*ipv4Header)(ip)
	h[1] = dscp<<2 | h[1]&3
}

// SetECN sets the ECN bits, keeping the DSCP.
func (ip IPv4) SetECN(ecn uint8) {
	h := (*ipv4Header)(ip)
	h[1] = h[1]&^3 | ecn&3
}

// SetTotalLength sets the total length.
func (ip IPv4) SetTotalLength(n uint16) { binary.BigEndian.PutUint16((*ipv4Header)(ip)[2:4], n) }

// SetID sets the identification field.
func (ip IPv4) SetID(id uint16) { binary.BigEndian.PutUint16((*ipv4Header)(ip)[4:6], id) }

// SetFlagsFragmentOffset sets the 3-bit flags and the fragment offset given
// in bytes (it must be a multiple of eight).
func (ip IPv4) SetFlagsFragmentOffset(flags uint8, offset uint16) {
	binary.BigEndian.PutUint16((*ipv4Header)(ip)[6:8], uint16(flags&7)<<13|offset>>3&0x1fff)
}

// SetTTL sets the time to live.
func (ip IPv4) SetTTL(ttl uint8) { (*ipv4Header)(ip)[8] = ttl }

// SetProtocol sets the payload protocol number.
func (ip IPv4) SetProtocol(p uint8) { (*ipv4Header)(ip)[9] = p }

// SetChecksum sets the header checksum field.
func (ip IPv4) SetChecksum(c uint16) { binary.BigEndian.PutUint16((*ipv4Header)(ip)[10:12], c) }

// SetSrc sets the source address.
func (ip IPv4) SetSrc(a [4]byte) { copy((*ipv4Header)(ip)[12:16], a[:]) }

// SetDst sets the destination address.
func (ip IPv4) SetDst(a [4]byte) { copy((*ipv4Header)(ip)[16:20], a[:]) }

// CalculateChecksum returns the header checksum computed with the checksum
// field taken as zero.
func (ip IPv4) CalculateChecksum() uint16 { return IPv4HeaderChecksum(ip[:ip.HeaderLen()]) }

// UpdateChecksum recomputes and stores the header checksum.
func (ip IPv4) UpdateChecksum() { ip.SetChecksum(ip.CalculateChecksum()) }

// ChecksumValid reports whether the stored header checksum is correct.
func (ip IPv4) ChecksumValid() bool { return Sum(ip[:ip.HeaderLen()], 0) == 0xffff }

// DecTTL decrements the TTL and patches the checksum incrementally, as a
// router does. It returns false, changing nothing, when the TTL is already 0
// or 1 (the packet must be dropped and, usually, answered with ICMP time
// exceeded).
func (ip IPv4) DecTTL() bool {
	h := (*ipv4Header)(ip)
	if h[8] <= 1 {
		return false
	}
	old := binary.BigEndian.Uint16(h[8:10])
	h[8]--
	ip.SetChecksum(ChecksumUpdate16(ip.Checksum(), old, binary.BigEndian.Uint16(h[8:10])))
	return true
}

// SetECNUpdateChecksum sets the ECN bits and patches the header checksum
// incrementally (an ECN-marking switch or the Lumina dumper restoring CE).
func (ip IPv4) SetECNUpdateChecksum(ecn uint8) {
	h := (*ipv4Header)(ip)
	old := binary.BigEndian.Uint16(h[0:2])
	ip.SetECN(ecn)
	ip.SetChecksum(ChecksumUpdate16(ip.Checksum(), old, binary.BigEndian.Uint16(h[0:2])))
}

// Encode writes a 20-byte header without options and computes its checksum.
// flags is the 3-bit flags field (IPv4FlagDontFragment for RoCE, as rxe does).
func (ip IPv4) Encode(tos uint8, totalLen, id uint16, flags, ttl, proto uint8, src, dst [4]byte) {
	_ = ip[19]
	ip[0] = IPv4Version<<4 | 5
	ip[1] = tos
	binary.BigEndian.PutUint16(ip[2:4], totalLen)
	binary.BigEndian.PutUint16(ip[4:6], id)
	binary.BigEndian.PutUint16(ip[6:8], uint16(flags&7)<<13)
	ip[8] = ttl
	ip[9] = proto
	ip[10], ip[11] = 0, 0
	copy(ip[12:16], src[:])
	copy(ip[16:20], dst[:])
	ip.SetChecksum(IPv4HeaderChecksum(ip[:20]))
}
