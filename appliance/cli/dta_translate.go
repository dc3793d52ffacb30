package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"runtime"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/internal/service"
	"github.com/rdma-appliance/appliance/translator/dtatranslator"
)

func init() {
	dtaCmd.Sub = append(dtaCmd.Sub, &Command{
		Name:    "translate",
		Summary: "the software DTA translator: reports in, RDMA WRITEs and FETCH_ADDs out to collectors",
		Usage:   "-f translator.yml [--port DRIVER:DEV] [--listen ADDR]",
		Long: `Polls a packet port for DTA reports (UDP 40040) and turns each into RDMA operations on one
RC connection per collector, set up through the collector's exchange (TCP, port 40050 by
default) and again whenever the collector goes away:

  Key-Write      N WRITEs of {CRC32(key), data} into the key's N slots
  Key-Increment  N FETCH_ADDs into a count-min array
  Append         one WRITE per batch of B entries into the list's ring
  Sketch-Merge   columns merged across reporters, one WRITE per group
  Postcarder     one WRITE per flow once every hop has reported

Every RDMA packet carries a valid ICRC. Retransmittable reports are tracked per reporter:
gaps are NACKed (UDP 40044) so reporters resend. An RDMA rate meter drops low-priority reports
and queues high-priority ones (DSCP >= flow-control.high-dscp) under congestion, and tells
reporters. Keyed reports go to collector KeyChecksum(key) mod collectors; Append and
Sketch-Merge to the collector that holds the list or sketch.

The file (keys): name, listen, port, ip, mac, core, burst, pool, no-seqnum, data-width,
flush-timeout, rdma-ack-every, collectors [{name, exchange}], reliability {disabled,
ack-every, nack-interval}, flow-control {rate, burst, high-dscp, queue}, reconnect-min,
reconnect-max.

HTTP on --listen: GET /v1/status, /metrics, /healthz (fails naming a collector that is down).`,
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			file := fs.String("f", "", "translator file (YAML)")
			port := fs.String("port", "", "packet port, overriding the file's")
			listen := fs.String("listen", "", "HTTP address, overriding the file's")
			asJSON := fs.Bool("json", false, "print the final status as JSON")
			return func(ctx context.Context, env *Env, args []string) error {
				if *file == "" || len(args) > 0 {
					return Usagef("want -f translator.yml and no arguments")
				}
				s, err := dtatranslator.LoadSpec(*file)
				if err != nil {
					return err
				}
				if *port != "" {
					s.Port = *port
				}
				if *listen != "" {
					s.Listen = *listen
				}
				if s.Port == "" {
					return Usagef("no packet port: set port in %s or give --port", *file)
				}
				st, err := runTranslator(ctx, env, s)
				if err != nil {
					return err
				}
				if *asJSON {
					enc := json.NewEncoder(env.Stdout)
					enc.SetIndent("", "  ")
					return enc.Encode(st)
				}
				fmt.Fprintf(env.Stdout, "translator %s: %d reports, %d RDMA packets out, %d malformed, %d NACKs\n",
					st.Name, st.Stats.Reports, st.Stats.RDMAOut, st.Stats.Malformed, st.Seq.NACKs)
				return nil
			}
		},
	})
}

// runTranslator runs the translator service until ctx ends.
func runTranslator(ctx context.Context, env *Env, s dtatranslator.Spec) (dtatranslator.Status, error) {
	pool, err := dpdk.NewPool("dta-translate", s.Pool, 0)
	if err != nil {
		return dtatranslator.Status{}, err
	}
	defer pool.Close()
	p, err := dpdk.Open(s.Port, dpdk.Config{Pool: pool, RxQueues: 1, TxQueues: 1, Promiscuous: true})
	if err != nil {
		return dtatranslator.Status{}, err
	}
	defer p.Close()
	sv, err := dtatranslator.NewService(s, p, pool, env.Log)
	if err != nil {
		return dtatranslator.Status{}, err
	}
	h := service.New("dta-translate", s.Listen, env.Log)
	sv.Register(h)
	h.Go("translator loop", func(ctx context.Context) error {
		if s.Core != nil {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			release, err := pinClaimed(*s.Core, "dta translate "+s.Name)
			if err != nil {
				return err
			}
			defer release()
		}
		return sv.Run(ctx)
	})
	env.Log.Info("translator", "port", p.Info().Name, "ip", s.IP, "collectors", len(s.Collectors), "http", s.Listen)
	err = h.Run(ctx)
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return sv.Status(), err
}
