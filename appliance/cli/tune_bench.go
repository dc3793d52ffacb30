package cli

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/bench/tunesim"
	"github.com/rdma-appliance/appliance/internal/progress"
)

var tuneBenchCmd = &Command{
	Name:    "bench",
	Summary: "annealing with a budget vs the exhaustive 3300-point grid and the baselines, per simulator scenario",
	Usage:   "[--evals 330] [--seeds 10] [--out DIR] [--scenarios LIST] [--duration D] [--shard i/n]",
	Long: `For each simulator scenario: every point of the paper's 3300-point space is simulated (the
grid), then simulated annealing (Algorithm 1, cooled within the budget), random search and
the adaptive-step hill climb run with --evals evaluations for each of --seeds seeds, an
annealing run stops early after evals/3 evaluations without improvement, and every baseline
of Tables 2 and 3 (dcqcn, hpcc, dctcp, vendor, experience) is simulated. Scores are the
scenario's objective under the fixed normalisation. A scenario passes when the median
annealing score is at least 99% of the grid's best and above every baseline.

The simulator is deterministic for a configuration, so evaluations are memoised: the grid
costs 3300 simulations per scenario (minutes on two cores; --duration shortens each), the
methods then cost almost nothing. Prints the table and writes bench.txt and bench.json.

Then the discrimination (as 'appliance tune discriminate' on the grids just measured):
annealing, random search and the hill climb over --seeds seeds at equal budgets of 1, 3
and 10% of each grid, and on every pair of scenarios' receiver switches tuned apart (3300^2
points) at 330, 1000 and 3300 evaluations, under the fixed normalisation and the paper's
Eq. 14 with the whole traversal as its history: median, worst, mean and standard deviation
of the fraction of the grid's best reached, the share of the grid near its best and beating
the best baseline, and whether annealing is ahead of both rivals by more than twice the
standard error. Writes discrimination.txt, discrimination.json and the grids as
landscape-SCENARIO.csv.gz.

--shard i/n measures only part i of n of the grids' points (over every scenario: one array
job of a batch system, Slurm arrays or Kubernetes indexed Jobs) and writes their telemetry
to DIR/tune-bench-shard-i-of-n.json; 'appliance tune merge' runs the methods and the
baselines on the merged grids and prints the same table one run would have.`,
	Flags: tuneBenchFlags,
}

// tuneBenchOptions are tune bench's and tune merge's flags.
type tuneBenchOptions struct {
	evals, seeds, workers int
	out, scen, shard      string
	dur                   time.Duration
	args                  []string
}

// declare declares the flags bench and merge share.
func (o *tuneBenchOptions) declare(fs *flag.FlagSet, scenUsage, durUsage string) {
	fs.IntVar(&o.evals, "evals", 330, "annealing budget (10% of the grid)")
	fs.IntVar(&o.seeds, "seeds", 10, "seeds per method (medians, spreads)")
	fs.StringVar(&o.out, "out", "tune-bench", "directory for bench.txt and bench.json")
	fs.StringVar(&o.scen, "scenarios", "", scenUsage)
	fs.DurationVar(&o.dur, "duration", 0, durUsage)
}

// bench is the options of the bench, progress on env's stderr.
func (o *tuneBenchOptions) bench(env *Env) tunesim.BenchOptions {
	b := tunesim.BenchOptions{Evals: o.evals, Seeds: o.seeds, Duration: o.dur, Workers: o.workers,
		Progress: progress.New(env.Stderr, progress.Options{Label: "tune bench", Unit: "grid points"})}
	if o.scen != "" {
		b.Scenarios = strings.Split(o.scen, ",")
	}
	return b
}

func tuneBenchFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o tuneBenchOptions
	o.declare(fs, "comma-separated scenarios (default all: "+strings.Join(tunesim.SimScenarioNames(), ",")+")",
		"simulated time per evaluation (default: each scenario's, 2-3 ms)")
	fs.IntVar(&o.workers, "workers", 2, "parallel simulations for the grid")
	fs.StringVar(&o.shard, "shard", "", "measure part i/n of the grids and write it for 'tune merge'")
	return bind(&o, &o.args, runTuneBench)
}

func runTuneBench(ctx context.Context, env *Env, o tuneBenchOptions) error {
	if len(o.args) > 0 {
		return Usagef("no arguments")
	}
	b := o.bench(env)
	t0 := time.Now()
	if o.shard == "" {
		rows, err := tunesim.Bench(ctx, b)
		b.Progress.Finish()
		if err != nil {
			return err
		}
		return finishTuneBench(env, rows, b, o.out, t0)
	}
	i, n, err := parseShard(o.shard)
	if err != nil {
		return err
	}
	es, err := tunesim.BenchGrid(ctx, b, tunesim.BenchShard{I: i, N: n})
	b.Progress.Finish()
	if err != nil {
		return err
	}
	path, err := writeShard(o.out, "tune-bench", i, n, es)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "shard %d/%d: %d grid points measured in %v, written to %s\n", i, n, len(es),
		time.Since(t0).Round(time.Second), path)
	return nil
}

var tuneMergeCmd = &Command{
	Name:    "merge",
	Summary: "finish a sharded tune bench: the methods and baselines on the merged grids",
	Usage:   "[--evals 330] [--seeds 10] [--out DIR] [--scenarios LIST] [--duration D] tune-bench-shard-*.json...",
	Long: `Reads the grid measurements 'appliance tune bench --shard i/n' wrote, runs annealing, random
search, the hill climb and the baselines against them (only the baselines simulate) and
prints and writes the table as 'tune bench' does. --scenarios and --duration must be those
the shards ran with; a missing shard or a point measured twice is refused. The table's
"grid s" is then the shards' simulation time summed, not a wall time.`,
	Flags: tuneMergeFlags,
}

func tuneMergeFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o tuneBenchOptions
	o.declare(fs, "comma-separated scenarios the shards ran (default all)", "simulated time per evaluation the shards ran with")
	return bind(&o, &o.args, runTuneMerge)
}

func runTuneMerge(ctx context.Context, env *Env, o tuneBenchOptions) error {
	parts, err := readShards[tunesim.GridEntry](o.args)
	if err != nil {
		return err
	}
	var all []tunesim.GridEntry
	for _, p := range parts {
		all = append(all, p...)
	}
	b := o.bench(env)
	t0 := time.Now()
	rows, err := tunesim.BenchMerge(ctx, b, all)
	b.Progress.Finish()
	if err != nil {
		return err
	}
	return finishTuneBench(env, rows, b, o.out, t0)
}

// finishTuneBench prints and writes a bench's table; a scenario that
// failed is the command's error.
func finishTuneBench(env *Env, rows []tunesim.BenchRow, o tunesim.BenchOptions, out string, t0 time.Time) error {
	if err := tunesim.WriteBenchTable(env.Stdout, rows, o); err != nil {
		return err
	}
	if err := tunesim.WriteBench(out, rows, o); err != nil {
		return err
	}
	var ls []*tunesim.Landscape
	for _, r := range rows {
		if r.Landscape != nil {
			ls = append(ls, r.Landscape)
		}
	}
	drows, err := tunesim.DiscriminateAll(ls, o.Seeds)
	if err != nil {
		return err
	}
	fmt.Fprintln(env.Stdout)
	if err := tunesim.WriteDiscrimination(env.Stdout, drows); err != nil {
		return err
	}
	if err := tunesim.WriteDiscriminationFiles(out, drows, ls); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "took %v; written to %s\n", time.Since(t0).Round(time.Second), out)
	for _, r := range rows {
		if !r.Pass {
			return fmt.Errorf("tune bench: %s: %s", r.Scenario, r.Reason)
		}
	}
	return nil
}
