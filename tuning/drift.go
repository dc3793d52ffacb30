package tuning

import (
	"math"
	"slices"
)

// noisePairs is how many differences between repeated measurements of one
// configuration the drift test keeps to estimate the noise: enough for a
// median that one phase change cannot move, few enough to follow a
// workload whose noise level changes.
const noisePairs = 64

// minRef is how many re-measurements of a configuration the reference
// needs before a new one is held to it: one window's luck would otherwise
// set the level every later window is judged against.
const minRef = 2

// minNoisePairs is how many such differences the test needs before it
// judges at all: below that its noise estimate is a guess.
const minNoisePairs = 4

// Drift tells a changed workload from measurement noise, from the
// re-measurements of the current configuration (Algorithm 1, line 7,
// online).
//
// A fixed fraction ("f(x) moved by 5%") cannot do this on a live fabric:
// window-to-window noise under one configuration is itself several
// percent (every message is a new, newly hashed flow; closed-loop senders
// skip bursts unevenly), so the fraction either fires on noise or misses
// real changes. Drift measures the noise instead: two consecutive
// re-measurements of the same configuration differ by noise alone, with
// sqrt(2) times its spread; the noise sigma is the median absolute
// difference over the last noisePairs such pairs, /0.6745/sqrt(2) (a
// median, so the jump of a phase change does not inflate it). A new
// re-measurement is "out" when it lies more than Sigma noise deviations
// (with the reference's own uncertainty: sigma*sqrt(1+1/n) for a
// reference that is the mean of n re-measurements) and more than Floor of
// the reference away from the mean of the reference; After outs in a row
// on the same side are a change.
//
// The reference never includes the measurement that made x current: x
// was accepted because that measurement was high, so it overstates f(x)
// (the winner's curse) and every re-measurement after an acceptance would
// look like a drop. When x moved to a point measured better (Improved),
// the earlier points' re-measurements stay the reference until x has
// minRef of its own, and only drops count against them: a better point
// measuring lower than its worse predecessor by three noise deviations is
// a change, not luck. In a flat region a noisy annealer moves on every
// other proposal, and a reference that restarted on every move would
// never judge at all.
type Drift struct {
	Sigma float64 `json:"sigma"`
	Floor float64 `json:"floor"`
	After int     `json:"after"`
	// Ref is the reference re-measurements; Own how many of them (the
	// last) are of the current configuration; Diffs the last differences
	// between consecutive re-measurements of one configuration; Run the
	// outs in a row and Side their sign.
	Ref   []float64 `json:"ref,omitempty"`
	Own   int       `json:"own,omitempty"`
	Diffs []float64 `json:"diffs,omitempty"`
	Run   int       `json:"run,omitempty"`
	Side  int       `json:"side,omitempty"`
}

// Noise is the current estimate of the noise's standard deviation, and
// false while there are too few pairs to estimate it.
func (d *Drift) Noise() (float64, bool) {
	if len(d.Diffs) < minNoisePairs {
		return 0, false
	}
	a := make([]float64, len(d.Diffs))
	for i, v := range d.Diffs {
		a[i] = math.Abs(v)
	}
	slices.Sort(a)
	m := a[len(a)/2]
	if len(a)%2 == 0 {
		m = (a[len(a)/2-1] + a[len(a)/2]) / 2
	}
	return m / 0.6745 / math.Sqrt2, true
}

// Rebase starts a new configuration whose measurement says nothing about
// the old one's level (a worse point taken by the Metropolis test): its
// re-measurements start a new reference. The noise estimate stays (it is
// the fabric's, not x's).
func (d *Drift) Rebase() { d.Ref, d.Own, d.Run, d.Side = d.Ref[:0], 0, 0, 0 }

// Improved starts a new configuration measured better than the old: the
// old reference holds, for drops only, until the new one has its own.
func (d *Drift) Improved() { d.Own, d.Run, d.Side = 0, 0, 0 }

// Observe takes a re-measurement f of the current configuration and
// reports whether the workload changed. On a change the reference
// restarts at the outs that showed it.
func (d *Drift) Observe(f float64) bool {
	n := len(d.Ref)
	if d.Own > 0 && n > 0 {
		d.Diffs = append(d.Diffs, f-d.Ref[n-1])
		if len(d.Diffs) > noisePairs {
			d.Diffs = append(d.Diffs[:0], d.Diffs[len(d.Diffs)-noisePairs:]...)
		}
	}
	sigma, ok := d.Noise()
	// The reference is the mean of the earlier re-measurements; the
	// outs in a row are not part of it until they are judged noise.
	k := n - d.Run
	if (d.Sigma > 0 && !ok) || k < minRef {
		d.push(f, false)
		return false
	}
	ref := 0.0
	for _, v := range d.Ref[:k] {
		ref += v
	}
	ref /= float64(k)
	thr := max(d.Sigma*sigma*math.Sqrt(1+1/float64(k)), d.Floor*math.Abs(ref))
	dev := f - ref
	side := 1
	if dev < 0 {
		side = -1
	}
	// Against an earlier point's reference only a drop counts.
	out := math.Abs(dev) > thr && (d.Own+d.Run >= minRef || side < 0)
	if !out || (d.Run > 0 && side != d.Side) {
		d.Run, d.Side = 0, 0
		if out {
			d.Run, d.Side = 1, side
		}
		d.push(f, d.Run > 0)
		return false
	}
	d.Run++
	d.Side = side
	d.push(f, true)
	if d.Run < max(d.After, 1) {
		return false
	}
	// A change: the new workload's values are the reference from now.
	d.Ref = append(d.Ref[:0], d.Ref[len(d.Ref)-d.Run:]...)
	d.Own = d.Run
	d.Run, d.Side = 0, 0
	return true
}

// push appends a re-measurement of the current configuration to the
// reference. Once the configuration has minRef of its own (and none is
// pending as an out), earlier configurations' values leave it; it keeps
// the last noisePairs: online the history normalisation moves f(x)
// slowly, and a reference of everything would lag behind it.
func (d *Drift) push(f float64, pending bool) {
	d.Ref = append(d.Ref, f)
	d.Own++
	if d.Own >= minRef && d.Own < len(d.Ref) && !pending {
		d.Ref = append(d.Ref[:0], d.Ref[len(d.Ref)-d.Own:]...)
	}
	if len(d.Ref) > noisePairs {
		d.Ref = append(d.Ref[:0], d.Ref[len(d.Ref)-noisePairs:]...)
		d.Own = min(d.Own, noisePairs)
	}
}
