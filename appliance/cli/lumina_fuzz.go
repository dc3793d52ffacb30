package cli

import (
	"context"
	"flag"
	"fmt"

	"github.com/rdma-appliance/appliance/appliance/lumina"
)

func init() {
	luminaCmd.Sub = append(luminaCmd.Sub, &Command{
		Name:    "fuzz",
		Summary: "generate random, reproducible event sets, run them, keep those whose traces break an analyzer's expectation",
		Usage:   "-f base.yml --lab [--seed N] [--cases N] [--budget N] [--out DIR]",
		Long: `The Lumina paper's future work. Each case takes the base test's hosts and traffic and
draws up to --budget events from --seed: drops (sometimes of the retransmissions too,
through iter), ECN marks and corruptions at random QPs and packets (only ECN marks
when tx-depth > 1, as Lumina requires). Every case runs like 'lumina run'; the
analyzers then check it, and a case whose valid trace breaks an expectation (Go-back-N
rules, counters vs trace, retransmission timers shorter than configured, retries other
than retry_cnt, unexplained CNPs) is kept in --out as a Lumina test file that reruns it
exactly. Invalid traces say nothing about the RNIC and are not kept.`,
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			file := fs.String("f", "", "base Lumina test file")
			lab := fs.Bool("lab", false, "run on this machine's in-process testbed")
			seed := fs.Uint64("seed", 1, "seed of the event sets")
			cases := fs.Int("cases", 20, "how many cases to run")
			budget := fs.Int("budget", 4, "most events per case")
			out := fs.String("out", "lumina-fuzz", "directory for the kept cases and the runs")
			return func(ctx context.Context, env *Env, args []string) error {
				if len(args) > 0 || *file == "" {
					return Usagef("want -f base.yml and no arguments")
				}
				if !*lab {
					return Usagef("fuzzing runs in the lab only (--lab): it runs many cases")
				}
				t, err := lumina.LoadTest(*file)
				if err != nil {
					return err
				}
				res, err := lumina.RunFuzz(ctx, lumina.FuzzConfig{Base: t, Seed: *seed, Cases: *cases, Budget: *budget,
					Out: *out, Lab: true, Check: lumina.CheckRun, Progress: env.Stderr})
				kept, invalid := 0, 0
				for _, c := range res {
					if !c.Valid {
						invalid++
					}
					if c.File != "" {
						kept++
						fmt.Fprintf(env.Stdout, "%s: %d events: %s\n", c.File, len(c.Events), c.Violations[0])
					}
				}
				fmt.Fprintf(env.Stdout, "%d cases, %d kept, %d invalid traces\n", len(res), kept, invalid)
				return err
			}
		},
	})
}
