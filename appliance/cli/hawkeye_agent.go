package cli

import (
	"context"
	"flag"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/appliance/hawkeyeagent"
	"github.com/rdma-appliance/appliance/appliance/host"
	"github.com/rdma-appliance/appliance/appliance/hostmesh"
	"github.com/rdma-appliance/appliance/bench/fabric"
	"github.com/rdma-appliance/appliance/bench/perftest"
	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
)

var hawkeyeAgentCmd = &Command{
	Name:    "agent",
	Summary: "the detection agent on a real host: RTTs over a threshold send polling packets (EtherType 0x6888)",
	Usage:   "[--port DRIVER:DEV] [--threshold 300] [--interval 2ms] [--input FILE | --ping SERVER (-d DEV | --nic PORT --gid IP)] [--pfc-netdev IF|auto] [flags]",
	Long: `Watches the RTTs of flows and sends polling packets for those that slow down. The RTTs
come from one of two sources.

--input FILE (default stdin) holds samples, one a line:

  SRC_IP DST_IP PROTO SPORT DPORT RTT_NS     e.g. 10.0.0.1 10.0.0.9 17 49153 4791 5200
  SRC_IP:SPORT DST_IP:DPORT RTT_NS           (protocol 17, RoCEv2's UDP)
  {"host": ..., "results": [...]}            a Hostmesh batch ('appliance mesh probe --out FILE'):
                                             twice each answered probe's one-way network
                                             latency is a round-trip sample of its 5-tuple
                                             (timeouts are not)

('#' starts a comment in the text forms).

--ping SERVER[:PORT] measures them itself: it connects to a perftest server ('appliance
verbs read' started without an address on the far host, TCP port 18515 by default) with
an RDMA device (-d, e.g. ibv:mlx5_0 in builds with -tags rdma, or a software RNIC:
--nic afpacket:IFNAME --gid IP) and posts one 8-byte RDMA READ every --ping-interval; a
READ is one-sided, so its completion time is the network's and the RNICs' round trip, a
sample of the QP's 5-tuple (its UDP source port as the kernel derives it from the two QP
numbers). '--ping loopback' runs the server in this process over an in-process link.

The base RTT is the fabric's largest round trip without queues, the same for every flow, as
the paper's §5 sets the threshold ("2-4 times the maximum RTT, determined by the maximum hop
count") and 'hawkeye eval' detects: --hops links on the longest host-to-host path (6 on a
fat-tree), each --link-delay both ways and a 1086-byte frame out and an ACK back at
--link-gbps (24.6 us with the defaults, the evaluation's fabric). --base-rtt fixes it
instead; --base-per-flow takes each flow's smallest RTT seen (a flow on a short path is then
caught sooner). A sample above --threshold percent of the base sends a polling packet for the flow,
at most one per flow every --interval: an Ethernet frame with EtherType 0x6888 and the
19-byte polling header (type 1, victim path; the victim's 5-tuple; see
internal/hawkeyewire/wire.go) out of --port to --gw-mac (the first-hop switch, which
routes it along the victim's path and traces PFC from there). Every poll is printed
(--json: one JSON object a line). Without --port the polls are only printed.

--pfc-netdev IF reads the NIC's PFC counters of --pfc-prio (default 3) every --pfc-interval
through the ethtool ioctl (the counters 'ethtool -S IF' lists: mlx5's rx_prioN_pause and
rx_prioN_pause_duration, ice's rx_priority_N_xoff.nic). While its switch pauses the NIC (time
paused grew in the last interval, or PAUSE frames arrived where the driver counts no time) the
polls carry the PFC bit, as a switch sets it on a paused egress: the NIC is the first paused
egress on the victim's path, and the switch that paused it traces PFC from the host's port
(a victim that sends nothing leaves no queue or paused egress on its path to find otherwise).
'auto' takes the netdev of -d's GID from sysfs.

The samples can come from any measurement that sees the flow's round trips: the NIC's
congestion-control telemetry (the paper's BlueField PCC agent), a verbs ping, or a
log, Hostmesh probes. Event ids start at --event-base (default the low byte of --ip), so hosts sharing
a fabric do not collide in the switches' per-event deduplication.

Examples:
  rdma-rtt-feed | appliance hawkeye agent --port afpacket:eth1 --gw-mac 0c:42:a1:00:00:01 --ip 10.0.0.1
  appliance hawkeye agent --ping 10.0.0.9 -d ibv:mlx5_0 --port eal:0000:3b:00.1 --gw-mac 0c:42:a1:00:00:01
  tail -f mesh.jsonl | appliance hawkeye agent --json`,

	Flags: hawkeyeAgentFlags,
}

type hawkeyeAgentOptions struct {
	port, input, gw, mac, ip, ping string
	threshold, evBase, pingCount   int
	core                           int
	interval, base, pingInterval   time.Duration
	hops                           int
	linkDelay                      time.Duration
	linkGbps                       float64
	perFlow                        bool
	json                           bool
	pfcNetdev                      string
	pfcPrio                        int
	pfcInterval                    time.Duration
	rnic                           rnicFlags
	args                           []string
}

func hawkeyeAgentFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o hawkeyeAgentOptions
	fs.StringVar(&o.port, "port", "", "packet port for polling frames (driver:device); none: print only")
	fs.IntVar(&o.threshold, "threshold", 300, "RTT threshold in percent of the base RTT")
	fs.DurationVar(&o.interval, "interval", 2*time.Millisecond, "least time between two polls of one flow")
	fs.DurationVar(&o.base, "base-rtt", 0, "fixed base RTT for every flow (0: the fabric's largest, from --hops, --link-delay and --link-gbps)")
	fs.IntVar(&o.hops, "hops", 6, "links on the fabric's longest host-to-host path (a fat-tree: 6)")
	fs.DurationVar(&o.linkDelay, "link-delay", 2*time.Microsecond, "one link's propagation delay")
	fs.Float64Var(&o.linkGbps, "link-gbps", 100, "link speed in Gbit/s")
	fs.BoolVar(&o.perFlow, "base-per-flow", false, "each flow's base is the smallest RTT it has shown")
	fs.StringVar(&o.input, "input", "-", "RTT samples file ('-': stdin)")
	fs.StringVar(&o.gw, "gw-mac", "ff:ff:ff:ff:ff:ff", "destination MAC of polling frames (the first-hop switch)")
	fs.StringVar(&o.mac, "mac", "", "source MAC (default: the port's)")
	fs.StringVar(&o.ip, "ip", "", "this host's IPv4 address (seeds the event ids)")
	fs.IntVar(&o.evBase, "event-base", -1, "first event id, 0-255 (default: from --ip, else 0)")
	fs.BoolVar(&o.json, "json", false, "print polls as JSON lines")
	fs.StringVar(&o.ping, "ping", "", "measure RTTs with RDMA READs to this perftest server (host[:port], or 'loopback')")
	fs.DurationVar(&o.pingInterval, "ping-interval", 10*time.Millisecond, "time between two pings")
	fs.IntVar(&o.pingCount, "ping-count", 0, "stop after this many pings (0: until SIGTERM)")
	fs.IntVar(&o.core, "core", -1, "pin the ping's thread (which drives a software RNIC) to this core")
	fs.StringVar(&o.pfcNetdev, "pfc-netdev", "", "the NIC's Ethernet interface, whose PFC counters say when it is paused ('auto': -d's; none: never)")
	fs.IntVar(&o.pfcPrio, "pfc-prio", 3, "the victims' PFC priority, 0-7")
	fs.DurationVar(&o.pfcInterval, "pfc-interval", 10*time.Millisecond, "time between two readings of the PFC counters")
	o.rnic.declare(fs)
	return bind(&o, &o.args, runHawkeyeAgent)
}

// config checks the flags and turns them into the agent's configuration.
func (o *hawkeyeAgentOptions) config(env *Env) (hawkeyeagent.Config, error) {
	cfg := hawkeyeagent.Config{Threshold: o.threshold, Interval: o.interval, BaseRTT: o.base, Out: env.Stdout, JSON: o.json, Log: env.Log}
	switch {
	case len(o.args) > 0:
		return cfg, Usagef("no arguments expected")
	case o.ping != "" && o.input != "-":
		return cfg, Usagef("--ping and --input are two sources of RTTs: give one")
	case o.pingInterval <= 0 || o.pingCount < 0:
		return cfg, Usagef("--ping-interval must be positive and --ping-count at least 0")
	case o.threshold < 100:
		return cfg, Usagef("--threshold %d: at least 100 (percent of the base RTT)", o.threshold)
	case o.base < 0:
		return cfg, Usagef("--base-rtt %v: not negative", o.base)
	case o.base > 0 && o.perFlow:
		return cfg, Usagef("--base-rtt and --base-per-flow are two bases: give one")
	case o.hops < 1 || o.hops > 64:
		return cfg, Usagef("--hops %d: 1..64", o.hops)
	case o.linkDelay < 0:
		return cfg, Usagef("--link-delay %v: not negative", o.linkDelay)
	case !(o.linkGbps > 0) || o.linkGbps > 1e5:
		return cfg, Usagef("--link-gbps %v: above 0, at most 100000", o.linkGbps)
	case o.pfcPrio < 0 || o.pfcPrio > 7:
		return cfg, Usagef("--pfc-prio %d: 0-7", o.pfcPrio)
	case o.pfcInterval < 100*time.Microsecond:
		return cfg, Usagef("--pfc-interval %v: at least 100us (each reading is an ioctl the driver may answer from firmware)", o.pfcInterval)
	case o.pfcNetdev == "auto" && (o.rnic.dev == "" || o.ping == ""):
		return cfg, Usagef("--pfc-netdev auto takes the netdev of -d's GID: give --ping with -d, or name the interface")
	}
	if o.base == 0 && !o.perFlow {
		// The evaluation's base: hawkeyesim.MaxRTT over a fabric of
		// these links, with its 1024-byte MTU and RoCEv2's 62 bytes of
		// headers.
		cfg.BaseRTT = time.Duration(hawkeyewire.BaseRTT(o.hops, float64(o.linkDelay), o.linkGbps*1e9, fabricFrameBytes))
	}
	var err error
	if cfg.Dst, err = header.ParseMAC(o.gw); err != nil {
		return cfg, Usagef("--gw-mac: %v", err)
	}
	if o.ip != "" {
		a, err := netip.ParseAddr(o.ip)
		if err != nil || !a.Is4() {
			return cfg, Usagef("--ip %q: an IPv4 address", o.ip)
		}
		cfg.FirstEvent = a.As4()[3]
	}
	if o.evBase >= 0 {
		if o.evBase > 255 {
			return cfg, Usagef("--event-base %d: 0-255", o.evBase)
		}
		cfg.FirstEvent = uint8(o.evBase)
	}
	return cfg, nil
}

func runHawkeyeAgent(ctx context.Context, env *Env, o hawkeyeAgentOptions) error {
	cfg, err := o.config(env)
	if err != nil {
		return err
	}
	if o.port != "" {
		pool, err := dpdk.NewPool("hawkeye-agent", 256, 0)
		if err != nil {
			return err
		}
		defer pool.Close()
		p, err := dpdk.Open(o.port, dpdk.Config{Pool: pool, RxQueues: 1, TxQueues: 1})
		if err != nil {
			return err
		}
		defer p.Close()
		cfg.Port, cfg.Pool, cfg.Src = p, pool, p.Info().MAC
		if o.mac != "" {
			if cfg.Src, err = header.ParseMAC(o.mac); err != nil {
				return Usagef("--mac: %v", err)
			}
		}
	}
	if o.pfcNetdev != "" {
		stop, err := o.pfcMonitor(ctx, env, &cfg)
		if err != nil {
			return err
		}
		defer stop()
	}
	if o.ping != "" {
		closePing, err := o.pingSource(ctx, &cfg)
		if err != nil {
			return err
		}
		defer closePing()
	} else if o.input != "-" {
		f, err := os.Open(o.input)
		if err != nil {
			return err
		}
		defer f.Close()
		cfg.Input = f
	} else {
		cfg.Input = os.Stdin
	}
	return hawkeyeagent.New(cfg).Run(ctx)
}

// pfcMonitor opens the NIC's PFC counters and samples them until stop.
func (o *hawkeyeAgentOptions) pfcMonitor(ctx context.Context, env *Env, cfg *hawkeyeagent.Config) (stop func(), err error) {
	nd := o.pfcNetdev
	if nd == "auto" {
		dev := o.rnic.dev
		if _, name, ok := strings.Cut(dev, ":"); ok {
			dev = name
		}
		if nd, err = hostmesh.NetdevOf("/sys", dev, o.rnic.ibPort, o.rnic.gidIndex); err != nil {
			return nil, err
		}
	}
	st, err := host.OpenPFCStats(nd, o.pfcPrio)
	if err != nil {
		return nil, err
	}
	m := &hawkeyeagent.PFCMonitor{Read: st.Read, Interval: o.pfcInterval}
	if _, err := st.Read(); err != nil {
		st.Close()
		return nil, err
	}
	env.Log.Info("hawkeye agent reading PFC counters", "netdev", nd, "prio", o.pfcPrio, "interval", o.pfcInterval)
	cfg.PFC = m
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
		st.Close()
		if n := m.Errors(); n > 0 {
			env.Log.Warn("hawkeye agent: PFC counter readings failed", "netdev", nd, "failures", n)
		}
	}, nil
}

// pingSource opens the RDMA device and connects to the perftest server
// the flags name; close releases both.
func (o *hawkeyeAgentOptions) pingSource(ctx context.Context, cfg *hawkeyeagent.Config) (close func(), err error) {
	p := &hawkeyeagent.Ping{Server: o.ping, Params: perftest.PingParams{Interval: o.pingInterval, Count: o.pingCount}}
	cfg.Ping = p
	if o.ping == "loopback" {
		if o.rnic.dev != "" || o.rnic.nic != "" {
			return nil, Usagef("--ping loopback makes its own two software RNICs: no -d or --nic")
		}
		// Two threads here drive the two RNICs: --core pins one thread
		// of a real ping only.
		p.Loopback = true
		return func() {}, nil
	}
	r, err := o.rnic.open("hawkeye-agent")
	if err != nil {
		return nil, err
	}
	conn, err := perftest.Dial(ctx, o.ping, perftest.DefaultPort)
	if err != nil {
		r.Close()
		return nil, err
	}
	p.Conn = conn
	p.Perftest = perftest.Config{Device: r.Dev, Poll: r.Poll, GIDIndex: o.rnic.gidIndex, Port: o.rnic.ibPort}
	p.Thread = func(f func() error) error { return onThread(o.core, "hawkeye agent ping", f) }
	return func() {
		conn.Close()
		r.Close()
	}, nil
}

// fabricFrameBytes is the data frame the base RTT serialises: the fabric
// simulator's (and the evaluation's) 1024-byte MTU and its RoCEv2 headers.
const fabricFrameBytes = 1024 + fabric.HeaderBytes
