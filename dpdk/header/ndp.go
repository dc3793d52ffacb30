package header

import "encoding/binary"

// IPv6 neighbour discovery (RFC 4861): the Neighbor Solicitation and
// Neighbor Advertisement messages with their link-layer address options,
// which is what a host needs to resolve and answer for its own addresses.

// ND message sizes: the 8-byte ICMPv6 header, the 16-byte target address and
// one 8-byte link-layer address option.
const (
	NDMessageLen = ICMPHeaderLen + 16
	NDOptionLen  = 8
	// NDFrameLen is an Ethernet frame holding an NS or NA with one
	// link-layer address option.
	NDFrameLen = EthernetHeaderLen + IPv6HeaderLen + NDMessageLen + NDOptionLen
)

// ND option types.
const (
	NDOptSourceLinkAddr uint8 = 1
	NDOptTargetLinkAddr uint8 = 2
)

// Neighbor Advertisement flags (the top bits of the reserved word).
const (
	NAFlagRouter    uint32 = 1 << 31
	NAFlagSolicited uint32 = 1 << 30
	NAFlagOverride  uint32 = 1 << 29
)

// ND is a view of a Neighbor Solicitation or Advertisement (ICMPv6 type 135
// or 136), header included.
type ND []byte

// IsValid reports whether the view holds the header and target address and
// is an NS or NA with code 0.
func (m ND) IsValid() bool {
	return len(m) >= NDMessageLen && (m[0] == ICMPv6NeighborSolicit || m[0] == ICMPv6NeighborAdvert) && m[1] == 0
}

// Type returns the ICMPv6 type.
func (m ND) Type() uint8 { return m[0] }

// Flags returns the advertisement flags (NAFlag*).
func (m ND) Flags() uint32 { return binary.BigEndian.Uint32(m[4:8]) & 0xe0000000 }

// Target returns the target address.
func (m ND) Target() [16]byte { return [16]byte(m[8:24]) }

// LinkAddr returns the MAC of the first option of type opt (source or
// target link-layer address), if the options hold a well-formed one.
func (m ND) LinkAddr(opt uint8) (MAC, bool) {
	o := m[NDMessageLen:]
	for len(o) >= 2 {
		n := int(o[1]) * 8
		if n == 0 || n > len(o) {
			return MAC{}, false // RFC 4861 7.1.1: zero length is invalid
		}
		if o[0] == opt && n >= 8 {
			return MAC(o[2:8]), true
		}
		o = o[n:]
	}
	return MAC{}, false
}

// SolicitedNodeMulticast returns ff02::1:ffXX:XXXX for addr.
func SolicitedNodeMulticast(addr [16]byte) [16]byte {
	return [16]byte{0: 0xff, 1: 0x02, 11: 0x01, 12: 0xff, 13: addr[13], 14: addr[14], 15: addr[15]}
}

// MulticastMAC returns the Ethernet address of an IPv6 multicast group
// (33:33 and the group's low 32 bits).
func MulticastMAC(group [16]byte) MAC {
	return MAC{0x33, 0x33, group[12], group[13], group[14], group[15]}
}

func writeND(frame []byte, typ uint8, flags uint32, ethDst, src MAC, srcIP, dstIP, target [16]byte, opt uint8) (int, error) {
	if len(frame) < NDFrameLen {
		return 0, ErrShortBuffer
	}
	Ethernet(frame).Encode(ethDst, src, EtherTypeIPv6)
	IPv6(frame[EthernetHeaderLen:]).Encode(0, 0, NDMessageLen+NDOptionLen, IPProtoICMPv6, 255, srcIP, dstIP)
	m := frame[EthernetHeaderLen+IPv6HeaderLen : NDFrameLen]
	m[0], m[1] = typ, 0
	binary.BigEndian.PutUint32(m[4:8], flags)
	copy(m[8:24], target[:])
	m[24], m[25] = opt, 1
	copy(m[26:32], src[:])
	ICMPv6(m).UpdateChecksum(srcIP, dstIP)
	return NDFrameLen, nil
}

// WriteNeighborSolicit writes a multicast solicitation for target from
// (src, srcIP), with the source link-layer address option, and returns the
// frame length (NDFrameLen).
func WriteNeighborSolicit(frame []byte, src MAC, srcIP, target [16]byte) (int, error) {
	group := SolicitedNodeMulticast(target)
	return writeND(frame, ICMPv6NeighborSolicit, 0, MulticastMAC(group), src, srcIP, group, target, NDOptSourceLinkAddr)
}

// WriteNeighborAdvert writes a solicited, overriding advertisement that
// target is at src, sent from target to (dst, dstIP), and returns the frame
// length (NDFrameLen).
func WriteNeighborAdvert(frame []byte, src MAC, target [16]byte, dst MAC, dstIP [16]byte) (int, error) {
	return writeND(frame, ICMPv6NeighborAdvert, NAFlagSolicited|NAFlagOverride, dst, src, target, dstIP, target, NDOptTargetLinkAddr)
}
