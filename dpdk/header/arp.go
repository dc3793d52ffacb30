package header

import (
	"encoding/binary"
	"errors"
)

// ARP sizes and values for Ethernet/IPv4 (RFC 826), the only kind the
// appliance speaks.
const (
	ARPLen               = 28
	ARPHardwareEthernet  = 1
	ARPOpRequest         = 1
	ARPOpReply           = 2
	arpEnd               = EthernetHeaderLen + ARPLen // end of the ARP packet in a frame
	ARPFrameLen          = EthernetMinFrameLen        // what WriteARPRequest/Reply produce
	arpEthernetIPv4Magic = 0x0001_0800_0604           // htype, ptype, hlen, plen
)

// ErrShortBuffer is returned by the frame writers when the buffer cannot hold
// the frame.
var ErrShortBuffer = errors.New("header: buffer too short")

// ARP is a view of an Ethernet/IPv4 ARP packet.
type ARP []byte

// IsValid reports whether the view holds a complete ARP packet for Ethernet
// hardware addresses and IPv4 protocol addresses.
func (a ARP) IsValid() bool {
	return len(a) >= ARPLen && binary.BigEndian.Uint64(a[0:8])>>16 == arpEthernetIPv4Magic
}

// HardwareType returns the hardware type (1 for Ethernet).
func (a ARP) HardwareType() uint16 { return binary.BigEndian.Uint16(a[0:2]) }

// ProtocolType returns the protocol type (0x0800 for IPv4).
func (a ARP) ProtocolType() uint16 { return binary.BigEndian.Uint16(a[2:4]) }

// HardwareLen returns the hardware address length (6).
func (a ARP) HardwareLen() uint8 { return a[4] }

// ProtocolLen returns the protocol address length (4).
func (a ARP) ProtocolLen() uint8 { return a[5] }

// Op returns the operation (ARPOpRequest or ARPOpReply).
func (a ARP) Op() uint16 { return binary.BigEndian.Uint16(a[6:8]) }

// SenderMAC returns the sender hardware address.
func (a ARP) SenderMAC() MAC { return MAC(a[8:14]) }

// SenderIP returns the sender protocol address.
func (a ARP) SenderIP() [4]byte { return [4]byte(a[14:18]) }

// TargetMAC returns the target hardware address.
func (a ARP) TargetMAC() MAC { return MAC(a[18:24]) }

// TargetIP returns the target protocol address.
func (a ARP) TargetIP() [4]byte { return [4]byte(a[24:28]) }

// SetOp sets the operation.
func (a ARP) SetOp(op uint16) { binary.BigEndian.PutUint16(a[6:8], op) }

// SetSenderMAC sets the sender hardware address.
func (a ARP) SetSenderMAC(m MAC) { copy(a[8:14], m[:]) }

// SetSenderIP sets the sender protocol address.
func (a ARP) SetSenderIP(ip [4]byte) { copy(a[14:18], ip[:]) }

// SetTargetMAC sets the target hardware address.
func (a ARP) SetTargetMAC(m MAC) { copy(a[18:24], m[:]) }

// SetTargetIP sets the target protocol address.
func (a ARP) SetTargetIP(ip [4]byte) { copy(a[24:28], ip[:]) }

// Encode writes a whole Ethernet/IPv4 ARP packet.
func (a ARP) Encode(op uint16, sha MAC, spa [4]byte, tha MAC, tpa [4]byte) {
	_ = a[27]
	binary.BigEndian.PutUint16(a[0:2], ARPHardwareEthernet)
	binary.BigEndian.PutUint16(a[2:4], EtherTypeIPv4)
	a[4], a[5] = EthernetAddrLen, 4
	a.SetOp(op)
	a.SetSenderMAC(sha)
	a.SetSenderIP(spa)
	a.SetTargetMAC(tha)
	a.SetTargetIP(tpa)
}

// IsRequestFor reports whether a is a request asking for the hardware address
// of ip (call IsValid first).
func (a ARP) IsRequestFor(ip [4]byte) bool { return a.Op() == ARPOpRequest && a.TargetIP() == ip }

// writeARP writes an Ethernet frame carrying an ARP packet, zero-padded to the
// 60-byte minimum because software ports (ring, AF_PACKET on veth) do not pad.
func writeARP(frame []byte, ethDst MAC, op uint16, sha MAC, spa [4]byte, tha MAC, tpa [4]byte) (int, error) {
	if len(frame) < ARPFrameLen {
		return 0, ErrShortBuffer
	}
	Ethernet(frame).Encode(ethDst, sha, EtherTypeARP)
	ARP(frame[EthernetHeaderLen:]).Encode(op, sha, spa, tha, tpa)
	clear(frame[arpEnd:ARPFrameLen])
	return ARPFrameLen, nil
}

// WriteARPRequest writes a broadcast who-has request for target into frame
// and returns the frame length (ARPFrameLen).
func WriteARPRequest(frame []byte, src MAC, srcIP, target [4]byte) (int, error) {
	return writeARP(frame, BroadcastMAC, ARPOpRequest, src, srcIP, MAC{}, target)
}

// WriteARPReply writes a unicast is-at reply from (src, srcIP) to (dst, dstIP)
// and returns the frame length (ARPFrameLen).
func WriteARPReply(frame []byte, src MAC, srcIP [4]byte, dst MAC, dstIP [4]byte) (int, error) {
	return writeARP(frame, dst, ARPOpReply, src, srcIP, dst, dstIP)
}

// WriteARPReplyTo writes the reply to a request (a valid ARP view), answering
// that ip is at mac.
func WriteARPReplyTo(frame []byte, req ARP, mac MAC, ip [4]byte) (int, error) {
	return WriteARPReply(frame, mac, ip, req.SenderMAC(), req.SenderIP())
}
