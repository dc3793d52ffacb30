package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/bench/fabric"
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

// sweepFile is what sim sweep writes: the keys (for the CSV's columns)
// and the rows; shards write it too, and sim merge reads them.
type sweepFile struct {
	Scenario string            `json:"scenario"`
	Keys     []string          `json:"keys"`
	Points   int               `json:"points"`
	Rows     []fabric.SweepRow `json:"rows"`
}

func init() {
	simCmd.Sub = append(simCmd.Sub, &Command{
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
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			var params sweepParams
			fs.Var(&params, "set", "KEY=V1,V2,...: a swept key and its values (repeatable)")
			seeds := fs.Int("seeds", 1, "seeds per combination")
			out := fs.String("out", "sweep-out", "directory for sweep.csv and sweep.json")
			shard := fs.String("shard", "", "run part i/n of the points and write them for 'sim merge'")
			quiet := fs.Bool("quiet", false, "no progress")
			return func(ctx context.Context, env *Env, args []string) error {
				if len(args) != 1 || len(params) == 0 || *seeds < 1 {
					return Usagef("want --set KEY=VALUES at least once, --seeds >= 1 and one scenario file")
				}
				data, err := os.ReadFile(args[0])
				if err != nil {
					return err
				}
				sh := fabric.Shard{I: 0, N: 1}
				if *shard != "" {
					if sh.I, sh.N, err = parseShard(*shard); err != nil {
						return err
					}
				}
				keys := make([]string, len(params))
				for i, p := range params {
					keys[i] = p.Key
				}
				points := fabric.SweepPoints(params, *seeds)
				t0 := time.Now()
				var progress func(done, total int)
				if !*quiet {
					progress = func(done, total int) {
						fmt.Fprintf(env.Stderr, "sim sweep: %d/%d runs (%v)\n", done, total, time.Since(t0).Round(time.Second))
					}
				}
				rows, err := fabric.RunSweep(ctx, args[0], data, points, sh, progress)
				if err != nil {
					return err
				}
				f := sweepFile{Scenario: args[0], Keys: keys, Points: len(points), Rows: rows}
				if *shard != "" {
					path, err := writeShard(*out, "sweep", sh.I, sh.N, []sweepFile{f})
					if err != nil {
						return err
					}
					fmt.Fprintf(env.Stdout, "shard %d/%d: %d of %d runs written to %s\n", sh.I, sh.N, len(rows), len(points), path)
					return nil
				}
				return writeSweep(env, *out, f)
			}
		},
	}, &Command{
		Name:    "merge",
		Summary: "put the shards of a sim sweep back together",
		Usage:   "[--out DIR] sweep-shard-*.json...",
		Long: `Reads the files 'appliance sim sweep --shard i/n' wrote and writes sweep.csv and sweep.json
to DIR as one run of the whole sweep would have. Shards of different sweeps, a point
run twice or a point missing are refused.`,
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			out := fs.String("out", "sweep-out", "directory for sweep.csv and sweep.json")
			return func(ctx context.Context, env *Env, args []string) error {
				parts, err := readShards[sweepFile](args)
				if err != nil {
					return err
				}
				var rows [][]fabric.SweepRow
				first := parts[0][0]
				for i, p := range parts {
					if len(p) != 1 {
						return fmt.Errorf("%s: not a sim sweep shard", args[i])
					}
					if p[0].Scenario != first.Scenario || p[0].Points != first.Points || strings.Join(p[0].Keys, ",") != strings.Join(first.Keys, ",") {
						return fmt.Errorf("%s: a shard of another sweep (%s, %d points, keys %v; %s has %s, %d, %v)", args[i],
							p[0].Scenario, p[0].Points, p[0].Keys, args[0], first.Scenario, first.Points, first.Keys)
					}
					rows = append(rows, p[0].Rows)
				}
				all, err := fabric.MergeSweep(rows...)
				if err != nil {
					return err
				}
				if len(all) != first.Points {
					return fmt.Errorf("the shards hold %d of the sweep's %d points: a shard is missing", len(all), first.Points)
				}
				first.Rows = all
				return writeSweep(env, *out, first)
			}
		},
	})
}

// writeSweep writes sweep.csv and sweep.json and says where.
func writeSweep(env *Env, dir string, f sweepFile) error {
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
