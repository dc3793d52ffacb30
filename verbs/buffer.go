package verbs

import (
	"fmt"

	"github.com/rdma-appliance/appliance/dpdk/hugemem"
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
	b, _, err := hugemem.Map(n, huge)
	if err != nil {
		return nil, fmt.Errorf("verbs: mapping %d bytes: %w", n, err)
	}
	return b, nil
}

// FreeBuffer unmaps a buffer from AllocBuffer.
func FreeBuffer(b []byte) error { return hugemem.Unmap(b) }
