package header

import "encoding/binary"

// Sizes of link-layer headers.
const (
	EthernetHeaderLen = 14 // destination, source, EtherType
	EthernetAddrLen   = 6
	// EthernetMinFrameLen is the shortest frame on the wire without the FCS;
	// shorter frames are padded with zeros by the sender.
	EthernetMinFrameLen = 60
	VLANTagLen          = 4 // TPID (the outer EtherType field) + TCI
	// MaxVLANTags is the number of stacked tags Decode accepts (QinQ).
	MaxVLANTags = 2
)

// EtherTypes (and TPIDs) the appliance deals with.
const (
	EtherTypeIPv4 uint16 = 0x0800
	EtherTypeARP  uint16 = 0x0806
	EtherTypeVLAN uint16 = 0x8100 // IEEE 802.1Q customer tag
	EtherTypeIPv6 uint16 = 0x86dd
	// EtherTypeMACControl carries 802.3x PAUSE and 802.1Qbb PFC frames.
	EtherTypeMACControl uint16 = 0x8808
	EtherTypeQinQ       uint16 = 0x88a8 // IEEE 802.1ad service tag
	EtherTypeLLDP       uint16 = 0x88cc
	// EtherTypeQinQLegacy is the pre-802.1ad service tag some switches still emit.
	EtherTypeQinQLegacy uint16 = 0x9100
)

// IsVLANTPID reports whether an EtherType field holds a VLAN tag protocol
// identifier (802.1Q, 802.1ad or the legacy 0x9100) rather than a payload type.
func IsVLANTPID(t uint16) bool {
	return t == EtherTypeVLAN || t == EtherTypeQinQ || t == EtherTypeQinQLegacy
}

// Ethernet is a view of an Ethernet II header: dst(6) src(6) EtherType(2).
// When the frame is VLAN tagged the EtherType field holds the first tag's TPID
// and the tags follow (see VLAN).
type Ethernet []byte

// IsValid reports whether e is long enough to hold the header.
func (e Ethernet) IsValid() bool { return len(e) >= EthernetHeaderLen }

// Dst returns the destination address.
func (e Ethernet) Dst() MAC { return MAC(e[0:6]) }

// Src returns the source address.
func (e Ethernet) Src() MAC { return MAC(e[6:12]) }

// EtherType returns the EtherType (or first TPID) field.
func (e Ethernet) EtherType() uint16 { return binary.BigEndian.Uint16(e[12:14]) }

// SetDst sets the destination address.
func (e Ethernet) SetDst(m MAC) { copy(e[0:6], m[:]) }

// SetSrc sets the source address.
func (e Ethernet) SetSrc(m MAC) { copy(e[6:12], m[:]) }

// SetEtherType sets the EtherType (or first TPID) field.
func (e Ethernet) SetEtherType(t uint16) { binary.BigEndian.PutUint16(e[12:14], t) }

// Encode writes a whole header.
func (e Ethernet) Encode(dst, src MAC, etherType uint16) {
	_ = e[13]
	copy(e[0:6], dst[:])
	copy(e[6:12], src[:])
	binary.BigEndian.PutUint16(e[12:14], etherType)
}

// SwapAddrs exchanges source and destination, the first step of any reflector
// (ARP reply, ICMP echo reply, ACK generation).
func (e Ethernet) SwapAddrs() {
	var t [6]byte
	copy(t[:], e[0:6])
	copy(e[0:6], e[6:12])
	copy(e[6:12], t[:])
}

// Payload returns the bytes after the 14-byte header (including any VLAN tags).
func (e Ethernet) Payload() []byte { return e[EthernetHeaderLen:] }

// VLAN is a view of the four bytes that follow a VLAN TPID: the tag control
// information (PCP 3 bits, DEI 1 bit, VID 12 bits) and the EtherType of what
// follows, the layout of DPDK's struct rte_vlan_hdr. In a frame with one tag
// the view starts at offset 14, with two tags the inner one starts at 18.
type VLAN []byte

// IsValid reports whether v holds a complete tag.
func (v VLAN) IsValid() bool { return len(v) >= VLANTagLen }

// TCI returns the whole 16-bit tag control information.
func (v VLAN) TCI() uint16 { return binary.BigEndian.Uint16(v[0:2]) }

// PCP returns the 3-bit priority code point (the PFC priority).
func (v VLAN) PCP() uint8 { return v[0] >> 5 }

// DEI reports the drop eligible indicator.
func (v VLAN) DEI() bool { return v[0]&0x10 != 0 }

// VID returns the 12-bit VLAN identifier.
func (v VLAN) VID() uint16 { return v.TCI() & 0x0fff }

// EtherType returns the EtherType (or next TPID) that follows the tag.
func (v VLAN) EtherType() uint16 { return binary.BigEndian.Uint16(v[2:4]) }

// SetTCI sets the whole tag control information.
func (v VLAN) SetTCI(tci uint16) { binary.BigEndian.PutUint16(v[0:2], tci) }

// SetPCP sets the priority code point (values above 7 are truncated).
func (v VLAN) SetPCP(pcp uint8) { v[0] = v[0]&0x1f | pcp<<5 }

// SetDEI sets or clears the drop eligible indicator.
func (v VLAN) SetDEI(dei bool) {
	if dei {
		v[0] |= 0x10
	} else {
		v[0] &^= 0x10
	}
}

// SetVID sets the VLAN identifier (values above 4095 are truncated).
func (v VLAN) SetVID(vid uint16) { v.SetTCI(v.TCI()&0xf000 | vid&0x0fff) }

// SetEtherType sets the EtherType that follows the tag.
func (v VLAN) SetEtherType(t uint16) { binary.BigEndian.PutUint16(v[2:4], t) }

// MakeTCI assembles a tag control information word.
func MakeTCI(pcp uint8, dei bool, vid uint16) uint16 {
	tci := uint16(pcp&7)<<13 | vid&0x0fff
	if dei {
		tci |= 0x1000
	}
	return tci
}
