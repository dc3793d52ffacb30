package dtamem

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"

	"github.com/rdma-appliance/appliance/internal/dtawire"
)

// A sketch at the collector is Columns columns of Rows 4-byte big-endian
// counters, column-major: column c starts at Addr + c*Rows*4. Every
// reporter keeps a sketch of the same geometry over its own traffic and
// sends it a column per Sketch-Merge report, columns in order; the
// translator merges a column once every reporter has sent it (Count-Min
// counters summed, HyperLogLog registers maxed) and writes Group merged
// columns with one WRITE, so the collector's memory holds the network-wide
// sketch and the collector's CPU never merges anything.
//
// Count-Min: row r of key is counted in column Slot(key, r, Columns), so
// a point query reads one counter per row in different columns and takes
// the minimum. HyperLogLog: the m = Columns*Rows registers are numbered
// c*Rows + r; a key's register and rank come from one 64-bit hash.

// SketchRegion is one sketch at a collector.
type SketchRegion struct {
	Addr    uint64 `json:"addr"`
	RKey    uint32 `json:"rkey"`
	Kind    uint8  `json:"kind"`    // SketchCountMin or SketchHyperLogLog
	Columns uint32 `json:"columns"` // a power of two
	Rows    int    `json:"rows"`    // counters per column
	// Reporters is how many reporters contribute (ids 0..Reporters-1):
	// a column is written once all of them sent it.
	Reporters int `json:"reporters"`
	// Group is how many merged columns one WRITE carries (default: as
	// many as fit in 1024 bytes, at most Columns).
	Group int `json:"group,omitempty"`
}

// MaxReporters bounds a sketch's reporters (a column's contributions are
// a 64-bit mask).
const MaxReporters = 64

// ColumnLen is one column's size in collector memory.
func (s *SketchRegion) ColumnLen() int { return s.Rows * 4 }

// Len is the sketch's size in collector memory.
func (s *SketchRegion) Len() int { return int(s.Columns) * s.ColumnLen() }

// GroupColumns is how many merged columns one WRITE carries, the default
// applied.
func (s *SketchRegion) GroupColumns() int {
	if s.Group > 0 {
		return s.Group
	}
	g := max(1, 1024/s.ColumnLen())
	return min(g, int(s.Columns))
}

// Validate checks the sketch's geometry.
func (s *SketchRegion) Validate() error {
	switch {
	case s.Kind > dtawire.SketchHyperLogLog:
		return fmt.Errorf("kind %d: 0 (count-min) or 1 (hyperloglog)", s.Kind)
	case s.Columns == 0 || s.Columns&(s.Columns-1) != 0:
		return fmt.Errorf("columns %d: a power of two", s.Columns)
	case s.Rows < 1 || s.Rows > dtawire.MaxSketchCounters:
		return fmt.Errorf("rows %d: 1..%d", s.Rows, dtawire.MaxSketchCounters)
	case s.Kind == dtawire.SketchCountMin && s.Rows > dtawire.MaxRedundancy:
		return fmt.Errorf("rows %d: a count-min sketch has at most %d rows (one hash each)", s.Rows, dtawire.MaxRedundancy)
	case s.Kind == dtawire.SketchHyperLogLog && (s.Rows&(s.Rows-1) != 0 || int(s.Columns)*s.Rows < 16):
		return fmt.Errorf("hyperloglog %d x %d registers: a power of two, at least 16", s.Columns, s.Rows)
	case s.Reporters < 1 || s.Reporters > MaxReporters:
		return fmt.Errorf("reporters %d: 1..%d", s.Reporters, MaxReporters)
	case s.Group < 0 || s.GroupColumns()*s.ColumnLen() > 4096 || int(s.Columns)%s.GroupColumns() != 0:
		return fmt.Errorf("group %d: divides the %d columns, at most 4096 bytes a WRITE", s.Group, s.Columns)
	}
	return nil
}

// SketchCount is a Count-Min point query over a sketch in memory laid out
// as the collector's (big-endian counters): the minimum of the key's
// counters, one per row.
func SketchCount(mem []byte, s *SketchRegion, key uint32) uint32 {
	var m uint32 = math.MaxUint32
	for r := 0; r < s.Rows; r++ {
		c := Slot(key, r, uint64(s.Columns))
		off := (int(c)*s.Rows + r) * 4
		m = min(m, binary.BigEndian.Uint32(mem[off:]))
	}
	return m
}

// HLLHash is the 64-bit hash a HyperLogLog sketch uses for a key
// (SplitMix64's finaliser: every key bit reaches every hash bit).
func HLLHash(key uint64) uint64 {
	z := key + 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// HLLRegister is a key's register (of m, a power of two) and rank: the
// low log2(m) bits of the hash pick the register, the leading zeros of
// the rest plus one are the rank.
func HLLRegister(key uint64, m int) (int, uint32) {
	h := HLLHash(key)
	p := bits.TrailingZeros(uint(m))
	rest := h >> p
	rank := bits.LeadingZeros64(rest) - p + 1
	return int(h & uint64(m-1)), uint32(rank)
}

// SketchCardinality is a HyperLogLog estimate over a sketch in memory
// laid out as the collector's: the raw estimate, linear counting while
// it is small and registers are still empty (Flajolet et al. 2007).
func SketchCardinality(mem []byte, s *SketchRegion) float64 {
	m := int(s.Columns) * s.Rows
	sum, zeros := 0.0, 0
	for i := 0; i < m; i++ {
		v := binary.BigEndian.Uint32(mem[4*i:])
		if v == 0 {
			zeros++
		}
		sum += math.Ldexp(1, -int(min(v, 64)))
	}
	mf := float64(m)
	var alpha float64
	switch m {
	case 16:
		alpha = 0.673
	case 32:
		alpha = 0.697
	case 64:
		alpha = 0.709
	default:
		alpha = 0.7213 / (1 + 1.079/mf)
	}
	e := alpha * mf * mf / sum
	if e <= 2.5*mf && zeros > 0 {
		return mf * math.Log(mf/float64(zeros))
	}
	return e
}

// Sketch is a reporter's sketch of a region's geometry: what a switch
// keeps over its traffic and sends a column at a time.
type Sketch struct {
	Kind    uint8
	Columns uint32
	Rows    int
	C       []uint32 // column-major, as at the collector
}

// NewSketch makes an empty sketch of s's geometry.
func NewSketch(s *SketchRegion) *Sketch {
	return &Sketch{Kind: s.Kind, Columns: s.Columns, Rows: s.Rows, C: make([]uint32, int(s.Columns)*s.Rows)}
}

// Add counts n for key (Count-Min) or adds key to the set (HyperLogLog,
// n ignored).
func (k *Sketch) Add(key uint32, n uint32) {
	if k.Kind == dtawire.SketchHyperLogLog {
		i, rank := HLLRegister(uint64(key), len(k.C))
		k.C[i] = max(k.C[i], rank)
		return
	}
	for r := 0; r < k.Rows; r++ {
		k.C[int(Slot(key, r, uint64(k.Columns)))*k.Rows+r] += n
	}
}

// Column is column c's counters.
func (k *Sketch) Column(c uint32) []uint32 { return k.C[int(c)*k.Rows : int(c+1)*k.Rows] }

// Reset empties the sketch for the next round.
func (k *Sketch) Reset() { clear(k.C) }

// Report fills r with column c as Sketch-Merge report of sketch id from
// reporter; counters is scratch of at least Rows*4 bytes that r.Counters
// will alias.
func (k *Sketch) Report(r *dtawire.Report, id, reporter uint16, c uint32, counters []byte) {
	col := k.Column(c)
	for i, v := range col {
		binary.BigEndian.PutUint32(counters[4*i:], v)
	}
	*r = dtawire.Report{Opcode: dtawire.OpSketchMerge, SketchID: id, ReporterID: reporter, Column: c, Kind: k.Kind,
		Counters: counters[:4*len(col)]}
}
