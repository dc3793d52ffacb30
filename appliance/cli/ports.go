package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"text/tabwriter"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/sysfs"

	// Port drivers register themselves with dpdk.Open.
	_ "github.com/rdma-appliance/appliance/dpdk/afpacket"
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
			open := fs.String("open", "", "open this port string, receive on every queue for --seconds (like testpmd rxonly) and print rates")
			queues := fs.Int("queues", 1, "receive queues to open with --open")
			seconds := fs.Float64("seconds", 3, "how long --open receives")
			return func(ctx context.Context, env *Env, args []string) error {
				if len(args) > 0 {
					return Usagef("ports takes no arguments")
				}
				if *open != "" {
					return rxOnly(ctx, env, *open, *queues, time.Duration(*seconds*float64(time.Second)))
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

// rxOnly opens a port and counts what arrives, one pinned-free poll loop per
// queue, printing a line per second.
func rxOnly(ctx context.Context, env *Env, name string, queues int, d time.Duration) error {
	pool, err := dpdk.NewPool("ports-open", 8192, 0)
	if err != nil {
		return err
	}
	defer pool.Close()
	port, err := dpdk.Open(name, dpdk.Config{Pool: pool, RxQueues: queues, TxQueues: 1, Promiscuous: true})
	if err != nil {
		return err
	}
	defer port.Close()
	info := port.Info()
	fmt.Fprintf(env.Stdout, "%s: driver %s, MAC %s, MTU %d, %d rx queues, NUMA node %d\n", info.Name, info.Driver,
		net.HardwareAddr(info.MAC[:]), info.MTU, info.RxQueues, info.NUMANode)
	var burst [64]*dpdk.Packet
	bo := dpdk.DefaultBackoff()
	start, tick := time.Now(), time.Now()
	var last dpdk.Stats
	for time.Since(start) < d && ctx.Err() == nil {
		got := 0
		for q := 0; q < info.RxQueues; q++ {
			n := port.RxBurst(q, burst[:])
			dpdk.FreeBulk(burst[:n])
			got += n
		}
		if got == 0 {
			bo.Idle()
		} else {
			bo.Busy()
		}
		if el := time.Since(tick); el >= time.Second {
			s := port.Stats()
			fmt.Fprintf(env.Stdout, "  rx %.0f pkt/s %.1f Mbit/s, dropped %d, errors %d\n",
				float64(s.RxPackets-last.RxPackets)/el.Seconds(), float64(s.RxBytes-last.RxBytes)*8/el.Seconds()/1e6, s.Dropped, s.Errors)
			last, tick = s, time.Now()
		}
	}
	s := port.Stats()
	fmt.Fprintf(env.Stdout, "total: rx %d packets %d bytes, dropped %d, no buffer %d, errors %d\n", s.RxPackets, s.RxBytes, s.Dropped, s.RxNoBuf, s.Errors)
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
