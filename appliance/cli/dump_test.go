package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/sysfs"
)

// TestNUMACores: --cores numa takes the port's NUMA node's cores that the
// process may use, leaves core 0 out when the node has more than enough,
// refuses when it has too few, and a port without a node takes the
// process's cores.
func TestNUMACores(t *testing.T) {
	allowed, err := dpdk.AllowedCores()
	if err != nil || len(allowed) < 2 || allowed[0] != 0 {
		t.Skipf("needs cores 0 and 1 allowed, have %v %v", allowed, err)
	}
	root := t.TempDir()
	old := sysfs.Root
	sysfs.Root = root
	t.Cleanup(func() { sysfs.Root = old })
	write := func(p, s string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("bus/pci/devices/0000:03:00.0/numa_node", "0\n")
	write("devices/system/node/node0/cpulist", fmt.Sprintf("0-%d\n", allowed[1]))
	if got, err := numaCores("eal:0000:03:00.0", 1); err != nil || fmt.Sprint(got) != fmt.Sprint(allowed[1:2]) {
		t.Fatalf("one queue: %v %v", got, err)
	}
	if got, err := numaCores("eal:0000:03:00.0", 2); err != nil || fmt.Sprint(got) != fmt.Sprint(allowed[:2]) {
		t.Fatalf("two queues: %v %v", got, err)
	}
	if _, err := numaCores("eal:0000:03:00.0", 64); err == nil || !strings.Contains(err.Error(), "NUMA node 0") {
		t.Fatalf("64 queues: %v", err)
	}
	if got, err := numaCores("ring:x", 1); err != nil || got[0] != allowed[1] {
		t.Fatalf("no node: %v %v", got, err)
	}
}
