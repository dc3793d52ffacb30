package cli

import (
	"context"
	"flag"
	"fmt"

	"github.com/rdma-appliance/appliance/appliance/lumina"
)

var luminaFuzzCmd = &Command{
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
	Flags: luminaFuzzFlags,
}

type luminaFuzzOptions struct {
	file, out     string
	lab           bool
	seed          uint64
	cases, budget int
	args          []string
}

func luminaFuzzFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o luminaFuzzOptions
	fs.StringVar(&o.file, "f", "", "base Lumina test file")
	fs.BoolVar(&o.lab, "lab", false, "run on this machine's in-process testbed")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the event sets")
	fs.IntVar(&o.cases, "cases", 20, "how many cases to run")
	fs.IntVar(&o.budget, "budget", 4, "most events per case")
	fs.StringVar(&o.out, "out", "lumina-fuzz", "directory for the kept cases and the runs")
	return bind(&o, &o.args, runLuminaFuzz)
}

func runLuminaFuzz(ctx context.Context, env *Env, o luminaFuzzOptions) error {
	if len(o.args) > 0 || o.file == "" {
		return Usagef("want -f base.yml and no arguments")
	}
	if !o.lab {
		return Usagef("fuzzing runs in the lab only (--lab): it runs many cases")
	}
	t, err := lumina.LoadTest(o.file)
	if err != nil {
		return err
	}
	res, err := lumina.RunFuzz(ctx, lumina.FuzzConfig{Base: t, Seed: o.seed, Cases: o.cases, Budget: o.budget,
		Out: o.out, Lab: true, Check: lumina.CheckRun, Progress: env.Stderr})
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
