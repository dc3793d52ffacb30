package workload

import (
	"bufio"
	_ "embed"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
)

// CDF is an empirical flow-size distribution: points (size in bytes,
// cumulative probability), sizes in between interpolated linearly, as the
// ns-3 traffic generators of HPCC and its successors read them.
type CDF struct {
	size []float64 // non-decreasing
	prob []float64 // non-decreasing fractions, last = 1
}

// Limits on what ParseCDF accepts: sizes fit an int64 with room to spare,
// and a distribution is a table, not a data set.
const (
	maxCDFSize   = 1 << 50 // 1 PiB
	maxCDFPoints = 100000
)

// ParseCDF reads the ns-3 / HPCC text format: one point per line, "size
// probability", separated by blanks. Probabilities are cumulative and may
// be percentages (the last is 100, as in HPCC's files) or fractions (the
// last is 1). Blank lines and lines starting with '#' are skipped. Sizes
// and probabilities must not decrease. A first probability above zero is
// an atom: that share of flows has exactly the first size.
func ParseCDF(r io.Reader) (*CDF, error) {
	c := &CDF{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 1<<16)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		f := strings.Fields(text)
		if len(f) != 2 {
			return nil, fmt.Errorf("workload: cdf line %d: %q: want \"size probability\"", line, text)
		}
		size, err := strconv.ParseFloat(f[0], 64)
		if err != nil || math.IsNaN(size) || size < 0 || size > maxCDFSize {
			return nil, fmt.Errorf("workload: cdf line %d: size %q: want bytes, 0 to %d", line, f[0], int64(maxCDFSize))
		}
		p, err := strconv.ParseFloat(f[1], 64)
		if err != nil || math.IsNaN(p) || p < 0 || p > 100 {
			return nil, fmt.Errorf("workload: cdf line %d: probability %q: want 0..1 or a percentage 0..100", line, f[1])
		}
		if n := len(c.size); n > 0 {
			if size < c.size[n-1] {
				return nil, fmt.Errorf("workload: cdf line %d: size %v is below the previous point's %v", line, size, c.size[n-1])
			}
			if p < c.prob[n-1] {
				return nil, fmt.Errorf("workload: cdf line %d: probability %v is below the previous point's %v", line, p, c.prob[n-1])
			}
		}
		if len(c.size) == maxCDFPoints {
			return nil, fmt.Errorf("workload: cdf line %d: more than %d points", line, maxCDFPoints)
		}
		c.size = append(c.size, size)
		c.prob = append(c.prob, p)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("workload: cdf line %d: %w", line+1, err)
	}
	if len(c.size) == 0 {
		return nil, fmt.Errorf("workload: cdf has no points")
	}
	last := c.prob[len(c.prob)-1]
	var scale float64
	switch {
	case math.Abs(last-1) < 1e-9:
		scale = last
	case math.Abs(last-100) < 1e-7:
		scale = last
	default:
		return nil, fmt.Errorf("workload: cdf ends at probability %v: the last point must be 1 (or 100 for percentages)", last)
	}
	for i := range c.prob {
		c.prob[i] /= scale
	}
	c.prob[len(c.prob)-1] = 1
	return c, nil
}

func mustCDF(text string) *CDF {
	c, err := ParseCDF(strings.NewReader(text))
	if err != nil {
		panic(err)
	}
	return c
}

var (
	//go:embed websearch.txt
	webSearchText string
	//go:embed hawkeye.txt
	hawkeyeText string
)

var (
	// WebSearch is the web-search flow-size distribution of the DCTCP
	// paper in HPCC's WebSearch_distribution.txt: 0 to 30 MB, 15% below 10
	// KB, mean about 1.71 MB. The simulator's default.
	WebSearch = mustCDF(webSearchText)
	// Hawkeye is the Hawkeye paper's workload: 80% of flows below 10 MB,
	// 90% below 100 MB, the rest 100 to 300 MB; mean about 26.7 MB. The
	// paper gives only those figures, so the shape below 10 MB (equal mass
	// per decade from 1 KB) is an assumption; hawkeye.txt says so.
	Hawkeye = mustCDF(hawkeyeText)
)

// Quantile is the size at cumulative probability u in [0, 1]: the inverse
// of the CDF, interpolating linearly between points.
func (c *CDF) Quantile(u float64) float64 {
	// The first point with probability above u ends u's segment; none
	// does only for u = 1 (or above), which is the largest size.
	i := sort.Search(len(c.prob), func(i int) bool { return c.prob[i] > u })
	switch {
	case i == 0:
		return c.size[0]
	case i == len(c.prob):
		return c.size[len(c.size)-1]
	}
	p0, p1 := c.prob[i-1], c.prob[i]
	x0, x1 := c.size[i-1], c.size[i]
	return x0 + (u-p0)/(p1-p0)*(x1-x0)
}

// Prob is the cumulative probability of sizes up to x: the CDF itself.
func (c *CDF) Prob(x float64) float64 {
	// The last point at or below x; between it and the next, linear.
	i := sort.Search(len(c.size), func(i int) bool { return c.size[i] > x })
	switch {
	case i == 0:
		return 0
	case i == len(c.size):
		return 1
	}
	x0, x1 := c.size[i-1], c.size[i]
	p0, p1 := c.prob[i-1], c.prob[i]
	return p0 + (x-x0)/(x1-x0)*(p1-p0)
}

// Sample draws a flow size by inverse transform: a uniform probability
// mapped through Quantile, rounded to whole bytes and at least 1 (a flow
// carries something).
func (c *CDF) Sample(rng *rand.Rand) int64 {
	return max(int64(math.Round(c.Quantile(rng.Float64()))), 1)
}

// Mean is the distribution's expected size in bytes (before Sample's
// rounding): the atom at the first point plus the midpoint of every
// segment weighted by its probability.
func (c *CDF) Mean() float64 {
	m := c.prob[0] * c.size[0]
	for i := 1; i < len(c.size); i++ {
		m += (c.prob[i] - c.prob[i-1]) * (c.size[i] + c.size[i-1]) / 2
	}
	return m
}

// Points returns copies of the distribution's sizes and cumulative
// probabilities (as fractions).
func (c *CDF) Points() (sizes, probs []float64) {
	return append([]float64(nil), c.size...), append([]float64(nil), c.prob...)
}
