package dtamem

import (
	"encoding/binary"
	"fmt"
	"testing"
)

// putRecord writes a postcard record as the translator's WRITE lays it.
func putRecord(mem []byte, p *PostcardRegion, key, mask uint32, hops []uint32) {
	off := Slot(key, 0, p.Slots) * uint64(p.RecordLen())
	rec := mem[off : off+uint64(p.RecordLen())]
	binary.BigEndian.PutUint32(rec, KeyChecksum(key))
	binary.BigEndian.PutUint32(rec[4:], mask)
	for h, d := range hops {
		binary.BigEndian.PutUint32(rec[8+4*h:], d)
	}
}

func TestPostcardRecord(t *testing.T) {
	p := &PostcardRegion{Slots: 64, Hops: 5}
	mem := make([]byte, int(p.Slots)*p.RecordLen())
	putRecord(mem, p, 7, 0x1f, []uint32{70, 71, 72, 73, 74})
	putRecord(mem, p, 8, 0x0b, []uint32{80, 81, 0, 83, 0})
	putRecord(mem, p, 9, 0x3f, []uint32{90, 91, 92, 93, 94}) // a sixth hop on a 5-hop table

	full, ok := QueryPostcard(mem, p, 7)
	if !ok || !full.Complete() || len(full.Missing()) != 0 || p.FullMask() != 0x1f {
		t.Fatalf("complete record: %+v %v, missing %v", full, ok, full.Missing())
	}
	inc, ok := QueryPostcard(mem, p, 8)
	if !ok || inc.Complete() || fmt.Sprint(inc.Missing()) != "[2 4]" {
		t.Fatalf("incomplete record: %+v %v, missing %v", inc, ok, inc.Missing())
	}
	if got, ok := QueryPostcard(mem, p, 9); ok {
		t.Fatalf("a record naming hops beyond the table's answered: %+v", got)
	}
	for _, tc := range []struct {
		path  Path
		want  []uint32
		wrong string
	}{
		{full, []uint32{70, 71, 72, 73, 74}, "[]"},
		{full, []uint32{70, 71, 72, 73, 75}, "[4]"}, // the last hop is checked too
		{full, []uint32{0, 71, 72, 73, 74}, "[0]"},
		{inc, []uint32{80, 81, 99, 83, 99}, "[]"}, // missing hops are not wrong
		{inc, []uint32{80, 81, 82, 84, 84}, "[3]"},
		{full, []uint32{70, 71, 72, 73}, "[0 1 2 3 4]"},
	} {
		if got := fmt.Sprint(tc.path.Wrong(tc.want)); got != tc.wrong {
			t.Errorf("%v against %v: wrong hops %s, want %s", tc.path.Hops, tc.want, got, tc.wrong)
		}
	}
}
