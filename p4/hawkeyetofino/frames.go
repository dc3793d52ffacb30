package hawkeyetofino

import (
	"encoding/binary"

	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
)

// What telemetry.p4 sends the switch CPU, by its first byte (the bridged
// header's and the eviction header's pkt_type):
//
//	poll copy  pkt_type 2, pad 7 bits + ingress port 9 bits, time 4
//	           (the low 32 bits of the egress global timestamp, ns),
//	           then the polling frame as it came in (Ethernet, polling header)
//	evicted    pkt_type 4, time 4, src 4, dst 4, UDP ports 4, packets 4,
//	           qdepth sum 4, paused 4, hop 2 ({in, out} local indexes, 6
//	           bits each), then the start of the packet that took the slot
const (
	pktPoll     = 2
	pktEvict    = 4
	CPUCopyLen  = 7
	EvictLen    = 31
	ethLen      = 14
	pollFrameLn = ethLen + hawkeyewire.HeaderLen
)

// CPUCopy is a polling packet's copy as the CPU takes it.
type CPUCopy struct {
	Ingress int    // the dev port it came in on
	Time    uint32 // the switch's clock at egress (low 32 bits, ns)
	// Frame is the polling frame (Ethernet and the polling header) as it
	// came in; it aliases the buffer parsed.
	Frame  []byte
	Header hawkeyewire.Header
}

// ParseCPUCopy reads a poll copy, false for anything else (another first
// byte, cut short, an invalid polling header).
func ParseCPUCopy(b []byte) (CPUCopy, bool) {
	if len(b) < CPUCopyLen+pollFrameLn || b[0] != pktPoll {
		return CPUCopy{}, false
	}
	f := b[CPUCopyLen:]
	h, ok := hawkeyewire.ParseFrame(f)
	if !ok {
		return CPUCopy{}, false
	}
	return CPUCopy{Ingress: int(binary.BigEndian.Uint16(b[1:3]) & hawkeyewire.MaxPort), Time: binary.BigEndian.Uint32(b[3:7]),
		Frame: f[:pollFrameLn], Header: h}, true
}

// AppendCPUCopy appends the copy telemetry.p4 sends the CPU of polling
// frame f that came in on dev port in at switch time now: what a twin
// of the data plane hands the CPU.
func AppendCPUCopy(b []byte, in int, now uint32, f []byte) []byte {
	b = append(b, pktPoll)
	b = binary.BigEndian.AppendUint16(b, uint16(in)&hawkeyewire.MaxPort)
	b = binary.BigEndian.AppendUint32(b, now)
	return append(b, f...)
}

// Evicted is a flow that lost its slot to a colliding flow, as the
// mirror to the CPU carries it.
type Evicted struct {
	Time                    uint32 // switch time (low 32 bits): the epoch it counted in
	Key                     hawkeyewire.FlowKey
	In, Out                 int
	Packets, Qdepth, Paused uint32
}

// ParseEvicted reads an eviction, false for anything else.
func ParseEvicted(b []byte) (Evicted, bool) {
	if len(b) < EvictLen || b[0] != pktEvict {
		return Evicted{}, false
	}
	u := func(i int) uint32 { return binary.BigEndian.Uint32(b[i:]) }
	hop := binary.BigEndian.Uint16(b[29:31])
	if hop>>12 != 0 {
		return Evicted{}, false
	}
	ports := u(13)
	return Evicted{Time: u(1), Key: hawkeyewire.FlowKey{Src: u(5), Dst: u(9), Sport: uint16(ports >> 16), Dport: uint16(ports), Proto: protoUDP},
		In: int(hop >> 6), Out: int(hop & 63), Packets: u(17), Qdepth: u(21), Paused: u(25)}, true
}

// Append appends the eviction as the mirror carries it (without the
// packet behind it).
func (e Evicted) Append(b []byte) []byte {
	b = append(b, pktEvict)
	for _, v := range []uint32{e.Time, e.Key.Src, e.Key.Dst, uint32(e.Key.Sport)<<16 | uint32(e.Key.Dport), e.Packets, e.Qdepth, e.Paused} {
		b = binary.BigEndian.AppendUint32(b, v)
	}
	return binary.BigEndian.AppendUint16(b, uint16(e.In&63)<<6|uint16(e.Out&63))
}
