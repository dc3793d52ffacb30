package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/rdma-appliance/appliance/bench/fabric"
	"github.com/rdma-appliance/appliance/internal/progress"
)

// sweepParams collects repeated --set flags.
type sweepParams []fabric.SweepParam

func (s *sweepParams) String() string { return fmt.Sprint(*s) }

func (s *sweepParams) Set(v string) error {
	p, err := fabric.ParseSweepParam(v)
	if err != nil {
		return err
	}
	*s = append(*s, p)
	return nil
}

var simSweepCmd = &Command{
	Name:    "sweep",
	Summary: "run a fabric scenario over a grid of its keys' values and seeds (shardable)",
	Usage:   "--set KEY=V1,V2,... [--set ...] [--seeds N] [--out DIR] [--shard i/n] scenario.yml",
	Long: `Runs the scenario once per combination of the --set values (each KEY a path into the file:
dotted keys, [i] for list items, e.g. switch.ecn.kmin=5KB,50KB,200KB or
workload[0].load=0.3,0.5,0.7) and per seed 1..--seeds (the file's seed key is replaced),
and writes one row per run to DIR/sweep.csv and DIR/sweep.json: flows started and
finished, FCT p50/p99, mean goodput, drops, ECN marks, CNPs, PFC XOFFs, retransmissions,
timeouts, simulated and wall time. Every point's scenario is checked before the first run;
a value a key does not take is refused with the point that has it.

--shard i/n runs only the points whose number is i modulo n (one array job of a batch
system: Slurm arrays, Kubernetes indexed Jobs) and writes DIR/sweep-shard-i-of-n.json;
'appliance sim merge' puts the shards back into sweep.csv and sweep.json, as one run of
the whole sweep would have written them (wall times aside).`,
	Flags: simSweepFlags,
}

type simSweepOptions struct {
	params     sweepParams
	seeds      int
	out, shard string
	quiet      bool
	args       []string
}

func simSweepFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o simSweepOptions
	fs.Var(&o.params, "set", "KEY=V1,V2,...: a swept key and its values (repeatable)")
	fs.IntVar(&o.seeds, "seeds", 1, "seeds per combination")
	fs.StringVar(&o.out, "out", "sweep-out", "directory for sweep.csv and sweep.json")
	fs.StringVar(&o.shard, "shard", "", "run part i/n of the points and write them for 'sim merge'")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress")
	return bind(&o, &o.args, runSimSweep)
}

func runSimSweep(ctx context.Context, env *Env, o simSweepOptions) error {
	if len(o.args) != 1 || len(o.params) == 0 || o.seeds < 1 {
		return Usagef("want --set KEY=VALUES at least once, --seeds >= 1 and one scenario file")
	}
	data, err := os.ReadFile(o.args[0])
	if err != nil {
		return err
	}
	var sh fabric.Shard
	if sh.I, sh.N, err = parseShard(o.shard); err != nil {
		return err
	}
	keys := make([]string, len(o.params))
	for i, p := range o.params {
		keys[i] = p.Key
	}
	points := fabric.SweepPoints(o.params, o.seeds)
	m := progress.New(env.Stderr, progress.Options{Label: "sim sweep", Unit: "runs", Quiet: o.quiet})
	rows, err := fabric.RunSweep(ctx, o.args[0], data, points, sh, m.Step)
	m.Finish()
	if err != nil {
		return err
	}
	f := fabric.SweepFile{Scenario: o.args[0], Keys: keys, Points: len(points), Rows: rows}
	if o.shard != "" {
		path, err := writeShard(o.out, "sweep", sh.I, sh.N, []fabric.SweepFile{f})
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "shard %d/%d: %d of %d runs written to %s\n", sh.I, sh.N, len(rows), len(points), path)
		return nil
	}
	return writeSweep(env, o.out, f)
}

var simMergeCmd = &Command{
	Name:    "merge",
	Summary: "put the shards of a sim sweep back together",
	Usage:   "[--out DIR] sweep-shard-*.json...",
	Long: `Reads the files 'appliance sim sweep --shard i/n' wrote and writes sweep.csv and sweep.json
to DIR as one run of the whole sweep would have. Shards of different sweeps, a point
run twice or a point missing are refused.`,
	Flags: simMergeFlags,
}

func simMergeFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o mergeOptions
	fs.StringVar(&o.out, "out", "sweep-out", "directory for sweep.csv and sweep.json")
	return bind(&o, &o.args, runSimMerge)
}

func runSimMerge(ctx context.Context, env *Env, o mergeOptions) error {
	parts, err := readShards[fabric.SweepFile](o.args)
	if err != nil {
		return err
	}
	f, err := fabric.MergeSweepFiles(o.args, parts)
	if err != nil {
		return err
	}
	return writeSweep(env, o.out, f)
}

// writeSweep writes sweep.csv and sweep.json and says where.
func writeSweep(env *Env, dir string, f fabric.SweepFile) error {
	var csv bytes.Buffer
	if err := fabric.WriteSweepCSV(&csv, f.Keys, f.Rows); err != nil {
		return err
	}
	csvPath, err := writeOut(dir, "sweep.csv", csv.Bytes())
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if _, err := writeOut(dir, "sweep.json", b); err != nil {
		return err
	}
	failed := 0
	for _, r := range f.Rows {
		if r.Err != "" {
			failed++
		}
	}
	fmt.Fprintf(env.Stdout, "%d runs (%d failed) of %s written to %s and sweep.json\n", len(f.Rows), failed, f.Scenario, csvPath)
	return nil
}
