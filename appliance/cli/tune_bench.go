package cli

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/tuning"
)

func init() {
	tuneCmd.Sub = append(tuneCmd.Sub, &Command{
		Name:    "bench",
		Summary: "annealing with a budget vs the exhaustive 3300-point grid and the baselines, per simulator scenario",
		Usage:   "[--evals 330] [--seeds 5] [--out DIR] [--scenarios LIST] [--duration D]",
		Long: `For each simulator scenario: every point of the paper's 3300-point space is simulated (the
grid), then simulated annealing (Algorithm 1, cooled within the budget), random search and
the adaptive-step hill climb run with --evals evaluations for each of --seeds seeds, an
annealing run stops early after evals/3 evaluations without improvement, and every baseline
of Tables 2 and 3 (dcqcn, hpcc, dctcp, vendor, experience) is simulated. Scores are the
scenario's objective under the fixed normalisation. A scenario passes when the median
annealing score is at least 99% of the grid's best and above every baseline.

The simulator is deterministic for a configuration, so evaluations are memoised: the grid
costs 3300 simulations per scenario (minutes on two cores; --duration shortens each), the
methods then cost almost nothing. Prints the table and writes bench.txt and bench.json.`,
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			evals := fs.Int("evals", 330, "annealing budget (10% of the grid)")
			seeds := fs.Int("seeds", 5, "seeds per method (medians)")
			out := fs.String("out", "tune-bench", "directory for bench.txt and bench.json")
			scen := fs.String("scenarios", "", "comma-separated scenarios (default all: "+strings.Join(tuning.SimScenarioNames(), ",")+")")
			dur := fs.Duration("duration", 0, "simulated time per evaluation (default: each scenario's, 2-3 ms)")
			workers := fs.Int("workers", 2, "parallel simulations for the grid")
			return func(ctx context.Context, env *Env, args []string) error {
				if len(args) > 0 {
					return Usagef("no arguments")
				}
				o := tuning.BenchOptions{Evals: *evals, Seeds: *seeds, Duration: *dur, Workers: *workers,
					Progress: func(s string) { fmt.Fprintln(env.Stderr, s) }}
				if *scen != "" {
					o.Scenarios = strings.Split(*scen, ",")
				}
				t0 := time.Now()
				rows, err := tuning.Bench(ctx, o)
				if err != nil {
					return err
				}
				if err := tuning.WriteBenchTable(env.Stdout, rows, o); err != nil {
					return err
				}
				if err := tuning.WriteBench(*out, rows, o); err != nil {
					return err
				}
				fmt.Fprintf(env.Stdout, "took %v; written to %s\n", time.Since(t0).Round(time.Second), *out)
				for _, r := range rows {
					if !r.Pass {
						return fmt.Errorf("tune bench: %s: %s", r.Scenario, r.Reason)
					}
				}
				return nil
			}
		},
	})
}
