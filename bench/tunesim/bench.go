package tunesim

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/rdma-appliance/appliance/internal/progress"
	"github.com/rdma-appliance/appliance/tuning"
)

// BenchOptions configure Bench: annealing with a budget against the
// exhaustive grid and the baselines on the simulator's scenarios.
type BenchOptions struct {
	Scenarios []string
	Evals     int // anneal's budget (the paper's 10% of the grid: 330)
	Seeds     int
	// Patience for the early-stopping run (0: Evals/3).
	Patience int
	// Duration of simulated time per evaluation (0: each scenario's).
	Duration time.Duration
	// Workers evaluate grid points in parallel.
	Workers int
	// Progress shows the grids' measurement and a line per finished
	// stage; nil shows nothing.
	Progress *progress.Meter
}

// MethodStats are one method's results over the seeds.
type MethodStats struct {
	Median float64   `json:"median"`
	Scores []float64 `json:"scores"`
	// Ratio is Median over the grid's best.
	Ratio float64 `json:"ratio"`
}

// BenchRow is one scenario's outcome. Scores are the fixed
// normalisation of the scenario's objective.
type BenchRow struct {
	Scenario    string                      `json:"scenario"`
	GridPoints  int                         `json:"grid_points"`
	GridBest    float64                     `json:"grid_best"`
	GridConfig  tuning.Watermark            `json:"grid_best_watermark"`
	GridSeconds float64                     `json:"grid_seconds"`
	Anneal      MethodStats                 `json:"anneal"`
	AnnealBest  tuning.Watermark            `json:"anneal_best_watermark"`
	Random      MethodStats                 `json:"random"`
	HillClimb   MethodStats                 `json:"hillclimb"`
	Baselines   map[string]float64          `json:"baselines"`
	EarlyStop   int                         `json:"early_stop_evals"`
	EarlyBest   float64                     `json:"early_stop_best"`
	Seconds     float64                     `json:"seconds"`
	Pass        bool                        `json:"pass"`
	Reason      string                      `json:"reason"`
	Extra       map[string]tuning.Watermark `json:"-"`
	// Landscape is the grid and the baselines as measured, for
	// Discriminate (written to landscape-SCENARIO.csv.gz).
	Landscape *Landscape `json:"-"`
}

// median of vs.
func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// say prints a line that stays on o.Progress.
func (o *BenchOptions) say(format string, args ...any) {
	o.Progress.Println(fmt.Sprintf(format, args...))
}

// Defaults fills what o leaves zero: 330 evaluations, 10 seeds, 2
// workers, patience Evals/3, every scenario.
func (o *BenchOptions) Defaults() {
	if o.Evals <= 0 {
		o.Evals = 330
	}
	if o.Seeds <= 0 {
		o.Seeds = 10
	}
	if o.Workers <= 0 {
		o.Workers = 2
	}
	if o.Patience <= 0 {
		o.Patience = o.Evals / 3
	}
	if len(o.Scenarios) == 0 {
		o.Scenarios = SimScenarioNames()
	}
}

// BenchAnneal is the annealing setting the bench uses: the paper's
// parameters with the schedule cooled within the budget and without
// line 7's second measurement of x (the simulator is deterministic, so it
// would only repeat f(x); on a live network keep it).
func BenchAnneal(evals int) tuning.AnnealParams {
	p := tuning.PaperAnneal()
	p.Remeasure = false
	return p.ForBudget(evals)
}

// Bench runs each scenario: the whole 3300-point grid, then annealing,
// random search and the hill climb with evals evaluations for every
// seed, an annealing run with early stopping, and every baseline.
// Evaluations of a configuration are memoised (the simulator is
// deterministic), so the methods cost little once the grid has run.
func Bench(ctx context.Context, o BenchOptions) ([]BenchRow, error) {
	o.Defaults()
	say := o.say
	scs, err := benchScenarios(o)
	if err != nil {
		return nil, err
	}
	var rows []BenchRow
	for _, sc := range scs {
		row, err := benchScenario(ctx, sc, o, say)
		if err != nil {
			return rows, fmt.Errorf("bench: %s: %w", sc.Name, err)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// BenchShard is part I of N of the bench's grids: the points whose number
// over every scenario's grid, in order, is I modulo N. Shards run
// anywhere (a batch system's array jobs); BenchMerge finishes the bench
// from their measurements.
type BenchShard struct{ I, N int }

// benchScenarios resolves o's scenarios, with o's duration.
func benchScenarios(o BenchOptions) ([]SimScenario, error) {
	var out []SimScenario
	for _, name := range o.Scenarios {
		sc, ok := SimScenarios()[name]
		if !ok {
			return nil, fmt.Errorf("bench: scenario %q: %s", name, scenarioList())
		}
		if o.Duration > 0 {
			sc.Duration = o.Duration
		}
		out = append(out, sc)
	}
	return out, nil
}

// BenchGrid measures shard sh of the scenarios' grids.
func BenchGrid(ctx context.Context, o BenchOptions, sh BenchShard) ([]GridEntry, error) {
	o.Defaults()
	if sh.N < 1 || sh.I < 0 || sh.I >= sh.N {
		return nil, fmt.Errorf("bench: shard %d/%d", sh.I, sh.N)
	}
	scs, err := benchScenarios(o)
	if err != nil {
		return nil, err
	}
	var out []GridEntry
	k := 0
	for _, sc := range scs {
		g := newBenchGrid(sc)
		var idx []int
		for i := range g.pts {
			if (k+i)%sh.N == sh.I {
				idx = append(idx, i)
			}
		}
		k += len(g.pts)
		es, err := g.measure(ctx, o, idx)
		if err != nil {
			return out, fmt.Errorf("bench: %s: %w", sc.Name, err)
		}
		out = append(out, es...)
	}
	return out, nil
}

// BenchMerge is Bench on grids that BenchGrid's shards measured: the
// methods and baselines run against them (the baselines simulate, a few
// runs a scenario). Every point of every scenario's grid must be there
// once, measured for the scenario's duration.
func BenchMerge(ctx context.Context, o BenchOptions, entries []GridEntry) ([]BenchRow, error) {
	o.Defaults()
	scs, err := benchScenarios(o)
	if err != nil {
		return nil, err
	}
	say := o.say
	by := map[string][]GridEntry{}
	for _, e := range entries {
		by[e.Scenario] = append(by[e.Scenario], e)
	}
	var rows []BenchRow
	for _, sc := range scs {
		g := newBenchGrid(sc)
		es := by[sc.Name]
		delete(by, sc.Name)
		seen := make([]bool, len(g.pts))
		var secs float64
		for _, e := range es {
			if e.Point < 0 || e.Point >= len(g.pts) || seen[e.Point] {
				return rows, fmt.Errorf("bench: %s: point %d twice or out of the grid's %d", sc.Name, e.Point, len(g.pts))
			}
			if e.Telemetry.Duration != int64(sc.Duration) {
				return rows, fmt.Errorf("bench: %s: point %d was measured for %v, the bench runs %v (--duration)", sc.Name, e.Point,
					time.Duration(e.Telemetry.Duration), sc.Duration)
			}
			seen[e.Point] = true
			secs += e.Seconds
		}
		if len(es) != len(g.pts) {
			return rows, fmt.Errorf("bench: %s: the shards hold %d of the grid's %d points: a shard is missing", sc.Name, len(es), len(g.pts))
		}
		row, err := g.finish(ctx, o, es, secs, say)
		if err != nil {
			return rows, fmt.Errorf("bench: %s: %w", sc.Name, err)
		}
		rows = append(rows, row)
	}
	for name := range by {
		return rows, fmt.Errorf("bench: the shards measured scenario %s, which this merge does not run (--scenarios)", name)
	}
	return rows, nil
}

func benchScenario(ctx context.Context, sc SimScenario, o BenchOptions, say func(string, ...any)) (BenchRow, error) {
	t0 := time.Now()
	g := newBenchGrid(sc)
	all := make([]int, len(g.pts))
	for i := range all {
		all[i] = i
	}
	entries, err := g.measure(ctx, o, all)
	if err != nil {
		return BenchRow{Scenario: sc.Name}, err
	}
	return g.finish(ctx, o, entries, time.Since(t0).Seconds(), say)
}

// benchGrid is one scenario's grid: its space, points, objective and
// the memo cache its methods draw on.
type benchGrid struct {
	sc    SimScenario
	space tuning.Space
	obj   tuning.Objective
	pts   []tuning.Point
	cache *tuning.MemoCache
}

func newBenchGrid(sc SimScenario) *benchGrid {
	g := &benchGrid{sc: sc, space: tuning.PaperSpace(sc.Scopes...), obj: sc.Objective, cache: tuning.NewMemoCache()}
	g.obj.Norm = tuning.Fixed
	g.space.Enumerate(func(p tuning.Point) bool { g.pts = append(g.pts, p); return true })
	return g
}

func (g *benchGrid) newTarget() (tuning.Target, error) {
	st, err := NewSimTarget(g.sc)
	if err != nil {
		return nil, err
	}
	return g.cache.Wrap(st), nil
}

// GridEntry is one grid point's measurement: what a shard of the bench
// (tune bench --shard) writes, and what the merge rebuilds the grid from.
type GridEntry struct {
	Scenario  string           `json:"scenario"`
	Point     int              `json:"point"`
	Score     float64          `json:"score"`
	Seconds   float64          `json:"seconds"` // its simulation's wall time
	Telemetry tuning.Telemetry `json:"telemetry"`
}

// measure simulates the grid points idx, split over the workers (each
// owns a simulator).
func (g *benchGrid) measure(ctx context.Context, o BenchOptions, idx []int) ([]GridEntry, error) {
	sc := g.sc
	out := make([]GridEntry, len(idx))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	done := 0
	for w := range o.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tg, err := NewSimTarget(sc)
			if err != nil {
				mu.Lock()
				firstErr = err
				mu.Unlock()
				return
			}
			for j := w; j < len(idx); j += o.Workers {
				if ctx.Err() != nil {
					return
				}
				c, _ := g.space.Config(g.pts[idx[j]])
				if err := tg.Apply(ctx, c); err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
				ts := time.Now()
				tel, err := tg.Measure(ctx, sc.Duration)
				e := GridEntry{Scenario: sc.Name, Point: idx[j], Seconds: time.Since(ts).Seconds(), Telemetry: tel}
				if err == nil {
					e.Score, err = g.obj.Score(tel, nil)
				}
				out[j] = e
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				done++
				o.Progress.Update(int64(done), int64(len(idx)), sc.Name+" grid")
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return out, ctx.Err()
}

// finish takes the whole grid's measurements into the memo cache, then
// runs the methods and the baselines and scores them.
func (g *benchGrid) finish(ctx context.Context, o BenchOptions, entries []GridEntry, gridSeconds float64,
	say func(string, ...any)) (BenchRow, error) {
	t0 := time.Now()
	sc, space, obj := g.sc, g.space, g.obj
	row := BenchRow{Scenario: sc.Name, Baselines: map[string]float64{}, GridPoints: len(g.pts)}
	if len(entries) != len(g.pts) {
		return row, fmt.Errorf("%d of the grid's %d points measured", len(entries), len(g.pts))
	}
	scores := make([]float64, len(g.pts))
	for _, e := range entries {
		c, err := space.Config(g.pts[e.Point])
		if err != nil {
			return row, err
		}
		if err := g.cache.Put(c, sc.Duration, e.Telemetry); err != nil {
			return row, err
		}
		scores[e.Point] = e.Score
	}
	newTarget := g.newTarget
	best := 0
	for i, s := range scores {
		if s > scores[best] {
			best = i
		}
	}
	row.GridBest = scores[best]
	gc, _ := space.Config(g.pts[best])
	row.GridConfig = gc.Scopes[sc.Scopes[0]]
	row.GridSeconds = gridSeconds
	say("%s: grid best %.4f at %v (%.0f s)", sc.Name, row.GridBest, row.GridConfig, row.GridSeconds)

	run := func(method string, seed uint64, patience int) (tuning.Result, error) {
		tg, err := newTarget()
		if err != nil {
			return tuning.Result{}, err
		}
		opt, err := tuning.NewOptimizer(method, &space, seed, BenchAnneal(o.Evals), nil)
		if err != nil {
			return tuning.Result{}, err
		}
		tu := &tuning.Tuner{Space: &space, Objective: obj, Target: tg, Optimizer: opt, Budget: o.Evals, Patience: patience, Interval: sc.Duration}
		return tu.Run(ctx)
	}
	var bestAnneal tuning.Result
	for _, m := range []struct {
		name string
		into *MethodStats
	}{{"anneal", &row.Anneal}, {"random", &row.Random}, {"hillclimb", &row.HillClimb}} {
		for seed := range uint64(o.Seeds) {
			r, err := run(m.name, seed+1, 0)
			if err != nil {
				return row, err
			}
			m.into.Scores = append(m.into.Scores, r.BestFixed)
			if m.name == "anneal" && r.BestFixed >= bestAnneal.BestFixed {
				bestAnneal = r
			}
		}
		m.into.Median = median(m.into.Scores)
		m.into.Ratio = m.into.Median / row.GridBest
	}
	row.AnnealBest = bestAnneal.Best.Scopes[sc.Scopes[0]]
	er, err := run("anneal", 1, o.Patience)
	if err != nil {
		return row, err
	}
	row.EarlyStop, row.EarlyBest = er.Evaluations, er.BestFixed
	tg, err := newTarget()
	if err != nil {
		return row, err
	}
	bl := map[string]tuning.Telemetry{}
	for _, b := range tuning.Baselines(space.Cell, sc.Capacity, sc.RTT) {
		c := tuning.Uniform(space.Cell, b.W, sc.Scopes...)
		if err := tg.Apply(ctx, c); err != nil {
			return row, fmt.Errorf("baseline %s: %w", b.Name, err)
		}
		tel, err := tg.Measure(ctx, sc.Duration)
		if err != nil {
			return row, fmt.Errorf("baseline %s: %w", b.Name, err)
		}
		row.Baselines[b.Name], _ = obj.Score(tel, nil)
		bl[b.Name] = tel
	}
	if row.Landscape, err = NewLandscape(sc, entries, bl); err != nil {
		return row, err
	}
	row.Seconds = gridSeconds + time.Since(t0).Seconds()
	var fails []string
	if row.Anneal.Ratio < 0.99 {
		fails = append(fails, fmt.Sprintf("anneal median %.4f is %.2f%% of the grid's best", row.Anneal.Median, 100*row.Anneal.Ratio))
	}
	for _, n := range sortedKeys(row.Baselines) {
		if row.Anneal.Median <= row.Baselines[n] {
			fails = append(fails, fmt.Sprintf("baseline %s scores %.4f >= anneal %.4f", n, row.Baselines[n], row.Anneal.Median))
		}
	}
	row.Pass = len(fails) == 0
	row.Reason = strings.Join(fails, "; ")
	if row.Pass {
		row.Reason = fmt.Sprintf("anneal %.2f%% of the grid's best with %d of %d evaluations, above every baseline", 100*row.Anneal.Ratio, o.Evals, row.GridPoints)
	}
	hits, miss := g.cache.Stats()
	say("%s: anneal %.4f (%.2f%%), %d simulations, %d answered from memory, %.0f s", sc.Name, row.Anneal.Median, 100*row.Anneal.Ratio, miss, hits, row.Seconds)
	return row, nil
}

func sortedKeys(m map[string]float64) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// WriteBenchTable prints the rows as a table.
func WriteBenchTable(w io.Writer, rows []BenchRow, o BenchOptions) error {
	o.Defaults()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	names := tuning.BaselineNames()
	head := []string{"scenario", "grid best", fmt.Sprintf("anneal@%d", o.Evals), "% of grid", "random", "hillclimb", "early stop"}
	head = append(head, names...)
	head = append(head, "grid s", "verdict")
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, r := range rows {
		cells := []string{r.Scenario, fmt.Sprintf("%.4f", r.GridBest), fmt.Sprintf("%.4f", r.Anneal.Median),
			fmt.Sprintf("%.2f", 100*r.Anneal.Ratio), fmt.Sprintf("%.4f", r.Random.Median), fmt.Sprintf("%.4f", r.HillClimb.Median),
			fmt.Sprintf("%d: %.4f", r.EarlyStop, r.EarlyBest)}
		for _, n := range names {
			cells = append(cells, fmt.Sprintf("%.4f", r.Baselines[n]))
		}
		v := "PASS"
		if !r.Pass {
			v = "FAIL"
		}
		cells = append(cells, fmt.Sprintf("%.0f", r.GridSeconds), v)
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nScores: the scenario's objective (beta 0.5) under the fixed normalisation; medians over %d seeds.\n", o.Seeds)
	for _, r := range rows {
		fmt.Fprintf(w, "%s: grid best %v; anneal best %v; %s\n", r.Scenario, r.GridConfig, r.AnnealBest, r.Reason)
	}
	return nil
}

// WriteBench writes bench.txt and bench.json into dir.
func WriteBench(dir string, rows []BenchRow, o BenchOptions) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "bench.txt"))
	if err != nil {
		return err
	}
	werr := WriteBenchTable(f, rows, o)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return werr
	}
	b, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "bench.json"), b, 0o644)
}
