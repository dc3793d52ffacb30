package dtamem

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"hash/crc32"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestPublicLayoutHash: the public layout's slots and checksums are the
// public DTA translator's, computed here independently of the slicing
// tables: slot n = CRC32-IEEE(key little-endian || n) & (slots-1), and
// the checksum CRC32-IEEE(key little-endian), stored little-endian.
func TestPublicLayoutHash(t *testing.T) {
	for _, key := range []uint32{0, 1, 0x0a000001, 0xdeadbeef, 0xffffffff} {
		var le [5]byte
		binary.LittleEndian.PutUint32(le[:], key)
		for n := range 4 {
			le[4] = byte(n)
			want := uint64(crc32.ChecksumIEEE(le[:])) & (1<<20 - 1)
			if got := LayoutPublic.Slot(key, n, 1<<20); got != want {
				t.Errorf("key %#x n %d: slot %d, want %d", key, n, got, want)
			}
			if got := LayoutPublic.KeyIncrementSlot(key, n, 1<<20); got != want {
				t.Errorf("key %#x n %d: key-increment slot %d, want %d", key, n, got, want)
			}
		}
		var sum [4]byte
		binary.LittleEndian.PutUint32(sum[:], crc32.ChecksumIEEE(le[:4]))
		if got := LayoutPublic.KeyChecksum(key); got != binary.BigEndian.Uint32(sum[:]) {
			t.Errorf("key %#x: checksum %#x, want the bytes % x", key, got, sum)
		}
		// The default layout is unchanged by the option.
		if LayoutPerSlot.Slot(key, 1, 1<<20) != Slot(key, 1, 1<<20) || LayoutPerSlot.KeyChecksum(key) != KeyChecksum(key) {
			t.Errorf("key %#x: the default layout moved", key)
		}
	}
}

// goldenMemory is a small collector memory written in a layout: a
// Key-Write table of 16 slots with three keys at N = 2, and an Append
// ring of 8 entries holding positions 0..4.
func goldenMemory(l Layout) string {
	kw := NewKeyWriteTable(16, 2, 4)
	kw.Layout = l
	for _, k := range []uint32{1, 0x0a000001, 0xdeadbeef} {
		var d [4]byte
		binary.BigEndian.PutUint32(d[:], k^0x55aa55aa)
		kw.Put(k, d[:])
	}
	el := l.AppendEntryLen()
	ring := make([]byte, 8*el)
	for pos := range uint64(5) {
		var d [4]byte
		binary.BigEndian.PutUint32(d[:], 100+uint32(pos))
		l.PutEntry(ring[pos*uint64(el):], pos, d[:])
	}
	var b strings.Builder
	b.WriteString("# layout " + l.String() + "\n# key-write: 16 slots x {checksum, data}, keys 1, 0x0a000001, 0xdeadbeef at N = 2, data key^0x55aa55aa\n")
	for i := range 16 {
		b.WriteString(hex.EncodeToString(kw.Mem[i*8:i*8+8]) + "\n")
	}
	b.WriteString("# append: 8 entries, positions 0..4 with data 100..104\n")
	for i := range 8 {
		b.WriteString(hex.EncodeToString(ring[i*el:(i+1)*el]) + "\n")
	}
	return b.String()
}

// TestLayoutGolden pins both layouts' memory byte for byte: the default
// must never move (collectors and Tofino translators in the field write
// it), and the public one is the public DTA code's.
func TestLayoutGolden(t *testing.T) {
	for _, l := range []Layout{LayoutPerSlot, LayoutPublic} {
		path := "testdata/layout-" + l.String() + ".golden"
		got := goldenMemory(l)
		if *update {
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if got != string(want) {
			t.Errorf("%s memory differs from %s (go test -update after a deliberate change):\n%s", l, path, got)
		}
		// And the queries read it back.
		kw := &KeyWriteTable{Slots: 16, N: 2, DataWidth: 4, Layout: l, Mem: make([]byte, 16*8)}
		for i, line := range strings.Split(strings.TrimSpace(got), "\n")[2:18] {
			b, _ := hex.DecodeString(line)
			copy(kw.Mem[i*8:], b)
		}
		if d, ok := kw.Get(0xdeadbeef); !ok || binary.BigEndian.Uint32(d) != 0xdeadbeef^0x55aa55aa {
			t.Errorf("%s: key 0xdeadbeef reads %x %v", l, d, ok)
		}
	}
}

// TestLayoutNames: names parse, JSON carries them, the default is
// omitted (a hello or offer of before the option reads as the default).
func TestLayoutNames(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Layout
		err  string
	}{{"", LayoutPerSlot, ""}, {"per-slot-crc", LayoutPerSlot, ""}, {"dta-public", LayoutPublic, ""}, {"public", 0, `layout "public": want per-slot-crc or dta-public`}} {
		got, err := ParseLayout(tc.in)
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
			t.Errorf("%q: %v %v, want %v %q", tc.in, got, err, tc.want, tc.err)
		}
	}
	b, _ := json.Marshal(Hello{Layout: LayoutPublic})
	if !strings.Contains(string(b), `"layout":"dta-public"`) {
		t.Errorf("hello %s", b)
	}
	if b, _ := json.Marshal(Regions{}); strings.Contains(string(b), "layout") {
		t.Errorf("default regions %s", b)
	}
	var h Hello
	if err := json.Unmarshal([]byte(`{"layout":"dta-private"}`), &h); err == nil || !strings.Contains(err.Error(), `layout "dta-private"`) {
		t.Errorf("unknown layout: %v", err)
	}
}

// TestPublicLayoutCorrelated documents the public layout's weakness: its
// N slots are correlated, so N = 2 answers no more keys than N = 1 (the
// default layout's answer more at low load).
func TestPublicLayoutCorrelated(t *testing.T) {
	pub := LayoutPublic.LoadFactorTable(1<<14, []float64{0.25})[0]
	def := LayoutPerSlot.LoadFactorTable(1<<14, []float64{0.25})[0]
	if pub.Success[2] > pub.Success[1] || def.Success[2] <= def.Success[1]+0.03 || pub.Wrong+def.Wrong != 0 {
		t.Fatalf("at load 0.25: public N=1 %.3f N=2 %.3f, default N=1 %.3f N=2 %.3f, wrong %d+%d",
			pub.Success[1], pub.Success[2], def.Success[1], def.Success[2], pub.Wrong, def.Wrong)
	}
}

// TestPublicPoller: 4-byte entries without a sequence are read over
// several laps of the ring, the poller clearing half a ring ahead so an
// old lap's entry never passes for a new one; a hole is skipped.
func TestPublicPoller(t *testing.T) {
	const entries = 16
	mem := make([]byte, entries*4)
	put := func(pos uint64) {
		var d [4]byte
		binary.BigEndian.PutUint32(d[:], uint32(pos)+1000)
		LayoutPublic.PutEntry(mem[(pos%entries)*4:], pos, d[:])
	}
	p := NewPoller(mem, entries, 0, 1)
	p.Layout = LayoutPublic
	var got []uint32
	fn := func(_ uint64, d uint32) { got = append(got, d) }
	for pos := uint64(0); pos < 40; pos++ {
		put(pos)
		if pos%5 == 4 {
			p.Poll(100, fn)
		}
	}
	if p.Poll(100, fn); len(got) != 40 || got[0] != 1000 || got[39] != 1039 {
		t.Fatalf("read %d entries %v, want 40 from 1000", len(got), got)
	}
	// Nothing more: the slots past the poller hold the previous lap's
	// entries or were cleared, and neither reads as new.
	if n := p.Poll(100, fn); n != 0 {
		t.Fatalf("read %d stale entries %v", n, got[40:])
	}
	// A lost WRITE (position 40) leaves a hole that 41 shows.
	put(41)
	if q, ok := p.Ahead(8); !ok || q != 41 {
		t.Fatalf("ahead %d %v, want 41", q, ok)
	}
	p.Skip(41)
	if p.Poll(100, fn); len(got) != 41 || got[40] != 1041 || p.Lost != 1 {
		t.Fatalf("after the hole: %v, lost %d", got[40:], p.Lost)
	}
}
