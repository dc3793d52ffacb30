package report

import (
	"image/color"
	"math"
	"sort"
	"strconv"
)

// The chart is laid out once against a backend's text metrics and drawn
// through the canvas interface, so the SVG and the PNG of a chart come
// from the same code and only differ in how a primitive reaches pixels.

type textSize uint8

const (
	sizeTick textSize = iota // tick labels, legend
	sizeLabel
	sizeTitle
)

type anchor uint8

const (
	anchorStart anchor = iota
	anchorMiddle
	anchorEnd
)

type canvas interface {
	textWidth(s string, sz textSize) float64
	textHeight(sz textSize) float64
	// rule is a crisp one-pixel horizontal or vertical line (grid, axes,
	// ticks).
	rule(x1, y1, x2, y2 float64, c color.RGBA)
	fillRect(x, y, w, h float64, c color.RGBA)
	// polyline strokes a run of points (x0, y0, x1, y1, ...); there are
	// no NaNs in it.
	polyline(xy []float64, width float64, c color.RGBA)
	circle(cx, cy, r float64, c color.RGBA)
	// text is drawn with its vertical center at y; vertical text reads
	// bottom to top with x as its center line.
	text(x, y float64, s string, sz textSize, a anchor, vertical bool, c color.RGBA)
	beginSeries(name string)
	endSeries()
}

// axis maps data values to pixels.
type axis struct {
	lo, hi float64 // domain
	log    bool
	p0, p1 float64 // pixels of lo and hi
	ticks  []float64
	labels []string
}

func (a *axis) at(v float64) float64 {
	var t float64
	if a.log {
		l0, l1 := math.Log10(a.lo), math.Log10(a.hi)
		t = (math.Log10(v) - l0) / (l1 - l0)
	} else {
		// Halved so that a domain of -1e308..1e308 does not overflow.
		t = (v/2 - a.lo/2) / (a.hi/2 - a.lo/2)
	}
	if !finite(t) {
		t = 0.5
	}
	return a.p0 + t*(a.p1-a.p0)
}

type legendEntry struct {
	name string
	col  color.RGBA
}

// layout is where everything goes: computed from the chart and the
// backend's text metrics only.
type layout struct {
	w, h               float64
	px0, py0, px1, py1 float64 // plot area: left, top, right, bottom
	x, y               axis
	categorical        bool
	barSlot            float64 // data units one group of bars may span
	legend             []legendEntry
	legendX, legendY   float64
	legendW            float64
	empty              bool
	xs, ys             [][]float64 // drawable points per series
	title              string
}

const (
	pad       = 8.0
	tickLen   = 5.0
	swatchLen = 18.0
)

func computeLayout(c *Chart, m canvas) *layout {
	w, h := c.size()
	l := &layout{w: float64(w), h: float64(h)}
	l.categorical = c.Kind == Bar && len(c.Categories) > 0
	l.y.log = c.LogY

	// Data ranges over every drawable point.
	xlo, xhi := math.Inf(1), math.Inf(-1)
	ylo, yhi := math.Inf(1), math.Inf(-1)
	var uniqX []float64
	l.xs = make([][]float64, len(c.Series))
	l.ys = make([][]float64, len(c.Series))
	for i := range c.Series {
		xs, ys := c.points(i)
		l.xs[i], l.ys[i] = xs, ys
		for j := range xs {
			if math.IsNaN(xs[j]) {
				continue
			}
			xlo, xhi = math.Min(xlo, xs[j]), math.Max(xhi, xs[j])
			ylo, yhi = math.Min(ylo, ys[j]), math.Max(yhi, ys[j])
			if c.Kind == Bar {
				uniqX = append(uniqX, xs[j])
			}
		}
	}
	l.empty = xlo > xhi
	if l.empty {
		xlo, xhi, ylo, yhi = 0, 1, 0, 1
		if c.LogY {
			ylo, yhi = 1, 10
		}
	}
	if c.Kind == Bar && !c.LogY {
		// Bars stand on zero; leaving it out would exaggerate differences.
		ylo, yhi = math.Min(ylo, 0), math.Max(yhi, 0)
	}
	switch {
	case l.categorical:
		xlo, xhi = -0.5, float64(len(c.Categories))-0.5
		l.barSlot = 1
	case c.Kind == Bar:
		l.barSlot = minGap(uniqX)
		if l.barSlot == 0 {
			a, b := widen(xlo)
			l.barSlot = b/2 - a/2
		}
		xlo, xhi = xlo-l.barSlot/2, xhi+l.barSlot/2
	}
	if xlo == xhi {
		xlo, xhi = widen(xlo)
	}
	if math.IsInf(xlo, 0) || math.IsInf(xhi, 0) {
		xlo, xhi = math.Max(xlo, -math.MaxFloat64), math.Min(xhi, math.MaxFloat64)
	}

	// Vertical space: title, plot, x tick labels and x label.
	tickH := m.textHeight(sizeTick)
	l.py0 = pad
	if c.Title != "" {
		l.py0 += m.textHeight(sizeTitle) + pad
	}
	l.py1 = l.h - pad - tickLen - 3 - tickH
	if c.XLabel != "" {
		l.py1 -= m.textHeight(sizeLabel) + pad
	}
	if l.py1-l.py0 < 20 {
		l.py1 = l.py0 + 20
	}

	// Y ticks, now that the plot height is known; their labels' width
	// sets the left margin.
	ny := min(max(int((l.py1-l.py0)/45), 2), 10)
	if c.LogY {
		ylo, yhi = yRangeLog(ylo, yhi)
		l.y.ticks = LogTicks(ylo, yhi)
		l.y.lo, l.y.hi = ylo, yhi
		for _, t := range l.y.ticks {
			l.y.lo, l.y.hi = math.Min(l.y.lo, t), math.Max(l.y.hi, t)
			l.y.labels = append(l.y.labels, formatLog(t))
		}
	} else {
		if ylo == yhi {
			ylo, yhi = widen(ylo)
		}
		l.y.ticks = NiceTicks(ylo, yhi, ny)
		l.y.lo, l.y.hi = ylo, yhi
		for _, t := range l.y.ticks {
			l.y.lo, l.y.hi = math.Min(l.y.lo, t), math.Max(l.y.hi, t)
		}
		l.y.labels = formatTicks(l.y.ticks)
	}
	l.y.p0, l.y.p1 = l.py1, l.py0
	labelW := 0.0
	for _, s := range l.y.labels {
		labelW = math.Max(labelW, m.textWidth(s, sizeTick))
	}
	l.px0 = pad + labelW + tickLen + 3
	if c.YLabel != "" {
		l.px0 += m.textHeight(sizeLabel) + pad
	}

	// Legend in the right margin, for the named series.
	for i, s := range c.Series {
		if s.Name != "" {
			l.legend = append(l.legend, legendEntry{name: s.Name, col: c.seriesColor(i)})
		}
	}
	l.px1 = l.w - pad
	if len(l.legend) > 0 {
		nameW := 0.0
		for _, e := range l.legend {
			nameW = math.Max(nameW, m.textWidth(e.name, sizeTick))
		}
		l.legendW = math.Min(swatchLen+6+nameW+2*pad, l.w/3)
		l.px1 = l.w - pad - l.legendW
		l.legendX = l.px1 + pad
		l.legendY = l.py0
	}
	if l.px1-l.px0 < 20 {
		l.px1 = l.px0 + 20
	}

	// X ticks, now that the plot width is known.
	inset := 0.0
	if c.Kind == Scatter || c.Kind == Step || c.Markers {
		// Markers at the ends stay clear of the axis, and so does a CDF's
		// first rise, which would otherwise be drawn on top of it.
		inset = 5
	}
	l.x.lo, l.x.hi = xlo, xhi
	l.x.p0, l.x.p1 = l.px0+inset, l.px1-inset
	if l.categorical {
		for i, name := range c.Categories {
			l.x.ticks = append(l.x.ticks, float64(i))
			l.x.labels = append(l.x.labels, name)
		}
	} else {
		nx := min(max(int((l.px1-l.px0)/90), 2), 10)
		for _, t := range NiceTicks(xlo, xhi, nx) {
			// The X domain is the data's, not the ticks': a time axis
			// should not end in a stretch of nothing.
			if t >= xlo-(xhi/2-xlo/2)*1e-9 && t <= xhi+(xhi/2-xlo/2)*1e-9 {
				l.x.ticks = append(l.x.ticks, t)
			}
		}
		l.x.labels = formatTicks(l.x.ticks)
	}
	l.title = c.Title
	return l
}

// yRangeLog is the positive range a log axis shows.
func yRangeLog(lo, hi float64) (float64, float64) {
	if !(lo > 0) {
		lo = 1
	}
	if !(hi > 0) || hi < lo {
		hi = lo
	}
	if lo == hi {
		return lo / 10, hi * 10
	}
	return lo, hi
}

// minGap is the smallest positive distance between sorted distinct
// values: the width a bar may take without overlapping its neighbor.
func minGap(v []float64) float64 {
	sort.Float64s(v)
	gap := 0.0
	for i := 1; i < len(v); i++ {
		d := v[i]/2 - v[i-1]/2
		if d > 0 && (gap == 0 || d < gap) {
			gap = d
		}
	}
	return gap * 2
}

// render lays the chart out against cv's metrics and draws it.
func render(cv canvas, c *Chart) {
	l := computeLayout(c, cv)
	cv.fillRect(0, 0, l.w, l.h, colBackground)

	if l.title != "" {
		title := fitText(cv, l.title, sizeTitle, l.w-2*pad)
		cv.text(l.w/2, pad+cv.textHeight(sizeTitle)/2, title, sizeTitle, anchorMiddle, false, colText)
	}

	// Gridlines first so that data is drawn over them.
	for _, t := range l.y.ticks {
		y := l.y.at(t)
		cv.rule(l.px0, y, l.px1, y, colGrid)
	}
	if !l.categorical {
		for _, t := range l.x.ticks {
			x := l.x.at(t)
			cv.rule(x, l.py0, x, l.py1, colGrid)
		}
	}

	if l.empty {
		cv.text((l.px0+l.px1)/2, (l.py0+l.py1)/2, "no data", sizeLabel, anchorMiddle, false, colMuted)
	}
	drawData(cv, c, l)

	// Axes, ticks and tick labels.
	cv.rule(l.px0, l.py1, l.px1, l.py1, colAxis)
	cv.rule(l.px0, l.py0, l.px0, l.py1, colAxis)
	tickH := cv.textHeight(sizeTick)
	for i, t := range l.y.ticks {
		y := l.y.at(t)
		cv.rule(l.px0-tickLen, y, l.px0, y, colAxis)
		cv.text(l.px0-tickLen-3, y, l.y.labels[i], sizeTick, anchorEnd, false, colText)
	}
	xLabelY := l.py1 + tickLen + 3 + tickH/2
	if l.categorical {
		slot := (l.x.p1 - l.x.p0) / float64(len(l.x.ticks))
		every := thinning(cv, l.x.labels, slot, true)
		for i, t := range l.x.ticks {
			x := l.x.at(t)
			cv.rule(x, l.py1, x, l.py1+tickLen, colAxis)
			if i%every == 0 {
				s := fitText(cv, l.x.labels[i], sizeTick, slot*float64(every)-4)
				cv.text(x, xLabelY, s, sizeTick, anchorMiddle, false, colText)
			}
		}
	} else {
		slot := l.x.p1 - l.x.p0
		if len(l.x.ticks) > 1 {
			slot = l.x.at(l.x.ticks[1]) - l.x.at(l.x.ticks[0])
		}
		every := thinning(cv, l.x.labels, slot, false)
		for i, t := range l.x.ticks {
			x := l.x.at(t)
			cv.rule(x, l.py1, x, l.py1+tickLen, colAxis)
			if i%every == 0 {
				// The outermost labels are centered on their ticks but kept
				// inside the image.
				tw := cv.textWidth(l.x.labels[i], sizeTick)
				x = math.Max(math.Min(x, l.w-1-tw/2), 1+tw/2)
				cv.text(x, xLabelY, l.x.labels[i], sizeTick, anchorMiddle, false, colText)
			}
		}
	}

	if c.XLabel != "" {
		y := l.h - pad - cv.textHeight(sizeLabel)/2
		s := fitText(cv, c.XLabel, sizeLabel, l.px1-l.px0)
		cv.text((l.px0+l.px1)/2, y, s, sizeLabel, anchorMiddle, false, colText)
	}
	if c.YLabel != "" {
		x := pad + cv.textHeight(sizeLabel)/2
		s := fitText(cv, c.YLabel, sizeLabel, l.py1-l.py0)
		cv.text(x, (l.py0+l.py1)/2, s, sizeLabel, anchorMiddle, true, colText)
	}
	drawLegend(cv, c, l)
}

// thinning is k such that labelling every k-th tick leaves a gap between
// labels. Shortenable (category) labels only need room for a few
// characters each.
func thinning(cv canvas, labels []string, slot float64, shortenable bool) int {
	widest := 0.0
	for _, s := range labels {
		widest = math.Max(widest, cv.textWidth(s, sizeTick))
	}
	if slot <= 0 {
		return max(len(labels), 1)
	}
	need := widest + 6
	if shortenable {
		need = math.Min(widest, cv.textWidth("Wwww", sizeTick)) + 6
	}
	return max(int(math.Ceil(need/slot)), 1)
}

// fitText shortens s with "..." until it fits in width.
func fitText(cv canvas, s string, sz textSize, width float64) string {
	if cv.textWidth(s, sz) <= width {
		return s
	}
	// Binary search for the longest prefix that fits: a label can be a
	// whole log line, and trying every length would be quadratic.
	r := []rune(s)
	lo, hi := 0, len(r)-1 // r[:lo]+"..." fits (or lo == 0); r[:hi+1]+"..." does not
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if cv.textWidth(string(r[:mid])+"...", sz) <= width {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if lo == 0 {
		return ""
	}
	return string(r[:lo]) + "..."
}

func drawData(cv canvas, c *Chart, l *layout) {
	ns := float64(len(c.Series))
	for i := range c.Series {
		col := c.seriesColor(i)
		xs, ys := l.xs[i], l.ys[i]
		cv.beginSeries(c.Series[i].Name)
		switch c.Kind {
		case Bar:
			// Series side by side within each slot.
			group := 0.9 * l.barSlot
			if l.categorical {
				group = 0.8 * l.barSlot
			}
			bw := group / ns
			base := 0.0
			if l.y.log || base < l.y.lo || base > l.y.hi {
				base = l.y.lo
			}
			yb := l.y.at(base)
			for j := range xs {
				if math.IsNaN(xs[j]) {
					continue
				}
				left := xs[j] - group/2 + float64(i)*bw
				x0, x1 := l.x.at(left), l.x.at(left+bw)
				if x1-x0 < 1 {
					x1 = x0 + 1
				}
				yv := l.y.at(ys[j])
				top, bot := math.Min(yv, yb), math.Max(yv, yb)
				if bot-top < 1 {
					top = bot - 1 // a zero still shows as a sliver
				}
				cv.fillRect(x0, top, x1-x0, bot-top, col)
			}
		case Scatter:
			for j := range xs {
				if !math.IsNaN(xs[j]) {
					cv.circle(l.x.at(xs[j]), l.y.at(ys[j]), 3, col)
				}
			}
		default: // Line, Step
			var run []float64
			flush := func() {
				if len(run) >= 4 {
					cv.polyline(run, 2, col)
				} else if len(run) == 2 && !c.Markers {
					// A lone point between gaps would vanish as a line.
					cv.circle(run[0], run[1], 2, col)
				}
				run = run[:0]
			}
			for j := range xs {
				if math.IsNaN(xs[j]) {
					flush()
					continue
				}
				px, py := l.x.at(xs[j]), l.y.at(ys[j])
				if c.Kind == Step && len(run) >= 2 {
					run = append(run, px, run[len(run)-1])
				}
				run = append(run, px, py)
			}
			flush()
			if c.Markers {
				for j := range xs {
					if !math.IsNaN(xs[j]) {
						cv.circle(l.x.at(xs[j]), l.y.at(ys[j]), 3, col)
					}
				}
			}
		}
		cv.endSeries()
	}
}

func drawLegend(cv canvas, c *Chart, l *layout) {
	if len(l.legend) == 0 {
		return
	}
	rowH := cv.textHeight(sizeTick) + 8
	rows := len(l.legend)
	maxRows := max(int((l.py1-l.py0-pad)/rowH), 1)
	more := 0
	if rows > maxRows {
		// The last row says how many did not fit.
		more = rows - (maxRows - 1)
		rows = maxRows
	}
	boxH := float64(rows)*rowH + pad
	x0, y0 := l.legendX, l.legendY
	w := l.legendW - pad
	cv.rule(x0, y0, x0+w, y0, colGrid)
	cv.rule(x0, y0+boxH, x0+w, y0+boxH, colGrid)
	cv.rule(x0, y0, x0, y0+boxH, colGrid)
	cv.rule(x0+w, y0, x0+w, y0+boxH, colGrid)
	nameW := w - swatchLen - 6 - pad
	for r := 0; r < rows; r++ {
		cy := y0 + pad/2 + rowH*(float64(r)+0.5)
		sx := x0 + pad/2
		if more > 0 && r == rows-1 {
			cv.text(sx, cy, "+"+strconv.Itoa(more)+" more", sizeTick, anchorStart, false, colMuted)
			break
		}
		e := l.legend[r]
		switch c.Kind {
		case Bar:
			cv.fillRect(sx+swatchLen/2-5, cy-5, 10, 10, e.col)
		case Scatter:
			cv.circle(sx+swatchLen/2, cy, 3, e.col)
		default:
			cv.polyline([]float64{sx, cy, sx + swatchLen, cy}, 2, e.col)
			if c.Markers {
				cv.circle(sx+swatchLen/2, cy, 3, e.col)
			}
		}
		cv.text(sx+swatchLen+6, cy, fitText(cv, e.name, sizeTick, nameW), sizeTick, anchorStart, false, colText)
	}
}
