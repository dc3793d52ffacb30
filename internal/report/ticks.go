package report

import (
	"math"
	"strconv"
	"strings"
)

// maxTicks bounds every tick list: a degenerate range (values at the
// limit of float64 precision) must not turn into a loop over millions of
// identical ticks.
const maxTicks = 50

// NiceTicks returns about n tick values covering [lo, hi], spaced by a
// "nice" step (1, 2, 2.5 or 5 times a power of ten) so that a reader can
// interpolate between them. The first tick is at or below lo and the last
// at or above hi, unless that would leave the float64 range. A degenerate
// range (lo == hi) is widened around its value; non-finite bounds yield
// nil.
func NiceTicks(lo, hi float64, n int) []float64 {
	if !finite(lo) || !finite(hi) {
		return nil
	}
	if lo > hi {
		lo, hi = hi, lo
	}
	if lo == hi {
		lo, hi = widen(lo)
	}
	if n < 2 {
		n = 2
	}
	if n > maxTicks {
		n = maxTicks
	}
	// The span divided first: hi-lo overflows when the range covers most of
	// float64 (-1e308..1e308) while hi/k-lo/k does not.
	k := float64(n - 1)
	step := niceStep(hi/k - lo/k)
	if !(step > 0) || math.IsInf(step, 0) {
		return []float64{lo, hi}
	}
	first := math.Floor(lo / step)
	last := math.Ceil(hi / step)
	if last-first > 4*maxTicks {
		// step is below the spacing of float64 at this magnitude; the two
		// ends are all that can be told apart.
		return []float64{lo, hi}
	}
	ticks := make([]float64, 0, int(last-first)+1)
	// Counted with an int: at 1e16 and beyond, first+1 == first in
	// float64 and a float loop counter would never advance.
	for i := 0; i <= int(last-first); i++ {
		v := (first + float64(i)) * step
		if math.Abs(first) >= 1<<52 {
			v = first*step + float64(i)*step
		}
		if !finite(v) {
			// Beyond ±MaxFloat64: the axis ends at the data instead.
			continue
		}
		if v == 0 {
			v = 0 // no -0 labels
		}
		if len(ticks) > 0 && v <= ticks[len(ticks)-1] {
			continue
		}
		ticks = append(ticks, v)
	}
	if len(ticks) < 2 {
		return []float64{lo, hi}
	}
	return ticks
}

// niceStep rounds a raw step up to 1, 2, 2.5 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if !(raw > 0) || math.IsInf(raw, 0) {
		return 0
	}
	exp := math.Floor(math.Log10(raw))
	// math.Pow10 saturates to 0 and +Inf at the ends of the exponent
	// range; the checks at the callers handle both.
	mag := math.Pow10(int(exp))
	f := raw / mag
	var nf float64
	switch {
	case f <= 1:
		nf = 1
	case f <= 2:
		nf = 2
	case f <= 2.5:
		nf = 2.5
	case f <= 5:
		nf = 5
	default:
		nf = 10
	}
	return nf * mag
}

// widen turns a single value into a range around it, without leaving
// the float64 range and without collapsing for subnormal values.
func widen(v float64) (float64, float64) {
	d := math.Abs(v) * 0.1
	lo, hi := v-d, v+d
	if lo == hi || d == 0 {
		return v - 1, v + 1
	}
	if math.IsInf(hi, 0) {
		hi = math.MaxFloat64
	}
	if math.IsInf(lo, 0) {
		lo = -math.MaxFloat64
	}
	return lo, hi
}

// LogTicks returns tick values for a base-10 logarithmic axis over
// [lo, hi], both positive: powers of ten, every k-th decade when there
// are many, with 2 and 5 multiples added when the range is short. A
// range within one decade falls back to linear nice ticks.
func LogTicks(lo, hi float64) []float64 {
	if !(lo > 0) || !(hi > 0) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		return nil
	}
	if lo > hi {
		lo, hi = hi, lo
	}
	// The slack keeps an exact power of ten (whose Log10 may come out a
	// hair off) from adding a decade.
	d0 := math.Floor(math.Log10(lo) + 1e-9)
	d1 := math.Ceil(math.Log10(hi) - 1e-9)
	if d1 == d0 {
		d1++
	}
	decades := d1 - d0
	// At most about ten labelled decades, every 1, 2, 5, 10, 20...
	// decades and on multiples of that, so that 1e-300..1e300 reads
	// 1e-300, 1e-200, ... rather than from wherever the data began.
	every := math.Ceil(niceStep(decades / 10))
	if every > 1 {
		d0 = math.Floor(d0/every) * every
	}
	var ticks []float64
	for e := d0; e < d1+every; e += every {
		if v := math.Pow(10, e); v > 0 && !math.IsInf(v, 0) {
			ticks = append(ticks, v)
		}
	}
	if decades <= 2 {
		// Two decades or fewer: the powers of ten alone are too sparse to
		// read a value off; add the 2 and 5 multiples.
		var fine []float64
		for _, t := range ticks {
			for _, m := range []float64{1, 2, 5} {
				if v := t * m; v <= math.Pow(10, d1) && !math.IsInf(v, 0) {
					fine = append(fine, v)
				}
			}
		}
		ticks = fine
	}
	if len(ticks) < 2 {
		return []float64{lo, hi}
	}
	return ticks
}

// formatTicks labels a list of linear ticks consistently: one unit (an
// SI prefix for large values) and one number of decimals for the whole
// axis, chosen from the step, so that labels line up and differ. When
// float64 cannot tell ticks apart at that precision it falls back to
// more significant digits.
func formatTicks(ticks []float64) []string {
	labels := make([]string, len(ticks))
	if len(ticks) == 0 {
		return labels
	}
	maxAbs := 0.0
	for _, t := range ticks {
		maxAbs = math.Max(maxAbs, math.Abs(t))
	}
	step := maxAbs
	if len(ticks) > 1 {
		step = math.Abs(ticks[1] - ticks[0])
	}
	switch {
	case maxAbs == 0:
		// all zero
	case maxAbs >= 1e4 && maxAbs < 1e21 && step >= 1:
		// SI prefixes: 2.5M reads faster than 2500000 and stays short in
		// the tick margin.
		exp3 := int(math.Floor(math.Log10(maxAbs) / 3))
		unit := math.Pow10(3 * exp3)
		suffix := string("kMGTPEZ"[exp3-1])
		dec := decimalsFor(step / unit)
		for i, t := range ticks {
			labels[i] = trimZero(strconv.FormatFloat(t/unit, 'f', dec, 64))
			if labels[i] != "0" {
				labels[i] += suffix
			}
		}
	case maxAbs < 1e4 && step >= 1e-4:
		dec := decimalsFor(step)
		for i, t := range ticks {
			labels[i] = trimZero(strconv.FormatFloat(t, 'f', dec, 64))
		}
	default:
		for i, t := range ticks {
			labels[i] = formatG(t, 2)
		}
	}
	for prec := 3; prec <= 17 && !distinct(labels); prec++ {
		for i, t := range ticks {
			labels[i] = formatG(t, prec)
		}
	}
	return labels
}

// formatLog labels one tick of a logarithmic axis; its ticks span
// decades, so each gets the shortest form of its own value.
func formatLog(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e4 && a < 1e21:
		exp3 := int(math.Floor(math.Log10(a) / 3))
		return strconv.FormatFloat(v/math.Pow10(3*exp3), 'g', 3, 64) + string("kMGTPEZ"[exp3-1])
	case a >= 1e-3 && a < 1e4:
		return strconv.FormatFloat(v, 'g', 4, 64)
	default:
		return formatG(v, 2)
	}
}

// decimalsFor is the number of decimals that shows a multiple of step
// exactly (up to six).
func decimalsFor(step float64) int {
	for d := 0; d < 6; d++ {
		s := step * math.Pow10(d)
		if math.Abs(s-math.Round(s)) < 1e-6*math.Max(1, s) {
			return d
		}
	}
	return 6
}

func formatG(v float64, prec int) string {
	if v == 0 {
		return "0"
	}
	s := strconv.FormatFloat(v, 'g', prec, 64)
	// 1e+06 reads as well as 1e6 and is wider for nothing.
	s = strings.Replace(s, "e+0", "e", 1)
	s = strings.Replace(s, "e+", "e", 1)
	s = strings.Replace(s, "e-0", "e-", 1)
	return s
}

// trimZero drops trailing zeros after a decimal point ("12.50" is
// "12.5", "13.0" is "13") and the sign of zero.
func trimZero(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s == "-0" || s == "" {
		return "0"
	}
	return s
}

func distinct(labels []string) bool {
	for i := 1; i < len(labels); i++ {
		if labels[i] == labels[i-1] {
			return false
		}
	}
	return true
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
