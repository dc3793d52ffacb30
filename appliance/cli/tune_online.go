package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/bench/tunesim"
	"github.com/rdma-appliance/appliance/tuning"
)

var tuneDiscriminateCmd = &Command{
	Name:    "discriminate",
	Summary: "annealing vs random search vs hill climbing at equal budgets on measured grids (landscape files)",
	Usage:   "[--seeds 20] [--out DIR] landscape-SCENARIO.csv.gz...",
	Long: `Reads the grids 'appliance tune bench' measured (landscape-SCENARIO.csv.gz: every point of the
paper's 3300-point space and every baseline preset, as the simulator reported them) and runs
simulated annealing (Algorithm 1, cooled within each budget), random search and the
adaptive-step hill climb with --seeds seeds each at the same budgets: 1, 3 and 10% of each
grid, and 330, 1000 and 3300 evaluations on every pair of scenarios' receiver switches tuned
apart (their traffic shares no switch, so the pair's objective is the sum of the two and its
3300^2-point grid is known exactly). Each under two normalisations: fixed (throughput over
line rate, queue against a fixed reference) and eq14 (Eq. 14 with the whole traversal as its
history: throughput over the grid's best, the grid's smallest queue over the current one).

Reports per row the median, worst, mean and standard deviation over seeds of the fraction of
the grid's best each method reached; the share of the grid within 1% of its best (a large
share is a flat landscape where sampling does as well as searching); the share beating the
best baseline and the experience preset, and on throughput and queue alone (the paper's
11.09% and 16.36%); and "anneal ahead" where annealing's mean beats both rivals' by more than
twice the standard error of the difference. Nothing is simulated: seconds.`,
	Flags: tuneDiscriminateFlags,
}

type tuneDiscriminateOptions struct {
	seeds int
	out   string
	args  []string
}

func tuneDiscriminateFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o tuneDiscriminateOptions
	fs.IntVar(&o.seeds, "seeds", 20, "seeds per method and budget")
	fs.StringVar(&o.out, "out", "", "directory for discrimination.txt and .json (none: print only)")
	return bind(&o, &o.args, runTuneDiscriminate)
}

func runTuneDiscriminate(_ context.Context, env *Env, o tuneDiscriminateOptions) error {
	if len(o.args) == 0 {
		return Usagef("want landscape files (tune bench writes them)")
	}
	if o.seeds < 2 {
		return Usagef("--seeds %d: at least 2 (a spread needs two)", o.seeds)
	}
	var ls []*tunesim.Landscape
	for _, p := range o.args {
		l, err := tunesim.ReadLandscape(p)
		if err != nil {
			return err
		}
		ls = append(ls, l)
	}
	rows, err := tunesim.DiscriminateAll(ls, o.seeds)
	if err != nil {
		return err
	}
	if err := tunesim.WriteDiscrimination(env.Stdout, rows); err != nil {
		return err
	}
	if o.out == "" {
		return nil
	}
	// The landscapes are the inputs: only the results are written.
	return tunesim.WriteDiscriminationFiles(o.out, rows, nil)
}

var tuneOnlineCmd = &Command{
	Name:    "online",
	Summary: "online tuning on a running simulated fabric whose workload changes, against every preset",
	Usage:   "[--scenario fig11] [--steps 240] [--seed 1] [--reheat 0.01] [--reheat-sigma 3] [--reheat-after 2] [--samples 1] [--median] [--window D] [--start PRESET] [--receiver-side] [--grid] [--norm history|fixed] [--phase-history] [--hold] [--reheat-tem T] [--recall] [--lean] [--queue-floor B] [--cool-within 60] [--step 0.5] [--workers 1] [--fixed-from online.json] [--out DIR]",
	Long: `Runs an online scenario twice over: first ByteTuning online, one fabric simulation that never
restarts while its workload moves through phases (fig11: a k=4 fat tree, tuned per layer
(tor, agg, core), whose traffic cycles through a 2-to-1 of 1 MB messages, a 12-to-1 incast
of 64 KB bursts and a light 3-to-1 of 16 KB messages, 320 ms each); every step changes the
running switches' watermarks and is judged on the next 8 ms telemetry window by Eq. 14 with
the history normalisation; Algorithm 1 re-measures x every iteration and restarts its
schedule when the workload changed: when --reheat-after re-measurements in a row lie more
than --reheat-sigma standard deviations of the window noise (measured from repeated
re-measurements of one configuration) and more than --reheat of f(x) away from x's
earlier re-measurements. --samples windows per judgement (mean, or --median) and a longer
--window trade tuning steps for less noise. Online settings that are not Algorithm 1's, each
off by default: --phase-history restarts Eq. 14's history (best throughput, smallest queue)
with the schedule on a reheat and judges x again under it (a new run of Algorithm 1 on a new
workload); --hold holds x_best once a schedule has cooled, only re-measuring it, until the
next change (as Algorithm 1 ends and deploys x_best; without it the search goes on at
tem_goal); --reheat-tem restarts a reheat at a lower temperature than tem (100 accepts nearly
every worse proposal for the first temperatures: a random walk on the live fabric);
--recall makes a reheat's first proposals the points that served earlier workloads; --lean
(with --hold) skips line 7 within a schedule, every judgement a proposal;
--queue-floor raises Q_min and Q_now by that many bytes (one MMU cell by default: once any
window's queue was empty, the queue term is ~0 for every other); --cool-within sets the
windows each schedule cools within (60); --step is Algorithm 1's initial search step s (0.5).
Then every preset of Tables 2 and 3 held fixed
on the same fabric and workload for as many windows. incast39 and redis are the paper's
39-to-1 incast (10 QPs per sender, 64 KB every 1000 us) and Redis SETs (20 clients x 10
threads, 64 KB requests, 64-byte replies, closed loop) on the leaf-spine of 'tune paper',
the leaf layer tuned, one workload that runs on; incast39-redis alternates the two every
320 ms (40 windows), to measure tracking on the paper's workloads; a redis exchange's FCT
runs from the SET's post to its reply's completion. fig11-leaf is fig11's kind of schedule on
that leaf-spine, judged on the receiver-side leaf: the traffic to h39 cycles a 2-to-1 of
1 MB messages (8 QPs per sender every 8 ms, 67% load), the 39-to-1 incast and a light 3-to-1
of 16 KB messages (4 QPs per sender every 200 us, 32% load), 320 ms each, so that load,
incast degree and message size change at once.

--grid also holds each of 18 coarse grid points (the same watermark on every tuned scope:
Kmin at the space's lowest, middle and highest level, Pmax at its ends, alpha at its ends
and middle, headroom at its middle) fixed for the whole run on its own fabric, as the presets
are. A phase's grid optimum is the best steady level (the mean of its windows without the
first 4 after each change) among the grid points and the presets; each phase change's
recovery is then also the steps until 4 tuned windows in a row reach 98% of it, and the
goal line says at how many changes that took at most 30 steps. --norm fixed makes the tuner
judge by the table's score (throughput over line rate, queue against a fixed reference)
instead of Eq. 14's history normalisation. The optimum is a lower bound
on the phase's true one (18 points of 3300 per scope). --workers runs the simulations side by
side. --fixed-from takes the preset and grid runs from an earlier online.json of the same
scenario, steps and window instead of simulating them again (held fixed on a fabric of a fixed
seed, they do not depend on the tuner): another seed or tuner setting then costs one
simulation instead of 24.

Prints per phase the objective under the fixed normalisation (its standard deviation over
the phase's windows and the window-to-window noise), the rate delivered to the
receiver, the mean queue of the watched switches, the P50/P99 FCT of the phase's messages
and the drops, for the tuned run and every preset; the presets better than the tuned run on
any metric; and after each phase change the steps until a tuned window scored 98% of the
best preset's mean in that phase (and with --grid of the grid optimum); per phase the presets' spread against the noise of one
window, and the tuned run's mean on windows at x against its windows on proposals. Writes online.txt and online.json to --out. The
simulation is the cost: minutes on two cores.

The same tuning from a run file: 'appliance tune run -f tune-online.yml' with target
{kind: simulator, scenario: fig11, online: true}.`,
	Flags: tuneOnlineFlags,
}

type tuneOnlineOptions struct {
	scenario, out string
	steps         int
	seed          uint64
	reheat, sigma float64
	after         int
	samples       int
	median        bool
	hold, phaseH  bool
	cool          int
	reheatTem     float64
	step          float64
	recall, lean  bool
	window        time.Duration
	start         string
	receiver      bool
	grid          bool
	workers       int
	norm          string
	fixedFrom     string
	queueFloor    float64
	args          []string
}

func tuneOnlineFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o tuneOnlineOptions
	fs.StringVar(&o.scenario, "scenario", "fig11", "online scenario ("+strings.Join(tunesim.LiveScenarioNames(), ", ")+")")
	fs.IntVar(&o.steps, "steps", 240, "tuning steps (telemetry windows) per run")
	fs.Uint64Var(&o.seed, "seed", 1, "the tuner's seed")
	def := tunesim.OnlineAnneal()
	fs.Float64Var(&o.reheat, "reheat", def.Reheat, "the smallest move of f(x), as a fraction of it, that can count as a changed workload")
	fs.Float64Var(&o.sigma, "reheat-sigma", def.ReheatSigma, "a changed workload moves f(x) by more than this many standard deviations of the measured window noise (0: the fraction alone)")
	fs.IntVar(&o.after, "reheat-after", def.ReheatAfter, "re-measurements of x in a row that must show the move")
	fs.IntVar(&o.samples, "samples", max(def.Samples, 1), "telemetry windows per judgement (of x and of each proposal)")
	fs.BoolVar(&o.median, "median", def.Median, "judge on the median of the samples, not their mean")
	fs.BoolVar(&o.hold, "hold", def.Hold, "once a schedule has cooled, hold x_best and only re-measure it until the workload changes (as Algorithm 1 ends), instead of searching on at tem_goal")
	fs.BoolVar(&o.phaseH, "phase-history", def.PhaseHistory, "restart Eq. 14's history (best throughput, smallest queue) with the schedule on a changed workload, instead of keeping it over the whole run")
	fs.Float64Var(&o.reheatTem, "reheat-tem", def.ReheatTem, "the temperature a reheat restarts at (0: tem, Algorithm 1's 100)")
	fs.BoolVar(&o.recall, "recall", def.Recall, "a reheat's first proposals are the points that served earlier workloads, most recent first")
	fs.Float64Var(&o.step, "step", def.S, "Algorithm 1's initial search step s, a fraction of each parameter's range (the paper's 0.5), at the start and at every reheat")
	fs.BoolVar(&o.lean, "lean", def.Lean, "with --hold: no re-measurement of x within a schedule (line 7 skipped), every judgement a proposal; the held x_best is re-measured")
	fs.IntVar(&o.cool, "cool-within", 60, "windows (evaluations) each schedule cools within")
	fs.StringVar(&o.start, "start", "", "start the tuner from this preset ("+strings.Join(tuning.BaselineNames(), ", ")+"; none: a random point)")
	fs.DurationVar(&o.window, "window", 0, "telemetry window (0: the scenario's, 8ms for fig11; use a multiple of it)")
	fs.StringVar(&o.out, "out", "tune-online", "directory for online.txt and online.json")
	fs.BoolVar(&o.receiver, "receiver-side", false, "judge windows on the receiver-side switches only (the paper's telemetry compression), not every switch on the traffic's paths")
	fs.BoolVar(&o.grid, "grid", false, "also hold each of 18 coarse grid points fixed for the whole run, and measure each phase change's recovery against the phase's best fixed level (the grid optimum)")
	fs.StringVar(&o.norm, "norm", "history", "the tuner's normalisation: history (Eq. 14's, over the whole run) or fixed (the table's score)")
	fs.IntVar(&o.workers, "workers", 1, "simulations run side by side (the tuned run, the presets and the grid points are independent)")
	fs.Float64Var(&o.queueFloor, "queue-floor", 0, "the history normalisation's queue floor in bytes, Q_min/Q_now with both raised by it (0: one MMU cell, 256 bytes)")
	fs.StringVar(&o.fixedFrom, "fixed-from", "", "an earlier online.json of the same scenario, steps and window whose preset and grid runs are reused instead of simulated again")
	return bind(&o, &o.args, runTuneOnline)
}

func runTuneOnline(ctx context.Context, env *Env, o tuneOnlineOptions) error {
	if len(o.args) > 0 {
		return Usagef("no arguments")
	}
	if o.steps < 1 {
		return Usagef("--steps %d: at least 1", o.steps)
	}
	if o.reheat < 0 || o.sigma < 0 || !(o.reheat > 0 || o.sigma > 0) {
		return Usagef("--reheat %g, --reheat-sigma %g: not negative, one positive (online the schedule must restart when the workload changes)", o.reheat, o.sigma)
	}
	if o.norm != string(tuning.History) && o.norm != string(tuning.Fixed) {
		return Usagef("--norm %q: history or fixed", o.norm)
	}
	if o.queueFloor < 0 {
		return Usagef("--queue-floor %g: not negative", o.queueFloor)
	}
	if o.workers < 1 {
		return Usagef("--workers %d: at least 1", o.workers)
	}
	if o.samples < 1 || o.window < 0 {
		return Usagef("--samples %d, --window %v: at least one sample, window not negative", o.samples, o.window)
	}
	ap := tunesim.OnlineAnneal()
	if o.cool < 2 {
		return Usagef("--cool-within %d: at least 2", o.cool)
	}
	ap.Reheat, ap.ReheatSigma, ap.ReheatAfter, ap.Samples, ap.Median = o.reheat, o.sigma, o.after, o.samples, o.median
	ap.Hold, ap.PhaseHistory, ap.ReheatTem, ap.Recall, ap.S, ap.Lean = o.hold, o.phaseH, o.reheatTem, o.recall, o.step, o.lean
	ap = ap.ForBudget(o.cool)
	if err := ap.Validate(); err != nil {
		return Usagef("%v", err)
	}
	var fixed *tunesim.OnlineResult
	if o.fixedFrom != "" {
		b, err := os.ReadFile(o.fixedFrom)
		if err != nil {
			return fmt.Errorf("--fixed-from: %w", err)
		}
		fixed = &tunesim.OnlineResult{}
		if err := json.Unmarshal(b, fixed); err != nil {
			return fmt.Errorf("--fixed-from %s: %w", o.fixedFrom, err)
		}
	}
	t0 := time.Now()
	r, err := tunesim.Online(ctx, tunesim.OnlineOptions{Scenario: o.scenario, Steps: o.steps, Seed: o.seed, Anneal: &ap, ReceiverSide: o.receiver, Window: o.window, Start: o.start, Grid: o.grid, Workers: o.workers, Norm: tuning.Normalisation(o.norm), Fixed: fixed, QueueFloor: o.queueFloor})
	if err != nil {
		return err
	}
	if err := tunesim.WriteOnline(env.Stdout, r); err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(o.out, "online.txt"))
	if err != nil {
		return err
	}
	werr := tunesim.WriteOnline(f, r)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return werr
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.out, "online.json"), b, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "took %v; written to %s\n", time.Since(t0).Round(time.Second), o.out)
	return nil
}
