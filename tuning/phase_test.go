package tuning

import (
	"context"
	"slices"
	"testing"
	"time"
)

// movingPeak is an online annealer (I 2, a reheat past 5% of f(x),
// cooled within budget evaluations, then set) on a noise-free bowl in the
// Kmin level whose peak the test moves by setting *peak.
func movingPeak(t *testing.T, budget int, set func(*AnnealParams)) (*Anneal, *int, func(Point) float64) {
	t.Helper()
	sp := PaperSpace("leaf")
	p := PaperAnneal()
	p.I, p.Reheat = 2, 0.05
	set(&p)
	a, err := NewAnneal(&sp, p.ForBudget(budget), 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	peak := new(int)
	return a, peak, func(x Point) float64 {
		d := float64(x[0]-*peak) / 10
		return 1 - d*d
	}
}

// TestAnnealHold: with Hold, once a schedule has cooled every judgement is
// x_best held and re-measured (no proposal costs a window) until the
// workload changes; the change restarts the search, which finds the new
// peak and holds it.
func TestAnnealHold(t *testing.T) {
	a, peak, f := movingPeak(t, 100, func(p *AnnealParams) { p.Hold = true })
	var held []int
	for i := range 400 {
		if i == 200 {
			*peak = 10
		}
		x, ok := a.Next()
		if !ok {
			t.Fatalf("evaluation %d: the online annealer ended", i)
		}
		if a.Judging() == phaseHold {
			held = append(held, i)
			if bx, _, _ := a.Best(); !slices.Equal(x, bx) {
				t.Fatalf("evaluation %d holds %v, x_best is %v", i, x, bx)
			}
		}
		a.Tell(f(x))
		if i == 199 {
			if bx, _, _ := a.Best(); bx[0] > 1 {
				t.Fatalf("before the change: best Kmin level %d, want 0 or 1", bx[0])
			}
		}
	}
	// Cooled within 100 evaluations: from then to the change, all held.
	for i := 101; i < 200; i++ {
		if !slices.Contains(held, i) {
			t.Fatalf("evaluation %d after the schedule cooled was not x_best held", i)
		}
	}
	if a.Reheats() != 1 {
		t.Fatalf("%d reheats, want 1 (the change)", a.Reheats())
	}
	if !slices.Contains(held, 399) {
		t.Fatal("the schedule after the change did not end in a hold")
	}
	// From level 0 to the new peak's neighbourhood (levels 8-10 score
	// within 4% of it) in one 100-evaluation schedule.
	if bx, _, _ := a.Best(); bx[0] < 8 {
		t.Fatalf("after the change: held Kmin level %d, want 8 to 10", bx[0])
	}
	bad := PaperAnneal()
	bad.Hold = true
	if err := bad.Validate(); err == nil {
		t.Fatal("hold without reheat was accepted")
	}
}

// phased is a target whose workload changes at call change: before it
// the queue is Kmin x 10 bytes at line rate (an empty queue at Kmin 0),
// after it 50 KB more for every configuration (an incast's standing
// queue), so the whole run's smallest queue says nothing about the new
// workload.
type phased struct {
	c      Config
	calls  int
	change int
}

func (p *phased) Apply(_ context.Context, c Config) error { p.c = c; return nil }

func (p *phased) Measure(context.Context, time.Duration) (Telemetry, error) {
	p.calls++
	q := float64(p.c.Scopes["leaf"].Kmin) * 10
	if p.calls > p.change {
		q += 50 << 10
	}
	return Telemetry{Duration: int64(time.Millisecond), Switches: []SwitchStats{{Name: "leaf1", Ports: []PortStats{
		{Port: 0, Capacity: 25e9, Throughput: 25e9, QueueMean: q}}}}}, nil
}

// TestPhaseHistory: with PhaseHistory a reheat empties the tuner's Eq. 14
// history, so the new workload's configurations are told apart by its own
// smallest queue; without it every score after the change is about beta
// (the queue term against the old workload's empty queue is ~0).
func TestPhaseHistory(t *testing.T) {
	run := func(ph bool) []Record {
		sp := PaperSpace("leaf")
		p := OnlineTuning()
		p.Samples, p.ReheatSigma, p.Reheat, p.PhaseHistory = 1, 0, 0.05, ph
		p = p.ForBudget(60)
		a, err := NewAnneal(&sp, p, 5, Point{2, 0, 0, 0})
		if err != nil {
			t.Fatal(err)
		}
		tu := &Tuner{Space: &sp, Objective: DefaultObjective(), Target: &phased{change: 100}, Optimizer: a, Budget: 200}
		r, err := tu.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if a.Reheats() < 1 {
			t.Fatalf("phase history %v: the change did not reheat", ph)
		}
		return r.Records
	}
	spread := func(rs []Record) float64 {
		lo, hi := rs[0].Score, rs[0].Score
		for _, r := range rs {
			lo, hi = min(lo, r.Score), max(hi, r.Score)
		}
		return hi - lo
	}
	whole, phase := run(false), run(true)
	// After the change, the whole run's history scores every window
	// within 0.01 of 0.5; the phase's own history spreads them.
	if s := spread(whole[110:]); s > 0.01 {
		t.Fatalf("whole-run history: scores after the change spread %.4f, want under 0.01", s)
	}
	if s := spread(phase[110:]); s < 0.05 {
		t.Fatalf("phase history: scores after the change spread %.4f, want at least 0.05", s)
	}
	// The first judgement under the new history is x again, its own
	// best: 1.
	for i := 100; i < len(phase); i++ {
		if phase[i].Score == 1 && slices.Equal(phase[i].Point, phase[i-1].Point) {
			return
		}
	}
	t.Fatal("no re-measurement of x scored 1 under a new history after the change")
}

// TestAnnealRecall: with Recall a reheat first proposes the points that
// served earlier workloads, so a workload that comes back finds its
// configuration in one judgement; ReheatTem restarts the schedule there
// instead of at tem.
func TestAnnealRecall(t *testing.T) {
	a, peak, f := movingPeak(t, 100, func(p *AnnealParams) { p.Hold, p.Recall, p.ReheatTem = true, true, 1 })
	var first Point // held before the first change
	back, recalled := false, false
	for i := range 450 {
		switch i {
		case 150:
			first, _, _ = a.Best()
			*peak = 10
		case 300:
			*peak = 0
		}
		x, ok := a.Next()
		if !ok {
			t.Fatalf("evaluation %d: the online annealer ended", i)
		}
		if back && a.Judging() == phasePropose {
			// The first proposal after the workload came back is
			// the point that served it before.
			if !slices.Equal(x, first) {
				t.Fatalf("evaluation %d: the first proposal after the workload came back is %v, want %v (held before)", i, x, first)
			}
			back, recalled = false, true
		}
		n := a.Reheats()
		a.Tell(f(x))
		if a.Reheats() > n {
			if tem := a.Temperature(); tem != 1 {
				t.Fatalf("evaluation %d: reheated to %g, want ReheatTem 1", i, tem)
			}
			back = i > 300
		}
	}
	if !recalled {
		t.Fatal("no proposal after the workload came back")
	}
	if a.Reheats() != 2 {
		t.Fatalf("%d reheats, want 2", a.Reheats())
	}
	if bx, _, _ := a.Best(); f(bx) < f(first) {
		t.Fatalf("after the workload came back x_best %v scores %.3f, below the recalled %v's %.3f", bx, f(bx), first, f(first))
	}
}

// TestAnnealLean: with Lean a schedule re-measures nothing (every
// judgement within it is a proposal) and fits twice the proposals into
// the same evaluations; the held x_best is still watched, and a change
// restarts the search.
func TestAnnealLean(t *testing.T) {
	a, peak, f := movingPeak(t, 60, func(p *AnnealParams) { p.Hold, p.Lean = true, true })
	kinds := map[string]int{}
	for i := range 300 {
		if i == 150 {
			*peak = 10
		}
		x, ok := a.Next()
		if !ok {
			t.Fatalf("evaluation %d: the online annealer ended", i)
		}
		if i < 60 {
			kinds[a.Judging()]++
		}
		a.Tell(f(x))
	}
	if kinds[phaseCurrent] != 0 || kinds[phasePropose] < 55 {
		t.Fatalf("first schedule's judgements: %v, want proposals only (after the start)", kinds)
	}
	if a.Reheats() != 1 || a.Judging() != phaseHold {
		t.Fatalf("%d reheats, judging %s at the end: want 1 and a hold", a.Reheats(), a.Judging())
	}
	if bx, _, _ := a.Best(); bx[0] < 8 {
		t.Fatalf("after the change: held Kmin level %d, want 8 to 10", bx[0])
	}
	bad := OnlineTuning()
	bad.Lean = true
	if err := bad.Validate(); err == nil {
		t.Fatal("lean without hold was accepted")
	}
}
