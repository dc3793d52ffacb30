package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"text/tabwriter"

	"github.com/rdma-appliance/appliance/verbs"

	// Providers register themselves with verbs.
	"github.com/rdma-appliance/appliance/verbs/ibv"
)

func init() {
	register(&Command{
		Name:    "verbs",
		Summary: "RDMA verbs: list devices, run perftest-style bandwidth and latency tests",
		Sub: append([]*Command{
			{
				Name:    "devices",
				Summary: "list RDMA devices of every provider with their ports and RoCEv2 GIDs (like ibv_devices + ibv_devinfo)",
				Usage:   "[--json]",
				Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
					asJSON := fs.Bool("json", false, "print JSON")
					return func(_ context.Context, env *Env, args []string) error {
						if len(args) > 0 {
							return Usagef("devices takes no arguments")
						}
						devs, err := verbs.DeviceList()
						type devPorts struct {
							verbs.DeviceInfo
							Ports []verbs.PortAttr `json:"port_attrs"`
						}
						var out []devPorts
						for _, d := range devs {
							dp := devPorts{DeviceInfo: d}
							if dev, err := verbs.OpenDevice(d.Provider + ":" + d.Name); err == nil {
								for p := 1; p <= max(d.Ports, 1); p++ {
									if pa, err := dev.QueryPort(p); err == nil {
										dp.Ports = append(dp.Ports, pa)
									}
								}
								dev.Close()
							}
							out = append(out, dp)
						}
						if *asJSON {
							enc := json.NewEncoder(env.Stdout)
							enc.SetIndent("", "  ")
							res := map[string]any{"providers": verbs.Providers(), "devices": out}
							if err != nil {
								res["errors"] = err.Error()
							}
							return enc.Encode(res)
						}
						fmt.Fprintf(env.Stdout, "providers: %v\n", verbs.Providers())
						if err != nil {
							fmt.Fprintf(env.Stdout, "not available: %v\n", err)
						}
						if !ibv.Available {
							fmt.Fprintf(env.Stdout, "libibverbs devices: %v\n", ibv.ErrNotBuilt)
						}
						if len(out) == 0 {
							fmt.Fprintln(env.Stdout, "no RDMA devices. Software RNICs (provider soft) are created by the services and the lab on a packet port.")
							return nil
						}
						tw := tabwriter.NewWriter(env.Stdout, 2, 8, 2, ' ', 0)
						fmt.Fprintln(tw, "DEVICE\tPROVIDER\tNETDEV\tPORT\tSTATE\tMTU\tGIDS")
						for _, d := range out {
							for i, p := range d.Ports {
								fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%v\t%v\n", d.Name, d.Provider, dash(d.Netdev), i+1, p.State, p.ActiveMTU, p.GIDs)
							}
							if len(d.Ports) == 0 {
								fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t-\t-\n", d.Name, d.Provider, dash(d.Netdev))
							}
						}
						return tw.Flush()
					}
				},
			},
		}, perfCommands()...),
	})
}
