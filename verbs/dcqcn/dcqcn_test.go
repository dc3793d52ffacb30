package dcqcn

import (
	"math"
	"testing"
	"time"
)

const us = int64(time.Microsecond)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(math.Abs(a), math.Abs(b)) }

func newRP(p Params) *RP {
	r := new(RP)
	r.Init(&p)
	return r
}

func TestDefaultsValid(t *testing.T) {
	p := Defaults(100e9)
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []func(*Params){
		func(p *Params) { p.LineRate = 0 },
		func(p *Params) { p.MinRate = 2 * p.LineRate },
		func(p *Params) { p.G = 1 },
		func(p *Params) { p.InitialAlpha = 2 },
		func(p *Params) { p.Timer = 0 },
		func(p *Params) { p.ByteCounter = 0 },
		func(p *Params) { p.F = 0 },
		func(p *Params) { p.AI = -1 },
		func(p *Params) { p.MinDecreaseInterval = -1 },
	}
	for i, f := range bad {
		q := Defaults(100e9)
		f(&q)
		if q.Validate() == nil {
			t.Errorf("case %d: invalid parameters accepted", i)
		}
	}
}

func TestCutHalvesAtAlphaOne(t *testing.T) {
	p := Defaults(40e9)
	r := newRP(p)
	if !r.Allowed(0) || r.Limited() || r.Stage() != LineRate {
		t.Fatal("a new flow must be unpaced at line rate")
	}
	if !r.CNP(10 * us) {
		t.Fatal("first CNP did not cut")
	}
	if !near(r.Rate(), 20e9) || !near(r.Target(), 40e9) {
		t.Fatalf("after first CNP rate %v target %v, want 20G and 40G", r.Rate(), r.Target())
	}
	if want := (1-p.G)*1 + p.G; !near(r.Alpha(), want) {
		t.Fatalf("alpha %v, want %v", r.Alpha(), want)
	}
	// A second CNP at once cuts by (1 - alpha/2) of the current rate.
	a := r.Alpha()
	r.CNP(11 * us)
	if !near(r.Rate(), 20e9*(1-a/2)) || !near(r.Target(), 20e9) {
		t.Fatalf("second cut: rate %v target %v", r.Rate(), r.Target())
	}
	if r.Cuts() != 2 || r.CNPs() != 2 {
		t.Fatalf("cuts %d cnps %d", r.Cuts(), r.CNPs())
	}
}

// With only the timer firing, the first F events are fast recovery (the
// gap to the target halves each time), the next ones additive increase.
func TestTimerStages(t *testing.T) {
	p := Defaults(40e9)
	r := newRP(p)
	r.CNP(0)
	rt, rc := r.Target(), r.Rate()
	T := int64(p.Timer)
	for k := 1; k <= p.F; k++ {
		r.Advance(int64(k) * T)
		rc = (rt + rc) / 2
		if !near(r.Rate(), rc) || !near(r.Target(), rt) {
			t.Fatalf("fast recovery step %d: rate %v target %v, want %v %v", k, r.Rate(), r.Target(), rc, rt)
		}
	}
	if r.Stage() != AdditiveIncrease {
		t.Fatalf("after F timer events stage %v", r.Stage())
	}
	// The target is already the line rate, so additive increase is capped.
	r.Advance(int64(p.F+1) * T)
	if !near(r.Target(), 40e9) {
		t.Fatalf("target %v exceeds line rate", r.Target())
	}
}

func TestAdditiveAndHyper(t *testing.T) {
	p := Defaults(100e9)
	r := newRP(p)
	r.CNP(0)
	r.CNP(1) // two quick cuts put the target below line rate
	rt := r.Target()
	T := int64(p.Timer)
	r.Advance(int64(p.F+1) * T) // F fast-recovery events, then one additive
	if !near(r.Target(), rt+p.AI) {
		t.Fatalf("additive: target %v want %v", r.Target(), rt+p.AI)
	}
	// Byte-counter events: F of them (with the timer already past F) enter
	// hyper increase, whose step grows with i.
	now := int64(p.F+1)*T + 1
	before := r.Target()
	for i := 0; i < p.F; i++ {
		r.Sent(now, int(p.ByteCounter))
	}
	if r.Stage() != HyperIncrease {
		t.Fatalf("stage %v after %d byte events", r.Stage(), p.F)
	}
	// F-1 byte events were additive (timer >= F, bytes < F), the F-th hyper with i = 1.
	want := math.Min(before+float64(p.F-1)*p.AI+p.HAI, p.LineRate)
	if !near(r.Target(), want) {
		t.Fatalf("hyper: target %v want %v", r.Target(), want)
	}
}

func TestRecoversToLineRate(t *testing.T) {
	p := Defaults(100e9)
	r := newRP(p)
	for i := int64(0); i < 10; i++ {
		r.CNP(i)
	}
	if r.Rate() >= 10e9 {
		t.Fatalf("ten cuts left %v", r.Rate())
	}
	// Increase events continue until the flow is back at line rate,
	// whereupon pacing stops.
	r.Advance(int64(time.Second))
	if r.Limited() || r.Rate() != p.LineRate || r.Stage() != LineRate {
		t.Fatalf("after 1 s: limited %v rate %v", r.Limited(), r.Rate())
	}
}

func TestAlphaDecay(t *testing.T) {
	p := Defaults(40e9)
	r := newRP(p)
	r.CNP(0)
	a := r.Alpha()
	P := int64(p.AlphaPeriod)
	r.Advance(10*P + P/2)
	if want := a * math.Pow(1-p.G, 10); !near(r.Alpha(), want) {
		t.Fatalf("alpha %v want %v", r.Alpha(), want)
	}
	// A CNP restarts the quiet period: no decay for the next period.
	r.CNP(10*P + P/2)
	a = r.Alpha()
	r.Advance(11*P + P/2 - 1)
	if !near(r.Alpha(), a) {
		t.Fatalf("alpha decayed inside the quiet period: %v -> %v", a, r.Alpha())
	}
}

func TestMinDecreaseInterval(t *testing.T) {
	p := Defaults(40e9)
	p.MinDecreaseInterval = 4 * time.Microsecond
	r := newRP(p)
	r.CNP(0)
	if r.CNP(2 * us) {
		t.Fatal("a CNP inside the monitor period cut the rate")
	}
	if !r.CNP(5 * us) {
		t.Fatal("a CNP after the monitor period did not cut")
	}
	if r.Cuts() != 2 || r.CNPs() != 3 {
		t.Fatalf("cuts %d cnps %d", r.Cuts(), r.CNPs())
	}
}

func TestPacing(t *testing.T) {
	p := Defaults(8e9) // 1 byte per ns
	r := newRP(p)
	r.CNP(0) // 4 Gbit/s: 1000 bytes take 2000 ns
	if !r.Allowed(0) {
		t.Fatal("the first packet after a cut must go")
	}
	r.Sent(0, 1000)
	if r.Allowed(1999) {
		t.Fatal("paced packet allowed early")
	}
	if r.NextTx() != 2000 {
		t.Fatalf("next slot %d, want 2000", r.NextTx())
	}
	if !r.Allowed(2000) {
		t.Fatal("paced packet not allowed on time")
	}
	// Unused time is not banked: a packet after an idle gap starts a new slot.
	r.Sent(10000, 1000)
	if r.NextTx() < 10000+1900 {
		t.Fatalf("idle time was banked: next %d", r.NextTx())
	}
}

// Observing the state often or rarely gives the same result: the timers are
// evaluated lazily but exactly.
func TestLazyEqualsStepwise(t *testing.T) {
	p := Defaults(25e9)
	a, b := newRP(p), newRP(p)
	cnps := []int64{0, 3 * us, 40 * us, 41 * us, 300 * us, 1200 * us}
	end := 5000 * us
	ci := 0
	for now := int64(0); now <= end; now += us {
		for ci < len(cnps) && cnps[ci] == now {
			a.CNP(now)
			b.CNP(now)
			ci++
		}
		a.Advance(now)
	}
	b.Advance(end)
	if !near(a.Rate(), b.Rate()) || !near(a.Target(), b.Target()) || !near(a.Alpha(), b.Alpha()) {
		t.Fatalf("stepwise %v/%v/%v lazy %v/%v/%v", a.Rate(), a.Target(), a.Alpha(), b.Rate(), b.Target(), b.Alpha())
	}
}

func TestAllocs(t *testing.T) {
	p := Defaults(100e9)
	r := newRP(p)
	now := int64(0)
	n := testing.AllocsPerRun(1000, func() {
		now += 100
		if now%10000 == 0 {
			r.CNP(now)
		}
		if r.Allowed(now) {
			r.Sent(now, 1024)
		}
	})
	if n != 0 {
		t.Fatalf("%v allocations per packet", n)
	}
}

// BenchmarkPacedPacket is the per-packet cost of the reaction point for a
// flow under congestion (one CNP per 50 packets).
func BenchmarkPacedPacket(b *testing.B) {
	p := Defaults(100e9)
	r := newRP(p)
	now := int64(0)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		now += 80
		if i%50 == 0 {
			r.CNP(now)
		}
		if r.Allowed(now) {
			r.Sent(now, 1024)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "packets/s")
}

func TestResume(t *testing.T) {
	p := Defaults(100e9)
	var r RP
	r.Resume(&p, 25e9, 1000)
	if !r.Limited() || r.Rate() != 25e9 || r.Target() != 25e9 || r.Stage() != FastRecovery {
		t.Fatalf("resumed at 25G: limited %v rate %v target %v stage %v", r.Limited(), r.Rate(), r.Target(), r.Stage())
	}
	// Paced at the resumed rate: a 1000 B frame takes 320 ns at 25G.
	if !r.Allowed(1000) {
		t.Fatal("the first packet must go at once")
	}
	r.Sent(1000, 1000)
	if r.Allowed(1319) || !r.Allowed(1320) {
		t.Fatalf("next slot %d, want 1320", r.NextTx())
	}
	// Fast recovery keeps the target: five timer periods later the rate
	// has not moved; after them it climbs back to line rate.
	r.Advance(1000 + 5*int64(p.Timer) - 1)
	if r.Rate() != 25e9 {
		t.Fatalf("fast recovery moved the rate to %v", r.Rate())
	}
	r.Advance(int64(time.Second))
	if r.Limited() || r.Rate() != p.LineRate {
		t.Fatalf("after 1 s: limited %v rate %v", r.Limited(), r.Rate())
	}
	// A CNP cuts it as any flow's.
	r.Resume(&p, 50e9, 0)
	if !r.CNP(10) || r.Rate() >= 50e9 {
		t.Fatalf("a CNP after resuming at 50G left %v", r.Rate())
	}
	// Line rate or above, or no rate: a new flow's start.
	for _, rate := range []float64{0, -1, 100e9, 200e9} {
		r.Resume(&p, rate, 5)
		if r.Limited() || r.Rate() != p.LineRate {
			t.Errorf("resume at %v: limited %v rate %v", rate, r.Limited(), r.Rate())
		}
	}
	// Below the floor: the floor.
	r.Resume(&p, 1, 5)
	if r.Rate() != p.MinRate {
		t.Errorf("resume at 1 bit/s: rate %v, want the floor %v", r.Rate(), p.MinRate)
	}
}
