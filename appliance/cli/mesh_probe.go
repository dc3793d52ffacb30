package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/appliance/hostmesh"
	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/internal/service"
	"github.com/rdma-appliance/appliance/verbs"
	"github.com/rdma-appliance/appliance/verbs/soft"
)

// listFlag collects a repeated flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

func init() {
	meshCmd.Sub = append(meshCmd.Sub, &Command{
		Name:    "probe",
		Summary: "the Hostmesh agent: probe between this host's RNICs over UD QPs",
		Usage:   "(-d DEV,... | --nic PORT --gid IP [--nic PORT --gid IP ...]) [--analyzer ADDR] [--out FILE] [flags]",
		Long: `One UD QP per RNIC, a sender and a receiver loop per RNIC (pinned with --cores); every
--interval each RNIC probes a random other RNIC of the host with a 50-byte probe, its UDP source
port drawn from a pool (set through the flow label, one port replaced every --rotate). The four
timestamps (post, send completion, receive completion, poll) give the one-way network latency
and the host processing delay without clock synchronization; probes that have not arrived after
--timeout are timeouts. Results go to the analyzer (--analyzer, 'appliance mesh analyze
--serve') every second, held up to a bound while it is down, and/or to --out.

RNICs are verbs devices (-d ibv:mlx5_0,ibv:mlx5_1; all RoCE devices with -d all) or software
RNICs on packet ports (--nic afpacket:eth1 --gid 10.0.1.1, repeated). A device that disappears
is taken out and reported; the others keep probing. Paths are not traced over verbs (the ICMP
answers go to the kernel); the simulator's agents trace.

HTTP on --listen: GET /v1/status, /metrics, /healthz.

The process runs with the garbage collector at GOGC=25 unless GOGC is set: the agent's live heap
is small and long-lived, and Go's default would let the heap take most of its memory.`,
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			devs := fs.String("d", "", "verbs devices, comma-separated (\"all\": every device with a RoCEv2 GID)")
			var nics, gids listFlag
			fs.Var(&nics, "nic", "a software RNIC on this packet port (repeat; pair with --gid)")
			fs.Var(&gids, "gid", "the software RNIC's address (repeat, one per --nic)")
			gidIndex := fs.Int("gid-index", 0, "GID index of verbs devices")
			host := fs.String("host", "", "this host's name for the analyzer (default: hostname)")
			analyzer := fs.String("analyzer", "", "analyzer address (host:port)")
			out := fs.String("out", "", "also append the batches to this file")
			listen := fs.String("listen", "127.0.0.1:0", "HTTP address")
			interval := fs.Duration("interval", 100*time.Millisecond, "probe interval per RNIC")
			timeout := fs.Duration("timeout", 500*time.Millisecond, "probe timeout")
			rotate := fs.Duration("rotate", 10*time.Second, "replace one source port of the pool this often")
			pool := fs.Int("pool", 8, "source ports in the pool")
			cores := fs.String("cores", "", "pin the RNICs' loops to these cores (list, e.g. 2-3)")
			duration := fs.Duration("duration", 0, "stop after this long (0: until SIGTERM)")
			maxHeld := fs.Int("max-held", 100000, "results held while the analyzer is down")
			return func(ctx context.Context, env *Env, args []string) error {
				if len(args) > 0 {
					return Usagef("no arguments")
				}
				if os.Getenv("GOGC") == "" {
					debug.SetGCPercent(hostmesh.GCPercent)
				}
				cfg := hostmesh.AgentConfig{Config: hostmesh.Config{Host: *host, Interval: *interval, Timeout: *timeout,
					Rotate: *rotate, PoolSize: *pool, MaxBuffered: *maxHeld}}
				if cfg.Host == "" {
					cfg.Host, _ = os.Hostname()
				}
				if *cores != "" {
					cs, err := dpdk.ParseCoreList(*cores)
					if err != nil {
						return Usagef("--cores: %v", err)
					}
					cfg.Cores = cs
					// The agent's loops poll these cores: no other
					// poller of the host may have them.
					claims := coreClaims()
					for _, c := range cs {
						if err := claims.Claim(c, "hostmesh agent"); err != nil {
							return fmt.Errorf("--cores: %w", err)
						}
						defer claims.Release(c)
					}
				}
				list, closeAll, err := openMeshRNICs(ctx, *devs, nics, gids, *gidIndex)
				defer closeAll()
				if err != nil {
					return err
				}
				up := hostmesh.NewUploader(*analyzer, *maxHeld)
				if *out != "" {
					f, err := os.OpenFile(*out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
					if err != nil {
						return err
					}
					defer f.Close()
					up.File = f
				}
				ag, err := hostmesh.NewAgent(cfg, list, up, env.Log)
				if err != nil {
					return err
				}
				defer ag.Close()
				h := service.New("hostmesh-agent", *listen, env.Log)
				h.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
					c, rn := ag.Status()
					service.WriteJSON(w, 200, map[string]any{"counters": c, "rnics": rn, "upload": up.Stats()})
				})
				h.AddCheck("analyzer", func() error {
					if st := up.Stats(); *analyzer != "" && st.LastError != "" {
						return errors.New(st.LastError)
					}
					return nil
				})
				if *duration > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, *duration)
					defer cancel()
				}
				agentDone := make(chan error, 1)
				go func() { agentDone <- ag.Run(ctx) }()
				env.Log.Info("hostmesh agent", "host", cfg.Host, "rnics", len(list), "analyzer", *analyzer)
				if err := h.Run(ctx); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
					return err
				}
				<-agentDone
				c, rn := ag.Status()
				enc := json.NewEncoder(env.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(map[string]any{"counters": c, "rnics": rn, "upload": up.Stats()})
			}
		},
	})
}

// openMeshRNICs opens the verbs devices and starts the software RNICs.
func openMeshRNICs(ctx context.Context, devs string, nics, gids []string, gidIndex int) ([]hostmesh.Device, func(), error) {
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	var out []hostmesh.Device
	if devs == "all" {
		infos, err := verbs.DeviceList()
		if len(infos) == 0 {
			return nil, closeAll, fmt.Errorf("no RDMA devices: %v", err)
		}
		devs = ""
		for _, in := range infos {
			devs += in.Provider + ":" + in.Name + ","
		}
	}
	for _, name := range strings.Split(devs, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		d, err := verbs.OpenDevice(name)
		if err != nil {
			return nil, closeAll, err
		}
		closers = append(closers, func() { d.Close() })
		out = append(out, hostmesh.Device{Name: d.Info().Name, Dev: d, GIDIndex: gidIndex})
	}
	if len(nics) != len(gids) {
		return nil, closeAll, Usagef("each --nic needs its --gid (%d ports, %d addresses)", len(nics), len(gids))
	}
	for i, nic := range nics {
		f := rnicFlags{nic: nic, gids: gids[i], profile: "cx5"}
		r, err := f.open(fmt.Sprintf("mesh%d", i))
		if err != nil {
			return nil, closeAll, err
		}
		closers = append(closers, r.Close)
		if sd, ok := r.Dev.(*soft.Device); ok {
			if err := sd.Start(ctx); err != nil {
				return nil, closeAll, err
			}
		}
		out = append(out, hostmesh.Device{Name: fmt.Sprintf("soft%d", i), Dev: r.Dev})
	}
	if len(out) < 2 {
		return nil, closeAll, Usagef("need at least two RNICs (-d DEV,DEV or --nic/--gid twice)")
	}
	return out, closeAll, nil
}
