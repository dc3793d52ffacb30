//go:build !dpdk

package eal

import (
	"fmt"

	"github.com/rdma-appliance/appliance/dpdk"
)

// Enabled says whether this build has the DPDK driver.
const Enabled = false

// Init fails: this build has no DPDK.
func Init(args []string) error { return ErrNoDPDK }

// Initialized is always false in a build without DPDK.
func Initialized() bool { return false }

// Args returns nil in a build without DPDK.
func Args() []string { return nil }

type stubDriver struct{}

// Open names the device so that "appliance" says which port could not open
// and why.
func (stubDriver) Open(dev string, _ dpdk.Config) (dpdk.Port, error) {
	return nil, fmt.Errorf("device %q: %w", dev, ErrNoDPDK)
}

func init() { dpdk.RegisterDriver("eal", stubDriver{}) }
