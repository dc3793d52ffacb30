package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/rdma-appliance/appliance/collector/hostmeshanalyzer"
)

var meshAnalyzeCmd = &Command{
	Name:    "analyze",
	Summary: "the Hostmesh analyzer: on a file of agent batches, or as a service agents post to",
	Usage:   "[--window 20s] [--json] FILE | --serve ADDR",
	Long: `Windows of the agents' probe results (20 s by default): an RNIC is anomalous when more than
10% of its probes time out (worst first; a dead RNIC's peers and a single bad switch link do
not make an RNIC anomalous), and its probes count as RNIC problems for a minute; the remaining
timeouts, and probes over the high-latency threshold, vote on links and switches along their
traced paths (Hostmesh's Algorithm 1). Each window reports the SLA percentiles (P50..P999) of
host processing delay and one-way network latency, the RNIC and switch-network drop rates,
the ranked suspects and alert lines.

Switches' ingress discards of the lossless class (--lossless-pg, 3 by default), as 'appliance
mesh pgdrop' reads and posts them, name a switch with PFC off or its headroom too short: the
probes over it that time out, and the slow probes over it or a switch next to it, are charged to
it, and it is alerted on ahead of the voting when a probe over it was lost or several were slow.
Like an anomalous RNIC it is held for --hold: its incast outlives its discards, and the slow probes
over it and next to it stay its.

FILE holds batches as 'appliance mesh probe --out' and 'appliance mesh pgdrop --out' write them
(JSON, one after another); a window of the file that holds no result is skipped, not reported.
With --serve the analyzer listens (POST /v1/results from agents, GET /v1/report, /v1/reports,
/metrics, /healthz) and analyzes a window every --window.`,
	Flags: meshAnalyzeFlags,
}

type meshAnalyzeOptions struct {
	window, hold time.Duration
	serve        string
	json         bool
	losslessPG   int
	args         []string
}

func meshAnalyzeFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o meshAnalyzeOptions
	fs.DurationVar(&o.window, "window", 20*time.Second, "analysis window")
	fs.DurationVar(&o.hold, "hold", time.Minute, "how long an anomalous RNIC's probes count as RNIC problems")
	fs.StringVar(&o.serve, "serve", "", "listen on this address as the analyzer service")
	fs.BoolVar(&o.json, "json", false, "print the reports as JSON")
	fs.IntVar(&o.losslessPG, "lossless-pg", 3, "switches' priority group of the probes' lossless class, whose discards name a switch")
	return bind(&o, &o.args, runMeshAnalyze)
}

func runMeshAnalyze(ctx context.Context, env *Env, o meshAnalyzeOptions) error {
	if o.losslessPG < 1 || o.losslessPG > 15 {
		return Usagef("--lossless-pg %d: want a priority group 1 to 15 (PG 0 is the lossy default)", o.losslessPG)
	}
	cfg := hostmeshanalyzer.Config{Window: o.window, Hold: o.hold, LosslessPG: o.losslessPG}
	if o.serve != "" {
		if len(o.args) > 0 {
			return Usagef("--serve takes no file")
		}
		return hostmeshanalyzer.Serve(ctx, o.serve, cfg, env.Log)
	}
	if len(o.args) != 1 {
		return Usagef("want one FILE of batches, or --serve ADDR")
	}
	f, err := os.Open(o.args[0])
	if err != nil {
		return err
	}
	defer f.Close()
	bs, err := hostmeshanalyzer.ReadBatches(f)
	if err != nil {
		return fmt.Errorf("%s: %w", o.args[0], err)
	}
	reps := hostmeshanalyzer.AnalyzeAll(bs, cfg)
	if o.json {
		return writeJSON(env.Stdout, reps)
	}
	if len(reps) == 0 {
		fmt.Fprintln(env.Stdout, "no probe results")
	}
	for _, r := range reps {
		r.WriteText(env.Stdout)
	}
	return nil
}
