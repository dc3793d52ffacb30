package ibv

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/rdma-appliance/appliance/verbs"
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

func TestProvider(t *testing.T) {
	registered := false
	for _, p := range verbs.Providers() {
		registered = registered || p == "ibv"
	}
	if registered != Available {
		t.Fatalf("ibv provider registered=%v in a build with Available=%v", registered, Available)
	}
	if !Available {
		return
	}
	devs, err := verbs.DeviceList()
	if err != nil && !strings.Contains(err.Error(), "provider ibv") {
		t.Fatalf("a failing provider is not named: %v", err)
	}
	if _, err := verbs.OpenDevice("ibv:no_such_dev0"); !errors.Is(err, verbs.ErrNoDevice) {
		t.Fatalf("opening a missing device: %v", err)
	}
	if len(devs) == 0 {
		t.Skipf("no RDMA devices (%v): the QP tests need an RNIC", err)
	}
	d, err := verbs.OpenDevice(devs[0].Name)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	pa, err := d.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: port 1 %v, %d RoCEv2 GIDs, active MTU %v", devs[0].Name, pa.State, len(pa.GIDs), pa.ActiveMTU)
}
