// Package mirror is Lumina's mirrored-copy contract, shared by the injector
// that writes it (translator/inject, p4/luminatofino), the dumpers that
// restore the copies, the trace merger and the analyzers: the metadata a
// copy carries in place of header fields, the event types, the weighted
// round-robin that spreads copies over the dumpers (the merger replays it to
// tell which dumper lost a copy), and the injector's counters that the
// integrity check compares the trace with.
package mirror

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// The mirrored copy of a RoCE packet carries Lumina's metadata in header
// fields that the analysis does not need, so mirroring never grows a packet
// (a line-rate mirror port would overflow otherwise):
//
//	Ethernet source      48-bit mirror sequence number (global, per mirrored RoCE packet, from 1)
//	Ethernet destination 48-bit ingress timestamp in nanoseconds (wraps after 78 hours)
//	IPv4 TTL / IPv6 hop limit  event type (0 none, 1 drop, 2 ECN, 3 bit error)
//	UDP checksum         the original UDP source port
//	UDP source port      random (spreads the copies over the dumpers' RSS queues)
//	UDP destination port the rewrite port (rewrite-udp-dst-port, 9741 by default), so the
//	                     dumper hosts' own RoCE stacks never take the copies for RDMA traffic
//
// RestoreMirror undoes the UDP and ECN parts on the dumper, so the dumped
// trace holds the packets as the receiver saw them, with valid ICRCs.

// DefaultRewritePort is Lumina's default rewrite-udp-dst-port.
const DefaultRewritePort = 9741

// Mask48 keeps the 48 bits a MAC address field holds.
const Mask48 = 1<<48 - 1

// MirrorMeta is the metadata of one mirrored copy.
type Meta struct {
	Seq         uint64    `json:"seq"`          // 48 bits
	Timestamp   int64     `json:"timestamp_ns"` // 48 bits
	Event       EventType `json:"event"`
	OrigSrcPort uint16    `json:"orig_src_port"`
}

// ErrNotMirrored is returned for frames that are not IP/UDP, so cannot carry
// the metadata.
var ErrNotMirrored = errors.New("mirror: not a mirrored RoCE copy")

func put48(b []byte, v uint64) {
	b[0], b[1] = byte(v>>40), byte(v>>32)
	binary.BigEndian.PutUint32(b[2:6], uint32(v))
}

func get48(b []byte) uint64 {
	return uint64(b[0])<<40 | uint64(b[1])<<32 | uint64(binary.BigEndian.Uint32(b[2:6]))
}

// WriteMirror writes m into frame, a copy of a RoCE packet whose layout p
// describes, and rewrites its UDP ports: the source to srcPort, the
// destination to dstPort. The IPv4 header checksum is kept valid.
func Write(frame []byte, p *header.Parsed, m Meta, srcPort, dstPort uint16) {
	WriteCopy(frame, frame, p, m, srcPort, dstPort)
}

// writeMirror is WriteMirror into dst, a copy of src (at least up to the
// end of the UDP header), reading the fields it patches from src: the
// injector's copy was only just written, and loading a word of it back
// right after a byte store to it (the TTL) stalls the pipeline.
func WriteCopy(dst, src []byte, p *header.Parsed, m Meta, srcPort, dstPort uint16) {
	put48(dst[6:12], m.Seq&Mask48)
	put48(dst[0:6], uint64(m.Timestamp)&Mask48)
	switch p.L3Proto {
	case header.EtherTypeIPv4:
		// Patch the checksum for the TTL word (RFC 1624) rather than
		// summing the header again: this runs for every mirrored packet.
		sip, dip := src[p.L3Off:p.L3Off+12], dst[p.L3Off:p.L3Off+12]
		old := binary.BigEndian.Uint16(sip[8:10])
		check := binary.BigEndian.Uint16(sip[10:12])
		dip[8] = uint8(m.Event)
		binary.BigEndian.PutUint16(dip[10:12], header.ChecksumUpdate16(check, old, uint16(m.Event)<<8|old&0xff))
	case header.EtherTypeIPv6:
		dst[p.L3Off+7] = uint8(m.Event)
	}
	su, du := src[p.L4Off:p.L4Off+header.UDPHeaderLen], dst[p.L4Off:p.L4Off+header.UDPHeaderLen]
	orig := binary.BigEndian.Uint16(su[0:2])
	binary.BigEndian.PutUint16(du[0:2], srcPort)
	binary.BigEndian.PutUint16(du[2:4], dstPort)
	binary.BigEndian.PutUint16(du[6:8], orig)
}

// ReadMirror reads the metadata of a mirrored copy whose layout p describes
// (decoded with header.Decode or header.DecodeTruncated).
func Read(frame []byte, p *header.Parsed) (Meta, error) {
	if p.L4Proto != header.IPProtoUDP || p.L4Off+header.UDPHeaderLen > len(frame) {
		return Meta{}, ErrNotMirrored
	}
	m := Meta{Seq: get48(frame[6:12]), Timestamp: int64(get48(frame[0:6]))}
	switch p.L3Proto {
	case header.EtherTypeIPv4:
		m.Event = EventType(frame[p.L3Off+8])
	case header.EtherTypeIPv6:
		m.Event = EventType(frame[p.L3Off+7])
	default:
		return Meta{}, ErrNotMirrored
	}
	m.OrigSrcPort = header.UDP(frame[p.L4Off:]).Checksum()
	return m, nil
}

// RestoreMirror turns a mirrored copy back into the packet the receiver
// got: the original UDP source port, destination port 4791, UDP checksum 0
// (RoCEv2 senders leave it 0; the ICRC protects the packet), and ECN CE when
// the injector marked it; the IPv4 header checksum is recomputed. The MACs
// and TTL keep the metadata. The ICRC, which covers the ports but not ECN,
// TTL or the checksums, verifies again.
func Restore(frame []byte, p *header.Parsed) (Meta, error) {
	m, err := Read(frame, p)
	if err != nil {
		return m, err
	}
	u := header.UDP(frame[p.L4Off:])
	u.SetSrcPort(m.OrigSrcPort)
	u.SetDstPort(roce.UDPPort)
	u.SetChecksum(0)
	switch p.L3Proto {
	case header.EtherTypeIPv4:
		ip := header.IPv4(frame[p.L3Off:])
		if m.Event == EventECN {
			ip.SetECN(header.ECNCE)
		}
		ip.UpdateChecksum()
	case header.EtherTypeIPv6:
		if m.Event == EventECN {
			header.IPv6(frame[p.L3Off:]).SetECN(header.ECNCE)
		}
	}
	return m, nil
}

func (m Meta) String() string {
	return fmt.Sprintf("seq %d ts %d event %v sport %d", m.Seq, m.Timestamp, m.Event, m.OrigSrcPort)
}
