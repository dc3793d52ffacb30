package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/appliance/hawkeyeagent"
	"github.com/rdma-appliance/appliance/bench/hawkeyesim"
	"github.com/rdma-appliance/appliance/bench/perftest"
	"github.com/rdma-appliance/appliance/collector/hostmeshanalyzer"
	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
)

func init() {
	hawkeyeCmd.Sub = append(hawkeyeCmd.Sub, &Command{
		Name:    "agent",
		Summary: "the detection agent on a real host: RTTs over a threshold send polling packets (EtherType 0x6888)",
		Usage:   "[--port DRIVER:DEV] [--threshold 300] [--interval 2ms] [--input FILE | --ping SERVER (-d DEV | --nic PORT --gid IP)] [flags]",
		Long: `Watches the RTTs of flows and sends polling packets for those that slow down. The RTTs
come from one of two sources.

--input FILE (default stdin) holds samples, one a line:

  SRC_IP DST_IP PROTO SPORT DPORT RTT_NS     e.g. 10.0.0.1 10.0.0.9 17 49153 4791 5200
  SRC_IP:SPORT DST_IP:DPORT RTT_NS           (protocol 17, RoCEv2's UDP)
  {"host": ..., "results": [...]}            a Hostmesh batch ('appliance mesh probe --out FILE'):
                                             each answered probe's one-way network latency
                                             is a sample of its 5-tuple (timeouts are not)

('#' starts a comment in the text forms).

--ping SERVER[:PORT] measures them itself: it connects to a perftest server ('appliance
verbs read' started without an address on the far host, TCP port 18515 by default) with
an RDMA device (-d, e.g. ibv:mlx5_0 in builds with -tags rdma, or a software RNIC:
--nic afpacket:IFNAME --gid IP) and posts one 8-byte RDMA READ every --ping-interval; a
READ is one-sided, so its completion time is the network's and the RNICs' round trip, a
sample of the QP's 5-tuple (its UDP source port as the kernel derives it from the two QP
numbers). '--ping loopback' runs the server in this process over an in-process link.

Each flow's base RTT is the smallest it has shown (or --base-rtt
for all); a sample above --threshold percent of it sends a polling packet for the flow,
at most one per flow every --interval: an Ethernet frame with EtherType 0x6888 and the
19-byte polling header (type 1, victim path; the victim's 5-tuple; see
internal/hawkeyewire/wire.go) out of --port to --gw-mac (the first-hop switch, which
routes it along the victim's path and traces PFC from there). Every poll is printed
(--json: one JSON object a line). Without --port the polls are only printed.

The samples can come from any measurement that sees the flow's round trips: the NIC's
congestion-control telemetry (the paper's BlueField PCC agent), a verbs ping, or a
log, Hostmesh probes. Event ids start at --event-base (default the low byte of --ip), so hosts sharing
a fabric do not collide in the switches' per-event deduplication.

Examples:
  rdma-rtt-feed | appliance hawkeye agent --port afpacket:eth1 --gw-mac 0c:42:a1:00:00:01 --ip 10.0.0.1
  appliance hawkeye agent --ping 10.0.0.9 -d ibv:mlx5_0 --port eal:0000:3b:00.1 --gw-mac 0c:42:a1:00:00:01
  tail -f mesh.jsonl | appliance hawkeye agent --json`,
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			port := fs.String("port", "", "packet port for polling frames (driver:device); none: print only")
			threshold := fs.Int("threshold", 300, "RTT threshold in percent of the base RTT")
			interval := fs.Duration("interval", 2*time.Millisecond, "least time between two polls of one flow")
			base := fs.Duration("base-rtt", 0, "fixed base RTT for every flow (0: the smallest seen per flow)")
			input := fs.String("input", "-", "RTT samples file ('-': stdin)")
			gw := fs.String("gw-mac", "ff:ff:ff:ff:ff:ff", "destination MAC of polling frames (the first-hop switch)")
			mac := fs.String("mac", "", "source MAC (default: the port's)")
			ip := fs.String("ip", "", "this host's IPv4 address (seeds the event ids)")
			evBase := fs.Int("event-base", -1, "first event id, 0-255 (default: from --ip, else 0)")
			asJSON := fs.Bool("json", false, "print polls as JSON lines")
			ping := fs.String("ping", "", "measure RTTs with RDMA READs to this perftest server (host[:port], or 'loopback')")
			pingInterval := fs.Duration("ping-interval", 10*time.Millisecond, "time between two pings")
			pingCount := fs.Int("ping-count", 0, "stop after this many pings (0: until SIGTERM)")
			core := fs.Int("core", -1, "pin the ping's thread (which drives a software RNIC) to this core")
			var rf rnicFlags
			rf.register(fs)
			return func(ctx context.Context, env *Env, args []string) error {
				if len(args) > 0 {
					return Usagef("no arguments expected")
				}
				if *ping != "" && *input != "-" {
					return Usagef("--ping and --input are two sources of RTTs: give one")
				}
				if *pingInterval <= 0 || *pingCount < 0 {
					return Usagef("--ping-interval must be positive and --ping-count at least 0")
				}
				if *threshold < 100 {
					return Usagef("--threshold %d: at least 100 (percent of the base RTT)", *threshold)
				}
				gwMAC, err := header.ParseMAC(*gw)
				if err != nil {
					return Usagef("--gw-mac: %v", err)
				}
				first := 0
				if *ip != "" {
					a, err := netip.ParseAddr(*ip)
					if err != nil || !a.Is4() {
						return Usagef("--ip %q: an IPv4 address", *ip)
					}
					first = int(a.As4()[3])
				}
				if *evBase >= 0 {
					if *evBase > 255 {
						return Usagef("--event-base %d: 0-255", *evBase)
					}
					first = *evBase
				}
				a := &pollAgent{det: hawkeyeagent.NewDetector(*threshold, int64(*interval), uint8(first)), base: int64(*base),
					dst: gwMAC, out: env.Stdout, json: *asJSON, log: env.Log}
				if *port != "" {
					pool, err := dpdk.NewPool("hawkeye-agent", 256, 0)
					if err != nil {
						return err
					}
					defer pool.Close()
					p, err := dpdk.Open(*port, dpdk.Config{Pool: pool, RxQueues: 1, TxQueues: 1})
					if err != nil {
						return err
					}
					defer p.Close()
					a.port, a.pool, a.src = p, pool, p.Info().MAC
					if *mac != "" {
						m, err := header.ParseMAC(*mac)
						if err != nil {
							return Usagef("--mac: %v", err)
						}
						a.src = m
					}
				}
				if *ping != "" {
					pp := perftest.PingParams{Interval: *pingInterval, Count: *pingCount}
					if err := a.ping(ctx, env, *ping, pp, &rf, *core); err != nil {
						return err
					}
				} else {
					in := io.Reader(os.Stdin)
					if *input != "-" {
						f, err := os.Open(*input)
						if err != nil {
							return err
						}
						defer f.Close()
						in = f
					}
					if err := a.run(ctx, in); err != nil {
						return err
					}
				}
				env.Log.Info("hawkeye agent done", "samples", a.samples, "polls", a.polls, "sent", a.sent, "bad_lines", a.bad)
				return a.err
			}
		},
	})
}

// pollAgent turns RTT lines into polling frames.
type pollAgent struct {
	det   *hawkeyeagent.Detector
	base  int64
	port  dpdk.Port
	pool  *dpdk.Pool
	src   [6]byte
	dst   [6]byte
	out   io.Writer
	json  bool
	frame []byte
	log   *slog.Logger

	samples, polls, sent, bad uint64
	// err is the first failure to print a poll (the ping's callback
	// cannot return it).
	err error
}

// agentPoll is what the agent prints per poll.
type agentPoll struct {
	TimeNs int64               `json:"time_ns"`
	Event  uint8               `json:"event"`
	Victim hawkeyewire.FlowKey `json:"victim"`
	RTT    int64               `json:"rtt_ns"`
	Base   int64               `json:"base_ns"`
	Sent   bool                `json:"sent"`
}

func (a *pollAgent) run(ctx context.Context, in io.Reader) error {
	sc := bufio.NewScanner(in)
	for ln := 1; sc.Scan(); ln++ {
		if ctx.Err() != nil {
			return nil
		}
		line := strings.TrimSpace(sc.Text())
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if line == "" {
			continue
		}
		if line[0] == '{' {
			if err := a.batch(line); err != nil {
				a.bad++
				a.log.Warn("bad Hostmesh batch", "line", ln, "err", err)
			}
			if a.err != nil {
				return a.err
			}
			continue
		}
		k, rtt, err := parseRTTLine(line)
		if err != nil {
			a.bad++
			a.log.Warn("bad RTT sample", "line", ln, "err", err)
			continue
		}
		if err := a.observe(k, rtt); err != nil {
			return err
		}
	}
	return sc.Err()
}

// batch takes the answered probes of a Hostmesh batch as samples: the
// one-way latency stands in for the RTT, since the threshold is relative
// to each flow's own base.
func (a *pollAgent) batch(line string) error {
	var b hostmeshanalyzer.Batch
	if err := json.Unmarshal([]byte(line), &b); err != nil {
		return err
	}
	for i := range b.Results {
		r := &b.Results[i]
		if r.Timeout || r.NetworkNs <= 0 {
			continue
		}
		src, err1 := netip.ParseAddr(r.SrcIP)
		dst, err2 := netip.ParseAddr(r.DstIP)
		if err1 != nil || err2 != nil || !src.Unmap().Is4() || !dst.Unmap().Is4() {
			return fmt.Errorf("result %d: %q -> %q: not IPv4 addresses", i, r.SrcIP, r.DstIP)
		}
		k := hawkeyewire.FlowKey{Src: addrU32(src), Dst: addrU32(dst), Proto: hawkeyesim.ProtoUDP, Sport: r.SPort, Dport: 4791}
		if a.observe(k, r.NetworkNs) != nil {
			break // a failed print: a.err holds it and run stops on it
		}
	}
	return nil
}

// ping measures RTTs with RDMA READs on the device rf names, on a locked
// (and, with core >= 0, pinned) thread.
func (a *pollAgent) ping(ctx context.Context, env *Env, server string, pp perftest.PingParams, rf *rnicFlags, core int) error {
	fn := func(s perftest.PingSample) {
		src, dst := s.Src.Addr().Unmap(), s.Dst.Addr().Unmap()
		if !src.Is4() || !dst.Is4() {
			a.bad++
			return
		}
		k := hawkeyewire.FlowKey{Src: addrU32(src), Dst: addrU32(dst), Proto: hawkeyesim.ProtoUDP, Sport: s.SrcPort, Dport: 4791}
		a.observe(k, s.RTT)
	}
	if server == "loopback" {
		if rf.dev != "" || rf.nic != "" {
			return Usagef("--ping loopback makes its own two software RNICs: no -d or --nic")
		}
		// Two threads here drive the two RNICs: --core pins one thread
		// of a real ping only.
		_, err := perftest.PingLoopback(ctx, pp, perftest.LoopbackOptions{}, fn)
		return err
	}
	r, err := rf.open("hawkeye-agent")
	if err != nil {
		return err
	}
	defer r.Close()
	conn, err := dialPerftest(ctx, server, perftestPort)
	if err != nil {
		return err
	}
	defer conn.Close()
	cfg := perftest.Config{Device: r.Dev, Poll: r.Poll, GIDIndex: rf.gidIndex, Port: rf.ibPort}
	env.Log.Info("hawkeye agent pinging", "server", server, "device", r.Dev.Info().Name, "interval", pp.Interval)
	return onThread(core, "hawkeye agent ping", func() error {
		_, err := perftest.Ping(ctx, conn, cfg, pp, fn)
		return err
	})
}

// observe runs one sample through the detector and sends and prints the
// poll it raises.
func (a *pollAgent) observe(k hawkeyewire.FlowKey, rtt int64) error {
	if a.err != nil {
		return a.err
	}
	a.samples++
	if a.base > 0 && a.det.Base(k) == 0 {
		a.det.SetBase(k, a.base)
	}
	now := dpdk.Nanotime()
	p, ok := a.det.Observe(k, rtt, now)
	if !ok {
		return nil
	}
	a.polls++
	sent := a.send(p)
	a.err = a.print(agentPoll{TimeNs: now, Event: p.Event, Victim: k, RTT: rtt, Base: a.det.Base(k), Sent: sent})
	return a.err
}

func addrU32(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// send transmits a polling frame, padded to the 60-byte minimum (the
// NIC adds the FCS).
func (a *pollAgent) send(p hawkeyewire.Poll) bool {
	if a.port == nil {
		return false
	}
	a.frame = p.AppendFrame(a.frame[:0], a.dst, a.src)
	for len(a.frame) < 60 {
		a.frame = append(a.frame, 0)
	}
	pkt := a.pool.Get()
	if pkt == nil {
		return false
	}
	if pkt.CopyFrom(a.frame) != len(a.frame) || a.port.TxBurst(0, []*dpdk.Packet{pkt}) != 1 {
		pkt.Free()
		return false
	}
	a.sent++
	return true
}

func (a *pollAgent) print(p agentPoll) error {
	if a.json {
		return json.NewEncoder(a.out).Encode(p)
	}
	v := p.Victim
	_, err := fmt.Fprintf(a.out, "poll event %d: %v:%d -> %v:%d proto %d rtt %d ns (base %d ns) sent %v\n", p.Event,
		ip4(v.Src), v.Sport, ip4(v.Dst), v.Dport, v.Proto, p.RTT, p.Base, p.Sent)
	return err
}

func ip4(a uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)})
}

// parseRTTLine reads "SRC DST PROTO SPORT DPORT RTT" or
// "SRC:SPORT DST:DPORT RTT".
func parseRTTLine(line string) (hawkeyewire.FlowKey, int64, error) {
	f := strings.Fields(line)
	var k hawkeyewire.FlowKey
	addr := func(s string) (uint32, error) {
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is4() {
			return 0, fmt.Errorf("%q: not an IPv4 address", s)
		}
		return addrU32(a), nil
	}
	num := func(s string, bits int) (uint64, error) {
		v, err := strconv.ParseUint(s, 10, bits)
		if err != nil {
			return 0, fmt.Errorf("%q: not a %d-bit number", s, bits)
		}
		return v, nil
	}
	var err error
	var rttS string
	switch len(f) {
	case 6:
		if k.Src, err = addr(f[0]); err != nil {
			return k, 0, err
		}
		if k.Dst, err = addr(f[1]); err != nil {
			return k, 0, err
		}
		var v uint64
		if v, err = num(f[2], 8); err != nil {
			return k, 0, err
		}
		k.Proto = uint8(v)
		if v, err = num(f[3], 16); err != nil {
			return k, 0, err
		}
		k.Sport = uint16(v)
		if v, err = num(f[4], 16); err != nil {
			return k, 0, err
		}
		k.Dport = uint16(v)
		rttS = f[5]
	case 3:
		for i, dst := range []*uint32{&k.Src, &k.Dst} {
			ap, err := netip.ParseAddrPort(f[i])
			if err != nil || !ap.Addr().Is4() {
				return k, 0, fmt.Errorf("%q: want IPv4:PORT", f[i])
			}
			*dst = addrU32(ap.Addr())
			if i == 0 {
				k.Sport = ap.Port()
			} else {
				k.Dport = ap.Port()
			}
		}
		k.Proto = hawkeyesim.ProtoUDP
		rttS = f[2]
	default:
		return k, 0, errors.New("want SRC DST PROTO SPORT DPORT RTT_NS or SRC:SPORT DST:DPORT RTT_NS")
	}
	rtt, err := strconv.ParseInt(rttS, 10, 64)
	if err != nil || rtt <= 0 {
		return k, 0, fmt.Errorf("RTT %q: a positive number of ns", rttS)
	}
	return k, rtt, nil
}
