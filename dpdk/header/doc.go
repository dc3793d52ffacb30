// Package header provides zero-copy views over the headers of Ethernet frames,
// in the spirit of DPDK's librte_net and gVisor's header package: a view is a
// named byte slice (Ethernet, VLAN, IPv4, IPv6, UDP, TCP, ICMPv4, ICMPv6, ARP)
// whose methods read and write the header fields in place, in network byte
// order, without copying or allocating.
//
// Views do not check lengths on every access: call IsValid (or decode the frame
// with Decode, which validates every header it walks) before using a view's
// getters, exactly as one would check rte_pktmbuf_data_len before casting to
// struct rte_ipv4_hdr. A getter on a view that is too short panics like any
// out-of-range slice access.
//
// Decode walks Ethernet, up to two VLAN tags (802.1Q and 802.1ad QinQ), IPv4
// (with options) or IPv6 (skipping extension headers) or ARP, and UDP, TCP,
// ICMP or ICMPv6, and records the offsets and lengths of every layer in a
// Parsed. It is the first step of every receive path of the appliance, so it
// allocates nothing and returns preallocated sentinel errors that wrap
// ErrTruncated, ErrMalformed, ErrUnsupported and ErrFragment for errors.Is.
//
// The checksum helpers compute the Internet checksum (RFC 1071) eight bytes at
// a time, the IPv4 header checksum, UDP/TCP/ICMPv6 checksums with the IPv4 and
// IPv6 pseudo-headers, and incremental updates (RFC 1624) for routers and
// rewriters that change one field.
//
// The name follows gVisor's netstack, so it never shadows the standard
// library's net in files that use both.
package header
