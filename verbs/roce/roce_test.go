package roce

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"net/netip"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk/header"
)

func TestOpcodeTable(t *testing.T) {
	valid := map[Transport]int{}
	for i := 0; i < 256; i++ {
		info := OpcodeInfo(Opcode(i))
		if info.Opcode != Opcode(i) {
			t.Fatalf("entry %#x holds opcode %#x", i, info.Opcode)
		}
		if !info.Valid {
			if info.HeaderLen != 0 || info.NumHeaders != 0 || Opcode(i).Valid() {
				t.Errorf("reserved %#x has headers", i)
			}
			continue
		}
		valid[info.Transport]++
		if info.Transport != Opcode(i).Transport() {
			t.Errorf("%#x: transport %v", i, info.Transport)
		}
		// Offsets and lengths agree with the header list.
		off := 0
		for j := 0; j < info.NumHeaders; j++ {
			h := info.Headers[j]
			if info.Offset(h) != off || !info.Has(h) {
				t.Errorf("%s: %v at %d, want %d", info.Name, h, info.Offset(h), off)
			}
			off += h.Len()
		}
		if off != info.HeaderLen || Opcode(i).HeaderLen() != off {
			t.Errorf("%s: header length %d, sum %d", info.Name, info.HeaderLen, off)
		}
		if info.Kind == KindNone || info.Position == PositionNone {
			t.Errorf("%s: no kind or position", info.Name)
		}
	}
	want := map[Transport]int{TransportRC: 25, TransportUC: 12, TransportRD: 22, TransportUD: 2,
		TransportXRC: 23, TransportCNP: 1}
	for tr, n := range want {
		if valid[tr] != n {
			t.Errorf("%v: %d opcodes, want %d", tr, valid[tr], n)
		}
	}

	type row struct {
		op      Opcode
		name    string
		headers []Header
		payload bool
		pos     Position
	}
	rows := []row{
		{RCSendFirst, "RC SEND First", nil, true, PositionFirst},
		{RCSendLastImm, "RC SEND Last with Immediate", []Header{HeaderImmDt}, true, PositionLast},
		{RCWriteFirst, "RC RDMA WRITE First", []Header{HeaderRETH}, true, PositionFirst},
		{RCWriteMiddle, "RC RDMA WRITE Middle", nil, true, PositionMiddle},
		{RCWriteOnlyImm, "RC RDMA WRITE Only with Immediate", []Header{HeaderRETH, HeaderImmDt}, true, PositionOnly},
		{RCReadRequest, "RC RDMA READ Request", []Header{HeaderRETH}, false, PositionOnly},
		{RCReadResponseMiddle, "RC RDMA READ Response Middle", nil, true, PositionMiddle},
		{RCReadResponseLast, "RC RDMA READ Response Last", []Header{HeaderAETH}, true, PositionLast},
		{RCAtomicAck, "RC ATOMIC Acknowledge", []Header{HeaderAETH, HeaderAtomicAckETH}, false, PositionOnly},
		{RCCompareSwap, "RC CmpSwap", []Header{HeaderAtomicETH}, false, PositionOnly},
		{RCSendLastInv, "RC SEND Last with Invalidate", []Header{HeaderIETH}, true, PositionLast},
		{RCSendOnlyInv, "RC SEND Only with Invalidate", []Header{HeaderIETH}, true, PositionOnly},
		{RCFlush, "RC FLUSH", []Header{HeaderFETH, HeaderRETH}, false, PositionOnly},
		{RCAtomicWrite, "RC ATOMIC WRITE", []Header{HeaderRETH}, true, PositionOnly},
		{UCSendOnlyImm, "UC SEND Only with Immediate", []Header{HeaderImmDt}, true, PositionOnly},
		{UCWriteFirst, "UC RDMA WRITE First", []Header{HeaderRETH}, true, PositionFirst},
		{0x46, "RD RDMA WRITE First", []Header{HeaderRDETH, HeaderDETH, HeaderRETH}, true, PositionFirst},
		{0x4d, "RD RDMA READ Response First", []Header{HeaderRDETH, HeaderAETH}, true, PositionFirst},
		{0x51, "RD Acknowledge", []Header{HeaderRDETH, HeaderAETH}, false, PositionOnly},
		{0x53, "RD CmpSwap", []Header{HeaderRDETH, HeaderDETH, HeaderAtomicETH}, false, PositionOnly},
		{RDResync, "RD RESYNC", []Header{HeaderRDETH, HeaderDETH}, false, PositionOnly},
		{UDSendOnly, "UD SEND Only", []Header{HeaderDETH}, true, PositionOnly},
		{UDSendOnlyImm, "UD SEND Only with Immediate", []Header{HeaderDETH, HeaderImmDt}, true, PositionOnly},
		{OpCNP, "CNP", []Header{HeaderCNPReserved}, false, PositionOnly},
		{0xab, "XRC RDMA WRITE Only with Immediate", []Header{HeaderXRCETH, HeaderRETH, HeaderImmDt}, true, PositionOnly},
		{0xb0, "XRC RDMA READ Response Only", []Header{HeaderAETH}, true, PositionOnly},
		{0xb4, "XRC FetchAdd", []Header{HeaderXRCETH, HeaderAtomicETH}, false, PositionOnly},
	}
	for _, r := range rows {
		info := OpcodeInfo(r.op)
		if !info.Valid || info.Name != r.name || info.Payload != r.payload || info.Position != r.pos ||
			info.NumHeaders != len(r.headers) {
			t.Errorf("%#x: %+v", r.op, info)
			continue
		}
		for i, h := range r.headers {
			if info.Headers[i] != h {
				t.Errorf("%s: header %d is %v, want %v", r.name, i, info.Headers[i], h)
			}
		}
	}
	for _, op := range []Opcode{0x15, 0x18, 0x1b, 0x1e, 0x2c, 0x56, 0x60, 0x66, 0x80, 0x82, 0xb5, 0xbc, 0xff} {
		if op.Valid() || op.String() != "reserved (0x"+hexByte(op)+")" {
			t.Errorf("%#x should be reserved, is %q", op, op.String())
		}
	}
	if MakeOpcode(TransportRD, RCWriteOnly) != 0x4a || MakeOpcode(TransportXRC, RCSendOnly) != 0xa4 ||
		Opcode(0xa4).Code() != RCSendOnly {
		t.Error("MakeOpcode")
	}
	if !OpcodeInfo(RCAck).IsResponse() || OpcodeInfo(RCReadRequest).IsResponse() ||
		!PositionOnly.IsStart() || !PositionLast.IsEnd() || PositionMiddle.IsStart() {
		t.Error("predicates")
	}
	if TransportXRC.String() != "XRC" || KindFetchAdd.String() != "FetchAdd" || PositionMiddle.String() != "Middle" ||
		HeaderAtomicETH.String() != "AtomicETH" || HeaderAtomicETH.Len() != 28 || Header(99).Len() != 0 {
		t.Error("strings")
	}
}

func hexByte(op Opcode) string {
	const d = "0123456789abcdef"
	if op < 16 {
		return string(d[op])
	}
	return string([]byte{d[op>>4], d[op&15]})
}

func TestBTHView(t *testing.T) {
	h := BTH(make([]byte, BTHLen))
	h.SetOpcode(RCWriteOnly)
	h.SetSE(true)
	h.SetMigReq(true)
	h.SetPadCount(2)
	h.SetTVer(0)
	h.SetPKey(0x8001)
	h.SetFECN(true)
	h.SetBECN(true)
	h.SetDestQP(0xabcdef)
	h.SetAckReq(true)
	h.SetPSN(0x123456)
	want := []byte{0x0a, 0xe0, 0x80, 0x01, 0xc0, 0xab, 0xcd, 0xef, 0x80, 0x12, 0x34, 0x56}
	if !bytes.Equal(h, want) {
		t.Fatalf("BTH % x, want % x", []byte(h), want)
	}
	if h.Opcode() != RCWriteOnly || !h.SE() || !h.MigReq() || h.PadCount() != 2 || h.TVer() != 0 ||
		h.PKey() != 0x8001 || !h.FECN() || !h.BECN() || h.Resv8() != 0xc0 || h.DestQP() != 0xabcdef ||
		!h.AckReq() || h.PSN() != 0x123456 || !h.IsValid() {
		t.Error("BTH getters")
	}
	h.SetSE(false)
	h.SetMigReq(false)
	h.SetFECN(false)
	h.SetBECN(false)
	h.SetAckReq(false)
	h.SetTVer(0xf)
	h.SetPSN(0x1ffffff) // truncated to 24 bits
	if h[1] != 0x2f || h[4] != 0 || h[8] != 0 || h.PSN() != 0xffffff || h.TVer() != 0xf {
		t.Errorf("BTH clears: % x", []byte(h))
	}
	if BTH(make([]byte, 11)).IsValid() {
		t.Error("short BTH valid")
	}
}

func TestExtHeaderViews(t *testing.T) {
	b := make([]byte, 28)
	r := RETH(b)
	r.SetVA(0x0102030405060708)
	r.SetRKey(0x11223344)
	r.SetDMALen(0x55667788)
	if !bytes.Equal(b[:16], []byte{1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88}) ||
		r.VA() != 0x0102030405060708 || r.RKey() != 0x11223344 || r.DMALen() != 0x55667788 || !r.IsValid() {
		t.Errorf("RETH % x", b[:16])
	}
	a := AtomicETH(b)
	a.SetSwapAdd(0xa1a2a3a4a5a6a7a8)
	a.SetCompare(0xb1b2b3b4b5b6b7b8)
	if a.VA() != 0x0102030405060708 || a.RKey() != 0x11223344 || a.SwapAdd() != 0xa1a2a3a4a5a6a7a8 ||
		a.Compare() != 0xb1b2b3b4b5b6b7b8 || b[12] != 0xa1 || b[27] != 0xb8 || !a.IsValid() {
		t.Errorf("AtomicETH % x", b)
	}
	a.SetVA(1)
	a.SetRKey(2)
	if a.VA() != 1 || a.RKey() != 2 {
		t.Error("AtomicETH setters")
	}
	e := AETH(b[:4])
	e.SetSyndrome(RNRNAKSyndrome(14))
	e.SetMSN(0x1abcdef)
	if !bytes.Equal(b[:4], []byte{0x2e, 0xab, 0xcd, 0xef}) || e.MSN() != 0xabcdef || !e.IsValid() {
		t.Errorf("AETH % x", b[:4])
	}
	d := DETH(b[:8])
	d.SetQKey(0x80010000)
	d.SetSrcQP(0xff123456)
	if !bytes.Equal(b[:8], []byte{0x80, 0x01, 0, 0, 0, 0x12, 0x34, 0x56}) || d.QKey() != 0x80010000 ||
		d.SrcQP() != 0x123456 || !d.IsValid() {
		t.Errorf("DETH % x", b[:8])
	}
	AtomicAckETH(b).SetOrigData(0x29)
	ImmDt(b[8:]).SetImm(0xdeadbeef)
	IETH(b[12:]).SetRKey(0xcafe)
	RDETH(b[16:]).SetEEC(0xff010203)
	XRCETH(b[20:]).SetXRCSRQ(0x040506)
	FETH(b[24:]).Set(1, 3)
	if AtomicAckETH(b).OrigData() != 0x29 || ImmDt(b[8:]).Imm() != 0xdeadbeef || IETH(b[12:]).RKey() != 0xcafe ||
		RDETH(b[16:]).EEC() != 0x010203 || b[16] != 0 || XRCETH(b[20:]).XRCSRQ() != 0x040506 ||
		FETH(b[24:]).SelectivityLevel() != 1 || FETH(b[24:]).PlacementType() != 3 || b[27] != 0x13 {
		t.Errorf("small headers % x", b)
	}
	for _, ok := range []bool{AtomicAckETH(b[:7]).IsValid(), ImmDt(b[:3]).IsValid(), IETH(b[:3]).IsValid(),
		RDETH(b[:3]).IsValid(), XRCETH(b[:3]).IsValid(), FETH(b[:3]).IsValid(), RETH(b[:15]).IsValid(),
		AtomicETH(b[:27]).IsValid(), AETH(b[:3]).IsValid(), DETH(b[:7]).IsValid()} {
		if ok {
			t.Error("short header valid")
		}
	}
}

func TestSyndrome(t *testing.T) {
	cases := []struct {
		s       Syndrome
		typ     AckType
		str     string
		credits int
	}{
		{ACKSyndrome(0), AckTypeACK, "ACK credits=0", 0},
		{ACKSyndrome(5), AckTypeACK, "ACK credits=6", 6},
		{ACKSyndrome(30), AckTypeACK, "ACK credits=32768", 32768},
		{ACKSyndrome(CreditsInvalid), AckTypeACK, "ACK credits=invalid", -1},
		{RNRNAKSyndrome(0), AckTypeRNRNAK, "RNR NAK timer=655.36ms", 0},
		{RNRNAKSyndrome(14), AckTypeRNRNAK, "RNR NAK timer=1.28ms", 0},
		{NAKSyndrome(NAKPSNSequenceError), AckTypeNAK, "NAK PSN sequence error", 0},
		{NAKSyndrome(NAKInvalidRequest), AckTypeNAK, "NAK invalid request", 0},
		{NAKSyndrome(NAKRemoteAccessError), AckTypeNAK, "NAK remote access error", 0},
		{NAKSyndrome(NAKRemoteOperationalError), AckTypeNAK, "NAK remote operational error", 0},
		{NAKSyndrome(NAKInvalidRDRequest), AckTypeNAK, "NAK invalid RD request", 0},
		{NAKSyndrome(9), AckTypeNAK, "NAK reserved NAK code 9", 0},
		{Syndrome(0x41), AckTypeReserved, "reserved syndrome 0x41", 0},
	}
	for _, c := range cases {
		if c.s.Type() != c.typ || c.s.String() != c.str {
			t.Errorf("%#02x: type %v string %q, want %v %q", uint8(c.s), c.s.Type(), c.s.String(), c.typ, c.str)
		}
		if c.typ == AckTypeACK && (c.s.Credits() != c.credits || !c.s.IsACK() || c.s.IsNAK()) {
			t.Errorf("%v: credits %d", c.s, c.s.Credits())
		}
	}
	if uint8(NAKSyndrome(NAKRemoteAccessError)) != 0x62 || uint8(RNRNAKSyndrome(31)) != 0x3f || uint8(ACKSyndrome(31)) != 0x1f {
		t.Error("syndrome encodings")
	}
	s := RNRNAKSyndrome(25)
	if !s.IsRNRNAK() || s.RNRTimer() != 25 || s.RNRDelay() != 61440*time.Microsecond || RNRTimerDuration(1) != 10*time.Microsecond {
		t.Error("RNR timer")
	}
	if NAKSyndrome(NAKInvalidRequest).NAKCode() != NAKInvalidRequest || ACKSyndrome(7).CreditCode() != 7 {
		t.Error("accessors")
	}
	if AckTypeRNRNAK.String() != "RNR NAK" {
		t.Error("AckType string")
	}
}

func TestPSNArithmetic(t *testing.T) {
	if ComparePSN(0, 0xffffff) != 1 || ComparePSN(0xffffff, 0) != -1 || ComparePSN(5, 5) != 0 ||
		ComparePSN(0x800000, 0) != -0x800000 || ComparePSN(0x7fffff, 0) != 0x7fffff {
		t.Error("ComparePSN")
	}
	if AddPSN(0xffffff, 2) != 1 || AddPSN(10, -11) != 0xffffff {
		t.Error("AddPSN")
	}
}

func TestGIDAndFlowLabel(t *testing.T) {
	g := GIDFromIPv4([4]byte{10, 0, 0, 1})
	if !g.IsIPv4() || g.IPv4() != [4]byte{10, 0, 0, 1} || g.String() != "10.0.0.1" ||
		g != GIDFromAddr(netip.MustParseAddr("10.0.0.1")) || g.Addr() != netip.MustParseAddr("10.0.0.1") {
		t.Errorf("IPv4 GID %v", g)
	}
	g6 := GIDFromAddr(netip.MustParseAddr("fe80::1"))
	if g6.IsIPv4() || g6.String() != "fe80::1" {
		t.Errorf("IPv6 GID %v", g6)
	}
	if FlowLabelToUDPSrcPort(0) != 0xc000 || FlowLabelToUDPSrcPort(0xabcde) != 0xfcf4 ||
		FlowLabelToUDPSrcPort(0x12345) != 0xe341 {
		t.Error("FlowLabelToUDPSrcPort")
	}
	if FlowLabelFromQPNs(0xabcdef, 0x123456) != 0xac3e3 || FlowLabelFromQPNs(0x123456, 0xabcdef) != 0xac3e3 {
		t.Error("FlowLabelFromQPNs")
	}
	if UDPSrcPort(0, 0xabcdef, 0x123456) != 0xc3c8 || UDPSrcPort(0xabcde, 1, 2) != 0xfcf4 {
		t.Error("UDPSrcPort")
	}
	for _, sp := range []uint16{0xc000, 0xc3c8, 0xffff, 0xe341} {
		if FlowLabelToUDPSrcPort(FlowLabelForUDPSrcPort(sp)) != sp {
			t.Errorf("FlowLabelForUDPSrcPort(%#x)", sp)
		}
	}
}

// resize appends (delta > 0, zero bytes) or removes bytes at the end of a
// parsed frame and fixes the IP and UDP lengths (and IPv4 checksum), making a
// frame whose L3/L4 is consistent but whose RoCE layout changed.
func resize(frame []byte, p *Packet, delta int) []byte {
	n := p.Len() + delta
	f := make([]byte, n)
	copy(f, frame[:min(n, p.Len())])
	l3, l4 := p.Net.L3Off, p.Net.L4Off
	if p.IsIPv6() {
		header.IPv6(f[l3:]).SetPayloadLength(uint16(n - l3 - header.IPv6HeaderLen))
	} else {
		ip := header.IPv4(f[l3:])
		ip.SetTotalLength(uint16(n - l3))
		ip.UpdateChecksum()
	}
	header.UDP(f[l4:]).SetLength(uint16(n - l4))
	return f
}

func TestParseErrors(t *testing.T) {
	vs := loadVectors(t)
	for _, v := range vs {
		var p Packet
		if err := Parse(v.frame, &p); err != nil {
			t.Fatal(err)
		}
		// Every truncation of the frame.
		for n := 0; n < len(v.frame); n++ {
			var q Packet
			if err := Parse(v.frame[:n], &q); !errors.Is(err, ErrTruncated) {
				t.Errorf("%s cut at %d: %v", v.name, n, err)
			}
		}
		// Every shortening of the RoCE packet with consistent IP/UDP lengths:
		// an error, or a layout whose ICRC no longer matches.
		for cut := 1; cut <= p.Len()-p.BTHOff; cut++ {
			f := resize(v.frame, &p, -cut)
			var q Packet
			err := Parse(f, &q)
			if err == nil {
				if q.VerifyICRC(f) == nil {
					t.Errorf("%s shortened by %d: still valid", v.name, cut)
				}
				continue
			}
			if cut > p.Len()-p.BTHOff-BTHLen-ICRCLen && !errors.Is(err, ErrTruncated) {
				t.Errorf("%s shortened by %d: %v", v.name, cut, err)
			}
		}
	}

	get := func(name string) ([]byte, *Packet) {
		for _, v := range vs {
			if v.name == name {
				p := new(Packet)
				_ = Parse(v.frame, p)
				return append([]byte(nil), v.frame...), p
			}
		}
		panic(name)
	}
	send, sp := get("RC SEND_ONLY v4")
	ack, ap := get("RC ACK v4")
	six, _ := get("UD SEND_ONLY_IMM v6")
	mod := func(f []byte, fn func([]byte)) []byte {
		g := append([]byte(nil), f...)
		fn(g)
		return g
	}
	firstWithPad := mod(send, func(g []byte) { g[sp.BTHOff] = byte(RCSendFirst); g[sp.BTHOff+1] = 0x10 })
	cases := []struct {
		name  string
		frame []byte
		want  error
	}{
		{"bad IHL", mod(send, func(g []byte) { g[14] = 0x44 }), ErrMalformed},
		{"IHL too long", mod(send, func(g []byte) { g[14] = 0x46 }), ErrMalformed},
		{"IP version", mod(send, func(g []byte) { g[14] = 0x65 }), ErrMalformed},
		{"UDP length beyond IP", mod(send, func(g []byte) { g[39]++ }), ErrMalformed},
		{"UDP length below 8", mod(send, func(g []byte) { g[38], g[39] = 0, 7 }), ErrMalformed},
		{"UDP too short for BTH", resize(send, sp, -(sp.Len() - sp.BTHOff - 15)), ErrTruncated},
		{"wrong UDP port", mod(send, func(g []byte) { g[37] = 0xb8 }), ErrNotRoCE},
		{"TCP", mod(send, func(g []byte) { g[23] = header.IPProtoTCP }), ErrMalformed},
		{"ICMP", mod(send, func(g []byte) { g[23] = header.IPProtoICMP }), ErrNotRoCE},
		{"IP fragment", mod(send, func(g []byte) { g[20] = 0x20 }), ErrNotRoCE},
		{"IP later fragment", mod(send, func(g []byte) { g[21] = 0x01 }), ErrNotRoCE},
		{"not IP", mod(send, func(g []byte) { g[12], g[13] = 0x88, 0xcc }), ErrNotRoCE},
		{"reserved opcode", mod(send, func(g []byte) { g[sp.BTHOff] = 0x15 }), ErrBadOpcode},
		{"TVer 1", mod(send, func(g []byte) { g[sp.BTHOff+1] = 0x01 }), ErrBadVersion},
		{"pad on ACK", mod(ack, func(g []byte) { g[ap.BTHOff+1] = 0x10 }), ErrBadPad},
		{"pad on First", firstWithPad, ErrBadPad},
		{"data not 4-aligned", resize(send, sp, 1), ErrBadPad},
		{"payload on ACK", resize(ack, ap, 4), ErrBadLength},
		{"ACK short of AETH", resize(ack, ap, -4), ErrTruncated},
		{"IPv6 version", mod(six, func(g []byte) { g[14] = 0x41 }), ErrMalformed},
		{"IPv6 payload length", mod(six, func(g []byte) { g[19]++ }), ErrTruncated},
	}
	for _, c := range cases {
		var p Packet
		if err := Parse(c.frame, &p); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// Pad larger than the data: a SEND Only with no payload and PadCnt 3.
	b := v4Base()
	b.Opcode = RCSendOnly
	b.HopLimit = 0 // sent as is
	f := make([]byte, 128)
	n, _ := b.Build(f, nil)
	f[34+8+1] = 0x30
	var p Packet
	if err := Parse(f[:n], &p); !errors.Is(err, ErrBadPad) || f[14+8] != 0 {
		t.Errorf("pad beyond data: %v", err)
	}
	// Lumina's mirrored copies go to another port.
	m := mod(send, func(g []byte) { binary.BigEndian.PutUint16(g[36:], 9741) })
	if err := ParsePort(m, 9741, &p); err != nil || p.PSN != 1 {
		t.Errorf("ParsePort: %v", err)
	}
	if err := Parse(m, &p); !errors.Is(err, ErrNotRoCE) {
		t.Errorf("Parse of port 9741: %v", err)
	}
	// A frame with Ethernet padding beyond the RoCE packet parses, and
	// the ICRC is found by the lengths, not the frame end.
	padded := append(append([]byte(nil), send...), 0, 0, 0, 0, 0, 0)
	if err := Parse(padded, &p); err != nil || p.VerifyICRC(padded) != nil || p.Len() != len(send) {
		t.Errorf("Ethernet padding: %v", err)
	}
}

func TestICRCFunctionErrors(t *testing.T) {
	send := loadVectors(t)[0].frame
	ip := send[14 : len(send)-4]
	for n := 0; n < 40; n++ {
		if _, err := ICRC(ip[:n]); !errors.Is(err, ErrTruncated) {
			t.Errorf("ICRC of %d bytes: %v", n, err)
		}
	}
	g := append([]byte(nil), ip...)
	g[9] = header.IPProtoTCP
	if _, err := ICRC(g); !errors.Is(err, ErrNotRoCE) {
		t.Errorf("TCP: %v", err)
	}
	g[0] = 0x44
	if _, err := ICRC(g); !errors.Is(err, ErrNotRoCE) {
		t.Errorf("IHL 4: %v", err)
	}
	g[0] = 0x75
	if _, err := ICRC(g); !errors.Is(err, ErrNotRoCE) {
		t.Errorf("version 7: %v", err)
	}
}

// allFields returns a builder with a distinct in-range value in every field.
func allFields(op Opcode, v6, vlan bool) Builder {
	b := Builder{SrcMAC: vMAC1, DstMAC: vMAC2, VLAN: vlan, TCI: header.MakeTCI(3, false, 100),
		SrcGID: vGID1, DstGID: vGID2, TrafficClass: 0x6a, HopLimit: 17, FlowLabel: 0xabcde, IPID: 0x4242,
		DontFragment: true, SrcPort: 0, DstPort: 0, Opcode: op, SE: true, MigReq: true, AckReq: true,
		PKey: 0x8001, FECN: true, BECN: true, DestQP: 0xa1b2c3, PSN: 0xfffffe,
		VA: 0x1122334455667788, RKey: 0x99aabbcc, DMALen: 0x1000, Syndrome: NAKSyndrome(NAKRemoteAccessError),
		MSN: 0x0c0d0e, SwapAdd: 0xdeadbeefcafef00d, Compare: 0x0123456789abcdef, AtomicAckData: 0x5555aaaa5555aaaa,
		QKey: 0x80010000, SrcQP: 0x000102, Imm: 0xfeedface, InvRKey: 0x13572468, EEC: 0x0a0b0c, XRCSRQ: 0x0d0e0f,
		FlushSel: 1, FlushPLT: 2}
	if v6 {
		b.SrcGID = GIDFromAddr(netip.MustParseAddr("2001:db8::10"))
		b.DstGID = GIDFromAddr(netip.MustParseAddr("2001:db8::20"))
		b.UDPChecksum = true
	}
	return b
}

// normalize returns what FromPacket yields for a frame built by b: explicit
// ports and hop limit, the fields of headers the opcode lacks cleared, and
// the IP fields of the other IP version cleared.
func normalize(b Builder) Builder {
	info := OpcodeInfo(b.Opcode)
	if b.SrcPort == 0 {
		b.SrcPort = FlowLabelToUDPSrcPort(b.FlowLabel)
	}
	if b.DstPort == 0 {
		b.DstPort = UDPPort
	}
	if b.SrcGID.IsIPv4() {
		b.FlowLabel, b.UDPChecksum = 0, false
	} else {
		b.IPID, b.DontFragment = 0, false
	}
	if !b.VLAN {
		b.TCI = 0
	}
	if !info.Has(HeaderRETH) && !info.Has(HeaderAtomicETH) {
		b.VA, b.RKey = 0, 0
	}
	if !info.Has(HeaderRETH) {
		b.DMALen = 0
	}
	if !info.Has(HeaderAETH) {
		b.Syndrome, b.MSN = 0, 0
	}
	if !info.Has(HeaderAtomicETH) {
		b.SwapAdd, b.Compare = 0, 0
	}
	if !info.Has(HeaderAtomicAckETH) {
		b.AtomicAckData = 0
	}
	if !info.Has(HeaderDETH) {
		b.QKey, b.SrcQP = 0, 0
	}
	if !info.Has(HeaderImmDt) {
		b.Imm = 0
	}
	if !info.Has(HeaderIETH) {
		b.InvRKey = 0
	}
	if !info.Has(HeaderRDETH) {
		b.EEC = 0
	}
	if !info.Has(HeaderXRCETH) {
		b.XRCSRQ = 0
	}
	if !info.Has(HeaderFETH) {
		b.FlushSel, b.FlushPLT = 0, 0
	}
	return b
}

func TestBuildParseEveryOpcode(t *testing.T) {
	buf := make([]byte, 2048)
	payload := make([]byte, 1100)
	for i := range payload {
		payload[i] = byte(i*13 + 1)
	}
	count := 0
	for op := 0; op < 256; op++ {
		info := OpcodeInfo(Opcode(op))
		if !info.Valid {
			continue
		}
		lens := []int{0}
		if info.Payload {
			lens = []int{0, 1, 2, 3, 4, 5, 7, 8, 50, 1024, 1100}
		}
		for _, v6 := range []bool{false, true} {
			for _, vlan := range []bool{false, true} {
				for _, n := range lens {
					b := allFields(Opcode(op), v6, vlan)
					fl, err := b.Build(buf, payload[:n])
					if n&3 != 0 && (info.Position == PositionFirst || info.Position == PositionMiddle) {
						if !errors.Is(err, ErrBadPad) {
							t.Fatalf("%s with %d bytes: %v", info.Name, n, err)
						}
						continue
					}
					if err != nil {
						t.Fatalf("%s v6=%v: %v", info.Name, v6, err)
					}
					f := buf[:fl]
					var p Packet
					if err := Parse(f, &p); err != nil {
						t.Fatalf("%s v6=%v vlan=%v len %d: %v", info.Name, v6, vlan, n, err)
					}
					if p.Opcode != Opcode(op) || p.PayloadLen != n || !bytes.Equal(p.Payload(f), payload[:n]) ||
						int(p.PadCnt) != -n&3 || p.VerifyICRC(f) != nil || fl < header.EthernetMinFrameLen ||
						p.PayloadOff != b.HeaderLen() {
						t.Fatalf("%s len %d: %+v", info.Name, n, p)
					}
					var got Builder
					got.FromPacket(f, &p)
					if want := normalize(b); got != want {
						t.Fatalf("%s v6=%v vlan=%v: FromPacket\n got %+v\nwant %+v", info.Name, v6, vlan, got, want)
					}
					c, err := ICRC(f[p.Net.L3Off:p.ICRCOff])
					if err != nil || c != p.ICRC(f) {
						t.Fatalf("%s: ICRC() %v", info.Name, err)
					}
					if v6 {
						ip := p.Net.IPv6(f)
						if !p.Net.UDP(f).ChecksumValidIPv6(ip.Src(), ip.Dst()) {
							t.Fatalf("%s: UDP checksum over IPv6", info.Name)
						}
					} else if p.Net.UDP(f).Checksum() != 0 || !p.Net.IPv4(f).ChecksumValid() {
						t.Fatalf("%s: IPv4 checksums", info.Name)
					}
					count++
				}
			}
		}
	}
	if count < 500 {
		t.Fatalf("only %d combinations", count)
	}
}

func TestBuildErrors(t *testing.T) {
	b := v4Base()
	b.Opcode = RCWriteOnly
	payload := make([]byte, 100)
	need, err := b.FrameLen(len(payload))
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < need; n++ {
		if _, err := b.Build(make([]byte, n), payload); !errors.Is(err, ErrShortBuffer) {
			t.Fatalf("buffer of %d: %v", n, err)
		}
		if _, err := b.BuildInPlace(make([]byte, n), len(payload)); !errors.Is(err, ErrShortBuffer) {
			t.Fatalf("in place, buffer of %d: %v", n, err)
		}
	}
	buf := make([]byte, 70000)
	c := b
	c.DstGID = v6GID2
	if _, err := c.Build(buf, nil); !errors.Is(err, ErrBadGID) {
		t.Errorf("mixed GIDs: %v", err)
	}
	c = b
	c.Opcode = 0x15
	if _, err := c.Build(buf, nil); !errors.Is(err, ErrBadOpcode) {
		t.Errorf("reserved opcode: %v", err)
	}
	c = b
	c.Opcode = RCAck
	if _, err := c.Build(buf, payload); !errors.Is(err, ErrBadLength) {
		t.Errorf("payload on ACK: %v", err)
	}
	if _, err := b.Build(buf, make([]byte, 65536)); !errors.Is(err, ErrBadLength) {
		t.Errorf("oversized: %v", err)
	}
	if _, err := b.BuildCNP(make([]byte, 60)); !errors.Is(err, ErrShortBuffer) {
		t.Errorf("CNP in 60 bytes: %v", err)
	}
}

func TestSwapAddrs(t *testing.T) {
	b := allFields(RCSendOnly, false, false)
	b.SrcPort = 0xd000
	b.SwapAddrs()
	if b.SrcMAC != vMAC2 || b.DstMAC != vMAC1 || b.SrcGID != vGID2 || b.DstGID != vGID1 || b.SrcPort != 0 {
		t.Errorf("%+v", b)
	}
}

func TestEthernetMinimumPadding(t *testing.T) {
	// A zero-length SEND Only over IPv4 is 58 bytes: it is padded to 60 and
	// still parses and verifies.
	b := v4Base()
	b.Opcode = RCSendOnly
	buf := bytes.Repeat([]byte{0xee}, 100)
	n, err := b.Build(buf, nil)
	if err != nil || n != 60 || buf[58] != 0 || buf[59] != 0 {
		t.Fatalf("%d %v % x", n, err, buf[:n])
	}
	var p Packet
	if err := Parse(buf[:n], &p); err != nil || p.Len() != 58 || p.VerifyICRC(buf) != nil {
		t.Fatalf("%v %+v", err, p)
	}
}

func TestSlicing8MatchesCRC32(t *testing.T) {
	b := make([]byte, 300)
	for i := range b {
		b[i] = byte(i*7 + i>>3)
	}
	for n := 0; n <= len(b); n++ {
		for _, seed := range []uint32{0, icrcSeed, 0xffffffff} {
			if got, want := updateSlicing8(seed, b[:n]), crc32.Update(seed, crc32.IEEETable, b[:n]); got != want {
				t.Fatalf("len %d seed %#x: %#x != %#x", n, seed, got, want)
			}
		}
	}
	if crc32.ChecksumIEEE(bytes.Repeat([]byte{0xff}, 8)) != icrcSeed || ^uint32(icrcSeedRaw) != icrcSeed {
		t.Fatal("the ICRC seed is not the CRC of eight 0xff bytes")
	}
}

func TestParseTruncated(t *testing.T) {
	for _, v := range loadVectors(t) {
		var full Packet
		if err := Parse(v.frame, &full); err != nil {
			t.Fatal(err)
		}
		for snap := 0; snap <= len(v.frame); snap++ {
			f := v.frame[:snap]
			var p Packet
			err := ParseTruncated(f, UDPPort, &p)
			if snap < full.PayloadOff {
				if !errors.Is(err, ErrTruncated) {
					t.Errorf("%s snapped at %d: %v", v.name, snap, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s snapped at %d: %v", v.name, snap, err)
				continue
			}
			if p.Opcode != full.Opcode || p.PSN != full.PSN || p.DestQP != full.DestQP ||
				p.PayloadOff != full.PayloadOff || p.PayloadLen != full.PayloadLen || p.ICRCOff != full.ICRCOff ||
				p.Net.Truncated != (snap < len(v.frame)) {
				t.Errorf("%s snapped at %d: %+v", v.name, snap, p)
			}
			if got := p.Payload(f); !bytes.Equal(got, full.Payload(v.frame)[:len(got)]) {
				t.Errorf("%s snapped at %d: payload", v.name, snap)
			}
			_ = p.Pad(f)
			err = p.VerifyICRC(f)
			if snap < len(v.frame) && !errors.Is(err, ErrTruncated) || snap == len(v.frame) && err != nil {
				t.Errorf("%s snapped at %d: VerifyICRC %v", v.name, snap, err)
			}
			if snap >= full.PayloadOff {
				// The extended headers are readable from the capture.
				var b Builder
				b.FromPacket(v.frame, &full)
				if r := p.RETH(f); r != nil && r.VA() != b.VA {
					t.Errorf("%s snapped at %d: RETH", v.name, snap)
				}
			}
		}
	}
	// A cut packet whose UDP length exceeds what IP declares is malformed.
	f := append([]byte(nil), loadVectors(t)[2].frame[:60]...)
	f[39] += 4
	var p Packet
	if err := ParseTruncated(f, UDPPort, &p); !errors.Is(err, ErrMalformed) {
		t.Errorf("UDP beyond IP: %v", err)
	}
}

func TestMaxExtHeaders(t *testing.T) {
	most, longest := 0, 0
	for op := 0; op < 256; op++ {
		info := OpcodeInfo(Opcode(op))
		most = max(most, info.NumHeaders)
		longest = max(longest, info.HeaderLen)
	}
	if most != MaxExtHeaders || OpcodeInfo(MakeOpcode(TransportRD, RCWriteOnlyImm)).NumHeaders != MaxExtHeaders {
		t.Errorf("most headers %d, MaxExtHeaders %d", most, MaxExtHeaders)
	}
	if longest != MaxExtHeaderLen {
		t.Errorf("longest extended headers %d bytes", longest)
	}
}

// TestOpFastTable: the one pass's packed opcode table says what opTable
// says, for every opcode.
func TestOpFastTable(t *testing.T) {
	for i := 0; i < 256; i++ {
		info, f := OpcodeInfo(Opcode(i)), opFast[i]
		if f.valid() != info.Valid {
			t.Fatalf("%#x: valid %v, opTable %v", i, f.valid(), info.Valid)
		}
		if !info.Valid {
			// The pass refuses the opcode through the opcode mask alone:
			// every bit, and a reserved opcode is not 0.
			if i == 0 || f != opFastReserved || opFastWord(0, uint64(i)<<56)&uint64(f) == 0 {
				t.Fatalf("%#x: reserved, opFast %#x", i, uint64(f))
			}
			continue
		}
		dataMask, padMask := -1, 0
		if info.Payload {
			dataMask = 3
			if info.Position == PositionFirst || info.Position == PositionMiddle {
				padMask = 3
			}
		}
		byte1Mask := uint8(0x0f | padMask<<4) // TVer, and the pad count where it must be 0
		if f.hdrLen() != info.HeaderLen || f.dataMask() != dataMask || f.byte1Mask() != byte1Mask {
			t.Errorf("%s: header length %d, data mask %d, byte 1 mask %#x; want %d, %d, %#x", info.Name,
				f.hdrLen(), f.dataMask(), f.byte1Mask(), info.HeaderLen, dataMask, byte1Mask)
		}
	}
}
