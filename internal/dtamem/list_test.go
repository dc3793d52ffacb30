package dtamem

import (
	"encoding/binary"
	"testing"
)

// BenchmarkPoll is a poller reading a full ring of new entries.
func BenchmarkPoll(b *testing.B) {
	const entries = 1 << 16
	mem := make([]byte, entries*AppendEntryLen)
	for i := uint64(0); i < entries; i++ {
		binary.BigEndian.PutUint32(mem[i*AppendEntryLen+4:], uint32(i)+1)
	}
	var sum uint32
	b.ReportAllocs()
	read := 0
	for read < b.N {
		p := NewPoller(mem, entries, 0, 1)
		read += p.Poll(min(entries, b.N-read), func(_ uint64, v uint32) { sum += v })
	}
	b.ReportMetric(float64(read)/b.Elapsed().Seconds()/1e6, "Mentries/s")
}

// TestPollerHoles: a poller stops at a hole, Ahead finds the entry past
// it (not a stale one of the last lap), and Skip steps over it with the
// skipped positions counted, for one poller and for two sharing a list.
func TestPollerHoles(t *testing.T) {
	const entries = 16
	mem := make([]byte, entries*AppendEntryLen)
	put := func(pos uint64) {
		var d [4]byte
		binary.BigEndian.PutUint32(d[:], uint32(pos)*10)
		off := (pos % entries) * AppendEntryLen
		PutEntry(mem[off:off+AppendEntryLen], pos, d[:])
	}
	// Last lap's entries in every slot: none is new at positions 16+.
	for pos := uint64(0); pos < entries; pos++ {
		put(pos)
	}
	p := NewPoller(mem, entries, entries, 1)
	var got []uint64
	fn := func(pos uint64, data uint32) {
		if uint64(data) != pos*10 {
			t.Fatalf("position %d holds %d", pos, data)
		}
		got = append(got, pos)
	}
	if n := p.Poll(100, fn); n != 0 {
		t.Fatalf("read %d stale entries", n)
	}
	if q, ok := p.Ahead(100); ok {
		t.Fatalf("stale entry at %d taken for one past a hole", q)
	}
	// 16, 17 written, 18-20 lost, 21, 22 written.
	for _, pos := range []uint64{16, 17, 21, 22} {
		put(pos)
	}
	if n := p.Poll(100, fn); n != 2 || p.Next() != 18 {
		t.Fatalf("read %d, at %d; want 2, at 18", n, p.Next())
	}
	if q, ok := p.Ahead(2); ok {
		t.Fatalf("lookahead 2 found %d", q)
	}
	q, ok := p.Ahead(100)
	if !ok || q != 21 {
		t.Fatalf("ahead: %d %v, want 21", q, ok)
	}
	p.Skip(q)
	p.Skip(q - 1) // never backwards
	if n := p.Poll(100, fn); n != 2 || p.Lost != 3 || p.Next() != 23 {
		t.Fatalf("after the skip: read %d, lost %d, at %d", n, p.Lost, p.Next())
	}
	if want := []uint64{16, 17, 21, 22}; len(got) != len(want) || got[2] != 21 || got[3] != 22 {
		t.Fatalf("read %v, want %v", got, want)
	}

	// Two pollers: the even one at the hole 24-26 skips to 28 (one lost:
	// 24, 26), the odd one skips 25 and reads 27.
	for _, pos := range []uint64{23, 27, 28} {
		put(pos)
	}
	even, odd := NewPoller(mem, entries, 24, 2), NewPoller(mem, entries, 23, 2)
	odd.Poll(100, func(uint64, uint32) {})
	for _, x := range []*Poller{even, odd} {
		q, ok := x.Ahead(8)
		if !ok {
			t.Fatalf("poller at %d: nothing ahead", x.Next())
		}
		x.Skip(q)
	}
	if even.Next() != 28 || even.Lost != 2 || odd.Next() != 27 || odd.Lost != 1 {
		t.Fatalf("even at %d lost %d, odd at %d lost %d", even.Next(), even.Lost, odd.Next(), odd.Lost)
	}
}
