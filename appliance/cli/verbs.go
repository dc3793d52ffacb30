package cli

import (
	"context"
	"flag"
	"fmt"
	"text/tabwriter"

	"github.com/rdma-appliance/appliance/verbs"

	// Providers register themselves with verbs.
	"github.com/rdma-appliance/appliance/verbs/ibv"
)

var verbsCmd = &Command{
	Name:    "verbs",
	Summary: "RDMA verbs: list devices, run perftest-style bandwidth and latency tests",
	Sub:     append([]*Command{verbsDevicesCmd}, perfCommands()...),
}

var verbsDevicesCmd = &Command{
	Name:    "devices",
	Summary: "list RDMA devices of every provider with their ports and RoCEv2 GIDs (like ibv_devices + ibv_devinfo)",
	Usage:   "[--json]",
	Flags:   verbsDevicesFlags,
}

type verbsDevicesOptions struct {
	json bool
	args []string
}

func verbsDevicesFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o verbsDevicesOptions
	fs.BoolVar(&o.json, "json", false, "print JSON")
	return bind(&o, &o.args, runVerbsDevices)
}

// devPorts is a device with its ports' attributes.
type devPorts struct {
	verbs.DeviceInfo
	Ports []verbs.PortAttr `json:"port_attrs"`
}

// deviceList lists the devices of every provider and queries their ports
// (a device that does not open is listed without them).
func deviceList() ([]devPorts, error) {
	devs, err := verbs.DeviceList()
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
	return out, err
}

func runVerbsDevices(_ context.Context, env *Env, o verbsDevicesOptions) error {
	if len(o.args) > 0 {
		return Usagef("devices takes no arguments")
	}
	out, err := deviceList()
	if o.json {
		res := map[string]any{"providers": verbs.Providers(), "devices": out}
		if err != nil {
			res["errors"] = err.Error()
		}
		return writeJSON(env.Stdout, res)
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
