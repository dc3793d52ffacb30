package tuning

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Optimizer proposes points and learns their scores. Every optimizer is a
// state machine: Next says which point to evaluate, Tell hands in its
// score, and State/Restore move the whole machine (random generator
// included) through JSON, so a run saved after any evaluation resumes
// exactly where it stopped.
type Optimizer interface {
	// Name is the method ("anneal", "grid", "random", "hillclimb").
	Name() string
	// Next is the point to evaluate next; false once the method is done.
	Next() (Point, bool)
	// Tell gives the score of the point Next returned.
	Tell(f float64)
	// Best is the best point so far and its score (false before any).
	Best() (Point, float64, bool)
	State() (json.RawMessage, error)
	Restore(json.RawMessage) error
}

// NewOptimizer makes the named method on space s, seeded.
func NewOptimizer(name string, s *Space, seed uint64, ap AnnealParams, start Point) (Optimizer, error) {
	if start != nil && !s.Inside(start) {
		return nil, fmt.Errorf("start point %v is outside the space", start)
	}
	switch name {
	case "anneal", "":
		return NewAnneal(s, ap, seed, start)
	case "grid":
		return NewGrid(s), nil
	case "random":
		return NewRandom(s, seed), nil
	case "hillclimb":
		return NewHillClimb(s, seed, start), nil
	}
	return nil, fmt.Errorf("optimizer %q: anneal, grid, random or hillclimb", name)
}

// rng is a PCG generator whose state travels in JSON.
type rng struct {
	pcg *rand.PCG
	r   *rand.Rand
}

func newRNG(seed uint64) *rng {
	p := rand.NewPCG(seed, 0x6279746574756e65) // "bytetune"
	return &rng{pcg: p, r: rand.New(p)}
}

func (g *rng) MarshalJSON() ([]byte, error) {
	b, err := g.pcg.MarshalBinary()
	if err != nil {
		return nil, err
	}
	return json.Marshal(b)
}

func (g *rng) UnmarshalJSON(data []byte) error {
	var b []byte
	if err := json.Unmarshal(data, &b); err != nil {
		return err
	}
	if g.pcg == nil {
		g.pcg = rand.NewPCG(0, 0)
		g.r = rand.New(g.pcg)
	}
	return g.pcg.UnmarshalBinary(b)
}

func randomPoint(s *Space, r *rand.Rand) Point {
	p := make(Point, s.Dims())
	for d := range p {
		p[d] = r.IntN(s.Levels(d))
	}
	return p
}

// AnnealParams are Algorithm 1's inputs.
type AnnealParams struct {
	// I iterations per temperature, initial temperature Tem, target
	// temperature TemGoal, cooling coefficient C, initial search step S
	// (a fraction of each parameter's range).
	I       int     `json:"I"`
	Tem     float64 `json:"tem"`
	TemGoal float64 `json:"tem_goal"`
	C       float64 `json:"C"`
	S       float64 `json:"s"`
	// Remeasure evaluates the current point again at the start of every
	// iteration (Algorithm 1, line 7: on a live network f(x) drifts and
	// the history normalisation moves). It costs an evaluation per
	// iteration; a deterministic target needs no second look.
	Remeasure bool `json:"remeasure"`
	// Scale multiplies objective differences in the Metropolis test
	// (exp(Scale (f'-f) / tem) > rand). The paper does not give f's
	// units; its temperatures (100 down to 0.01) suit differences of a
	// few units, so objectives in [0, 1] are scaled by 100 (percentage
	// points). Zero means 1.
	Scale float64 `json:"scale,omitempty"`
	// Reheat is for online tuning, where the workload changes under the
	// tuner (the paper's Figure 11): once the schedule has cooled the
	// search goes on at tem_goal instead of the run ending, and when the
	// re-measurements of x (line 7) show the workload changed, the
	// temperature and step restart from tem and s at x and the best so
	// far restarts at x (it was the best of another workload). Reheat is
	// the smallest move that counts, as a fraction of f(x); ReheatSigma,
	// when set, also requires the move to exceed that many standard
	// deviations of the noise, measured from repeated re-measurements of
	// one configuration (see Drift); ReheatAfter is how many
	// re-measurements in a row must show the move (2 when 0). Both zero:
	// off, the run ends when cool, as Algorithm 1. Needs Remeasure.
	Reheat      float64 `json:"reheat,omitempty"`
	ReheatSigma float64 `json:"reheat_sigma,omitempty"`
	ReheatAfter int     `json:"reheat_after,omitempty"`
	// Samples is how many measurements (telemetry windows) each judgement
	// takes, of x at line 7 and of each proposal: their mean, or their
	// median with Median, is f. One window of a live fabric is noisy; k
	// of them cost k evaluations. 0 or 1: one.
	Samples int  `json:"samples,omitempty"`
	Median  bool `json:"median,omitempty"`
	// Hold (online) ends each schedule as Algorithm 1 ends: once the
	// temperature reaches tem_goal, x_best is applied and only
	// re-measured (line 7, for the drift test) until a changed workload
	// restarts the schedule from it. Off, the search goes on at tem_goal,
	// every other judgement a proposal. Not in the paper, which has no
	// online mode: there the run ends and x_best is deployed.
	Hold bool `json:"hold,omitempty"`
	// PhaseHistory (online) restarts Eq. 14/15's history normalisation
	// (T_max, Q_min) with the schedule: a reheat is a new run of
	// Algorithm 1 on a new workload, and the best throughput and
	// smallest queue of another workload are no yardstick for this one
	// (an incast's queue against a light phase's empty one scores 0 for
	// every configuration). The first judgement after it re-measures x
	// under the new history before any proposal is compared with it.
	// Off, the history runs over the whole run, as Eq. 14 is written.
	PhaseHistory bool `json:"phase_history,omitempty"`
	// ReheatTem (online), when positive, is the temperature a reheat
	// restarts at instead of tem. Algorithm 1's tem (100, objectives in
	// percentage points) accepts nearly every worse proposal for its
	// first temperatures: a random walk that a run of thousands of
	// iterations can afford and an online run, judged on every window,
	// cannot. The cooling coefficient stays, so the schedule is shorter.
	ReheatTem float64 `json:"reheat_tem,omitempty"`
	// Recall (online) makes a reheat's first proposals the points that
	// served earlier workloads (x at each earlier reheat, most recent
	// first, at most recallPoints): a workload that comes back finds its
	// configuration again in one judgement. Not in the paper.
	Recall bool `json:"recall,omitempty"`
	// Lean (online, with Hold) skips line 7 within a schedule: every
	// judgement is a proposal, compared with x's last judgement, and
	// only the held x_best is re-measured for the drift test. Twice the
	// proposals in a schedule's windows; a change during a schedule is
	// seen once it holds. Not in the paper.
	Lean bool `json:"lean,omitempty"`
}

// recallPoints is how many earlier workloads' points Recall keeps.
const recallPoints = 4

// online is whether the schedule restarts on a changed workload instead
// of ending.
func (p AnnealParams) online() bool { return p.Reheat > 0 || p.ReheatSigma > 0 }

func (p AnnealParams) samples() int { return max(p.Samples, 1) }

func (p AnnealParams) drift() *Drift {
	if !p.online() {
		return nil
	}
	return &Drift{Sigma: p.ReheatSigma, Floor: p.Reheat, After: max(p.ReheatAfter, 2)}
}

// ForBudget is p with the cooling coefficient chosen so the temperature
// reaches TemGoal when evals evaluations are spent: the paper's
// schedule (C = 0.99, I = 10) needs about 9,200 iterations to cool from
// 100 to 0.01, far beyond a budget of a few hundred evaluations, and a
// run cut off while still hot is a random walk.
func (p AnnealParams) ForBudget(evals int) AnnealParams {
	iters := float64(evals-1) / float64(p.samples())
	if p.Remeasure && !p.Lean {
		iters /= 2
	}
	steps := iters / float64(p.I)
	if steps >= 1 && p.Tem > p.TemGoal {
		p.C = math.Pow(p.TemGoal/p.Tem, 1/steps)
	}
	return p
}

// PaperAnneal is the paper's recommendation (Section 5.3): I = 10,
// tem = 100, tem_goal = 0.01, C = 0.99, s = 0.5, re-measuring x every
// iteration, with objectives in percentage points (Scale 100).
func PaperAnneal() AnnealParams {
	return AnnealParams{I: 10, Tem: 100, TemGoal: 0.01, C: 0.99, S: 0.5, Remeasure: true, Scale: 100}
}

// OnlineTuning is the online setting of Algorithm 1 (run files with
// online: true and 'tune online'): the paper's parameters with x
// re-measured every iteration (line 7), two iterations per temperature,
// each schedule cooled within 60 evaluations, and a reheat when three
// noise deviations (measured, see Drift) and 1% of f(x) separate two
// re-measurements in a row from x's earlier ones. Each judgement is the
// mean of two windows: fig11's 2-to-1 alternates high and low 8 ms
// windows (its closed-loop senders post every other period: lag-1
// autocorrelation -0.9 under every preset), and with one window each the
// re-measurements of x fell on the low windows and the proposals on the
// high ones, so every proposal looked better.
func OnlineTuning() AnnealParams {
	p := PaperAnneal()
	p.I, p.Reheat, p.ReheatSigma, p.ReheatAfter, p.Samples = 2, 0.01, 3, 2, 2
	return p.ForBudget(60)
}

// Validate checks the parameters.
func (a AnnealParams) Validate() error {
	switch {
	case a.I < 1:
		return fmt.Errorf("anneal: I %d: at least 1", a.I)
	case !(a.Tem > 0) || !(a.TemGoal > 0):
		return fmt.Errorf("anneal: temperatures %g, %g: positive", a.Tem, a.TemGoal)
	case !(a.C > 0 && a.C < 1):
		return fmt.Errorf("anneal: cooling coefficient %g: in (0, 1)", a.C)
	case !(a.S > 0 && a.S <= 1):
		return fmt.Errorf("anneal: step %g: in (0, 1]", a.S)
	case a.Reheat < 0 || math.IsNaN(a.Reheat):
		return fmt.Errorf("anneal: reheat %g: not negative", a.Reheat)
	case a.ReheatSigma < 0 || math.IsNaN(a.ReheatSigma):
		return fmt.Errorf("anneal: reheat sigma %g: not negative", a.ReheatSigma)
	case a.ReheatAfter < 0 || a.ReheatAfter > noisePairs:
		return fmt.Errorf("anneal: reheat after %d: 0 to %d", a.ReheatAfter, noisePairs)
	case a.Samples < 0 || a.Samples > 100:
		return fmt.Errorf("anneal: samples %d: 0 to 100", a.Samples)
	case a.online() && !a.Remeasure:
		return errors.New("anneal: reheat watches re-measurements of x: it needs remeasure")
	case (a.Hold || a.PhaseHistory || a.Recall || a.ReheatTem != 0) && !a.online():
		return errors.New("anneal: hold, phase history, recall and reheat temperature are online settings: they need reheat")
	case a.Lean && !a.Hold:
		return errors.New("anneal: lean re-measures x only while held: it needs hold")
	case a.ReheatTem < 0 || math.IsNaN(a.ReheatTem):
		return fmt.Errorf("anneal: reheat temperature %g: not negative", a.ReheatTem)
	}
	return nil
}

// Anneal phases: which line of Algorithm 1 the pending evaluation serves.
const (
	phaseInit    = "init"    // line 2: f(x) of the start point
	phaseCurrent = "current" // line 7: f(x) again
	phasePropose = "propose" // lines 8-9: f(x') of a perturbation
	phaseHold    = "hold"    // online, cooled: x_best held and re-measured
	phaseDone    = "done"
)

// Anneal is Algorithm 1 of the paper (simulated annealing with the
// halve-on-better, double-on-worse step and Metropolis acceptance).
type Anneal struct {
	space *Space
	st    annealState
}

type annealState struct {
	Params   AnnealParams `json:"params"`
	Phase    string       `json:"phase"`
	Pending  Point        `json:"pending"`
	X        Point        `json:"x"`
	FX       float64      `json:"fx"`
	BestX    Point        `json:"best_x"`
	FBest    float64      `json:"f_best"`
	Tem      float64      `json:"tem"`
	Iter     int          `json:"iter"`
	S        float64      `json:"s"`
	Accepted int          `json:"accepted_worse"`
	Reheats  int          `json:"reheats,omitempty"`
	// Drift judges the re-measurements of x online; Acc holds the
	// measurements of the pending point taken so far (Samples).
	Drift *Drift    `json:"drift,omitempty"`
	Acc   []float64 `json:"acc,omitempty"`
	// NewHistory is set by a reheat with PhaseHistory until the tuner
	// takes it (HistoryRestart).
	NewHistory bool `json:"new_history,omitempty"`
	// Served are the points x was at when earlier reheats came (Recall),
	// most recent first; Recall the ones still to propose.
	Served []Point `json:"served,omitempty"`
	Recall []Point `json:"recall,omitempty"`
	RNG    *rng    `json:"rng"`
}

// NewAnneal starts Algorithm 1 at start (a random point when nil).
func NewAnneal(s *Space, p AnnealParams, seed uint64, start Point) (*Anneal, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	g := newRNG(seed)
	if start == nil {
		start = randomPoint(s, g.r)
	}
	return &Anneal{space: s, st: annealState{Params: p, Phase: phaseInit, Pending: slices.Clone(start),
		Tem: p.Tem, S: p.S, Drift: p.drift(), RNG: g}}, nil
}

// Name is "anneal".
func (a *Anneal) Name() string { return "anneal" }

// Next is the pending evaluation.
func (a *Anneal) Next() (Point, bool) {
	if a.st.Phase == phaseDone {
		return nil, false
	}
	return slices.Clone(a.st.Pending), true
}

// startIteration begins an inner iteration (line 6) or ends the run.
func (a *Anneal) startIteration() {
	st := &a.st
	if st.Tem <= st.Params.TemGoal {
		if !st.Params.online() {
			st.Phase = phaseDone
			return
		}
		// Online there is no end: the search goes on at the goal
		// temperature (almost only improvements accepted) and line 7
		// keeps watching f(x), or (Hold) x_best is held and watched.
		st.Tem = st.Params.TemGoal
		if st.Params.Hold {
			if !slices.Equal(st.X, st.BestX) {
				a.move(slices.Clone(st.BestX), st.FBest)
			}
			st.Phase, st.Pending = phaseHold, slices.Clone(st.X)
			return
		}
	}
	if st.Params.Remeasure && !st.Params.Lean {
		st.Phase, st.Pending = phaseCurrent, slices.Clone(st.X)
		return
	}
	st.Phase, st.Pending = phasePropose, a.perturb(st.X)
}

// Tell advances the algorithm by one evaluation. With Samples above one
// the pending point stays pending until its last measurement, and the
// algorithm sees their mean (or median).
func (a *Anneal) Tell(f float64) {
	st := &a.st
	if k := st.Params.samples(); k > 1 {
		st.Acc = append(st.Acc, f)
		if len(st.Acc) < k {
			return
		}
		f = aggregate(st.Acc, st.Params.Median)
		st.Acc = st.Acc[:0]
	}
	switch st.Phase {
	case phaseInit: // lines 2-4
		st.X, st.FX = st.Pending, f
		st.BestX, st.FBest = slices.Clone(st.Pending), f
		st.Iter = 0
		a.startIteration()
	case phaseHold:
		if a.watch(f) && !st.NewHistory {
			a.startIteration()
		}
	case phaseCurrent: // line 7
		if a.watch(f) && st.NewHistory {
			// x's next judgement is under the new history.
			return
		}
		if st.Drift != nil && st.Drift.Run > 0 {
			// f(x) moved past the noise once: look at x again before
			// proposing, or an accepted proposal (after a drop nearly
			// any point is "better") would start a new reference and
			// the change would never be confirmed.
			return
		}
		st.Phase, st.Pending = phasePropose, a.perturb(st.X)
	case phasePropose: // lines 10-21
		xp := st.Pending
		if f-st.FX >= 0 {
			a.move(xp, f)
			st.S /= 2
			if f-st.FBest >= 0 {
				st.BestX, st.FBest = slices.Clone(xp), f
			}
		} else {
			st.S *= 2
			scale := st.Params.Scale
			if scale == 0 {
				scale = 1
			}
			if math.Exp(scale*(f-st.FX)/st.Tem) > st.RNG.r.Float64() {
				a.move(xp, f)
				st.Accepted++
			}
		}
		// The step is a fraction of each range: below one level it
		// would stop moving, above the whole range it only clips.
		st.S = min(max(st.S, 1.0/1024), 1)
		st.Iter++
		if st.Iter >= st.Params.I { // line 23
			st.Iter = 0
			st.Tem *= st.Params.C
		}
		a.startIteration()
	}
}

// move makes xp, measured f, the current point; its re-measurements
// start a new drift reference.
func (a *Anneal) move(xp Point, f float64) {
	st := &a.st
	if st.Drift != nil && !slices.Equal(xp, st.X) {
		if f >= st.FX {
			st.Drift.Improved()
		} else {
			st.Drift.Rebase()
		}
	}
	st.X, st.FX = xp, f
}

// aggregate is the mean of v, or its median.
func aggregate(v []float64, median bool) float64 {
	if median {
		s := slices.Clone(v)
		slices.Sort(s)
		n := len(s)
		if n%2 == 1 {
			return s[n/2]
		}
		return (s[n/2-1] + s[n/2]) / 2
	}
	sum := 0.0
	for _, x := range v {
		sum += x
	}
	return sum / float64(len(v))
}

// watch takes a re-measurement f of x and, online, reheats when the drift
// test says the workload changed; it reports a reheat.
func (a *Anneal) watch(f float64) bool {
	st := &a.st
	st.FX = f
	if st.Drift == nil {
		return false
	}
	if slices.Equal(st.X, st.BestX) {
		// Online the latest judgement of a point is its value: an old,
		// higher one would hold the best against every later proposal.
		st.FBest = f
	}
	if !st.Drift.Observe(f) {
		return false
	}
	st.Tem, st.S, st.Iter = st.Params.Tem, st.Params.S, 0
	if st.Params.ReheatTem > 0 {
		st.Tem = st.Params.ReheatTem
	}
	if st.Params.Recall {
		st.Recall = st.Recall[:0]
		for _, p := range st.Served {
			if !slices.Equal(p, st.X) {
				st.Recall = append(st.Recall, slices.Clone(p))
			}
		}
		served := []Point{slices.Clone(st.X)}
		for _, p := range st.Served {
			if !slices.Equal(p, st.X) && len(served) < recallPoints {
				served = append(served, p)
			}
		}
		st.Served = served
	}
	st.BestX, st.FBest = slices.Clone(st.X), f
	st.Reheats++
	if st.Params.PhaseHistory {
		// The scores to come are on the new history's scale: x is
		// judged again first, and the drift test starts a new
		// reference (its noise estimate stays: the fabric's).
		st.NewHistory = true
		st.Drift.Rebase()
		st.Phase, st.Pending = phaseCurrent, slices.Clone(st.X)
	}
	return true
}

// HistoryRestart reports, once, that a reheat restarted the history
// normalisation (PhaseHistory): the tuner empties its history.
func (a *Anneal) HistoryRestart() bool {
	r := a.st.NewHistory
	a.st.NewHistory = false
	return r
}

// Reheats is how many times an online run restarted its schedule.
func (a *Anneal) Reheats() int { return a.st.Reheats }

// perturb moves some dimensions by up to s of their range, uniformly,
// and at least one dimension by one level so no evaluation is spent on
// the point itself.
func (a *Anneal) perturb(x Point) Point {
	if n := len(a.st.Recall); n > 0 {
		p := a.st.Recall[0]
		a.st.Recall = a.st.Recall[1:]
		return p
	}
	r := a.st.RNG.r
	p := slices.Clone(x)
	moved := false
	for d := range p {
		n := a.space.Levels(d) - 1
		if n == 0 {
			continue
		}
		// Each parameter moves with probability 1/dims (and one at
		// least, below), so a step explores around x instead of
		// jumping in every dimension at once: with the step doubled on
		// every worse proposal, s sits near the whole range most of the
		// time and moving all parameters together made the search a
		// random one.
		if r.IntN(a.space.Dims()) != 0 {
			continue
		}
		delta := int(math.Round((2*r.Float64() - 1) * a.st.S * float64(n)))
		p[d] = min(max(p[d]+delta, 0), n)
		moved = moved || p[d] != x[d]
	}
	if !moved {
		var dims []int
		for d := range p {
			if a.space.Levels(d) > 1 {
				dims = append(dims, d)
			}
		}
		if len(dims) > 0 {
			d := dims[r.IntN(len(dims))]
			step := 1
			if r.IntN(2) == 0 {
				step = -1
			}
			if p[d]+step < 0 || p[d]+step >= a.space.Levels(d) {
				step = -step
			}
			p[d] += step
		}
	}
	return p
}

// Judging is what the pending evaluation measures: "init" (the start
// point), "current" (x again, line 7), "propose" (a perturbation),
// "hold" (x_best, cooled, online) or "done".
func (a *Anneal) Judging() string { return a.st.Phase }

// Best is x_best.
func (a *Anneal) Best() (Point, float64, bool) {
	return slices.Clone(a.st.BestX), a.st.FBest, a.st.BestX != nil
}

// Temperature and Step are the current tem and s (reports).
func (a *Anneal) Temperature() float64 { return a.st.Tem }

// Step is the current search step.
func (a *Anneal) Step() float64 { return a.st.S }

// State is the machine as JSON.
func (a *Anneal) State() (json.RawMessage, error) { return json.Marshal(&a.st) }

// Restore loads a State.
func (a *Anneal) Restore(b json.RawMessage) error {
	var st annealState
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("anneal state: %w", err)
	}
	if err := st.Params.Validate(); err != nil {
		return err
	}
	if st.Phase != phaseDone && !a.space.Inside(st.Pending) {
		return errors.New("anneal state: its pending point does not fit this space")
	}
	if st.RNG == nil {
		return errors.New("anneal state: no random generator state")
	}
	if !a.space.insideOrNil(st.X) || !a.space.insideOrNil(st.BestX) || !a.space.allInside(st.Served) || !a.space.allInside(st.Recall) {
		return errors.New("anneal state: its points do not fit this space")
	}
	if st.Drift == nil {
		st.Drift = st.Params.drift()
	}
	a.st = st
	return nil
}

// Grid evaluates every point of the space in order.
type Grid struct {
	space *Space
	st    gridState
}

type gridState struct {
	Next  int     `json:"next"`
	Total int     `json:"total"`
	BestX Point   `json:"best_x"`
	FBest float64 `json:"f_best"`
}

// NewGrid walks s point by point (the last dimension fastest).
func NewGrid(s *Space) *Grid {
	return &Grid{space: s, st: gridState{Total: int(min(s.Size(), math.MaxInt32))}}
}

// Name is "grid".
func (g *Grid) Name() string { return "grid" }

func (g *Grid) point(i int) Point {
	n := g.space.Dims()
	p := make(Point, n)
	for d := n - 1; d >= 0; d-- {
		l := g.space.Levels(d)
		p[d] = i % l
		i /= l
	}
	return p
}

// Next is the next grid point.
func (g *Grid) Next() (Point, bool) {
	if g.st.Next >= g.st.Total {
		return nil, false
	}
	return g.point(g.st.Next), true
}

// Tell records the score.
func (g *Grid) Tell(f float64) {
	if g.st.BestX == nil || f > g.st.FBest {
		g.st.BestX, g.st.FBest = g.point(g.st.Next), f
	}
	g.st.Next++
}

// Best is the best point so far.
func (g *Grid) Best() (Point, float64, bool) {
	return slices.Clone(g.st.BestX), g.st.FBest, g.st.BestX != nil
}

// State is the walk's position as JSON.
func (g *Grid) State() (json.RawMessage, error) { return json.Marshal(&g.st) }

// Restore loads a State.
func (g *Grid) Restore(b json.RawMessage) error {
	var st gridState
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("grid state: %w", err)
	}
	if st.Total != g.st.Total {
		return fmt.Errorf("grid state: %d points, this space has %d", st.Total, g.st.Total)
	}
	if st.Next < 0 || st.Next > st.Total || !g.space.insideOrNil(st.BestX) {
		return fmt.Errorf("grid state: next point %d of %d, best %v: not of this space", st.Next, st.Total, st.BestX)
	}
	g.st = st
	return nil
}

// Random samples points uniformly, without repeating one while unseen
// points are easy to find.
type Random struct {
	space *Space
	st    randomState
}

type randomState struct {
	Pending Point           `json:"pending"`
	Seen    map[string]bool `json:"seen"`
	BestX   Point           `json:"best_x"`
	FBest   float64         `json:"f_best"`
	RNG     *rng            `json:"rng"`
}

// NewRandom samples s with seed.
func NewRandom(s *Space, seed uint64) *Random {
	r := &Random{space: s, st: randomState{Seen: map[string]bool{}, RNG: newRNG(seed)}}
	r.draw()
	return r
}

func (r *Random) draw() {
	for range 100 {
		p := randomPoint(r.space, r.st.RNG.r)
		if !r.st.Seen[p.Key()] {
			r.st.Pending = p
			return
		}
	}
	r.st.Pending = randomPoint(r.space, r.st.RNG.r)
}

// Name is "random".
func (r *Random) Name() string { return "random" }

// Next is the pending sample (random search never finishes by itself).
func (r *Random) Next() (Point, bool) { return slices.Clone(r.st.Pending), true }

// Tell records the score and draws the next sample.
func (r *Random) Tell(f float64) {
	if r.st.BestX == nil || f > r.st.FBest {
		r.st.BestX, r.st.FBest = slices.Clone(r.st.Pending), f
	}
	r.st.Seen[r.st.Pending.Key()] = true
	r.draw()
}

// Best is the best sample so far.
func (r *Random) Best() (Point, float64, bool) {
	return slices.Clone(r.st.BestX), r.st.FBest, r.st.BestX != nil
}

// State is the sampler as JSON.
func (r *Random) State() (json.RawMessage, error) { return json.Marshal(&r.st) }

// Restore loads a State.
func (r *Random) Restore(b json.RawMessage) error {
	var st randomState
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("random state: %w", err)
	}
	if st.RNG == nil || !r.space.Inside(st.Pending) || !r.space.insideOrNil(st.BestX) {
		return errors.New("random state: does not fit this space")
	}
	if st.Seen == nil {
		st.Seen = map[string]bool{}
	}
	r.st = st
	return nil
}

// HillClimb is the adaptive-step hill climb of the authors' public code,
// the comparator the paper's algorithm replaced: from the current point
// try one parameter moved by the step (in levels) in a random direction;
// keep it only if it is better and double the step, otherwise halve it;
// when the step falls below one level, restart from a random point.
type HillClimb struct {
	space *Space
	st    hillState
}

type hillState struct {
	Phase   string  `json:"phase"`
	Pending Point   `json:"pending"`
	X       Point   `json:"x"`
	FX      float64 `json:"fx"`
	Step    float64 `json:"step"`
	BestX   Point   `json:"best_x"`
	FBest   float64 `json:"f_best"`
	RNG     *rng    `json:"rng"`
}

func (h *HillClimb) initialStep() float64 {
	m := 1
	for d := range h.space.Dims() {
		m = max(m, h.space.Levels(d))
	}
	return float64(m) / 4
}

// NewHillClimb starts at start (random when nil).
func NewHillClimb(s *Space, seed uint64, start Point) *HillClimb {
	h := &HillClimb{space: s, st: hillState{Phase: phaseInit, RNG: newRNG(seed)}}
	if start == nil {
		start = randomPoint(s, h.st.RNG.r)
	}
	h.st.Pending = slices.Clone(start)
	h.st.Step = h.initialStep()
	return h
}

// Name is "hillclimb".
func (h *HillClimb) Name() string { return "hillclimb" }

// Next is the pending evaluation.
func (h *HillClimb) Next() (Point, bool) { return slices.Clone(h.st.Pending), true }

func (h *HillClimb) neighbour() Point {
	r := h.st.RNG.r
	p := slices.Clone(h.st.X)
	var dims []int
	for d := range p {
		if h.space.Levels(d) > 1 {
			dims = append(dims, d)
		}
	}
	if len(dims) == 0 {
		return p
	}
	d := dims[r.IntN(len(dims))]
	step := max(int(math.Round(h.st.Step)), 1)
	if r.IntN(2) == 0 {
		step = -step
	}
	n := h.space.Levels(d) - 1
	if p[d]+step < 0 || p[d]+step > n {
		step = -step
	}
	p[d] = min(max(p[d]+step, 0), n)
	return p
}

// Tell advances the climb.
func (h *HillClimb) Tell(f float64) {
	st := &h.st
	if st.BestX == nil || f > st.FBest {
		st.BestX, st.FBest = slices.Clone(st.Pending), f
	}
	switch st.Phase {
	case phaseInit:
		st.X, st.FX = st.Pending, f
	default:
		if f > st.FX {
			st.X, st.FX = st.Pending, f
			st.Step = min(st.Step*2, h.initialStep()*2)
		} else {
			st.Step /= 2
		}
	}
	if st.Step < 0.5 {
		st.Phase = phaseInit
		st.Step = h.initialStep()
		st.Pending = randomPoint(h.space, st.RNG.r)
		return
	}
	st.Phase = phasePropose
	st.Pending = h.neighbour()
}

// Best is the best point so far.
func (h *HillClimb) Best() (Point, float64, bool) {
	return slices.Clone(h.st.BestX), h.st.FBest, h.st.BestX != nil
}

// State is the climb as JSON.
func (h *HillClimb) State() (json.RawMessage, error) { return json.Marshal(&h.st) }

// Restore loads a State.
func (h *HillClimb) Restore(b json.RawMessage) error {
	var st hillState
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("hill climb state: %w", err)
	}
	if st.RNG == nil || !h.space.Inside(st.Pending) || !h.space.insideOrNil(st.X) || !h.space.insideOrNil(st.BestX) {
		return errors.New("hill climb state: does not fit this space")
	}
	h.st = st
	return nil
}
