package tuning

import (
	"context"
	"testing"
)

// Figure 6: with line-rate start, more flows converge worse and lose
// more (Table 4's parameters).
func TestFluidFigure6MoreFlowsMoreLoss(t *testing.T) {
	var loss, errs []float64
	for _, n := range []int{2, 4, 8, 16} {
		r, err := Solve(Table4(n), 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("N=%2d: loss %7.0f B, peak queue %7.0f B, mean %6.0f B, rate error %.3f, %.1f Gbit/s", n, r.LossBytes, r.PeakQueue, r.MeanQueue, r.RateError, r.Throughput/1e9)
		loss = append(loss, r.LossBytes)
		errs = append(errs, r.MeanQueue)
	}
	for i := 1; i < len(loss); i++ {
		if loss[i] < loss[i-1] || errs[i] <= errs[i-1] {
			t.Errorf("N step %d: loss %v, mean queue %v: want both to grow with N", i, loss, errs)
		}
	}
	if loss[len(loss)-1] <= loss[1] || loss[2] <= 0 {
		t.Errorf("loss %v: want losses from 8 flows on and more at 16", loss)
	}
	// A lower start rate relieves the start-up (the paper's point 2).
	p := Table4(8)
	p.InitRate = 10e9
	slow, _ := Solve(p, 0)
	if slow.LossBytes >= loss[2] {
		t.Errorf("starting at 10G lost %g B, line rate %g B", slow.LossBytes, loss[2])
	}
}

// Figure 7: a higher PFC threshold converges worse (deeper queue, later
// drained, more loss); a longer pause costs throughput.
func TestFluidFigure7HigherPFCThresholdWorse(t *testing.T) {
	var prev FluidResult
	for i, k := range []float64{100e3, 300e3, 500e3, 800e3} {
		p := Table4(8)
		p.Kpfc, p.Tpfc = k, 100e-6
		r, err := Solve(p, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("Kpfc %3.0f KB: loss %7.0f B, mean queue %6.0f B, drained at %.2f ms, paused %.3f", k/1e3, r.LossBytes, r.MeanQueue, r.Drained*1e3, r.PausedFrac)
		if i > 0 && (r.LossBytes <= prev.LossBytes || r.MeanQueue <= prev.MeanQueue || r.Drained < prev.Drained) {
			t.Errorf("Kpfc %g: loss %g, queue %g, drained %g; below it %g, %g, %g", k, r.LossBytes, r.MeanQueue, r.Drained, prev.LossBytes, prev.MeanQueue, prev.Drained)
		}
		prev = r
	}
	short, long := Table4(8), Table4(8)
	short.Tpfc = 100e-6
	rs, _ := Solve(short, 0)
	rl, _ := Solve(long, 0)
	if rl.PausedFrac <= rs.PausedFrac || rl.Throughput >= rs.Throughput {
		t.Errorf("838 us pauses: paused %.3f, %.1f G; 100 us: %.3f, %.1f G", rl.PausedFrac, rl.Throughput/1e9, rs.PausedFrac, rs.Throughput/1e9)
	}
}

func TestFluidTarget(t *testing.T) {
	s := PaperSpace("bottleneck")
	ft := NewFluidTarget(Table4(4))
	ft.P.Duration = 2e-3
	lo, _ := s.Config(Point{0, 0, 0, 0})
	hi, _ := s.Config(Point{10, 9, 5, 4})
	var q [2]float64
	for i, c := range []Config{lo, hi} {
		if err := ft.Apply(context.Background(), c); err != nil {
			t.Fatal(err)
		}
		tel, err := ft.Measure(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		q[i] = tel.Switches[0].Ports[0].QueueMean
		if len(tel.Flows) != 4 || tel.Switches[0].Ports[0].Throughput <= 0 {
			t.Fatalf("telemetry %+v", tel)
		}
	}
	if q[1] <= q[0] {
		t.Errorf("the highest watermarks queue %g B, the lowest %g B", q[1], q[0])
	}
}
