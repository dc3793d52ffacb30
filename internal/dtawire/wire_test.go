package dtawire

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"
)

// Golden vectors: the bytes the public generators' scapy layers produce
// (dta_base then the primitive, every field big-endian).
var golden = []struct {
	name string
	f    Format
	hex  string
	want Report
}{
	{"key-write", Format{}, "01" + "07" + "40" + "02" + "0000002a" + "deadbeef",
		Report{Opcode: OpKeyWrite, Seq: 7, Retransmittable: true, Redundancy: 2, Key: 42, Data: []byte{0xde, 0xad, 0xbe, 0xef}}},
	{"append immediate", Format{}, "02" + "00" + "80" + "00000003" + "00000064",
		Report{Opcode: OpAppend, Immediate: true, ListID: 3, Data: []byte{0, 0, 0, 100}}},
	{"key-increment", Format{}, "03" + "ff" + "00" + "04" + "00000001" + "0000000000000005",
		Report{Opcode: OpKeyIncrement, Seq: 255, Redundancy: 4, Key: 1, Counter: 5}},
	{"postcarder", Format{}, "04" + "01" + "00" + "0badcafe" + "03" + "00000010",
		Report{Opcode: OpPostcarder, Seq: 1, Key: 0x0badcafe, Hop: 3, Data: []byte{0, 0, 0, 16}}},
	{"sketch-merge", Format{}, "05" + "02" + "40" + "0001" + "0009" + "0000000c" + "00" + "02" + "00000001" + "00000002",
		Report{Opcode: OpSketchMerge, Seq: 2, Retransmittable: true, SketchID: 1, ReporterID: 9, Column: 12,
			Counters: []byte{0, 0, 0, 1, 0, 0, 0, 2}}},
	{"2-byte base", Format{NoSeqnum: true}, "01" + "80" + "01" + "00000005" + "00000006",
		Report{Opcode: OpKeyWrite, Immediate: true, Redundancy: 1, Key: 5, Data: []byte{0, 0, 0, 6}}},
	{"wide data", Format{DataWidth: 8}, "01" + "00" + "00" + "01" + "00000005" + "0102030405060708",
		Report{Opcode: OpKeyWrite, Redundancy: 1, Key: 5, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}}},
}

func eq(a, b *Report) bool {
	return a.Opcode == b.Opcode && a.Seq == b.Seq && a.Immediate == b.Immediate && a.Retransmittable == b.Retransmittable &&
		a.Redundancy == b.Redundancy && a.Key == b.Key && bytes.Equal(a.Data, b.Data) && a.ListID == b.ListID &&
		a.Counter == b.Counter && a.Hop == b.Hop && a.SketchID == b.SketchID && a.ReporterID == b.ReporterID &&
		a.Column == b.Column && a.Kind == b.Kind && bytes.Equal(a.Counters, b.Counters)
}

func TestGolden(t *testing.T) {
	for _, g := range golden {
		t.Run(g.name, func(t *testing.T) {
			b, _ := hex.DecodeString(g.hex)
			var r Report
			// Trailing padding (the Ethernet minimum) is ignored.
			if err := g.f.Parse(append(b, 0, 0, 0), &r); err != nil {
				t.Fatal(err)
			}
			if !eq(&r, &g.want) {
				t.Fatalf("parsed %+v, want %+v", r, g.want)
			}
			out := make([]byte, 128)
			n, err := g.f.Encode(out, &g.want)
			if err != nil || !bytes.Equal(out[:n], b) {
				t.Fatalf("encoded %x (%v), want %x", out[:n], err, b)
			}
			if r.Opcode == OpSketchMerge && (r.NumCounters() != 2 || r.CounterAt(1) != 2) {
				t.Fatalf("counters %v", r.Counters)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	f := Format{}
	for name, c := range map[string]struct {
		hex string
		err error
	}{
		"empty":           {"", ErrTruncated},
		"base only":       {"0100", ErrTruncated},
		"opcode":          {"090000", ErrOpcode},
		"short key-write": {"010000020000", ErrTruncated},
		"redundancy 0":    {"010000" + "00" + "00000001" + "00000001", ErrRedundancy},
		"redundancy 9":    {"010000" + "09" + "00000001" + "00000001", ErrRedundancy},
		"sketch kind":     {"0500000001000100000001" + "0901" + "00000001", ErrSketch},
		"sketch count 0":  {"0500000001000100000001" + "0000", ErrSketch},
		"sketch cut":      {"0500000001000100000001" + "0002" + "00000001", ErrTruncated},
	} {
		b, _ := hex.DecodeString(c.hex)
		var r Report
		if err := f.Parse(b, &r); !errors.Is(err, c.err) {
			t.Errorf("%s: %v, want %v", name, err, c.err)
		}
	}
	if err := (Format{DataWidth: 6}).Validate(); err == nil {
		t.Error("data width 6 accepted")
	}
}

func TestAck(t *testing.T) {
	b := make([]byte, 2)
	Ack{Seq: 9, NACK: true}.Encode(b)
	if !bytes.Equal(b, []byte{9, 0x80}) {
		t.Fatalf("%x", b)
	}
	a, err := ParseAck(b)
	if err != nil || a.Seq != 9 || !a.NACK {
		t.Fatalf("%+v %v", a, err)
	}
	if _, err := ParseAck(b[:1]); !errors.Is(err, ErrTruncated) {
		t.Fatal(err)
	}
}

// FuzzParse: no input panics, and what parses re-encodes to itself.
func FuzzParse(f *testing.F) {
	for _, g := range golden {
		b, _ := hex.DecodeString(g.hex)
		f.Add(b, g.f.NoSeqnum)
	}
	f.Fuzz(func(t *testing.T, b []byte, noSeq bool) {
		fm := Format{NoSeqnum: noSeq}
		var r Report
		if fm.Parse(b, &r) != nil {
			return
		}
		out := make([]byte, 2048)
		n, err := fm.Encode(out, &r)
		if err != nil {
			t.Fatalf("parsed but does not encode: %v", err)
		}
		// The reserved bits are not kept; everything else is.
		want := append([]byte(nil), b[:n]...)
		want[fm.BaseLen()-1] &= 0xc0
		if !bytes.Equal(out[:n], want) {
			t.Fatalf("re-encoded %x, was %x", out[:n], want)
		}
	})
}

func BenchmarkParse(b *testing.B) {
	raw, _ := hex.DecodeString(golden[0].hex)
	var r Report
	f := Format{}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := f.Parse(raw, &r); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mreports/s")
}

// FuzzAck: ACK/NACK parsing round-trips its meaningful bits.
func FuzzAck(f *testing.F) {
	f.Add([]byte{7, 0x80})
	f.Add([]byte{255, 0x40})
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ParseAck(b)
		if err != nil {
			return
		}
		var out [AckLen]byte
		a.Encode(out[:])
		if out[0] != b[0] || out[1] != b[1]&0xc0 {
			t.Fatalf("%x -> %+v -> %x", b[:2], a, out)
		}
	})
}
