package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/rdma-appliance/appliance/appliance/host"
)

// newHost is the host doctor and setup inspect; tests point it at a fake tree.
var newHost = host.New

var doctorCmd = &Command{
	Name:    "doctor",
	Summary: "check this host for the bare-metal runtime (hugepages, cores, NICs, RDMA, PFC/ECN, clock) and say what to fix",
	Usage:   "[--json]",
	Long: `Checks, each OK, WARN or FAIL with what was found and what to do:
  hugepages       2 MiB and 1 GiB pages reserved (sysfs, per NUMA node; /proc/meminfo), hugetlbfs mounted
  isolated-cores  isolated cores and nohz_full (/sys/devices/system/cpu)
  nics            device-backed netdevs: driver, PCI address, NUMA node, speed, RDMA device
  dpdk-ports      PCI functions bound to vfio-pci/uio (or mlx5_core, which DPDK drives beside the kernel), IOMMU
  rdma            RDMA devices, their ports and netdevs (/sys/class/infiniband, rdmamap), uverbs
  pfc-ecn         PFC per priority, trust, DCQCN ECN and pause of the RDMA netdevs (sysfs, dcb, mlnx_qos,
                  ethtool; the tools that are missing are named)
  clocksource     the kernel clock source (tsc recommended)

FAIL means a hardware service will not start (or will lose packets); the exit
status is 1 when any check fails. The software twins (ring:, afpacket:, the
software RNIC) need none of this.`,
	Flags: doctorFlags,
}

type doctorOptions struct {
	json bool
	args []string
}

func doctorFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o doctorOptions
	fs.BoolVar(&o.json, "json", false, "print the results as JSON")
	return bind(&o, &o.args, runDoctor)
}

func runDoctor(ctx context.Context, env *Env, o doctorOptions) error {
	if len(o.args) > 0 {
		return Usagef("doctor takes no arguments")
	}
	rs := newHost().RunAll(ctx)
	if o.json {
		if err := writeJSON(env.Stdout, map[string]any{"status": host.Overall(rs), "checks": rs}); err != nil {
			return err
		}
	} else {
		printDoctor(env.Stdout, rs)
	}
	var failed []string
	for _, r := range rs {
		if r.Status == host.Fail {
			failed = append(failed, r.Name)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d check(s) failed: %s", len(failed), strings.Join(failed, ", "))
	}
	return nil
}

func printDoctor(w io.Writer, rs []host.Result) {
	width := 0
	for _, r := range rs {
		width = max(width, len(r.Name))
	}
	count := map[host.Status]int{}
	for _, r := range rs {
		count[r.Status]++
		pad := strings.Repeat(" ", width-len(r.Name))
		first := ""
		if len(r.Detail) > 0 {
			first = r.Detail[0]
		}
		fmt.Fprintf(w, "%-4s  %s%s  %s\n", r.Status, r.Name, pad, first)
		indent := strings.Repeat(" ", 6+width+2)
		for _, d := range r.Detail[min(1, len(r.Detail)):] {
			fmt.Fprintf(w, "%s%s\n", indent, d)
		}
		for _, f := range r.Fix {
			fmt.Fprintf(w, "%sfix: %s\n", indent, f)
		}
	}
	fmt.Fprintf(w, "\n%d OK, %d WARN, %d FAIL\n", count[host.OK], count[host.Warn], count[host.Fail])
}
