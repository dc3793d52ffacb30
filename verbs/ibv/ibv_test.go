package ibv

import (
	"errors"
	"syscall"
	"testing"
)

func TestDeviceNames(t *testing.T) {
	names, err := DeviceNames()
	switch {
	case !Available:
		if !errors.Is(err, ErrNotBuilt) {
			t.Fatalf("stub: %v", err)
		}
	case errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.ENODEV) || (err == nil && len(names) == 0):
		t.Skipf("no RDMA devices on this host (%v): the provider is linked but has nothing to open", err)
	case err != nil:
		t.Fatal(err)
	default:
		t.Logf("RDMA devices: %v", names)
	}
}
