package tuning

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// FluidParams are the RoCEv2 fluid model's parameters (the paper's
// Table 4 by default). Rates are in bits/s, sizes in bytes, times in
// seconds; the model itself counts packets of S bytes.
type FluidParams struct {
	S float64 // packet size
	C float64 // bottleneck bandwidth
	N int     // flows at the bottleneck
	B float64 // buffer
	// DCQCN: additive increase R_AI, byte counter, timer, fast-recovery
	// steps F, gain g, CNP period tau, feedback delay tau* (RTT + tau),
	// alpha period tau'.
	RAI         float64
	ByteCounter float64
	Timer       float64
	F           float64
	G           float64
	Tau         float64
	TauStar     float64
	TauPrime    float64
	// ECN (Eq. 6) and PFC (Eq. 7): marking between Kmin and Kmax up to
	// Pmax; input paused for Tpfc once the queue passes Kpfc.
	Kmin, Kmax, Pmax float64
	Kpfc, Tpfc       float64
	// Headroom above Kpfc absorbs what arrives while a pause takes
	// effect; the queue is lost beyond min(B, Kpfc + Headroom). Zero
	// headroom: lost beyond B, as the paper's model.
	Headroom float64
	// PFCDelay is how long an XOFF takes to stop the upstream. Table 4
	// does not give it; we use the round trip inside tau* (tau* - tau =
	// 35 us), so PFC lags as the paper's model lets it: N flows at line
	// rate put N x R x 35 us on the way after the trigger, which is what
	// overflows the buffer as N grows (Fig. 6).
	PFCDelay float64
	// InitRate is each flow's start rate and target (line-rate start:
	// C, the paper's worst case).
	InitRate float64
	// Dt is the fixed integration step; Duration the simulated time.
	Dt, Duration float64
}

// Table4 is the paper's Table 4 with n flows: S 1 KB, C 40 Gbit/s, B
// 1000 KB, R_AI 40 Mbit/s, ByteCounter 10 MB, Timer 55 us, F 5, g 1/256,
// tau 50 us, tau* 85 us, tau' 55 us, Kmin 5 KB, Kmax 200 KB, Pmax 10%,
// Kpfc 300 KB, Tpfc 838 us (65535 x 512 bits at 40G). Flows start at line
// rate. The table's ByteCounter reads "100 MB" but its own note says
// 10000 packets of 1 KB: 10 MB.
func Table4(n int) FluidParams {
	return FluidParams{S: 1000, C: 40e9, N: n, B: 1000e3, RAI: 40e6, ByteCounter: 10e6, Timer: 55e-6, F: 5,
		G: 1.0 / 256, Tau: 50e-6, TauStar: 85e-6, TauPrime: 55e-6, Kmin: 5e3, Kmax: 200e3, Pmax: 0.1,
		Kpfc: 300e3, Tpfc: 65535 * 512 / 40e9, PFCDelay: 35e-6, InitRate: 40e9, Dt: 0.25e-6, Duration: 20e-3}
}

// Validate checks the parameters.
func (p *FluidParams) Validate() error {
	switch {
	case p.N < 1:
		return fmt.Errorf("fluid: %d flows", p.N)
	case !(p.S > 0 && p.C > 0 && p.B > 0 && p.Dt > 0 && p.Duration > p.Dt):
		return errors.New("fluid: packet size, bandwidth, buffer, step and duration must be positive")
	case p.Kmin < 0 || p.Kmax <= p.Kmin || !(p.Pmax > 0 && p.Pmax <= 1):
		return fmt.Errorf("fluid: ECN %g..%g bytes at %g: want 0 <= Kmin < Kmax, Pmax in (0,1]", p.Kmin, p.Kmax, p.Pmax)
	case p.Kpfc <= 0 || p.Tpfc <= 0 || p.PFCDelay < 0 || p.Headroom < 0:
		return errors.New("fluid: PFC threshold and pause positive, delay and headroom not negative")
	case !(p.Tau > 0 && p.TauStar >= p.Dt && p.TauPrime > 0 && p.Timer > 0 && p.ByteCounter > 0 && p.G > 0 && p.G < 1):
		return errors.New("fluid: DCQCN timers, byte counter and gain out of range")
	case p.Duration/p.Dt > 1e8:
		return errors.New("fluid: more than 1e8 steps")
	}
	return nil
}

// FluidResult is the model's trajectory and figures.
type FluidResult struct {
	// Samples every SampleEvery steps: time (s), queue (bytes), per-flow
	// current and target rate (bits/s), alpha, cumulative loss (bytes)
	// and whether the input was paused.
	T, Q, RC, RT, Alpha, Loss []float64
	Paused                    []bool
	// Figures over the whole run.
	MeanQueue, P99Queue, PeakQueue float64
	Throughput                     float64 // delivered, bits/s
	LossBytes                      float64
	PausedFrac                     float64
	// Drained is when the start-up burst's queue first fell back
	// below Kmin after the first time it passed Kmax (the run's duration
	// if it never did): the end of the transient.
	Drained float64
	// RateError is the time-average of |N R_C - C| / C: how far the
	// flows are from sharing the bottleneck exactly, over the run.
	RateError float64
}

// markProb is Eq. 6.
func (p *FluidParams) markProb(q float64) float64 {
	switch {
	case q <= p.Kmin:
		return 0
	case q >= p.Kmax:
		return 1
	}
	return (q - p.Kmin) / (p.Kmax - p.Kmin) * p.Pmax
}

// expTerm is (1-p)^x computed stably.
func expTerm(p, x float64) float64 {
	if p >= 1 {
		return 0
	}
	return math.Exp(x * math.Log1p(-p))
}

// incTerm is the DCQCN increase-event rate factor
// (1-p)^(F k) p / ((1-p)^-k - 1), whose limit at p -> 0 is 1/k.
func incTerm(p, k, f float64) float64 {
	if k <= 0 {
		return 0
	}
	if p < 1e-12 {
		return 1 / k
	}
	den := expTerm(p, -k) - 1
	if den <= 0 || math.IsInf(den, 0) {
		return 0
	}
	return expTerm(p, f*k) * p / den
}

// Solve integrates Eq. 6-13 with a fixed-step (Heun) method. The delayed
// terms p(t - tau*) and R_C(t - tau*) come from a ring buffer of past
// steps, the PFC pause from the queue PFCDelay ago. Flows are identical,
// so one flow's state stands for all N. sampleEvery thins the trajectory
// (0: no trajectory).
func Solve(p FluidParams, sampleEvery int) (FluidResult, error) {
	if err := p.Validate(); err != nil {
		return FluidResult{}, err
	}
	pkt := p.S * 8 // bits per packet
	C := p.C / pkt // packets/s from here on
	rAI := p.RAI / pkt
	bc := p.ByteCounter / p.S // byte counter in packets
	steps := int(p.Duration / p.Dt)
	lag := max(int(math.Round(p.TauStar/p.Dt)), 1)
	pfcLag := int(math.Round(p.PFCDelay / p.Dt))
	hist := max(lag, pfcLag) + 1
	// Ring buffers of past marking probability, rate and queue.
	hp, hr, hq := make([]float64, hist), make([]float64, hist), make([]float64, hist)
	rc, rt, alpha := p.InitRate/pkt, p.InitRate/pkt, 1.0
	for i := range hist {
		hr[i] = rc
	}
	q := 0.0
	dropAt := p.B
	if p.Headroom > 0 {
		dropAt = min(p.B, p.Kpfc+p.Headroom)
	}
	var res FluidResult
	pausedUntil := -1.0
	var qs []float64
	sumQ, sumOut, loss, pausedT := 0.0, 0.0, 0.0, 0.0
	rateErr, drained, overKmax := 0.0, -1.0, false
	deriv := func(rc, rt, alpha, pd, rd float64) (drc, drt, dal float64) {
		cnp := 1 - expTerm(pd, p.Tau*rd)
		byteInc := incTerm(pd, bc, p.F)
		timeInc := incTerm(pd, p.Timer*rd, p.F)
		dal = p.G / p.TauPrime * ((1 - expTerm(pd, p.TauPrime*rd)) - alpha)
		drt = -(rt-rc)/p.Tau*cnp + rAI*rd*byteInc + rAI*rd*timeInc
		drc = -rc*alpha/(2*p.Tau)*cnp + (rt-rc)/2*rd*byteInc + (rt-rc)/2*rd*timeInc
		return
	}
	for k := range steps {
		t := float64(k) * p.Dt
		cur := k % hist
		past := (k - lag + hist*2) % hist
		pd, rd := hp[past], hr[past]
		if k < lag {
			pd, rd = 0, p.InitRate/pkt
		}
		// PFC (Eq. 7): the switch sees its queue over Kpfc and the
		// upstream stops PFCDelay later, for Tpfc.
		qpfc := hq[(k-pfcLag+hist*2)%hist]
		if k < pfcLag {
			qpfc = 0
		}
		paused := t < pausedUntil
		if !paused && qpfc > p.Kpfc/p.S {
			pausedUntil = t + p.Tpfc
			paused = true
		}
		// Queue (Eq. 8): N flows in unless paused, C out.
		in := float64(p.N) * rc
		if paused {
			in = 0
			pausedT += p.Dt
		}
		out := C
		if q <= 0 && in < C {
			out = in
		}
		dq := (in - out) * p.Dt
		nq := q + dq
		// Loss (Eq. 13): what does not fit.
		if lim := dropAt / p.S; nq > lim {
			loss += nq - lim
			nq = lim
		}
		q = max(nq, 0)
		sumOut += out * p.Dt
		// DCQCN (Eq. 10-12), Heun's method on the delayed inputs.
		d1c, d1t, d1a := deriv(rc, rt, alpha, pd, rd)
		e1c, e1t, e1a := rc+d1c*p.Dt, rt+d1t*p.Dt, alpha+d1a*p.Dt
		d2c, d2t, d2a := deriv(e1c, e1t, e1a, pd, rd)
		rc += (d1c + d2c) / 2 * p.Dt
		rt += (d1t + d2t) / 2 * p.Dt
		alpha += (d1a + d2a) / 2 * p.Dt
		lineRate := p.C / pkt
		rc = min(max(rc, lineRate/1000), lineRate)
		rt = min(max(rt, rc), lineRate)
		alpha = min(max(alpha, 0), 1)
		hp[cur], hr[cur], hq[cur] = p.markProb(q*p.S), rc, q
		qb := q * p.S
		sumQ += qb
		qs = append(qs, qb)
		rateErr += math.Abs(float64(p.N)*rc-C) / C
		if qb >= p.Kmax {
			overKmax = true
		} else if overKmax && drained < 0 && qb <= p.Kmin {
			drained = t
		}
		if sampleEvery > 0 && k%sampleEvery == 0 {
			res.T = append(res.T, t)
			res.Q = append(res.Q, qb)
			res.RC = append(res.RC, rc*pkt)
			res.RT = append(res.RT, rt*pkt)
			res.Alpha = append(res.Alpha, alpha)
			res.Loss = append(res.Loss, loss*p.S)
			res.Paused = append(res.Paused, paused)
		}
	}
	res.MeanQueue = sumQ / float64(steps)
	res.P99Queue = Percentile(qs, 99)
	for _, v := range qs {
		res.PeakQueue = max(res.PeakQueue, v)
	}
	res.Throughput = sumOut * pkt / p.Duration
	res.LossBytes = loss * p.S
	res.PausedFrac = pausedT / p.Duration
	res.RateError = rateErr / float64(steps)
	res.Drained = drained
	if drained < 0 {
		res.Drained = p.Duration
	}
	return res, nil
}

// FluidTarget is the fluid model as a tuning target: a fast, deterministic
// evaluator of one bottleneck. A configuration's first scope sets its ECN
// thresholds, its PFC threshold (alpha's dynamic threshold of the buffer
// with one congested group: a B / (1 + a), a = alpha x AlphaUnit) and its
// headroom.
type FluidTarget struct {
	P   FluidParams
	cur *FluidParams
}

// NewFluidTarget evaluates configurations on p.
func NewFluidTarget(p FluidParams) *FluidTarget { return &FluidTarget{P: p} }

// Params is p with w applied (thresholds in cells of cell bytes).
func (f *FluidTarget) Params(w Watermark, cell int64) FluidParams {
	p := f.P
	p.Kmin, p.Kmax = float64(w.Kmin*cell), float64(w.Kmax*cell)
	if p.Kmax <= p.Kmin {
		p.Kmax = p.Kmin + float64(cell)
	}
	p.Pmax = w.Pmax / 100
	a := w.Alpha * AlphaUnit
	p.Kpfc = a * p.B / (1 + a)
	p.Headroom = float64(w.Headroom * cell)
	return p
}

// Apply takes the configuration's first scope.
func (f *FluidTarget) Apply(_ context.Context, c Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	w := c.Scopes[c.ScopeNames()[0]]
	p := f.Params(w, c.Cell)
	if err := p.Validate(); err != nil {
		return err
	}
	f.cur = &p
	return nil
}

// Measure solves the model for d (the parameters' duration when 0).
func (f *FluidTarget) Measure(ctx context.Context, d time.Duration) (Telemetry, error) {
	if f.cur == nil {
		return Telemetry{}, errors.New("fluid: measure before apply")
	}
	if err := ctx.Err(); err != nil {
		return Telemetry{}, err
	}
	p := *f.cur
	if d > 0 {
		p.Duration = d.Seconds()
	}
	r, err := Solve(p, 0)
	if err != nil {
		return Telemetry{}, err
	}
	tel := Telemetry{Duration: int64(p.Duration * 1e9), Drops: uint64(r.LossBytes / p.S), Source: "fluid",
		Switches: []SwitchStats{{Name: "bottleneck", Ports: []PortStats{{Capacity: p.C,
			Throughput: r.Throughput, QueueMean: r.MeanQueue, QueueP99: r.P99Queue, QueueMax: r.PeakQueue}}}}}
	for i := range p.N {
		tel.Flows = append(tel.Flows, FlowStats{ID: i, Throughput: r.Throughput / float64(p.N), Queue: r.MeanQueue})
	}
	return tel, nil
}
