package dta

import (
	"encoding/binary"
	"hash/crc32"
)

// Key-Write stores each key in N of the collector's slots: slot n
// (0..N-1) is CRC32(key || n) mod slots, the slots a power of two; each
// slot holds {CRC32(key), data}. A query reads the N slots and returns
// the data of a slot whose checksum matches, so a slot overwritten by
// another key reads as empty rather than as a wrong value.
//
// CRC32 is the IEEE polynomial (the Tofino hash unit's crc32), over the
// key's four big-endian bytes followed, for the slot index, by n as one
// byte. Each n starts a fresh CRC: the public collector reused one CRC
// state across n, so its queries for N > 1 looked at other slots than the
// translator wrote.

// KeyChecksum is the checksum stored beside a key's data.
func KeyChecksum(key uint32) uint32 {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], key)
	return crc32.ChecksumIEEE(b[:])
}

// Slot is the n-th slot of key in a table of slots entries (a power of
// two).
func Slot(key uint32, n int, slots uint64) uint64 {
	var b [5]byte
	binary.BigEndian.PutUint32(b[:4], key)
	b[4] = byte(n)
	return uint64(crc32.ChecksumIEEE(b[:])) & (slots - 1)
}

// KeyWriteEntryLen is the size of one Key-Write slot for a data width.
func KeyWriteEntryLen(dataWidth int) int { return 4 + dataWidth }

// KeyIncrementSlot is the n-th counter of key in a Key-Increment
// count-min array of slots counters: the same hash as Key-Write, so a
// key's counters sit in N independent rows.
func KeyIncrementSlot(key uint32, n int, slots uint64) uint64 { return Slot(key, n, slots) }
