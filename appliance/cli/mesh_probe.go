package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/appliance/hostmesh"
	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/verbs"
	"github.com/rdma-appliance/appliance/verbs/soft"
)

// listFlag collects a repeated flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

var meshProbeCmd = &Command{
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
	Flags: meshProbeFlags,
}

type meshProbeOptions struct {
	devs, host, analyzer, out, listen, cores string
	nics, gids                               listFlag
	gidIndex, pool, maxHeld, pfcPrio         int
	interval, timeout, rotate, duration      time.Duration
	args                                     []string
}

func meshProbeFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o meshProbeOptions
	fs.StringVar(&o.devs, "d", "", "verbs devices, comma-separated (\"all\": every device with a RoCEv2 GID)")
	fs.Var(&o.nics, "nic", "a software RNIC on this packet port (repeat; pair with --gid)")
	fs.Var(&o.gids, "gid", "the software RNIC's address (repeat, one per --nic)")
	fs.IntVar(&o.gidIndex, "gid-index", 0, "GID index of verbs devices")
	fs.StringVar(&o.host, "host", "", "this host's name for the analyzer (default: hostname)")
	fs.StringVar(&o.analyzer, "analyzer", "", "analyzer address (host:port)")
	fs.StringVar(&o.out, "out", "", "also append the batches to this file")
	fs.StringVar(&o.listen, "listen", "127.0.0.1:0", "HTTP address")
	fs.DurationVar(&o.interval, "interval", 100*time.Millisecond, "probe interval per RNIC")
	fs.DurationVar(&o.timeout, "timeout", 500*time.Millisecond, "probe timeout")
	fs.DurationVar(&o.rotate, "rotate", 10*time.Second, "replace one source port of the pool this often")
	fs.IntVar(&o.pool, "pool", 8, "source ports in the pool")
	fs.StringVar(&o.cores, "cores", "", "pin the RNICs' loops to these cores (list, e.g. 2-3)")
	fs.DurationVar(&o.duration, "duration", 0, "stop after this long (0: until SIGTERM)")
	fs.IntVar(&o.maxHeld, "max-held", 100000, "results held while the analyzer is down")
	fs.IntVar(&o.pfcPrio, "pfc-prio", 3, "priority of the probes' lossless class, whose PFC pause counters (the ethtool statistics) go with the results (-1: none)")
	return bind(&o, &o.args, runMeshProbe)
}

func runMeshProbe(ctx context.Context, env *Env, o meshProbeOptions) error {
	if len(o.args) > 0 {
		return Usagef("no arguments")
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(hostmesh.GCPercent)
	}
	so := hostmesh.ServeOptions{Analyzer: o.analyzer, MaxHeld: o.maxHeld, Out: o.out, Listen: o.listen, Duration: o.duration, Log: env.Log,
		Agent: hostmesh.AgentConfig{Config: hostmesh.Config{Host: o.host, Interval: o.interval, Timeout: o.timeout,
			Rotate: o.rotate, PoolSize: o.pool, MaxBuffered: o.maxHeld}}}
	if so.Agent.Host == "" {
		so.Agent.Host, _ = os.Hostname()
	}
	if o.pfcPrio < -1 || o.pfcPrio > 7 {
		return Usagef("--pfc-prio %d: want a priority 0 to 7, or -1 for none", o.pfcPrio)
	}
	if o.pfcPrio >= 0 {
		pfc := hostmesh.NewSysPFC("/sys", o.pfcPrio)
		defer pfc.Close()
		so.Agent.ReadPFC = pfc.Read
	}
	if o.cores != "" {
		cs, err := dpdk.ParseCoreList(o.cores)
		if err != nil {
			return Usagef("--cores: %v", err)
		}
		so.Agent.Cores = cs
		// The agent's loops poll these cores: no other poller of the
		// host may have them.
		claims := coreClaims()
		for _, c := range cs {
			if err := claims.Claim(c, "hostmesh agent"); err != nil {
				return fmt.Errorf("--cores: %w", err)
			}
			defer claims.Release(c)
		}
	}
	list, closeAll, err := openMeshRNICs(ctx, o.devs, o.nics, o.gids, o.gidIndex)
	defer closeAll()
	if err != nil {
		return err
	}
	so.Devices = list
	st, err := hostmesh.Serve(ctx, so)
	if err != nil {
		return err
	}
	return writeJSON(env.Stdout, st)
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
