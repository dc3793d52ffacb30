package report

import (
	"image/color"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Kind is how a chart draws its series.
type Kind uint8

// Chart kinds.
const (
	// Line joins each series' points in order; Chart.Markers adds a dot
	// at every point.
	Line Kind = iota
	// Scatter draws a dot at every point and no lines.
	Scatter
	// Bar draws one bar per point from the baseline (zero, or the bottom
	// of a log axis). With Chart.Categories the X axis is categorical and
	// Y[i] is the bar of category i (series side by side); without, bars
	// stand at their X values, as a histogram's bins do.
	Bar
	// Step holds each Y until the next X: a CDF (see CDF) or a counter
	// sampled at intervals.
	Step
)

func (k Kind) String() string {
	switch k {
	case Line:
		return "line"
	case Scatter:
		return "scatter"
	case Bar:
		return "bar"
	case Step:
		return "step"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Series is one named set of points. X may be empty, in which case the
// points are numbered from zero; otherwise only the first min(len(X),
// len(Y)) points are drawn. Non-finite points are skipped (a line
// breaks there), as are points at or below zero on a log axis.
type Series struct {
	Name string
	X, Y []float64
	// Color is "#rrggbb"; empty takes the next palette color.
	Color string
}

// Chart is a plot that renders the same way to SVG and to PNG. The zero
// value of every field but Series is usable.
type Chart struct {
	Title, XLabel, YLabel string
	Kind                  Kind
	Series                []Series
	// Categories names the bars of a Bar chart, in order.
	Categories []string
	// LogY makes the Y axis base-10 logarithmic.
	LogY bool
	// Markers draws a dot at every point of a Line or Step chart.
	Markers bool
	// Width and Height are in pixels (SVG user units); zero means
	// 800x450. Both are clamped to [minDim, maxDim] so that a bad size
	// cannot allocate gigabytes of raster.
	Width, Height int
}

// Chart sizes.
const (
	DefaultWidth  = 800
	DefaultHeight = 450
	minDim        = 100
	maxDim        = 4096
)

func (c *Chart) size() (int, int) {
	w, h := c.Width, c.Height
	if w <= 0 {
		w = DefaultWidth
	}
	if h <= 0 {
		h = DefaultHeight
	}
	return min(max(w, minDim), maxDim), min(max(h, minDim), maxDim)
}

// CDF is the empirical cumulative distribution of a sample as a Step
// series: the share of values at or below x. Non-finite values are
// left out; the sample is not modified.
func CDF(name string, sample []float64) Series {
	v := make([]float64, 0, len(sample))
	for _, x := range sample {
		if finite(x) {
			v = append(v, x)
		}
	}
	s := Series{Name: name}
	if len(v) == 0 {
		return s
	}
	sort.Float64s(v)
	n := float64(len(v))
	// Start at zero so the first step is visible, then one point per
	// distinct value with the share up to and including it.
	s.X = append(s.X, v[0])
	s.Y = append(s.Y, 0)
	for i := 0; i < len(v); i++ {
		if i+1 < len(v) && v[i+1] == v[i] {
			continue
		}
		s.X = append(s.X, v[i])
		s.Y = append(s.Y, float64(i+1)/n)
	}
	return s
}

// Histogram counts a sample into bins equal-width bins between its
// smallest and largest finite value, as a series for a Bar chart
// without categories: X is each bin's center, Y its count. bins < 1
// picks the square-root rule (at most 100).
func Histogram(name string, sample []float64, bins int) Series {
	lo, hi := math.Inf(1), math.Inf(-1)
	n := 0
	for _, x := range sample {
		if finite(x) {
			lo, hi = math.Min(lo, x), math.Max(hi, x)
			n++
		}
	}
	s := Series{Name: name}
	if n == 0 {
		return s
	}
	if bins < 1 {
		bins = min(max(int(math.Ceil(math.Sqrt(float64(n)))), 1), 100)
	}
	if lo == hi {
		bins = 1
	}
	// Halved so that a sample spanning all of float64 does not overflow.
	w := (hi/2 - lo/2) / float64(bins) * 2
	if w == 0 || math.IsInf(w, 0) {
		s.X, s.Y = []float64{lo/2 + hi/2}, []float64{float64(n)}
		return s
	}
	s.X = make([]float64, bins)
	s.Y = make([]float64, bins)
	for i := range s.X {
		s.X[i] = lo + (float64(i)+0.5)*w
	}
	for _, x := range sample {
		if !finite(x) {
			continue
		}
		// The maximum lands on the upper edge of the last bin; clamped as
		// a float because converting an out-of-range float to int is
		// implementation-defined.
		f := math.Min(math.Max((x/2-lo/2)/(w/2), 0), float64(bins-1))
		s.Y[int(f)]++
	}
	return s
}

// palette is Tableau 10: distinguishable colors that stay apart in
// grayscale print too.
var palette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xff, 0x7f, 0x0e, 0xff}, {0x2c, 0xa0, 0x2c, 0xff},
	{0xd6, 0x27, 0x28, 0xff}, {0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff},
	{0xe3, 0x77, 0xc2, 0xff}, {0x7f, 0x7f, 0x7f, 0xff}, {0xbc, 0xbd, 0x22, 0xff},
	{0x17, 0xbe, 0xcf, 0xff},
}

var (
	colBackground = color.RGBA{0xff, 0xff, 0xff, 0xff}
	colGrid       = color.RGBA{0xe2, 0xe2, 0xe2, 0xff}
	colAxis       = color.RGBA{0x44, 0x44, 0x44, 0xff}
	colText       = color.RGBA{0x22, 0x22, 0x22, 0xff}
	colMuted      = color.RGBA{0x66, 0x66, 0x66, 0xff}
)

func parseColor(s string) (color.RGBA, bool) {
	s = strings.TrimPrefix(s, "#")
	if len(s) != 6 {
		return color.RGBA{}, false
	}
	v, err := strconv.ParseUint(s, 16, 32)
	if err != nil {
		return color.RGBA{}, false
	}
	return color.RGBA{uint8(v >> 16), uint8(v >> 8), uint8(v), 0xff}, true
}

func (c *Chart) seriesColor(i int) color.RGBA {
	if col, ok := parseColor(c.Series[i].Color); ok {
		return col
	}
	return palette[i%len(palette)]
}

// points returns series i's drawable points in order, with a NaN pair
// wherever a point was skipped so that lines break there.
func (c *Chart) points(i int) (xs, ys []float64) {
	s := &c.Series[i]
	n := len(s.Y)
	if len(s.X) > 0 {
		n = min(n, len(s.X))
	}
	xs = make([]float64, 0, n)
	ys = make([]float64, 0, n)
	for j := 0; j < n; j++ {
		x := float64(j)
		if len(s.X) > 0 {
			x = s.X[j]
		}
		y := s.Y[j]
		if c.Kind == Bar && len(c.Categories) > 0 {
			if j >= len(c.Categories) {
				break
			}
			x = float64(j)
		}
		if !finite(x) || !finite(y) || (c.LogY && y <= 0) {
			x, y = math.NaN(), math.NaN()
		}
		xs = append(xs, x)
		ys = append(ys, y)
	}
	return xs, ys
}
