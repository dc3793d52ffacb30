package verbs

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// AllocBuffer maps n bytes of zeroed memory outside the Go heap, on huge
// pages when asked and available. Memory registered with a hardware provider
// must come from here: the NIC writes into it at any time, and cgo forbids
// handing Go heap memory to C for longer than a call. The soft provider
// accepts any buffer.
func AllocBuffer(n int, huge bool) ([]byte, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: buffer size %d", ErrInvalidArgument, n)
	}
	const hugeSize = 2 << 20
	if huge {
		size := (n + hugeSize - 1) &^ (hugeSize - 1)
		if b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE,
			unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_HUGETLB); err == nil {
			return b[:n], nil
		}
	}
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("verbs: mapping %d bytes: %w", n, err)
	}
	return b, nil
}

// FreeBuffer unmaps a buffer from AllocBuffer.
func FreeBuffer(b []byte) error { return unix.Munmap(b[:cap(b)]) }
