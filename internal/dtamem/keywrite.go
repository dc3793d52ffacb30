package dtamem

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// KeyWriteTable is a Key-Write table in memory laid out as a collector's
// (the same slots and entries the translator's WRITEs produce). Put is
// what the RNIC does for one report; Get is the collector's query.
type KeyWriteTable struct {
	Mem       []byte
	Slots     uint64
	N         int
	DataWidth int
	Layout    Layout
}

// NewKeyWriteTable allocates a table.
func NewKeyWriteTable(slots uint64, n, dataWidth int) *KeyWriteTable {
	return &KeyWriteTable{Mem: make([]byte, slots*uint64(KeyWriteEntryLen(dataWidth))), Slots: slots, N: n, DataWidth: dataWidth}
}

// Put writes key's N slots.
func (t *KeyWriteTable) Put(key uint32, data []byte) {
	el := uint64(KeyWriteEntryLen(t.DataWidth))
	sum := t.Layout.KeyChecksum(key)
	for i := 0; i < t.N; i++ {
		e := t.Mem[t.Layout.Slot(key, i, t.Slots)*el:][:el]
		binary.BigEndian.PutUint32(e, sum)
		copy(e[4:], data)
	}
}

// Get is QueryKeyWrite on the table.
func (t *KeyWriteTable) Get(key uint32) ([]byte, bool) {
	return t.Layout.QueryKeyWrite(t.Mem, key, t.N, t.Slots, t.DataWidth)
}

// LoadRow is one line of the load-factor experiment.
type LoadRow struct {
	Load    float64    // keys written / slots
	Success [5]float64 // share of keys still answered correctly, by N (1..4)
	Wrong   int        // answers with another key's data (must stay 0)
}

// LoadFactorTable writes keys into tables of the given slots at each
// load factor and queries every key written, as the paper's Key-Write
// evaluation does: success falls with load, and redundancy N trades
// memory writes for queryability (N = 2 the sweet spot). Keys are written
// in order, so the oldest are the ones overwritten.
func LoadFactorTable(slots uint64, loads []float64) []LoadRow {
	return LayoutPerSlot.LoadFactorTable(slots, loads)
}

// LoadFactorTable is the package's LoadFactorTable in the layout: the
// public layout's correlated slots show as N > 1 doing no better than
// N = 1.
func (l Layout) LoadFactorTable(slots uint64, loads []float64) []LoadRow {
	var rows []LoadRow
	for _, lf := range loads {
		row := LoadRow{Load: lf}
		keys := int(lf * float64(slots))
		for n := 1; n <= 4; n++ {
			t := NewKeyWriteTable(slots, n, 4)
			t.Layout = l
			var d [4]byte
			for k := 0; k < keys; k++ {
				binary.BigEndian.PutUint32(d[:], uint32(k)*2654435761)
				t.Put(uint32(k)*7919+1, d[:])
			}
			ok := 0
			for k := 0; k < keys; k++ {
				got, found := t.Get(uint32(k)*7919 + 1)
				if !found {
					continue
				}
				if binary.BigEndian.Uint32(got) == uint32(k)*2654435761 {
					ok++
				} else {
					row.Wrong++
				}
			}
			if keys > 0 {
				row.Success[n] = float64(ok) / float64(keys)
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// FormatLoadTable renders the experiment.
func FormatLoadTable(slots uint64, rows []LoadRow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Key-Write query success by load factor (%d slots, keys written oldest first)\n", slots)
	fmt.Fprintf(&b, "%6s %8s %8s %8s %8s %6s\n", "load", "N=1", "N=2", "N=3", "N=4", "wrong")
	for _, r := range rows {
		fmt.Fprintf(&b, "%6.2f %7.1f%% %7.1f%% %7.1f%% %7.1f%% %6d\n", r.Load, 100*r.Success[1], 100*r.Success[2],
			100*r.Success[3], 100*r.Success[4], r.Wrong)
	}
	return b.String()
}
