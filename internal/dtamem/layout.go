package dtamem

import (
	"hash/crc32"

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
