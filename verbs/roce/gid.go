package roce

import "net/netip"

// UDPPort is the IANA port of RoCEv2.
const UDPPort = 4791

// UDPSrcPortMin is the bottom of the source port range RoCEv2 senders use
// (IB_ROCE_UDP_ENCAP_VALID_PORT_MIN): the source port carries 14 bits of
// entropy for ECMP, the top two bits are always set.
const UDPSrcPortMin = 0xc000

// FlowLabelMask covers the 20 bits of an IPv6 / GRH flow label.
const FlowLabelMask = 0xfffff

// GID is a 128-bit RoCEv2 global identifier: an IPv6 address, or an IPv4
// address in IPv4-mapped form (::ffff:a.b.c.d) for RoCEv2 over IPv4.
type GID [16]byte

// GIDFromIPv4 returns the IPv4-mapped GID of a.
func GIDFromIPv4(a [4]byte) GID {
	return GID{10: 0xff, 11: 0xff, 12: a[0], 13: a[1], 14: a[2], 15: a[3]}
}

// GIDFromAddr returns the GID of an address (IPv4 addresses are mapped).
func GIDFromAddr(a netip.Addr) GID { return GID(a.As16()) }

// IsIPv4 reports whether g is IPv4-mapped, i.e. whether packets to it are
// RoCEv2 over IPv4.
func (g GID) IsIPv4() bool {
	return g[0]|g[1]|g[2]|g[3]|g[4]|g[5]|g[6]|g[7]|g[8]|g[9] == 0 && g[10] == 0xff && g[11] == 0xff
}

// IPv4 returns the last four bytes, the IPv4 address of a mapped GID.
func (g GID) IPv4() [4]byte { return [4]byte(g[12:16]) }

// Addr returns the GID as an address, unmapped to IPv4 when it is mapped.
func (g GID) Addr() netip.Addr { return netip.AddrFrom16(g).Unmap() }

// String formats the GID as an IP address.
func (g GID) String() string { return g.Addr().String() }

// FlowLabelToUDPSrcPort folds a 20-bit flow label into a RoCEv2 UDP source
// port the way the kernel does (rdma_flow_label_to_udp_sport): the top six
// bits are XORed into the low fourteen, and the result is put in the range
// 0xc000-0xffff.
func FlowLabelToUDPSrcPort(fl uint32) uint16 {
	low, high := fl&0x3fff, fl&0xfc000
	low ^= high >> 14
	return uint16(low | UDPSrcPortMin)
}

// FlowLabelFromQPNs derives a flow label from the two QP numbers of a
// connection (rdma_calc_flow_label). It is symmetric, so both ends compute
// the same label and their packets take the same ECMP path in both
// directions when the fabric hashes symmetrically.
func FlowLabelFromQPNs(lqpn, rqpn uint32) uint32 {
	v := uint64(lqpn) * uint64(rqpn)
	v ^= v >> 20
	v ^= v >> 40
	return uint32(v & FlowLabelMask)
}

// UDPSrcPort returns the source port for a connection as rdma_get_udp_sport
// does: from the flow label fl, or, when fl is zero, from the label derived
// from the QP numbers.
func UDPSrcPort(fl, lqpn, rqpn uint32) uint16 {
	if fl == 0 {
		fl = FlowLabelFromQPNs(lqpn, rqpn)
	}
	return FlowLabelToUDPSrcPort(fl)
}

// FlowLabelForUDPSrcPort returns a flow label that FlowLabelToUDPSrcPort maps
// to sport, for probers that choose a source port (to steer ECMP) but can
// only set the flow label of their QP. Only the low 14 bits of sport matter.
func FlowLabelForUDPSrcPort(sport uint16) uint32 { return uint32(sport) & 0x3fff }
