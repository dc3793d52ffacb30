//go:build dpdk

package eal

// #include "shim.h"
import "C"

import "unsafe"

// benchParts runs shim_bench_parts (part 0-4, see shim.c) on receive queue
// 0 for pkts packets, with arena's slots of stride bytes and lens and wire
// as ReadSlots takes them; for BenchmarkReadSlotsParts.
func (p *Port) benchParts(part int, pkts uint64, arena []byte, stride int, lens []uint16, wire []uint32) uint64 {
	return uint64(C.shim_bench_parts(p.rxq[0].c, C.int(part), C.uint64_t(pkts),
		(*C.char)(unsafe.Pointer(unsafe.SliceData(arena))), C.uint64_t(min(len(arena)/stride, len(lens), len(wire))),
		C.uint32_t(stride), (*C.uint16_t)(unsafe.Pointer(unsafe.SliceData(lens))),
		(*C.uint32_t)(unsafe.Pointer(unsafe.SliceData(wire)))))
}
