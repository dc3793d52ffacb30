package tunesim

import (
	"context"
	"math"
	"strconv"
	"testing"

	"github.com/rdma-appliance/appliance/bench/fabric"
	"github.com/rdma-appliance/appliance/bench/fabric/workload"
	"github.com/rdma-appliance/appliance/internal/topo"
	"github.com/rdma-appliance/appliance/tuning"
)

// The fluid model and the packet simulator on the same parameters (Table
// 4: N flows at 40G into one 40G port, 1 KB packets, Kmin 5 KB, Kmax 200
// KB, Pmax 10%, 1000 KB buffer, DCQCN with Table 4's reaction point, CNPs
// at most every 50 us, 35 us of round trip) agree in steady state (the
// second half of 10 ms): per-flow rate within 10%, mean queue within two
// Kmin (10 KB; both hover near Kmin).
func TestFluidMatchesSimulator(t *testing.T) {
	for _, n := range []int{2, 4} {
		p := tuning.Table4(n)
		p.Duration = 10e-3
		r, err := tuning.Solve(p, 40)
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
			snd = append(snd, g.AddNode(topo.Node{Name: "s" + strconv.Itoa(i), Kind: topo.Host}))
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
