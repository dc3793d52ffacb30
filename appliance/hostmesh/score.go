package hostmesh

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rdma-appliance/appliance/collector/hostmeshanalyzer"
)

// Element is a faulty element, or an element the analyzer names: an RNIC
// (host/rnic), a link (its ends joined by ~), a switch or a host.
type Element struct {
	Kind string `json:"kind,omitempty"`
	Name string `json:"name,omitempty"`
}

func (e Element) String() string {
	if e.Kind == "" {
		return "none"
	}
	return e.Kind + " " + e.Name
}

// Outcome is a run scored as the issue and the paper score it.
type Outcome struct {
	// Top is the top suspect, across all kinds, of the first window that
	// raised any alert once the fault began (of any window for fault-free
	// runs); Correct says it is the faulty element (for fault-free runs:
	// that no window raised any alert).
	Top     Element `json:"top"`
	Correct bool    `json:"correct"`
	// Alerts counts every alert of every window; FalseAlerts those that do
	// not name the faulty element, whichever rank they had, before the
	// fault or after (all of them in fault-free runs). False lists them.
	Alerts      int      `json:"alerts"`
	FalseAlerts int      `json:"false_alerts"`
	False       []string `json:"false,omitempty"`
	// DetectNs is from the fault's start to the end of the first window
	// whose alerts name it (simulated ns, -1 when none did); ProbingNs the
	// simulated time the analyzed windows cover.
	DetectNs  int64 `json:"detect_ns"`
	ProbingNs int64 `json:"probing_ns"`
}

// Score scores a run's window reports against the faulty element that
// began at faultAt (truth zero for a fault-free run). Alerts are one per
// suspect of a window, so a link, a switch or an RNIC named alongside the
// right suspect is a false alert even when the right one ranks first, and
// an element alerted on in three windows is three alerts.
func Score(truth Element, faultAt int64, reps []*hostmeshanalyzer.Report) Outcome {
	o := Outcome{DetectNs: -1}
	judged := false
	for _, r := range reps {
		o.ProbingNs += r.End - r.Start
		right := false
		for _, s := range r.Suspects {
			o.Alerts++
			if (Element{s.Kind, s.Name}) == truth && truth.Kind != "" {
				right = true
				continue
			}
			o.FalseAlerts++
			o.False = append(o.False, fmt.Sprintf("window ending %v: %s", time.Duration(r.End), s.Alert))
		}
		if truth.Kind != "" && r.End <= faultAt {
			continue
		}
		if top, ok := r.Top(); ok && !judged {
			judged = true
			o.Top = Element{top.Kind, top.Name}
			o.Correct = o.Top == truth && truth.Kind != ""
		}
		if right && o.DetectNs < 0 {
			o.DetectNs = r.End - faultAt
		}
	}
	if truth.Kind == "" {
		o.Correct = o.Alerts == 0
	}
	return o
}

// The goals of issue 18 for Hostmesh.
const (
	GoalTop1        = 0.95
	GoalFalsePerRun = 0.1
)

// EvalRow is one fault type's outcome on one cluster over the runs. The
// sums let shards add up (MergeRows); the rest follows from them.
type EvalRow struct {
	Hosts  int    `json:"hosts"`
	Spines int    `json:"spines"`
	Fault  string `json:"fault"`
	Runs   int    `json:"runs"`
	// Top1Runs are the runs whose top suspect was the faulty element (for
	// fault-free runs: the runs without any alert), Top1 their share.
	Top1Runs int     `json:"top1_runs"`
	Top1     float64 `json:"top1"`
	// FalseAlerts over every run, per run and per hour of probing at the
	// paper's time scale (the simulated time times Scale).
	FalseAlerts        int     `json:"false_alerts"`
	FalseAlertsPerRun  float64 `json:"false_alerts_per_run"`
	ProbingHours       float64 `json:"probing_hours"`
	FalseAlertsPerHour float64 `json:"false_alerts_per_hour"`
	// Detected runs named the fault in some window; DetectSeconds is the
	// mean time from the fault to the first window that did, at the
	// paper's scale (20 s windows), and DetectSecondsMax the longest.
	Detected         int     `json:"detected"`
	DetectSecondsSum float64 `json:"detect_seconds_sum"`
	DetectSeconds    float64 `json:"detect_seconds"`
	DetectSecondsMax float64 `json:"detect_seconds_max"`
	// Goal is "met" or what missed it.
	Goal   string `json:"goal"`
	WallMs int64  `json:"wall_ms"`
	// Misses lists the runs that missed: seed, truth, top suspect, false
	// alerts.
	Misses []string `json:"misses,omitempty"`
}

// add takes one run into the row.
func (row *EvalRow) add(r *Run) {
	row.Runs++
	if r.Correct {
		row.Top1Runs++
	}
	row.FalseAlerts += r.FalseAlerts
	row.ProbingHours += float64(r.ProbingNs) * Scale / float64(time.Hour)
	if r.DetectNs >= 0 {
		d := float64(r.DetectNs) * Scale / 1e9
		row.Detected++
		row.DetectSecondsSum += d
		row.DetectSecondsMax = max(row.DetectSecondsMax, d)
	}
	if !r.Correct || r.FalseAlerts > 0 {
		row.Misses = append(row.Misses, fmt.Sprintf("seed %d: truth %s (%s) top %s, %d false alerts %q",
			r.Seed, r.Truth, r.Detail, r.Top, r.FalseAlerts, r.False))
	}
}

// finish computes the shares and the goal from the sums.
func (row *EvalRow) finish() {
	n := float64(max(row.Runs, 1))
	row.Top1 = float64(row.Top1Runs) / n
	row.FalseAlertsPerRun = float64(row.FalseAlerts) / n
	row.FalseAlertsPerHour = 0
	if row.ProbingHours > 0 {
		row.FalseAlertsPerHour = float64(row.FalseAlerts) / row.ProbingHours
	}
	row.DetectSeconds = 0
	if row.Detected > 0 {
		row.DetectSeconds = row.DetectSecondsSum / float64(row.Detected)
	}
	var missed []string
	switch {
	case row.Fault == FaultNone && row.Top1Runs < row.Runs:
		missed = append(missed, fmt.Sprintf("%d fault-free runs alerted", row.Runs-row.Top1Runs))
	case row.Fault != FaultNone && row.Top1 < GoalTop1:
		missed = append(missed, fmt.Sprintf("top-1 < %.0f%%", 100*GoalTop1))
	}
	if row.FalseAlertsPerRun > GoalFalsePerRun {
		missed = append(missed, fmt.Sprintf("false alerts > %g/run", GoalFalsePerRun))
	}
	row.Goal = "met"
	if len(missed) > 0 {
		row.Goal = "MISSED: " + strings.Join(missed, ", ")
	}
}

// Eval runs every fault type runs times on every cluster size, with seeds
// derived from seed, calling progress after each run.
func Eval(ctx context.Context, hosts []int, types []string, runs int, seed uint64, progress func(r *Run)) ([]EvalRow, []*Run, error) {
	return EvalShard(ctx, hosts, types, runs, seed, 0, 1, progress)
}

// RunSeed is the seed of run k of a fault type on a cluster: it depends on
// neither the other types nor the other sizes chosen, so a run can be
// repeated alone.
func RunSeed(seed uint64, hosts int, fault string, k int) uint64 {
	return seed + uint64(hosts)*10_000_000 + uint64(slices.Index(FaultTypes, fault))*100_000 + uint64(k)
}

// runOne is RunOne, which tests of the bookkeeping replace.
var runOne = RunOne

// EvalShard is Eval on part i of n of the runs (run number, over every
// cluster and type in order, equal to i modulo n): shards run anywhere, as
// a batch system's array jobs, and MergeRows adds them up to the whole.
func EvalShard(ctx context.Context, hosts []int, types []string, runs int, seed uint64, i, n int, progress func(r *Run)) ([]EvalRow, []*Run, error) {
	if n < 1 || i < 0 || i >= n {
		return nil, nil, fmt.Errorf("hostmesh: shard %d/%d", i, n)
	}
	for _, ft := range types {
		if !slices.Contains(FaultTypes, ft) {
			return nil, nil, fmt.Errorf("hostmesh: unknown fault type %q (want one of %s)", ft, strings.Join(FaultTypes, ", "))
		}
	}
	var rows []EvalRow
	var all []*Run
	j := 0
	for _, h := range hosts {
		for _, ft := range types {
			row := EvalRow{Hosts: h, Spines: ClusterScenario(h).Spines, Fault: ft}
			t0 := time.Now()
			for k := range runs {
				if j++; (j-1)%n != i {
					continue
				}
				r, err := runOne(ctx, h, ft, RunSeed(seed, h, ft, k))
				if err != nil {
					return rows, all, err
				}
				all = append(all, r)
				row.add(r)
				if progress != nil {
					progress(r)
				}
			}
			row.WallMs = time.Since(t0).Milliseconds()
			row.finish()
			rows = append(rows, row)
		}
	}
	return rows, all, nil
}

// MergeRows adds up shards' rows, cluster and fault type by cluster and
// fault type, in the order they first appear.
func MergeRows(shards ...[]EvalRow) []EvalRow {
	var out []EvalRow
	type key struct {
		hosts int
		fault string
	}
	at := map[key]int{}
	for _, sh := range shards {
		for _, r := range sh {
			k := key{r.Hosts, r.Fault}
			i, ok := at[k]
			if !ok {
				i = len(out)
				at[k] = i
				out = append(out, EvalRow{Hosts: r.Hosts, Spines: r.Spines, Fault: r.Fault})
			}
			m := &out[i]
			m.Runs += r.Runs
			m.Top1Runs += r.Top1Runs
			m.FalseAlerts += r.FalseAlerts
			m.ProbingHours += r.ProbingHours
			m.Detected += r.Detected
			m.DetectSecondsSum += r.DetectSecondsSum
			m.DetectSecondsMax = max(m.DetectSecondsMax, r.DetectSecondsMax)
			m.WallMs += r.WallMs
			m.Misses = append(m.Misses, r.Misses...)
		}
	}
	for i := range out {
		out[i].finish()
	}
	return out
}

// WriteEvalTable prints the evaluation table, a cluster after another.
func WriteEvalTable(w io.Writer, rows []EvalRow) {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "cluster\tfault\truns\ttop-1\tfalse alerts/run\tfalse alerts/hour\tdetect s (mean, max)\twall\tgoal\t\n")
	for _, r := range rows {
		top := fmt.Sprintf("%d (%.1f%%)", r.Top1Runs, 100*r.Top1)
		detect := "-"
		if r.Fault == FaultNone {
			top = fmt.Sprintf("%d silent (%.1f%%)", r.Top1Runs, 100*r.Top1)
		} else if r.Detected > 0 {
			detect = fmt.Sprintf("%.1f, %.1f", r.DetectSeconds, r.DetectSecondsMax)
		}
		fmt.Fprintf(tw, "%dx8, %d spines\t%s\t%d\t%s\t%.2f\t%.1f\t%s\t%s\t%s\t\n", r.Hosts, r.Spines, r.Fault, r.Runs, top,
			r.FalseAlertsPerRun, r.FalseAlertsPerHour, detect, (time.Duration(r.WallMs) * time.Millisecond).Round(time.Second), r.Goal)
	}
	tw.Flush()
	fmt.Fprintf(w, "top-1: the top suspect across all kinds of the first window alerting after the fault is the faulty element;\n"+
		"false alerts: every other alert of every window (%d windows of %v at the paper's time scale per run, the fault in the 4th);\n"+
		"goals: top-1 >= %.0f%% per fault type, <= %g false alerts per run, no alert in fault-free runs.\n",
		runWindows, time.Duration(SimAnalyzerConfig().Window)*Scale, 100*GoalTop1, GoalFalsePerRun)
}

// WriteEvalJSON writes the rows grouped by cluster, per fault type.
func WriteEvalJSON(w io.Writer, rows []EvalRow) error {
	type cluster struct {
		Hosts  int       `json:"hosts"`
		RNICs  int       `json:"rnics_per_host"`
		Spines int       `json:"spines"`
		Faults []EvalRow `json:"faults"`
	}
	doc := struct {
		Scoring  string    `json:"scoring"`
		Scale    int       `json:"time_scale"`
		Clusters []cluster `json:"clusters"`
	}{Scoring: "top1: share of runs whose top suspect across all kinds, in the first window alerting after the fault, is the faulty element " +
		"(fault-free runs: share without any alert); false alerts: every other alert of every window; per hour of probing at the paper's " +
		"time scale; detect_seconds: mean from the fault to the end of the first window naming it, at the paper's time scale", Scale: Scale}
	for _, r := range rows {
		if n := len(doc.Clusters); n == 0 || doc.Clusters[n-1].Hosts != r.Hosts {
			doc.Clusters = append(doc.Clusters, cluster{Hosts: r.Hosts, RNICs: ClusterScenario(r.Hosts).RNICs, Spines: r.Spines})
		}
		c := &doc.Clusters[len(doc.Clusters)-1]
		c.Faults = append(c.Faults, r)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}
