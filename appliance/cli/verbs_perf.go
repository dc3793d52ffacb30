package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"time"

	"github.com/rdma-appliance/appliance/bench/perftest"
	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/verbs/soft"
)

// perftestPort is perftest's default TCP port for the exchange.
const perftestPort = 18515

// perfCommands are `appliance verbs write|read|send|atomic`.
func perfCommands() []*Command {
	var out []*Command
	for _, v := range []perftest.Verb{perftest.Write, perftest.Read, perftest.Send, perftest.Atomic} {
		out = append(out, &Command{
			Name:    v.String(),
			Summary: fmt.Sprintf("perftest-style %s bandwidth or latency test between two RDMA endpoints (ib_%s_bw, ib_%s_lat)", v, v, v),
			Usage:   "[flags] [SERVER]",
			Long: fmt.Sprintf(`Runs perftest's %[1]s test. Like ib_%[1]s_bw / ib_%[1]s_lat, the side started without an
address is the server: it listens on --port (TCP, default %[2]d) and takes the client's
parameters; the side given SERVER[:PORT] is the client. Both print perftest's columns.

Each side uses an RDMA device (-d, e.g. ibv:mlx5_0 in builds with -tags rdma) or a
software RNIC on a packet port (--nic afpacket:IFNAME --gid IP): one thread, pinned with
--core, drives it. --loopback runs both sides in this process over an in-process link.

Examples:
  appliance verbs %[1]s --loopback -s 65536
  appliance verbs %[1]s --lat --loopback -a
  server# appliance verbs %[1]s --nic afpacket:veth0 --gid 10.0.1.1
  client# appliance verbs %[1]s --nic afpacket:veth1 --gid 10.0.1.2 10.0.0.1`, v, perftestPort),
			Flags: perfFlags(v),
		})
	}
	return out
}

func perfFlags(v perftest.Verb) func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	return func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
		p := perftest.Params{Verb: v}
		var rf rnicFlags
		rf.register(fs)
		alias := func(short, long string, def int, usage string, dst *int) {
			fs.IntVar(dst, short, def, usage+"; alias --"+long)
			fs.IntVar(dst, long, def, usage+" (see -"+short+")")
		}
		alias("s", "size", 0, "message size in bytes (default 65536 for BW, 2 for latency; atomics 8)", &p.Size)
		alias("n", "iters", 0, "iterations per size (default 5000 BW, 1000 latency)", &p.Iters)
		alias("t", "tx-depth", 0, "outstanding send work requests per QP (default 128 BW, 1 latency)", &p.TxDepth)
		alias("r", "rx-depth", 0, "receives kept posted per QP for SEND tests (default 512)", &p.RxDepth)
		alias("Q", "cq-mod", 0, "signal every N-th send (default 100, at most the tx depth)", &p.CQMod)
		alias("m", "mtu", 0, "path MTU in bytes: 256..4096 (default: the port's active MTU)", &p.MTU)
		alias("q", "qps", 1, "number of QPs (BW tests)", &p.QPs)
		alias("I", "inline", -1, "largest message sent inline (default 220 for WRITE/SEND latency, 0 otherwise)", &p.Inline)
		fs.BoolVar(&p.All, "a", false, "run every size from 2 bytes to 8 MiB; alias --all")
		fs.BoolVar(&p.All, "all", false, "run every size from 2 bytes to 8 MiB (see -a)")
		fs.BoolVar(&p.Latency, "lat", false, "latency test (ib_*_lat) instead of bandwidth (ib_*_bw)")
		fs.BoolVar(&p.Gbits, "report-gbits", false, "report bandwidth in Gb/sec instead of MB/sec")
		if v == perftest.Write {
			fs.BoolVar(&p.WriteImm, "write-with-imm", false, "use RDMA WRITE with immediate (the responder takes receive completions)")
		}
		atomic := "FETCH_AND_ADD"
		if v == perftest.Atomic {
			fs.StringVar(&atomic, "A", "FETCH_AND_ADD", "atomic operation: FETCH_AND_ADD or CMP_AND_SWAP; alias --atomic-type")
			fs.StringVar(&atomic, "atomic-type", "FETCH_AND_ADD", "atomic operation (see -A)")
		}
		tcpPort := fs.Int("p", perftestPort, "TCP port of the exchange; alias --port")
		fs.IntVar(tcpPort, "port", perftestPort, "TCP port of the exchange (see -p)")
		loop := fs.Bool("loopback", false, "run server and client in this process, two software RNICs on an in-process link")
		cores := fs.String("cores", "", "with --loopback: two cores to pin the server's and the client's thread to")
		core := fs.Int("core", -1, "pin this side's thread (which drives a software RNIC) to a core")
		asJSON := fs.Bool("json", false, "print the results as JSON instead of perftest's report")
		return func(ctx context.Context, env *Env, args []string) error {
			// perftest takes the server's name anywhere on the line.
			var server string
			if len(args) > 0 {
				server = args[0]
				if err := fs.Parse(args[1:]); err != nil {
					return Usagef("%v", err)
				}
				if fs.NArg() > 0 {
					return Usagef("one SERVER address, got %q and %q", server, fs.Args())
				}
			}
			var err error
			if p.Atomic, err = perftest.ParseAtomicOp(atomic); err != nil {
				return Usagef("%v", err)
			}
			p = p.Defaults()
			if err := p.Validate(); err != nil {
				return Usagef("%v", err)
			}
			report := env.Stdout
			if *asJSON {
				report = nil
			}
			if *loop {
				if server != "" || rf.dev != "" || rf.nic != "" {
					return Usagef("--loopback runs both sides here: no SERVER, -d or --nic")
				}
				return perfLoopback(ctx, env, p, *cores, report, *asJSON)
			}
			r, err := rf.open("perftest")
			if err != nil {
				return err
			}
			defer r.Close()
			cfg := perftest.Config{Device: r.Dev, Poll: r.Poll, GIDIndex: rf.gidIndex, Port: rf.ibPort}
			var res []perftest.Result
			err = onThread(*core, "verbs "+v.String(), func() error {
				var err error
				res, err = perfSide(ctx, env, cfg, p, server, *tcpPort, report)
				return err
			})
			if err != nil {
				return err
			}
			if *asJSON {
				return writeJSON(env.Stdout, res)
			}
			return nil
		}
	}
}

// perfSide runs one side: a server that accepts one client, or a client.
func perfSide(ctx context.Context, env *Env, cfg perftest.Config, p perftest.Params, server string, port int,
	report io.Writer) ([]perftest.Result, error) {
	if server == "" {
		ln, err := net.Listen("tcp", ":"+strconv.Itoa(port))
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		env.Log.Info("waiting for a client", "listen", ln.Addr().String())
		stop := context.AfterFunc(ctx, func() { ln.Close() })
		defer stop()
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, err
		}
		defer conn.Close()
		return perftest.RunServer(ctx, conn, cfg, report)
	}
	conn, err := dialPerftest(ctx, server, port)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return perftest.RunClient(ctx, conn, cfg, p, report)
}

// dialPerftest connects to a perftest server (host[:port], port by
// default), retrying while it starts, as perftest does.
func dialPerftest(ctx context.Context, server string, port int) (net.Conn, error) {
	addr := server
	if _, _, err := net.SplitHostPort(server); err != nil {
		addr = net.JoinHostPort(server, strconv.Itoa(port))
	}
	var d net.Dialer
	var conn net.Conn
	var err error
	for try := 0; ; try++ {
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err = d.DialContext(dctx, "tcp", addr)
		cancel()
		if err == nil || try >= 20 || ctx.Err() != nil {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if err != nil {
		return nil, fmt.Errorf("connecting to the server: %w", err)
	}
	return conn, nil
}

// onThread runs f on a locked OS thread, pinned to core when core >= 0
// (claimed for owner: no other poller of the host may have it).
func onThread(core int, owner string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if core >= 0 {
			release, err := pinClaimed(core, owner)
			if err != nil {
				errc <- fmt.Errorf("--core %d: %w", core, err)
				return
			}
			defer release()
		}
		errc <- f()
	}()
	return <-errc
}

func perfLoopback(ctx context.Context, env *Env, p perftest.Params, cores string, report io.Writer, asJSON bool) error {
	opt := perftest.LoopbackOptions{Client: report, Profile: soft.ProfileCX5}
	if cores != "" {
		cs, err := dpdk.ParseCoreList(cores)
		if err != nil || len(cs) != 2 {
			return Usagef("--cores wants two cores, e.g. 0,1 (got %q)", cores)
		}
		opt.Cores = cs
	}
	client, server, err := perftest.Loopback(ctx, p, opt)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(env.Stdout, map[string]any{"client": client, "server": server})
	}
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
