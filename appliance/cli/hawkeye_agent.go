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

	"github.com/rdma-appliance/appliance/dpdk"
	dnet "github.com/rdma-appliance/appliance/dpdk/net"
	"github.com/rdma-appliance/appliance/translator/hawkeye"
)

func init() {
	hawkeyeCmd.Sub = append(hawkeyeCmd.Sub, &Command{
		Name:    "agent",
		Summary: "the detection agent on a real host: RTTs over a threshold send polling packets (EtherType 0x6888)",
		Usage:   "[--port DRIVER:DEV] [--threshold 300] [--interval 2ms] [--input FILE] [flags]",
		Long: `Reads RTT samples, one a line, from --input (default stdin):

  SRC_IP DST_IP PROTO SPORT DPORT RTT_NS     e.g. 10.0.0.1 10.0.0.9 17 49153 4791 5200
  SRC_IP:SPORT DST_IP:DPORT RTT_NS           (protocol 17, RoCEv2's UDP)

('#' starts a comment). Each flow's base RTT is the smallest it has shown (or --base-rtt
for all); a sample above --threshold percent of it sends a polling packet for the flow,
at most one per flow every --interval: an Ethernet frame with EtherType 0x6888 and the
19-byte polling header (type 1, victim path; the victim's 5-tuple; see
translator/hawkeye/wire.go) out of --port to --gw-mac (the first-hop switch, which
routes it along the victim's path and traces PFC from there). Every poll is printed
(--json: one JSON object a line). Without --port the polls are only printed.

The samples can come from any measurement that sees the flow's round trips: the NIC's
congestion-control telemetry (the paper's BlueField PCC agent), a verbs ping, or a
log. Event ids start at --event-base (default the low byte of --ip), so hosts sharing
a fabric do not collide in the switches' per-event deduplication.

Example:
  rdma-rtt-feed | appliance hawkeye agent --port afpacket:eth1 --gw-mac 0c:42:a1:00:00:01 --ip 10.0.0.1`,
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
			return func(ctx context.Context, env *Env, args []string) error {
				if len(args) > 0 {
					return Usagef("no arguments expected")
				}
				if *threshold < 100 {
					return Usagef("--threshold %d: at least 100 (percent of the base RTT)", *threshold)
				}
				gwMAC, err := dnet.ParseMAC(*gw)
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
				in := io.Reader(os.Stdin)
				if *input != "-" {
					f, err := os.Open(*input)
					if err != nil {
						return err
					}
					defer f.Close()
					in = f
				}
				a := &pollAgent{det: hawkeye.NewDetector(*threshold, int64(*interval), uint8(first)), base: int64(*base),
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
						m, err := dnet.ParseMAC(*mac)
						if err != nil {
							return Usagef("--mac: %v", err)
						}
						a.src = m
					}
				}
				if err := a.run(ctx, in); err != nil {
					return err
				}
				env.Log.Info("hawkeye agent done", "samples", a.samples, "polls", a.polls, "sent", a.sent, "bad_lines", a.bad)
				return nil
			}
		},
	})
}

// pollAgent turns RTT lines into polling frames.
type pollAgent struct {
	det   *hawkeye.Detector
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
}

// agentPoll is what the agent prints per poll.
type agentPoll struct {
	TimeNs int64           `json:"time_ns"`
	Event  uint8           `json:"event"`
	Victim hawkeye.FlowKey `json:"victim"`
	RTT    int64           `json:"rtt_ns"`
	Base   int64           `json:"base_ns"`
	Sent   bool            `json:"sent"`
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
		k, rtt, err := parseRTTLine(line)
		if err != nil {
			a.bad++
			a.log.Warn("bad RTT sample", "line", ln, "err", err)
			continue
		}
		a.samples++
		if a.base > 0 && a.det.Base(k) == 0 {
			a.det.SetBase(k, a.base)
		}
		now := dpdk.Nanotime()
		p, ok := a.det.Observe(k, rtt, now)
		if !ok {
			continue
		}
		a.polls++
		sent := a.send(p)
		if err := a.print(agentPoll{TimeNs: now, Event: p.Event, Victim: k, RTT: rtt, Base: a.det.Base(k), Sent: sent}); err != nil {
			return err
		}
	}
	return sc.Err()
}

// send transmits a polling frame, padded to the 60-byte minimum (the
// NIC adds the FCS).
func (a *pollAgent) send(p hawkeye.Poll) bool {
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
func parseRTTLine(line string) (hawkeye.FlowKey, int64, error) {
	f := strings.Fields(line)
	var k hawkeye.FlowKey
	addr := func(s string) (uint32, error) {
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is4() {
			return 0, fmt.Errorf("%q: not an IPv4 address", s)
		}
		b := a.As4()
		return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]), nil
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
			b := ap.Addr().As4()
			*dst = uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
			if i == 0 {
				k.Sport = ap.Port()
			} else {
				k.Dport = ap.Port()
			}
		}
		k.Proto = hawkeye.ProtoUDP
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
