package roce

import (
	"errors"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk/header"
)

// checkPacket verifies what a successful Parse promises.
func checkPacket(t *testing.T, f []byte, p *Packet) {
	t.Helper()
	info := p.Info()
	if !info.Valid || p.BTHOff != p.Net.PayloadOff || p.ExtOff != p.BTHOff+BTHLen ||
		p.PayloadOff != p.ExtOff+info.HeaderLen || p.PayloadOff+p.PayloadLen+int(p.PadCnt) != p.ICRCOff ||
		p.Len() != p.Net.L4Off+p.Net.L4Len || p.Len() > len(f) || p.PayloadLen < 0 {
		t.Fatalf("inconsistent packet %+v (frame %d)", p, len(f))
	}
	if !info.Payload && (p.PayloadLen != 0 || p.PadCnt != 0) {
		t.Fatalf("payload on %s", info.Name)
	}
	for i := 0; i < info.NumHeaders; i++ {
		if p.ext(f, info.Headers[i], info.Headers[i].Len()) == nil {
			t.Fatalf("%s: no %v", info.Name, info.Headers[i])
		}
	}
	_ = p.Payload(f)
	_ = p.Pad(f)
	_ = p.BTH(f).PSN()
	_ = p.SrcAddr(f)
	_ = p.DstGID(f)
	c := p.ComputeICRC(f)
	if (c == p.ICRC(f)) != (p.VerifyICRC(f) == nil) {
		t.Fatal("VerifyICRC disagrees with ComputeICRC")
	}
	if c2, err := ICRC(f[p.Net.L3Off:p.ICRCOff]); err != nil || c2 != c {
		t.Fatalf("ICRC() = %#x, %v; ComputeICRC %#x", c2, err, c)
	}
}

func FuzzParse(f *testing.F) {
	for _, fr := range commonPathFrames(f) {
		f.Add(fr)
	}
	buf := make([]byte, 2048)
	f.Fuzz(func(t *testing.T, frame []byte) {
		var p Packet
		if ParseTruncated(frame, UDPPort, &p) == nil {
			_ = p.Payload(frame)
			_ = p.Pad(frame)
			_ = p.VerifyICRC(frame)
			_ = p.RETH(frame)
			if !p.Net.Truncated && p.Len() > len(frame) {
				t.Fatalf("truncated %v but length %d of %d", p.Net.Truncated, p.Len(), len(frame))
			}
		}
		err := Parse(frame, &p)
		sameAsGeneral(t, frame, &p, err)
		if err == nil {
			// A frame Parse takes, ParseTruncated takes the same way: a
			// caller that must accept cut frames may try Parse first.
			var q Packet
			if e := ParseTruncated(frame, UDPPort, &q); e != nil || q != p {
				t.Fatalf("Parse %+v, ParseTruncated %+v, %v", p, q, e)
			}
		}
		if len(frame) > header.EthernetHeaderLen {
			_, _ = ICRC(frame[header.EthernetHeaderLen:]) // must not panic on anything
		}
		if err != nil {
			return
		}
		checkPacket(t, frame, &p)
		// Rebuild the packet from its decoded fields: it must parse back to
		// the same fields, with a valid ICRC.
		var b Builder
		b.FromPacket(frame, &p)
		n, err := b.Build(buf, p.Payload(frame))
		if err != nil {
			if errors.Is(err, ErrBadPad) || errors.Is(err, ErrBadLength) {
				return // e.g. a First packet padded by a sloppy sender; we refuse to build one
			}
			if errors.Is(err, ErrBadGID) {
				return // IPv6 with one address IPv4-mapped: it parses, but no RNIC sends it
			}
			t.Fatalf("rebuild: %v", err)
		}
		var q Packet
		if err := Parse(buf[:n], &q); err != nil {
			t.Fatalf("reparse: %v", err)
		}
		if q.Opcode != p.Opcode || q.DestQP != p.DestQP || q.PSN != p.PSN || q.PKey != p.PKey ||
			q.AckReq != p.AckReq || q.PayloadLen != p.PayloadLen || q.VerifyICRC(buf[:n]) != nil {
			t.Fatalf("reparse %+v, original %+v", q, p)
		}
		var b2 Builder
		b2.FromPacket(buf[:n], &q)
		if b.SrcPort == 0 { // a zero source port is the builder's "derive it"
			b.SrcPort = FlowLabelToUDPSrcPort(b.FlowLabel)
		}
		if b2 != b {
			t.Fatalf("builder round trip\n got %+v\nwant %+v", b2, b)
		}
	})
}

// FuzzICRC builds packets from fuzzed fields, parses them back, checks the
// ICRC verifies, and that flipping any covered bit makes it fail.
func FuzzICRC(f *testing.F) {
	f.Add(uint8(RCWriteOnly), false, false, []byte("hello world"), uint32(7), uint32(0x11), uint16(5))
	f.Add(uint8(UDSendOnlyImm), true, true, []byte("probe"), uint32(0xffffff), uint32(0x1b), uint16(900))
	f.Add(uint8(OpCNP), false, true, []byte{}, uint32(0), uint32(0x19), uint16(40))
	f.Add(uint8(RCAck), true, false, []byte{}, uint32(1), uint32(2), uint16(3))
	buf := make([]byte, 4096)
	f.Fuzz(func(t *testing.T, op uint8, v6, vlan bool, payload []byte, psn, qpn uint32, flip uint16) {
		info := OpcodeInfo(Opcode(op))
		if len(payload) > 2000 {
			payload = payload[:2000]
		}
		b := allFields(Opcode(op), v6, vlan)
		b.PSN, b.DestQP = psn&PSNMask, qpn&QPNMask
		b.UDPChecksum = false
		n, err := b.Build(buf, payload)
		switch {
		case !info.Valid:
			if !errors.Is(err, ErrBadOpcode) {
				t.Fatalf("reserved opcode %#x: %v", op, err)
			}
			return
		case len(payload) > 0 && !info.Payload:
			if !errors.Is(err, ErrBadLength) {
				t.Fatalf("%s with payload: %v", info.Name, err)
			}
			return
		case len(payload)&3 != 0 && (info.Position == PositionFirst || info.Position == PositionMiddle):
			if !errors.Is(err, ErrBadPad) {
				t.Fatalf("%s unaligned: %v", info.Name, err)
			}
			return
		case err != nil:
			t.Fatalf("%s: %v", info.Name, err)
		}
		fr := buf[:n]
		var p Packet
		if err := Parse(fr, &p); err != nil {
			t.Fatalf("%s: parse: %v", info.Name, err)
		}
		checkPacket(t, fr, &p)
		if p.VerifyICRC(fr) != nil || p.PSN != b.PSN || p.DestQP != b.DestQP || string(p.Payload(fr)) != string(payload) {
			t.Fatalf("%s: round trip %+v", info.Name, p)
		}
		i := p.Net.L3Off + int(flip)%(p.ICRCOff-p.Net.L3Off)
		if masked(&p, i) {
			return
		}
		g := append([]byte(nil), fr...)
		g[i] ^= 0x10
		if p.VerifyICRC(g) == nil {
			t.Fatalf("%s: flipping byte %d went unnoticed", info.Name, i)
		}
	})
}

// sameAsGeneral checks that Parse, which takes the common layouts in one
// pass, decoded frame exactly as header's decoders and parseTransport do:
// the same error, and on success the same packet.
func sameAsGeneral(t *testing.T, frame []byte, p *Packet, err error) {
	t.Helper()
	var q Packet
	gerr := parseGeneral(frame, UDPPort, false, &q)
	if err != gerr || err == nil && *p != q {
		t.Fatalf("Parse: %v %+v\nheader.Decode and parseTransport: %v %+v", err, *p, gerr, q)
	}
}

// commonPathFrames returns the vectors and, built from each, the same
// packet with one 802.1Q tag: both layouts of each IP version that the
// one pass takes.
func commonPathFrames(t testing.TB) [][]byte {
	t.Helper()
	var frames, tagged [][]byte
	for _, v := range loadVectors(t) {
		frames = append(frames, v.frame)
		var p Packet
		if err := Parse(v.frame, &p); err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		var b Builder
		b.FromPacket(v.frame, &p)
		b.VLAN, b.TCI = true, header.MakeTCI(3, false, 100)
		buf := make([]byte, len(v.frame)+header.VLANTagLen)
		n, err := b.Build(buf, p.Payload(v.frame))
		if err != nil {
			t.Fatalf("%s tagged: %v", v.name, err)
		}
		tagged = append(tagged, buf[:n])
	}
	return append(frames, tagged...)
}

// TestParseCommonPath: every vector, untagged and with one 802.1Q tag, and
// every one-byte change of each in the outer headers, the BTH and the
// first extended header (and lengths cut), parses the same in the one
// pass as through header's decoders and parseTransport; and each of the
// four layouts the one pass takes (IPv4 or IPv6, with or without the tag)
// is accepted by it for some vector, without fallback.
func TestParseCommonPath(t *testing.T) {
	type layout struct {
		v6     bool
		vlans  int
		parsed bool
	}
	taken := map[layout]bool{}
	for _, f := range commonPathFrames(t) {
		f = append([]byte(nil), f...)
		var p Packet
		commonOnly = true
		err := Parse(f, &p)
		commonOnly = false
		taken[layout{p.IsIPv6(), p.Net.VLANs, err == nil}] = true
		sameAsGeneral(t, f, &p, Parse(f, &p))
		// Through the first extended header of a tagged IPv6 packet (BTH
		// at 66).
		for i := 0; i < min(len(f), 86); i++ {
			orig := f[i]
			for _, x := range []byte{0x00, 0xff, 0x45, 0x08, 0x81, 0x11, 0x40, 0x01, 0x30, 0x0c,
				orig ^ 0x01, orig ^ 0x80, orig ^ 0x10, orig ^ 0x04} {
				f[i] = x
				sameAsGeneral(t, f, &p, Parse(f, &p))
			}
			f[i] = orig
		}
		for cut := len(f) - 1; cut >= 0 && cut > len(f)-90; cut-- {
			sameAsGeneral(t, f[:cut], &p, Parse(f[:cut], &p))
		}
	}
	for _, l := range []layout{{false, 0, true}, {false, 1, true}, {true, 0, true}, {true, 1, true}} {
		if !taken[l] {
			t.Errorf("no vector parsed in one pass with IPv6 %v, %d tags", l.v6, l.vlans)
		}
	}
}
