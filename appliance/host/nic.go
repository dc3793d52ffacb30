package host

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/sysfs"
)

// dpdkDrivers are the kernel drivers that hand a PCI function to a DPDK
// poll-mode driver.
var dpdkDrivers = []string{"vfio-pci", "uio_pci_generic", "igb_uio"}

// bifurcated are kernel drivers whose ports DPDK drives without rebinding
// (the mlx5 PMD works beside mlx5_core through verbs).
var bifurcated = []string{"mlx5_core"}

func isPCIAddr(s string) bool {
	// 0000:3b:00.0
	return len(s) == 12 && s[4] == ':' && s[7] == ':' && s[10] == '.'
}

// physical lists the netdevs backed by a device (PCI, virtio, auxiliary),
// leaving out lo, veths, bridges, tunnels and the like.
func physical() []sysfs.Netdev {
	all, _ := sysfs.List()
	var out []sysfs.Netdev
	for _, d := range all {
		if d.PCI != "" {
			out = append(out, d)
		}
	}
	return out
}

// CheckNICs lists the host's NICs with driver, NUMA node and RDMA device,
// which is what an operator matches --cores and ports against.
func (h *Host) CheckNICs(_ context.Context) Result {
	var r Result
	r.set(OK)
	nics := physical()
	if len(nics) == 0 {
		r.set(Warn)
		r.detail("no netdev backed by a device: only virtual ones (the software twins still run on ring: and afpacket: ports)")
		return r
	}
	for _, d := range nics {
		speed := "speed unknown"
		if d.SpeedMbps > 0 {
			speed = fmt.Sprintf("%d Gb/s", d.SpeedMbps/1000)
		}
		rdma := ""
		if d.RDMA != "" {
			rdma = ", RDMA " + d.RDMA
		}
		r.detail("%s: driver %s, device %s, NUMA node %d, %s, %s, MTU %d%s", d.Name, dashIfEmpty(d.Driver), d.PCI,
			d.NUMANode, d.OperState, speed, d.MTU, rdma)
	}
	return r
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// PCIPort is a PCI function a DPDK poll-mode driver can take.
type PCIPort struct {
	Addr   string `json:"addr"`
	Driver string `json:"driver"`
	NUMA   int    `json:"numa_node"`
	Vendor string `json:"vendor,omitempty"`
	Device string `json:"device,omitempty"`
}

// DPDKPorts lists PCI functions bound to vfio-pci or a uio driver, and those
// of bifurcated drivers (mlx5_core), by driver then address.
func (h *Host) DPDKPorts() []PCIPort {
	var out []PCIPort
	for _, drv := range append(append([]string(nil), dpdkDrivers...), bifurcated...) {
		for _, name := range dirNames(h.sys("bus/pci/drivers", drv)) {
			if !isPCIAddr(name) {
				continue
			}
			dev := h.sys("bus/pci/devices", name)
			p := PCIPort{Addr: name, Driver: drv, NUMA: -1}
			if n, ok := readInt(dev + "/numa_node"); ok {
				p.NUMA = n
			}
			p.Vendor, _ = readString(dev + "/vendor")
			p.Device, _ = readString(dev + "/device")
			out = append(out, p)
		}
	}
	return out
}

// CheckDPDKPorts warns when no port is bound for DPDK: eal: ports then only
// reach virtual devices, and the afpacket driver (kernel path, lower rates)
// is what is left for real NICs.
func (h *Host) CheckDPDKPorts(_ context.Context) Result {
	var r Result
	r.set(OK)
	r.detail("port drivers in this build: %s", strings.Join(dpdk.Drivers(), ", "))
	ports := h.DPDKPorts()
	vfio := false
	for _, p := range ports {
		how := "bound for DPDK"
		if p.Driver == "mlx5_core" {
			how = "bifurcated: DPDK's mlx5 PMD drives it beside the kernel"
		}
		r.detail("%s: %s (%s), NUMA node %d, id %s:%s", p.Addr, p.Driver, how, p.NUMA, dashIfEmpty(p.Vendor), dashIfEmpty(p.Device))
		if p.Driver == "vfio-pci" {
			vfio = true
		}
	}
	if len(ports) == 0 {
		r.set(Warn)
		var loaded []string
		for _, d := range dpdkDrivers {
			if _, err := os.Stat(h.sys("bus/pci/drivers", d)); err == nil {
				loaded = append(loaded, d)
			}
		}
		r.detail("no PCI port bound to %s (drivers loaded: %s): eal: ports reach only virtual devices; afpacket: works on any netdev",
			strings.Join(dpdkDrivers, ", "), orNone(loaded))
		r.fix("modprobe vfio-pci; dpdk-devbind.py --bind=vfio-pci 0000:3b:00.0 (the NIC's PCI address: appliance ports); Mellanox NICs need no rebinding")
		return r
	}
	if vfio {
		groups := dirNames(h.sys("kernel/iommu_groups"))
		noiommu, _ := readString(h.sys("module/vfio/parameters/enable_unsafe_noiommu_mode"))
		switch {
		case len(groups) > 0:
			r.detail("IOMMU groups: %d", len(groups))
		case noiommu == "Y" || noiommu == "1":
			r.set(Warn)
			r.detail("vfio runs in no-IOMMU mode: DMA is not isolated")
			r.fix("enable the IOMMU (intel_iommu=on or amd_iommu=on, iommu=pt) for isolated DMA")
		default:
			r.set(Fail)
			r.detail("ports are bound to vfio-pci but there is no IOMMU group and no-IOMMU mode is off: DPDK cannot open them")
			r.fix("enable the IOMMU: intel_iommu=on iommu=pt (or amd_iommu=on) on the kernel command line, or echo 1 > /sys/module/vfio/parameters/enable_unsafe_noiommu_mode")
		}
	}
	return r
}

// RDMADevice is one RDMA device with its ports and the netdevs behind them.
type RDMADevice struct {
	Name    string     `json:"name"`
	Netdevs []string   `json:"netdevs"`
	Ports   []RDMAPort `json:"ports"`
}

// RDMAPort is one port of an RDMA device.
type RDMAPort struct {
	Port      string `json:"port"`
	State     string `json:"state"`      // "4: ACTIVE"
	LinkLayer string `json:"link_layer"` // "Ethernet" for RoCE
	Netdev    string `json:"netdev,omitempty"`
}

// RDMADevices lists the RDMA devices (through dpdk/sysfs, which asks rdmamap
// on the real sysfs) with their ports and netdevs, read from the device's
// GID attributes (which also name the netdev of rxe and siw devices, which
// have no PCI device) and its PCI device's net directory.
func (h *Host) RDMADevices() []RDMADevice {
	var out []RDMADevice
	for _, name := range sysfs.RDMADevices() {
		d := RDMADevice{Name: name}
		base := h.sys("class/infiniband", name)
		seen := map[string]bool{}
		add := func(nd string) {
			if nd != "" && !seen[nd] {
				seen[nd] = true
				d.Netdevs = append(d.Netdevs, nd)
			}
		}
		for _, p := range dirNames(base + "/ports") {
			pp := filepath.Join(base, "ports", p)
			port := RDMAPort{Port: p}
			port.State, _ = readString(pp + "/state")
			port.LinkLayer, _ = readString(pp + "/link_layer")
			for _, g := range dirNames(pp + "/gid_attrs/ndevs") {
				if nd, ok := readString(filepath.Join(pp, "gid_attrs/ndevs", g)); ok && nd != "" {
					port.Netdev = nd
					break
				}
			}
			add(port.Netdev)
			d.Ports = append(d.Ports, port)
		}
		for _, nd := range dirNames(base + "/device/net") {
			add(nd)
		}
		sort.Strings(d.Netdevs)
		out = append(out, d)
	}
	return out
}

// CheckRDMA fails without an RDMA device: the DTA collector, the Hostmesh
// prober and the traffic generator on hardware need one (ibv: devices). The
// software RNIC (--nic PORT --gid IP) needs none, which the fix says.
func (h *Host) CheckRDMA(_ context.Context) Result {
	var r Result
	r.set(OK)
	devs := h.RDMADevices()
	if len(devs) == 0 {
		r.set(Fail)
		r.detail("no RDMA devices (%s is empty or missing): no RNIC driver is loaded and no rxe/siw device exists",
			h.sys("class/infiniband"))
		r.fix("load the RNIC's RDMA driver: modprobe mlx5_ib (ConnectX), irdma (Intel E810), bnxt_re (Broadcom)")
		r.fix("or, for tests, a software RDMA device: modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth0")
		r.fix("without either, use the appliance's software RNIC: --nic afpacket:IF --gid IP instead of -d ibv:DEV")
		return r
	}
	for _, d := range devs {
		var ports []string
		active := false
		for _, p := range d.Ports {
			ports = append(ports, fmt.Sprintf("port %s %s %s", p.Port, dashIfEmpty(p.State), dashIfEmpty(p.LinkLayer)))
			if strings.Contains(p.State, "ACTIVE") {
				active = true
			}
		}
		r.detail("%s: netdevs %s; %s", d.Name, orNone(d.Netdevs), orNone(ports))
		if len(d.Netdevs) == 0 {
			r.set(Warn)
			r.detail("%s has no netdev: RoCEv2 needs one for its GIDs (an InfiniBand port, or the netdev is down or gone)", d.Name)
			r.fix("check ip link and rdma link show; RoCE devices take their GIDs from the netdev's addresses")
		}
		if !active {
			r.set(Warn)
			r.detail("%s has no ACTIVE port", d.Name)
			r.fix("bring the link up: ip link set IF up, check the cable and the switch port")
		}
	}
	if len(dirNames(h.sys("class/infiniband_verbs"))) == 0 {
		r.set(Warn)
		r.detail("no uverbs devices: user space (libibverbs) cannot open the RDMA devices")
		r.fix("modprobe ib_uverbs")
	}
	return r
}
