package roce

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/rdma-appliance/appliance/dpdk/header"
)

// The ICRC is the IEEE CRC-32 (reflected, as hash/crc32.ChecksumIEEE) over:
// eight bytes of 0xff standing for the InfiniBand LRH that RoCEv2 does not
// carry; the IP header with the fields routers may change set to all ones
// (IPv4 TOS, TTL and header checksum; IPv6 traffic class, flow label and hop
// limit); the UDP header with its checksum set to all ones; the BTH with its
// byte before DestQP set to all ones; then everything else up to the end of
// the pad. It is stored after the pad in little-endian byte order.
//
// Rather than hash the eight 0xff bytes every time, the CRC starts from the
// state they lead to. Linux rxe keeps the raw (uninverted) register and starts
// at 0xdebb20e3; hash/crc32 works with the inverted form, so the same start is
// ^0xdebb20e3 == crc32.ChecksumIEEE(8 x 0xff) == 0x2144df1c.
const (
	icrcSeedRaw = 0xdebb20e3
	icrcSeed    = ^uint32(icrcSeedRaw)
)

// The masked headers are copied to a small array on the stack. They must not
// be handed to crc32.Update: it dispatches through a function variable, so the
// compiler cannot prove the slice does not escape and would move the array to
// the heap on every call. They are hashed instead by updateSlicing8 below, the
// same slicing-by-8 algorithm hash/crc32 itself uses for short inputs; the
// payload, which lives in the caller's buffer, goes to crc32.Update, which on
// amd64 and arm64 folds it with carry-less multiplication.

// slicing8 holds the eight 256-entry tables of slicing-by-8 for the IEEE
// polynomial; entry 0 is crc32.IEEETable.
var slicing8 = func() *[8][256]uint32 {
	t := new([8][256]uint32)
	t[0] = *crc32.IEEETable
	for i := 0; i < 256; i++ {
		c := t[0][i]
		for k := 1; k < 8; k++ {
			c = t[0][c&0xff] ^ c>>8
			t[k][i] = c
		}
	}
	return t
}()

// updateSlicing8 is crc32.Update(crc, crc32.IEEETable, p) for short p.
func updateSlicing8(crc uint32, p []byte) uint32 {
	t := slicing8
	crc = ^crc
	for len(p) >= 8 {
		crc ^= binary.LittleEndian.Uint32(p[0:4])
		crc = t[0][p[7]] ^ t[1][p[6]] ^ t[2][p[5]] ^ t[3][p[4]] ^
			t[4][crc>>24] ^ t[5][crc>>16&0xff] ^ t[6][crc>>8&0xff] ^ t[7][crc&0xff]
		p = p[8:]
	}
	for _, v := range p {
		crc = t[0][byte(crc)^v] ^ crc>>8
	}
	return ^crc
}

// clmulMin is the length from which hash/crc32 switches to carry-less
// multiplication on amd64 and arm64.
const clmulMin = 64

// maxMasked is the most header bytes copied for masking: an IPv4 header with
// full options, the UDP header and the BTH.
const maxMasked = header.IPv4MaxHeaderLen + header.UDPHeaderLen + BTHLen

// icrc computes the ICRC of pkt, which runs from the first byte of the IP
// header to the end of the pad. ipHdrLen is the length of the fixed IP header
// (IHL x 4, or 40 for IPv6) and udpOff the offset of the UDP header (larger
// than ipHdrLen only when IPv6 extension headers sit in between; they are
// covered as they are). The caller guarantees len(pkt) >= udpOff+20.
func icrc(pkt []byte, ipHdrLen, udpOff int, v6 bool) uint32 {
	var s [maxMasked]byte
	n := copy(s[:ipHdrLen], pkt)
	if v6 {
		s[0] |= 0x0f // traffic class (high nibble) ...
		s[1] = 0xff  // ... traffic class (low nibble) and flow label
		s[2], s[3] = 0xff, 0xff
		s[7] = 0xff // hop limit
	} else {
		s[1] = 0xff               // TOS (DSCP and ECN)
		s[8] = 0xff               // TTL
		s[10], s[11] = 0xff, 0xff // header checksum
	}
	crc := uint32(icrcSeed)
	if udpOff != ipHdrLen {
		crc = updateSlicing8(crc, s[:n])
		crc = crc32.Update(crc, crc32.IEEETable, pkt[ipHdrLen:udpOff])
		n = 0
	}
	copy(s[n:n+header.UDPHeaderLen+BTHLen], pkt[udpOff:])
	s[n+6], s[n+7] = 0xff, 0xff // UDP checksum
	s[n+header.UDPHeaderLen+4] = 0xff
	n += header.UDPHeaderLen + BTHLen
	crc = updateSlicing8(crc, s[:n])
	rest := pkt[udpOff+header.UDPHeaderLen+BTHLen:]
	if len(rest) < clmulMin {
		// Below this hash/crc32 would use slicing-by-8 (or a byte loop)
		// anyway; calling it directly saves the dispatch.
		return updateSlicing8(crc, rest)
	}
	// hash/crc32 folds whole 16-byte blocks and finishes a shorter tail
	// with a byte loop; hand it the blocks and hash the tail here.
	blocks := len(rest) &^ 15
	crc = crc32.Update(crc, crc32.IEEETable, rest[:blocks])
	return updateSlicing8(crc, rest[blocks:])
}

// ICRC computes the ICRC of a RoCEv2 packet given as pkt, from the first byte
// of the IPv4 or IPv6 header to the last byte of pad (the ICRC itself not
// included). It checks only what it needs: an IP header, UDP, and room for
// the UDP header and BTH.
func ICRC(pkt []byte) (uint32, error) {
	if len(pkt) < 1 {
		return 0, errICRCTruncated
	}
	switch pkt[0] >> 4 {
	case 4:
		if len(pkt) < header.IPv4MinHeaderLen {
			return 0, errICRCTruncated
		}
		hl := int(pkt[0]&0x0f) * 4
		if hl < header.IPv4MinHeaderLen {
			return 0, errICRCBadIP
		}
		if pkt[9] != header.IPProtoUDP {
			return 0, errNotUDP
		}
		if len(pkt) < hl+header.UDPHeaderLen+BTHLen {
			return 0, errICRCTruncated
		}
		return icrc(pkt, hl, hl, false), nil
	case 6:
		if len(pkt) < header.IPv6HeaderLen {
			return 0, errICRCTruncated
		}
		proto, off, _, err := header.SkipIPv6Extensions(pkt[header.IPv6HeaderLen:], pkt[6])
		if err != nil {
			return 0, err
		}
		if proto != header.IPProtoUDP {
			return 0, errNotUDP
		}
		udpOff := header.IPv6HeaderLen + off
		if len(pkt) < udpOff+header.UDPHeaderLen+BTHLen {
			return 0, errICRCTruncated
		}
		return icrc(pkt, header.IPv6HeaderLen, udpOff, true), nil
	}
	return 0, errICRCBadIP
}

// ComputeICRC computes the ICRC of a packet decoded by Parse.
func (p *Packet) ComputeICRC(frame []byte) uint32 {
	l3 := p.Net.L3Off
	v6 := p.Net.L3Proto == header.EtherTypeIPv6
	hl := header.IPv6HeaderLen
	if !v6 {
		hl = int(frame[l3]&0x0f) * 4
	}
	return icrc(frame[l3:p.ICRCOff], hl, p.Net.L4Off-l3, v6)
}

// ICRC returns the ICRC stored in the packet.
func (p *Packet) ICRC(frame []byte) uint32 {
	return binary.LittleEndian.Uint32(frame[p.ICRCOff : p.ICRCOff+ICRCLen])
}

// VerifyICRC returns nil if the stored ICRC is right and ErrBadICRC if not
// (ErrTruncated if the frame does not hold the whole packet, which only
// happens after ParseTruncated).
func (p *Packet) VerifyICRC(frame []byte) error {
	if p.ICRCOff+ICRCLen > len(frame) {
		return errICRCNotCaptured
	}
	if p.ComputeICRC(frame) != p.ICRC(frame) {
		return ErrBadICRC
	}
	return nil
}

// UpdateICRC recomputes and stores the ICRC, after a change to a covered
// field (a translator rewriting a PSN or QPN). Changes to the masked fields
// (ECN marking, TTL, checksums) do not need it: that is what the mask is for.
func (p *Packet) UpdateICRC(frame []byte) {
	binary.LittleEndian.PutUint32(frame[p.ICRCOff:p.ICRCOff+ICRCLen], p.ComputeICRC(frame))
}

// ICRCPrefix is the ICRC's state after the masked IP and UDP headers of a
// packet. A sender whose IP and UDP headers do not change from packet to
// packet (a DTA translator's connection: same addresses, ports and
// length) computes it once and then covers only the BTH and what follows
// for each packet.
type ICRCPrefix uint32

// NewICRCPrefix computes the prefix state of pkt (from the IP header on),
// an IPv4 or IPv6 RoCEv2 packet.
func NewICRCPrefix(pkt []byte) (ICRCPrefix, error) {
	if _, err := ICRC(pkt); err != nil {
		return 0, err
	}
	var hl, udpOff int
	v6 := pkt[0]>>4 == 6
	if v6 {
		_, off, _, _ := header.SkipIPv6Extensions(pkt[header.IPv6HeaderLen:], pkt[6])
		hl, udpOff = header.IPv6HeaderLen, header.IPv6HeaderLen+off
	} else {
		hl = int(pkt[0]&0x0f) * 4
		udpOff = hl
	}
	var s [maxMasked]byte
	n := copy(s[:hl], pkt)
	if v6 {
		s[0] |= 0x0f
		s[1], s[2], s[3], s[7] = 0xff, 0xff, 0xff, 0xff
	} else {
		s[1], s[8], s[10], s[11] = 0xff, 0xff, 0xff, 0xff
	}
	crc := uint32(icrcSeed)
	if udpOff != hl {
		crc = updateSlicing8(crc, s[:n])
		crc = crc32.Update(crc, crc32.IEEETable, pkt[hl:udpOff])
		n = 0
	}
	copy(s[n:n+header.UDPHeaderLen], pkt[udpOff:])
	s[n+6], s[n+7] = 0xff, 0xff
	n += header.UDPHeaderLen
	return ICRCPrefix(updateSlicing8(crc, s[:n])), nil
}

// Finish returns the ICRC of a packet with this prefix, given its bytes
// from the BTH up to (not including) the ICRC.
func (c ICRCPrefix) Finish(fromBTH []byte) uint32 {
	var bth [BTHLen]byte
	copy(bth[:], fromBTH)
	bth[4] = 0xff // the BTH's reserved byte before the destination QP
	crc := updateSlicing8(uint32(c), bth[:])
	return updateSlicing8(crc, fromBTH[BTHLen:])
}
