package cli

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/rdma-appliance/appliance/bench/fabric"
	"github.com/rdma-appliance/appliance/internal/progress"
)

// simCmd is `appliance sim`.
var simCmd = &Command{
	Name:    "sim",
	Summary: "the packet-level RoCEv2 fabric simulator (PFC, ECN, DCQCN)",
	Sub:     []*Command{simRunCmd, simSweepCmd, simMergeCmd},
}

var simRunCmd = &Command{
	Name:    "run",
	Summary: "run a fabric scenario: per-flow FCTs, port counters, queue and pause time series",
	Usage:   "[--out DIR] [--json] scenario.yml",
	Long: `Simulates the scenario's topology (fat-tree, leaf-spine, rail-optimized or explicit, with
static routes that may loop), switches (shared-buffer MMU, PFC, RED ECN, strict/WRR egress,
ECMP), RNICs (RC flows, go-back-N, CNPs, DCQCN) and workloads (Poisson flows from a size CDF,
incast, all-to-all, a CSV of flows) for its duration, with faults (hosts injecting PAUSE).
A scenario with an unknown node, a disconnected topology or impossible parameters is
refused before the run, naming the line.

Writes to --out: results.json (stats, flows, ports), flows.csv, series.csv (each switch
port's queue bytes and paused priorities every sample-interval) and report.html (FCT by flow
size, the busiest ports' queues and pauses). Prints a summary; shows
progress while it runs. The same seed gives byte-identical output.

See bench/fabric/testdata/incast.yml for an example.`,
	Flags: simRunFlags,
}

type simRunOptions struct {
	out         string
	json, quiet bool
	args        []string
}

func simRunFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o simRunOptions
	fs.StringVar(&o.out, "out", "sim-out", "directory for results.json, flows.csv and series.csv")
	fs.BoolVar(&o.json, "json", false, "print the results as JSON instead of the summary")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress")
	return bind(&o, &o.args, runSimRun)
}

func runSimRun(ctx context.Context, env *Env, o simRunOptions) error {
	if len(o.args) != 1 {
		return Usagef("want one scenario file")
	}
	m := progress.New(env.Stderr, progress.Options{Label: "sim", Quiet: o.quiet,
		Count: func(ns int64) string { return time.Duration(ns).String() }})
	res, wall, err := fabric.RunFile(ctx, fabric.RunFileOptions{File: o.args[0], Out: o.out,
		Progress: func(now, total int64) { m.Update(now, total, "") }})
	m.Finish()
	if res == nil {
		return err
	}
	if o.json {
		return res.WriteJSON(env.Stdout)
	}
	done := 0
	for _, f := range res.Flows {
		if f.Done {
			done++
		}
	}
	st := res.Stats
	fmt.Fprintf(env.Stdout, "simulated %v in %v: %d events, %d packet hops (%.2f M/s)\n",
		time.Duration(res.SimNs), wall.Round(time.Millisecond), st.Events, st.Hops, float64(st.Hops)/wall.Seconds()/1e6)
	fmt.Fprintf(env.Stdout, "flows: %d started, %d done; FCT p50 %v p99 %v\n", len(res.Flows), done,
		time.Duration(res.FCTPercentile(50)), time.Duration(res.FCTPercentile(99)))
	fmt.Fprintf(env.Stdout, "drops %d (ttl %d), ECN marks %d, CNPs %d, PFC XOFF %d, injected pauses %d, retransmitted %d, timeouts %d\n",
		st.Drops, st.TTLDrops, st.ECNMarks, st.CNPs, st.PauseFrames, st.InjectedPauses, st.Retransmits, st.Timeouts)
	fmt.Fprintf(env.Stdout, "results in %s\n", o.out)
	return err
}
