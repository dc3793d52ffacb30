package dta

import "hash/crc32"

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
var slotTables = [MaxRedundancy]*crc32.Table{
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
func KeyChecksum(key uint32) uint32 { return crcKey(crc32.IEEETable, key, false, 0) }

// crcKey is the CRC32 of key's big-endian bytes, then n when withN. A
// byte-wise table walk: hash/crc32 over a stack array makes the array
// escape, an allocation per call on the translator's hot path.
func crcKey(tab *crc32.Table, key uint32, withN bool, n byte) uint32 {
	c := ^uint32(0)
	for i := 3; i >= 0; i-- {
		c = tab[byte(c)^byte(key>>(8*i))] ^ c>>8
	}
	if withN {
		c = tab[byte(c)^n] ^ c>>8
	}
	return ^c
}

// Slot is the n-th slot of key in a table of slots entries (a power of
// two).
func Slot(key uint32, n int, slots uint64) uint64 {
	return uint64(crcKey(slotTables[n%MaxRedundancy], key, true, byte(n))) & (slots - 1)
}

// KeyWriteEntryLen is the size of one Key-Write slot for a data width.
func KeyWriteEntryLen(dataWidth int) int { return 4 + dataWidth }

// KeyIncrementSlot is the n-th counter of key in a Key-Increment
// count-min array of slots counters: the same hash as Key-Write, so a
// key's counters sit in N independent rows.
func KeyIncrementSlot(key uint32, n int, slots uint64) uint64 { return Slot(key, n, slots) }
