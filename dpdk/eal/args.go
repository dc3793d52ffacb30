package eal

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/rdma-appliance/appliance/dpdk"
)

// ErrNoDPDK is returned by everything in a build without the dpdk tag.
var ErrNoDPDK = errors.New("eal: built without dpdk: rebuild with -tags dpdk")

// EnvArgs names the environment variable whose whitespace-separated words
// replace DefaultArgs when a port is opened before Init.
const EnvArgs = "APPLIANCE_EAL_ARGS"

// MaxBurst is the most packets one RxBurst or TxBurst call moves; longer
// slices are served in part, as the dpdk.Port contract allows.
const MaxBurst = 512

// DefaultArgs are EAL options (without a program name) that work on any Linux
// machine: no huge pages, no PCI scan, no shared runtime files (so several
// processes, testpmd included, can run side by side) and no telemetry socket,
// on the first two cores this process may use.
func DefaultArgs() []string {
	lcores := "0-1"
	if cores, err := dpdk.AllowedCores(); err == nil && len(cores) > 0 {
		lcores = fmt.Sprint(cores[0])
		if len(cores) > 1 {
			lcores += "," + fmt.Sprint(cores[1])
		}
	}
	return []string{"-l", lcores, "--no-huge", "--no-pci", "--no-shconf", "--no-telemetry",
		"-m", "256", "--log-level=lib.eal:error"}
}

// lazyArgs are the arguments the driver initialises the EAL with when a port
// is opened first: $APPLIANCE_EAL_ARGS, or DefaultArgs plus the device: a vdev
// as --vdev, anything else (a PCI address) as the only device the PCI scan may
// take, so that the EAL does not grab every NIC bound to vfio-pci.
func lazyArgs(devargs string) []string {
	if env := strings.Fields(os.Getenv(EnvArgs)); len(env) > 0 {
		return env
	}
	args := DefaultArgs()
	if isVdev(devargs) {
		return append(args, "--vdev="+devargs)
	}
	for i, a := range args {
		if a == "--no-pci" {
			args = append(args[:i], args[i+1:]...)
			break
		}
	}
	return append(args, "-a", devargs)
}

// isVdev says whether a device name belongs to DPDK's virtual device bus; the
// vdev drivers are named net_* and keep eth_* as legacy aliases.
func isVdev(dev string) bool {
	return strings.HasPrefix(dev, "net_") || strings.HasPrefix(dev, "eth_")
}

// devargs joins a device name and its options into DPDK's "name,k=v,..." form,
// in key order so that the same port string always gives the same device.
func devargs(dev string, opts map[string]string) string {
	if len(opts) == 0 {
		return dev
	}
	keys := make([]string, 0, len(opts))
	for k := range opts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(dev)
	for _, k := range keys {
		b.WriteString(",")
		b.WriteString(k)
		if v := opts[k]; v != "" {
			b.WriteString("=")
			b.WriteString(v)
		}
	}
	return b.String()
}

// vdevArgs collects the --vdev/--vdev= devargs of an EAL command line by
// device name, so a vdev given at initialisation is recreated with the same
// arguments when its port is opened again after a Close.
func vdevArgs(args []string) map[string]string {
	m := map[string]string{}
	for i := 0; i < len(args); i++ {
		var v string
		switch a := args[i]; {
		case strings.HasPrefix(a, "--vdev="):
			v = strings.TrimPrefix(a, "--vdev=")
		case a == "--vdev" && i+1 < len(args):
			i++
			v = args[i]
		default:
			continue
		}
		name, _, _ := strings.Cut(v, ",")
		m[name] = v
	}
	return m
}

func sameArgs(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
