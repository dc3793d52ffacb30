package dtacollector

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/internal/dtamem"
	"github.com/rdma-appliance/appliance/internal/dtawire"
)

const publicSpec = `name: pub
layout: dta-public
redundancy: 2
key-write: {slots: 65536}
key-increment: {slots: 65536}
append:
  batch: 4
  lists:
    - {id: 1, entries: 64, recent: 8}
`

// TestPublicLayout: a collector with layout dta-public refuses a
// translator writing the default layout with both named, takes one
// writing the public layout, and answers what it wrote: Key-Write in
// the public slots (checked against CRC32-IEEE computed here) and 4-byte
// Append entries over two laps of the ring.
func TestPublicLayout(t *testing.T) {
	var got []uint32
	b := newBed(t, publicSpec, Options{OnEntry: func(_ uint32, _ uint64, d uint32) { got = append(got, d) }})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _, err := dtamem.Dial(ctx, b.addr, dtamem.Hello{Name: "t", IP: transIP, MAC: b.mac.String(), QPN: 9, PSN: 1}, b.key)
	if err == nil || !strings.Contains(err.Error(), "memory layouts differ: the translator writes per-slot-crc, the collector serves dta-public") {
		t.Fatalf("a default-layout translator: %v", err)
	}
	b.layout = dtamem.LayoutPublic
	x := b.dial(0x55, 7)
	if x.offer.Regions.Layout != dtamem.LayoutPublic {
		t.Fatalf("offer layout %v", x.offer.Regions.Layout)
	}
	for k := uint32(1); k <= 50; k++ {
		x.send(&dtawire.Report{Opcode: dtawire.OpKeyWrite, Redundancy: 2, Key: k, Data: u32(k * 3)})
		x.send(&dtawire.Report{Opcode: dtawire.OpKeyIncrement, Redundancy: 2, Key: k % 7, Counter: 2})
	}
	var want []uint32
	for i := uint32(1); i <= 100; i++ { // 100 entries: over a lap of 64
		want = append(want, i)
		x.send(&dtawire.Report{Opcode: dtawire.OpAppend, ListID: 1, Data: u32(i)})
		if i%20 == 0 {
			x.settle()
			waitFor(t, "the list's poller", func() bool { st, _ := b.c.List(1, 0); return st.Read == uint64(i) })
		}
	}
	x.settle()
	for k := uint32(1); k <= 50; k++ {
		r, err := b.c.KeyWrite(k, 0)
		if err != nil || r.Value != k*3 {
			t.Fatalf("key-write %d: %+v %v", k, r, err)
		}
	}
	// Key 5's first slot, found as the public collector finds it.
	le := binary.LittleEndian.AppendUint32(nil, 5)
	slot := crc32.ChecksumIEEE(append(le, 0)) & 65535
	e := b.c.kwMem[slot*8 : slot*8+8]
	if binary.LittleEndian.Uint32(e) != crc32.ChecksumIEEE(le) || binary.BigEndian.Uint32(e[4:]) != 15 {
		t.Fatalf("key 5 slot %d: % x", slot, e)
	}
	if r, err := b.c.KeyIncrement(3); err != nil || r.Count != 14 {
		t.Fatalf("key-increment 3: %+v %v", r, err)
	}
	st, err := b.c.List(1, 0)
	if err != nil || st.Read != 100 || len(got) != 100 || got[99] != 100 || len(st.Recent) != 8 || st.Recent[7].Data != 100 {
		t.Fatalf("list: %+v %v, read %d", st, err, len(got))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("entry %d: %d, want %d", i, got[i], want[i])
		}
	}
	if _, err := DecodeSpec("c.yml", []byte("layout: dta\nkey-write: {slots: 16}\n")); err == nil ||
		!strings.Contains(err.Error(), `c.yml:1: layout: layout "dta": want per-slot-crc or dta-public`) {
		t.Fatalf("a bad layout: %v", err)
	}
	if !errors.Is(dtamem.LayoutMismatch(0, 1), dtamem.ErrLayout) {
		t.Fatal("mismatch is not ErrLayout")
	}
}
