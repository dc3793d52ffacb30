package cli

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/sysfs"
	"github.com/rdma-appliance/appliance/dumper"
	"github.com/rdma-appliance/appliance/internal/mirror"
)

const dumpListen = dumper.DefaultListen

var dumpCmd = &Command{
	Name:    "dump",
	Summary: "Lumina's dumper: capture the injector's mirrored copies on a port into per-queue pcaps",
	Usage:   "--port DRIVER:DEV [flags]",
	Long: `One worker per receive queue (pinned with --cores) copies snap-len bytes of every
mirrored copy into a preallocated arena of num-pkts copies; on stop (POST /v1/stop,
SIGTERM, or --duration) the copies are sorted by mirror sequence, restored (UDP ports,
ECN) and written as nanosecond pcaps, one per queue: DIR/NAME-qN.pcap[.zst]. Copies
lost to a full arena or a full port queue are counted and reported.

Control API on --listen:
  POST /v1/start, POST /v1/stop, GET /v1/status, GET /v1/files, GET /v1/files/{name}
  GET /metrics, /healthz

Example (capture for 10 s on an AF_PACKET port with 2 queues on cores 2 and 3):
  appliance dump --port afpacket:ens1f1,fanout=hash --queues 2 --cores 2-3 --start --duration 10s`,
	Flags: dumpFlags,
}

type dumpOptions struct {
	port, cores, dir, file, listen, name string
	queues, snap, num, rewrite, poolSize int
	zstd, start, json                    bool
	duration                             time.Duration
	args                                 []string
}

func dumpFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o dumpOptions
	fs.StringVar(&o.port, "port", "", "mirror port (driver:device)")
	fs.IntVar(&o.queues, "queues", 1, "receive queues, one worker each")
	fs.StringVar(&o.cores, "cores", "", "core list for the workers, one per queue (e.g. 2-3), or numa: cores of the port's NUMA node; empty: unpinned")
	fs.IntVar(&o.snap, "snap-len", dumper.DefaultSnapLen, "bytes kept per copy (Lumina's snap-len)")
	fs.IntVar(&o.num, "num-pkts", dumper.DefaultNumPkts, "copies each worker can hold (Lumina's num-pkts)")
	fs.StringVar(&o.dir, "dir", ".", "directory for the pcaps")
	fs.StringVar(&o.file, "file", "dump.pcap", "pcap name; queue N writes NAME-qN.pcap (Lumina's dump-filename)")
	fs.BoolVar(&o.zstd, "zstd", false, "compress the pcaps with zstd")
	fs.IntVar(&o.rewrite, "rewrite-port", mirror.DefaultRewritePort, "UDP destination port of the copies (rewrite-udp-dst-port)")
	fs.StringVar(&o.listen, "listen", dumpListen, "HTTP control address")
	fs.BoolVar(&o.start, "start", false, "start capturing at once instead of waiting for POST /v1/start")
	fs.DurationVar(&o.duration, "duration", 0, "with --start: stop, write and exit after this long")
	fs.IntVar(&o.poolSize, "pool", 8192, "receive buffers")
	fs.StringVar(&o.name, "name", "dumper", "the dumper's name in logs, metrics and the trace report")
	fs.BoolVar(&o.json, "json", false, "print the result of the last capture as JSON")
	return bind(&o, &o.args, runDump)
}

func runDump(ctx context.Context, env *Env, o dumpOptions) error {
	if len(o.args) > 0 || o.port == "" {
		return Usagef("want --port DRIVER:DEV and no arguments")
	}
	if o.duration > 0 && !o.start {
		return Usagef("--duration needs --start")
	}
	if o.rewrite <= 0 || o.rewrite > 65535 {
		return Usagef("--rewrite-port %d is not a UDP port", o.rewrite)
	}
	var coreList []int
	switch o.cores {
	case "":
	case "numa":
		var err error
		if coreList, err = numaCores(o.port, max(o.queues, 1)); err != nil {
			return err
		}
		env.Log.Info("cores of the port's NUMA node", "port", o.port, "cores", coreList)
	default:
		var err error
		if coreList, err = dpdk.ParseCoreList(o.cores); err != nil {
			return Usagef("%v", err)
		}
	}
	files, st, err := dumper.Run(ctx, dumper.RunOptions{PortName: o.port, Queues: o.queues, PoolSize: o.poolSize,
		Listen: o.listen, Start: o.start, Duration: o.duration, Log: env.Log,
		Config: dumper.Config{Name: o.name, Cores: coreList, Claims: coreClaims(), SnapLen: o.snap, NumPkts: o.num,
			RewritePort: uint16(o.rewrite), Dir: o.dir, File: o.file, Zstd: o.zstd}})
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(env.Stdout, map[string]any{"status": st, "files": files})
	}
	for _, f := range files {
		fmt.Fprintf(env.Stdout, "%s: %d packets, %d bytes\n", f.Path, f.Packets, f.Bytes)
	}
	fmt.Fprintf(env.Stdout, "captured %d, arena full %d, port dropped %d\n", st.Captured, st.ArenaFull, st.PortDropped)
	return nil
}

// numaCores picks n cores for a port's workers on its NIC's NUMA node, as
// Lumina's orchestrator starts its dumper on the first lcores of the
// node (core 0, the kernel's, is left out when the node has more than
// n). A port without a node (a virtual device) takes the process's cores.
func numaCores(port string, n int) ([]int, error) {
	allowed, err := dpdk.AllowedCores()
	if err != nil {
		return nil, fmt.Errorf("--cores numa: %w", err)
	}
	node := sysfs.PortNUMANode(port)
	cands := allowed
	if node >= 0 {
		ok := map[int]bool{}
		for _, c := range allowed {
			ok[c] = true
		}
		cands = nil
		for _, c := range sysfs.NodeCPUs(node) {
			if ok[c] {
				cands = append(cands, c)
			}
		}
	}
	if len(cands) > n && cands[0] == 0 {
		cands = cands[1:]
	}
	if len(cands) < n {
		return nil, fmt.Errorf("--cores numa: %d queues need %d cores, NUMA node %d of %s has %d this process may use (%v)",
			n, n, node, port, len(cands), cands)
	}
	return cands[:n], nil
}
