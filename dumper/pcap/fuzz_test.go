package pcap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
)

// Both fuzzers go through the auto-detecting NewReader; they differ in their
// seeds, which steer the fuzzer towards one container. Seed corpora grown
// by `go test -fuzz` live in testdata/fuzz/<FuzzName>/.

func FuzzReader(f *testing.F) {
	for _, s := range pcapSeeds() {
		f.Add(s)
	}
	f.Fuzz(fuzzRead)
}

func FuzzReaderNG(f *testing.F) {
	for _, s := range pcapngSeeds() {
		f.Add(s)
	}
	f.Fuzz(fuzzRead)
}

func pcapSeeds() [][]byte {
	d := udpFrame(1234, 4791, []byte("seed payload"))
	var seeds [][]byte
	for _, bo := range []byteOrder{binary.LittleEndian, binary.BigEndian} {
		for _, nano := range []bool{false, true} {
			seeds = append(seeds, classicFile(bo, nano, 96, 1,
				classicRec{1, 2, 100, d}, classicRec{3, 4, uint32(len(d)), d[:20]}))
		}
	}
	for _, micro := range []bool{false, true} {
		for _, comp := range []Compression{CompressNone, CompressZstd} {
			seeds = append(seeds, written(WriterOptions{LinkType: LinkTypeEthernet, SnapLen: 64, Microsecond: micro, Compress: comp}))
		}
	}
	return seeds
}

func pcapngSeeds() [][]byte {
	d := udpFrame(1234, 4791, []byte("seed payload"))
	var seeds [][]byte
	for _, bo := range []byteOrder{binary.LittleEndian, binary.BigEndian} {
		g := &ngBuilder{bo: bo}
		g.shb(g.opt(optComment, []byte("c")))
		g.idb(1, 0, g.opt(optIfName, []byte("eth0")))
		g.idb(101, 64, g.opt(optIfTsresol, []byte{0x80 | 10}), g.opt(optIfTsoff, g.u64(3)))
		g.block(4, []byte{0, 0, 0, 0})
		g.epb(0, 1<<40|5, d, 200, g.opt(optEpbFlags, g.u32(1)), g.opt(optComment, []byte("pkt")))
		g.opb(1, 77, d[:30], 60)
		g.spb(uint32(len(d)), d)
		g.shb()
		g.idb(1, 16)
		g.epb(0, 9, d[:16], 60)
		seeds = append(seeds, g.out)
	}
	seeds = append(seeds,
		written(WriterOptions{Format: FormatPcapNG, LinkType: LinkTypeEthernet, InterfaceName: "mlx5_0"}),
		written(WriterOptions{Format: FormatPcapNG, LinkType: LinkTypeEthernet, Microsecond: true, Compress: CompressZstd}))
	return seeds
}

// written returns a small trace produced by the Writer.
func written(o WriterOptions) []byte {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, o)
	if err != nil {
		panic(err)
	}
	gen := newRoceGen(80)
	for i := range 3 {
		ts, d, orig := gen.next()
		var opts PacketOptions
		if o.Format == FormatPcapNG && i == 1 {
			opts = PacketOptions{Flags: 2, Comment: "x"}
		}
		if err := w.WritePacketOpts(ts, d, orig, opts); err != nil {
			panic(err)
		}
	}
	if err := w.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// fuzzRead checks that arbitrary input never panics, only fails with the
// package's typed errors, yields records that respect the documented
// bounds, and that whatever it reads survives a write/read round trip.
func fuzzRead(t *testing.T, in []byte) {
	r, err := NewReader(bytes.NewReader(in))
	if err != nil {
		if !isSentinel(err) {
			t.Fatalf("NewReader: untyped error %v", err)
		}
		return
	}
	defer r.Close()
	var recs []ownedRecord
	var rec Record
	for {
		err := r.Next(&rec)
		if err == io.EOF {
			break
		}
		if err != nil {
			if !isSentinel(err) {
				t.Fatalf("Next: untyped error %v", err)
			}
			var fe *FormatError
			if !errors.As(err, &fe) || fe.Offset < 0 || fe.Offset > r.Offset()+maxBlockLen {
				t.Fatalf("bad error offset: %v", err)
			}
			break
		}
		if rec.CapLen != len(rec.Data) || rec.CapLen > MaxSnapLen || rec.CapLen < 0 {
			t.Fatalf("caplen %d, len(data) %d", rec.CapLen, len(rec.Data))
		}
		if rec.Interface < 0 || rec.Interface >= len(r.Interfaces()) {
			t.Fatalf("interface %d of %d", rec.Interface, len(r.Interfaces()))
		}
		if len(recs) < 64 {
			o := ownedRecord{Record: rec, comment: string(rec.Comment)}
			o.Data = append([]byte(nil), rec.Data...)
			o.Comment = nil
			recs = append(recs, o)
		}
	}
	roundTrip(t, recs)
}

// roundTrip writes recs as pcapng (the container that can hold all their
// metadata) and checks they read back identically.
func roundTrip(t *testing.T, recs []ownedRecord) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, WriterOptions{Format: FormatPcapNG, LinkType: LinkTypeEthernet})
	if err != nil {
		t.Fatal(err)
	}
	ifByLink := map[LinkType]int{LinkTypeEthernet: 0}
	var want []ownedRecord
	for _, rc := range recs {
		if rc.Timestamp < 0 || rc.LinkType > 0xffff {
			continue // not representable: the writer must refuse it
		}
		id, ok := ifByLink[rc.LinkType]
		if !ok {
			if id, err = w.AddInterface(Interface{LinkType: rc.LinkType}); err != nil {
				t.Fatal(err)
			}
			ifByLink[rc.LinkType] = id
		}
		if err := w.WritePacketOpts(rc.Timestamp, rc.Data, rc.OrigLen,
			PacketOptions{Interface: id, Flags: rc.Flags, Comment: rc.comment}); err != nil {
			t.Fatalf("rewriting %+v: %v", rc.Record, err)
		}
		rc.Interface = id
		rc.OrigLen = max(rc.OrigLen, rc.CapLen)
		want = append(want, rc)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, r := readAll(t, buf.Bytes())
	r.Close()
	if len(got) != len(want) {
		t.Fatalf("round trip: %d records, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Timestamp != w.Timestamp || g.CapLen != w.CapLen || g.OrigLen != w.OrigLen || g.Interface != w.Interface ||
			g.LinkType != w.LinkType || g.Flags != w.Flags || g.comment != w.comment || !bytes.Equal(g.Data, w.Data) {
			t.Fatalf("round trip record %d:\n got %+v %q\nwant %+v %q", i, g.Record, g.comment, w.Record, w.comment)
		}
	}
}
