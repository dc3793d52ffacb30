package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/rdma-appliance/appliance/internal/service"
	"github.com/rdma-appliance/appliance/p4/dtatofino"
)

var dtaTofinoCmd = &Command{
	Name:    "tofino",
	Summary: "the Tofino DTA translator's control plane: the collectors' exchange, the script loaded with bfshell, its counters",
	Usage:   "-f translator.yml (--sde PATH | --script FILE | --dry-run) [--listen ADDR]",
	Long: `Runs beside switchd on a Tofino loaded with p4/dtatofino/translator.p4 (compiled by bf-p4c
with the build options the file names). For each collector of the file it runs the exchange
that 'dta translate' runs with 'dta collect' (TCP, port 40050 by default; off loopback both
sides prove they hold key-file): the Hello carries the translator's address, QPN and first
PSN, the collector answers with its address, MAC, QP, path MTU and memory regions. Every
value a collector sends is checked against what translator.p4 holds (IPv4 unicast, a
unicast MAC, 24-bit QPN, regions of a power of two of entries within a 4 GiB window, 4-byte
Key-Write data, 5-hop postcards, the build's Append batch, the path MTU); an offer that does
not fit ends the command, naming the collector and the field. Then it renders the
bfrt_python setup script, runs '$SDE/run_bfshell.sh -b' with it, and runs the counter script
every interval: reports by opcode, reports not translated by reason, postcards, RDMA packets,
bytes, PSN resynchronisations and the next PSN per collector, on GET /v1/status and /metrics
(appliance_dta_tofino_*), with /healthz failing until the script is loaded.

The collectors' QPs live as long as this command holds the exchange connections: when a
collector goes away (a restart), every connection is set up again and the script loaded
again (a load resets every collector's PSN). With --script FILE each setup script is also
written to FILE; without --sde the command then holds the connections for FILE to be loaded
by hand (bfshell -b FILE), and reads no counters. --dry-run prints the setup script (or
writes it to --script) and exits, closing the connections: the collectors drop the QPs, so
the script shows what a load would do. Stops on SIGINT or SIGTERM.

The file (keys): name, program, listen, interval, ip, mac, qpn, dscp, no-seqnum,
append-batch, sketch-merge, no-meter, ack-snap, ports [{name, front-panel | dev-port, speed,
fec, autoneg, mac}], routes [{prefix, port, mac}], collectors [{name, exchange, key-file,
port, redundancy, udp-src-port}], peers [{name, ip, ack-port, first-seq}], flow-control
{rate, burst, high-dscp, cpu-port, cpu-queue}, reconnect-min, reconnect-max.
p4/dtatofino/testdata/translator.yml is an example. With flow-control, run 'dta switch-cpu'
on the switch's CPU port too.

Examples:
  appliance dta tofino -f translator.yml --sde $SDE
  appliance dta tofino -f translator.yml --dry-run > setup.py`,
	Flags: dtaTofinoFlags,
}

type dtaTofinoOptions struct {
	file, sde, script, listen string
	dryRun                    bool
	args                      []string
}

func dtaTofinoFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o dtaTofinoOptions
	fs.StringVar(&o.file, "f", "", "translator file (YAML)")
	fs.StringVar(&o.sde, "sde", os.Getenv("SDE"), "the SDE's directory: load with its run_bfshell.sh (default $SDE)")
	fs.StringVar(&o.script, "script", "", "write each setup script to this file too")
	fs.BoolVar(&o.dryRun, "dry-run", false, "connect, print the setup script (or write it to --script) and exit")
	fs.StringVar(&o.listen, "listen", "", "HTTP address, overriding the file's (default "+dtatofino.DefaultListen+")")
	return bind(&o, &o.args, runDtaTofino)
}

func runDtaTofino(ctx context.Context, env *Env, o dtaTofinoOptions) error {
	if len(o.args) > 0 || o.file == "" {
		return Usagef("want -f translator.yml and no arguments")
	}
	if !o.dryRun && o.sde == "" && o.script == "" {
		return Usagef("want --sde PATH (or $SDE) to load the script, --script FILE to load it by hand, or --dry-run")
	}
	s, err := dtatofino.LoadSpec(o.file)
	if err != nil {
		return err
	}
	if o.listen != "" {
		s.Listen = o.listen
	}
	c := &dtatofino.Controller{Spec: s, Log: env.Log}
	if o.script != "" {
		c.Script = func(script string) error { return os.WriteFile(o.script, []byte(script), 0o644) }
	}
	if o.dryRun {
		sess, err := c.Connect(ctx)
		if err != nil {
			return err
		}
		defer sess.Close()
		script, err := sess.Translator.Script()
		if err != nil {
			return err
		}
		if c.Script != nil {
			return c.Script(script)
		}
		_, err = io.WriteString(env.Stdout, script)
		return err
	}
	if o.sde != "" {
		c.Bfshell = dtatofino.DefaultBfshell(o.sde)
	}
	svc := service.New("dta-tofino", s.Listen, env.Log)
	c.Register(svc)
	svc.Go("controller", c.Run)
	err = svc.Run(ctx)
	st := c.Status()
	fmt.Fprintf(env.Stdout, "dta tofino %s: %d loads, %d counter reads (%d failed)\n", st.Name, st.Loads, st.CounterReads, st.CounterErrors)
	return err
}
