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
)

func init() {
	meshCmd.Sub = append(meshCmd.Sub, &Command{
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
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			runs := fs.Int("runs", 50, "runs per fault type")
			types := fs.String("types", strings.Join(hostmesh.FaultTypes, ","), "fault types")
			seed := fs.Uint64("seed", 1, "first seed")
			out := fs.String("out", "", "directory for the table and the runs")
			shard := fs.String("shard", "", "run part i/n of the runs and write its rows for 'mesh merge'")
			return func(ctx context.Context, env *Env, args []string) error {
				if len(args) > 0 || *runs < 1 {
					return Usagef("no arguments; --runs at least 1")
				}
				var ts []string
				for _, t := range strings.Split(*types, ",") {
					if t = strings.TrimSpace(t); t != "" {
						ts = append(ts, t)
					}
				}
				si, sn := 0, 1
				if *shard != "" {
					var err error
					if si, sn, err = parseShard(*shard); err != nil {
						return err
					}
					if *out == "" {
						return Usagef("--shard needs --out for the shard's rows")
					}
				}
				t0 := time.Now()
				n := 0
				rows, all, err := hostmesh.EvalShard(ctx, ts, *runs, *seed, si, sn, func(r *hostmesh.Run) {
					n++
					mark := "ok"
					if !r.Correct {
						mark = "MISS"
					}
					fmt.Fprintf(env.Stderr, "\r[%d/%d] %-16s seed %-8d %-4s", n, *runs*len(ts), r.Fault, r.Seed, mark)
				})
				fmt.Fprintln(env.Stderr)
				if err != nil {
					return err
				}
				if *shard != "" {
					path, err := writeShard(*out, "hostmesh-eval", si, sn, rows)
					if err != nil {
						return err
					}
					fmt.Fprintf(env.Stdout, "shard %d/%d: %d runs, rows written to %s\n", si, sn, len(all), path)
					return nil
				}
				var tab bytes.Buffer
				hostmesh.WriteEvalTable(&tab, rows)
				fmt.Fprintf(&tab, "%d runs in %s\n", len(all), time.Since(t0).Round(time.Second))
				env.Stdout.Write(tab.Bytes())
				for _, r := range rows {
					for _, m := range r.Misses {
						fmt.Fprintf(env.Stdout, "miss %s: %s\n", r.Fault, m)
					}
				}
				if *out != "" {
					if _, err := writeOut(*out, "hostmesh-eval.txt", tab.Bytes()); err != nil {
						return err
					}
					js, err := json.MarshalIndent(map[string]any{"rows": rows, "runs": all}, "", "  ")
					if err != nil {
						return err
					}
					_, err = writeOut(*out, "hostmesh-eval.json", js)
					return err
				}
				return nil
			}
		},
	})
}

func init() {
	meshCmd.Sub = append(meshCmd.Sub, &Command{
		Name:    "merge",
		Summary: "add up the shards of a Hostmesh evaluation into its table",
		Usage:   "[--out DIR] hostmesh-eval-shard-*.json...",
		Long:    "Reads the rows 'appliance mesh eval --shard i/n' wrote and prints the whole evaluation's table;\nwith --out, writes it to DIR/hostmesh-eval.txt.",
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			out := fs.String("out", "", "directory for hostmesh-eval.txt")
			return func(ctx context.Context, env *Env, args []string) error {
				parts, err := readShards[hostmesh.EvalRow](args)
				if err != nil {
					return err
				}
				var tab bytes.Buffer
				hostmesh.WriteEvalTable(&tab, hostmesh.MergeRows(parts...))
				fmt.Fprintf(&tab, "%d shards merged\n", len(parts))
				env.Stdout.Write(tab.Bytes())
				if *out != "" {
					_, err := writeOut(*out, "hostmesh-eval.txt", tab.Bytes())
					return err
				}
				return nil
			}
		},
	})
}
