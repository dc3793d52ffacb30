package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/appliance/hostmesh"
)

var meshPGDropCmd = &Command{
	Name:    "pgdrop",
	Summary: "poll switches' lossless-class ingress discards (PG drop counters) for the Hostmesh analyzer",
	Usage:   "--switch NAME=COMMAND [--switch ...] [--pg 3] [--every 1s] [--analyzer ADDR] [--out FILE]",
	Long: `Every --every, runs each switch's COMMAND (through sh -c), which must print SONiC's
'show priority-group drop counters' table, e.g.

  --switch rail0='ssh admin@rail0 show priority-group drop counters'

and sends the ports whose priority group --pg (the probes' lossless class) discarded frames
since the last reading to the analyzer (--analyzer, 'appliance mesh analyze --serve') and/or
appends them to --out as batches 'appliance mesh analyze FILE' reads. NAME must be the switch's
name as the probes' traced paths name it. A lossless group discards only with PFC off for it
or headroom too short for its cables: the analyzer charges the lost and slow probes over such a
switch to it.

The first reading of each port is its baseline; a counter that went backwards was cleared and
counts from zero. A switch that cannot be read, or prints rows that do not fit the table's
header, is logged and skipped until the next poll.`,
	Flags: meshPGDropFlags,
}

type meshPGDropOptions struct {
	switches            listFlag
	pg, maxHeld         int
	every, duration     time.Duration
	name, analyzer, out string
	args                []string
}

func meshPGDropFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o meshPGDropOptions
	fs.Var(&o.switches, "switch", "NAME=COMMAND: a switch and the command that prints its PG drop table (repeat)")
	fs.IntVar(&o.pg, "pg", 3, "priority group of the probes' lossless class")
	fs.DurationVar(&o.every, "every", time.Second, "poll interval")
	fs.DurationVar(&o.duration, "duration", 0, "stop after this long (0: until SIGTERM)")
	fs.StringVar(&o.name, "name", "pg-poller", "the poller's name in its batches")
	fs.StringVar(&o.analyzer, "analyzer", "", "analyzer address (host:port)")
	fs.StringVar(&o.out, "out", "", "also append the batches to this file")
	fs.IntVar(&o.maxHeld, "max-held", 100000, "records held while the analyzer is down")
	return bind(&o, &o.args, runMeshPGDrop)
}

func runMeshPGDrop(ctx context.Context, env *Env, o meshPGDropOptions) error {
	switch {
	case len(o.args) > 0:
		return Usagef("no arguments")
	case len(o.switches) == 0:
		return Usagef("--switch NAME=COMMAND: at least one switch")
	case o.pg < 0 || o.pg > 15:
		return Usagef("--pg %d: want a priority group 0 to 15", o.pg)
	case o.every <= 0:
		return Usagef("--every %v: want a positive interval", o.every)
	case o.analyzer == "" && o.out == "":
		return Usagef("nowhere to send the records: --analyzer and/or --out")
	}
	p := hostmesh.PGPoller{PG: o.pg}
	seen := map[string]bool{}
	for _, s := range o.switches {
		name, cmd, ok := strings.Cut(s, "=")
		name, cmd = strings.TrimSpace(name), strings.TrimSpace(cmd)
		if !ok || name == "" || cmd == "" {
			return Usagef("--switch %q: want NAME=COMMAND", s)
		}
		if seen[name] {
			return Usagef("--switch %s: named twice", name)
		}
		seen[name] = true
		p.Switches = append(p.Switches, hostmesh.PGSwitch{Name: name, Read: hostmesh.CommandPG(cmd)})
	}
	up := hostmesh.NewUploader(o.analyzer, o.maxHeld)
	if o.out != "" {
		f, err := os.OpenFile(o.out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		defer f.Close()
		up.File = f
	}
	env.Log.Info("pg drop poller", "switches", len(p.Switches), "pg", o.pg, "every", o.every, "analyzer", o.analyzer, "out", o.out)
	return hostmesh.RunPGPoller(ctx, hostmesh.PGPollOptions{Poller: p, Name: o.name, Every: o.every, Duration: o.duration, Up: up, Log: env.Log})
}
