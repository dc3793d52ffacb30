package pcap

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/klauspost/compress/zstd"
)

type testPkt struct {
	ts   int64
	data []byte
	orig int
}

func testPackets(n int) []testPkt {
	pk := make([]testPkt, n)
	ts := int64(1_700_000_000_000_000_000)
	for i := range pk {
		ts += int64(i)*1_000_003 + 7
		size := 60 + (i*97)%1400
		if i%7 == 0 {
			size = 9000 // longer than the snap length used below
		}
		d := make([]byte, size)
		for j := range d {
			d[j] = byte(i*31 + j)
		}
		orig := size
		if i%5 == 0 {
			orig = size + 100 // already truncated upstream
		}
		pk[i] = testPkt{ts, d, orig}
	}
	return pk
}

func TestRoundTrip(t *testing.T) {
	const snap = 2048
	pkts := testPackets(300)
	for _, format := range []Format{FormatPcap, FormatPcapNG} {
		for _, micro := range []bool{false, true} {
			for _, comp := range []Compression{CompressNone, CompressZstd} {
				name := fmt.Sprintf("%v/micro=%v/zstd=%v", format, micro, comp == CompressZstd)
				t.Run(name, func(t *testing.T) {
					var buf bytes.Buffer
					w, err := NewWriter(&buf, WriterOptions{Format: format, LinkType: LinkTypeEthernet,
						SnapLen: snap, Microsecond: micro, Compress: comp})
					if err != nil {
						t.Fatal(err)
					}
					for _, p := range pkts {
						if err := w.WritePacket(p.ts, p.data, p.orig); err != nil {
							t.Fatal(err)
						}
					}
					if err := w.Close(); err != nil {
						t.Fatal(err)
					}
					if comp == CompressZstd && binary.LittleEndian.Uint32(buf.Bytes()) != magicZstd {
						t.Fatalf("not zstd: % x", buf.Bytes()[:4])
					}
					recs, r := readAll(t, buf.Bytes())
					defer r.Close()
					if r.Format() != format || r.Compressed() != (comp == CompressZstd) {
						t.Errorf("detected %v compressed=%v", r.Format(), r.Compressed())
					}
					if r.LinkType() != LinkTypeEthernet || r.SnapLen() != snap {
						t.Errorf("link %v snap %d", r.LinkType(), r.SnapLen())
					}
					if format == FormatPcap && r.Nanosecond() == micro {
						t.Errorf("Nanosecond() = %v", r.Nanosecond())
					}
					if len(recs) != len(pkts) {
						t.Fatalf("read %d records, want %d", len(recs), len(pkts))
					}
					for i, p := range pkts {
						rec := recs[i]
						wantTS := p.ts
						if micro {
							wantTS -= wantTS % 1000
						}
						wantCap := min(len(p.data), snap)
						if rec.Timestamp != wantTS || rec.CapLen != wantCap || rec.OrigLen != p.orig ||
							!bytes.Equal(rec.Data, p.data[:wantCap]) || rec.LinkType != LinkTypeEthernet {
							t.Fatalf("record %d: ts %d cap %d orig %d, want ts %d cap %d orig %d",
								i, rec.Timestamp, rec.CapLen, rec.OrigLen, wantTS, wantCap, p.orig)
						}
					}
				})
			}
		}
	}
}

func TestReadBigEndianPcap(t *testing.T) {
	d1 := udpFrame(1, 2, []byte("hello"))
	d2 := udpFrame(3, 4, []byte("world!!"))
	for _, nano := range []bool{false, true} {
		for _, bo := range []byteOrder{binary.BigEndian, binary.LittleEndian} {
			t.Run(fmt.Sprintf("%v/nano=%v", bo, nano), func(t *testing.T) {
				file := classicFile(bo, nano, 65535, uint32(LinkTypeEthernet),
					classicRec{1700000000, 123456, uint32(len(d1)), d1},
					classicRec{1700000001, 999999, 1500, d2})
				// Bytes pinned by hand for the big-endian header, so a bug
				// shared by classicFile and the reader cannot hide.
				if bo == binary.BigEndian && !nano && !bytes.Equal(file[:24],
					[]byte{0xa1, 0xb2, 0xc3, 0xd4, 0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 1}) {
					t.Fatalf("header % x", file[:24])
				}
				recs, r := readAll(t, file)
				if r.Nanosecond() != nano || r.LinkType() != LinkTypeEthernet || r.SnapLen() != 65535 {
					t.Fatalf("header parsed as nano=%v link=%v snap=%d", r.Nanosecond(), r.LinkType(), r.SnapLen())
				}
				unit := int64(1000)
				if nano {
					unit = 1
				}
				want := []Record{
					{Timestamp: 1700000000e9 + 123456*unit, CapLen: len(d1), OrigLen: len(d1), LinkType: 1, Data: d1},
					{Timestamp: 1700000001e9 + 999999*unit, CapLen: len(d2), OrigLen: 1500, LinkType: 1, Data: d2},
				}
				if len(recs) != 2 {
					t.Fatalf("%d records", len(recs))
				}
				for i := range want {
					g, w := recs[i].Record, want[i]
					if g.Timestamp != w.Timestamp || g.CapLen != w.CapLen || g.OrigLen != w.OrigLen || !bytes.Equal(g.Data, w.Data) {
						t.Errorf("record %d = %+v, want %+v", i, g, w)
					}
				}
			})
		}
	}
}

// TestReadPcapNGHandmade covers what our writer never produces: both byte
// orders, several sections, decimal and binary if_tsresol, if_tsoffset,
// SPB/OPB, skipped blocks and options.
func TestReadPcapNGHandmade(t *testing.T) {
	pk := func(i int) []byte {
		return udpFrame(uint16(1000+i), uint16(2000+i), bytes.Repeat([]byte{byte(i)}, 40+i))
	}
	var file []byte
	var want []ownedRecord
	for si, bo := range []byteOrder{binary.LittleEndian, binary.BigEndian} {
		g := &ngBuilder{bo: bo}
		g.shb(g.opt(optShbUserAp, []byte("handmade")), g.opt(optComment, []byte("section")))
		// 0: microseconds (no if_tsresol), Ethernet
		g.idb(1, 0, g.opt(optIfName, []byte("eth0\x00")))
		// 1: nanoseconds with a 10 s offset, raw IP, snaplen 64
		g.idb(101, 64, g.opt(optIfTsresol, []byte{9}), g.opt(optIfTsoff, g.u64(10)), g.opt(optIfName, []byte("mlx5_0")))
		// 2: 2^-20 s (binary fraction)
		g.idb(1, 0, g.opt(optIfTsresol, []byte{0x80 | 20}))
		// 3: milliseconds
		g.idb(1, 0, g.opt(optIfTsresol, []byte{3}))
		// unknown/skipped blocks: NRB, ISB, custom
		g.block(4, []byte{1, 0, 4, 0, 10, 0, 0, 1, 0, 0, 0, 0})
		g.block(5, g.u32(0), g.u32(0), g.u32(0))
		g.block(0x00000bad, g.u32(32473), []byte("custom data"))

		base := uint64(1_700_000_000)
		p0, p1, p2, p3, p4, p5 := pk(si*10+1), pk(si*10+2), pk(si*10+3), pk(si*10+4), pk(si*10+5), pk(si*10+6)
		g.epb(0, base*1e6+123456, p0, uint32(len(p0)), g.opt(optEpbFlags, g.u32(1)), g.opt(optComment, []byte("first")))
		g.epb(1, base*1e9+987654321, p1[:64], uint32(len(p1)))
		// 0.5 s + 2^-20 s
		g.epb(2, base<<20|1<<19|1, p2, uint32(len(p2)))
		g.epb(3, base*1e3+42, p3, uint32(len(p3)))
		g.opb(1, base*1e9+5, p4[:40], uint32(len(p4)), g.opt(optEpbFlags, g.u32(2)))
		g.spb(uint32(len(p5)), p5) // uses interface 0's snaplen (0: no limit)
		file = append(file, g.out...)
		want = append(want,
			ownedRecord{Record{Timestamp: int64(base)*1e9 + 123456000, CapLen: len(p0), OrigLen: len(p0), Interface: 0, LinkType: 1, Flags: 1, Data: p0}, "first"},
			ownedRecord{Record{Timestamp: int64(base+10)*1e9 + 987654321, CapLen: 64, OrigLen: len(p1), Interface: 1, LinkType: 101, Data: p1[:64]}, ""},
			// 2^-20 s = 953.67 ns, truncated to 953
			ownedRecord{Record{Timestamp: int64(base)*1e9 + 500_000_000 + 953, CapLen: len(p2), OrigLen: len(p2), Interface: 2, LinkType: 1, Data: p2}, ""},
			ownedRecord{Record{Timestamp: int64(base)*1e9 + 42_000_000, CapLen: len(p3), OrigLen: len(p3), Interface: 3, LinkType: 1, Data: p3}, ""},
			ownedRecord{Record{Timestamp: int64(base+10)*1e9 + 5, CapLen: 40, OrigLen: len(p4), Interface: 1, LinkType: 101, Flags: 2, Data: p4[:40]}, ""},
			ownedRecord{Record{Timestamp: 0, CapLen: len(p5), OrigLen: len(p5), Interface: 0, LinkType: 1, Data: p5}, ""},
		)
	}
	recs, r := readAll(t, file)
	if r.Sections() != 2 || len(r.Interfaces()) != 4 || r.Interfaces()[1].Name != "mlx5_0" || r.Interfaces()[1].TsOffset != 10 {
		t.Fatalf("sections %d interfaces %+v", r.Sections(), r.Interfaces())
	}
	if len(recs) != len(want) {
		t.Fatalf("%d records, want %d", len(recs), len(want))
	}
	for i := range want {
		g, w := recs[i], want[i]
		if g.Timestamp != w.Timestamp || g.CapLen != w.CapLen || g.OrigLen != w.OrigLen || g.Interface != w.Interface ||
			g.LinkType != w.LinkType || g.Flags != w.Flags || g.comment != w.comment || !bytes.Equal(g.Data, w.Data) {
			t.Errorf("record %d:\n got %+v %q\nwant %+v %q", i, g.Record, g.comment, w.Record, w.comment)
		}
	}
}

func TestTsConv(t *testing.T) {
	cases := []struct {
		resol uint8
		off   int64
		ts    uint64
		want  int64
	}{
		{6, 0, 1_500_000, 1_500_000_000},
		{9, 0, 123, 123},
		{0, 0, 7, 7e9},
		{12, 0, 1_000_000_123_456, 1_000_000_123},
		{30, 0, ^uint64(0), 0}, // 10^-30 s units: everything rounds to 0
		{0x80, 0, 3, 3e9},
		{0x80 | 1, 0, 3, 1_500_000_000},
		{0x80 | 32, 0, 1<<32 | 1<<31, 1_500_000_000},
		{0x80 | 64, 0, 1 << 63, 500_000_000},
		{0x80 | 127, 0, ^uint64(0), 0},
		{9, -5, 5e9, 0},
	}
	for _, c := range cases {
		conv := newTsConv(c.resol, c.off)
		if got := conv.nanos(c.ts); got != c.want {
			t.Errorf("resol %#x off %d ts %d: got %d want %d", c.resol, c.off, c.ts, got, c.want)
		}
	}
}

func TestWriterPcapNGInterfacesAndOptions(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, WriterOptions{Format: FormatPcapNG, LinkType: LinkTypeEthernet, SnapLen: 128,
		InterfaceName: "mlx5_0", Application: "rdma-appliance test"})
	if err != nil {
		t.Fatal(err)
	}
	id, err := w.AddInterface(Interface{LinkType: LinkTypeRaw, SnapLen: 32, Name: "mirror1"})
	if err != nil || id != 1 {
		t.Fatalf("AddInterface = %d, %v", id, err)
	}
	long := bytes.Repeat([]byte{0xab}, 300)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.WritePacketOpts(1e18+1, long, 0, PacketOptions{Interface: 1, Flags: 0x1, Comment: "odd-len"}))
	must(w.WritePacketOpts(1e18+2, long[:7], 9, PacketOptions{Comment: "abcd"}))
	must(w.WritePacket(1e18+3, long, 400))
	if err := w.WritePacketOpts(1e18, long, 0, PacketOptions{Interface: 2}); !errors.Is(err, ErrBadInterface) {
		t.Errorf("unknown interface: %v", err)
	}
	if err := w.WritePacket(-1, long, 0); !errors.Is(err, ErrTimestampRange) {
		t.Errorf("negative ts: %v", err)
	}
	must(w.Close())
	recs, r := readAll(t, buf.Bytes())
	ifs := r.Interfaces()
	if len(ifs) != 2 || ifs[0].Name != "mlx5_0" || ifs[0].TsResol != 9 || ifs[1].LinkType != LinkTypeRaw || ifs[1].SnapLen != 32 {
		t.Fatalf("interfaces %+v", ifs)
	}
	if len(recs) != 3 {
		t.Fatalf("%d records", len(recs))
	}
	chk := func(i int, ts int64, capLen, orig, ifc int, flags uint32, comment string) {
		t.Helper()
		g := recs[i]
		if g.Timestamp != ts || g.CapLen != capLen || g.OrigLen != orig || g.Interface != ifc || g.Flags != flags || g.comment != comment ||
			!bytes.Equal(g.Data, long[:capLen]) {
			t.Errorf("record %d: %+v %q", i, g.Record, g.comment)
		}
	}
	chk(0, 1e18+1, 32, 300, 1, 1, "odd-len")
	chk(1, 1e18+2, 7, 9, 0, 0, "abcd")
	chk(2, 1e18+3, 128, 400, 0, 0, "")

	// Options are pcapng-only.
	pw, _ := NewWriter(io.Discard, WriterOptions{LinkType: LinkTypeEthernet})
	if err := pw.WritePacketOpts(0, long, 0, PacketOptions{Comment: "x"}); err == nil {
		t.Error("comment accepted by pcap writer")
	}
	if _, err := pw.AddInterface(Interface{}); err == nil {
		t.Error("AddInterface accepted by pcap writer")
	}
	if err := pw.WritePacket(1<<32*1e9, long, 0); !errors.Is(err, ErrTimestampRange) {
		t.Errorf("ts beyond 2106 in pcap: %v", err)
	}
}

func TestWriterOptionErrors(t *testing.T) {
	for _, o := range []WriterOptions{
		{Nanosecond: true, Microsecond: true},
		{SnapLen: MaxSnapLen + 1},
		{SnapLen: -1},
		{Format: 7},
		{Compress: 9},
		{Format: FormatPcapNG, LinkType: 70000},
	} {
		if _, err := NewWriter(io.Discard, o); err == nil {
			t.Errorf("NewWriter(%+v) succeeded", o)
		}
	}
}

// TestGolden pins the exact bytes of a small pcap and pcapng file.
func TestGolden(t *testing.T) {
	data := []byte{0xde, 0xad, 0xbe, 0xef, 0x01}
	const ts = 1_700_000_000_123_456_789 // 0x6553f100 s, 0x075bcd15 ns
	cases := []struct {
		name string
		opts WriterOptions
		want string
	}{
		{"pcap-ns", WriterOptions{LinkType: LinkTypeEthernet, SnapLen: 65535},
			// global header: magic a1b23c4d (LE), v2.4, zone 0, sigfigs 0, snaplen 65535, linktype 1
			"4d3cb2a1 0200 0400 00000000 00000000 ffff0000 01000000" +
				// record: sec, nsec, caplen 5, origlen 60, data
				"00f15365 15cd5b07 05000000 3c000000 deadbeef01"},
		{"pcap-us", WriterOptions{LinkType: LinkTypeEthernet, SnapLen: 65535, Microsecond: true},
			"d4c3b2a1 0200 0400 00000000 00000000 ffff0000 01000000" +
				"00f15365 40e20100 05000000 3c000000 deadbeef01"}, // 123456 us
		{"pcapng", WriterOptions{Format: FormatPcapNG, LinkType: LinkTypeEthernet, SnapLen: 65535, InterfaceName: "eth0"},
			// SHB: type, len 28, BOM, v1.0, section length -1, len
			"0a0d0d0a 1c000000 4d3c2b1a 0100 0000 ffffffffffffffff 1c000000" +
				// IDB: type 1, len 40, linktype 1, reserved, snaplen 65535,
				// if_name "eth0", if_tsresol 9 (+3 pad), endofopt, len
				"01000000 28000000 0100 0000 ffff0000 0200 0400 65746830 0900 0100 09000000 00000000 28000000" +
				// EPB: type 6, len 40, if 0, ts high/low (ns), caplen 5, origlen 60, data+pad, len
				"06000000 28000000 00000000 fe9c9717 15cd853d 05000000 3c000000 deadbeef01000000 28000000"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			w, err := NewWriter(&buf, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.WritePacket(ts, data, 60); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			want, err := hex.DecodeString(strings.ReplaceAll(c.want, " ", ""))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf.Bytes(), want) {
				t.Errorf("got\n%x\nwant\n%x", buf.Bytes(), want)
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	eth := udpFrame(1, 2, []byte("x"))
	good := classicFile(binary.LittleEndian, true, 65535, 1, classicRec{1, 2, 60, eth})
	ng := func(build func(g *ngBuilder)) []byte {
		g := &ngBuilder{bo: binary.LittleEndian}
		build(g)
		return g.out
	}
	goodNG := ng(func(g *ngBuilder) { g.shb(); g.idb(1, 0); g.epb(0, 1, eth, 60) })
	epbAt := len(goodNG) - (32 + len(padded(eth)))
	mutate := func(b []byte, off int, v uint32) []byte {
		c := append([]byte(nil), b...)
		binary.LittleEndian.PutUint32(c[off:], v)
		return c
	}
	var zbuf bytes.Buffer
	zw, _ := zstd.NewWriter(&zbuf)
	zw.Write(good)
	zw.Close()
	zgood := zbuf.Bytes()

	cases := []struct {
		name   string
		in     []byte
		want   error
		offset int64 // -1: don't check
	}{
		{"empty", nil, ErrTruncated, 0},
		{"short magic", []byte{0xd4, 0xc3}, ErrTruncated, 0},
		{"bad magic", []byte("GIF89a............................"), ErrBadMagic, 0},
		{"short pcap header", good[:20], ErrTruncated, 0},
		{"pcap version", mutate(good, 4, 0x00040003), ErrBadVersion, 0},
		{"short record header", good[:24+10], ErrTruncated, 24},
		{"short record data", good[:len(good)-1], ErrTruncated, 24},
		{"caplen > snaplen", mutate(good, 16, 32), ErrBadLength, 24},
		{"caplen > max", mutate(mutate(good, 16, 0), 24+8, 0x7fffffff), ErrBadLength, 24},
		{"caplen huge", mutate(mutate(good, 16, 0), 24+8, 0xffffffff), ErrBadLength, 24},
		{"ng bad BOM", mutate(goodNG, 8, 0x12345678), ErrBadMagic, 0},
		{"ng shb short", goodNG[:10], ErrTruncated, 0},
		{"ng shb len", mutate(goodNG, 4, 13), ErrBadLength, 0},
		{"ng shb huge", mutate(goodNG, 4, 0xfffffff0), ErrBadLength, 0},
		{"ng version", mutate(goodNG, 12, 2), ErrBadVersion, 0},
		{"ng shb trailer", mutate(goodNG, 24, 99), ErrBadLength, 0},
		{"ng epb trailer", mutate(goodNG, len(goodNG)-4, 99), ErrBadLength, int64(epbAt)},
		{"ng epb len not /4", mutate(goodNG, epbAt+4, 33), ErrBadLength, int64(epbAt)},
		{"ng epb len tiny", mutate(goodNG, epbAt+4, 8), ErrBadLength, int64(epbAt)},
		{"ng epb len huge", mutate(goodNG, epbAt+4, 0xfffffffc), ErrBadLength, int64(epbAt)},
		{"ng epb caplen overruns", mutate(goodNG, epbAt+20, 1000), ErrBadLength, int64(epbAt)},
		{"ng epb caplen huge", mutate(goodNG, epbAt+20, 0xffffffff), ErrBadLength, int64(epbAt)},
		{"ng epb bad interface", mutate(goodNG, epbAt+8, 1), ErrBadInterface, int64(epbAt)},
		{"ng truncated epb", goodNG[:len(goodNG)-3], ErrTruncated, int64(epbAt)},
		{"ng truncated block header", goodNG[:epbAt+5], ErrTruncated, int64(epbAt)},
		{"ng option overrun", ng(func(g *ngBuilder) {
			g.shb()
			g.idb(1, 0, []byte{2, 0, 0xff, 0x00}) // if_name of 255 bytes in a tiny block
		}), ErrBadLength, 28 + 16},
		{"ng caplen > snaplen", ng(func(g *ngBuilder) { g.shb(); g.idb(1, 16); g.epb(0, 1, eth, 60) }), ErrBadLength, 28 + 20},
		{"ng spb without idb", ng(func(g *ngBuilder) { g.shb(); g.spb(60, eth) }), ErrBadInterface, 28},
		{"ng skipped block truncated", ng(func(g *ngBuilder) {
			g.shb()
			g.out = append(g.out, 0xad, 0x0b, 0, 0, 0, 0, 0, 0x10) // custom block claiming 256 MiB
		}), ErrTruncated, 28},
		{"ng skipped block trailer", mutate(ng(func(g *ngBuilder) { g.shb(); g.block(4, make([]byte, 8)) }), 28+16, 5), ErrBadLength, 28},
		{"nested zstd", zstdBytes(zstdBytes(good)), ErrBadMagic, 0},
		{"zstd truncated", zgood[:len(zgood)-5], ErrTruncated, -1},
		{"zstd corrupt", mutate(zgood, 8, 0xffffffff), ErrCorrupt, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := readErr(c.in)
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("%v is not a *FormatError", err)
			}
			if c.offset >= 0 && fe.Offset != c.offset {
				t.Errorf("offset %d, want %d (%v)", fe.Offset, c.offset, err)
			}
		})
	}
}

func zstdBytes(b []byte) []byte {
	var buf bytes.Buffer
	zw, _ := zstd.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// readErr reads the whole input and returns the first error other than
// io.EOF (nil if the input is fine).
func readErr(in []byte) error {
	r, err := NewReader(bytes.NewReader(in))
	if err != nil {
		return err
	}
	defer r.Close()
	var rec Record
	for {
		if err := r.Next(&rec); err != nil {
			if err == io.EOF {
				return nil
			}
			// Errors must be sticky.
			if err2 := r.Next(&rec); err2 != err {
				return fmt.Errorf("non-sticky error: %v then %v", err, err2)
			}
			return err
		}
	}
}

func TestReadPacketCopies(t *testing.T) {
	var buf bytes.Buffer
	w, _ := NewWriter(&buf, WriterOptions{LinkType: LinkTypeEthernet})
	w.WritePacket(1, []byte("first packet"), 0)
	w.WritePacket(2, []byte("second"), 0)
	w.Close()
	r, err := NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	mine := make([]byte, 0, 64)
	rec, d1, err := r.ReadPacket(mine)
	if err != nil || string(d1) != "first packet" || string(rec.Data) != "first packet" || &d1[0] != &mine[:1][0] {
		t.Fatalf("%v %q", err, d1)
	}
	kept := d1
	_, d2, err := r.ReadPacket(nil)
	if err != nil || string(d2) != "second" || string(kept) != "first packet" {
		t.Fatalf("%v %q %q", err, d2, kept)
	}
	if _, _, err := r.ReadPacket(nil); err != io.EOF {
		t.Fatalf("at end: %v", err)
	}
	r.Close()
	if err := r.Next(&rec); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

func TestCreateOpen(t *testing.T) {
	dir := t.TempDir()
	for _, comp := range []Compression{CompressNone, CompressZstd} {
		path := filepath.Join(dir, fmt.Sprintf("trace%d.pcapng", comp))
		w, err := Create(path, WriterOptions{Format: FormatPcapNG, LinkType: LinkTypeEthernet, Compress: comp})
		if err != nil {
			t.Fatal(err)
		}
		gen := newRoceGen(128)
		const n = 20000
		for range n {
			ts, d, orig := gen.next()
			if err := w.WritePacket(ts, d, orig); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if err := w.WritePacket(1, nil, 0); !errors.Is(err, ErrClosed) {
			t.Fatalf("write after close: %v", err)
		}
		r, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		var rec Record
		count := 0
		for r.Next(&rec) == nil {
			count++
		}
		if count != n || r.Compressed() != (comp == CompressZstd) {
			t.Fatalf("read %d packets compressed=%v", count, r.Compressed())
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Open(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open missing: %v", err)
	}
}

// TestFlushMakesDataReadable checks that a reader of a live trace sees every
// packet written before Flush, including through zstd.
func TestFlushMakesDataReadable(t *testing.T) {
	for _, comp := range []Compression{CompressNone, CompressZstd} {
		var buf bytes.Buffer
		w, _ := NewWriter(&buf, WriterOptions{LinkType: LinkTypeEthernet, Compress: comp})
		for i := range 10 {
			w.WritePacket(int64(i), []byte("pkt"), 0)
		}
		if buf.Len() != 0 {
			t.Fatalf("wrote %d bytes before Flush", buf.Len())
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		r, err := NewReader(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		var rec Record
		n := 0
		for {
			err := r.Next(&rec)
			if err != nil {
				// An unfinished zstd frame ends as truncated, a plain
				// trace cleanly; either way all ten packets came first.
				if comp == CompressNone && err != io.EOF {
					t.Fatal(err)
				}
				break
			}
			n++
		}
		if n != 10 {
			t.Fatalf("compress=%v: read %d of 10 flushed packets", comp, n)
		}
		w.Close()
	}
}

type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errors.New("disk full")
	}
	f.n--
	return len(p), nil
}

func TestWriterStickyError(t *testing.T) {
	w, _ := NewWriter(&failWriter{n: 1}, WriterOptions{LinkType: LinkTypeEthernet})
	big := make([]byte, 60000)
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		err = w.WritePacket(int64(i), big, 0)
	}
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("got %v", err)
	}
	if err2 := w.WritePacket(0, big, 0); err2 != err {
		t.Fatalf("not sticky: %v", err2)
	}
	if err := w.Close(); err == nil {
		t.Fatal("Close hid the write error")
	}
}

// TestReaderShortReads feeds traces through readers that return one byte,
// half the request, or data together with io.EOF: the buffering must not
// depend on how the source chunks its data.
func TestReaderShortReads(t *testing.T) {
	pkts := testPackets(50)
	for _, format := range []Format{FormatPcap, FormatPcapNG} {
		for _, comp := range []Compression{CompressNone, CompressZstd} {
			var buf bytes.Buffer
			w, _ := NewWriter(&buf, WriterOptions{Format: format, LinkType: LinkTypeEthernet, Compress: comp})
			for _, p := range pkts {
				w.WritePacket(p.ts, p.data, p.orig)
			}
			w.Close()
			for name, wrap := range map[string]func(io.Reader) io.Reader{
				"one": iotest.OneByteReader, "half": iotest.HalfReader, "dataerr": iotest.DataErrReader,
			} {
				r, err := NewReader(wrap(bytes.NewReader(buf.Bytes())))
				if err != nil {
					t.Fatalf("%v/%v/%s: %v", format, comp, name, err)
				}
				var rec Record
				n := 0
				for ; ; n++ {
					err := r.Next(&rec)
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatalf("%v/%v/%s: %v", format, comp, name, err)
					}
					if !bytes.Equal(rec.Data, pkts[n].data) {
						t.Fatalf("%v/%v/%s: packet %d differs", format, comp, name, n)
					}
				}
				if n != len(pkts) {
					t.Fatalf("%v/%v/%s: %d packets", format, comp, name, n)
				}
				r.Close()
			}
		}
	}
}

// TestLargeBlocks covers the buffer growing to the largest packet we accept
// and a skipped block far larger than the buffer may ever grow.
func TestLargeBlocks(t *testing.T) {
	big := make([]byte, MaxSnapLen)
	for i := range big {
		big[i] = byte(i * 7)
	}
	g := &ngBuilder{bo: binary.LittleEndian}
	g.shb()
	g.idb(1, 0)
	g.block(0x40000bad, g.u32(1), make([]byte, 3<<20)) // 3 MiB custom block: skipped
	g.epb(0, 1, big, MaxSnapLen+10, g.opt(optComment, bytes.Repeat([]byte("c"), 60000)))
	g.epb(0, 2, big[:10], 10)
	recs, _ := readAll(t, g.out)
	if len(recs) != 2 || !bytes.Equal(recs[0].Data, big) || len(recs[0].comment) != 60000 || recs[1].CapLen != 10 {
		t.Fatalf("got %d records", len(recs))
	}

	var buf bytes.Buffer
	w, _ := NewWriter(&buf, WriterOptions{Format: FormatPcapNG, LinkType: LinkTypeEthernet, BufferSize: 1})
	if err := w.WritePacketOpts(5, big, 0, PacketOptions{Comment: strings.Repeat("x", 65535)}); err != nil {
		t.Fatal(err)
	}
	if err := w.WritePacketOpts(5, big, 0, PacketOptions{Comment: strings.Repeat("x", 65536)}); !errors.Is(err, ErrBadLength) {
		t.Fatalf("oversized comment: %v", err)
	}
	w.WritePacket(6, append(big, 1, 2, 3), 0) // truncated to the snap length
	w.Close()
	recs, _ = readAll(t, buf.Bytes())
	if len(recs) != 2 || len(recs[0].comment) != 65535 || recs[1].CapLen != MaxSnapLen || recs[1].OrigLen != MaxSnapLen+3 {
		t.Fatalf("writer round trip: %d records", len(recs))
	}
}

// TestWritePacketFastPath checks WritePacket's shortcut for pcapng records
// against the general path (WritePacketOpts without options), byte for
// byte: every length around the padding and the snap length, nanosecond
// and microsecond files, and a buffer reused after flushes so stale bytes
// would show in the padding.
func TestWritePacketFastPath(t *testing.T) {
	for _, c := range []struct {
		format Format
		micro  bool
	}{{FormatPcapNG, false}, {FormatPcapNG, true}, {FormatPcap, false}, {FormatPcap, true}} {
		micro := c.micro
		var fast, slow bytes.Buffer
		opts := WriterOptions{Format: c.format, SnapLen: 64, Microsecond: micro, FlushSize: 4096}
		wf, err := NewWriter(&fast, opts)
		if err != nil {
			t.Fatal(err)
		}
		ws, err := NewWriter(&slow, opts)
		if err != nil {
			t.Fatal(err)
		}
		data := make([]byte, 80)
		for round := 0; round < 200; round++ {
			for n := 0; n <= len(data); n++ {
				for i := range data[:n] {
					data[i] = byte(0xa0 + i + round)
				}
				ts := int64(1_700_000_000_123_456_789 + round*1000 + n)
				if err := wf.WritePacket(ts, data[:n], n+round%3); err != nil {
					t.Fatal(err)
				}
				if err := ws.WritePacketOpts(ts, data[:n], n+round%3, PacketOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := wf.Close(); err != nil {
			t.Fatal(err)
		}
		if err := ws.Close(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(fast.Bytes(), slow.Bytes()) {
			t.Fatalf("format %d micro=%v: WritePacket wrote %d bytes differing from the general path's %d", c.format, micro,
				fast.Len(), slow.Len())
		}
	}
}
