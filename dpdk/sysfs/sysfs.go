// Package sysfs discovers the host's network devices the way an operator
// would look them up: netdevs with their MAC, MTU, speed, driver, PCI address
// and NUMA node from /sys/class/net, and the RDMA device behind each one
// (through rdmamap), so services can report NIC locality and pick cores on the
// NIC's NUMA node.
package sysfs

import (
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/Mellanox/rdmamap"

	"github.com/rdma-appliance/appliance/dpdk"
)

// Root is the sysfs mount; tests point it at a fake tree.
var Root = "/sys"

// Netdev describes one network device.
type Netdev struct {
	Name      string `json:"name"`
	IfIndex   int    `json:"ifindex"`
	MAC       string `json:"mac"`
	MTU       int    `json:"mtu"`
	OperState string `json:"operstate"`
	SpeedMbps int    `json:"speed_mbps"` // 0 when unknown (virtual devices)
	Driver    string `json:"driver,omitempty"`
	PCI       string `json:"pci,omitempty"`
	NUMANode  int    `json:"numa_node"` // -1 when unknown
	RDMA      string `json:"rdma_device,omitempty"`
}

func readString(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func readInt(path string, def int) int {
	v, err := strconv.Atoi(readString(path))
	if err != nil {
		return def
	}
	return v
}

// Lookup describes the netdev called name.
func Lookup(name string) (Netdev, error) {
	base := filepath.Join(Root, "class/net", name)
	if _, err := os.Stat(base); err != nil {
		return Netdev{}, err
	}
	d := Netdev{Name: name, IfIndex: readInt(base+"/ifindex", 0), MAC: readString(base + "/address"),
		MTU: readInt(base+"/mtu", 0), OperState: readString(base + "/operstate"), NUMANode: -1}
	if s := readInt(base+"/speed", 0); s > 0 {
		d.SpeedMbps = s
	}
	if dev, err := filepath.EvalSymlinks(base + "/device"); err == nil {
		d.PCI = filepath.Base(dev)
		d.NUMANode = readInt(base+"/device/numa_node", -1)
		if drv, err := filepath.EvalSymlinks(base + "/device/driver"); err == nil {
			d.Driver = filepath.Base(drv)
		}
	}
	if Root == "/sys" {
		if rd, err := rdmamap.GetRdmaDeviceForNetdevice(name); err == nil {
			d.RDMA = rd
		}
	}
	return d, nil
}

// List describes every netdev, sorted by name.
func List() ([]Netdev, error) {
	ents, err := os.ReadDir(filepath.Join(Root, "class/net"))
	if err != nil {
		return nil, err
	}
	var out []Netdev
	for _, e := range ents {
		if d, err := Lookup(e.Name()); err == nil {
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// RDMADevices lists the RDMA devices the kernel knows (empty without RDMA
// support, as on machines with no RNIC and no rxe/siw).
func RDMADevices() []string {
	if Root != "/sys" {
		ents, _ := os.ReadDir(filepath.Join(Root, "class/infiniband"))
		var out []string
		for _, e := range ents {
			out = append(out, e.Name())
		}
		return out
	}
	return rdmamap.GetRdmaDeviceList()
}

// HardwareAddr parses a MAC string, returning nil when it is not one.
func HardwareAddr(s string) net.HardwareAddr {
	hw, err := net.ParseMAC(s)
	if err != nil {
		return nil
	}
	return hw
}

// PortNUMANode is the NUMA node of the device behind a port string
// (eal:<PCI address>[,...] or afpacket:<netdev>[,...]; a bare name is a
// netdev), -1 when it has none or it cannot be told.
func PortNUMANode(port string) int {
	drv, dev, ok := strings.Cut(port, ":")
	if !ok {
		drv, dev = "afpacket", port
	}
	dev, _, _ = strings.Cut(dev, ",")
	if dev == "" || strings.ContainsAny(dev, "/") || dev == "." || dev == ".." {
		return -1
	}
	switch drv {
	case "eal":
		return readInt(filepath.Join(Root, "bus/pci/devices", dev, "numa_node"), -1)
	case "afpacket":
		return readInt(filepath.Join(Root, "class/net", dev, "device/numa_node"), -1)
	}
	return -1
}

// NodeCPUs lists the CPUs of a NUMA node (its cpulist, in DPDK's core
// list syntax), in order; nil when the node is unknown or the list does
// not parse.
func NodeCPUs(node int) []int {
	if node < 0 {
		return nil
	}
	cpus, err := dpdk.ParseCoreList(readString(filepath.Join(Root, "devices/system/node", "node"+strconv.Itoa(node), "cpulist")))
	if err != nil {
		return nil
	}
	return cpus
}
