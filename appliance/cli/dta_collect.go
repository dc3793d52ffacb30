package cli

import (
	"context"
	"flag"
	"fmt"

	"github.com/rdma-appliance/appliance/collector/dtacollector"
)

var dtaCollectCmd = &Command{
	Name:    "collect",
	Summary: "the DTA collector: primitives' memory on an RDMA device, one RC QP per translator, queries over HTTP",
	Usage:   "-f collector.yml (-d DEVICE | --nic PORT --gid IP) [flags]",
	Long: `Allocates the memory of each primitive the file configures (on huge pages with
huge-pages: true), registers it with the RDMA device and serves translators on the exchange
address (TCP; by default the RDMA address, port 40050; a wildcard address only with
exchange-wildcard: true). Off loopback the exchange needs key-file, a secret shared with the
translators: each proves it holds the key (HMAC challenge-response; the key is never sent), and
the collector proves it back. Translators may be limited to a list (translators: name and IP),
and to max-translators at once; a connected translator's name and address are its own. Each
admitted translator's Hello gets an RC QP in RTR at its QPN and PSN, its own registrations of
the memory (WRITE, or atomics for key-increment only; revoked when it disconnects) and an Offer
with the collector's address, QP, MTU, responder resources and regions. The translator then
writes reports straight into memory; the collector's CPU only polls the Append lists (pollers
per list, optionally pinned with cores:), counts WRITEs with immediate (push notifications) and
reads memory when queried. The QP lives as long as the exchange's TCP connection. Serves until
SIGTERM.

The file (keys): name, exchange, exchange-wildcard, key-file, translators [{name, ip}],
max-translators, listen, mtu, max-atomic, huge-pages, redundancy, recv-depth,
layout per-slot-crc|dta-public, key-write {slots, data-width}, key-increment {slots}, append {batch, lists [{id, entries,
pollers, cores, recent}]}, sketches [{id, kind count-min|hyperloglog, columns, rows,
reporters, group}], postcards {slots, hops, cache}. collector/dtacollector/testdata/collector.yml is
an example.

HTTP on listen (query it with 'appliance dta query'):
  GET /v1/regions, /v1/connections, /v1/stats
  GET /v1/keywrite/{key}?consensus=k, /v1/keyincrement/{key}
  GET /v1/sketches/{id}/count/{key}, /v1/sketches/{id}/cardinality
  GET /v1/postcards/{key}, /v1/lists, /v1/lists/{id}?recent=n
  GET /metrics, /healthz

Examples:
  appliance dta collect -f collector.yml -d ibv:mlx5_0 -x 3
  appliance dta collect -f collector.yml --nic afpacket:veth1 --gid 10.9.0.1 --core 2`,
	Flags: dtaCollectFlags,
}

type dtaCollectOptions struct {
	file, listen, exchange string
	core                   int
	json                   bool
	rnic                   rnicFlags
	args                   []string
}

func dtaCollectFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o dtaCollectOptions
	o.rnic.declare(fs)
	fs.StringVar(&o.file, "f", "", "collector file (YAML)")
	fs.StringVar(&o.listen, "listen", "", "HTTP address, overriding the file's")
	fs.StringVar(&o.exchange, "exchange", "", "exchange address (TCP), overriding the file's (a wildcard needs exchange-wildcard, off loopback key-file)")
	fs.IntVar(&o.core, "core", -1, "pin the thread that drives a software RNIC to this core")
	fs.BoolVar(&o.json, "json", false, "print the final stats as JSON")
	return bind(&o, &o.args, runDtaCollect)
}

func runDtaCollect(ctx context.Context, env *Env, o dtaCollectOptions) error {
	if o.file == "" || len(o.args) > 0 {
		return Usagef("want -f collector.yml and no arguments")
	}
	s, err := dtacollector.LoadSpec(o.file)
	if err != nil {
		return err
	}
	if o.listen != "" {
		s.Listen = o.listen
	}
	if o.exchange != "" {
		if err := dtacollector.CheckExchange(o.exchange, s.ExchangeWildcard, s.Key != nil); err != nil {
			return Usagef("--exchange %v", err)
		}
		s.Exchange = o.exchange
	}
	st, err := runCollector(ctx, env, s, &o.rnic, o.core)
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(env.Stdout, st)
	}
	fmt.Fprintf(env.Stdout, "collector %s: %d translator connections, %d push notifications", st.Name, st.Connects, st.Pushes)
	for _, l := range st.Lists {
		fmt.Fprintf(env.Stdout, ", list %d: %d entries", l.ID, l.Read)
	}
	fmt.Fprintln(env.Stdout)
	return nil
}

// runCollector opens the device the flags name, drives it when it is a
// software RNIC and runs the collector until ctx ends.
func runCollector(ctx context.Context, env *Env, s dtacollector.Spec, rf *rnicFlags, core int) (dtacollector.Stats, error) {
	r, err := rf.open("dta-collect")
	if err != nil {
		return dtacollector.Stats{}, err
	}
	defer r.Close()
	// The RNIC stops last: QPs are destroyed through its loop.
	defer r.drive(core, "dta collect software RNIC")()
	opt := dtacollector.Options{Log: env.Log, Port: rf.ibPort, GIDIndex: rf.gidIndex}
	if s.Append != nil {
		for _, l := range s.Append.Lists {
			if l.Cores != "" {
				opt.Claims = coreClaims()
				break
			}
		}
	}
	return dtacollector.Run(ctx, s, r.Dev, opt)
}
