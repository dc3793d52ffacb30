package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/appliance/hostmesh"
	"github.com/rdma-appliance/appliance/internal/progress"
)

var meshEvalCmd = &Command{
	Name:    "eval",
	Summary: "evaluate Hostmesh in the fabric simulator: does the analyzer name each injected fault?",
	Usage:   "[--runs 50] [--types T,...] [--seed N] [--out DIR] [--shard i/n]",
	Long: `For every fault type, --runs randomized runs on a rail-optimized cluster in the simulator (4..8
machines of 8 RNICs on 8 rails, 2 or 4 spines, 25G links, light web-search background traffic):
the real agent core probes on simulated UD packets, traces paths with TTL-limited probes that
the switches answer, and the analyzer judges one window. A run is correct when the analyzer's
top-ranked suspect is the faulty element (the link for link-flap, silent-drop, corrupt-link and
congested-uplink; the RNIC for dead-rnic and pfc-storm; the host for cpu-overload), and, for
fault-free runs (none), when it raises no alert at all.

The simulated agents run 1000 times faster than the paper's: a 100 us interval, 20 ms window and
60 ms hold, so a window holds the paper's number of probes. The probe timeout is 5 ms, not 500 us:
the simulated network runs in real time, and its queues under PFC delay probes by up to about 2 ms,
which a timeout (a drop) must stay well above, as the paper's 500 ms does.

Types: ` + strings.Join(hostmesh.FaultTypes, ", ") + `. The table is printed and, with --out,
written to DIR/hostmesh-eval.txt with every run in DIR/hostmesh-eval.json.

--shard i/n runs only part i of n of the runs (a batch system's array jobs) and writes its rows
to DIR/hostmesh-eval-shard-i-of-n.json; 'appliance mesh merge' adds shards up to the table.`,
	Flags: meshEvalFlags,
}

type meshEvalOptions struct {
	runs              int
	types, out, shard string
	seed              uint64
	args              []string
}

func meshEvalFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o meshEvalOptions
	fs.IntVar(&o.runs, "runs", 50, "runs per fault type")
	fs.StringVar(&o.types, "types", strings.Join(hostmesh.FaultTypes, ","), "fault types")
	fs.Uint64Var(&o.seed, "seed", 1, "first seed")
	fs.StringVar(&o.out, "out", "", "directory for the table and the runs")
	fs.StringVar(&o.shard, "shard", "", "run part i/n of the runs and write its rows for 'mesh merge'")
	return bind(&o, &o.args, runMeshEval)
}

func runMeshEval(ctx context.Context, env *Env, o meshEvalOptions) error {
	if len(o.args) > 0 || o.runs < 1 {
		return Usagef("no arguments; --runs at least 1")
	}
	var ts []string
	for _, t := range strings.Split(o.types, ",") {
		if t = strings.TrimSpace(t); t != "" {
			ts = append(ts, t)
		}
	}
	si, sn, err := parseShard(o.shard)
	if err != nil {
		return err
	}
	if o.shard != "" && o.out == "" {
		return Usagef("--shard needs --out for the shard's rows")
	}
	t0 := time.Now()
	m := progress.New(env.Stderr, progress.Options{Label: "mesh eval", Unit: "runs"})
	n := 0
	rows, all, err := hostmesh.EvalShard(ctx, ts, o.runs, o.seed, si, sn, func(r *hostmesh.Run) {
		n++
		mark := "ok"
		if !r.Correct {
			mark = "MISS"
		}
		m.Update(int64(n), int64(o.runs*len(ts)), fmt.Sprintf("%s seed %d %s", r.Fault, r.Seed, mark))
	})
	m.Finish()
	if err != nil {
		return err
	}
	if o.shard != "" {
		path, err := writeShard(o.out, "hostmesh-eval", si, sn, rows)
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "shard %d/%d: %d runs, rows written to %s\n", si, sn, len(all), path)
		return nil
	}
	return writeMeshEval(env, o.out, rows, all, time.Since(t0))
}

// writeMeshEval prints the evaluation's table and misses and, with an out
// directory, writes the table and every run there.
func writeMeshEval(env *Env, out string, rows []hostmesh.EvalRow, all []*hostmesh.Run, took time.Duration) error {
	var tab bytes.Buffer
	hostmesh.WriteEvalTable(&tab, rows)
	fmt.Fprintf(&tab, "%d runs in %s\n", len(all), took.Round(time.Second))
	env.Stdout.Write(tab.Bytes())
	for _, r := range rows {
		for _, miss := range r.Misses {
			fmt.Fprintf(env.Stdout, "miss %s: %s\n", r.Fault, miss)
		}
	}
	if out == "" {
		return nil
	}
	if _, err := writeOut(out, "hostmesh-eval.txt", tab.Bytes()); err != nil {
		return err
	}
	js, err := json.MarshalIndent(map[string]any{"rows": rows, "runs": all}, "", "  ")
	if err != nil {
		return err
	}
	_, err = writeOut(out, "hostmesh-eval.json", js)
	return err
}

var meshMergeCmd = &Command{
	Name:    "merge",
	Summary: "add up the shards of a Hostmesh evaluation into its table",
	Usage:   "[--out DIR] hostmesh-eval-shard-*.json...",
	Long:    "Reads the rows 'appliance mesh eval --shard i/n' wrote and prints the whole evaluation's table;\nwith --out, writes it to DIR/hostmesh-eval.txt.",
	Flags:   meshMergeFlags,
}

func meshMergeFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o mergeOptions
	fs.StringVar(&o.out, "out", "", "directory for hostmesh-eval.txt")
	return bind(&o, &o.args, runMeshMerge)
}

func runMeshMerge(ctx context.Context, env *Env, o mergeOptions) error {
	parts, err := readShards[hostmesh.EvalRow](o.args)
	if err != nil {
		return err
	}
	var tab bytes.Buffer
	hostmesh.WriteEvalTable(&tab, hostmesh.MergeRows(parts...))
	fmt.Fprintf(&tab, "%d shards merged\n", len(parts))
	env.Stdout.Write(tab.Bytes())
	if o.out != "" {
		_, err := writeOut(o.out, "hostmesh-eval.txt", tab.Bytes())
		return err
	}
	return nil
}
