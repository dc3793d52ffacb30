package dtatranslator

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/internal/dtamem"
	"github.com/rdma-appliance/appliance/internal/dtawire"
)

// sketchBed is a translator with one sketch and a postcard table in the
// collector bed's memory (the bed registers one region).
func sketchBed(t *testing.T, s dtamem.SketchRegion, p *dtamem.PostcardRegion) (*collectorBed, *Translator, []byte) {
	t.Helper()
	b := newCollectorBed(t, 1000)
	s.Addr, s.RKey = b.mr.Addr(), b.mr.RKey()
	regs := dtamem.Regions{Sketches: map[uint16]dtamem.SketchRegion{7: s}}
	if p != nil {
		p.Addr, p.RKey = b.mr.Addr()+uint64(s.Len()), b.mr.RKey()
		regs.Postcards = p
	}
	tr, err := NewTranslator(b.conn, regs)
	if err != nil {
		t.Fatal(err)
	}
	return b, tr, b.mem[:s.Len()]
}

// TestSketchMergeCountMin: three reporters' Count-Min sketches, their
// columns sent interleaved and unevenly, land as their exact sum; a column
// is written only once all three sent it; point queries never undercount.
func TestSketchMergeCountMin(t *testing.T) {
	reg := dtamem.SketchRegion{Kind: dtawire.SketchCountMin, Columns: 1024, Rows: 4, Reporters: 3, Group: 16}
	b, tr, mem := sketchBed(t, reg, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	truth := map[uint32]uint32{}
	var sketches []*dtamem.Sketch
	for range reg.Reporters {
		k := dtamem.NewSketch(&reg)
		for range 300 {
			key, n := uint32(rng.IntN(500)), uint32(1+rng.IntN(100))
			k.Add(key, n)
			truth[key] += n
		}
		sketches = append(sketches, k)
	}
	var scratch [dtawire.MaxSketchCounters * 4]byte
	send := func(rep int, c uint32) error {
		var r dtawire.Report
		sketches[rep].Report(&r, 7, uint16(rep), c, scratch[:])
		return tr.Translate(&r, b.emit)
	}
	// Reporter 0 sends all its columns first, then 1 and 2 interleave.
	for c := uint32(0); c < reg.Columns; c++ {
		if err := send(0, c); err != nil {
			t.Fatal(err)
		}
	}
	if tr.Stats.SketchWrites != 0 {
		t.Fatal("a column was written before every reporter sent it")
	}
	for c := uint32(0); c < reg.Columns; c++ {
		for _, rep := range []int{2, 1} {
			if err := send(rep, c); err != nil {
				t.Fatal(err)
			}
		}
		// A resent column is a duplicate, dropped.
		if err := send(1, c); err != nil {
			t.Fatalf("duplicate column %d: %v", c, err)
		}
	}
	b.settle()
	if tr.Stats.SketchWrites != uint64(reg.Columns)/16 {
		t.Fatalf("%d groups written, want %d", tr.Stats.SketchWrites, reg.Columns/16)
	}
	for i := range sketches[0].C {
		want := sketches[0].C[i] + sketches[1].C[i] + sketches[2].C[i]
		if got := binary.BigEndian.Uint32(mem[4*i:]); got != want {
			t.Fatalf("counter %d: %d, want %d", i, got, want)
		}
	}
	exact := 0
	for key, n := range truth {
		got := dtamem.SketchCount(mem, &reg, key)
		if got < n {
			t.Fatalf("key %d: count %d below the true %d", key, got, n)
		}
		if got == n {
			exact++
		}
	}
	if exact < len(truth)*9/10 {
		t.Fatalf("only %d of %d keys counted exactly", exact, len(truth))
	}

	// Order: a skipped column is refused, so is a round ahead of the
	// others.
	if err := send(0, 5); !errors.Is(err, ErrColumnOrder) {
		t.Fatalf("skipped columns: %v", err)
	}
	for c := uint32(0); c < reg.Columns; c++ {
		if err := send(0, c); err != nil {
			t.Fatal(err)
		}
	}
	if err := send(0, 0); !errors.Is(err, ErrSketchAhead) {
		t.Fatalf("a round ahead: %v", err)
	}
	if tr.Stats.Refused != 2 {
		t.Fatalf("refused %d", tr.Stats.Refused)
	}
	var r dtawire.Report
	sketches[0].Report(&r, 8, 0, 0, scratch[:])
	if err := tr.Translate(&r, b.emit); !errors.Is(err, ErrNoRegion) {
		t.Fatalf("unknown sketch: %v", err)
	}
}

// TestSketchMergeHyperLogLog: two reporters see overlapping key sets; the
// merged registers are the maxima and estimate the union's size.
func TestSketchMergeHyperLogLog(t *testing.T) {
	reg := dtamem.SketchRegion{Kind: dtawire.SketchHyperLogLog, Columns: 256, Rows: 4, Reporters: 2}
	b, tr, mem := sketchBed(t, reg, nil)
	a, c := dtamem.NewSketch(&reg), dtamem.NewSketch(&reg)
	for k := uint32(0); k < 30000; k++ {
		a.Add(k, 0)
	}
	for k := uint32(20000); k < 50000; k++ {
		c.Add(k, 0)
	}
	var scratch [dtawire.MaxSketchCounters * 4]byte
	for col := uint32(0); col < reg.Columns; col++ {
		for rep, k := range []*dtamem.Sketch{a, c} {
			var r dtawire.Report
			k.Report(&r, 7, uint16(rep), col, scratch[:])
			if err := tr.Translate(&r, b.emit); err != nil {
				t.Fatal(err)
			}
		}
	}
	b.settle()
	for i := range a.C {
		if got := binary.BigEndian.Uint32(mem[4*i:]); got != max(a.C[i], c.C[i]) {
			t.Fatalf("register %d: %d", i, got)
		}
	}
	est := dtamem.SketchCardinality(mem, &reg)
	// 1024 registers: a standard error of 3.3%; five of them is a bound
	// a correct sketch fails once in millions.
	if math.Abs(est-50000)/50000 > 0.16 {
		t.Fatalf("cardinality %.0f, want about 50000", est)
	}
	t.Logf("union of 50000 keys estimated %.0f from %d registers", est, len(a.C))
}

// TestPostcarder: complete flows are written once with every hop; a flow
// missing a hop is written by the flush timeout; a flow that loses its
// cache slot to another is written early with the hops it had.
func TestPostcarder(t *testing.T) {
	reg := dtamem.SketchRegion{Kind: dtawire.SketchCountMin, Columns: 16, Rows: 1, Reporters: 1}
	pr := &dtamem.PostcardRegion{Slots: 1024, Hops: 5, Cache: 16}
	b, tr, _ := sketchBed(t, reg, pr)
	now := int64(0)
	tr.Now = func() int64 { return now }
	mem := b.mem[reg.Len():]
	card := func(key uint32, hop uint8) {
		var d [4]byte
		binary.BigEndian.PutUint32(d[:], key*100+uint32(hop))
		r := dtawire.Report{Opcode: dtawire.OpPostcarder, Key: key, Hop: hop, Data: d[:]}
		if err := tr.Translate(&r, b.emit); err != nil {
			t.Fatal(err)
		}
	}
	// Flows 1..8, hops in scattered order, one at a time.
	for key := uint32(1); key <= 8; key++ {
		for _, h := range []uint8{3, 0, 4, 1, 2} {
			card(key, h)
		}
	}
	if tr.Stats.PostcardsComplete != 8 || tr.Stats.PostcardsEvicted != 0 {
		t.Fatalf("stats %+v", tr.Stats)
	}
	// Flow 100 misses hop 2.
	for _, h := range []uint8{0, 1, 3, 4} {
		card(100, h)
	}
	b.settle()
	if _, ok := dtamem.QueryPostcard(mem, pr, 100); ok {
		t.Fatal("an incomplete flow was written before its timeout")
	}
	now += int64(time.Second)
	if err := tr.Flush(time.Millisecond, b.emit); err != nil {
		t.Fatal(err)
	}
	// Two flows sharing a cache slot: the first is evicted by the second.
	x := uint32(200)
	y := x + 1
	for dtamem.KeyChecksum(y)&15 != dtamem.KeyChecksum(x)&15 {
		y++
	}
	card(x, 0)
	card(y, 4)
	b.settle()
	for key := uint32(1); key <= 8; key++ {
		p, ok := dtamem.QueryPostcard(mem, pr, key)
		if !ok || p.Mask != 0x1f {
			t.Fatalf("flow %d: %+v %v", key, p, ok)
		}
		for h, v := range p.Hops {
			if v != key*100+uint32(h) {
				t.Fatalf("flow %d hop %d: %d", key, h, v)
			}
		}
	}
	if p, ok := dtamem.QueryPostcard(mem, pr, 100); !ok || p.Mask != 0x1b || p.Hops[2] != 0 || p.Hops[3] != 10003 {
		t.Fatalf("flow 100 after the timeout: %+v %v", p, ok)
	}
	if p, ok := dtamem.QueryPostcard(mem, pr, x); !ok || p.Mask != 1 {
		t.Fatalf("evicted flow: %+v %v", p, ok)
	}
	if _, ok := dtamem.QueryPostcard(mem, pr, y); ok {
		t.Fatal("the evicting flow was written before completing")
	}
	if _, ok := dtamem.QueryPostcard(mem, pr, 9999); ok {
		t.Fatal("an unknown flow was found")
	}
	if tr.Stats.PostcardsEvicted != 2 {
		t.Fatalf("stats %+v", tr.Stats)
	}
	r := dtawire.Report{Opcode: dtawire.OpPostcarder, Key: 1, Hop: 5, Data: []byte{0, 0, 0, 1}}
	if err := tr.Translate(&r, b.emit); !errors.Is(err, ErrSketchGeometry) {
		t.Fatalf("hop past the table: %v", err)
	}
}

// TestHoldPostcards: a flow put in the cache completes with the data it
// was given and the last hop's; a flow held in another key's slot is
// evicted by that key's postcard with what it held (counted and not
// written with DropEvicted); an empty bitmap leaves the slot empty, and
// bitmaps no run of postcards leaves stay held.
func TestHoldPostcards(t *testing.T) {
	reg := dtamem.SketchRegion{Kind: dtawire.SketchCountMin, Columns: 16, Rows: 1, Reporters: 1}
	pr := &dtamem.PostcardRegion{Slots: 1024, Hops: 5, Cache: 16}
	b, tr, _ := sketchBed(t, reg, pr)
	mem := b.mem[reg.Len():]
	card := func(key uint32, hop uint8, data uint32) {
		t.Helper()
		var d [4]byte
		binary.BigEndian.PutUint32(d[:], data)
		r := dtawire.Report{Opcode: dtawire.OpPostcarder, Key: key, Hop: hop, Data: d[:]}
		if err := tr.Translate(&r, b.emit); err != nil {
			t.Fatal(err)
		}
	}
	hold := func(at uint32, f PostcardFlow) {
		t.Helper()
		if err := tr.HoldPostcards(at, f); err != nil {
			t.Fatal(err)
		}
	}
	// Flow 7 holds hops 0, 1, 3 and 4; its hop 2 completes it.
	hold(7, PostcardFlow{Key: 7, Mask: 0x1b, Hops: [dtamem.MaxHops]uint32{70, 71, 0, 73, 74}})
	card(7, 2, 72)
	// Flow x is held in y's slot (y's own slot in the cache: x's
	// checksum need not lead there); y's postcard evicts it.
	x, y := uint32(300), uint32(301)
	hold(y, PostcardFlow{Key: x, Mask: 0x04, Hops: [dtamem.MaxHops]uint32{2: 302}})
	card(y, 0, 3010)
	// An empty bitmap: the slot holds nothing, so flow 9's postcard is
	// the first of a new flow and nothing is written.
	hold(9, PostcardFlow{Key: 8, Mask: 0})
	card(9, 1, 91)
	b.settle()
	if tr.Stats.PostcardsComplete != 1 || tr.Stats.PostcardsEvicted != 1 {
		t.Fatalf("stats %+v", tr.Stats)
	}
	if p, ok := dtamem.QueryPostcard(mem, pr, 7); !ok || p.Mask != 0x1f || !slices.Equal(p.Hops, []uint32{70, 71, 72, 73, 74}) {
		t.Fatalf("completed flow: %+v %v", p, ok)
	}
	if p, ok := dtamem.QueryPostcard(mem, pr, x); !ok || p.Mask != 0x04 || p.Hops[2] != 302 {
		t.Fatalf("evicted flow: %+v %v", p, ok)
	}
	for _, k := range []uint32{8, 9, y} {
		if _, ok := dtamem.QueryPostcard(mem, pr, k); ok {
			t.Fatalf("flow %d written", k)
		}
	}
	// Bitmaps no run of postcards leaves (every hop, hops beyond the
	// table's) are held as the Tofino translator's cell holds them: no
	// postcard completes them, another flow evicts them.
	for i, m := range []uint32{0x1f, 0x3e, 0x80} {
		key := uint32(500 + i)
		hold(key, PostcardFlow{Key: key, Mask: m})
		before := tr.Stats
		card(key, 0, 1)
		card(key, 4, 1)
		if tr.Stats.PostcardsComplete != before.PostcardsComplete {
			t.Errorf("bitmap %#x: a postcard completed a flow held with it", m)
		}
	}
	tr.DropEvicted = true
	before := tr.Stats
	hold(600, PostcardFlow{Key: 601, Mask: 0x03, Hops: [dtamem.MaxHops]uint32{6010, 6011}})
	card(600, 0, 6000)
	b.settle()
	if tr.Stats.PostcardsDropped != before.PostcardsDropped+1 || tr.Stats.PostcardsEvicted != before.PostcardsEvicted {
		t.Fatalf("DropEvicted: stats %+v, before %+v", tr.Stats, before)
	}
	if _, ok := dtamem.QueryPostcard(mem, pr, 601); ok {
		t.Error("DropEvicted: the evicted flow was written")
	}
	none, err := NewTranslator(b.conn, dtamem.Regions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := none.HoldPostcards(1, PostcardFlow{Key: 1, Mask: 1}); !errors.Is(err, ErrNoRegion) {
		t.Errorf("without a postcard table: %v", err)
	}
}

// BenchmarkTranslateSketchMerge is the translator's rate for Sketch-Merge
// reports of 4-counter columns from 4 reporters.
func BenchmarkTranslateSketchMerge(b *testing.B) {
	reg := dtamem.SketchRegion{Kind: dtawire.SketchCountMin, Columns: 1024, Rows: 4, Reporters: 4, Addr: 1 << 20, RKey: 3}
	tr, err := NewTranslator(benchConn(), dtamem.Regions{Sketches: map[uint16]dtamem.SketchRegion{1: reg}})
	if err != nil {
		b.Fatal(err)
	}
	k := dtamem.NewSketch(&reg)
	for i := range k.C {
		k.C[i] = uint32(i)
	}
	var scratch [16]byte
	reports := make([]dtawire.Report, 0, int(reg.Columns)*reg.Reporters)
	for c := uint32(0); c < reg.Columns; c++ {
		for rep := range reg.Reporters {
			var r dtawire.Report
			k.Report(&r, 1, uint16(rep), c, scratch[:])
			r.Counters = append([]byte(nil), r.Counters...)
			reports = append(reports, r)
		}
	}
	emit := func([]byte) error { return nil }
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := tr.Translate(&reports[i%len(reports)], emit); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mreports/s")
}

// BenchmarkTranslatePostcarder is the translator's rate for Postcarder
// with 5-hop paths: five postcards a flow, one WRITE.
func BenchmarkTranslatePostcarder(b *testing.B) {
	tr, err := NewTranslator(benchConn(), dtamem.Regions{Postcards: &dtamem.PostcardRegion{Addr: 1 << 20, RKey: 3, Slots: 1 << 16, Hops: 5}})
	if err != nil {
		b.Fatal(err)
	}
	r := dtawire.Report{Opcode: dtawire.OpPostcarder, Data: []byte{1, 2, 3, 4}}
	emit := func([]byte) error { return nil }
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		r.Key, r.Hop = uint32(i/5), uint8(i%5)
		if err := tr.Translate(&r, emit); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mreports/s")
}

// BenchmarkTranslateKeyIncrement is the translator's rate for
// Key-Increment with N = 2: two FETCH_ADD frames per report (the atomic
// window is reopened as a collector's ACKs would).
func BenchmarkTranslateKeyIncrement(b *testing.B) {
	c := benchConn()
	c.MaxAtomic = 256
	tr, err := NewTranslator(c, dtamem.Regions{KeyIncrement: &dtamem.KeyIncrementRegion{Addr: 1 << 20, RKey: 3, Slots: 1 << 16}})
	if err != nil {
		b.Fatal(err)
	}
	r := dtawire.Report{Opcode: dtawire.OpKeyIncrement, Redundancy: 2, Counter: 1500}
	emit := func([]byte) error { return nil }
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		r.Key = uint32(i)
		if err := tr.Translate(&r, emit); err != nil {
			c.ahead = c.atail // every atomic answered
			if err := tr.Translate(&r, emit); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mreports/s")
}

// BenchmarkTranslateAppend is the translator's rate for Append with
// batches of 4: one WRITE per four reports.
func BenchmarkTranslateAppend(b *testing.B) {
	tr, err := NewTranslator(benchConn(), dtamem.Regions{Batch: 4,
		Lists: map[uint32]dtamem.ListRegion{1: {Addr: 1 << 20, RKey: 3, Entries: 1 << 16}, 2: {Addr: 1 << 24, RKey: 3, Entries: 1 << 16}}})
	if err != nil {
		b.Fatal(err)
	}
	r := dtawire.Report{Opcode: dtawire.OpAppend, Data: []byte{1, 2, 3, 4}}
	emit := func([]byte) error { return nil }
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		r.ListID = uint32(1 + i&1)
		if err := tr.Translate(&r, emit); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mreports/s")
}
