package header

import (
	"encoding/binary"
	"math/bits"
)

// The Internet checksum (RFC 1071) is the one's complement of the one's
// complement sum of the data taken as big-endian 16-bit words. The sum is
// independent of byte order up to a final byte swap (RFC 1071 section 2(B)),
// so the loop adds little-endian 64-bit words with end-around carry, which on
// amd64 and arm64 is one load and one add-with-carry per eight bytes, and
// swaps once at the end.

// Sum returns the 16-bit one's complement sum (not complemented) of b added to
// initial, both in network byte order. It is the building block for chaining
// checksums over several pieces (a pseudo-header, a header, a payload): feed
// the result of one call as initial to the next. Every piece but the last must
// have an even length, because an odd piece would shift the byte pairing of
// the next.
func Sum(b []byte, initial uint16) uint16 {
	return bits.ReverseBytes16(fold(sumLE(b, uint64(bits.ReverseBytes16(initial)))))
}

// Checksum returns the Internet checksum of b: the complement of Sum(b, 0).
// Placing it in a zeroed checksum field of b makes Sum(b, 0) == 0xffff.
func Checksum(b []byte) uint16 { return ^Sum(b, 0) }

// Combine adds two partial sums in one's complement arithmetic.
func Combine(a, b uint16) uint16 {
	s := uint32(a) + uint32(b)
	return uint16(s + s>>16)
}

// sumLE adds b to acc as little-endian words with end-around carry. The result
// is congruent, modulo 0xffff, to the little-endian 16-bit word sum.
func sumLE(b []byte, acc uint64) uint64 {
	var c uint64
	for len(b) >= 32 {
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[0:8]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[8:16]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[16:24]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[24:32]), c)
		b = b[32:]
	}
	for len(b) >= 8 {
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[0:8]), c)
		b = b[8:]
	}
	if len(b) >= 4 {
		acc, c = bits.Add64(acc, uint64(binary.LittleEndian.Uint32(b[0:4])), c)
		b = b[4:]
	}
	if len(b) >= 2 {
		acc, c = bits.Add64(acc, uint64(binary.LittleEndian.Uint16(b[0:2])), c)
		b = b[2:]
	}
	if len(b) == 1 {
		// A trailing odd byte is the high byte of a big-endian word padded
		// with zero, which is the low byte of a little-endian one.
		acc, c = bits.Add64(acc, uint64(b[0]), c)
	}
	acc, c = bits.Add64(acc, 0, c)
	return acc + c // c is 1 only if acc wrapped to 0, so this cannot overflow
}

// fold reduces a 64-bit end-around-carry sum to 16 bits.
func fold(acc uint64) uint16 {
	acc = acc>>32 + acc&0xffffffff
	acc = acc>>16 + acc&0xffff
	acc = acc>>16 + acc&0xffff
	acc = acc>>16 + acc&0xffff
	return uint16(acc)
}

// PseudoHeaderSumIPv4 returns the partial sum of the IPv4 pseudo-header used
// by UDP, TCP and friends: source, destination, zero, protocol, L4 length.
func PseudoHeaderSumIPv4(src, dst [4]byte, proto uint8, l4len uint16) uint16 {
	s := uint32(src[0])<<8 | uint32(src[1])
	s += uint32(src[2])<<8 | uint32(src[3])
	s += uint32(dst[0])<<8 | uint32(dst[1])
	s += uint32(dst[2])<<8 | uint32(dst[3])
	s += uint32(proto) + uint32(l4len)
	s = s>>16 + s&0xffff
	return uint16(s + s>>16)
}

// PseudoHeaderSumIPv6 returns the partial sum of the IPv6 pseudo-header (RFC
// 8200 section 8.1): source, destination, upper-layer length, next header.
func PseudoHeaderSumIPv6(src, dst [16]byte, proto uint8, l4len uint32) uint16 {
	acc := sumLE(src[:], 0)
	acc = sumLE(dst[:], acc)
	s := bits.ReverseBytes16(fold(acc))
	return Combine(Combine(s, uint16(l4len>>16)), Combine(uint16(l4len), uint16(proto)))
}

// ChecksumUpdate16 returns the checksum after a 16-bit word covered by it
// changed from old to new, by RFC 1624 equation 3: HC' = ~(~HC + ~m + m').
// The word must sit at an even offset from the start of the checksummed data
// (true of every 16-bit header field).
func ChecksumUpdate16(check, old, new uint16) uint16 {
	s := uint32(^check) + uint32(^old) + uint32(new)
	s = s>>16 + s&0xffff
	s += s >> 16
	return ^uint16(s)
}

// ChecksumUpdate32 is ChecksumUpdate16 for an aligned 32-bit field such as an
// IPv4 address (the pseudo-header of UDP and TCP includes the addresses, so a
// NAT updates those checksums with it too).
func ChecksumUpdate32(check uint16, old, new uint32) uint16 {
	s := uint64(^check) + uint64(^uint16(old>>16)) + uint64(^uint16(old)) +
		uint64(new>>16) + uint64(new&0xffff)
	s = s>>16 + s&0xffff
	s = s>>16 + s&0xffff
	return ^uint16(s)
}

// IPv4HeaderChecksum returns the checksum of an IPv4 header as if its checksum
// field were zero. hdr must be the header only (IHL x 4 bytes).
func IPv4HeaderChecksum(hdr []byte) uint16 {
	// Sum the whole header in one pass and take the stored checksum back out
	// by adding its complement (one's complement subtraction).
	acc, c := bits.Add64(sumLE(hdr, 0), uint64(^binary.LittleEndian.Uint16(hdr[10:12])), 0)
	return ^bits.ReverseBytes16(fold(acc + c))
}

// l4Checksum returns the checksum of seg (whose checksum field at csumOff is
// taken as zero) continuing from a pseudo-header sum.
func l4Checksum(seg []byte, csumOff int, pseudo uint16) uint16 {
	s := Sum(seg[:csumOff], pseudo)
	return ^Sum(seg[csumOff+2:], s)
}

// UDPChecksumIPv4 returns the checksum for a UDP datagram seg (header and
// payload, with seg's checksum field ignored) sent from src to dst over IPv4.
// A computed zero is returned as 0xffff, because zero in the field means "no
// checksum" (RFC 768).
func UDPChecksumIPv4(src, dst [4]byte, seg []byte) uint16 {
	c := l4Checksum(seg, 6, PseudoHeaderSumIPv4(src, dst, IPProtoUDP, uint16(len(seg))))
	if c == 0 {
		c = 0xffff
	}
	return c
}

// UDPChecksumIPv6 is UDPChecksumIPv4 with the IPv6 pseudo-header. Over IPv6
// the checksum is mandatory (RFC 8200), except for tunnels under RFC 6935.
func UDPChecksumIPv6(src, dst [16]byte, seg []byte) uint16 {
	c := l4Checksum(seg, 6, PseudoHeaderSumIPv6(src, dst, IPProtoUDP, uint32(len(seg))))
	if c == 0 {
		c = 0xffff
	}
	return c
}
