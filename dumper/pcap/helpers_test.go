package pcap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
)

// udpFrame builds an Ethernet/IPv4/UDP frame by hand (10.0.0.1:srcPort ->
// 10.0.0.2:dstPort). The UDP checksum is 0, which IPv4 allows.
func udpFrame(srcPort, dstPort uint16, payload []byte) []byte {
	f := make([]byte, 14+20+8+len(payload))
	copy(f[0:6], []byte{0x02, 0, 0, 0, 0, 0x02})
	copy(f[6:12], []byte{0x02, 0, 0, 0, 0, 0x01})
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:34]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+8+len(payload)))
	binary.BigEndian.PutUint16(ip[6:], 0x4000) // DF
	ip[8] = 64
	ip[9] = 17
	copy(ip[12:16], []byte{10, 0, 0, 1})
	copy(ip[16:20], []byte{10, 0, 0, 2})
	binary.BigEndian.PutUint16(ip[10:], ipChecksum(ip))
	udp := f[34:42]
	binary.BigEndian.PutUint16(udp[0:], srcPort)
	binary.BigEndian.PutUint16(udp[2:], dstPort)
	binary.BigEndian.PutUint16(udp[4:], uint16(8+len(payload)))
	copy(f[42:], payload)
	return f
}

func ipChecksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// roceGen produces RoCEv2-looking traffic: Ethernet/IPv4/UDP(4791)/BTH
// (+RETH on first packets of a message), snapped to snap bytes, with
// per-QP incrementing PSNs, incrementing IP IDs, a flow-hashed UDP source
// port, nanosecond timestamps advancing by ~100 ns with jitter, and a
// payload that is half drawn from a shared 64 KiB pool (data that recurs,
// like a re-sent buffer) and half fresh pseudo-random bytes. The mix gives
// zstd realistic work: highly repetitive headers, partly repetitive data.
type roceGen struct {
	rng   uint64
	ts    int64
	ipID  uint16
	psn   [64]uint32
	pool  []byte
	frame []byte
	snap  int
}

func newRoceGen(snap int) *roceGen {
	g := &roceGen{rng: 0x9e3779b97f4a7c15, ts: 1_700_000_000_123_456_789, snap: snap}
	g.pool = make([]byte, 64<<10)
	for i := range g.pool {
		g.pool[i] = byte(g.rand())
	}
	g.frame = make([]byte, max(snap, 128))
	return g
}

func (g *roceGen) rand() uint64 { // xorshift64*
	g.rng ^= g.rng >> 12
	g.rng ^= g.rng << 25
	g.rng ^= g.rng >> 27
	return g.rng * 2685821657736338717
}

// next returns the packet's timestamp, its captured bytes (valid until the
// next call) and its wire length.
func (g *roceGen) next() (int64, []byte, int) {
	r := g.rand()
	g.ts += 90 + int64(r&63)
	qp := int(r>>8) & 63
	first := g.psn[qp]%4 == 0 // 16 KiB messages of four 4 KiB packets
	f := g.frame
	copy(f[0:12], []byte{0x0c, 0x42, 0xa1, 0, 0, byte(qp), 0x0c, 0x42, 0xa1, 0, 1, byte(qp)})
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	const payload = 4096
	hdrs := 20 + 8 + 12 + 4 // IP, UDP, BTH, ICRC
	if first {
		hdrs += 16
	}
	ip := f[14:34]
	ip[0], ip[1] = 0x45, 0x02 // ECN-capable, as RoCE with DCQCN
	binary.BigEndian.PutUint16(ip[2:], uint16(hdrs+payload))
	g.ipID++
	binary.BigEndian.PutUint16(ip[4:], g.ipID)
	binary.BigEndian.PutUint16(ip[6:], 0x4000)
	ip[8], ip[9] = 64, 17
	binary.BigEndian.PutUint16(ip[10:], 0)
	copy(ip[12:16], []byte{192, 168, 10, byte(qp)})
	copy(ip[16:20], []byte{192, 168, 20, byte(qp >> 1)})
	binary.BigEndian.PutUint16(ip[10:], ipChecksum(ip))
	udp := f[34:42]
	binary.BigEndian.PutUint16(udp[0:], 49152+uint16(qp*2654435761>>20)&0x3fff)
	binary.BigEndian.PutUint16(udp[2:], 4791)
	binary.BigEndian.PutUint16(udp[4:], uint16(hdrs-20+payload))
	binary.BigEndian.PutUint16(udp[6:], 0)
	bth := f[42:54]
	if first {
		bth[0] = 0x06 // RDMA WRITE First
	} else {
		bth[0] = 0x07 // RDMA WRITE Middle
	}
	bth[1] = 0x40
	binary.BigEndian.PutUint16(bth[2:], 0xffff)
	binary.BigEndian.PutUint32(bth[4:], uint32(0x000100+qp)) // dest QP
	binary.BigEndian.PutUint32(bth[8:], g.psn[qp]&0xffffff)
	g.psn[qp]++
	p := 54
	if first {
		binary.BigEndian.PutUint64(f[54:], 0x7f0000000000+uint64(g.psn[qp])*payload)
		binary.BigEndian.PutUint32(f[62:], 0x1234)
		binary.BigEndian.PutUint32(f[66:], 4*payload)
		p = 70
	}
	rest := f[p:]
	if r>>40&1 == 0 {
		off := int(r>>16) % (len(g.pool) - len(rest))
		copy(rest, g.pool[off:])
	} else {
		for i := 0; i < len(rest); i += 8 {
			var w [8]byte
			binary.LittleEndian.PutUint64(w[:], g.rand())
			copy(rest[i:], w[:])
		}
	}
	return g.ts, f[:min(g.snap, len(f))], 14 + hdrs + payload
}

// ngBuilder crafts pcapng files by hand, in either byte order, so that the
// reader is tested against bytes it did not produce itself.
// byteOrder is what binary.LittleEndian and binary.BigEndian both provide.
type byteOrder interface {
	binary.ByteOrder
	binary.AppendByteOrder
}

type ngBuilder struct {
	bo  byteOrder
	out []byte
}

func (g *ngBuilder) u16(v uint16) []byte { return g.bo.AppendUint16(nil, v) }
func (g *ngBuilder) u32(v uint32) []byte { return g.bo.AppendUint32(nil, v) }
func (g *ngBuilder) u64(v uint64) []byte { return g.bo.AppendUint64(nil, v) }

func (g *ngBuilder) opt(code uint16, val []byte) []byte {
	b := g.bo.AppendUint16(nil, code)
	b = g.bo.AppendUint16(b, uint16(len(val)))
	b = append(b, val...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func (g *ngBuilder) block(typ uint32, parts ...[]byte) {
	var body []byte
	for _, p := range parts {
		body = append(body, p...)
	}
	for len(body)%4 != 0 {
		body = append(body, 0)
	}
	blen := uint32(12 + len(body))
	g.out = g.bo.AppendUint32(g.out, typ)
	g.out = g.bo.AppendUint32(g.out, blen)
	g.out = append(g.out, body...)
	g.out = g.bo.AppendUint32(g.out, blen)
}

func withEnd(g *ngBuilder, opts [][]byte) []byte {
	if len(opts) == 0 {
		return nil
	}
	var b []byte
	for _, o := range opts {
		b = append(b, o...)
	}
	return append(b, 0, 0, 0, 0)
}

func (g *ngBuilder) shb(opts ...[]byte) {
	g.block(blockTypeSHB, g.u32(pcapngBOM), g.u16(1), g.u16(0), g.u64(^uint64(0)), withEnd(g, opts))
}

func (g *ngBuilder) idb(link uint16, snap uint32, opts ...[]byte) {
	g.block(blockTypeIDB, g.u16(link), g.u16(0), g.u32(snap), withEnd(g, opts))
}

func padded(b []byte) []byte {
	out := append([]byte(nil), b...)
	for len(out)%4 != 0 {
		out = append(out, 0)
	}
	return out
}

func (g *ngBuilder) epb(ifid uint32, ts uint64, data []byte, orig uint32, opts ...[]byte) {
	g.block(blockTypeEPB, g.u32(ifid), g.u32(uint32(ts>>32)), g.u32(uint32(ts)),
		g.u32(uint32(len(data))), g.u32(orig), padded(data), withEnd(g, opts))
}

func (g *ngBuilder) opb(ifid uint16, ts uint64, data []byte, orig uint32, opts ...[]byte) {
	g.block(blockTypeOPB, g.u16(ifid), g.u16(0), g.u32(uint32(ts>>32)), g.u32(uint32(ts)),
		g.u32(uint32(len(data))), g.u32(orig), padded(data), withEnd(g, opts))
}

func (g *ngBuilder) spb(orig uint32, data []byte) {
	g.block(blockTypeSPB, g.u32(orig), padded(data))
}

// classicFile crafts a classic pcap file by hand in byte order bo.
func classicFile(bo byteOrder, nano bool, snap, link uint32, recs ...classicRec) []byte {
	magic := uint32(magicMicros)
	if nano {
		magic = magicNanos
	}
	b := bo.AppendUint32(nil, magic)
	b = bo.AppendUint16(b, 2)
	b = bo.AppendUint16(b, 4)
	b = bo.AppendUint32(b, 0)
	b = bo.AppendUint32(b, 0)
	b = bo.AppendUint32(b, snap)
	b = bo.AppendUint32(b, link)
	for _, r := range recs {
		b = bo.AppendUint32(b, r.sec)
		b = bo.AppendUint32(b, r.frac)
		b = bo.AppendUint32(b, uint32(len(r.data)))
		b = bo.AppendUint32(b, r.orig)
		b = append(b, r.data...)
	}
	return b
}

type classicRec struct {
	sec, frac, orig uint32
	data            []byte
}

// ownedRecord is a Record whose byte slices are copies.
type ownedRecord struct {
	Record
	comment string
}

func readAll(t testing.TB, b []byte) ([]ownedRecord, *Reader) {
	t.Helper()
	r, err := NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("NewReader: %v", err)
	}
	var out []ownedRecord
	for {
		var rec Record
		err := r.Next(&rec)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("Next after %d records: %v", len(out), err)
		}
		rec.Data = append([]byte(nil), rec.Data...)
		c := string(rec.Comment)
		rec.Comment = nil
		out = append(out, ownedRecord{rec, c})
	}
	return out, r
}

var sentinels = []error{ErrBadMagic, ErrTruncated, ErrBadLength, ErrBadVersion, ErrBadInterface, ErrCorrupt}

func isSentinel(err error) bool {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}
