package roce

import (
	"encoding/binary"
	"fmt"

	"github.com/rdma-appliance/appliance/dpdk/header"
)

// DefaultHopLimit is the IPv4 TTL / IPv6 hop limit rxe and mlx5 send with.
const DefaultHopLimit = 64

// MaxFrameOverhead is the most bytes a Builder puts around the payload:
// Ethernet with one VLAN tag, IPv6, UDP, BTH, the longest extended headers,
// three bytes of pad and the ICRC.
const MaxFrameOverhead = header.EthernetHeaderLen + header.VLANTagLen + header.IPv6HeaderLen +
	header.UDPHeaderLen + BTHLen + MaxExtHeaderLen + 3 + ICRCLen

var (
	errTooLong    = fmt.Errorf("%w: packet exceeds the IP length field", ErrBadLength)
	errPadNotLast = fmt.Errorf("%w: First and Middle payloads must be a multiple of 4 bytes", ErrBadPad)
)

// Builder writes RoCEv2 frames into caller-provided buffers. Its fields are
// the values of the headers; a sender keeps one Builder per QP (addresses,
// ports, DestQP and P_Key set once) and changes Opcode, PSN and the
// extended-header fields per packet. Building allocates nothing.
//
// The frame is Ethernet [802.1Q tag] / IPv4 or IPv6 / UDP / BTH / the
// extended headers the opcode carries, in IBTA order / payload / pad to four
// bytes / ICRC. The IP version follows the GIDs: IPv4 when both are
// IPv4-mapped, IPv6 when neither is. Frames shorter than 60 bytes are padded
// with zeros after the ICRC, as the Ethernet minimum requires (software ports
// do not pad).
//
// The UDP checksum is left zero, as every RoCEv2 sender does: the ICRC
// protects the packet end to end and the UDP checksum would need the payload
// summed twice. Zero is legal over IPv4 (RFC 768). Over IPv6 RFC 8200 asks for
// a checksum, yet mlx5 and rxe send zero there too and receivers accept it;
// set UDPChecksum to compute it for IPv6 anyway (it is never computed for
// IPv4).
type Builder struct {
	// Ethernet.
	SrcMAC, DstMAC header.MAC
	// VLAN adds one 802.1Q tag with tag control information TCI (see
	// header.MakeTCI); RoCE fabrics use it to carry the PFC priority.
	VLAN bool
	TCI  uint16

	// IP. TrafficClass is the IPv4 TOS / IPv6 traffic class byte (DSCP << 2
	// | ECN). HopLimit is the TTL / hop limit as sent, zero included (set
	// DefaultHopLimit unless you mean otherwise). FlowLabel is used by IPv6
	// and, when SrcPort is zero, to derive the UDP source port. IPID and
	// DontFragment are used by IPv4 (rxe and mlx5 set DF).
	SrcGID, DstGID GID
	TrafficClass   uint8
	HopLimit       uint8
	FlowLabel      uint32
	IPID           uint16
	DontFragment   bool

	// UDP. SrcPort 0 means FlowLabelToUDPSrcPort(FlowLabel); DstPort 0 means
	// UDPPort (4791).
	SrcPort     uint16
	DstPort     uint16
	UDPChecksum bool

	// BTH. The pad count is computed from the payload length; TVer is 0.
	Opcode Opcode
	SE     bool
	MigReq bool
	AckReq bool
	PKey   uint16
	FECN   bool
	BECN   bool
	DestQP uint32
	PSN    uint32

	// Extended headers, each written only when the opcode carries it.
	VA            uint64   // RETH, AtomicETH
	RKey          uint32   // RETH, AtomicETH
	DMALen        uint32   // RETH
	Syndrome      Syndrome // AETH
	MSN           uint32   // AETH
	SwapAdd       uint64   // AtomicETH
	Compare       uint64   // AtomicETH
	AtomicAckData uint64   // AtomicAckETH
	QKey          uint32   // DETH
	SrcQP         uint32   // DETH
	Imm           uint32   // ImmDt
	InvRKey       uint32   // IETH
	EEC           uint32   // RDETH
	XRCSRQ        uint32   // XRCETH
	FlushSel      uint8    // FETH selectivity level
	FlushPLT      uint8    // FETH placement type
}

// layout is where the pieces of a frame go.
type layout struct {
	v6                          bool
	l3, udp, bth, payload, icrc int
	pad, frameLen               int
	info                        *OpInfo
}

func (b *Builder) layout(payloadLen int) (layout, error) {
	var l layout
	l.info = &opTable[b.Opcode]
	if !l.info.Valid {
		return l, ErrBadOpcode
	}
	if payloadLen != 0 && !l.info.Payload {
		return l, errUnexpectedPay
	}
	if payloadLen&3 != 0 && (l.info.Position == PositionFirst || l.info.Position == PositionMiddle) {
		// Only the last packet of a message may be padded.
		return l, errPadNotLast
	}
	v4 := b.SrcGID.IsIPv4()
	if v4 != b.DstGID.IsIPv4() {
		return l, ErrBadGID
	}
	l.v6 = !v4
	l.l3 = header.EthernetHeaderLen
	if b.VLAN {
		l.l3 += header.VLANTagLen
	}
	l.udp = l.l3 + header.IPv4MinHeaderLen
	if l.v6 {
		l.udp = l.l3 + header.IPv6HeaderLen
	}
	l.bth = l.udp + header.UDPHeaderLen
	l.payload = l.bth + BTHLen + l.info.HeaderLen
	l.pad = -payloadLen & 3
	l.icrc = l.payload + payloadLen + l.pad
	end := l.icrc + ICRCLen
	if end-l.l3 > 0xffff {
		return l, errTooLong
	}
	l.frameLen = max(end, header.EthernetMinFrameLen)
	return l, nil
}

// HeaderLen returns the offset of the payload in the frames b builds: where
// BuildInPlace expects it.
func (b *Builder) HeaderLen() int {
	n := header.EthernetHeaderLen + header.IPv4MinHeaderLen
	if b.VLAN {
		n += header.VLANTagLen
	}
	if !b.SrcGID.IsIPv4() {
		n += header.IPv6HeaderLen - header.IPv4MinHeaderLen
	}
	return n + header.UDPHeaderLen + BTHLen + opTable[b.Opcode].HeaderLen
}

// FrameLen returns the length of the frame b builds around payloadLen bytes
// of payload, or an error if it cannot build it.
func (b *Builder) FrameLen(payloadLen int) (int, error) {
	l, err := b.layout(payloadLen)
	return l.frameLen, err
}

// Build writes a frame carrying payload into buf and returns its length.
func (b *Builder) Build(buf, payload []byte) (int, error) {
	l, err := b.layout(len(payload))
	if err != nil {
		return 0, err
	}
	if len(buf) < l.frameLen {
		return 0, ErrShortBuffer
	}
	copy(buf[l.payload:], payload)
	b.write(buf, &l, len(payload))
	return l.frameLen, nil
}

// BuildInPlace writes a frame around payloadLen bytes of payload that the
// caller already placed at buf[b.HeaderLen():] (say, copied straight from a
// registered memory region), and returns the frame length.
func (b *Builder) BuildInPlace(buf []byte, payloadLen int) (int, error) {
	l, err := b.layout(payloadLen)
	if err != nil {
		return 0, err
	}
	if len(buf) < l.frameLen {
		return 0, ErrShortBuffer
	}
	b.write(buf, &l, payloadLen)
	return l.frameLen, nil
}

// BuildCNP writes a congestion notification packet for the flow b describes
// and returns its length: b's addresses, ports and P_Key, DestQP the QP to
// notify, opcode 0x81, PSN 0, no flags, 16 reserved zero bytes, and the IP
// ECN field set to CE (0b11) as the vectors of the appliance and mlx5 CNPs
// carry. b itself is not modified.
func (b *Builder) BuildCNP(buf []byte) (int, error) {
	c := *b
	c.Opcode = OpCNP
	c.TrafficClass |= header.ECNCE
	c.SE, c.MigReq, c.AckReq, c.FECN, c.BECN = false, false, false, false, false
	c.PSN = 0
	return c.Build(buf, nil)
}

func (b *Builder) write(buf []byte, l *layout, payloadLen int) {
	// Ethernet and VLAN.
	et := header.EtherTypeIPv4
	if l.v6 {
		et = header.EtherTypeIPv6
	}
	eth := header.Ethernet(buf[:header.EthernetHeaderLen])
	if b.VLAN {
		eth.Encode(b.DstMAC, b.SrcMAC, header.EtherTypeVLAN)
		v := header.VLAN(buf[header.EthernetHeaderLen:l.l3])
		v.SetTCI(b.TCI)
		v.SetEtherType(et)
	} else {
		eth.Encode(b.DstMAC, b.SrcMAC, et)
	}

	// IP.
	hop := b.HopLimit
	ipLen := l.icrc + ICRCLen - l.l3
	udpLen := ipLen - (l.udp - l.l3)
	if l.v6 {
		header.IPv6(buf[l.l3:l.udp]).Encode(b.TrafficClass, b.FlowLabel, uint16(udpLen), header.IPProtoUDP, hop,
			b.SrcGID, b.DstGID)
	} else {
		var flags uint8
		if b.DontFragment {
			flags = header.IPv4FlagDontFragment
		}
		header.IPv4(buf[l.l3:l.udp]).Encode(b.TrafficClass, uint16(ipLen), b.IPID, flags, hop, header.IPProtoUDP,
			b.SrcGID.IPv4(), b.DstGID.IPv4())
	}

	// UDP, checksum zero for now (it is masked out of the ICRC anyway).
	sport, dport := b.SrcPort, b.DstPort
	if sport == 0 {
		sport = FlowLabelToUDPSrcPort(b.FlowLabel)
	}
	if dport == 0 {
		dport = UDPPort
	}
	header.UDP(buf[l.udp:l.bth]).Encode(sport, dport, uint16(udpLen), 0)

	// BTH, written as three words.
	h := buf[l.bth : l.bth+BTHLen]
	w0 := uint32(b.Opcode)<<24 | uint32(l.pad)<<20 | uint32(b.PKey)
	if b.SE {
		w0 |= 1 << 23
	}
	if b.MigReq {
		w0 |= 1 << 22
	}
	w1 := b.DestQP & QPNMask
	if b.FECN {
		w1 |= 1 << 31
	}
	if b.BECN {
		w1 |= 1 << 30
	}
	w2 := b.PSN & PSNMask
	if b.AckReq {
		w2 |= 1 << 31
	}
	binary.BigEndian.PutUint32(h[0:4], w0)
	binary.BigEndian.PutUint32(h[4:8], w1)
	binary.BigEndian.PutUint32(h[8:12], w2)

	// Extended headers, in the opcode's order.
	off := l.bth + BTHLen
	info := l.info
	for i := 0; i < info.NumHeaders; i++ {
		hd := info.Headers[i]
		e := buf[off : off+int(headerLens[hd])]
		switch hd {
		case HeaderRDETH:
			RDETH(e).SetEEC(b.EEC)
		case HeaderDETH:
			DETH(e).SetQKey(b.QKey)
			DETH(e).SetSrcQP(b.SrcQP)
		case HeaderXRCETH:
			XRCETH(e).SetXRCSRQ(b.XRCSRQ)
		case HeaderFETH:
			FETH(e).Set(b.FlushSel, b.FlushPLT)
		case HeaderRETH:
			r := RETH(e)
			r.SetVA(b.VA)
			r.SetRKey(b.RKey)
			r.SetDMALen(b.DMALen)
		case HeaderAtomicETH:
			a := AtomicETH(e)
			a.SetVA(b.VA)
			a.SetRKey(b.RKey)
			a.SetSwapAdd(b.SwapAdd)
			a.SetCompare(b.Compare)
		case HeaderAETH:
			binary.BigEndian.PutUint32(e, uint32(b.Syndrome)<<24|b.MSN&MSNMask)
		case HeaderAtomicAckETH:
			AtomicAckETH(e).SetOrigData(b.AtomicAckData)
		case HeaderImmDt:
			ImmDt(e).SetImm(b.Imm)
		case HeaderIETH:
			IETH(e).SetRKey(b.InvRKey)
		case HeaderCNPReserved:
			clear(e)
		}
		off += len(e)
	}

	// Pad, ICRC, Ethernet padding.
	clear(buf[l.payload+payloadLen : l.icrc])
	hl := header.IPv4MinHeaderLen
	if l.v6 {
		hl = header.IPv6HeaderLen
	}
	crc := icrc(buf[l.l3:l.icrc], hl, hl, l.v6)
	binary.LittleEndian.PutUint32(buf[l.icrc:l.icrc+ICRCLen], crc)
	clear(buf[l.icrc+ICRCLen : l.frameLen])

	if l.v6 && b.UDPChecksum {
		u := header.UDP(buf[l.udp : l.udp+udpLen])
		u.SetChecksum(u.CalculateChecksumIPv6(b.SrcGID, b.DstGID))
	}
}

// FromPacket sets every field of b from a packet decoded by Parse, so that
// b.Build(buf, p.Payload(frame)) reproduces the packet (Ethernet padding,
// reserved bits, IPv4 options, IPv6 extension headers and an outer VLAN tag
// aside, and a zero UDP source port, which Build replaces by the derived one). Extended-header fields the opcode does not carry are zeroed. Of two
// VLAN tags only the inner one is kept. A responder starts from the request
// this way and then calls SwapAddrs.
func (b *Builder) FromPacket(frame []byte, p *Packet) {
	*b = Builder{}
	eth := p.Net.Ethernet(frame)
	b.SrcMAC, b.DstMAC = eth.Src(), eth.Dst()
	if p.Net.VLANs > 0 {
		b.VLAN = true
		b.TCI = p.Net.VLAN(frame, p.Net.VLANs-1).TCI()
	}
	b.SrcGID, b.DstGID = p.SrcGID(frame), p.DstGID(frame)
	if ip := p.Net.IPv6(frame); ip != nil {
		b.TrafficClass = ip.TrafficClass()
		b.HopLimit = ip.HopLimit()
		b.FlowLabel = ip.FlowLabel()
		b.UDPChecksum = p.Net.UDP(frame).Checksum() != 0
	} else {
		ip4 := p.Net.IPv4(frame)
		b.TrafficClass = ip4.TOS()
		b.HopLimit = ip4.TTL()
		b.IPID = ip4.ID()
		b.DontFragment = ip4.DontFragment()
	}
	u := p.Net.UDP(frame)
	b.SrcPort, b.DstPort = u.SrcPort(), u.DstPort()
	b.Opcode, b.SE, b.MigReq, b.AckReq = p.Opcode, p.SE, p.MigReq, p.AckReq
	b.PKey, b.FECN, b.BECN, b.DestQP, b.PSN = p.PKey, p.FECN, p.BECN, p.DestQP, p.PSN
	if h := p.RETH(frame); h != nil {
		b.VA, b.RKey, b.DMALen = h.VA(), h.RKey(), h.DMALen()
	}
	if h := p.AtomicETH(frame); h != nil {
		b.VA, b.RKey, b.SwapAdd, b.Compare = h.VA(), h.RKey(), h.SwapAdd(), h.Compare()
	}
	if h := p.AETH(frame); h != nil {
		b.Syndrome, b.MSN = h.Syndrome(), h.MSN()
	}
	if h := p.AtomicAckETH(frame); h != nil {
		b.AtomicAckData = h.OrigData()
	}
	if h := p.DETH(frame); h != nil {
		b.QKey, b.SrcQP = h.QKey(), h.SrcQP()
	}
	if h := p.ImmDt(frame); h != nil {
		b.Imm = h.Imm()
	}
	if h := p.IETH(frame); h != nil {
		b.InvRKey = h.RKey()
	}
	if h := p.RDETH(frame); h != nil {
		b.EEC = h.EEC()
	}
	if h := p.XRCETH(frame); h != nil {
		b.XRCSRQ = h.XRCSRQ()
	}
	if h := p.FETH(frame); h != nil {
		b.FlushSel, b.FlushPLT = h.SelectivityLevel(), h.PlacementType()
	}
}

// SwapAddrs exchanges the source and destination MACs and GIDs, turning the
// builder of a received packet into one for the reverse direction. The UDP
// ports are not swapped: RoCEv2 packets in both directions go to port 4791,
// and the source port of the reply comes from the reply's own flow label
// (see UDPSrcPort), so it is reset to be derived from FlowLabel.
func (b *Builder) SwapAddrs() {
	b.SrcMAC, b.DstMAC = b.DstMAC, b.SrcMAC
	b.SrcGID, b.DstGID = b.DstGID, b.SrcGID
	b.SrcPort = 0
}
