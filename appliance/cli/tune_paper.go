package cli

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/bench/tunesim"
	"github.com/rdma-appliance/appliance/internal/progress"
	"github.com/rdma-appliance/appliance/tuning"
)

var tunePaperCmd = &Command{
	Name:    "paper",
	Summary: "the paper's evaluation tables on the simulator: incast FCT (Fig. 12), Redis (Table 5), DCQCN knobs (Fig. 13)",
	Usage:   "[--cases LIST] [--evals 40] [--seeds 1] [--bursts 3] [--sim-seed 1] [--norm history|fixed] [--window run|posting] [--busy queue|skip] [--telemetry receiver|path] [--fig13 CASE] [--out DIR]",
	Long: `Runs the paper's Section 6 workloads on the fabric simulator's leaf-spine (2 leaves of 20
hosts at 25G, 2 spines at 100G, 32 MB switches):

  incast2-qN-SIZE, incast39-qN-SIZE  2-to-1 and 39-to-1 RDMA incast, N QPs per sender (10, 50),
                                     a SIZE burst (10 KB, 64 KB) per QP every 1000 us; a busy
                                     QP queues the burst's message behind the one in flight (an
                                     RC send queue), so every method faces the same messages
  redis                              20 clients x 10 threads send 64 KB SETs to one server,
                                     each thread the next once the 64-byte reply arrived

For each case, simulated annealing (the paper's parameters, cooled within --evals
configurations) tunes the receiver-side leaf's watermarks on the paper's objective (Eq. 14:
throughput and queue, beta 0.5, normalised by the run's history, f(x) re-scored every
iteration as Algorithm 1's line 7), judged on telemetry of the whole run (posting and drain),
for each of --seeds seeds; the tuned point is the run's best under its final history. The
table's score is the fixed normalisation (comparable between methods). --norm fixed,
--window posting and --busy skip restore the earlier settings, to measure what each changes;
--telemetry path feeds the tuner every switch on the paths instead of the receiver-side leaf.
The tuned best and every baseline preset
(dcqcn, dctcp, experience, hpcc, vendor) then run once more and the table shows per method
the P50/P99/mean FCT of every message (or SET-to-reply exchange) as the simulator completed
it, the receiver's goodput, the receiver-side switch's mean queue, ECN marks, PFC pauses and
drops (Redis adds IOPS), and per metric how many presets each tuned run beats. Posting lasts
--bursts ms for the incasts (20 ms for redis); the run then drains until every message is done
(at most --drain). --sim-seed is the fabric's seed (ECMP hashing, RED): the same seed gives
the same table. Writes paper.txt, paper.json, paper.html and paper-N.png to --out.

--fig13 CASE runs the DCQCN study of Fig. 13 instead: for every pair of --knobs values
(microseconds) of rate_reduce_monitor_period (the reaction point's least time between rate
cuts) and min_time_between_cnps (the notification point's least time between CNPs of a
flow), CASE is tuned again under those knobs and compared with the vendor preset on ECN
marks, throughput, PFC pauses and paused time. Writes fig13.txt, .json, .html and PNGs.`,
	Flags: tunePaperFlags,
}

type tunePaperOptions struct {
	cases, out, fig13, knobs string
	evals, seeds, bursts     int
	norm, window, busy, tel  string
	simSeed                  uint64
	drain                    time.Duration
	args                     []string
}

func tunePaperFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o tunePaperOptions
	fs.StringVar(&o.cases, "cases", "", "comma-separated cases (default all: "+strings.Join(tunesim.PaperCaseNames(), ",")+")")
	fs.IntVar(&o.evals, "evals", 40, "annealing's budget per case and seed (the paper's: 330)")
	fs.IntVar(&o.seeds, "seeds", 1, "annealing seeds (a tuned row each)")
	fs.IntVar(&o.bursts, "bursts", 3, "bursts (ms of posting) of the incast cases")
	fs.Uint64Var(&o.simSeed, "sim-seed", 1, "the fabric's seed")
	fs.DurationVar(&o.drain, "drain", 400*time.Millisecond, "longest run after posting for the messages in flight")
	fs.StringVar(&o.norm, "norm", "history", "the tuner's normalisation: history (Eq. 14's) or fixed")
	fs.StringVar(&o.window, "window", "run", "telemetry the tuner judges: run (posting and drain) or posting")
	fs.StringVar(&o.busy, "busy", "queue", "a busy QP's burst: queue (behind the message in flight) or skip")
	fs.StringVar(&o.tel, "telemetry", "receiver", "switches the tuner reads: receiver (the receiver-side leaf, the paper's compression) or path (every switch on the paths)")
	fs.StringVar(&o.fig13, "fig13", "", "run the DCQCN knob study (Fig. 13) on this case instead")
	fs.StringVar(&o.knobs, "knobs", "0,1,4", "Fig. 13's values of both knobs, microseconds")
	fs.StringVar(&o.out, "out", "tune-paper", "output directory")
	return bind(&o, &o.args, runTunePaper)
}

func runTunePaper(ctx context.Context, env *Env, o tunePaperOptions) error {
	if len(o.args) > 0 {
		return Usagef("no arguments")
	}
	if o.evals < 1 || o.seeds < 1 || o.bursts < 1 || o.simSeed == 0 || o.drain <= 0 {
		return Usagef("--evals, --seeds, --bursts, --sim-seed and --drain must be positive")
	}
	if o.norm != string(tuning.History) && o.norm != string(tuning.Fixed) {
		return Usagef("--norm %q: history or fixed", o.norm)
	}
	if o.window != "run" && o.window != "posting" {
		return Usagef("--window %q: run or posting", o.window)
	}
	if o.busy != "queue" && o.busy != "skip" {
		return Usagef("--busy %q: queue or skip", o.busy)
	}
	if o.tel != "receiver" && o.tel != "path" {
		return Usagef("--telemetry %q: receiver or path", o.tel)
	}
	po := tunesim.PaperOptions{Evals: o.evals, Seeds: o.seeds, Bursts: o.bursts, SimSeed: o.simSeed, Drain: o.drain,
		Norm: tuning.Normalisation(o.norm), PostingWindow: o.window == "posting", Skip: o.busy == "skip",
		PathTelemetry: o.tel == "path",
		Progress:      progress.New(env.Stderr, progress.Options{Label: "tune paper", Unit: "evaluations"})}
	if o.cases != "" {
		po.Cases = strings.Split(o.cases, ",")
	}
	if o.fig13 != "" {
		vals, err := parseKnobs(o.knobs)
		if err != nil {
			return err
		}
		pts, err := tunesim.Fig13(ctx, po, o.fig13, vals)
		po.Progress.Finish()
		if err != nil {
			return err
		}
		if err := tunesim.WriteFig13Table(env.Stdout, o.fig13, pts); err != nil {
			return err
		}
		return tunesim.WriteFig13(o.out, o.fig13, pts)
	}
	t0 := time.Now()
	rows, err := tunesim.PaperEval(ctx, po)
	po.Progress.Finish()
	if err != nil {
		return err
	}
	if err := tunesim.WritePaperTable(env.Stdout, rows, po); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "%d cases in %v; written to %s\n", len(rows), time.Since(t0).Round(time.Second), o.out)
	return tunesim.WritePaper(o.out, rows, po)
}

// parseKnobs reads --knobs: comma-separated microseconds, 0 to a second,
// at most 8 values (the study runs every pair).
func parseKnobs(s string) ([]time.Duration, error) {
	parts := strings.Split(s, ",")
	if len(parts) > 8 {
		return nil, Usagef("--knobs %q: at most 8 values (the study tunes every pair)", s)
	}
	var vals []time.Duration
	for _, p := range parts {
		v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || !(v >= 0 && v <= 1e6) {
			return nil, Usagef("--knobs %q: microseconds, 0..1e6, comma-separated", s)
		}
		vals = append(vals, time.Duration(v*1e3))
	}
	return vals, nil
}
