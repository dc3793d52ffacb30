package host

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk/sysfs"
)

// fake is a fake host: sysfs and procfs trees in a temp dir, and tools that
// answer from a map (absent tools are not installed).
type fake struct {
	t     *testing.T
	h     *Host
	tools map[string]string // "dcb pfc show dev eth2" -> output
}

func newFake(t *testing.T) *fake {
	t.Helper()
	root := t.TempDir()
	sys, proc := filepath.Join(root, "sys"), filepath.Join(root, "proc")
	old := sysfs.Root
	sysfs.Root = sys // the netdev and RDMA listings go through dpdk/sysfs
	t.Cleanup(func() { sysfs.Root = old })
	f := &fake{t: t, tools: map[string]string{}}
	f.h = &Host{Sys: sys, Proc: proc,
		LookPath: func(name string) (string, error) {
			for k := range f.tools {
				if strings.HasPrefix(k, name+" ") {
					return "/usr/bin/" + name, nil
				}
			}
			return "", exec.ErrNotFound
		},
		Run: func(_ context.Context, name string, args ...string) ([]byte, error) {
			out, ok := f.tools[name+" "+strings.Join(args, " ")]
			if !ok {
				return []byte("Operation not supported"), errors.New("exit status 1")
			}
			return []byte(out), nil
		}}
	f.write("proc/mounts", "proc /proc proc rw 0 0")
	f.write("proc/cmdline", "BOOT_IMAGE=/vmlinuz root=/dev/sda1")
	return f
}

func (f *fake) write(rel, s string) {
	f.t.Helper()
	p := filepath.Join(filepath.Dir(f.h.Sys), rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s+"\n"), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fake) mkdir(rel string) {
	f.t.Helper()
	if err := os.MkdirAll(filepath.Join(filepath.Dir(f.h.Sys), rel), 0o755); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fake) symlink(target, rel string) {
	f.t.Helper()
	root := filepath.Dir(f.h.Sys)
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, target), p); err != nil {
		f.t.Fatal(err)
	}
}

// hugepages reserves n2 2 MiB and n1 1 GiB pages on node0.
func (f *fake) hugepages(n2, n1 int) {
	for _, s := range []struct {
		dir string
		n   int
	}{{"hugepages-2048kB", n2}, {"hugepages-1048576kB", n1}} {
		f.write("sys/kernel/mm/hugepages/"+s.dir+"/nr_hugepages", itoa(s.n))
		f.write("sys/kernel/mm/hugepages/"+s.dir+"/free_hugepages", itoa(s.n))
		f.write("sys/devices/system/node/node0/hugepages/"+s.dir+"/nr_hugepages", itoa(s.n))
	}
	f.write("proc/meminfo", "MemTotal: 1000 kB\nHugePages_Total: "+itoa(n2)+"\nHugePages_Free: "+itoa(n2)+
		"\nHugepagesize: 2048 kB\nHugetlb: "+itoa(n2*2048+n1*1048576)+" kB")
}

// nic adds a device-backed netdev at a PCI address bound to driver.
func (f *fake) nic(name, pci, driver string) {
	dev := "sys/devices/pci0000:00/" + pci
	f.write(dev+"/numa_node", "0")
	f.mkdir("sys/bus/pci/drivers/" + driver)
	f.symlink("sys/bus/pci/drivers/"+driver, dev+"/driver")
	f.symlink(dev, "sys/bus/pci/drivers/"+driver+"/"+pci)
	f.symlink(dev, "sys/bus/pci/devices/"+pci)
	nd := "sys/class/net/" + name
	f.write(nd+"/ifindex", "3")
	f.write(nd+"/address", "b8:ce:f6:00:00:01")
	f.write(nd+"/mtu", "9000")
	f.write(nd+"/operstate", "up")
	f.write(nd+"/speed", "100000")
	f.symlink(dev, nd+"/device")
}

// rdma adds an RDMA device on netdev with one port in state.
func (f *fake) rdma(name, netdev, state string) {
	base := "sys/class/infiniband/" + name
	f.write(base+"/ports/1/state", state)
	f.write(base+"/ports/1/link_layer", "Ethernet")
	f.write(base+"/ports/1/gid_attrs/ndevs/0", netdev)
	f.write(base+"/ports/1/gid_attrs/ndevs/1", "")
	f.mkdir("sys/class/infiniband_verbs/uverbs0")
}

func itoa(n int) string { return strconv.Itoa(n) }

func mustStatus(t *testing.T, r Result, want Status, wantText ...string) {
	t.Helper()
	all := strings.Join(r.Detail, "\n") + "\n" + strings.Join(r.Fix, "\n")
	if r.Status != want {
		t.Fatalf("status %s, want %s:\n%s", r.Status, want, all)
	}
	for _, w := range wantText {
		if !strings.Contains(all, w) {
			t.Fatalf("%q missing from:\n%s", w, all)
		}
	}
}

var ctx = context.Background()

func TestHugepages(t *testing.T) {
	t.Run("none", func(t *testing.T) {
		f := newFake(t)
		f.hugepages(0, 0)
		mustStatus(t, f.h.CheckHugepages(ctx), Fail, "no huge pages reserved", "appliance setup hugepages 1024", "hugepagesz=1G")
	})
	t.Run("no-support", func(t *testing.T) {
		f := newFake(t)
		mustStatus(t, f.h.CheckHugepages(ctx), Fail, "no huge page sizes")
	})
	t.Run("reserved", func(t *testing.T) {
		f := newFake(t)
		f.hugepages(1024, 2)
		f.write("proc/mounts", "nodev /dev/hugepages hugetlbfs rw 0 0")
		mustStatus(t, f.h.CheckHugepages(ctx), OK, "2 MiB pages: 1024 reserved", "1 GiB pages: 2 reserved",
			"4 GiB reserved in all", "hugetlbfs mounted at /dev/hugepages")
	})
	t.Run("unmounted", func(t *testing.T) {
		f := newFake(t)
		f.hugepages(16, 0)
		mustStatus(t, f.h.CheckHugepages(ctx), Warn, "hugetlbfs is not mounted", "mount -t hugetlbfs")
	})
	t.Run("all-used", func(t *testing.T) {
		f := newFake(t)
		f.hugepages(16, 0)
		f.write("proc/mounts", "nodev /dev/hugepages hugetlbfs rw 0 0")
		f.write("sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages", "0")
		mustStatus(t, f.h.CheckHugepages(ctx), Warn, "every 2 MiB page is in use", "appliance setup hugepages 32 --size 2M")
	})
}

func TestSetHugepages(t *testing.T) {
	f := newFake(t)
	f.hugepages(0, 0)
	st, err := f.h.SetHugepages(512, Size2M, -1, true)
	if err != nil || !st.DryRun || st.Before != 0 || st.Got != 0 ||
		st.Path != filepath.Join(f.h.Sys, "kernel/mm/hugepages/hugepages-2048kB/nr_hugepages") {
		t.Fatalf("dry run: %+v %v", st, err)
	}
	if n, _ := readInt(st.Path); n != 0 {
		t.Fatalf("dry run wrote %d", n)
	}
	st, err = f.h.SetHugepages(512, Size2M, -1, false)
	if err != nil || st.Got != 512 {
		t.Fatalf("set: %+v %v", st, err)
	}
	st, err = f.h.SetHugepages(4, Size1G, 0, false)
	if err != nil || st.Got != 4 || !strings.Contains(st.Path, "node0/hugepages/hugepages-1048576kB") {
		t.Fatalf("set 1G on node 0: %+v %v", st, err)
	}
	if _, err := f.h.SetHugepages(4, Size1G, 3, false); err == nil || !strings.Contains(err.Error(), "NUMA node 3") {
		t.Fatalf("missing node: %v", err)
	}
	if _, err := f.h.SetHugepages(4, 64, -1, false); err == nil || !strings.Contains(err.Error(), "offers: 2M, 1G") {
		t.Fatalf("missing size: %v", err)
	}
	mustStatus(t, f.h.CheckHugepages(ctx), Warn, "2 MiB pages: 512 reserved") // sysfs's free count was not updated
	for in, want := range map[string]int{"2M": Size2M, "1G": Size1G, "2048kB": Size2M, "1GiB": Size1G, "2m": Size2M} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Fatalf("ParseSize(%q) = %d, %v", in, got, err)
		}
	}
	if _, err := ParseSize("huge"); err == nil {
		t.Fatal("ParseSize(huge) passed")
	}
}

func TestIsolatedCores(t *testing.T) {
	t.Run("none", func(t *testing.T) {
		f := newFake(t)
		f.write("sys/devices/system/cpu/isolated", "")
		mustStatus(t, f.h.CheckIsolatedCores(ctx), Warn, "no isolated cores", "isolcpus=")
	})
	t.Run("unreadable", func(t *testing.T) {
		f := newFake(t)
		mustStatus(t, f.h.CheckIsolatedCores(ctx), Warn, "unreadable")
	})
	t.Run("no-nohz", func(t *testing.T) {
		f := newFake(t)
		f.write("sys/devices/system/cpu/isolated", "2-5")
		f.write("sys/devices/system/cpu/nohz_full", "(null)")
		mustStatus(t, f.h.CheckIsolatedCores(ctx), Warn, "isolated cores: 2-5", "nohz_full=2-5")
	})
	t.Run("ok", func(t *testing.T) {
		f := newFake(t)
		f.write("sys/devices/system/cpu/online", "0-7")
		f.write("sys/devices/system/cpu/isolated", "2-5")
		f.write("sys/devices/system/cpu/nohz_full", "2-5")
		f.write("proc/cmdline", "root=/dev/sda isolcpus=2-5 nohz_full=2-5")
		mustStatus(t, f.h.CheckIsolatedCores(ctx), OK, "isolated cores: 2-5", "nohz_full cores: 2-5", "isolcpus=2-5")
	})
}

func TestClockSource(t *testing.T) {
	f := newFake(t)
	mustStatus(t, f.h.CheckClockSource(ctx), Warn, "unreadable")
	cs := "sys/devices/system/clocksource/clocksource0/"
	f.write(cs+"current_clocksource", "hpet")
	f.write(cs+"available_clocksource", "tsc hpet acpi_pm")
	mustStatus(t, f.h.CheckClockSource(ctx), Warn, "not tsc", "echo tsc >")
	f.write(cs+"available_clocksource", "hpet acpi_pm")
	mustStatus(t, f.h.CheckClockSource(ctx), Warn, "does not offer tsc")
	f.write(cs+"current_clocksource", "tsc")
	mustStatus(t, f.h.CheckClockSource(ctx), OK, "current: tsc")
}

func TestNICsAndDPDKPorts(t *testing.T) {
	f := newFake(t)
	f.mkdir("sys/class/net")
	f.write("sys/class/net/lo/ifindex", "1")
	mustStatus(t, f.h.CheckNICs(ctx), Warn, "only virtual")
	mustStatus(t, f.h.CheckDPDKPorts(ctx), Warn, "no PCI port bound", "dpdk-devbind.py")

	f.nic("ens1f0", "0000:3b:00.0", "mlx5_core")
	mustStatus(t, f.h.CheckNICs(ctx), OK, "ens1f0: driver mlx5_core, device 0000:3b:00.0, NUMA node 0, up, 100 Gb/s, MTU 9000")
	mustStatus(t, f.h.CheckDPDKPorts(ctx), OK, "0000:3b:00.0: mlx5_core (bifurcated")

	// A vfio-bound function without an IOMMU cannot be opened.
	f.write("sys/devices/pci0000:00/0000:5e:00.0/numa_node", "1")
	f.mkdir("sys/bus/pci/drivers/vfio-pci")
	f.symlink("sys/devices/pci0000:00/0000:5e:00.0", "sys/bus/pci/drivers/vfio-pci/0000:5e:00.0")
	f.symlink("sys/devices/pci0000:00/0000:5e:00.0", "sys/bus/pci/devices/0000:5e:00.0")
	mustStatus(t, f.h.CheckDPDKPorts(ctx), Fail, "0000:5e:00.0: vfio-pci (bound for DPDK), NUMA node 1", "no IOMMU group", "intel_iommu=on")
	f.write("sys/module/vfio/parameters/enable_unsafe_noiommu_mode", "Y")
	mustStatus(t, f.h.CheckDPDKPorts(ctx), Warn, "no-IOMMU mode")
	f.mkdir("sys/kernel/iommu_groups/17")
	mustStatus(t, f.h.CheckDPDKPorts(ctx), OK, "IOMMU groups: 1")
}

func TestRDMA(t *testing.T) {
	f := newFake(t)
	mustStatus(t, f.h.CheckRDMA(ctx), Fail, "no RDMA devices", "modprobe mlx5_ib", "rdma link add rxe0", "--nic afpacket:IF")

	f.nic("ens1f0", "0000:3b:00.0", "mlx5_core")
	f.rdma("mlx5_0", "ens1f0", "4: ACTIVE")
	mustStatus(t, f.h.CheckRDMA(ctx), OK, "mlx5_0: netdevs ens1f0; port 1 4: ACTIVE Ethernet")

	f.rdma("rxe0", "", "1: DOWN")
	mustStatus(t, f.h.CheckRDMA(ctx), Warn, "rxe0 has no netdev", "rxe0 has no ACTIVE port")
	if err := os.RemoveAll(filepath.Join(f.h.Sys, "class/infiniband/rxe0")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(f.h.Sys, "class/infiniband_verbs")); err != nil {
		t.Fatal(err)
	}
	mustStatus(t, f.h.CheckRDMA(ctx), Warn, "modprobe ib_uverbs")
}

func TestPFCECN(t *testing.T) {
	t.Run("no-netdev", func(t *testing.T) {
		f := newFake(t)
		mustStatus(t, f.h.CheckPFCECN(ctx), Warn, "no netdev to check")
	})
	t.Run("unreadable-tools-missing", func(t *testing.T) {
		f := newFake(t)
		f.nic("eth0", "0000:00:03.0", "virtio-pci")
		mustStatus(t, f.h.CheckPFCECN(ctx), Warn, "device-backed netdevs (no RDMA netdev): eth0", "eth0: PFC unreadable",
			"tools not installed: dcb (iproute2), mlnx_qos (MLNX_OFED or mstflint), ethtool (ethtool)")
	})
	t.Run("dcb-off", func(t *testing.T) {
		f := newFake(t)
		f.nic("ens1f0", "0000:3b:00.0", "mlx5_core")
		f.rdma("mlx5_0", "ens1f0", "4: ACTIVE")
		f.tools["dcb pfc show dev ens1f0"] = "pfc-cap 8 macsec-bypass off delay 0\nprio-pfc 0:off 1:off 2:off 3:off 4:off 5:off 6:off 7:off"
		mustStatus(t, f.h.CheckPFCECN(ctx), Warn, "checking the RDMA netdevs: ens1f0", "PFC off on every priority (from dcb)",
			"dcb pfc set dev ens1f0 prio-pfc 3:on")
	})
	t.Run("ok", func(t *testing.T) {
		f := newFake(t)
		f.nic("ens1f0", "0000:3b:00.0", "mlx5_core")
		f.rdma("mlx5_0", "ens1f0", "4: ACTIVE")
		f.write("sys/class/net/ens1f0/qos/trust", "dscp")
		for p := range 8 {
			on := "0"
			if p == 3 {
				on = "1"
			}
			f.write("sys/class/net/ens1f0/ecn/roce_np/enable/"+itoa(p), on)
			f.write("sys/class/net/ens1f0/ecn/roce_rp/enable/"+itoa(p), on)
		}
		f.tools["mlnx_qos -i ens1f0"] = "DCBX mode: OS controlled\nPriority trust state: dscp\nPFC configuration:\n" +
			"\tpriority    0   1   2   3   4   5   6   7\n\tenabled     0   0   0   1   0   0   0   0\n"
		f.tools["ethtool -a ens1f0"] = "Pause parameters for ens1f0:\nAutonegotiate:\toff\nRX:\t\toff\nTX:\t\toff\n"
		mustStatus(t, f.h.CheckPFCECN(ctx), OK, "ens1f0: PFC on priorities 3 (from mlnx_qos)", "trust dscp",
			"DCQCN ECN notification on priorities 3, reaction on 3", "global pause rx off, tx off",
			"tools not installed: dcb (iproute2)")
		// sysfs qos/pfc wins over the tools.
		f.write("sys/class/net/ens1f0/qos/pfc", "0,0,0,1,1,0,0,0")
		mustStatus(t, f.h.CheckPFCECN(ctx), OK, "PFC on priorities 3,4 (from sysfs qos/pfc)")
	})
	t.Run("dcqcn-off", func(t *testing.T) {
		f := newFake(t)
		f.nic("ens1f0", "0000:3b:00.0", "mlx5_core")
		f.rdma("mlx5_0", "ens1f0", "4: ACTIVE")
		f.write("sys/class/net/ens1f0/qos/pfc", "0 0 0 1 0 0 0 0")
		for p := range 8 {
			f.write("sys/class/net/ens1f0/ecn/roce_np/enable/"+itoa(p), "0")
			f.write("sys/class/net/ens1f0/ecn/roce_rp/enable/"+itoa(p), "0")
		}
		mustStatus(t, f.h.CheckPFCECN(ctx), Warn, "DCQCN off", "roce_np/enable/3")
	})
}

// TestRunAll runs every check on a bare fake host, as doctor does on this
// machine: hugepages and RDMA fail, the overall verdict is FAIL.
func TestRunAll(t *testing.T) {
	f := newFake(t)
	f.hugepages(0, 0)
	f.nic("eth0", "0000:00:03.0", "virtio-pci")
	rs := f.h.RunAll(ctx)
	if len(rs) != len(Checks) || Overall(rs) != Fail {
		t.Fatalf("%d results, overall %s", len(rs), Overall(rs))
	}
	var failed []string
	for _, r := range rs {
		if r.Status == Fail {
			failed = append(failed, r.Name)
		}
	}
	if strings.Join(failed, ",") != "hugepages,rdma" {
		t.Fatalf("failed %v", failed)
	}
}
