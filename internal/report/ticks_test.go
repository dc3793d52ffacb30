package report

import (
	"math"
	"slices"
	"testing"
)

func TestNiceTicks(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		n      int
		want   []float64
	}{
		{0, 1, 6, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}},
		{0, 100, 5, []float64{0, 25, 50, 75, 100}},
		{0, 100, 11, []float64{0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100}},
		{3, 97, 5, []float64{0, 25, 50, 75, 100}},
		{-7, 7, 3, []float64{-10, 0, 10}},
		{12, 13, 3, []float64{12, 12.5, 13}},
		{1e9, 4e9, 4, []float64{1e9, 2e9, 3e9, 4e9}},
		{0.001, 0.004, 4, []float64{0.001, 0.002, 0.003, 0.004}},
		{100, 0, 5, []float64{0, 25, 50, 75, 100}}, // reversed bounds
	} {
		got := NiceTicks(tc.lo, tc.hi, tc.n)
		if !slices.EqualFunc(got, tc.want, approx) {
			t.Errorf("NiceTicks(%g, %g, %d) = %v, want %v", tc.lo, tc.hi, tc.n, got, tc.want)
		}
	}
}

func approx(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) }

// TestNiceTicksProperties checks what every axis relies on, over ranges
// that are not hand-picked: ticks increase, cover the range, are few,
// and their step is 1, 2, 2.5 or 5 times a power of ten.
func TestNiceTicksProperties(t *testing.T) {
	for _, r := range [][2]float64{
		{0, 1}, {-1, 1}, {0.3, 0.7}, {1, 1e6}, {-123.4, 5678.9}, {1e-9, 3e-9},
		{17, 17.0001}, {-1e15, 1e15}, {0, 86400}, {99, 101}, {0.5, 0.5000001},
	} {
		for n := 2; n <= 12; n++ {
			ticks := NiceTicks(r[0], r[1], n)
			if len(ticks) < 2 || len(ticks) > 2*n+2 {
				t.Fatalf("NiceTicks(%g, %g, %d): %d ticks: %v", r[0], r[1], n, len(ticks), ticks)
			}
			if ticks[0] > r[0] || ticks[len(ticks)-1] < r[1] {
				t.Errorf("NiceTicks(%g, %g, %d) = %v does not cover the range", r[0], r[1], n, ticks)
			}
			step := ticks[1] - ticks[0]
			for i := 1; i < len(ticks); i++ {
				if d := ticks[i] - ticks[i-1]; !(d > 0) || !approxRel(d, step, 1e-6) {
					t.Fatalf("NiceTicks(%g, %g, %d) = %v: uneven step", r[0], r[1], n, ticks)
				}
			}
			m := step / math.Pow10(int(math.Floor(math.Log10(step))))
			if !slices.ContainsFunc([]float64{1, 2, 2.5, 5, 10}, func(v float64) bool { return approxRel(v, m, 1e-6) }) {
				t.Errorf("NiceTicks(%g, %g, %d): step %g is not nice", r[0], r[1], n, step)
			}
		}
	}
}

func approxRel(a, b, eps float64) bool {
	return math.Abs(a-b) <= eps*math.Max(math.Abs(a), math.Abs(b))
}

func TestNiceTicksDegenerate(t *testing.T) {
	if got := NiceTicks(math.NaN(), 1, 5); got != nil {
		t.Errorf("NaN bound: %v", got)
	}
	if got := NiceTicks(0, math.Inf(1), 5); got != nil {
		t.Errorf("Inf bound: %v", got)
	}
	for _, tc := range []struct{ lo, hi float64 }{
		{5, 5}, {0, 0}, {-3, -3},
		{-math.MaxFloat64, math.MaxFloat64}, {math.MaxFloat64, math.MaxFloat64},
		{0, math.SmallestNonzeroFloat64}, {math.SmallestNonzeroFloat64, math.SmallestNonzeroFloat64},
		{1e16, 1e16 + 4}, // step below float64 spacing
	} {
		ticks := NiceTicks(tc.lo, tc.hi, 5)
		if len(ticks) < 2 || len(ticks) > 4*maxTicks+1 {
			t.Errorf("NiceTicks(%g, %g): %v", tc.lo, tc.hi, ticks)
		}
		for i, v := range ticks {
			if !finite(v) || (i > 0 && v <= ticks[i-1]) {
				t.Errorf("NiceTicks(%g, %g) = %v: not finite and increasing", tc.lo, tc.hi, ticks)
				break
			}
		}
		// Past ±1e307 the next nice tick may not exist in float64; the
		// axis then ends at the data.
		if (ticks[0] > tc.lo && tc.lo > -1e307) || (ticks[len(ticks)-1] < tc.hi && tc.hi < 1e307) {
			t.Errorf("NiceTicks(%g, %g) = %v does not cover the value", tc.lo, tc.hi, ticks)
		}
	}
}

func TestLogTicks(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		want   []float64
	}{
		{1, 1000, []float64{1, 10, 100, 1000}},
		{3, 700, []float64{1, 10, 100, 1000}},
		{2, 30, []float64{1, 2, 5, 10, 20, 50, 100}},
		{1e-3, 1e-1, []float64{1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 1e-1}},
		{1, 1e20, []float64{1, 1e2, 1e4, 1e6, 1e8, 1e10, 1e12, 1e14, 1e16, 1e18, 1e20}},
	} {
		if got := LogTicks(tc.lo, tc.hi); !slices.EqualFunc(got, tc.want, approx) {
			t.Errorf("LogTicks(%g, %g) = %v, want %v", tc.lo, tc.hi, got, tc.want)
		}
	}
	for _, bad := range [][2]float64{{0, 10}, {-1, 10}, {math.NaN(), 1}, {1, math.Inf(1)}} {
		if got := LogTicks(bad[0], bad[1]); got != nil {
			t.Errorf("LogTicks(%g, %g) = %v, want nil", bad[0], bad[1], got)
		}
	}
	// The whole float64 range: bounded, finite, increasing.
	ticks := LogTicks(math.SmallestNonzeroFloat64, math.MaxFloat64)
	if len(ticks) < 2 || len(ticks) > 12 {
		t.Fatalf("LogTicks over all of float64: %v", ticks)
	}
	for i, v := range ticks {
		if !finite(v) || !(v > 0) || (i > 0 && v <= ticks[i-1]) {
			t.Fatalf("LogTicks over all of float64: %v", ticks)
		}
	}
}

func TestFormatTicks(t *testing.T) {
	for _, tc := range []struct {
		ticks []float64
		want  []string
	}{
		{[]float64{0, 0.2, 0.4}, []string{"0", "0.2", "0.4"}},
		{[]float64{0, 25, 50}, []string{"0", "25", "50"}},
		{[]float64{12, 12.5, 13}, []string{"12", "12.5", "13"}},
		{[]float64{-10, 0, 10}, []string{"-10", "0", "10"}},
		{[]float64{0, 5000, 10000}, []string{"0", "5k", "10k"}},
		{[]float64{0, 2.5e6, 5e6}, []string{"0", "2.5M", "5M"}},
		{[]float64{1e9, 2e9, 3e9}, []string{"1G", "2G", "3G"}},
		{[]float64{0, 1e-6, 2e-6}, []string{"0", "1e-6", "2e-6"}},
		{[]float64{1e16, 1e16 + 2}, []string{"10000000000000000", "10000000000000002"}},
		{[]float64{-1e300, 0, 1e300}, []string{"-1e300", "0", "1e300"}},
	} {
		got := formatTicks(tc.ticks)
		if !slices.Equal(got, tc.want) {
			t.Errorf("formatTicks(%v) = %q, want %q", tc.ticks, got, tc.want)
		}
	}
	for _, tc := range []struct {
		v    float64
		want string
	}{{1, "1"}, {10, "10"}, {1000, "1000"}, {1e4, "10k"}, {1e6, "1M"}, {2e-3, "0.002"}, {1e-6, "1e-6"}, {1e30, "1e30"}} {
		if got := formatLog(tc.v); got != tc.want {
			t.Errorf("formatLog(%g) = %q, want %q", tc.v, got, tc.want)
		}
	}
}
