package cli

import (
	"context"
	"flag"
	"fmt"

	"github.com/rdma-appliance/appliance/translator/dtatranslator"
)

var dtaTranslateCmd = &Command{
	Name:    "translate",
	Summary: "the software DTA translator: reports in, RDMA WRITEs and FETCH_ADDs out to collectors",
	Usage:   "-f translator.yml [--port DRIVER:DEV] [--listen ADDR]",
	Long: `Polls a packet port for DTA reports (UDP 40040) and turns each into RDMA operations on one
RC connection per collector, set up through the collector's exchange (TCP, port 40050 by
default) and again whenever the collector goes away. With a collector's key-file the
translator proves it holds the shared secret and takes an offer only from a collector that
proves it too:

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

The file (keys): name, listen, port, ip, mac, core, burst, pool, no-seqnum, data-width, layout,
flush-timeout, rdma-ack-every, collectors [{name, exchange, key-file}], reliability {disabled,
ack-every, nack-interval}, flow-control {rate, burst, high-dscp, queue}, reconnect-min,
reconnect-max.

HTTP on --listen: GET /v1/status, /metrics, /healthz (fails naming a collector that is down).`,
	Flags: dtaTranslateFlags,
}

type dtaTranslateOptions struct {
	file, port, listen string
	json               bool
	args               []string
}

func dtaTranslateFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o dtaTranslateOptions
	fs.StringVar(&o.file, "f", "", "translator file (YAML)")
	fs.StringVar(&o.port, "port", "", "packet port, overriding the file's")
	fs.StringVar(&o.listen, "listen", "", "HTTP address, overriding the file's")
	fs.BoolVar(&o.json, "json", false, "print the final status as JSON")
	return bind(&o, &o.args, runDtaTranslate)
}

func runDtaTranslate(ctx context.Context, env *Env, o dtaTranslateOptions) error {
	if o.file == "" || len(o.args) > 0 {
		return Usagef("want -f translator.yml and no arguments")
	}
	s, err := dtatranslator.LoadSpec(o.file)
	if err != nil {
		return err
	}
	if o.port != "" {
		s.Port = o.port
	}
	if o.listen != "" {
		s.Listen = o.listen
	}
	if s.Port == "" {
		return Usagef("no packet port: set port in %s or give --port", o.file)
	}
	st, err := dtatranslator.Run(ctx, s, dtatranslator.RunOptions{Log: env.Log, Pin: pinClaimed})
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(env.Stdout, st)
	}
	fmt.Fprintf(env.Stdout, "translator %s: %d reports, %d RDMA packets out, %d malformed, %d NACKs\n",
		st.Name, st.Stats.Reports, st.Stats.RDMAOut, st.Stats.Malformed, st.Seq.NACKs)
	return nil
}
