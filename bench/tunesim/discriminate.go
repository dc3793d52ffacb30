package tunesim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rdma-appliance/appliance/tuning"
)

// Landscape is a scenario's whole grid as measured: the telemetry of every
// point of its space (in Space.Enumerate's order) and of every baseline
// preset. The search methods are compared on it: a deterministic
// simulator gives a point the same telemetry every time, so running a
// method against the table is running it against the simulator.
type Landscape struct {
	Scenario  string
	Space     tuning.Space
	Objective tuning.Objective
	Tel       []tuning.Telemetry
	Baselines map[string]tuning.Telemetry
}

// Normalisations the discrimination scores a landscape under:
//
//   - fixed: the bench's (throughput over line rate, queue q as
//     QueueRef/(QueueRef+q)), the same scale for every run;
//   - eq14: Eq. 14 as the paper writes it with the history of the whole
//     traversal, the paper's own view of its 3300-point grid: throughput
//     over the grid's best, the grid's smallest queue over the current one
//     (one cell added to both, so an empty queue stays finite).
const (
	NormFixed = "fixed"
	NormEq14  = "eq14"
)

// scores are the landscape's objective values and the baselines' under
// norm.
func (l *Landscape) scores(norm string) ([]float64, map[string]float64, error) {
	o := l.Objective
	var h *tuning.HistoryBest
	switch norm {
	case NormFixed:
		o.Norm = tuning.Fixed
	case NormEq14:
		o.Norm = tuning.History
		h = &tuning.HistoryBest{}
		// The history of the whole traversal first: every later score
		// is then against the grid's extremes.
		for _, t := range l.Tel {
			if _, err := o.Score(t, h); err != nil {
				return nil, nil, err
			}
		}
		for _, t := range l.Baselines {
			if _, err := o.Score(t, h); err != nil {
				return nil, nil, err
			}
		}
	default:
		return nil, nil, fmt.Errorf("normalisation %q: %s or %s", norm, NormFixed, NormEq14)
	}
	out := make([]float64, len(l.Tel))
	for i, t := range l.Tel {
		f, err := o.Score(t, h)
		if err != nil {
			return nil, nil, err
		}
		out[i] = f
	}
	bs := map[string]float64{}
	for n, t := range l.Baselines {
		f, err := o.Score(t, h)
		if err != nil {
			return nil, nil, err
		}
		bs[n] = f
	}
	return out, bs, nil
}

// Spread is a method's results over seeds: the best score found with the
// budget over the grid's best.
type Spread struct {
	Median float64   `json:"median"`
	Worst  float64   `json:"worst"`
	Mean   float64   `json:"mean"`
	Stddev float64   `json:"stddev"`
	Ratios []float64 `json:"ratios"`
}

func spread(rs []float64) Spread {
	s := Spread{Ratios: rs, Median: median(rs), Worst: slices.Min(rs)}
	for _, r := range rs {
		s.Mean += r
	}
	s.Mean /= float64(len(rs))
	for _, r := range rs {
		s.Stddev += (r - s.Mean) * (r - s.Mean)
	}
	if len(rs) > 1 {
		s.Stddev = math.Sqrt(s.Stddev / float64(len(rs)-1))
	}
	return s
}

// DiscMethods are the methods compared.
var DiscMethods = []string{"anneal", "random", "hillclimb"}

// DiscRow is one scenario under one normalisation.
type DiscRow struct {
	Scenario string `json:"scenario"`
	Norm     string `json:"norm"`
	Points   int    `json:"points"`
	GridBest float64
	// NearOptimal is the share of the grid within 1% of its best: with
	// a share p, random search misses all of them in n evaluations with
	// probability (1-p)^n, so a large share is a flat landscape where
	// no search can do much better than sampling.
	NearOptimal float64 `json:"near_optimal_share"`
	// BeatBest is the share of the grid scoring above the best baseline,
	// BeatExperience above the experience preset (our stand-in for the
	// paper's unpublished benchmark configuration), and on throughput
	// and queue alone (the paper's 11.09% and 16.36%).
	BestBaseline    string             `json:"best_baseline"`
	BeatBest        float64            `json:"beat_best_baseline_share"`
	BeatExperience  float64            `json:"beat_experience_share"`
	BeatThroughput  float64            `json:"beat_experience_throughput_share"`
	BeatQueue       float64            `json:"beat_experience_queue_share"`
	Baselines       map[string]float64 `json:"baselines"`
	Budgets         []int              `json:"budgets"`
	Seeds           int                `json:"seeds"`
	Methods         map[string][]Spread
	Separated       []bool `json:"separated"` // per budget: anneal ahead of both rivals
	SeparatedReason []string
	// Pair says the row is two switches tuned apart (DiscriminatePair):
	// the throughput and queue shares are not computed for it.
	Pair bool `json:"pair,omitempty"`
}

// Discriminate runs every method seeds times for each budget on the
// landscape under norm. A method's result is the best grid score among
// the points it evaluated (evaluations of a point again count against
// the budget, as they would on a network). Annealing runs with the bench's
// setting, cooled within each budget.
func Discriminate(l *Landscape, norm string, budgets []int, seeds int) (DiscRow, error) {
	sc, bs, err := l.scores(norm)
	if err != nil {
		return DiscRow{}, err
	}
	row := DiscRow{Scenario: l.Scenario, Norm: norm, Points: len(sc), Baselines: bs, Budgets: budgets, Seeds: seeds,
		Methods: map[string][]Spread{}}
	row.GridBest = slices.Max(sc)
	best := math.Inf(-1)
	for _, n := range sortedKeys(bs) {
		if bs[n] > best {
			best, row.BestBaseline = bs[n], n
		}
	}
	exp, hasExp := l.Baselines["experience"]
	et, eq := summary(exp)
	for i, s := range sc {
		if s >= 0.99*row.GridBest {
			row.NearOptimal++
		}
		if s > best {
			row.BeatBest++
		}
		if hasExp {
			if s > bs["experience"] {
				row.BeatExperience++
			}
			t, q := summary(l.Tel[i])
			if t > et {
				row.BeatThroughput++
			}
			if q < eq {
				row.BeatQueue++
			}
		}
	}
	n := float64(len(sc))
	row.NearOptimal /= n
	row.BeatBest /= n
	row.BeatExperience /= n
	row.BeatThroughput /= n
	row.BeatQueue /= n
	if err := runMethods(&row, l.Space, func(p tuning.Point) float64 { return sc[pointIndex(&l.Space, p)] }, budgets, seeds); err != nil {
		return row, err
	}
	return row, nil
}

// pointIndex is p's place in sp.Enumerate's order (the last dimension
// fastest).
func pointIndex(sp *tuning.Space, p tuning.Point) int {
	i := 0
	for d, v := range p {
		i = i*sp.Levels(d) + v
	}
	return i
}

// runMethods runs every method seeds times per budget against f and
// fills row's spreads and verdicts (row.GridBest set).
func runMethods(row *DiscRow, sp tuning.Space, f func(tuning.Point) float64, budgets []int, seeds int) error {
	row.Methods = map[string][]Spread{}
	for _, m := range DiscMethods {
		for _, b := range budgets {
			var rs []float64
			for seed := range uint64(seeds) {
				opt, err := tuning.NewOptimizer(m, &sp, seed+1, BenchAnneal(b), nil)
				if err != nil {
					return err
				}
				found := math.Inf(-1)
				for range b {
					p, ok := opt.Next()
					if !ok {
						break
					}
					v := f(p)
					found = max(found, v)
					opt.Tell(v)
				}
				rs = append(rs, found/row.GridBest)
			}
			row.Methods[m] = append(row.Methods[m], spread(rs))
		}
	}
	row.Separated, row.SeparatedReason = nil, nil
	for i := range budgets {
		a := row.Methods["anneal"][i]
		ok := true
		var why []string
		for _, r := range []string{"random", "hillclimb"} {
			o := row.Methods[r][i]
			// Welch: ahead when the means differ by more than twice the
			// standard error of their difference.
			se := math.Sqrt((a.Stddev*a.Stddev + o.Stddev*o.Stddev) / float64(seeds))
			d := a.Mean - o.Mean
			if !(d > 2*se) {
				ok = false
			}
			why = append(why, fmt.Sprintf("%s %+.2f pp (2 s.e. %.2f)", r, 100*d, 200*se))
		}
		row.Separated = append(row.Separated, ok)
		row.SeparatedReason = append(row.SeparatedReason, strings.Join(why, ", "))
	}
	return nil
}

// DiscriminatePair is Discriminate on two scenarios' receiver switches
// tuned each on its own (one switch scope each, 3300 x 3300 points):
// their traffic shares no switch, so the fabric's objective (Eq. 14 sums
// over switches) is the sum of the two landscapes' and the grid of the
// pair is known exactly from the two grids. The paper tunes per switch
// before compressing to layers; this is the space compression saves, and
// a space where sampling 330 points covers 0.003%.
func DiscriminatePair(a, b *Landscape, norm string, budgets []int, seeds int) (DiscRow, error) {
	sa, ba, err := a.scores(norm)
	if err != nil {
		return DiscRow{}, err
	}
	sb, bb, err := b.scores(norm)
	if err != nil {
		return DiscRow{}, err
	}
	row := DiscRow{Scenario: a.Scenario + "+" + b.Scenario, Norm: norm, Points: len(sa) * len(sb), Budgets: budgets, Seeds: seeds,
		Baselines: map[string]float64{}, Pair: true}
	row.GridBest = slices.Max(sa) + slices.Max(sb)
	best := math.Inf(-1)
	for _, n := range sortedNames(ba) {
		row.Baselines[n] = ba[n] + bb[n]
		if row.Baselines[n] > best {
			best, row.BestBaseline = row.Baselines[n], n
		}
	}
	// Shares of pairs above a threshold: for each a, the b's above
	// thr - f(a), by binary search in sorted b scores.
	sorted := slices.Clone(sb)
	slices.Sort(sorted)
	above := func(thr float64) float64 {
		n := 0
		for _, x := range sa {
			// The same sum the methods see, so ties fall alike.
			n += len(sorted) - sort.Search(len(sorted), func(i int) bool { return x+sorted[i] > thr })
		}
		return float64(n) / float64(row.Points)
	}
	row.NearOptimal = above(0.99*row.GridBest - 1e-12)
	row.BeatBest = above(best)
	if _, ok := row.Baselines["experience"]; ok {
		row.BeatExperience = above(row.Baselines["experience"])
	}
	sp := tuning.PaperSpace(tuning.ScopeSwitchPrefix+a.Scenario, tuning.ScopeSwitchPrefix+b.Scenario)
	half := len(sp.Params)
	f := func(p tuning.Point) float64 {
		return sa[pointIndex(&a.Space, p[:half])] + sb[pointIndex(&b.Space, p[half:])]
	}
	if err := runMethods(&row, sp, f, budgets, seeds); err != nil {
		return row, err
	}
	return row, nil
}

// summary is a telemetry's total throughput and deepest mean queue.
func summary(t tuning.Telemetry) (tput, queue float64) {
	for _, sw := range t.Switches {
		for _, p := range sw.Ports {
			tput += p.PortThroughput(t.Duration)
			queue = max(queue, p.QueueMean)
		}
	}
	return tput, queue
}

// WriteDiscrimination prints the rows.
func WriteDiscrimination(w io.Writer, rows []DiscRow) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tnorm\tbudget\tanneal med/worst\trandom med/worst\thillclimb med/worst\tanneal mean±sd\trandom mean±sd\thillclimb mean±sd\tanneal ahead\t")
	for _, r := range rows {
		for i, b := range r.Budgets {
			cells := []string{r.Scenario, r.Norm, fmt.Sprintf("%d (%.2g%%)", b, 100*float64(b)/float64(r.Points))}
			for _, m := range DiscMethods {
				s := r.Methods[m][i]
				cells = append(cells, fmt.Sprintf("%.2f/%.2f", 100*s.Median, 100*s.Worst))
			}
			for _, m := range DiscMethods {
				s := r.Methods[m][i]
				cells = append(cells, fmt.Sprintf("%.2f±%.2f", 100*s.Mean, 100*s.Stddev))
			}
			v := "no"
			if r.Separated[i] {
				v = "yes"
			}
			cells = append(cells, v)
			fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nPercent of the grid's best reached (median/worst and mean±sd over seeds); the same budget for every method.")
	for _, r := range rows {
		fmt.Fprintf(w, "%s (%s): %.3g%% of the grid within 1%% of its best; %.2f%% beat the best baseline (%s), %.2f%% the experience preset",
			r.Scenario, r.Norm, 100*r.NearOptimal, 100*r.BeatBest, r.BestBaseline, 100*r.BeatExperience)
		if !r.Pair {
			fmt.Fprintf(w, "; vs experience alone on throughput %.2f%% better, on queue %.2f%%", 100*r.BeatThroughput, 100*r.BeatQueue)
		}
		fmt.Fprintln(w)
		for i, b := range r.Budgets {
			fmt.Fprintf(w, "  budget %d: anneal vs %s\n", b, r.SeparatedReason[i])
		}
	}
	return nil
}

// DiscriminateAll discriminates every landscape alone at 1, 3 and 10% of
// its grid and every pair of them (receiver switches tuned apart) at 330,
// 1000 and 3300 evaluations, under both normalisations.
func DiscriminateAll(ls []*Landscape, seeds int) ([]DiscRow, error) {
	var rows []DiscRow
	norms := []string{NormFixed, NormEq14}
	for _, l := range ls {
		n := len(l.Tel)
		for _, norm := range norms {
			r, err := Discriminate(l, norm, []int{max(n/100, 1), max(3*n/100, 1), max(n/10, 1)}, seeds)
			if err != nil {
				return rows, fmt.Errorf("%s: %w", l.Scenario, err)
			}
			rows = append(rows, r)
		}
	}
	for i := range ls {
		for j := i + 1; j < len(ls); j++ {
			for _, norm := range norms {
				r, err := DiscriminatePair(ls[i], ls[j], norm, []int{330, 1000, 3300}, seeds)
				if err != nil {
					return rows, fmt.Errorf("%s+%s: %w", ls[i].Scenario, ls[j].Scenario, err)
				}
				rows = append(rows, r)
			}
		}
	}
	return rows, nil
}

// WriteDiscriminationFiles writes discrimination.txt and .json into dir,
// and the landscapes as landscape-SCENARIO.csv.gz (what tune
// discriminate and BenchmarkDiscriminate read).
func WriteDiscriminationFiles(dir string, rows []DiscRow, ls []*Landscape) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := WriteDiscrimination(&buf, rows); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "discrimination.txt"), buf.Bytes(), 0o644); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "discrimination.json"), b, 0o644); err != nil {
		return err
	}
	for _, l := range ls {
		if len(l.Tel) == 0 {
			continue
		}
		f, err := os.Create(filepath.Join(dir, "landscape-"+l.Scenario+".csv.gz"))
		if err != nil {
			return err
		}
		werr := WriteLandscape(f, l, time.Duration(l.Tel[0].Duration))
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return werr
		}
	}
	return nil
}
