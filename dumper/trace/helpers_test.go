package trace

import (
	"encoding/binary"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dumper/pcap"
	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// The test traffic: an RC WRITE stream A -> B over IPv4, its ACKs B -> A,
// and a SEND stream C -> D over IPv6. Packet i (seq i+1) is, by i%4:
// 0, 1 A -> B WRITE Middle (256 B), 2 B -> A ACK, 3 C -> D SEND Only (64 B).
var (
	addrA = netip.MustParseAddr("10.0.0.1")
	addrB = netip.MustParseAddr("10.0.0.2")
	addrC = netip.MustParseAddr("fd00::1")
	addrD = netip.MustParseAddr("fd00::2")
)

const snapLen = 128 // the dumpers' default snap length

// pkt is one mirrored copy as a dumper writes it.
type pkt struct {
	seq  uint64
	ts   int64 // the 48-bit mirror timestamp
	ev   mirror.EventType
	data []byte // restored and cut to snapLen
	orig int    // length on the wire
}

// eventOf is the event the test traffic injects into sequence number seq.
func eventOf(seq uint64) mirror.EventType {
	switch {
	case seq%50 == 0:
		return mirror.EventDrop
	case seq%70 == 0:
		return mirror.EventECN
	case seq%90 == 0:
		return mirror.EventBitError
	}
	return mirror.EventNone
}

// dirOf is the direction index of seq: 0 A->B, 1 B->A, 2 C->D.
func dirOf(seq uint64) int {
	switch (seq - 1) % 4 {
	case 0, 1:
		return 0
	case 2:
		return 1
	}
	return 2
}

// gen builds mirrored copies the way the injector and a dumper do: the
// frame is built by roce.Builder, mirrored with mirror.Write (random
// source port, rewrite port), cut to the snap length and restored with
// mirror.Restore; raw leaves the copy unrestored. Sequence numbers
// start at 1, timestamps at ts0 and advance by step ns (masked to 48
// bits).
type gen struct {
	ts0, step int64
	raw       bool
	rng       uint64
	psn       [3]uint32
	buf       []byte
}

func (g *gen) make(seq uint64) pkt {
	if g.buf == nil {
		g.buf = make([]byte, 2048)
		g.rng = 0x9e3779b97f4a7c15
	}
	var b roce.Builder
	var payload int
	d := dirOf(seq)
	switch d {
	case 0:
		b = roce.Builder{SrcGID: roce.GIDFromAddr(addrA), DstGID: roce.GIDFromAddr(addrB), Opcode: roce.RCWriteMiddle,
			DestQP: 0x12, SrcPort: 49152}
		payload = 256
	case 1:
		b = roce.Builder{SrcGID: roce.GIDFromAddr(addrB), DstGID: roce.GIDFromAddr(addrA), Opcode: roce.RCAck,
			DestQP: 0x11, SrcPort: 49153, MSN: uint32(seq)}
	case 2:
		b = roce.Builder{SrcGID: roce.GIDFromAddr(addrC), DstGID: roce.GIDFromAddr(addrD), Opcode: roce.RCSendOnly,
			DestQP: 0x33, SrcPort: 49154}
		payload = 64
	}
	b.SrcMAC, b.DstMAC = header.MAC{2, 0, 0, 0, 0, 1}, header.MAC{2, 0, 0, 0, 0, 2}
	b.HopLimit = roce.DefaultHopLimit
	b.PSN = g.psn[d]
	g.psn[d]++
	n, err := b.BuildInPlace(g.buf, payload)
	if err != nil {
		panic(err)
	}
	frame := append([]byte(nil), g.buf[:n]...)
	var p header.Parsed
	if err := header.Decode(frame, &p); err != nil {
		panic(err)
	}
	g.rng ^= g.rng << 13
	g.rng ^= g.rng >> 7
	g.rng ^= g.rng << 17
	ts := (g.ts0 + int64(seq-1)*g.step) & mirror.Mask48
	m := mirror.Meta{Seq: seq, Timestamp: ts, Event: eventOf(seq), OrigSrcPort: b.SrcPort}
	mirror.Write(frame, &p, m, uint16(g.rng), mirror.DefaultRewritePort)
	c := frame[:min(n, snapLen)]
	if !g.raw {
		if err := header.DecodeTruncated(c, &p); err != nil {
			panic(err)
		}
		if _, err := mirror.Restore(c, &p); err != nil {
			panic(err)
		}
	}
	return pkt{seq: seq, ts: ts, ev: m.Event, data: c, orig: n}
}

// trace makes copies 1..n.
func (g *gen) trace(n int) []pkt {
	out := make([]pkt, n)
	for i := range out {
		out[i] = g.make(uint64(i + 1))
	}
	return out
}

func newGen() *gen { return &gen{ts0: 1_000_000_000, step: 1000} }

// split spreads the copies over len(weights) dumpers as the injector's
// round-robin does.
func split(t testing.TB, pkts []pkt, weights []int) [][]pkt {
	w, err := mirror.NewWRR(weights)
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]pkt, len(weights))
	for _, p := range pkts {
		i := w.Next()
		out[i] = append(out[i], p)
	}
	return out
}

// writeFile writes copies as a dumper does: nanosecond timestamps taken
// from the destination MAC, snap length snapLen, Ethernet.
func writeFile(t testing.TB, path string, pkts []pkt, opts pcap.WriterOptions) string {
	t.Helper()
	opts.LinkType = pcap.LinkTypeEthernet
	opts.SnapLen = snapLen
	w, err := pcap.Create(path, opts)
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
	return path
}

// writeDumpers writes one pcap file per dumper (d0, d1, ...) into dir and
// returns the Sources.
func writeDumpers(t testing.TB, dir string, parts [][]pkt) []Source {
	var srcs []Source
	for i, part := range parts {
		name := dumperName(i)
		srcs = append(srcs, Source{Name: name, Path: writeFile(t, filepath.Join(dir, name+".pcap"), part, pcap.WriterOptions{})})
	}
	return srcs
}

func dumperName(i int) string { return "d" + string(rune('0'+i)) }

func names(n int) []string {
	var s []string
	for i := range n {
		s = append(s, dumperName(i))
	}
	return s
}

// readAll reads a merged trace back.
func readAll(t testing.TB, path string) []pcap.Record {
	t.Helper()
	r, err := pcap.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var recs []pcap.Record
	for {
		rec, _, err := r.ReadPacket(nil)
		if err != nil {
			break
		}
		recs = append(recs, rec)
	}
	return recs
}

// seqOf reads the mirror sequence number from the source MAC.
func seqOf(frame []byte) uint64 {
	return uint64(binary.BigEndian.Uint16(frame[6:8]))<<32 | uint64(binary.BigEndian.Uint32(frame[8:12]))
}

// without returns pkts minus those drop selects.
func without(pkts []pkt, drop func(p pkt) bool) []pkt {
	var out []pkt
	for _, p := range pkts {
		if !drop(p) {
			out = append(out, p)
		}
	}
	return out
}
