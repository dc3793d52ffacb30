package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"

	"github.com/rdma-appliance/appliance/collector/dtacollector"
	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/internal/service"
)

func init() {
	dtaCmd.Sub = append(dtaCmd.Sub, &Command{
		Name:    "collect",
		Summary: "the DTA collector: primitives' memory on an RDMA device, one RC QP per translator, queries over HTTP",
		Usage:   "-f collector.yml (-d DEVICE | --nic PORT --gid IP) [flags]",
		Long: `Allocates the memory of each primitive the file configures (on huge pages with
huge-pages: true), registers it with the RDMA device and serves translators on the exchange
address (TCP, :40050 by default): each translator's Hello gets an RC QP in RTR at its QPN and
PSN and an Offer with the collector's address, QP, MTU, responder resources and regions. The
translator then writes reports straight into memory; the collector's CPU only polls the Append
lists (pollers per list, optionally pinned with cores:), counts WRITEs with immediate (push
notifications) and reads memory when queried. The QP lives as long as the exchange's TCP
connection. Serves until SIGTERM.

The file (keys): name, exchange, listen, mtu, max-atomic, huge-pages, redundancy, recv-depth,
key-write {slots, data-width}, key-increment {slots}, append {batch, lists [{id, entries,
pollers, cores, recent}]}, sketches [{id, kind count-min|hyperloglog, columns, rows,
reporters, group}], postcards {slots, hops, cache}. collector/dtacollector/testdata/collector.yml is
an example.

HTTP on listen (query it with 'appliance dta query'):
  GET /v1/regions, /v1/connections, /v1/stats
  GET /v1/keywrite/{key}?consensus=k, /v1/keyincrement/{key}
  GET /v1/sketches/{id}/count/{key}, /v1/sketches/{id}/cardinality
  GET /v1/postcards/{key}, /v1/lists, /v1/lists/{id}?recent=n
  GET /metrics, /healthz

Examples:
  appliance dta collect -f collector.yml -d ibv:mlx5_0 -x 3
  appliance dta collect -f collector.yml --nic afpacket:veth1 --gid 10.9.0.1 --core 2`,
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			var rf rnicFlags
			rf.register(fs)
			file := fs.String("f", "", "collector file (YAML)")
			listen := fs.String("listen", "", "HTTP address, overriding the file's")
			exchange := fs.String("exchange", "", "exchange address (TCP), overriding the file's")
			core := fs.Int("core", -1, "pin the thread that drives a software RNIC to this core")
			asJSON := fs.Bool("json", false, "print the final stats as JSON")
			return func(ctx context.Context, env *Env, args []string) error {
				if *file == "" || len(args) > 0 {
					return Usagef("want -f collector.yml and no arguments")
				}
				s, err := dtacollector.LoadSpec(*file)
				if err != nil {
					return err
				}
				if *listen != "" {
					s.Listen = *listen
				}
				if *exchange != "" {
					s.Exchange = *exchange
				}
				st, err := runCollector(ctx, env, s, &rf, *core)
				if err != nil {
					return err
				}
				if *asJSON {
					enc := json.NewEncoder(env.Stdout)
					enc.SetIndent("", "  ")
					return enc.Encode(st)
				}
				fmt.Fprintf(env.Stdout, "collector %s: %d translator connections, %d push notifications", st.Name, st.Connects, st.Pushes)
				for _, l := range st.Lists {
					fmt.Fprintf(env.Stdout, ", list %d: %d entries", l.ID, l.Read)
				}
				fmt.Fprintln(env.Stdout)
				return nil
			}
		},
	})
}

// runCollector runs the collector until ctx ends and returns its last
// stats.
func runCollector(ctx context.Context, env *Env, s dtacollector.Spec, rf *rnicFlags, core int) (dtacollector.Stats, error) {
	r, err := rf.open("dta-collect")
	if err != nil {
		return dtacollector.Stats{}, err
	}
	defer r.Close()
	rnicCtx, stopRNIC := context.WithCancel(context.Background())
	rnicDone := make(chan error, 1)
	if r.Poll != nil {
		go func() {
			rnicDone <- onThread(core, "dta collect software RNIC", func() error {
				bo := dpdk.DefaultBackoff()
				for rnicCtx.Err() == nil {
					if r.Poll() {
						bo.Busy()
					} else {
						bo.Idle()
					}
				}
				return nil
			})
		}()
	} else {
		rnicDone <- nil
	}
	// The RNIC stops last: QPs are destroyed through its loop.
	defer func() {
		stopRNIC()
		<-rnicDone
	}()
	opt := dtacollector.Options{Log: env.Log, Port: rf.ibPort, GIDIndex: rf.gidIndex}
	if s.Append != nil {
		for _, l := range s.Append.Lists {
			if l.Cores != "" {
				opt.Claims = coreClaims()
				break
			}
		}
	}
	c, err := dtacollector.New(s, r.Dev, opt)
	if err != nil {
		return dtacollector.Stats{}, err
	}
	defer c.Close()
	ln, err := net.Listen("tcp", s.Exchange)
	if err != nil {
		return dtacollector.Stats{}, fmt.Errorf("exchange: %w", err)
	}
	h := service.New("dta-collect", s.Listen, env.Log)
	c.Register(h)
	served := make(chan error, 1)
	go func() { served <- c.Serve(ctx, ln) }()
	var last dtacollector.Stats
	h.OnStop("collector", func(context.Context) error {
		last = c.Stats()
		return errors.Join(c.Close(), <-served)
	})
	if err := h.Run(ctx); err != nil {
		return last, err
	}
	return last, nil
}
