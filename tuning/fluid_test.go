package tuning

import (
	"context"
	"math"
	"testing"

	"github.com/rdma-appliance/appliance/bench/fabric"
	"github.com/rdma-appliance/appliance/bench/fabric/topo"
	"github.com/rdma-appliance/appliance/bench/fabric/workload"
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

// The fluid model and the packet simulator on the same parameters (Table
// 4: N flows at 40G into one 40G port, 1 KB packets, Kmin 5 KB, Kmax 200
// KB, Pmax 10%, 1000 KB buffer, DCQCN with Table 4's reaction point, CNPs
// at most every 50 us, 35 us of round trip) agree in steady state (the
// second half of 10 ms): per-flow rate within 10%, mean queue within two
// Kmin (10 KB; both hover near Kmin).
func TestFluidMatchesSimulator(t *testing.T) {
	for _, n := range []int{2, 4} {
		p := Table4(n)
		p.Duration = 10e-3
		r, err := Solve(p, 40)
		if err != nil {
			t.Fatal(err)
		}
		var fq, fr float64
		k := 0
		for i := range r.T {
			if r.T[i] >= p.Duration/2 {
				fq += r.Q[i]
				fr += r.RC[i]
				k++
			}
		}
		fq /= float64(k)
		fr /= float64(k)

		g := &topo.Graph{}
		var snd []int
		for i := range n {
			snd = append(snd, g.AddNode(topo.Node{Name: "s" + itoa(i), Kind: topo.Host}))
		}
		rcv := g.AddNode(topo.Node{Name: "r", Kind: topo.Host})
		sw := g.AddNode(topo.Node{Name: "sw", Kind: topo.Switch, Layer: "tor"})
		for _, s := range snd {
			g.AddLink(s, sw, p.C, 8750) // 4 x 8.75 us = tau* - tau
		}
		g.AddLink(rcv, sw, p.C, 8750)
		cfg := fabric.DefaultConfig()
		cfg.Switch.Buffer = int64(p.B)
		cfg.Switch.Kmin, cfg.Switch.Kmax, cfg.Switch.Pmax = int64(p.Kmin), int64(p.Kmax), p.Pmax
		cfg.Host.MTU = int(p.S) - fabric.HeaderBytes
		cfg.Host.CNPInterval = int64(p.Tau * 1e9)
		sim, err := fabric.New(g, g.ShortestPaths(), workload.Incast(snd, rcv, 1<<30, 1, 0, 0), cfg)
		if err != nil {
			t.Fatal(err)
		}
		var qsum float64
		var qn int
		var sample func(*fabric.Sim)
		sample = func(s *fabric.Sim) {
			qsum += float64(s.QueueBytes(sw, n, fabric.PrioData))
			qn++
			if s.Now() < 10e6 {
				s.At(s.Now()+1000, sample)
			}
		}
		sim.At(5e6, sample)
		res, _ := sim.Run(context.Background(), 5e6)
		tx0 := res.Port("sw", n).TxBytes
		res, _ = sim.Run(context.Background(), 10e6)
		sr := float64(res.Port("sw", n).TxBytes-tx0) * 8 / 5e-3 / float64(n)
		sq := qsum / float64(qn)
		t.Logf("N=%d: fluid %.2f Gbit/s per flow, queue %.0f B; simulator %.2f Gbit/s, %.0f B", n, fr/1e9, fq, sr/1e9, sq)
		if math.Abs(fr-sr)/sr > 0.10 {
			t.Errorf("N=%d: per-flow rate fluid %.2fG, simulator %.2fG: more than 10%% apart", n, fr/1e9, sr/1e9)
		}
		if math.Abs(fq-sq) > 2*p.Kmin {
			t.Errorf("N=%d: queue fluid %.0f B, simulator %.0f B: more than %g B apart", n, fq, sq, 2*p.Kmin)
		}
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
