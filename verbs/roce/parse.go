package roce

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/rdma-appliance/appliance/dpdk/header"
)

// Sentinel errors. Errors returned by this package wrap one of these (or are
// one of them); test with errors.Is. ErrTruncated and ErrMalformed are the
// same values as in dpdk/header, so one test covers both layers.
var (
	ErrTruncated = header.ErrTruncated
	ErrMalformed = header.ErrMalformed
	// ErrNotRoCE means the frame is not RoCEv2: not IP, not UDP, another
	// destination port, or an IP fragment (RoCE is never fragmented).
	ErrNotRoCE = errors.New("not a RoCEv2 packet")
	// ErrBadOpcode means the BTH opcode is reserved.
	ErrBadOpcode = errors.New("reserved BTH opcode")
	// ErrBadVersion means the BTH transport header version is not 0.
	ErrBadVersion = errors.New("unsupported BTH transport version")
	// ErrBadPad means the pad count does not fit: nonzero on an opcode
	// without payload or on a First/Middle packet, larger than the data, or
	// payload plus pad not a multiple of four bytes. Builders return it for
	// a First or Middle packet whose payload would need padding.
	ErrBadPad = errors.New("bad BTH pad count")
	// ErrBadLength means the packet length does not fit the opcode (payload
	// on an opcode that carries none), or a builder was asked for a packet
	// that does not fit in IP.
	ErrBadLength = errors.New("packet length does not match opcode")
	// ErrBadICRC means the ICRC does not match the packet.
	ErrBadICRC = errors.New("ICRC mismatch")
	// ErrShortBuffer means a builder's buffer cannot hold the packet.
	ErrShortBuffer = header.ErrShortBuffer
	// ErrBadGID means a builder's source and destination GIDs are of
	// different families (one IPv4-mapped, the other not).
	ErrBadGID = errors.New("source and destination GIDs of different IP versions")
)

var (
	errNotIP           = fmt.Errorf("%w: not IP", ErrNotRoCE)
	errFragment        = fmt.Errorf("%w: IP fragment", ErrNotRoCE)
	errNotUDP          = fmt.Errorf("%w: not UDP", ErrNotRoCE)
	errPort            = fmt.Errorf("%w: UDP destination port", ErrNotRoCE)
	errBTHTruncated    = fmt.Errorf("BTH and ICRC: %w", ErrTruncated)
	errExtTruncated    = fmt.Errorf("extended headers: %w", ErrTruncated)
	errICRCTruncated   = fmt.Errorf("ICRC: headers %w", ErrTruncated)
	errICRCNotCaptured = fmt.Errorf("ICRC not captured: %w", ErrTruncated)
	errICRCBadIP       = fmt.Errorf("ICRC: %w: IP version or header length", ErrNotRoCE)
	errUnexpectedPay   = fmt.Errorf("%w: payload on an opcode without payload", ErrBadLength)
	errUDPBeyondIP     = fmt.Errorf("udp length beyond ip payload: %w", ErrMalformed)
)

// Packet records the layout and the key fields of a RoCEv2 packet decoded by
// Parse. Offsets are from the start of the frame. The extended headers and
// the payload are read through the accessor methods, which return views of
// the frame (nil when the opcode does not carry the header).
type Packet struct {
	// Net is the Ethernet/IP/UDP layout; Net.PayloadOff is the BTH.
	Net header.Parsed

	// Decoded BTH fields.
	Opcode Opcode
	SE     bool
	MigReq bool
	AckReq bool
	PadCnt uint8
	PKey   uint16
	FECN   bool
	BECN   bool
	DestQP uint32
	PSN    uint32

	// ECN is the IP ECN field, SrcPort the UDP source port (the ECMP
	// entropy): both are read by nearly every consumer.
	ECN     uint8
	SrcPort uint16

	// BTHOff is where the BTH starts and ExtOff where the extended headers
	// start (BTHOff + 12). PayloadOff and PayloadLen delimit the payload
	// without pad; the PadCnt pad bytes follow it, then the ICRC at ICRCOff.
	BTHOff     int
	ExtOff     int
	PayloadOff int
	PayloadLen int
	ICRCOff    int
}

// Parse decodes a RoCEv2 frame (Ethernet, up to two VLAN tags, IPv4 or IPv6,
// UDP to port 4791, BTH, extended headers, payload, pad, ICRC) into p. It
// checks the layout the opcode implies but not the ICRC; see
// Packet.VerifyICRC. Parse never allocates and never panics. On error only
// p.Net is meaningful, as far as it was decoded; the other fields are left
// as they were.
func Parse(frame []byte, p *Packet) error { return parse(p, frame, UDPPort) }

// ParsePort is Parse for RoCEv2 carried to another UDP port, such as the
// rewritten destination port of Lumina's mirrored copies.
func ParsePort(frame []byte, port uint16, p *Packet) error { return parse(p, frame, port) }

// ParseTruncated parses a frame captured with a snap length (the Lumina
// dumper keeps 128 bytes): the headers through the extended headers must be
// present, the rest may be cut. The layout is taken from the UDP length, so
// PayloadOff, PayloadLen and ICRCOff describe the packet as it was sent and
// may point past the end of frame; p.Net.Truncated tells whether they do.
// Payload and Pad clip to the frame and VerifyICRC returns ErrTruncated for a
// cut packet; ComputeICRC, ICRC and UpdateICRC need the whole packet.
func ParseTruncated(frame []byte, port uint16, p *Packet) error {
	return parseGeneral(frame, port, true, p)
}

// ParseDecoded is Parse for a frame whose Ethernet, IP and UDP layers are
// already decoded in p.Net (by header.Decode or header.DecodeTruncated):
// forwarding paths that decode every frame anyway parse RoCE without
// walking the outer headers twice.
func ParseDecoded(frame []byte, port uint16, p *Packet) error {
	return parseTransport(frame, port, p)
}

// parse clears p.Net.VLANOff element by element: header.MaxVLANTags must
// be 2 for this to compile.
var _ = [1]struct{}{}[header.MaxVLANTags-2]

// errNotCommon is what parse returns, while commonOnly is set, for a frame
// the one pass does not accept.
var errNotCommon = errors.New("not a common layout")

// commonOnly makes parse return errNotCommon instead of calling its
// fallbacks: the tests set it to see which frames the one pass accepts.
// It is a variable read only where the one pass gives up, not a
// parameter, because a parameter would hold a register through the whole
// pass (one more value spilled to the stack there).
var commonOnly bool

// parse parses, in one pass, the frames RoCEv2 fabrics carry nearly
// always: Ethernet, at most one 802.1Q tag, IPv4 without options and not a
// fragment or IPv6 without extension headers, UDP, BTH. It decides only
// acceptance: a frame it does not accept goes to parseTransport (when
// the outer layers passed) or parseGeneral, which name the error, so every
// error is the one header's decoders and parseTransport give (the
// differential test and FuzzParse check that both paths agree on every
// frame). The layers walk of header.Decode, the calls between the layers
// and the bounds checks of variable offsets cost as much as the RoCE
// headers themselves (the profile of bench/wire); here the frame's length
// check (and IPv6's own) makes every later read a constant index into a
// fixed-size array, and the IP, UDP and BTH fields come from 8-byte loads.
//
// It writes p.Net as soon as the outer layers pass (but for the UDP
// length's lower bound, which the transport's checks imply: see outer),
// and the other fields of p only once the packet is accepted, as Parse
// promises. The fallbacks are called from here, not by a caller that looks
// at a result, so that Parse costs one call. While commonOnly is set it
// returns errNotCommon instead. It takes p first: a caller that holds the
// Packet in its receiver then passes it and the frame in the registers
// they arrived in (bench/wire's decoder moved all four words before).
func parse(p *Packet, frame []byte, port uint16) error {
	const (
		eth  = header.EthernetHeaderLen
		ipv4 = header.IPv4MinHeaderLen
		ipv6 = header.IPv6HeaderLen
		udp  = header.UDPHeaderLen
	)
	// Declared here, not where first set: goto may not jump over a
	// declaration. Per IP version: the IP and UDP lengths (tl, ul), the
	// transport offset, the ECN bits, and the UDP header (u) and BTH (b0,
	// b1) as big-endian words.
	var (
		l3, vlans, tl, ul, l4, pad, data, payload int
		et                                        uint16
		ecn                                       uint8
		u, b0                                     uint64
		b1                                        uint32
		f                                         opFastInfo
		ip                                        []byte
	)
	// The shortest RoCEv2 frame (untagged, IPv4, no extended header, no
	// payload) is 58 bytes; shorter ones go to parseGeneral, which names
	// their fault. Known this long, the frame holds 40 bytes after the
	// Ethernet header and the tag (l3 is 14 or 18, which the compiler
	// sees), so neither the slice at l3 nor the IPv4 branch needs a
	// length check.
	if len(frame) < eth+ipv4+udp+BTHLen+ICRCLen {
		goto other
	}
	l3 = eth
	// The EtherTypes are written out rather than read by
	// binary.BigEndian.Uint16: an inlined call whose line has no
	// instruction of its own leaves a no-op, its inline mark, there.
	et = uint16(frame[12])<<8 | uint16(frame[13])
	if et == header.EtherTypeVLAN {
		et = uint16(frame[16])<<8 | uint16(frame[17])
		l3, vlans = eth+header.VLANTagLen, 1
	}
	ip = frame[l3:]
	// Each branch reads the IP header, UDP and the BTH as a fixed-size
	// array. The IP and UDP length checks, with the transport's (ul is at
	// least 24), hold the ICRC too: IPv4 needs no length check of its own
	// (40 bytes are there, above), IPv6 one for its longer header.
	switch et {
	case header.EtherTypeIPv4:
		h := (*[ipv4 + udp + BTHLen]byte)(ip)
		w := binary.BigEndian.Uint64(h[2:10]) // total length, ID, flags, offset, TTL, protocol
		// Version 4 and no options (0x45); MF and fragment offset 0 and
		// protocol UDP in one test of w (its mask fits in 32 bits).
		if h[0] != 0x45 || uint32(w)&0x3fff_00ff != uint32(header.IPProtoUDP) {
			goto other
		}
		tl = int(w >> 48)
		u = binary.BigEndian.Uint64(h[ipv4 : ipv4+8])
		ul = int(u >> 16 & 0xffff)
		// ul >= 8 (checked at outer) and ul <= tl-20 imply tl >= 28:
		// Decode's checks, all.
		if tl > len(ip) || ul > tl-ipv4 {
			goto other
		}
		ecn = h[1] & 3
		l4 = l3 + ipv4
		b0 = binary.BigEndian.Uint64(h[ipv4+udp : ipv4+udp+8])
		b1 = binary.BigEndian.Uint32(h[ipv4+udp+8 : ipv4+udp+12])
	case header.EtherTypeIPv6:
		if len(ip) < ipv6+udp+BTHLen+ICRCLen {
			goto other
		}
		h := (*[ipv6 + udp + BTHLen]byte)(ip)
		// Next header UDP: no extension headers, so no fragment either.
		if h[0]>>4 != header.IPv6Version || h[6] != header.IPProtoUDP {
			goto other
		}
		tl = ipv6 + int(binary.BigEndian.Uint16(h[4:6]))
		u = binary.BigEndian.Uint64(h[ipv6 : ipv6+8])
		ul = int(u >> 16 & 0xffff)
		if tl > len(ip) || ul > tl-ipv6 {
			goto other
		}
		ecn = h[1] >> 4 & 3
		l4 = l3 + ipv6
		b0 = binary.BigEndian.Uint64(h[ipv6+udp : ipv6+udp+8])
		b1 = binary.BigEndian.Uint32(h[ipv6+udp+8 : ipv6+udp+12])
	default:
		goto other
	}
	// Field by field, one statement each: a composite literal, or a tuple
	// assignment holding one, is built on the stack and copied (that made
	// this decoder twice as slow).
	p.Net.VLANs = vlans
	p.Net.VLANOff[0] = eth & -vlans // eth with the tag, 0 without
	p.Net.VLANOff[1] = 0            // MaxVLANTags is 2: the check after the imports
	p.Net.L3Proto = et
	p.Net.L3Off = l3
	p.Net.L3Len = tl
	p.Net.L4Proto = header.IPProtoUDP
	p.Net.L4Off = l4
	p.Net.L4Len = ul
	p.Net.PayloadOff = l4 + udp
	p.Net.PayloadLen = ul - udp
	p.Net.Fragment = false
	p.Net.Truncated = false

	// The transport: parseTransport's checks, on the loaded words. The
	// BTH is inside the frame: the length checks above hold it, and
	// ul <= tl - IP header <= len(ip) - IP header holds the whole packet.
	// One test against the opcode's word (opFastInfo) covers the data
	// length (none, or a multiple of four), the version and the pad count
	// of First and Middle packets in BTH byte 1, and reserved opcodes;
	// the payload is data less the pad: negative when the pad is longer
	// than data, or when data is. (In this order the opcode's word need
	// not be kept on the stack while the others are tested.)
	f = opFast[uint8(b0>>56)]
	pad = int(b0 >> 52 & 3)
	data = ul - f.minUDPLen() // payload + pad
	payload = data - pad
	if opFastWord(data, b0)&uint64(f) != 0 || payload < 0 || uint16(u>>32) != port {
		goto outer
	}
	// The values the checks left in registers first, so that they need
	// not be kept (spilled to the stack) while the BTH fields are taken
	// apart.
	p.PayloadLen = payload
	p.ICRCOff = l4 + ul - ICRCLen // the end of UDP
	p.PadCnt = uint8(pad)
	p.ECN = ecn
	p.SrcPort = uint16(u >> 48)
	p.BTHOff = l4 + udp
	p.ExtOff = l4 + udp + BTHLen
	p.PayloadOff = p.ICRCOff - pad - payload // l4 + f.minUDPLen() - ICRCLen: f is dead by now
	p.Opcode = Opcode(b0 >> 56)
	p.SE = b0&(1<<55) != 0
	p.MigReq = b0&(1<<54) != 0
	p.PKey = uint16(b0 >> 32)
	p.FECN = b0&(1<<31) != 0
	p.BECN = b0&(1<<30) != 0
	p.DestQP = uint32(b0) & QPNMask
	p.AckReq = b1&(1<<31) != 0
	p.PSN = b1 & PSNMask
	return nil
outer:
	// The outer layers' last check, deferred to here: a UDP length under
	// 8 leaves less than no payload, so such a frame always fails the
	// transport's checks above. Decode names its fault (and clears the
	// p.Net written above).
	if ul < udp {
		goto other
	}
	if commonOnly {
		return errNotCommon
	}
	// Sliced to its length, the frame needs no register for its capacity
	// through the one pass: fewer values spill to the stack there.
	return parseTransport(frame[:len(frame):len(frame)], port, p)
other:
	if commonOnly {
		return errNotCommon
	}
	return parseGeneral(frame[:len(frame):len(frame)], port, false, p)
}

// parseGeneral is parse through header's decoders: every layout they know
// (two tags, QinQ, IPv6 and its extension headers, IPv4 options,
// fragments, snapped frames) and every error they name.
func parseGeneral(frame []byte, port uint16, snapped bool, p *Packet) error {
	var err error
	if snapped {
		err = header.DecodeTruncated(frame, &p.Net)
	} else {
		err = header.Decode(frame, &p.Net)
	}
	if err != nil {
		if errors.Is(err, header.ErrUnsupported) {
			return errNotIP
		}
		if errors.Is(err, header.ErrFragment) {
			return errFragment
		}
		return err
	}
	return parseTransport(frame, port, p)
}

// parseTransport parses UDP's RoCEv2 payload of a frame decoded in p.Net.
func parseTransport(frame []byte, port uint16, p *Packet) error {
	n := &p.Net
	if n.L4Proto != header.IPProtoUDP {
		return errNotUDP
	}
	if n.Fragment {
		return errFragment
	}
	udp := frame[n.L4Off:]
	if binary.BigEndian.Uint16(udp[2:4]) != port {
		return errPort
	}
	roceLen := n.PayloadLen // BTH through ICRC
	if n.Truncated {
		// The lengths in p.Net were clipped to the capture; the UDP length
		// field still says how long the packet was. Check it against the IP
		// length fields, which Decode could not do for a cut packet.
		ul := int(binary.BigEndian.Uint16(udp[4:6]))
		if ul > declaredL4Len(frame, n) {
			return errUDPBeyondIP
		}
		roceLen = ul - header.UDPHeaderLen
	}
	if roceLen < BTHLen+ICRCLen {
		return errBTHTruncated
	}
	if n.PayloadLen < BTHLen {
		return errBTHTruncated // cut inside the BTH (only when snapped)
	}
	bth := BTH(frame[n.PayloadOff : n.PayloadOff+BTHLen])
	op := bth.Opcode()
	info := &opTable[op]
	if !info.Valid {
		return ErrBadOpcode
	}
	if bth.TVer() != BTHVersion {
		return ErrBadVersion
	}
	data := roceLen - BTHLen - ICRCLen - info.HeaderLen // payload + pad
	if data < 0 {
		return errExtTruncated
	}
	if n.PayloadLen < BTHLen+info.HeaderLen {
		return errExtTruncated // cut inside the extended headers (only when snapped)
	}
	pad := int(bth.PadCount())
	if !info.Payload {
		if pad != 0 {
			return ErrBadPad
		}
		if data != 0 {
			return errUnexpectedPay
		}
	} else if data&3 != 0 || pad > data ||
		(pad != 0 && (info.Position == PositionFirst || info.Position == PositionMiddle)) {
		return ErrBadPad
	}

	p.Opcode = op
	b1 := bth[1]
	p.SE = b1&0x80 != 0
	p.MigReq = b1&0x40 != 0
	p.PadCnt = uint8(pad)
	p.PKey = binary.BigEndian.Uint16(bth[2:4])
	qp := binary.BigEndian.Uint32(bth[4:8])
	p.FECN = qp&0x80000000 != 0
	p.BECN = qp&0x40000000 != 0
	p.DestQP = qp & QPNMask
	psn := binary.BigEndian.Uint32(bth[8:12])
	p.AckReq = psn&0x80000000 != 0
	p.PSN = psn & PSNMask
	if n.L3Proto == header.EtherTypeIPv4 {
		p.ECN = frame[n.L3Off+1] & 3
	} else {
		p.ECN = frame[n.L3Off+1] >> 4 & 3
	}
	p.SrcPort = binary.BigEndian.Uint16(udp[0:2])
	p.BTHOff = n.PayloadOff
	p.ExtOff = p.BTHOff + BTHLen
	p.PayloadOff = p.ExtOff + info.HeaderLen
	p.PayloadLen = data - pad
	p.ICRCOff = p.PayloadOff + data
	return nil
}

// Info returns the description of the packet's opcode.
func (p *Packet) Info() OpInfo { return opTable[p.Opcode] }

// IsIPv6 reports whether the packet travels over IPv6.
func (p *Packet) IsIPv6() bool { return p.Net.L3Proto == header.EtherTypeIPv6 }

// IsCNP reports whether the packet is a congestion notification.
func (p *Packet) IsCNP() bool { return p.Opcode == OpCNP }

// Len returns the length of the frame up to the end of the ICRC, excluding
// any Ethernet padding (after ParseTruncated, as sent, not as captured).
func (p *Packet) Len() int { return p.ICRCOff + ICRCLen }

// SrcGID returns the source address as a GID (IPv4-mapped over IPv4).
func (p *Packet) SrcGID(frame []byte) GID {
	if p.IsIPv6() {
		return GID(frame[p.Net.L3Off+8 : p.Net.L3Off+24])
	}
	return GIDFromIPv4([4]byte(frame[p.Net.L3Off+12 : p.Net.L3Off+16]))
}

// DstGID returns the destination address as a GID.
func (p *Packet) DstGID(frame []byte) GID {
	if p.IsIPv6() {
		return GID(frame[p.Net.L3Off+24 : p.Net.L3Off+40])
	}
	return GIDFromIPv4([4]byte(frame[p.Net.L3Off+16 : p.Net.L3Off+20]))
}

// SrcAddr returns the source IP address.
func (p *Packet) SrcAddr(frame []byte) netip.Addr { return p.SrcGID(frame).Addr() }

// DstAddr returns the destination IP address.
func (p *Packet) DstAddr(frame []byte) netip.Addr { return p.DstGID(frame).Addr() }

// BTH returns the base transport header.
func (p *Packet) BTH(frame []byte) BTH { return BTH(frame[p.BTHOff : p.BTHOff+BTHLen]) }

// ext returns extended header h, n bytes long, or nil if the opcode does
// not carry it. The callers pass n as a constant, so no table lookup finds
// the length, and the capacity is n: the slice needs no masking against
// an empty view. The start is summed in 32 bits (offsets within a frame
// fit), so the compiler sees that s+n does not overflow: one bounds check,
// of the end against the capacity, instead of two. (The views' reads then
// check the length once per view: the nil this returns for an absent
// header hides the constant length from the caller's code.)
func (p *Packet) ext(frame []byte, h Header, n int) []byte {
	o := opTable[p.Opcode].offsets[h]
	if o == noHeader {
		return nil
	}
	s := int(uint32(p.ExtOff) + uint32(o))
	return frame[s : s+n : s+n]
}

// RETH returns the RDMA extended header or nil.
func (p *Packet) RETH(frame []byte) RETH { return p.ext(frame, HeaderRETH, RETHLen) }

// AETH returns the ACK extended header or nil.
func (p *Packet) AETH(frame []byte) AETH { return p.ext(frame, HeaderAETH, AETHLen) }

// AtomicETH returns the atomic extended header or nil.
func (p *Packet) AtomicETH(frame []byte) AtomicETH {
	return p.ext(frame, HeaderAtomicETH, AtomicETHLen)
}

// AtomicAckETH returns the atomic acknowledge extended header or nil.
func (p *Packet) AtomicAckETH(frame []byte) AtomicAckETH {
	return p.ext(frame, HeaderAtomicAckETH, AtomicAckETHLen)
}

// DETH returns the datagram extended header or nil.
func (p *Packet) DETH(frame []byte) DETH { return p.ext(frame, HeaderDETH, DETHLen) }

// ImmDt returns the immediate data or nil.
func (p *Packet) ImmDt(frame []byte) ImmDt { return p.ext(frame, HeaderImmDt, ImmDtLen) }

// IETH returns the invalidate extended header or nil.
func (p *Packet) IETH(frame []byte) IETH { return p.ext(frame, HeaderIETH, IETHLen) }

// RDETH returns the reliable datagram extended header or nil.
func (p *Packet) RDETH(frame []byte) RDETH { return p.ext(frame, HeaderRDETH, RDETHLen) }

// XRCETH returns the XRC extended header or nil.
func (p *Packet) XRCETH(frame []byte) XRCETH { return p.ext(frame, HeaderXRCETH, XRCETHLen) }

// FETH returns the FLUSH extended header or nil.
func (p *Packet) FETH(frame []byte) FETH { return p.ext(frame, HeaderFETH, FETHLen) }

// Payload returns the payload without pad (as much of it as was captured,
// after ParseTruncated).
func (p *Packet) Payload(frame []byte) []byte {
	return frame[p.PayloadOff:min(p.PayloadOff+p.PayloadLen, len(frame))]
}

// Pad returns the pad bytes (as much of them as was captured).
func (p *Packet) Pad(frame []byte) []byte {
	e := min(p.PayloadOff+p.PayloadLen, len(frame))
	return frame[e:min(e+int(p.PadCnt), len(frame))]
}

// declaredL4Len returns the transport length the IP header declares.
func declaredL4Len(frame []byte, n *header.Parsed) int {
	ip := frame[n.L3Off:]
	if n.L3Proto == header.EtherTypeIPv6 {
		return header.IPv6HeaderLen + int(binary.BigEndian.Uint16(ip[4:6])) - (n.L4Off - n.L3Off)
	}
	return int(binary.BigEndian.Uint16(ip[2:4])) - (n.L4Off - n.L3Off)
}
