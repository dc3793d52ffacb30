package dtamem

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/bits"
	"strings"

	"github.com/rdma-appliance/appliance/internal/dtawire"
)

// Key-Write stores each key in N of the collector's slots, the slots a
// power of two; each slot holds {CRC32(key), data}. A query reads the N
// slots and returns the data of a slot whose checksum matches, so a slot
// overwritten by another key reads as empty rather than as a wrong value.
//
// Slot n is a CRC32 of the key's four big-endian bytes and n, mod slots,
// with a different CRC polynomial for each n (the Tofino's hash units
// offer several). The DTA paper's CRC32(key || n) with one polynomial
// looks right but is not: a CRC is linear, so CRC(key||n) = L(key) xor c_n
// for one linear L, and two keys that collide in one row collide in every
// row (or in rows swapped), which leaves N > 1 no better than N = 1. The
// public collector also reused one CRC state across n, so its N > 1
// queries looked in other slots than its translator wrote.
var slotTables = [dtawire.MaxRedundancy]*crc32.Table{
	crc32.IEEETable,
	crc32.MakeTable(crc32.Castagnoli),
	crc32.MakeTable(crc32.Koopman),
	crc32.MakeTable(0xd5828281), // CRC-32Q
	crc32.MakeTable(0xd419cc15), // CRC-32/AUTOSAR
	crc32.MakeTable(0xe0a3e0c7), // Koopman's 0x8F6E37A0 family
	crc32.MakeTable(0xa833982b), // CRC-32D
	crc32.MakeTable(0xb5c7a6b3), // CRC-32K2
}

// KeyChecksum is the checksum stored beside a key's data.
func KeyChecksum(key uint32) uint32 { return crcKey(&ieeeSlicing, key, false, 0) }

// slicing4 holds a polynomial's tables for slicing-by-4: the four bytes
// of a key go through four independent lookups instead of a chain of
// four, which is what a query spends its time on besides memory.
// (hash/crc32 over a stack array would also make the array escape: an
// allocation per call on the translator's hot path.)
type slicing4 [4][256]uint32

func makeSlicing4(t *crc32.Table) (s slicing4) {
	s[0] = *t
	for i := 0; i < 256; i++ {
		c := t[i]
		for k := 1; k < 4; k++ {
			c = t[c&0xff] ^ c>>8
			s[k][i] = c
		}
	}
	return s
}

var (
	ieeeSlicing = makeSlicing4(crc32.IEEETable)
	slotSlicing = func() (out [dtawire.MaxRedundancy]slicing4) {
		for i, t := range slotTables {
			out[i] = makeSlicing4(t)
		}
		return out
	}()
)

// crcKey is the CRC32 of key's big-endian bytes, then n when withN.
func crcKey(s *slicing4, key uint32, withN bool, n byte) uint32 {
	c := ^uint32(0)
	// The four key bytes in wire order (big-endian), folded into the CRC
	// register (which consumes the lowest byte first).
	x := c ^ (key>>24 | key>>8&0xff00 | key<<8&0xff0000 | key<<24)
	c = s[3][byte(x)] ^ s[2][byte(x>>8)] ^ s[1][byte(x>>16)] ^ s[0][byte(x>>24)]
	if withN {
		c = s[0][byte(c)^n] ^ c>>8
	}
	return ^c
}

// Slot is the n-th slot of key in a table of slots entries (a power of
// two).
func Slot(key uint32, n int, slots uint64) uint64 {
	return uint64(crcKey(&slotSlicing[n%dtawire.MaxRedundancy], key, true, byte(n))) & (slots - 1)
}

// KeyWriteEntryLen is the size of one Key-Write slot for a data width.
func KeyWriteEntryLen(dataWidth int) int { return 4 + dataWidth }

// KeyIncrementSlot is the n-th counter of key in a Key-Increment
// count-min array of slots counters: the same hash as Key-Write, so a
// key's counters sit in N independent rows.
func KeyIncrementSlot(key uint32, n int, slots uint64) uint64 { return Slot(key, n, slots) }

// Layout is how a collector's memory is laid out: where Key-Write and
// Key-Increment put a key's N slots, the checksum beside Key-Write data,
// and the Append entry format. Translator and collector must agree on it,
// so the collector offers its layout in the exchange and each side
// refuses the other's when they differ (a translator writing one layout
// into memory read with the other would leave every query empty).
// Sketch-Merge and Postcarder regions are the same in both layouts.
type Layout uint8

const (
	// LayoutPerSlot is the default: slot n of a key is a CRC32 of the
	// key's big-endian bytes and n with a polynomial of its own per n
	// (slotTables), the checksum CRC32-IEEE of the big-endian key, and
	// Append entries are 8 bytes {data, sequence}.
	LayoutPerSlot Layout = iota
	// LayoutPublic is the public DTA collector's and Tofino
	// translator's: slot n is CRC32-IEEE of the key's four bytes in
	// little-endian order followed by the byte n, the checksum
	// CRC32-IEEE of those four key bytes stored little-endian, and
	// Append entries are the 4 data bytes alone. With it a Tofino
	// running the public translator writes into this collector, and
	// this translator into the public collector.
	//
	// Its weakness is the reason it is not the default. One polynomial
	// for every n makes the N slots correlated: a CRC is linear, so
	// CRC(k||n) = L(k) xor c_n, and two keys that collide in one slot
	// collide in all N; redundancy then buys no queryability beyond
	// N = 1 (LoadFactorTable shows it). Its 4-byte Append entries carry
	// no sequence, so a poller tells a new entry from an empty slot only
	// by a non-zero value: a report of data 0 is never read, and the
	// poller must clear slots ahead of itself to see the next lap (see
	// Poller).
	LayoutPublic
)

var layoutNames = [...]string{LayoutPerSlot: "per-slot-crc", LayoutPublic: "dta-public"}

// LayoutNames are the layouts' names, as spec files and the exchange
// spell them.
var LayoutNames = layoutNames[:]

// String is the layout's name.
func (l Layout) String() string {
	if int(l) < len(layoutNames) {
		return layoutNames[l]
	}
	return fmt.Sprintf("layout(%d)", uint8(l))
}

// ParseLayout reads a layout's name; empty is the default.
func ParseLayout(s string) (Layout, error) {
	if s == "" {
		return LayoutPerSlot, nil
	}
	for i, n := range layoutNames {
		if s == n {
			return Layout(i), nil
		}
	}
	return 0, fmt.Errorf("layout %q: want %s", s, strings.Join(LayoutNames, " or "))
}

// MarshalText implements encoding.TextMarshaler (the exchange's JSON).
func (l Layout) MarshalText() ([]byte, error) {
	if int(l) >= len(layoutNames) {
		return nil, fmt.Errorf("dta: unknown %v", l)
	}
	return []byte(l.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (l *Layout) UnmarshalText(b []byte) error {
	v, err := ParseLayout(string(b))
	if err != nil {
		return fmt.Errorf("dta: %w", err)
	}
	*l = v
	return nil
}

// Slot is the n-th slot of key in a table of slots entries (a power of
// two).
func (l Layout) Slot(key uint32, n int, slots uint64) uint64 {
	if l == LayoutPublic {
		// The key's bytes little-endian, as the public translator
		// reverses them before its hash (and the public collector
		// hashes a host-order key on x86): crcKey feeds key's bytes
		// big-endian, so it gets the reversed key.
		return uint64(crcKey(&ieeeSlicing, bits.ReverseBytes32(key), true, byte(n))) & (slots - 1)
	}
	return Slot(key, n, slots)
}

// KeyIncrementSlot is the n-th counter of key: Slot, in both layouts
// (the public translator hashes Key-Increment as Key-Write).
func (l Layout) KeyIncrementSlot(key uint32, n int, slots uint64) uint64 {
	return l.Slot(key, n, slots)
}

// KeyChecksum is the checksum stored beside a key's data, as the entry's
// first four bytes read big-endian.
func (l Layout) KeyChecksum(key uint32) uint32 {
	if l == LayoutPublic {
		// CRC32 of the little-endian key, stored little-endian (the
		// public translator swaps it so x86 reads it natively).
		return bits.ReverseBytes32(crcKey(&ieeeSlicing, bits.ReverseBytes32(key), false, 0))
	}
	return KeyChecksum(key)
}

// AppendEntryLen is the size of one Append entry.
func (l Layout) AppendEntryLen() int {
	if l == LayoutPublic {
		return 4
	}
	return AppendEntryLen
}

// PutEntry writes the entry of list position pos into e, as the
// translator's Append WRITE carries it.
func (l Layout) PutEntry(e []byte, pos uint64, data []byte) {
	if l == LayoutPublic {
		copy(e[0:4], data)
		return
	}
	PutEntry(e, pos, data)
}

// EntryAt reads position pos of a ring of entries entries: the entry's
// data, and whether the slot holds that position's entry. The public
// layout has no sequence to tell: a slot holds an entry when it is not
// zero, which is only right when the reader clears the slots of the
// previous lap before it reaches them (Poller does).
func (l Layout) EntryAt(mem []byte, entries, pos uint64) (uint32, bool) {
	if l == LayoutPublic {
		off := (pos % entries) * 4
		d := binary.BigEndian.Uint32(mem[off : off+4])
		return d, d != 0
	}
	return EntryAt(mem, entries, pos)
}
