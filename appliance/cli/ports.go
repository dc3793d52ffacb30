package cli

import (
	"context"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/rdma-appliance/appliance/appliance/host"
	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/sysfs"

	// Port drivers register themselves with dpdk.Open.
	_ "github.com/rdma-appliance/appliance/dpdk/afpacket"
	_ "github.com/rdma-appliance/appliance/dpdk/eal"
	_ "github.com/rdma-appliance/appliance/dpdk/ring"
)

var portsCmd = &Command{
	Name:    "ports",
	Summary: "list port drivers and the host's network devices with NUMA node and RDMA device",
	Long: `Port strings name a driver and a device: "ring:LINK.a" (in-process link end),
"afpacket:IFNAME[,fanout=hash|lb|cpu]" (Linux TPACKET_V3), "eal:DEV" (DPDK, in
builds with -tags dpdk). Every service that polls ports takes such strings.`,
	Flags: portsFlags,
}

type portsOptions struct {
	json    bool
	open    string
	queues  int
	seconds float64
	args    []string
}

func portsFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o portsOptions
	fs.BoolVar(&o.json, "json", false, "print JSON")
	fs.StringVar(&o.open, "open", "", "open this port string, receive on every queue for --seconds (like testpmd rxonly) and print rates")
	fs.IntVar(&o.queues, "queues", 1, "receive queues to open with --open")
	fs.Float64Var(&o.seconds, "seconds", 3, "how long --open receives")
	return bind(&o, &o.args, runPorts)
}

func runPorts(ctx context.Context, env *Env, o portsOptions) error {
	if len(o.args) > 0 {
		return Usagef("ports takes no arguments")
	}
	if o.open != "" {
		return host.RxOnly(ctx, env.Stdout, o.open, o.queues, time.Duration(o.seconds*float64(time.Second)))
	}
	devs, err := sysfs.List()
	if err != nil {
		return fmt.Errorf("listing network devices: %w", err)
	}
	if o.json {
		return writeJSON(env.Stdout, map[string]any{"drivers": dpdk.Drivers(), "netdevs": devs, "rdma_devices": sysfs.RDMADevices()})
	}
	fmt.Fprintf(env.Stdout, "port drivers: %v\n\n", dpdk.Drivers())
	tw := tabwriter.NewWriter(env.Stdout, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NETDEV\tMAC\tMTU\tSTATE\tSPEED\tDRIVER\tPCI\tNUMA\tRDMA")
	for _, d := range devs {
		speed := "-"
		if d.SpeedMbps > 0 {
			speed = fmt.Sprintf("%dG", d.SpeedMbps/1000)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%d\t%s\n", d.Name, d.MAC, d.MTU, d.OperState, speed,
			dash(d.Driver), dash(d.PCI), d.NUMANode, dash(d.RDMA))
	}
	tw.Flush()
	if len(sysfs.RDMADevices()) == 0 {
		fmt.Fprintln(env.Stdout, "\nno RDMA devices: the kernel has none (no RNIC, no rxe/siw); the software RNIC works on any port driver")
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// openPacketPort opens the one-queue, promiscuous port a DTA sender or the
// switch CPU's agent works on, with a pool of n packet buffers of its own
// (which a sender takes its packets from); closing releases both.
func openPacketPort(name, port string, n int) (dpdk.Port, *dpdk.Pool, func(), error) {
	pool, err := dpdk.NewPool(name, n, 0)
	if err != nil {
		return nil, nil, nil, err
	}
	p, err := dpdk.Open(port, dpdk.Config{Pool: pool, RxQueues: 1, TxQueues: 1, Promiscuous: true})
	if err != nil {
		pool.Close()
		return nil, nil, nil, err
	}
	return p, pool, func() { p.Close(); pool.Close() }, nil
}
