package header

import "encoding/binary"

// UDPHeaderLen is the size of a UDP header.
const UDPHeaderLen = 8

// UDP is a view of a UDP header followed by its payload.
type UDP []byte

// IsValid reports whether the view holds a header whose length field is at
// least 8 and does not exceed the view.
func (u UDP) IsValid() bool {
	if len(u) < UDPHeaderLen {
		return false
	}
	n := int(u.Length())
	return n >= UDPHeaderLen && n <= len(u)
}

// SrcPort returns the source port.
func (u UDP) SrcPort() uint16 { return binary.BigEndian.Uint16(u[0:2]) }

// DstPort returns the destination port.
func (u UDP) DstPort() uint16 { return binary.BigEndian.Uint16(u[2:4]) }

// Length returns the length of header plus payload.
func (u UDP) Length() uint16 { return binary.BigEndian.Uint16(u[4:6]) }

// Checksum returns the checksum field (0 means "none" over IPv4).
func (u UDP) Checksum() uint16 { return binary.BigEndian.Uint16(u[6:8]) }

// Payload returns the payload up to the length field, or to the end of the
// view if the length is inconsistent.
func (u UDP) Payload() []byte {
	n := int(u.Length())
	if n < UDPHeaderLen || n > len(u) {
		n = len(u)
	}
	return u[UDPHeaderLen:n]
}

// SetSrcPort sets the source port.
func (u UDP) SetSrcPort(p uint16) { binary.BigEndian.PutUint16(u[0:2], p) }

// SetDstPort sets the destination port.
func (u UDP) SetDstPort(p uint16) { binary.BigEndian.PutUint16(u[2:4], p) }

// SetLength sets the length field.
func (u UDP) SetLength(n uint16) { binary.BigEndian.PutUint16(u[4:6], n) }

// SetChecksum sets the checksum field.
func (u UDP) SetChecksum(c uint16) { binary.BigEndian.PutUint16(u[6:8], c) }

// Encode writes a whole header.
func (u UDP) Encode(src, dst, length, checksum uint16) {
	_ = u[7]
	binary.BigEndian.PutUint16(u[0:2], src)
	binary.BigEndian.PutUint16(u[2:4], dst)
	binary.BigEndian.PutUint16(u[4:6], length)
	binary.BigEndian.PutUint16(u[6:8], checksum)
}

// segment returns header plus payload per the length field, clipped to the view.
func (u UDP) segment() []byte {
	n := int(u.Length())
	if n < UDPHeaderLen || n > len(u) {
		n = len(u)
	}
	return u[:n]
}

// CalculateChecksumIPv4 returns the checksum of the datagram (per its length
// field) over IPv4, ignoring the stored checksum.
func (u UDP) CalculateChecksumIPv4(src, dst [4]byte) uint16 {
	return UDPChecksumIPv4(src, dst, u.segment())
}

// CalculateChecksumIPv6 returns the checksum of the datagram over IPv6.
func (u UDP) CalculateChecksumIPv6(src, dst [16]byte) uint16 {
	return UDPChecksumIPv6(src, dst, u.segment())
}

// ChecksumValidIPv4 reports whether the stored checksum is correct; a zero
// checksum (not computed by the sender, as RoCEv2 does) is accepted.
func (u UDP) ChecksumValidIPv4(src, dst [4]byte) bool {
	if u.Checksum() == 0 {
		return true
	}
	seg := u.segment()
	return Sum(seg, PseudoHeaderSumIPv4(src, dst, IPProtoUDP, uint16(len(seg)))) == 0xffff
}

// ChecksumValidIPv6 reports whether the stored checksum is correct. A zero
// checksum is rejected, as RFC 8200 requires; callers that accept RoCEv2's
// zero checksum over IPv6 check for zero themselves.
func (u UDP) ChecksumValidIPv6(src, dst [16]byte) bool {
	if u.Checksum() == 0 {
		return false
	}
	seg := u.segment()
	return Sum(seg, PseudoHeaderSumIPv6(src, dst, IPProtoUDP, uint32(len(seg)))) == 0xffff
}
