package header

import (
	"encoding/binary"
	"strings"
	"testing"
)

func FuzzDecode(f *testing.F) {
	for _, fr := range goldenFrames(f) {
		f.Add(fr)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		var p Parsed
		err := Decode(frame, &p)
		checkInvariants(t, frame, &p)
		if err == nil && p.Truncated {
			t.Fatal("Decode set Truncated")
		}
		var q Parsed
		errT := DecodeTruncated(frame, &q)
		checkInvariants(t, frame, &q)
		// A frame that decodes strictly decodes the same way with a snap length.
		if err == nil && (errT != nil || q != p) {
			t.Fatalf("strict %+v, snapped %+v (%v)", p, q, errT)
		}
	})
}

func FuzzChecksum(f *testing.F) {
	f.Add([]byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}, uint16(0))
	f.Add(unhexFrame(f, roceV4), uint16(0xffff))
	f.Fuzz(func(t *testing.T, b []byte, init uint16) {
		got, want := Sum(b, init), refSum(b, init)
		// 0 and 0xffff are the two representations of zero.
		if got != want && got^want != 0xffff {
			t.Fatalf("Sum %#04x, reference %#04x", got, want)
		}
		if len(b)%2 == 0 && len(b) >= 2 {
			mid := len(b) / 2 &^ 1
			if c := Sum(b[mid:], Sum(b[:mid], init)); c != got && c^got != 0xffff {
				t.Fatalf("chained %#04x, whole %#04x", c, got)
			}
		}
	})
}

func FuzzChecksumUpdate(f *testing.F) {
	f.Add(unhexFrame(f, roceV4)[14:34], uint8(4), uint16(0x1234))
	f.Fuzz(func(t *testing.T, hdr []byte, field uint8, v uint16) {
		if len(hdr) < 20 {
			return
		}
		h := IPv4(append([]byte(nil), hdr[:20]...))
		h[0] = 0x45
		h.UpdateChecksum()
		w := 2 + 2*int(field%9) // words 1..9 (skip version/IHL)
		if w == 10 {
			w = 18
		}
		old := binary.BigEndian.Uint16(h[w:])
		binary.BigEndian.PutUint16(h[w:], v)
		h.SetChecksum(ChecksumUpdate16(h.Checksum(), old, v))
		if !h.ChecksumValid() {
			t.Fatalf("word %d: % x", w, h)
		}
	})
}

func FuzzSkipIPv6Extensions(f *testing.F) {
	six := unhexFrame(f, qinqIPv6Ext)
	f.Add(six[62:], uint8(IPProtoHopByHop))
	f.Add([]byte{17, 0, 0, 8, 0, 0, 0, 1}, uint8(IPProtoFragment))
	f.Fuzz(func(t *testing.T, b []byte, next uint8) {
		proto, off, frag, err := SkipIPv6Extensions(b, next)
		if off < 0 || off > len(b) {
			t.Fatalf("offset %d of %d", off, len(b))
		}
		if frag != nil && !frag.IsValid() {
			t.Fatal("short fragment view")
		}
		if err == nil && IsIPv6ExtHeader(proto) && (frag == nil || frag.FragmentOffset() == 0) {
			t.Fatalf("stopped at extension header %d", proto)
		}
	})
}

// FuzzParseMAC: a MAC in a flag or a spec parses or is refused with
// ErrBadMAC; what parses prints as the same address, either separator
// and case.
func FuzzParseMAC(f *testing.F) {
	for _, s := range []string{"02:00:00:00:00:01", "0C-42-A1-00-09-01", "02:00:00:00:00:0g", "02:00:00:00:00", "02:00:00-00:00:01"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMAC(s)
		if err != nil {
			if err != ErrBadMAC {
				t.Fatalf("%q: %v", s, err)
			}
			return
		}
		norm := strings.ToLower(strings.ReplaceAll(s, "-", ":"))
		if m.String() != norm {
			t.Fatalf("%q prints as %s", s, m)
		}
		if back, err := ParseMAC(m.String()); err != nil || back != m {
			t.Fatalf("%s reads back as %v, %v", m, back, err)
		}
	})
}
