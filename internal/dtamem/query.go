package dtamem

import (
	"encoding/binary"

	"github.com/rdma-appliance/appliance/internal/dtawire"
)

// QueryKeyWrite reads a key from a Key-Write table in collector memory:
// the data of the first of its N slots whose checksum matches, or false.
func QueryKeyWrite(mem []byte, key uint32, n int, slots uint64, dataWidth int) ([]byte, bool) {
	return LayoutPerSlot.QueryKeyWrite(mem, key, n, slots, dataWidth)
}

// QueryKeyWrite is the package's QueryKeyWrite in the layout.
func (l Layout) QueryKeyWrite(mem []byte, key uint32, n int, slots uint64, dataWidth int) ([]byte, bool) {
	el := uint64(KeyWriteEntryLen(dataWidth))
	sum := l.KeyChecksum(key)
	// Load every slot's checksum before comparing any: the N reads are
	// independent cache misses, and issued together they overlap.
	var off [dtawire.MaxRedundancy]uint64
	var got [dtawire.MaxRedundancy]uint32
	n = min(n, dtawire.MaxRedundancy)
	for i := 0; i < n; i++ {
		off[i] = l.Slot(key, i, slots) * el
		got[i] = binary.BigEndian.Uint32(mem[off[i] : off[i]+4])
	}
	for i := 0; i < n; i++ {
		if got[i] == sum {
			return mem[off[i]+4 : off[i]+el], true
		}
	}
	return nil, false
}

// QueryKeyWriteConsensus reads a key over its N slots like QueryKeyWrite,
// but with consensus k > 1 answers only when at least k of the slots whose
// checksum matches hold the same data: a slot another key overwrote fails
// the checksum, a slot holding an older value of the key disagrees. It
// returns the data most matching slots agree on (ties to the earlier
// slot; with k <= 1 the first matching slot, as QueryKeyWrite), how many
// slots match, and how many of those agree; data is nil when no slot
// matches or fewer than k agree.
func QueryKeyWriteConsensus(mem []byte, key uint32, n int, slots uint64, dataWidth, k int) (data []byte, matching, agreeing int) {
	return LayoutPerSlot.QueryKeyWriteConsensus(mem, key, n, slots, dataWidth, k)
}

// QueryKeyWriteConsensus is the package's QueryKeyWriteConsensus in the
// layout.
func (l Layout) QueryKeyWriteConsensus(mem []byte, key uint32, n int, slots uint64, dataWidth, k int) (data []byte, matching, agreeing int) {
	el := uint64(KeyWriteEntryLen(dataWidth))
	sum := l.KeyChecksum(key)
	var match [dtawire.MaxRedundancy][]byte
	for i := range min(n, dtawire.MaxRedundancy) {
		off := l.Slot(key, i, slots) * el
		if e := mem[off : off+el]; binary.BigEndian.Uint32(e) == sum {
			match[matching] = e[4:]
			matching++
		}
	}
	if matching == 0 {
		return nil, 0, 0
	}
	agree := func(i int) int {
		a := 0
		for j := range matching {
			if string(match[i]) == string(match[j]) {
				a++
			}
		}
		return a
	}
	best, bestN := 0, agree(0)
	if k > 1 {
		for i := 1; i < matching; i++ {
			if a := agree(i); a > bestN {
				best, bestN = i, a
			}
		}
		if bestN < k {
			return nil, matching, bestN
		}
	}
	return match[best], matching, bestN
}

// QueryKeyIncrement reads a key's count: the minimum of its N counters
// (count-min). The RNIC applies atomics in the collector's own byte order.
func QueryKeyIncrement(mem []byte, key uint32, n int, slots uint64) uint64 {
	return LayoutPerSlot.QueryKeyIncrement(mem, key, n, slots)
}

// QueryKeyIncrement is the package's QueryKeyIncrement in the layout.
func (l Layout) QueryKeyIncrement(mem []byte, key uint32, n int, slots uint64) uint64 {
	var m uint64
	for i := 0; i < n; i++ {
		off := l.KeyIncrementSlot(key, i, slots) * 8
		v := binary.NativeEndian.Uint64(mem[off : off+8])
		if i == 0 || v < m {
			m = v
		}
	}
	return m
}
