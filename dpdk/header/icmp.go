package header

import "encoding/binary"

// ICMPHeaderLen is the size of the ICMP and ICMPv6 header including the four
// type-specific bytes (identifier and sequence for echo, unused or MTU for
// errors).
const ICMPHeaderLen = 8

// ICMPv4 message types.
const (
	ICMPv4EchoReply      uint8 = 0
	ICMPv4DestUnreach    uint8 = 3
	ICMPv4SourceQuench   uint8 = 4
	ICMPv4Redirect       uint8 = 5
	ICMPv4Echo           uint8 = 8
	ICMPv4TimeExceeded   uint8 = 11
	ICMPv4ParamProblem   uint8 = 12
	ICMPv4Timestamp      uint8 = 13
	ICMPv4TimestampReply uint8 = 14
)

// ICMPv4 codes of the error types the appliance generates or interprets.
const (
	ICMPv4CodeTTLExceeded      uint8 = 0 // time exceeded in transit
	ICMPv4CodeReassemblyExceed uint8 = 1 // fragment reassembly time exceeded
	ICMPv4CodeNetUnreach       uint8 = 0
	ICMPv4CodeHostUnreach      uint8 = 1
	ICMPv4CodeProtoUnreach     uint8 = 2
	ICMPv4CodePortUnreach      uint8 = 3
	ICMPv4CodeFragNeeded       uint8 = 4
)

// ICMPv4 is a view of an ICMP message (header and body).
type ICMPv4 []byte

// IsValid reports whether the view holds the 8-byte header.
func (m ICMPv4) IsValid() bool { return len(m) >= ICMPHeaderLen }

// Type returns the message type.
func (m ICMPv4) Type() uint8 { return m[0] }

// Code returns the message code.
func (m ICMPv4) Code() uint8 { return m[1] }

// Checksum returns the checksum field.
func (m ICMPv4) Checksum() uint16 { return binary.BigEndian.Uint16(m[2:4]) }

// ID returns the identifier of an echo or timestamp message.
func (m ICMPv4) ID() uint16 { return binary.BigEndian.Uint16(m[4:6]) }

// Seq returns the sequence number of an echo or timestamp message.
func (m ICMPv4) Seq() uint16 { return binary.BigEndian.Uint16(m[6:8]) }

// MTU returns the next-hop MTU of a "fragmentation needed" message (RFC 1191).
func (m ICMPv4) MTU() uint16 { return binary.BigEndian.Uint16(m[6:8]) }

// Payload returns the body after the 8-byte header.
func (m ICMPv4) Payload() []byte { return m[ICMPHeaderLen:] }

// IsError reports whether the type is an error message that quotes the
// offending datagram.
func (m ICMPv4) IsError() bool {
	switch m[0] {
	case ICMPv4DestUnreach, ICMPv4SourceQuench, ICMPv4Redirect, ICMPv4TimeExceeded, ICMPv4ParamProblem:
		return true
	}
	return false
}

// Original returns the quoted datagram of an error message (its IP header and
// at least the first eight bytes of its payload, which for UDP is the header a
// traceroute prober matches on). Check IsError first and the result's IsValid
// before use: the quote may be cut anywhere.
func (m ICMPv4) Original() IPv4 { return IPv4(m[ICMPHeaderLen:]) }

// SetType sets the message type.
func (m ICMPv4) SetType(t uint8) { m[0] = t }

// SetCode sets the message code.
func (m ICMPv4) SetCode(c uint8) { m[1] = c }

// SetChecksum sets the checksum field.
func (m ICMPv4) SetChecksum(c uint16) { binary.BigEndian.PutUint16(m[2:4], c) }

// SetID sets the identifier.
func (m ICMPv4) SetID(id uint16) { binary.BigEndian.PutUint16(m[4:6], id) }

// SetSeq sets the sequence number.
func (m ICMPv4) SetSeq(s uint16) { binary.BigEndian.PutUint16(m[6:8], s) }

// SetRest sets the four type-specific bytes (zero for time exceeded).
func (m ICMPv4) SetRest(v uint32) { binary.BigEndian.PutUint32(m[4:8], v) }

// CalculateChecksum returns the checksum of the whole message (the view's
// length) with the checksum field taken as zero.
func (m ICMPv4) CalculateChecksum() uint16 { return ^Sum(m[4:], Sum(m[:2], 0)) }

// UpdateChecksum recomputes and stores the checksum.
func (m ICMPv4) UpdateChecksum() { m.SetChecksum(m.CalculateChecksum()) }

// ChecksumValid reports whether the stored checksum is correct.
func (m ICMPv4) ChecksumValid() bool { return Sum(m, 0) == 0xffff }

// ICMPv6 message types.
const (
	ICMPv6DestUnreach     uint8 = 1
	ICMPv6PacketTooBig    uint8 = 2
	ICMPv6TimeExceeded    uint8 = 3
	ICMPv6ParamProblem    uint8 = 4
	ICMPv6EchoRequest     uint8 = 128
	ICMPv6EchoReply       uint8 = 129
	ICMPv6RouterSolicit   uint8 = 133
	ICMPv6RouterAdvert    uint8 = 134
	ICMPv6NeighborSolicit uint8 = 135
	ICMPv6NeighborAdvert  uint8 = 136
	ICMPv6Redirect        uint8 = 137
)

// ICMPv6 is a view of an ICMPv6 message (header and body).
type ICMPv6 []byte

// IsValid reports whether the view holds the 8-byte header.
func (m ICMPv6) IsValid() bool { return len(m) >= ICMPHeaderLen }

// Type returns the message type.
func (m ICMPv6) Type() uint8 { return m[0] }

// Code returns the message code.
func (m ICMPv6) Code() uint8 { return m[1] }

// Checksum returns the checksum field.
func (m ICMPv6) Checksum() uint16 { return binary.BigEndian.Uint16(m[2:4]) }

// ID returns the identifier of an echo message.
func (m ICMPv6) ID() uint16 { return binary.BigEndian.Uint16(m[4:6]) }

// Seq returns the sequence number of an echo message.
func (m ICMPv6) Seq() uint16 { return binary.BigEndian.Uint16(m[6:8]) }

// MTU returns the MTU of a packet-too-big message.
func (m ICMPv6) MTU() uint32 { return binary.BigEndian.Uint32(m[4:8]) }

// Payload returns the body after the 8-byte header.
func (m ICMPv6) Payload() []byte { return m[ICMPHeaderLen:] }

// IsError reports whether the type is an error message (types below 128).
func (m ICMPv6) IsError() bool { return m[0] < 128 }

// Original returns the quoted packet of an error message; check its IsValid.
func (m ICMPv6) Original() IPv6 { return IPv6(m[ICMPHeaderLen:]) }

// SetType sets the message type.
func (m ICMPv6) SetType(t uint8) { m[0] = t }

// SetCode sets the message code.
func (m ICMPv6) SetCode(c uint8) { m[1] = c }

// SetChecksum sets the checksum field.
func (m ICMPv6) SetChecksum(c uint16) { binary.BigEndian.PutUint16(m[2:4], c) }

// SetID sets the identifier.
func (m ICMPv6) SetID(id uint16) { binary.BigEndian.PutUint16(m[4:6], id) }

// SetSeq sets the sequence number.
func (m ICMPv6) SetSeq(s uint16) { binary.BigEndian.PutUint16(m[6:8], s) }

// CalculateChecksum returns the checksum of the whole message (the view's
// length) with the IPv6 pseudo-header, the checksum field taken as zero.
func (m ICMPv6) CalculateChecksum(src, dst [16]byte) uint16 {
	return l4Checksum(m, 2, PseudoHeaderSumIPv6(src, dst, IPProtoICMPv6, uint32(len(m))))
}

// UpdateChecksum recomputes and stores the checksum.
func (m ICMPv6) UpdateChecksum(src, dst [16]byte) { m.SetChecksum(m.CalculateChecksum(src, dst)) }

// ChecksumValid reports whether the stored checksum is correct.
func (m ICMPv6) ChecksumValid(src, dst [16]byte) bool {
	return Sum(m, PseudoHeaderSumIPv6(src, dst, IPProtoICMPv6, uint32(len(m)))) == 0xffff
}
