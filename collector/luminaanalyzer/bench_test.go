package luminaanalyzer

import (
	"context"
	"encoding/binary"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dumper/pcap"
	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// benchGen streams a synthetic Lumina trace: conns WRITE connections taking
// turns, one 16-packet message each, every message acknowledged. With
// events on, message 7 of every 64 of a connection loses its sixth packet
// (the rest arrive out of order, the responder NAKs, the requester goes
// back) and message 21 has its fourth packet CE-marked and answered by a
// CNP. Packets are made by patching per-connection templates (built once
// with roce.Builder) in a reusable buffer: mirror sequence and timestamp
// in the MACs, event in the TTL, ECN, PSN.
type benchGen struct {
	m      *Meta
	events bool
	tmpl   [][]tmplFrame // by connection, then kind
	buf    []byte
	seq    uint64
	ts     int64
	conn   int // the next connection to send a message
	cur    int // the connection whose message is pending
	msg    []int
	pend   []benchPkt
	pi     int
}

type tmplFrame struct {
	data   []byte
	orig   int
	l3, bt int // offsets of the IPv4 header and the BTH
}

// Template kinds.
const (
	tFirst = iota
	tMiddle
	tLast
	tAck
	tNAK
	tCNP
	numTmpl
)

type benchPkt struct {
	kind int
	psn  uint32
	ev   mirror.EventType
}

const benchPPM = 16

func newBenchGen(conns int, events bool) *benchGen {
	g := &benchGen{events: events, buf: make([]byte, testSnap), ts: 1_000_000_000, msg: make([]int, conns),
		m: &Meta{Test: "bench", Geometry: intent.Geometry{Verb: intent.VerbWrite, MessageSize: benchPPM * 1024, MTU: 1024,
			NumMessages: 1 << 20}, TxDepth: 1, Timeout: 14, RetryCnt: 7, Valid: true}}
	for c := range conns {
		mc := intent.Conn{RequesterIP: netip.AddrFrom4([4]byte{10, 0, byte(c >> 8), byte(c + 1)}), RequesterQPN: 0x100 + uint32(c),
			RequesterIPSN: uint32(c) * 100_000, ResponderIP: netip.MustParseAddr("10.0.1.1"), ResponderQPN: 0x4000 + uint32(c)}
		g.m.Conns = append(g.m.Conns, mc)
		var ts []tmplFrame
		for k := range numTmpl {
			b := roce.Builder{SrcMAC: header.MAC{2}, DstMAC: header.MAC{2}, SrcGID: roce.GIDFromAddr(mc.RequesterIP),
				DstGID: roce.GIDFromAddr(mc.ResponderIP), DestQP: mc.ResponderQPN, SrcPort: 0xc000 + uint16(c),
				PKey: roce.DefaultPKey}
			payload := 1024
			switch k {
			case tFirst:
				b.Opcode, b.DMALen = roce.RCWriteFirst, benchPPM*1024
			case tMiddle:
				b.Opcode = roce.RCWriteMiddle
			case tLast:
				b.Opcode, b.AckReq = roce.RCWriteLast, true
			case tAck, tNAK, tCNP:
				b.SrcGID, b.DstGID, b.DestQP = b.DstGID, b.SrcGID, mc.RequesterQPN
				b.Opcode, b.Syndrome, payload = roce.RCAck, roce.ACKSyndrome(roce.CreditsInvalid), 0
				if k == tNAK {
					b.Syndrome = roce.NAKSyndrome(roce.NAKPSNSequenceError)
				}
			}
			frame := make([]byte, 2048)
			var n int
			var err error
			if k == tCNP {
				n, err = b.BuildCNP(frame)
			} else {
				n, err = b.BuildInPlace(frame, payload)
			}
			if err != nil {
				panic(err)
			}
			var p roce.Packet
			if err := roce.Parse(frame[:n], &p); err != nil {
				panic(err)
			}
			ts = append(ts, tmplFrame{data: frame[:min(n, testSnap)], orig: n, l3: p.Net.L3Off, bt: p.BTHOff})
		}
		g.tmpl = append(g.tmpl, ts)
	}
	return g
}

// queue plans connection c's next message.
func (g *benchGen) queue() {
	c := g.conn
	g.cur, g.conn = c, (g.conn+1)%len(g.tmpl)
	g.pend, g.pi = g.pend[:0], 0
	m := g.msg[c]
	g.msg[c]++
	first := roce.AddPSN(g.m.Conns[c].RequesterIPSN, m*benchPPM)
	kind := func(i int) int {
		switch i {
		case 0:
			return tFirst
		case benchPPM - 1:
			return tLast
		}
		return tMiddle
	}
	lossy, marked := g.events && m%64 == 7, g.events && m%64 == 21
	for i := range benchPPM {
		p := benchPkt{kind: kind(i), psn: roce.AddPSN(first, i)}
		if lossy && i == 5 {
			p.ev = mirror.EventDrop
		}
		if marked && i == 3 {
			p.ev = mirror.EventECN
		}
		g.pend = append(g.pend, p)
		if marked && i == 3 {
			g.pend = append(g.pend, benchPkt{kind: tCNP})
		}
	}
	if lossy {
		g.pend = append(g.pend, benchPkt{kind: tNAK, psn: roce.AddPSN(first, 5)})
		for i := 5; i < benchPPM; i++ {
			g.pend = append(g.pend, benchPkt{kind: kind(i), psn: roce.AddPSN(first, i)})
		}
	}
	g.pend = append(g.pend, benchPkt{kind: tAck, psn: roce.AddPSN(first, benchPPM-1)})
}

// next returns the next packet; the frame is valid until the next call.
func (g *benchGen) next() (ts int64, frame []byte, orig int) {
	if g.pi == len(g.pend) {
		g.queue()
	}
	p := g.pend[g.pi]
	g.pi++
	t := &g.tmpl[g.cur][p.kind]
	f := g.buf[:len(t.data)]
	copy(f, t.data)
	g.seq++
	g.ts += 300 + int64(g.seq%7)*40
	put48(f[6:12], g.seq)
	put48(f[0:6], uint64(g.ts)&mirror.Mask48)
	f[t.l3+8] = uint8(p.ev)
	if p.ev == mirror.EventECN {
		f[t.l3+1] |= header.ECNCE
	}
	if p.kind != tCNP {
		binary.BigEndian.PutUint32(f[t.bt+8:], p.psn|uint32(f[t.bt+8])<<24&0x80000000)
	}
	return g.ts, f, t.orig
}

func put48(b []byte, v uint64) {
	b[0], b[1] = byte(v>>40), byte(v>>32)
	binary.BigEndian.PutUint32(b[2:6], uint32(v))
}

// benchPackets is the size of BenchmarkAnalyze's trace:
// LUMINA_BENCH_PACKETS, default ten million.
func benchPackets() int {
	if v, err := strconv.Atoi(os.Getenv("LUMINA_BENCH_PACKETS")); err == nil && v > 0 {
		return v
	}
	return 10_000_000
}

var benchTrace struct {
	once sync.Once
	dir  string
	path string
	meta *Meta
	n    int
	err  error
}

// writeBenchTrace writes the benchmark trace once per test binary, streamed
// straight to the file.
func writeBenchTrace() (string, *Meta, int, error) {
	bt := &benchTrace
	bt.once.Do(func() {
		bt.n = benchPackets()
		bt.dir, bt.err = os.MkdirTemp("", "lumina-bench")
		if bt.err != nil {
			return
		}
		bt.path = filepath.Join(bt.dir, TraceFile)
		g := newBenchGen(64, true)
		bt.meta = g.m
		w, err := pcap.Create(bt.path, pcap.WriterOptions{LinkType: pcap.LinkTypeEthernet, Nanosecond: true, SnapLen: testSnap})
		if err != nil {
			bt.err = err
			return
		}
		for range bt.n {
			ts, f, orig := g.next()
			if err := w.WritePacket(ts, f, orig); err != nil {
				bt.err = err
				return
			}
		}
		bt.err = w.Close()
	})
	return bt.path, bt.meta, bt.n, bt.err
}

func TestMain(m *testing.M) {
	code := m.Run()
	if benchTrace.dir != "" {
		os.RemoveAll(benchTrace.dir)
	}
	os.Exit(code)
}

// BenchmarkAnalyze analyses a synthetic trace of 64 WRITE connections
// (ten million packets by default; LUMINA_BENCH_PACKETS sets another
// size), with a loss and NAK-triggered go-back-N every 64 messages per
// connection and a CE mark with its CNP every 64 too: the whole Analyze,
// file reading included. Reported: packets per second, allocations per
// analysis (records for the events, not per packet) and the heap in use
// at the end, which does not grow with the trace.
func BenchmarkAnalyze(b *testing.B) {
	path, m, n, err := writeBenchTrace()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	var rep *Report
	for range b.N {
		rep, err = Analyze(context.Background(), path, m)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if rep.Summary.Packets != int64(n) || !rep.GBN.Compliant || len(rep.Retransmission.NACK) == 0 || rep.CNP.CNPs == 0 {
		b.Fatalf("unexpected analysis: %+v, %d violations %+v", rep.Summary, rep.GBN.Count, rep.GBN.Violations)
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "pkts/s")
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
}

// BenchmarkPacket is the per-packet path alone, without file reading.
func BenchmarkPacket(b *testing.B) {
	g := newBenchGen(64, true)
	a, err := NewAnalyzer(g.m, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		ts, f, _ := g.next()
		a.Packet(ts, f)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pkts/s")
}

// TestPacketAllocs: once its connections have started, the analyzer
// allocates nothing per packet of ordinary traffic (data, ACKs).
func TestPacketAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	g := newBenchGen(64, false)
	a, err := NewAnalyzer(g.m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for range 64 * 20 * (benchPPM + 1) {
		ts, f, _ := g.next()
		a.Packet(ts, f)
	}
	allocs := testing.AllocsPerRun(20, func() {
		for range 10_000 {
			ts, f, _ := g.next()
			a.Packet(ts, f)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per 10000 packets", allocs)
	}
	rep := a.Report()
	if !rep.GBN.Compliant || rep.Summary.Unmatched != 0 || rep.Summary.RoCE != rep.Summary.Packets {
		t.Fatalf("generated traffic: %+v %+v", rep.Summary, rep.GBN.Violations)
	}
}

// TestBenchTrace checks the generator with events on a short trace.
func TestBenchTrace(t *testing.T) {
	g := newBenchGen(4, true)
	a, err := NewAnalyzer(g.m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 4 * 64 * (benchPPM + 1) * 2
	for range n {
		ts, f, _ := g.next()
		a.Packet(ts, f)
	}
	rep := a.Report()
	if !rep.GBN.Compliant || len(rep.Retransmission.NACK) != 8 || rep.CNP.CNPs != 8 || rep.CNP.Unexplained != 0 ||
		rep.Summary.Unmatched != 0 {
		t.Fatalf("%+v\n%+v\n%+v", rep.Summary, rep.GBN.Violations, rep.CNP)
	}
	for _, n := range rep.Retransmission.NACK {
		if n.RelPSN != 5 || n.GenerationNs <= 0 || n.ReactionNs <= 0 {
			t.Fatalf("NACK %+v", n)
		}
	}
}

// BenchmarkLuminaCNPPacket is Lumina's CNP check per packet, on the
// BenchmarkPacket trace (64 connections, a CE mark with its CNP and a
// NAK every 64 messages per connection), without file reading.
func BenchmarkLuminaCNPPacket(b *testing.B) {
	g := newBenchGen(64, true)
	c, err := newLuminaCNPCheck(g.m)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		_, f, _ := g.next()
		c.packet(f)
	}
	b.StopTimer()
	if l := c.result(); b.N > 1_000_000 && l.Modes[0].Groups[0].CNPs == 0 {
		b.Fatalf("no CNP counted: %s", l)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pkts/s")
}
