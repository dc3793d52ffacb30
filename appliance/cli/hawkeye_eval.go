package cli

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/rdma-appliance/appliance/bench/hawkeyeeval"
	"github.com/rdma-appliance/appliance/internal/progress"
)

var hawkeyeEvalCmd = &Command{
	Name:    "eval",
	Summary: "Hawkeye's evaluation: injected anomalies on a fat-tree, diagnosed and scored per method",
	Usage:   "[--traces 100] [--out DIR] [--shard i/n]",
	Long: `Generates --traces traces per anomaly type on a k=4 fat-tree (100 Gbps, 2 us links, the paper's
long-tailed workload at a random load between 20% and 50%), each with one injected anomaly:
a synchronized incast, a host injecting PAUSE frames, a routing loop closed by its own burst
(initiator in the loop) or by an incast or a storm outside it, and plain contention without PFC.
Runs the detection agent, the switches' telemetry and polling, and the analyzer, and scores the
diagnosis of the first incident after the anomaly began against the injected ground truth
(right type and root cause: a true positive), for Hawkeye and the baselines: victim-path-only
polling, full polling of every switch, port-only and flow-only telemetry. Traces whose anomaly
did not show in the fabric are counted but not scored.

Prints precision and recall per type and method, and the telemetry each method collected;
writes the table to DIR/hawkeye-eval.txt.

--shard i/n runs only part i of n of the traces (for a batch system's array jobs: Slurm
arrays, Kubernetes indexed Jobs) and writes its scores to DIR/hawkeye-eval-shard-i-of-n.json;
'appliance hawkeye merge' adds shards up to the whole evaluation's table.`,
	Flags: hawkeyeEvalFlags,
}

type hawkeyeEvalOptions struct {
	traces     int
	out, shard string
	quiet      bool
	args       []string
}

func hawkeyeEvalFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o hawkeyeEvalOptions
	fs.IntVar(&o.traces, "traces", 100, "traces per anomaly type")
	fs.StringVar(&o.out, "out", ".", "directory for hawkeye-eval.txt")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress")
	fs.StringVar(&o.shard, "shard", "", "run part i/n of the traces and write its scores for 'hawkeye merge'")
	return bind(&o, &o.args, runHawkeyeEval)
}

func runHawkeyeEval(ctx context.Context, env *Env, o hawkeyeEvalOptions) error {
	if len(o.args) > 0 || o.traces < 1 || o.traces > 10000 {
		return Usagef("want --traces 1..10000 and no arguments")
	}
	t0 := time.Now()
	var sh hawkeyeeval.Shard
	var err error
	if sh.I, sh.N, err = parseShard(o.shard); err != nil {
		return err
	}
	m := progress.New(env.Stderr, progress.Options{Label: "hawkeye eval", Unit: "traces", Quiet: o.quiet})
	scores, err := hawkeyeeval.EvaluateShard(ctx, sh, o.traces, hawkeyeeval.Anomalies, hawkeyeeval.Methods, hawkeyeeval.Analyzer, m.Step)
	m.Finish()
	if err != nil {
		return err
	}
	if o.shard != "" {
		path, err := writeShard(o.out, "hawkeye-eval", sh.I, sh.N, hawkeyeeval.Flatten(scores))
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "shard %d/%d: scores written to %s\n", sh.I, sh.N, path)
		return nil
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "Hawkeye evaluation: %d traces per anomaly type, k=4 fat-tree, %v\n\n", o.traces, time.Since(t0).Round(time.Second))
	hawkeyeeval.WriteTable(&b, scores, hawkeyeeval.Anomalies, hawkeyeeval.Methods)
	return printTable(env, o.out, "hawkeye-eval.txt", b.Bytes())
}

var hawkeyeMergeCmd = &Command{
	Name:    "merge",
	Summary: "add up the shards of a Hawkeye evaluation into its table",
	Usage:   "[--out DIR] hawkeye-eval-shard-*.json...",
	Long: `Reads the scores 'appliance hawkeye eval --shard i/n' wrote and prints the whole evaluation's
table, as one run of every trace would; writes it to DIR/hawkeye-eval.txt.`,
	Flags: hawkeyeMergeFlags,
}

type mergeOptions struct {
	out  string
	args []string
}

func hawkeyeMergeFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o mergeOptions
	fs.StringVar(&o.out, "out", ".", "directory for hawkeye-eval.txt")
	return bind(&o, &o.args, runHawkeyeMerge)
}

func runHawkeyeMerge(ctx context.Context, env *Env, o mergeOptions) error {
	parts, err := readShards[hawkeyeeval.Score](o.args)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "Hawkeye evaluation: %d shards merged\n\n", len(parts))
	hawkeyeeval.WriteTable(&b, hawkeyeeval.Merge(parts...), hawkeyeeval.Anomalies, hawkeyeeval.Methods)
	return printTable(env, o.out, "hawkeye-eval.txt", b.Bytes())
}

// printTable prints an evaluation's table and writes it to DIR/NAME.
func printTable(env *Env, dir, name string, table []byte) error {
	path, err := writeOut(dir, name, table)
	if err != nil {
		return err
	}
	if _, err := env.Stdout.Write(table); err != nil {
		return err
	}
	_, err = fmt.Fprintf(env.Stdout, "\nwritten to %s\n", path)
	return err
}
