package sysfs

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFakeTree(t *testing.T) {
	root := t.TempDir()
	old := Root
	Root = root
	t.Cleanup(func() { Root = old })
	pci := filepath.Join(root, "devices/pci0000:00/0000:3b:00.0")
	write(t, pci+"/numa_node", "1")
	write(t, filepath.Join(root, "bus/pci/drivers/mlx5_core/.keep"), "")
	if err := os.Symlink(filepath.Join(root, "bus/pci/drivers/mlx5_core"), pci+"/driver"); err != nil {
		t.Fatal(err)
	}
	nd := filepath.Join(root, "class/net/ens1f0")
	write(t, nd+"/ifindex", "4")
	write(t, nd+"/address", "b8:ce:f6:00:00:01")
	write(t, nd+"/mtu", "9000")
	write(t, nd+"/operstate", "up")
	write(t, nd+"/speed", "100000")
	if err := os.Symlink(pci, nd+"/device"); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(root, "class/net/lo/ifindex"), "1")
	write(t, filepath.Join(root, "class/net/lo/speed"), "-1")
	write(t, filepath.Join(root, "class/infiniband/mlx5_0/.keep"), "")

	devs, err := List()
	if err != nil || len(devs) != 2 {
		t.Fatalf("List: %v %v", devs, err)
	}
	d := devs[0]
	if d.Name != "ens1f0" || d.NUMANode != 1 || d.PCI != "0000:3b:00.0" || d.Driver != "mlx5_core" ||
		d.SpeedMbps != 100000 || d.MTU != 9000 || d.IfIndex != 4 || HardwareAddr(d.MAC) == nil {
		t.Fatalf("ens1f0: %+v", d)
	}
	if lo := devs[1]; lo.NUMANode != -1 || lo.SpeedMbps != 0 || lo.PCI != "" {
		t.Fatalf("lo: %+v", lo)
	}
	if r := RDMADevices(); len(r) != 1 || r[0] != "mlx5_0" {
		t.Fatalf("RDMA devices %v", r)
	}
	if _, err := Lookup("nope"); err == nil {
		t.Fatal("missing netdev found")
	}
	// The NUMA node behind a port string, and the node's CPUs.
	if err := os.MkdirAll(filepath.Join(root, "bus/pci/devices"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(pci, filepath.Join(root, "bus/pci/devices/0000:3b:00.0")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(root, "devices/system/node/node1/cpulist"), "8-10,24\n")
	write(t, filepath.Join(root, "devices/system/node/node3/cpulist"), "8-10,x\n")
	for port, want := range map[string]int{"eal:0000:3b:00.0": 1, "eal:0000:3b:00.0,rxq=4": 1, "afpacket:ens1f0,fanout=hash": 1,
		"ens1f0": 1, "lo": -1, "eal:0000:99:00.0": -1, "ring:x": -1, "eal:../../etc": -1, "afpacket:": -1} {
		if got := PortNUMANode(port); got != want {
			t.Errorf("PortNUMANode(%q) = %d, want %d", port, got, want)
		}
	}
	if got := NodeCPUs(1); fmt.Sprint(got) != "[8 9 10 24]" {
		t.Errorf("node 1 CPUs %v", got)
	}
	if got := NodeCPUs(2); got != nil {
		t.Errorf("node 2 CPUs %v", got)
	}
	if got := NodeCPUs(3); got != nil {
		t.Errorf("node 3's list does not parse, CPUs %v", got)
	}
}

func TestRealHost(t *testing.T) {
	devs, err := List()
	if err != nil {
		t.Skipf("no /sys/class/net here: %v", err)
	}
	found := false
	for _, d := range devs {
		if d.Name == "lo" {
			found = true
		}
	}
	if !found {
		t.Fatalf("loopback missing from %v", devs)
	}
	_ = RDMADevices() // must not fail without RDMA support
}
