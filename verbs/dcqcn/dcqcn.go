// Package dcqcn is the reaction point of DCQCN (Zhu et al., SIGCOMM 2015):
// the per-flow rate limiter an RNIC runs when congestion notification packets
// (CNPs) come back for a flow. The software RNIC paces its QPs with it and the
// fabric simulator paces its flows with it, so both follow the same
// algorithm with the same parameters.
//
// The state machine is driven by the caller's clock in integer nanoseconds and
// keeps no timers of its own: the alpha timer and the rate-increase timer are
// evaluated lazily whenever the caller asks (CNP, Sent, Allowed, Advance), which
// gives the same rates as a timer-driven implementation at every instant the
// rate is observed, and costs nothing for a flow that never sees a CNP.
//
// Rate decrease, on a CNP (at most once per MinDecreaseInterval):
//
//	Rt = Rc;  Rc = Rc x (1 - alpha/2);  alpha = (1-g) alpha + g
//
// Alpha decays as alpha = (1-g) alpha every AlphaPeriod without a CNP. Rate
// increase events come from a timer (every Timer) and a byte counter (every
// ByteCounter bytes sent); with T and BC the events of each kind since the
// last decrease: fast recovery while max(T, BC) < F (Rc = (Rt+Rc)/2),
// hyper increase once min(T, BC) >= F (Rt += i x HAI), additive increase
// in between (Rt += AI), each followed by Rc = (Rt+Rc)/2.
package dcqcn

import (
	"fmt"
	"math"
	"time"
)

// Params are the reaction point's parameters. Defaults returns the values of
// the ByteTuning paper's Table 4 (its RoCEv2 fluid model) at a given line rate.
type Params struct {
	// LineRate is the rate a flow starts at and returns to (bits/s).
	LineRate float64
	// MinRate is the floor of the current rate (bits/s).
	MinRate float64
	// AI is the additive-increase step of the target rate (R_AI, bits/s).
	AI float64
	// HAI is the hyper-increase step (R_HAI, bits/s).
	HAI float64
	// G is the alpha gain g.
	G float64
	// InitialAlpha is alpha before the first CNP.
	InitialAlpha float64
	// AlphaPeriod is tau': alpha decays after a period without CNPs.
	AlphaPeriod time.Duration
	// Timer is the rate-increase timer period.
	Timer time.Duration
	// ByteCounter is the number of bytes sent per byte-counter increase event.
	ByteCounter uint64
	// F is the number of fast-recovery steps.
	F int
	// MinDecreaseInterval is the least time between two rate cuts (mlx5's
	// rate_reduce_monitor_period); CNPs inside it only refresh alpha's
	// timer. Zero cuts on every CNP.
	MinDecreaseInterval time.Duration
}

// Defaults returns Table 4 of the ByteTuning paper at lineRate bits/s:
// R_AI 40 Mbps, ByteCounter 10 MB (10000 packets of 1 KB; the table's
// "100 MB" contradicts its own packet count), Timer 55 us, F 5, g 1/256,
// tau' 55 us, alpha starting at 1. The paper gives no R_HAI; we use
// 10 x R_AI, the ratio of DCQCN's reference implementation. MinRate is
// 1/1000 of the line rate so a rate cut can never stall a flow for long.
func Defaults(lineRate float64) Params {
	return Params{LineRate: lineRate, MinRate: lineRate / 1000, AI: 40e6, HAI: 400e6, G: 1.0 / 256,
		InitialAlpha: 1, AlphaPeriod: 55 * time.Microsecond, Timer: 55 * time.Microsecond,
		ByteCounter: 10 << 20, F: 5}
}

// Validate checks the parameters.
func (p *Params) Validate() error {
	switch {
	case !(p.LineRate > 0) || math.IsInf(p.LineRate, 0):
		return fmt.Errorf("dcqcn: line rate %v must be positive", p.LineRate)
	case p.MinRate <= 0 || p.MinRate > p.LineRate:
		return fmt.Errorf("dcqcn: min rate %v must be in (0, line rate]", p.MinRate)
	case p.AI < 0 || p.HAI < 0:
		return fmt.Errorf("dcqcn: increase steps must not be negative")
	case p.G <= 0 || p.G >= 1:
		return fmt.Errorf("dcqcn: g %v must be in (0, 1)", p.G)
	case p.InitialAlpha < 0 || p.InitialAlpha > 1:
		return fmt.Errorf("dcqcn: initial alpha %v must be in [0, 1]", p.InitialAlpha)
	case p.AlphaPeriod <= 0 || p.Timer <= 0:
		return fmt.Errorf("dcqcn: alpha period and timer must be positive")
	case p.ByteCounter == 0:
		return fmt.Errorf("dcqcn: byte counter must be positive")
	case p.F < 1:
		return fmt.Errorf("dcqcn: F %d must be at least 1", p.F)
	case p.MinDecreaseInterval < 0:
		return fmt.Errorf("dcqcn: min decrease interval must not be negative")
	}
	return nil
}

// Stage names the increase phase a flow is in.
type Stage uint8

// Stages.
const (
	// LineRate: no CNP since the flow reached line rate; no pacing.
	LineRate Stage = iota
	FastRecovery
	AdditiveIncrease
	HyperIncrease
)

func (s Stage) String() string {
	switch s {
	case LineRate:
		return "line-rate"
	case FastRecovery:
		return "fast-recovery"
	case AdditiveIncrease:
		return "additive-increase"
	case HyperIncrease:
		return "hyper-increase"
	}
	return fmt.Sprintf("stage(%d)", uint8(s))
}

// RP is the reaction point of one flow. The zero value is not usable; call
// Init. An RP is not safe for concurrent use: it belongs to the loop that
// transmits the flow.
type RP struct {
	p        *Params
	rc, rt   float64
	alpha    float64
	limited  bool
	alphaDue int64 // next alpha decay
	incDue   int64 // next timer increase event
	lastCut  int64
	cutOnce  bool
	bytes    uint64 // toward the next byte-counter event
	tEvents  int
	bEvents  int
	nextTx   int64 // pacing: earliest start of the next packet
	cnps     uint64
	cuts     uint64
}

// Init resets the flow to line rate with the given parameters, which must
// stay valid (and unchanged) while the RP uses them.
func (r *RP) Init(p *Params) {
	*r = RP{p: p, rc: p.LineRate, rt: p.LineRate, alpha: p.InitialAlpha}
}

// Resume starts a flow at rate bits/s as a flow whose rate DCQCN had cut
// to it by now: paced (Rc = Rt = rate), its increase timer and alpha's
// quiet period counting from now, as after a cut at alpha 1. A flow
// already running when a measurement begins (a trace cut out of a steady
// state) resumes at the share it had, not at line rate. A rate at or
// above the line rate (or not positive) is Init's.
func (r *RP) Resume(p *Params, rate float64, now int64) {
	r.Init(p)
	if !(rate > 0) || rate >= p.LineRate {
		return
	}
	rate = max(rate, p.MinRate)
	r.rc, r.rt = rate, rate
	r.limited, r.cutOnce, r.lastCut = true, true, now
	r.nextTx = now
	r.incDue = now + int64(p.Timer)
	r.alphaDue = now + int64(p.AlphaPeriod)
}

// Rate is the current rate Rc in bits/s.
func (r *RP) Rate() float64 { return r.rc }

// Target is the target rate Rt in bits/s.
func (r *RP) Target() float64 { return r.rt }

// Alpha is the current alpha.
func (r *RP) Alpha() float64 { return r.alpha }

// Limited reports whether the flow is paced (below line rate).
func (r *RP) Limited() bool { return r.limited }

// CNPs is the number of CNPs received; Cuts the number of rate cuts.
func (r *RP) CNPs() uint64 { return r.cnps }

// Cuts is the number of rate decreases.
func (r *RP) Cuts() uint64 { return r.cuts }

// Stage is the current increase phase.
func (r *RP) Stage() Stage {
	if !r.limited {
		return LineRate
	}
	f := r.p.F
	switch {
	case max(r.tEvents, r.bEvents) < f:
		return FastRecovery
	case min(r.tEvents, r.bEvents) >= f:
		return HyperIncrease
	}
	return AdditiveIncrease
}

// CNP handles a congestion notification at now (ns). It reports whether the
// rate was cut.
func (r *RP) CNP(now int64) bool {
	r.Advance(now)
	r.cnps++
	p := r.p
	// Any CNP restarts alpha's quiet period.
	r.alphaDue = now + int64(p.AlphaPeriod)
	if r.cutOnce && p.MinDecreaseInterval > 0 && now-r.lastCut < int64(p.MinDecreaseInterval) {
		return false
	}
	r.cutOnce, r.lastCut = true, now
	r.cuts++
	r.rt = r.rc
	r.rc = max(r.rc*(1-r.alpha/2), p.MinRate)
	r.alpha = (1-p.G)*r.alpha + p.G
	r.tEvents, r.bEvents, r.bytes = 0, 0, 0
	r.incDue = now + int64(p.Timer)
	if !r.limited {
		r.limited = true
		r.nextTx = now
	}
	return true
}

// Advance runs the alpha and increase timers up to now.
func (r *RP) Advance(now int64) {
	if !r.limited {
		// Like an RNIC, which creates a flow's reaction-point state at its
		// first CNP, alpha starts decaying only after that CNP.
		if r.cutOnce {
			r.decayAlpha(now)
		}
		return
	}
	p := r.p
	for {
		// Alpha decays up to the next increase event (or now), so that
		// every event sees the alpha of its instant.
		r.decayAlpha(min(r.incDue, now))
		if r.incDue > now {
			return
		}
		r.incDue += int64(p.Timer)
		r.tEvents++
		if r.increase() {
			// Back at line rate: the increase timer stops until the
			// next CNP; alpha keeps decaying lazily.
			r.decayAlpha(now)
			return
		}
	}
}

// decayAlpha applies the alpha decays due up to t.
func (r *RP) decayAlpha(t int64) {
	p := r.p
	if r.alphaDue <= t {
		n := (t-r.alphaDue)/int64(p.AlphaPeriod) + 1
		r.alpha *= math.Pow(1-p.G, float64(n))
		r.alphaDue += n * int64(p.AlphaPeriod)
	}
}

// increase applies one increase event; it reports whether the flow is back
// at line rate.
func (r *RP) increase() bool {
	p := r.p
	f := p.F
	switch {
	case max(r.tEvents, r.bEvents) < f:
		// fast recovery: the target stays
	case min(r.tEvents, r.bEvents) >= f:
		r.rt += float64(min(r.tEvents, r.bEvents)-f+1) * p.HAI
	default:
		r.rt += p.AI
	}
	r.rt = min(r.rt, p.LineRate)
	r.rc = (r.rt + r.rc) / 2
	if r.rc >= p.LineRate*(1-1e-6) {
		r.rc, r.rt = p.LineRate, p.LineRate
		r.limited = false
		return true
	}
	return false
}

// Allowed reports whether a packet may start at now.
func (r *RP) Allowed(now int64) bool {
	if !r.limited {
		return true
	}
	r.Advance(now)
	return !r.limited || now >= r.nextTx
}

// NextTx is when the next packet may start (meaningful while Limited).
func (r *RP) NextTx() int64 { return r.nextTx }

// Sent accounts a packet of n bytes started at now: the pacer's next slot
// moves by its serialisation time at the current rate, and the byte counter
// advances.
func (r *RP) Sent(now int64, n int) {
	if !r.limited {
		return
	}
	p := r.p
	start := max(r.nextTx, now)
	r.nextTx = start + int64(float64(n)*8e9/r.rc)
	r.bytes += uint64(n)
	for r.bytes >= p.ByteCounter && r.limited {
		r.bytes -= p.ByteCounter
		r.bEvents++
		if r.increase() {
			r.decayAlpha(now)
		}
	}
}
