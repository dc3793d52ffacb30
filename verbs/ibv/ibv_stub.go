//go:build !rdma || !cgo

package ibv

// Available says whether this build can use libibverbs.
const Available = false

// DeviceNames lists the RDMA devices libibverbs sees.
func DeviceNames() ([]string, error) { return nil, ErrNotBuilt }
