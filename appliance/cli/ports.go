package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"text/tabwriter"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/sysfs"

	// Port drivers register themselves with dpdk.Open.
	_ "github.com/rdma-appliance/appliance/dpdk/eal"
	_ "github.com/rdma-appliance/appliance/dpdk/ring"
)

func init() {
	register(&Command{
		Name:    "ports",
		Summary: "list port drivers and the host's network devices with NUMA node and RDMA device",
		Long: `Port strings name a driver and a device: "ring:LINK.a" (in-process link end),
"afpacket:IFNAME[,fanout=hash|lb|cpu]" (Linux TPACKET_V3), "eal:DEV" (DPDK, in
builds with -tags dpdk). Every service that polls ports takes such strings.`,
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			asJSON := fs.Bool("json", false, "print JSON")
			return func(_ context.Context, env *Env, args []string) error {
				if len(args) > 0 {
					return Usagef("ports takes no arguments")
				}
				devs, err := sysfs.List()
				if err != nil {
					return fmt.Errorf("listing network devices: %w", err)
				}
				if *asJSON {
					enc := json.NewEncoder(env.Stdout)
					enc.SetIndent("", "  ")
					return enc.Encode(map[string]any{"drivers": dpdk.Drivers(), "netdevs": devs, "rdma_devices": sysfs.RDMADevices()})
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
		},
	})
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
