package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/bench/hawkeyeeval"
	"github.com/rdma-appliance/appliance/internal/progress"
)

var hawkeyeEvalCmd = &Command{
	Name:    "eval",
	Summary: "Hawkeye's evaluation: injected anomalies on fat-trees, every detection diagnosed and scored per method",
	Usage: "[--traces 100] [--topology k4[,k8,k16]] [--anomalies LIST] [--methods LIST] [--epoch 1ms] [--threshold 300] " +
		"[--seed 0] [--workers N] [--sweep] [--json FILE] [--out DIR] [--shard i/n]",
	Long: `Generates --traces traces per topology and anomaly type (fat-trees of 100 Gbps, 2 us links, the
paper's long-tailed workload, flows of up to 300 MB, at a random load between 20% and 50%, starting
with the flows 100 ms of its arrivals left running, each resuming at its max-min fair share over
its path's links, the fabric's as ECMP hashes it and its hosts', not at line rate), each with one
anomaly placed at random
(seeded): a synchronized incast, a host injecting PAUSE frames until the trace ends, a routing loop
(of 2 to 6 switches, between ToRs and aggregation switches or aggregation switches and cores)
closed by its own burst or by an incast or a storm next to it, and plain contention without PFC;
DCQCN on everywhere. Runs the hosts' detection agent (threshold a percentage of the fabric's
largest RTT, as the paper's §5 sets it), the switches' telemetry and polling, and a counterfactual
run without the anomaly.

Scoring (the paper's §4.2): every detection the agents raise is diagnosed and scored. A true
positive is a detection of one of the anomaly's victims (its own flows, or a background flow it
hurt, that the counterfactual run did not catch) diagnosed with the anomaly's type and an injected
root cause ranked first; every other detection is a false alarm: of a flow the anomaly did not
hurt, of the wrong type, or of the wrong root cause. Recall is the manifested anomalies with a true
positive. Top-1 and top-3 are root-cause accuracy over the victims' detections. Traces whose
anomaly did not manifest are counted apart, with the reason, and enter neither.

Methods, each reading the same switch registers at the same moment with the same interval
between two collections of a switch: hawkeye (victim path and PFC causality tracing), victim-only,
full-polling, port-only (port records and meters; still traces PFC), flow-only (flow records;
cannot trace PFC), spidermon (36 B per flow from the victim path, no PFC visibility) and netsight
(a 15 B postcard per packet per hop, everywhere). Bytes and switches polled are each method's own.

Prints, per topology, the traces and why some did not manifest; per anomaly type and method
precision, recall, top-1, top-3, false alarms, bytes per incident, switches polled and causal
coverage (Figures 8, 9a, 11); averages per method; and issue 18's goals, met or missed. Writes the
table to DIR/hawkeye-eval.txt and, with --json, the figures to FILE. --sweep runs Figure 7
instead: Hawkeye at epochs of 131 us to 2.1 ms and thresholds of 200% to 500%, --traces per cell;
its precision and recall are drawn to DIR/hawkeye-figure7-{precision,recall}-TOPOLOGY.svg.

--shard i/n runs only part i of n of the traces (for a batch system's array jobs: Slurm
arrays, Kubernetes indexed Jobs) and writes its scores to DIR/hawkeye-eval-shard-i-of-n.json;
'appliance hawkeye merge' adds shards up to the whole evaluation's table.`,
	Flags: hawkeyeEvalFlags,
}

type hawkeyeEvalOptions struct {
	traces, threshold, workers     int
	seed                           uint64
	epoch                          time.Duration
	topologies, anomalies, methods string
	out, shard, json               string
	sweep, quiet                   bool
	args                           []string
}

func hawkeyeEvalFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o hawkeyeEvalOptions
	fs.IntVar(&o.traces, "traces", 100, "traces per topology and anomaly type (per cell with --sweep)")
	fs.StringVar(&o.topologies, "topology", "k4", "fat-trees, comma-separated: k4, k8, k16 (empty: all)")
	fs.StringVar(&o.anomalies, "anomalies", "", "anomaly types, comma-separated (default all)")
	fs.StringVar(&o.methods, "methods", "", "methods, comma-separated (default all)")
	fs.DurationVar(&o.epoch, "epoch", time.Millisecond, "telemetry epoch, rounded to a power of two nanoseconds (1us..1s)")
	fs.IntVar(&o.threshold, "threshold", 300, "detection threshold, percent of the fabric's largest RTT without queues (110..10000)")
	fs.Uint64Var(&o.seed, "seed", 0, "traces use seeds seed+1 .. seed+traces")
	fs.IntVar(&o.workers, "workers", 0, "traces simulated at once (0: one per CPU)")
	fs.BoolVar(&o.sweep, "sweep", false, "run Figure 7's grid of epochs and thresholds, Hawkeye only")
	fs.StringVar(&o.json, "json", "", "write the figures as JSON to FILE")
	fs.StringVar(&o.out, "out", ".", "directory for hawkeye-eval.txt")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress")
	fs.StringVar(&o.shard, "shard", "", "run part i/n of the traces and write its scores for 'hawkeye merge'")
	return bind(&o, &o.args, runHawkeyeEval)
}

// hawkeyeEvalSetup turns the flags into the evaluation's options, naming
// the flag that is wrong.
func hawkeyeEvalSetup(o hawkeyeEvalOptions) (hawkeyeeval.Options, error) {
	var eo hawkeyeeval.Options
	if len(o.args) > 0 {
		return eo, Usagef("no arguments, got %q", o.args)
	}
	if o.traces < 1 || o.traces > 10000 {
		return eo, Usagef("--traces %d: 1..10000", o.traces)
	}
	if o.workers < 0 || o.workers > 256 {
		return eo, Usagef("--workers %d: 0..256", o.workers)
	}
	var err error
	if eo.Topologies, err = parseList("--topology", o.topologies, hawkeyeeval.Topologies, hawkeyeeval.ParseTopology); err != nil {
		return eo, err
	}
	if eo.Anomalies, err = parseList("--anomalies", o.anomalies, hawkeyeeval.Anomalies, hawkeyeeval.ParseAnomaly); err != nil {
		return eo, err
	}
	if eo.Methods, err = parseList("--methods", o.methods, hawkeyeeval.Methods, hawkeyeeval.ParseMethod); err != nil {
		return eo, err
	}
	if o.epoch < time.Microsecond || o.epoch > time.Second {
		return eo, Usagef("--epoch %v: 1us..1s", o.epoch)
	}
	eo.Params = hawkeyeeval.Params{EpochShift: uint(math.Round(math.Log2(float64(o.epoch)))), Threshold: o.threshold}
	if err := eo.Params.Validate(); err != nil {
		return eo, Usagef("--threshold %d: 110..10000", o.threshold)
	}
	if eo.Shard.I, eo.Shard.N, err = parseShard(o.shard); err != nil {
		return eo, err
	}
	eo.Traces, eo.Seed, eo.Workers = o.traces, o.seed, o.workers
	return eo, nil
}

// parseList reads a flag's comma-separated names; an empty flag is all.
func parseList[T any](flag, s string, all []T, parse func(string) (T, error)) ([]T, error) {
	if strings.TrimSpace(s) == "" {
		return all, nil
	}
	var out []T
	for _, f := range strings.Split(s, ",") {
		x, err := parse(strings.TrimSpace(f))
		if err != nil {
			return nil, Usagef("%s: %v", flag, err)
		}
		out = append(out, x)
	}
	return out, nil
}

func runHawkeyeEval(ctx context.Context, env *Env, o hawkeyeEvalOptions) error {
	eo, err := hawkeyeEvalSetup(o)
	if err != nil {
		return err
	}
	t0 := time.Now()
	m := progress.New(env.Stderr, progress.Options{Label: "hawkeye eval", Unit: "traces", Quiet: o.quiet})
	eo.Progress = m.Step
	var scores hawkeyeeval.Scores
	if o.sweep {
		scores, err = hawkeyeeval.Sweep(ctx, eo, hawkeyeeval.SweepEpochs, hawkeyeeval.SweepThresholds)
	} else {
		scores, err = hawkeyeeval.Evaluate(ctx, eo)
	}
	m.Finish()
	if err != nil {
		return err
	}
	if o.shard != "" {
		path, err := writeShard(o.out, "hawkeye-eval", eo.Shard.I, eo.Shard.N, scores.Flatten())
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "shard %d/%d: scores written to %s\n", eo.Shard.I, eo.Shard.N, path)
		return nil
	}
	var names []string
	for _, tp := range eo.Topologies {
		names = append(names, tp.String())
	}
	params := eo.Params.String()
	if o.sweep {
		params = "Figure 7's epochs and thresholds, Hawkeye"
	}
	head := fmt.Sprintf("Hawkeye evaluation: %d traces per topology and anomaly type, fat-trees %s, %s, strict scoring, %v\n\n",
		eo.Traces, strings.Join(names, ", "), params, time.Since(t0).Round(time.Second))
	return writeHawkeyeResults(env, o.out, o.json, head, scores)
}

// writeHawkeyeResults prints the table of scores (the main evaluation's,
// or Figure 7's when they hold several parameter sets), writes it to
// DIR/hawkeye-eval.txt and the figures to jsonFile.
func writeHawkeyeResults(env *Env, dir, jsonFile, head string, scores hawkeyeeval.Scores) error {
	ps := scores.Params()
	if len(ps) == 0 {
		return errors.New("hawkeye: no scores")
	}
	var rep *hawkeyeeval.Report
	if len(ps) == 1 {
		rep = scores.Report(ps[0])
	} else {
		rep = &hawkeyeeval.Report{Scoring: hawkeyeeval.Scoring, Sweep: scores.SweepCells()}
		charts := hawkeyeeval.SweepCharts(rep.Sweep)
		names := slices.Sorted(maps.Keys(charts))
		for _, name := range names {
			var svg bytes.Buffer
			if err := charts[name].SVG(&svg); err != nil {
				return err
			}
			if _, err := writeOut(dir, name, svg.Bytes()); err != nil {
				return err
			}
		}
	}
	var b bytes.Buffer
	b.WriteString(head)
	rep.WriteTable(&b)
	if jsonFile != "" {
		var j bytes.Buffer
		if err := rep.WriteJSON(&j); err != nil {
			return err
		}
		if err := os.WriteFile(jsonFile, j.Bytes(), 0o644); err != nil {
			return fmt.Errorf("--json: %w", err)
		}
	}
	return printTable(env, dir, "hawkeye-eval.txt", b.Bytes())
}

var hawkeyeMergeCmd = &Command{
	Name:    "merge",
	Summary: "add up the shards of a Hawkeye evaluation into its table",
	Usage:   "[--out DIR] [--json FILE] hawkeye-eval-shard-*.json...",
	Long: `Reads the scores 'appliance hawkeye eval --shard i/n' wrote and prints the whole evaluation's
table, as one run of every trace would; writes it to DIR/hawkeye-eval.txt (and a sweep's plots,
as 'hawkeye eval --sweep' does) and, with --json, the figures to FILE.`,
	Flags: hawkeyeMergeFlags,
}

type hawkeyeMergeOptions struct {
	out, json string
	args      []string
}

func hawkeyeMergeFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o hawkeyeMergeOptions
	fs.StringVar(&o.out, "out", ".", "directory for hawkeye-eval.txt")
	fs.StringVar(&o.json, "json", "", "write the figures as JSON to FILE")
	return bind(&o, &o.args, runHawkeyeMerge)
}

func runHawkeyeMerge(ctx context.Context, env *Env, o hawkeyeMergeOptions) error {
	parts, err := readShards[hawkeyeeval.Score](o.args)
	if err != nil {
		return err
	}
	head := fmt.Sprintf("Hawkeye evaluation: %d shards merged, strict scoring\n\n", len(parts))
	return writeHawkeyeResults(env, o.out, o.json, head, hawkeyeeval.Merge(parts...))
}

// mergeOptions are the options of the merge commands that take only an
// output directory (mesh merge, sim merge).
type mergeOptions struct {
	out  string
	args []string
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
