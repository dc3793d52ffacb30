package tuning

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// bowl is a deterministic target whose throughput peaks at Kmin 3000,
// Pmax 20, alpha 11, headroom 300, and whose queue grows with Kmin.
type bowl struct {
	c     Config
	calls int
	// failAt makes Measure fail at that call (1-based) with err.
	failAt int
	err    error
}

func (b *bowl) Apply(_ context.Context, c Config) error { b.c = c; return nil }

func (b *bowl) Measure(_ context.Context, d time.Duration) (Telemetry, error) {
	b.calls++
	if b.failAt > 0 && b.calls >= b.failAt {
		return Telemetry{}, b.err
	}
	w := b.c.Scopes["leaf"]
	dk := (float64(w.Kmin) - 3000) / 5000
	dp := (w.Pmax - 20) / 90
	da := (w.Alpha - 11) / 20
	dh := (float64(w.Headroom) - 300) / 500
	tput := 25e9 * (1 - dk*dk - dp*dp - da*da - dh*dh)
	return Telemetry{Duration: int64(time.Millisecond), Switches: []SwitchStats{{Name: "leaf1", Ports: []PortStats{
		{Port: 0, Capacity: 25e9, Throughput: tput, QueueMean: float64(w.Kmin) * 10}}}}}, nil
}

func fixedObj() Objective {
	o := DefaultObjective()
	o.Norm = Fixed
	o.Beta = 0.9
	return o
}

func TestAnnealFindsBowlTop(t *testing.T) {
	s := PaperSpace("leaf")
	// The exhaustive answer first.
	g := &Tuner{Space: &s, Objective: fixedObj(), Target: &bowl{}, Optimizer: NewGrid(&s)}
	gr, err := g.Run(context.Background())
	if err != nil || gr.Stopped != StopFinished || gr.Evaluations != 3300 {
		t.Fatalf("grid: %v, %+v", err, gr.Stopped)
	}
	// The simulator-like target is deterministic: line 7's second look
	// at x would only repeat f(x), so it is not spent; the schedule
	// cools within the budget.
	p := PaperAnneal()
	p.Remeasure = false
	p = p.ForBudget(330)
	for seed := range uint64(5) {
		a, err := NewAnneal(&s, p, seed, nil)
		if err != nil {
			t.Fatal(err)
		}
		tu := &Tuner{Space: &s, Objective: fixedObj(), Target: &bowl{}, Optimizer: a, Budget: 330}
		r, err := tu.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if r.Evaluations != 330 || r.Stopped != StopBudget {
			t.Fatalf("seed %d: %d evaluations, stopped: %s", seed, r.Evaluations, r.Stopped)
		}
		if r.BestFixed < 0.99*gr.BestFixed {
			t.Errorf("seed %d: anneal best %.4f, grid %.4f", seed, r.BestFixed, gr.BestFixed)
		}
		// Best-so-far never falls.
		for i := 1; i < len(r.Records); i++ {
			if r.Records[i].Best < r.Records[i-1].Best {
				t.Fatalf("best fell at evaluation %d", i+1)
			}
		}
	}
}

// Algorithm 1's rules, step by step: accept better and halve the step,
// double on worse and accept by Metropolis.
func TestAnnealRules(t *testing.T) {
	s := PaperSpace("leaf")
	p := PaperAnneal()
	p.Remeasure = false
	p.Tem = 1e-9 // frozen: worse is never accepted
	p.TemGoal = 1e-12
	a, err := NewAnneal(&s, p, 1, Point{5, 5, 3, 2})
	if err != nil {
		t.Fatal(err)
	}
	a.Tell(1) // f(x0)
	x0 := a.st.X
	if _, ok := a.Next(); !ok || a.st.Phase != phasePropose {
		t.Fatal("not proposing after the start")
	}
	a.Tell(0.5) // worse
	if !reflect.DeepEqual(a.st.X, x0) || a.st.S != 1 {
		t.Fatalf("worse at frozen temperature: x %v s %g; want x kept, s doubled to 1", a.st.X, a.st.S)
	}
	xp, _ := a.Next()
	a.Tell(2) // better
	if !reflect.DeepEqual(a.st.X, xp) || a.st.S != 0.5 || a.st.FBest != 2 || !reflect.DeepEqual(a.st.BestX, xp) {
		t.Fatalf("better: x %v s %g best %g", a.st.X, a.st.S, a.st.FBest)
	}
	// Hot: worse moves are taken (exp(-0.5/1e9) > any rand).
	p.Tem, p.TemGoal = 1e9, 1
	h, _ := NewAnneal(&s, p, 1, Point{5, 5, 3, 2})
	h.Tell(1)
	xp, _ = h.Next()
	h.Tell(0.5)
	if !reflect.DeepEqual(h.st.X, xp) || h.st.FX != 0.5 || h.st.FBest != 1 || h.st.Accepted != 1 {
		t.Fatalf("hot worse move not accepted: %+v", h.st)
	}
	// Cooling: after I proposals the temperature drops by C.
	p = PaperAnneal()
	p.Remeasure = false
	c, _ := NewAnneal(&s, p, 1, nil)
	c.Tell(0)
	for range p.I {
		c.Tell(0)
	}
	if math.Abs(c.st.Tem-100*0.99) > 1e-9 {
		t.Fatalf("temperature %g after %d iterations, want 99", c.st.Tem, p.I)
	}
	// With line 7, every iteration spends one evaluation on x.
	p.Remeasure = true
	r, _ := NewAnneal(&s, p, 1, nil)
	r.Tell(0)
	for i := range 2 * p.I {
		want := phaseCurrent
		if i%2 == 1 {
			want = phasePropose
		}
		if r.st.Phase != want {
			t.Fatalf("evaluation %d: phase %s, want %s", i, r.st.Phase, want)
		}
		r.Tell(0)
	}
	if math.Abs(r.st.Tem-99) > 1e-9 {
		t.Fatalf("remeasuring: temperature %g after %d evaluations", r.st.Tem, 2*p.I)
	}
}

// A run stopped halfway and resumed from its state file ends exactly as
// an uninterrupted run.
func TestResume(t *testing.T) {
	s := PaperSpace("leaf")
	for _, m := range []string{"anneal", "random", "hillclimb", "grid"} {
		run := func(budget int, file string) Result {
			o, err := NewOptimizer(m, &s, 7, PaperAnneal(), nil)
			if err != nil {
				t.Fatal(err)
			}
			tu := &Tuner{Space: &s, Objective: DefaultObjective(), Target: &bowl{}, Optimizer: o, Budget: budget, StateFile: file}
			r, err := tu.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		whole := run(120, "")
		file := filepath.Join(t.TempDir(), "state.json")
		half := run(50, file)
		if half.Evaluations != 50 {
			t.Fatalf("%s: first half ran %d", m, half.Evaluations)
		}
		rest := run(120, file)
		if !reflect.DeepEqual(whole.Records, rest.Records) || !reflect.DeepEqual(whole.BestPoint, rest.BestPoint) {
			t.Errorf("%s: resumed run differs from the whole run", m)
		}
	}
}

func TestEarlyStop(t *testing.T) {
	s := PaperSpace("leaf")
	a, _ := NewAnneal(&s, PaperAnneal(), 3, nil)
	tu := &Tuner{Space: &s, Objective: fixedObj(), Target: &bowl{}, Optimizer: a, Budget: 3300, Patience: 40}
	r, err := tu.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.Stopped, StopEarly) || r.Evaluations >= 3300 {
		t.Fatalf("stopped %q after %d", r.Stopped, r.Evaluations)
	}
	last := 0
	for _, rec := range r.Records {
		if rec.Eval == 1 || rec.Best > r.Records[last].Best {
			last = rec.Eval - 1
		}
	}
	if r.Evaluations-(last+1) != 40 {
		t.Errorf("stopped %d evaluations after the last improvement, want 40", r.Evaluations-(last+1))
	}
}

// Telemetry that stops arriving or an unreachable switch ends the run
// with the best so far saved and the reason given.
func TestStopsOnBadTelemetry(t *testing.T) {
	s := PaperSpace("leaf")
	for _, c := range []struct {
		err  error
		want string
	}{
		{ErrNoTelemetry, "telemetry stopped arriving"},
		{context.DeadlineExceeded, "telemetry stopped arriving"},
		{errors.Join(ErrUnreachable, errors.New("leaf1: connection refused")), "unreachable"},
	} {
		file := filepath.Join(t.TempDir(), "state.json")
		a, _ := NewAnneal(&s, PaperAnneal(), 1, nil)
		tu := &Tuner{Space: &s, Objective: fixedObj(), Target: &bowl{failAt: 11, err: c.err}, Optimizer: a, Budget: 100, StateFile: file}
		r, err := tu.Run(context.Background())
		if err == nil || !strings.Contains(r.Stopped, c.want) {
			t.Fatalf("%v: err %v, stopped %q", c.err, err, r.Stopped)
		}
		if r.Evaluations != 10 || r.Best.Scopes == nil {
			t.Fatalf("%d evaluations, best %v", r.Evaluations, r.Best)
		}
		st, err := LoadState(file)
		if err != nil || len(st.Records) != 10 || !strings.Contains(st.Stopped, c.want) {
			t.Fatalf("saved state: %v, %d records, %q", err, len(st.Records), st.Stopped)
		}
	}
}

// TestAnnealReheatTracksAChange: online, a cooled annealer holds x and
// re-measures it instead of ending; when the landscape moves under it (the
// peak jumps from one corner of Kmin to the other) the change in f(x)
// restarts the schedule and the search finds the new peak.
func TestAnnealReheatTracksAChange(t *testing.T) {
	a, peak, f := movingPeak(t, 60, func(*AnnealParams) {})
	for i := range 400 {
		if i == 200 {
			*peak = 10
		}
		x, ok := a.Next()
		if !ok {
			t.Fatalf("evaluation %d: the online annealer ended", i)
		}
		a.Tell(f(x))
		if i == 199 {
			if bx, _, _ := a.Best(); bx[0] > 1 {
				t.Fatalf("before the change: best Kmin level %d, want 0 or 1", bx[0])
			}
		}
	}
	if a.Reheats() < 1 {
		t.Fatal("the change did not reheat the schedule")
	}
	if bx, _, _ := a.Best(); bx[0] < 9 {
		t.Fatalf("after the change: best Kmin level %d, want 9 or 10 (%d reheats)", bx[0], a.Reheats())
	}
	bad := PaperAnneal()
	bad.Remeasure, bad.Reheat = false, 0.1
	if err := bad.Validate(); err == nil {
		t.Fatal("reheat without remeasure was accepted")
	}
}
