package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/bench/tunesim"
	"github.com/rdma-appliance/appliance/internal/progress"
	"github.com/rdma-appliance/appliance/tuning"
)

var tuneRunCmd = &Command{
	Name:    "run",
	Summary: "tune watermarks on a target (simulator scenario, fluid model or switches over SSH)",
	Usage:   "-f tune.yml [--out DIR] [--quiet]",
	Long: `Runs a tuning file: a target, a search space, an algorithm with its budget and seed, and an
objective. Targets:

  simulator  a scenario of the fabric simulator (incast-2, incast-24, incast-39, mixed,
             multihost) with the candidate watermarks on the tuned layers; with
             online: true an online scenario (fig11) instead: one fabric that keeps
             running while its workload changes, each candidate written into the
             running switches and judged on the next telemetry window (duration);
             Algorithm 1 then re-measures x every iteration and restarts its
             schedule when the workload changed: algorithm.reheat-after (2)
             re-measurements in a row beyond algorithm.reheat-sigma (3) standard
             deviations of the measured window noise and algorithm.reheat (1%) of
             f(x); algorithm.samples (2) windows per judgement, their mean or
             (aggregate: median) median; each schedule cooled within
             algorithm.cool-within evaluations (60)
  fluid      the fluid model of the paper's Section 4 (Table 4's parameters, N flows)
  switches   real switches: each candidate rendered in the switch's dialect (sonic, eos,
             nxos, vrp, comware) and pushed in one interactive SSH session per switch
             (host keys checked against known-hosts) inside the vendor's transaction,
             read back from the running config and rolled back on any error, on every
             switch already changed; telemetry from a collector URL (JSON) or a stub

The state is saved after every evaluation to the file's state path and resumed from it
when the run starts again. Out-of-range bounds are refused before the run; an unreachable
switch or telemetry that stops arriving (timeout) stops the run with the best configuration
so far saved and the reason printed.

Writes to --out: result.json, convergence.svg and convergence.png (objective and best so
far against evaluations) and watermarks.txt (the chosen watermarks in the dialect).

Example (bench/tunesim/testdata/tune.yml):

  target: {kind: simulator, scenario: incast-2, duration: 2ms}
  space: {preset: paper}
  algorithm: {method: anneal}
  objective: {beta: 0.5, norm: fixed}
  budget: 330
  patience: 110
  seed: 1
  state: tune-state.json
  dialect: comware`,
	Flags: tuneRunFlags,
}

type tuneRunOptions struct {
	file, out string
	quiet     bool
	args      []string
}

func tuneRunFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o tuneRunOptions
	fs.StringVar(&o.file, "f", "", "tuning file (YAML)")
	fs.StringVar(&o.out, "out", "tune-out", "directory for the results")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress")
	return bind(&o, &o.args, runTuneRun)
}

func runTuneRun(ctx context.Context, env *Env, o tuneRunOptions) error {
	if o.file == "" || len(o.args) > 0 {
		return Usagef("want -f tune.yml and no arguments")
	}
	rs, err := tuning.LoadRunSpec(o.file, tunesim.Simulator{})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	se, err := rs.Build(o.out)
	if err != nil {
		return fmt.Errorf("%s: %w", o.file, err)
	}
	m := progress.New(env.Stderr, progress.Options{Label: "tune", Unit: "evaluations", Quiet: o.quiet})
	if m != nil {
		se.Tuner.Progress = func(r tuning.Record) {
			m.Update(int64(r.Eval), int64(se.Tuner.Budget), fmt.Sprintf("best %.4f (fixed %.4f)", r.Best, r.BestFixed))
		}
	}
	fmt.Fprintf(env.Stdout, "tuning %s: %s over %.0f points (%d scopes), budget %d, seed %d\n",
		rs.Target.Kind+targetName(rs), se.Tuner.Optimizer.Name(), se.Space.Size(), len(se.Space.Scopes), se.Tuner.Budget, rs.Seed)
	t0 := time.Now()
	res, runErr := se.Tuner.Run(ctx)
	m.Finish()
	txt, werr := se.WriteReport(o.out, res, rs.Dialect)
	fmt.Fprintf(env.Stdout, "stopped: %s after %d evaluations (%v)\n", res.Stopped, res.Evaluations, time.Since(t0).Round(time.Millisecond))
	if res.Best.Scopes != nil {
		fmt.Fprintf(env.Stdout, "best: %v\n  objective %.4f, fixed normalisation %.4f\n", res.Best, res.BestScore, res.BestFixed)
	}
	if se.Tuner.StateFile != "" {
		fmt.Fprintf(env.Stdout, "state saved in %s\n", se.Tuner.StateFile)
	}
	if txt != "" {
		writeWatermarks(env.Stdout, txt)
	}
	fmt.Fprintf(env.Stdout, "results in %s\n", o.out)
	if runErr != nil {
		return runErr
	}
	return werr
}

// writeWatermarks prints the chosen watermarks, the first 30 lines of
// them.
func writeWatermarks(w io.Writer, txt string) {
	lines := strings.Split(strings.TrimRight(txt, "\n"), "\n")
	more := ""
	if len(lines) > 30 {
		more = fmt.Sprintf("... %d more lines in watermarks.txt\n", len(lines)-30)
		lines = lines[:30]
	}
	fmt.Fprintf(w, "\nchosen watermarks:\n%s%s", indent(strings.Join(lines, "\n")), more)
}

func targetName(rs tuning.RunSpec) string {
	if rs.Target.Scenario != "" {
		return " " + rs.Target.Scenario
	}
	return ""
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ") + "\n"
}
