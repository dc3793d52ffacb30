package cli

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/rdma-appliance/appliance/bench/perftest"
	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/verbs/soft"
)

// perftestPort is perftest's default TCP port for the exchange.
const perftestPort = perftest.DefaultPort

// perfCommands are `appliance verbs write|read|send|atomic`.
func perfCommands() []*Command {
	var out []*Command
	for _, v := range []perftest.Verb{perftest.Write, perftest.Read, perftest.Send, perftest.Atomic} {
		out = append(out, &Command{
			Name:    v.String(),
			Summary: fmt.Sprintf("perftest-style %s bandwidth or latency test between two RDMA endpoints (ib_%s_bw, ib_%s_lat)", v, v, v),
			Usage:   "[flags] [SERVER]",
			Long: fmt.Sprintf(`Runs perftest's %[1]s test. Like ib_%[1]s_bw / ib_%[1]s_lat, the side started without an
address is the server: it listens on --port (TCP, default %[2]d) at --bind (loopback by
default: the first client gets its QPs and keys; give the address clients reach) and takes
the client's parameters; the side given SERVER[:PORT] is the client. Both print perftest's columns.

Each side uses an RDMA device (-d, e.g. ibv:mlx5_0 in builds with -tags rdma) or a
software RNIC on a packet port (--nic afpacket:IFNAME --gid IP): one thread, pinned with
--core, drives it. --loopback runs both sides in this process over an in-process link.

Examples:
  appliance verbs %[1]s --loopback -s 65536
  appliance verbs %[1]s --lat --loopback -a
  server# appliance verbs %[1]s --nic afpacket:veth0 --gid 10.0.1.1 --bind 10.0.0.1
  client# appliance verbs %[1]s --nic afpacket:veth1 --gid 10.0.1.2 10.0.0.1`, v, perftestPort),
			Flags: perfFlags(v),
		})
	}
	return out
}

// perfOptions are a perftest command's flags.
type perfOptions struct {
	p                   perftest.Params
	atomic, cores, bind string
	tcpPort, core       int
	loop, json          bool
	rnic                rnicFlags
	server              string
}

func perfFlags(v perftest.Verb) func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	return func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
		o := &perfOptions{p: perftest.Params{Verb: v}, atomic: "FETCH_AND_ADD"}
		o.declare(fs, v)
		return func(ctx context.Context, env *Env, args []string) error {
			// perftest takes the server's name anywhere on the line.
			if len(args) > 0 {
				o.server = args[0]
				if err := fs.Parse(args[1:]); err != nil {
					return Usagef("%v", err)
				}
				if fs.NArg() > 0 {
					return Usagef("one SERVER address, got %q and %q", o.server, fs.Args())
				}
			}
			return runPerf(ctx, env, *o)
		}
	}
}

// register declares perftest's flags, with its short and long names.
func (o *perfOptions) declare(fs *flag.FlagSet, v perftest.Verb) {
	p := &o.p
	o.rnic.declare(fs)
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
	if v == perftest.Atomic {
		fs.StringVar(&o.atomic, "A", "FETCH_AND_ADD", "atomic operation: FETCH_AND_ADD or CMP_AND_SWAP; alias --atomic-type")
		fs.StringVar(&o.atomic, "atomic-type", "FETCH_AND_ADD", "atomic operation (see -A)")
	}
	fs.IntVar(&o.tcpPort, "p", perftestPort, "TCP port of the exchange; alias --port")
	fs.IntVar(&o.tcpPort, "port", perftestPort, "TCP port of the exchange (see -p)")
	fs.StringVar(&o.bind, "bind", perftest.DefaultBind, "server: the address the exchange listens on (0.0.0.0: every interface)")
	fs.BoolVar(&o.loop, "loopback", false, "run server and client in this process, two software RNICs on an in-process link")
	fs.StringVar(&o.cores, "cores", "", "with --loopback: two cores to pin the server's and the client's thread to")
	fs.IntVar(&o.core, "core", -1, "pin this side's thread (which drives a software RNIC) to a core")
	fs.BoolVar(&o.json, "json", false, "print the results as JSON instead of perftest's report")
}

func runPerf(ctx context.Context, env *Env, o perfOptions) error {
	p := o.p
	var err error
	if p.Atomic, err = perftest.ParseAtomicOp(o.atomic); err != nil {
		return Usagef("%v", err)
	}
	p = p.Defaults()
	if err := p.Validate(); err != nil {
		return Usagef("%v", err)
	}
	report := env.Stdout
	if o.json {
		report = nil
	}
	if o.loop {
		if o.server != "" || o.rnic.dev != "" || o.rnic.nic != "" {
			return Usagef("--loopback runs both sides here: no SERVER, -d or --nic")
		}
		return perfLoopback(ctx, env, p, o.cores, report, o.json)
	}
	r, err := o.rnic.open("perftest")
	if err != nil {
		return err
	}
	defer r.Close()
	side := perftest.SideOptions{Server: o.server, Port: o.tcpPort, Bind: o.bind, Params: p, Report: report, Log: env.Log,
		Config: perftest.Config{Device: r.Dev, Poll: r.Poll, GIDIndex: o.rnic.gidIndex, Port: o.rnic.ibPort}}
	var res []perftest.Result
	err = onThread(o.core, "verbs "+p.Verb.String(), func() error {
		var err error
		res, err = perftest.RunSide(ctx, side)
		return err
	})
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(env.Stdout, res)
	}
	return nil
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
