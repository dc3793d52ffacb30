// Package hugemem maps memory outside the Go heap, on 2 MiB huge pages when
// the kernel has them reserved. Packet pools and RDMA-registered buffers live
// there: the garbage collector never scans them, and C code and NICs may keep
// their addresses. Advise asks for transparent huge pages under memory that
// stays in the Go heap, such as the dumper's capture arenas.
package hugemem

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// HugePageSize is the huge page size asked for.
const HugePageSize = 2 << 20

// Map maps size zeroed bytes, trying huge pages first when huge is set (and
// size is at least one huge page); it says whether it got them.
func Map(size int, huge bool) ([]byte, bool, error) {
	if huge && size >= HugePageSize {
		hsize := (size + HugePageSize - 1) &^ (HugePageSize - 1)
		b, err := unix.Mmap(-1, 0, hsize, unix.PROT_READ|unix.PROT_WRITE,
			unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_HUGETLB)
		if err == nil {
			return b[:size], true, nil
		}
	}
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	return b, false, err
}

// Unmap releases memory from Map (the whole mapping, whatever b's length).
func Unmap(b []byte) error { return unix.Munmap(b[:cap(b)]) }

// Advise asks the kernel to back the whole 2 MiB pages inside b with
// transparent huge pages (madvise MADV_HUGEPAGE), for memory that is not
// Map's: a large Go slice written once end to end, such as a capture
// arena, then takes a TLB miss per 2 MiB instead of per 4 KiB. It applies
// to pages faulted in after the call. It changes nothing where b holds no
// whole huge page, and a kernel without transparent huge pages (or with
// them turned off) answers with an error that leaves b as it was. On a Go
// slice the advice belongs to the address range and outlives the slice:
// what the runtime later puts there may be on huge pages too, which
// changes nothing but the page size.
func Advise(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := (start + HugePageSize - 1) &^ (HugePageSize - 1)
	hi := (start + uintptr(len(b))) &^ (HugePageSize - 1)
	if hi <= lo {
		return nil
	}
	return unix.Madvise(b[lo-start:hi-start], unix.MADV_HUGEPAGE)
}
