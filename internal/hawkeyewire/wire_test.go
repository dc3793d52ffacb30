package hawkeyewire

import (
	"bytes"
	"encoding/hex"
	"testing"
)

// golden are polling headers written by hand from the layout in wire.go
// (type, the pad/ingress/egress/event word, the victim's 5-tuple).
var golden = []struct {
	hex string
	p   Poll
}{
	{"0003035605420a0000010a00000911c12312b7",
		Poll{Type: TypeBoth, Ingress: 427, Egress: 5, Event: 0x42,
			Victim: FlowKey{Src: 0x0a000001, Dst: 0x0a000009, Proto: 17, Sport: 0xc123, Dport: 4791}}},
	{"000100000007c0a80102c0a8030411c00012b7",
		Poll{Type: TypeFlow, Event: 7, Victim: FlowKey{Src: 0xc0a80102, Dst: 0xc0a80304, Proto: 17, Sport: 0xc000, Dport: 4791}}},
	{"000203ffffffffffffffffffffff06ffff0001",
		Poll{Type: TypePFC, Ingress: MaxPort, Egress: MaxPort, Event: 255,
			Victim: FlowKey{Src: 0xffffffff, Dst: 0xffffffff, Proto: 6, Sport: 0xffff, Dport: 1}}},
}

func TestHeaderGolden(t *testing.T) {
	for _, g := range golden {
		want, _ := hex.DecodeString(g.hex)
		buf := make([]byte, HeaderLen)
		h, err := g.p.Encode(buf)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf, want) {
			t.Errorf("encode %+v:\n got %x\nwant %s", g.p, buf, g.hex)
		}
		if !h.IsValid() || Header(want).Poll() != g.p {
			t.Errorf("decode %s: %+v valid %v", g.hex, Header(want).Poll(), h.IsValid())
		}
	}
}

func TestHeaderInvalid(t *testing.T) {
	want, _ := hex.DecodeString(golden[0].hex)
	for name, mut := range map[string]func(b []byte) []byte{
		"short":     func(b []byte) []byte { return b[:HeaderLen-1] },
		"type 0":    func(b []byte) []byte { b[1] = 0; return b },
		"type 4":    func(b []byte) []byte { b[1] = 4; return b },
		"type high": func(b []byte) []byte { b[0] = 1; return b },
		"pad":       func(b []byte) []byte { b[2] |= 0x80; return b },
	} {
		if Header(mut(bytes.Clone(want))).IsValid() {
			t.Errorf("%s: valid", name)
		}
	}
	if _, err := (Poll{}).Encode(make([]byte, 5)); err != ErrShort {
		t.Errorf("short encode: %v", err)
	}
}

// TestSetters: writing one field leaves the others alone.
func TestSetters(t *testing.T) {
	b, _ := hex.DecodeString(golden[0].hex)
	h := Header(b)
	h.SetPorts(1, 2)
	h.SetEvent(9)
	h.SetType(TypeFlow)
	p := h.Poll()
	if p.Ingress != 1 || p.Egress != 2 || p.Event != 9 || p.Type != TypeFlow || p.Victim != golden[0].p.Victim {
		t.Fatalf("%+v", p)
	}
	h.SetPorts(0x3ff, 0x200) // 10 bits: the 10th is dropped, the pad stays clear
	if h.Ingress() != MaxPort || h.Egress() != 0 || !h.IsValid() {
		t.Fatalf("ports %d %d valid %v", h.Ingress(), h.Egress(), h.IsValid())
	}
}

func TestFrame(t *testing.T) {
	f := golden[0].p.AppendFrame(nil, [6]byte{1, 2, 3, 4, 5, 6}, [6]byte{7, 8, 9, 10, 11, 12})
	if len(f) != FrameLen || f[12] != 0x68 || f[13] != 0x88 {
		t.Fatalf("frame %x", f)
	}
	h, ok := ParseFrame(f)
	if !ok || h.Poll() != golden[0].p {
		t.Fatalf("parse: %v %+v", ok, h.Poll())
	}
	f[13] = 0x00
	if _, ok := ParseFrame(f); ok {
		t.Fatal("wrong EtherType parsed")
	}
	if _, ok := ParseFrame(f[:FrameLen-1]); ok {
		t.Fatal("short frame parsed")
	}
}

// FuzzHeader: any bytes decode without panic; a valid header re-encodes
// to the same bytes.
func FuzzHeader(f *testing.F) {
	for _, g := range golden {
		b, _ := hex.DecodeString(g.hex)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h := Header(b)
		if !h.IsValid() {
			if len(b) >= HeaderLen {
				_ = h.Poll()
			}
			return
		}
		out := make([]byte, HeaderLen)
		if _, err := h.Poll().Encode(out); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, b[:HeaderLen]) {
			t.Fatalf("round trip %x -> %x", b[:HeaderLen], out)
		}
		if fr, ok := ParseFrame(h.Poll().AppendFrame(nil, [6]byte{}, [6]byte{})); !ok || fr.Poll() != h.Poll() {
			t.Fatal("frame round trip")
		}
	})
}
