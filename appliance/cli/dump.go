package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dumper"
	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/internal/service"
)

const dumpListen = "127.0.0.1:9200"

func init() {
	register(&Command{
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
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			port := fs.String("port", "", "mirror port (driver:device)")
			queues := fs.Int("queues", 1, "receive queues, one worker each")
			cores := fs.String("cores", "", "core list for the workers, one per queue (e.g. 2-3); empty: unpinned")
			snap := fs.Int("snap-len", dumper.DefaultSnapLen, "bytes kept per copy (Lumina's snap-len)")
			num := fs.Int("num-pkts", dumper.DefaultNumPkts, "copies each worker can hold (Lumina's num-pkts)")
			dir := fs.String("dir", ".", "directory for the pcaps")
			file := fs.String("file", "dump.pcap", "pcap name; queue N writes NAME-qN.pcap (Lumina's dump-filename)")
			zstd := fs.Bool("zstd", false, "compress the pcaps with zstd")
			rewrite := fs.Int("rewrite-port", mirror.DefaultRewritePort, "UDP destination port of the copies (rewrite-udp-dst-port)")
			listen := fs.String("listen", dumpListen, "HTTP control address")
			start := fs.Bool("start", false, "start capturing at once instead of waiting for POST /v1/start")
			duration := fs.Duration("duration", 0, "with --start: stop, write and exit after this long")
			poolSize := fs.Int("pool", 8192, "receive buffers")
			name := fs.String("name", "dumper", "the dumper's name in logs, metrics and the trace report")
			asJSON := fs.Bool("json", false, "print the result of the last capture as JSON")
			return func(ctx context.Context, env *Env, args []string) error {
				if len(args) > 0 || *port == "" {
					return Usagef("want --port DRIVER:DEV and no arguments")
				}
				if *duration > 0 && !*start {
					return Usagef("--duration needs --start")
				}
				if *rewrite <= 0 || *rewrite > 65535 {
					return Usagef("--rewrite-port %d is not a UDP port", *rewrite)
				}
				var coreList []int
				if *cores != "" {
					var err error
					if coreList, err = dpdk.ParseCoreList(*cores); err != nil {
						return Usagef("%v", err)
					}
				}
				pool, err := dpdk.NewPool("dump", *poolSize, 0)
				if err != nil {
					return err
				}
				defer pool.Close()
				p, err := dpdk.Open(*port, dpdk.Config{Pool: pool, RxQueues: *queues, TxQueues: 1, Promiscuous: true})
				if err != nil {
					return err
				}
				defer p.Close()
				d, err := dumper.New(dumper.Config{Name: *name, Port: p, Cores: coreList, Claims: coreClaims(),
					SnapLen: *snap, NumPkts: *num, RewritePort: uint16(*rewrite), Dir: *dir, File: *file, Zstd: *zstd})
				if err != nil {
					return err
				}
				defer d.Close()
				svc := service.New("dump", *listen, env.Log)
				d.Register(svc)
				runCtx, cancel := context.WithCancel(ctx)
				defer cancel()
				if *start {
					if err := d.Start(); err != nil {
						return err
					}
					env.Log.Info("capturing", "port", p.Info().Name, "queues", *queues, "num_pkts", *num, "snap_len", *snap)
					if *duration > 0 {
						t := time.AfterFunc(*duration, cancel)
						defer t.Stop()
					}
				}
				if err := svc.Run(runCtx); err != nil {
					return err
				}
				files := d.Files()
				st := d.Status()
				if *asJSON {
					enc := json.NewEncoder(env.Stdout)
					enc.SetIndent("", "  ")
					return enc.Encode(map[string]any{"status": st, "files": files})
				}
				for _, f := range files {
					fmt.Fprintf(env.Stdout, "%s: %d packets, %d bytes\n", f.Path, f.Packets, f.Bytes)
				}
				fmt.Fprintf(env.Stdout, "captured %d, arena full %d, port dropped %d\n", st.Captured, st.ArenaFull, st.PortDropped)
				return nil
			}
		},
	})
}
