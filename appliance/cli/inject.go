package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"text/tabwriter"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/internal/service"
	"github.com/rdma-appliance/appliance/p4/luminatofino"
	"github.com/rdma-appliance/appliance/translator/inject"
)

// Defaults of the injector's packet pool: room for 9000-byte frames.
const (
	injectPoolSize = 4096
	injectDataRoom = 9216 + dpdk.Headroom
	injectListen   = "127.0.0.1:9100"
)

func init() {
	register(&Command{
		Name:    "inject",
		Summary: "Lumina's event injector: the software middlebox, its compiled entries, the Tofino script",
		Sub: []*Command{
			{
				Name:    "run",
				Summary: "run the software injector on packet ports, controlled over HTTP",
				Usage:   "-f injector.yml [flags]",
				Long: `Forwards between the traffic ports (static routes, proxy ARP), mirrors every RoCE
packet with Lumina's metadata to the mirror ports (weighted round-robin, or flow hash),
and drops, ECN-marks or corrupts the packets the loaded intents name. Intents and the
traffic generator's metadata arrive per test:

  POST /v1/load     {"intents": [...], "connections": [...], "geometry": {...}, "reset": true}
  GET  /v1/entries  the compiled entries with hit counts
  GET  /v1/stats    per-port counters, RoCE packets received, copies mirrored
  POST /v1/reset    zero the counters and the mirror sequence
  GET  /metrics, /healthz

SIGHUP (systemctl reload) re-reads the file and applies its routes, mirror weights,
balance, mirror-snap, rewrite-udp-dst-port and dec-ttl between two bursts; a changed port,
core, burst, pool, iter-mode or listen address needs a restart, and such a file is not
applied at all (the log says which key).

The file's keys: listen, iter-mode (paper|p4), balance (wrr|flow-hash),
rewrite-udp-dst-port, mirror-snap, dec-ttl, core, burst, pool, ports [{name, role
traffic|mirror, port DRIVER:DEV, queues, addrs, weight}], routes [{prefix, port, mac}].`,
				Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
					file := fs.String("f", "", "injector file (YAML)")
					listen := fs.String("listen", "", "HTTP control address (default: the file's listen, else "+injectListen+")")
					core := fs.Int("core", -2, "pin the pipeline loop to this core (default: the file's core; -1 unpinned)")
					return func(ctx context.Context, env *Env, args []string) error {
						if len(args) > 0 || *file == "" {
							return Usagef("want -f injector.yml and no arguments")
						}
						load := func() (inject.Spec, error) {
							s, err := inject.LoadSpec(*file)
							if err != nil {
								return s, err
							}
							if *listen != "" {
								s.Listen = *listen
							}
							if *core != -2 {
								s.Core = core
							}
							return s, nil
						}
						s, err := load()
						if err != nil {
							return err
						}
						return runInjector(ctx, env, s, load)
					}
				},
			},
			{
				Name:    "tofino",
				Summary: "serve the injector's control API for a Tofino: loads run bfshell with the rendered script",
				Usage:   "-f injector.yml --sde PATH [--listen ADDR]",
				Long: `Runs on the switch (or where bfshell reaches it) and answers the same HTTP API as
'inject run', so 'lumina run' and the traffic generator drive a Tofino the way they
drive the software injector: POST /v1/load renders the test's bfrt_python script from
the file's Tofino keys and runs '$SDE/run_bfshell.sh -b' with it; GET /v1/stats runs
the counter script and returns the per-port counters and the mirror sequence; GET
/v1/entries lists the entries (the switch does not count hits per entry). Start
switchd with p4/luminatofino/injector.p4 compiled by bf-p4c first.`,
				Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
					file := fs.String("f", "", "injector file (YAML) with the Tofino keys")
					sde := fs.String("sde", os.Getenv("SDE"), "the SDE's directory (default $SDE)")
					listen := fs.String("listen", "", "HTTP control address (default: the file's listen, else "+injectListen+")")
					return func(ctx context.Context, env *Env, args []string) error {
						if len(args) > 0 || *file == "" || *sde == "" {
							return Usagef("want -f injector.yml and --sde PATH (or $SDE)")
						}
						s, err := inject.LoadSpec(*file)
						if err != nil {
							return err
						}
						addr := *listen
						if addr == "" {
							addr = s.Listen
						}
						if addr == "" {
							addr = injectListen
						}
						svc := service.New("inject-tofino", addr, env.Log)
						(&luminatofino.Controller{Spec: s, Bfshell: luminatofino.DefaultBfshell(*sde)}).Register(svc)
						return svc.Run(ctx)
					}
				},
			},
			{
				Name:    "compile",
				Summary: "compile intents and runtime metadata into the injector's match entries",
				Usage:   "--load load.json [--json] [--iter-mode paper|p4]",
				Long: `Reads a load request (the body of POST /v1/load: intents, connections, geometry) and
prints the exact-match entries {src IP, dst IP, dst QPN, PSN, ITER} -> event that the
software injector and the Tofino program install for it. A request that names a QP or
PSN the test does not have is rejected with the reason.`,
				Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
					load := fs.String("load", "", "load request (JSON); - for stdin")
					asJSON := fs.Bool("json", false, "print JSON")
					return func(ctx context.Context, env *Env, args []string) error {
						if len(args) > 0 || *load == "" {
							return Usagef("want --load FILE and no arguments")
						}
						req, err := readLoad(*load)
						if err != nil {
							return err
						}
						es, err := inject.Compile(req.Intents, req.Conns, req.Geometry,
							inject.Options{SendConns: req.SendConns, OneBased: req.OneBased})
						if err != nil {
							return err
						}
						if *asJSON {
							enc := json.NewEncoder(env.Stdout)
							enc.SetIndent("", "  ")
							return enc.Encode(es)
						}
						tw := tabwriter.NewWriter(env.Stdout, 2, 8, 2, ' ', 0)
						fmt.Fprintln(tw, "#\tENTRY")
						for i, e := range es {
							fmt.Fprintf(tw, "%d\t%v\n", i, e)
						}
						return tw.Flush()
					}
				},
			},
			{
				Name:    "bfrt",
				Summary: "render the Tofino injector's bfrt_python script (or its counter script) for bfshell -b",
				Usage:   "-f injector.yml --load load.json [--counters] [-o FILE]",
				Long: `Turns the injector file's Tofino keys (front-panel or dev-port, speed, fec, autoneg, mac)
and a load request into the bfrt_python script that sets up p4/luminatofino/injector.p4 on a
Tofino: ports, routes and proxy ARP, mirror sessions and the weighted round-robin,
ITER initial state, event entries. --counters renders the script that prints the
per-port counters instead (parse its output with the orchestrator).
Run it with: bfshell -b FILE`,
				Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
					file := fs.String("f", "", "injector file (YAML)")
					load := fs.String("load", "", "load request (JSON); - for stdin")
					counters := fs.Bool("counters", false, "render the counter-reading script")
					out := fs.String("o", "", "write the script here instead of stdout")
					return func(ctx context.Context, env *Env, args []string) error {
						if len(args) > 0 || *file == "" || *load == "" {
							return Usagef("want -f injector.yml --load load.json")
						}
						s, err := inject.LoadSpec(*file)
						if err != nil {
							return err
						}
						req, err := readLoad(*load)
						if err != nil {
							return err
						}
						p, err := luminatofino.FromSpec(s, req)
						if err != nil {
							return err
						}
						var script string
						if *counters {
							script, err = p.CounterScript()
						} else {
							script, err = p.Script()
						}
						if err != nil {
							return err
						}
						if *out == "" {
							_, err = io.WriteString(env.Stdout, script)
							return err
						}
						return os.WriteFile(*out, []byte(script), 0o644)
					}
				},
			},
		},
	})
}

// readLoad reads a load request, strictly: unknown fields are errors.
func readLoad(path string) (inject.LoadRequest, error) {
	var r io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return inject.LoadRequest{}, err
		}
		defer f.Close()
		r = f
	}
	var req inject.LoadRequest
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf("%s: %w", path, err)
	}
	return req, nil
}

// reloadInjector applies the file's changes to a running injector, or
// none of them: a file that does not load or changes what needs a restart
// leaves the injector as it was.
func reloadInjector(in *inject.Injector, cur *inject.Spec, reload func() (inject.Spec, error)) error {
	next, err := reload()
	if err != nil {
		return err
	}
	u, err := next.Update(cur)
	if err != nil {
		return err
	}
	if err := in.Apply(u); err != nil {
		return err
	}
	*cur = next
	return nil
}

// runInjector opens the spec's ports, runs the pipeline loop (pinned when
// the spec says so) and serves the control API until ctx ends.
func runInjector(ctx context.Context, env *Env, s inject.Spec, reload func() (inject.Spec, error)) error {
	n := s.Pool
	if n == 0 {
		n = injectPoolSize
	}
	pool, err := dpdk.NewPool("inject", n, injectDataRoom)
	if err != nil {
		return err
	}
	defer pool.Close()
	cfg, ports, err := s.Config(pool, func(ps inject.PortSpec) (dpdk.Port, error) {
		q := max(ps.Queues, 1)
		c := dpdk.Config{Pool: pool, RxQueues: 1, TxQueues: q, Promiscuous: true}
		return dpdk.Open(ps.Port, c)
	})
	if err != nil {
		return err
	}
	defer func() {
		for _, p := range ports {
			p.Close()
		}
	}()
	in, err := inject.New(cfg)
	if err != nil {
		return err
	}
	listen := s.Listen
	if listen == "" {
		listen = injectListen
	}
	svc := service.New("inject", listen, env.Log)
	in.Register(svc)
	svc.Go("injector loop", func(ctx context.Context) error {
		if s.Core != nil && *s.Core >= 0 {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			release, err := pinClaimed(*s.Core, "inject "+listen)
			if err != nil {
				return err
			}
			defer release()
		}
		return in.Run(ctx)
	})
	if reload != nil {
		reloads := svc.Metrics.CounterVec("appliance_inject_config_reloads_total",
			"SIGHUP reloads of the injector file, applied (ok) or refused whole (refused: a bad file or a change that needs a restart).", "result")
		svc.Go("SIGHUP reload", func(ctx context.Context) error {
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			cur := s
			for {
				select {
				case <-ctx.Done():
					return nil
				case <-hup:
				}
				if err := reloadInjector(in, &cur, reload); err != nil {
					reloads.WithLabelValues("refused").Inc()
					env.Log.Error("configuration not reloaded", "err", err)
					continue
				}
				reloads.WithLabelValues("ok").Inc()
				env.Log.Info("configuration reloaded", "routes", len(cur.Routes), "balance", cur.Balance)
			}
		})
	}
	for _, p := range cfg.Traffic {
		env.Log.Info("traffic port", "name", p.Name, "port", p.Port.Info().Name, "addrs", p.Addrs)
	}
	for _, p := range cfg.Mirrors {
		env.Log.Info("mirror port", "name", p.Name, "port", p.Port.Info().Name, "weight", p.Weight)
	}
	err = svc.Run(ctx)
	st := in.Stats()
	fmt.Fprintf(env.Stdout, "injector: %d RoCE packets received, %d copies mirrored\n", st.RxRoCE, st.Mirrored)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
