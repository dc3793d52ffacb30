package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/bench/trafficgen"
	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/translator/inject"
)

var luminaTrafficgenCmd = &Command{
	Name:    "trafficgen",
	Summary: "Lumina's RC traffic generator on one host: the responder serves, the requester dials it",
	Usage:   "--role responder|requester [device flags] [traffic flags] [RESPONDER-HOST]",
	Long: `The two hosts of a Lumina test each run one side. The responder listens on
--listen-port (Lumina's traffic.listen-port) at --bind (loopback by default: the first peer
to connect gets its QPs, so give the address the requester reaches); the requester
connects to it, the two
exchange their QPs' metadata over TCP, and the requester, before any traffic, pushes
the connections' metadata and the test's intents to the injector (--injector, the
software injector's or orchestrator's HTTP address; --intents FILE holds a load
request without connections, as 'appliance inject compile' reads). Each side uses
an RDMA device (-d) or a software RNIC on a packet port (--nic PORT --gid IPs).
The requester prints per-QP message completion times and goodput (--json: the
whole result).

Example, between two network namespaces:
  nsB# appliance lumina trafficgen --role responder --bind 10.77.0.2 --nic afpacket:vethB --gid 10.9.1.1
  nsA# appliance lumina trafficgen --role requester --nic afpacket:vethA --gid 10.9.0.1 \
         --rdma-verb write --num-qps 4 --message-size 65536 10.77.0.2`,
	Flags: luminaTrafficgenFlags,
}

type luminaTrafficgenOptions struct {
	role, verb, qps, injector, intents, intentsJSON, bind string
	port, core, timeout, retry                            int
	multi, json                                           bool
	seed                                                  uint64
	p                                                     trafficgen.Params
	rnic                                                  rnicFlags
	args                                                  []string
}

func luminaTrafficgenFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o luminaTrafficgenOptions
	o.rnic.declare(fs)
	fs.StringVar(&o.role, "role", "", "responder or requester")
	fs.IntVar(&o.port, "listen-port", 5000, "TCP port of the metadata exchange")
	fs.StringVar(&o.bind, "bind", "127.0.0.1", "responder: the address the exchange listens on (0.0.0.0: every interface)")
	fs.IntVar(&o.core, "core", -1, "pin the thread that drives a software RNIC to this core")
	fs.StringVar(&o.verb, "rdma-verb", "write", "write, read, send or send_read")
	fs.StringVar(&o.qps, "num-qps", "1", `QPs ("SEND,READ" counts for send_read)`)
	fs.IntVar(&o.p.MsgsPerQP, "num-msgs-per-qp", 1, "messages per QP")
	fs.IntVar(&o.p.MessageSize, "message-size", 4096, "message size in bytes")
	fs.IntVar(&o.p.MTU, "mtu", 1024, "path MTU in bytes")
	fs.IntVar(&o.p.TxDepth, "tx-depth", 1, "outstanding messages per QP")
	fs.IntVar(&o.timeout, "min-retransmit-timeout", 14, "IB ACK timeout exponent (4.096 us x 2^n)")
	fs.IntVar(&o.retry, "max-retransmit-retry", 7, "retries before retry exceeded")
	fs.BoolVar(&o.p.BarrierSync, "barrier-sync", false, "QPs send message m+1 only after every QP finished message m")
	fs.BoolVar(&o.multi, "multi-gid", false, "each QP on its own GID of the device's table (from -x on)")
	fs.Float64Var(&o.p.Rate, "rate", 0, "pace each QP to this many bit/s (0: as fast as it goes)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the initial PSNs and the data pattern")
	fs.StringVar(&o.injector, "injector", "", "requester: push the connections' metadata to this injector (host:port) before traffic")
	fs.StringVar(&o.intents, "intents", "", "requester: the test's intents as a load request (JSON file) to push with the metadata")
	fs.StringVar(&o.intentsJSON, "intents-json", "", "requester: the same load request given inline (the orchestrator passes it so)")
	fs.BoolVar(&o.json, "json", false, "requester: print the result as JSON")
	return bind(&o, &o.args, runLuminaTrafficgen)
}

// params checks the role and the arguments and completes the traffic
// parameters.
func (o *luminaTrafficgenOptions) params() (trafficgen.Params, error) {
	p := o.p
	switch o.role {
	case "responder":
		if len(o.args) > 0 {
			return p, Usagef("the responder takes no arguments")
		}
	case "requester":
		if len(o.args) != 1 {
			return p, Usagef("the requester needs the responder's address")
		}
	default:
		return p, Usagef("--role responder or requester")
	}
	p.Verb, p.Seed = intent.Verb(o.verb), o.seed
	p.Timeout, p.RetryCnt, p.NoRetry = uint8(o.timeout), uint8(o.retry), o.retry == 0
	if p.Verb == intent.VerbSendRead {
		var a, b int
		if _, err := fmt.Sscanf(o.qps, "%d,%d", &a, &b); err != nil {
			return p, Usagef("--num-qps %q: \"SEND,READ\" for send_read", o.qps)
		}
		p.NumQPs, p.SendQPs = a+b, a
	} else {
		n, err := strconv.Atoi(o.qps)
		if err != nil {
			return p, Usagef("--num-qps %q: a count", o.qps)
		}
		p.NumQPs = n
	}
	if err := p.Defaults().Validate(); err != nil {
		return p, Usagef("%v", err)
	}
	return p, nil
}

func runLuminaTrafficgen(ctx context.Context, env *Env, o luminaTrafficgenOptions) error {
	p, err := o.params()
	if err != nil {
		return err
	}
	r, err := o.rnic.open("trafficgen-" + o.role)
	if err != nil {
		return err
	}
	defer r.Close()
	ep, err := trafficgen.NewEndpoint(r.Dev, o.rnic.ibPort, o.rnic.gidIndex, o.multi)
	if err != nil {
		return err
	}
	defer r.drive(o.core, "lumina traffic generator")()
	if o.role == "responder" {
		return respondTraffic(ctx, env, o.bind, o.port, ep)
	}
	var push func([]intent.Conn) error
	if o.injector != "" {
		req, err := o.loadRequest()
		if err != nil {
			return err
		}
		push = trafficgen.InjectorPush(o.injector, req, p)
	}
	res, runErr := trafficgen.Dial(ctx, trafficgen.ResponderAddr(o.args[0], o.port), ep, p, push)
	if res == nil {
		return runErr
	}
	if o.json {
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

// respondTraffic serves one test as the responder and says whether its
// memory holds what was sent.
func respondTraffic(ctx context.Context, env *Env, bind string, port int, ep trafficgen.Endpoint) error {
	resp, err := trafficgen.Respond(ctx, bind, port, ep, env.Log)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "responder: %d QPs of %s, memory correct on %d\n", resp.Params.NumQPs, resp.Params.Verb, resp.Correct)
	if resp.Correct != resp.QPs {
		return errors.New("the responder's memory does not hold what was sent")
	}
	return nil
}

// loadRequest is the test's intents, inline or from a file (none: an
// empty request, which still carries the connections).
func (o *luminaTrafficgenOptions) loadRequest() (inject.LoadRequest, error) {
	var req inject.LoadRequest
	if o.intentsJSON != "" {
		dec := json.NewDecoder(strings.NewReader(o.intentsJSON))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			return req, Usagef("--intents-json: %v", err)
		}
	} else if o.intents != "" {
		return readLoad(o.intents)
	}
	return req, nil
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
