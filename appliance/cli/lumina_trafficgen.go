package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/bench/trafficgen"
	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/service"
	"github.com/rdma-appliance/appliance/translator/inject"
)

func init() {
	luminaCmd.Sub = append(luminaCmd.Sub, &Command{
		Name:    "trafficgen",
		Summary: "Lumina's RC traffic generator on one host: the responder serves, the requester dials it",
		Usage:   "--role responder|requester [device flags] [traffic flags] [RESPONDER-HOST]",
		Long: `The two hosts of a Lumina test each run one side. The responder listens on
--listen-port (Lumina's traffic.listen-port); the requester connects to it, the two
exchange their QPs' metadata over TCP, and the requester, before any traffic, pushes
the connections' metadata and the test's intents to the injector (--injector, the
software injector's or orchestrator's HTTP address; --intents FILE holds a load
request without connections, as 'appliance inject compile' reads). Each side uses
an RDMA device (-d) or a software RNIC on a packet port (--nic PORT --gid IPs).
The requester prints per-QP message completion times and goodput (--json: the
whole result).

Example, between two network namespaces:
  nsB# appliance lumina trafficgen --role responder --nic afpacket:vethB --gid 10.9.1.1
  nsA# appliance lumina trafficgen --role requester --nic afpacket:vethA --gid 10.9.0.1 \
         --rdma-verb write --num-qps 4 --message-size 65536 10.77.0.2`,
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			var rf rnicFlags
			rf.register(fs)
			role := fs.String("role", "", "responder or requester")
			port := fs.Int("listen-port", 5000, "TCP port of the metadata exchange")
			core := fs.Int("core", -1, "pin the thread that drives a software RNIC to this core")
			var p trafficgen.Params
			verb := fs.String("rdma-verb", "write", "write, read, send or send_read")
			qps := fs.String("num-qps", "1", `QPs ("SEND,READ" counts for send_read)`)
			fs.IntVar(&p.MsgsPerQP, "num-msgs-per-qp", 1, "messages per QP")
			fs.IntVar(&p.MessageSize, "message-size", 4096, "message size in bytes")
			fs.IntVar(&p.MTU, "mtu", 1024, "path MTU in bytes")
			fs.IntVar(&p.TxDepth, "tx-depth", 1, "outstanding messages per QP")
			timeout := fs.Int("min-retransmit-timeout", 14, "IB ACK timeout exponent (4.096 us x 2^n)")
			retry := fs.Int("max-retransmit-retry", 7, "retries before retry exceeded")
			fs.BoolVar(&p.BarrierSync, "barrier-sync", false, "QPs send message m+1 only after every QP finished message m")
			multi := fs.Bool("multi-gid", false, "each QP on its own GID of the device's table (from -x on)")
			fs.Float64Var(&p.Rate, "rate", 0, "pace each QP to this many bit/s (0: as fast as it goes)")
			seed := fs.Uint64("seed", 1, "seed of the initial PSNs and the data pattern")
			injector := fs.String("injector", "", "requester: push the connections' metadata to this injector (host:port) before traffic")
			intents := fs.String("intents", "", "requester: the test's intents as a load request (JSON file) to push with the metadata")
			intentsJSON := fs.String("intents-json", "", "requester: the same load request given inline (the orchestrator passes it so)")
			asJSON := fs.Bool("json", false, "requester: print the result as JSON")
			return func(ctx context.Context, env *Env, args []string) error {
				switch *role {
				case "responder":
					if len(args) > 0 {
						return Usagef("the responder takes no arguments")
					}
				case "requester":
					if len(args) != 1 {
						return Usagef("the requester needs the responder's address")
					}
				default:
					return Usagef("--role responder or requester")
				}
				p.Verb, p.Seed = intent.Verb(*verb), *seed
				p.Timeout, p.RetryCnt, p.NoRetry = uint8(*timeout), uint8(*retry), *retry == 0
				if p.Verb == intent.VerbSendRead {
					var a, b int
					if _, err := fmt.Sscanf(*qps, "%d,%d", &a, &b); err != nil {
						return Usagef("--num-qps %q: \"SEND,READ\" for send_read", *qps)
					}
					p.NumQPs, p.SendQPs = a+b, a
				} else {
					n, err := strconv.Atoi(*qps)
					if err != nil {
						return Usagef("--num-qps %q: a count", *qps)
					}
					p.NumQPs = n
				}
				if err := p.Defaults().Validate(); err != nil {
					return Usagef("%v", err)
				}
				r, err := rf.open("trafficgen-" + *role)
				if err != nil {
					return err
				}
				defer r.Close()
				ep := trafficgen.Endpoint{Dev: r.Dev, GIDIndex: rf.gidIndex}
				pa, err := r.Dev.QueryPort(rf.ibPort)
				if err != nil {
					return err
				}
				gids := pa.GIDs
				if rf.gidIndex >= len(gids) {
					return fmt.Errorf("GID index %d: the device has %d GIDs", rf.gidIndex, len(gids))
				}
				ep.GID = gids[rf.gidIndex].Addr()
				if *multi {
					for _, g := range gids[rf.gidIndex:] {
						ep.MultiGID = append(ep.MultiGID, g.Addr())
					}
				}
				runCtx, cancel := context.WithCancel(ctx)
				defer cancel()
				if r.Poll != nil {
					go func() {
						_ = onThread(*core, "lumina traffic generator", func() error {
							bo := dpdk.DefaultBackoff()
							for runCtx.Err() == nil {
								if r.Poll() {
									bo.Busy()
								} else {
									bo.Idle()
								}
							}
							return nil
						})
					}()
				}
				if *role == "responder" {
					ln, err := net.Listen("tcp", fmt.Sprintf(":%d", *port))
					if err != nil {
						return err
					}
					defer ln.Close()
					env.Log.Info("responder listening", "port", *port, "gid", ep.GID)
					tp, ok, err := trafficgen.Serve(runCtx, ln, ep)
					if err != nil {
						return err
					}
					good := 0
					for _, v := range ok {
						if v {
							good++
						}
					}
					fmt.Fprintf(env.Stdout, "responder: %d QPs of %s, memory correct on %d\n", tp.NumQPs, tp.Verb, good)
					if good != len(ok) {
						return errors.New("the responder's memory does not hold what was sent")
					}
					return nil
				}
				addr := args[0]
				if _, _, err := net.SplitHostPort(addr); err != nil {
					addr = net.JoinHostPort(addr, strconv.Itoa(*port))
				}
				var push func([]intent.Conn) error
				if *injector != "" {
					push, err = injectorPush(*injector, *intents, *intentsJSON, p)
					if err != nil {
						return err
					}
				}
				res, runErr := trafficgen.Dial(runCtx, addr, ep, p, push)
				if res == nil {
					return runErr
				}
				if *asJSON {
					if err := writeJSON(env.Stdout, res); err != nil {
						return err
					}
				} else {
					writeTrafficResult(env, res)
				}
				if runErr != nil {
					return runErr
				}
				if !res.OK() {
					return errors.New("the traffic did not complete correctly")
				}
				return nil
			}
		},
	})
}

// injectorPush returns the hook that loads the test into the injector at
// addr once the connections are known.
func injectorPush(addr, intentsFile, intentsJSON string, p trafficgen.Params) (func([]intent.Conn) error, error) {
	var req inject.LoadRequest
	if intentsJSON != "" {
		dec := json.NewDecoder(strings.NewReader(intentsJSON))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			return nil, Usagef("--intents-json: %v", err)
		}
	} else if intentsFile != "" {
		r, err := readLoad(intentsFile)
		if err != nil {
			return nil, err
		}
		req = r
	}
	p = p.Defaults()
	req.Geometry = intent.Geometry{Verb: p.Verb, MessageSize: p.MessageSize, MTU: p.MTU, NumMessages: p.MsgsPerQP}
	req.SendConns, req.Reset = p.SendQPs, true
	c := service.NewClient(addr)
	return func(conns []intent.Conn) error {
		req.Conns = conns
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return c.Do(ctx, "POST", "/v1/load", req, nil)
	}, nil
}

func writeTrafficResult(env *Env, res *trafficgen.Result) {
	fmt.Fprintf(env.Stdout, "%d QPs of %s, %d messages of %d B each: %.3f s, %.3f Gbit/s\n", len(res.QPs), res.Params.Verb,
		res.Params.MsgsPerQP, res.Params.MessageSize, res.Elapsed.Seconds(), res.Goodput/1e9)
	for i, q := range res.QPs {
		var sum time.Duration
		for _, d := range q.MCT {
			sum += d
		}
		avg := time.Duration(0)
		if len(q.MCT) > 0 {
			avg = sum / time.Duration(len(q.MCT))
		}
		fmt.Fprintf(env.Stdout, "  QP %d (%#x -> %#x): %d messages, mean MCT %v, %s, memory ok %v\n", i, q.Conn.RequesterQPN,
			q.Conn.ResponderQPN, len(q.MCT), avg, q.Status, q.DataOK)
	}
}
