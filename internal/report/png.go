package report

import (
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"unicode/utf8"
)

// PNG writes the chart as a PNG image of exactly its size (after
// clamping, see Chart.Width).
func (c *Chart) PNG(w io.Writer) error {
	// Charts are mostly flat color, which the fastest deflate level
	// already compresses well: on the 10k-point benchmark the default
	// level took as long as drawing the chart to save a sixth of 84 kB.
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	return enc.Encode(w, c.Image())
}

// Image rasterises the chart: for callers that composite it or encode
// it themselves.
func (c *Chart) Image() *image.RGBA {
	width, height := c.size()
	cv := newPNGCanvas(width, height)
	render(cv, c)
	return cv.img
}

// pngCanvas rasterises into an RGBA image: strokes and dots are
// anti-aliased by their exact coverage of each pixel, rules and bars
// are snapped to whole pixels so they stay sharp, and text is the
// built-in bitmap font, scaled by whole pixels.
type pngCanvas struct {
	img   *image.RGBA
	scale int // text pixel size for ticks and labels; titles are twice it
	// mask collects a polyline's coverage (max per pixel) before it is
	// blended once: blending segment by segment would darken every joint
	// and make dense lines look thicker than they are.
	mask               []uint8
	mx0, my0, mx1, my1 int // dirty box of mask
}

func newPNGCanvas(w, h int) *pngCanvas {
	cv := &pngCanvas{img: image.NewRGBA(image.Rect(0, 0, w, h)), scale: 1}
	// A large chart is viewed scaled down: 7-pixel text would be
	// unreadable there.
	if min(w, h) >= 900 {
		cv.scale = 2
	}
	cv.mask = make([]uint8, w*h)
	cv.resetMask()
	return cv
}

func (p *pngCanvas) resetMask() {
	b := p.img.Rect
	p.mx0, p.my0, p.mx1, p.my1 = b.Max.X, b.Max.Y, 0, 0
}

func (p *pngCanvas) textScale(sz textSize) int {
	if sz == sizeTitle {
		return 2 * p.scale
	}
	return p.scale
}

func (p *pngCanvas) textWidth(s string, sz textSize) float64 {
	n := utf8.RuneCountInString(s)
	if n == 0 {
		return 0
	}
	return float64((6*n - 1) * p.textScale(sz))
}

func (p *pngCanvas) textHeight(sz textSize) float64 { return float64(7 * p.textScale(sz)) }

// blend paints c over pixel (x, y) with coverage a in [0, 1].
func (p *pngCanvas) blend(x, y int, c color.RGBA, a float64) {
	if !(image.Point{x, y}.In(p.img.Rect)) || !(a > 0) {
		return
	}
	i := p.img.PixOffset(x, y)
	px := p.img.Pix[i : i+4 : i+4]
	if a >= 1 {
		px[0], px[1], px[2], px[3] = c.R, c.G, c.B, 0xff
		return
	}
	mix := func(d, s uint8) uint8 { return uint8(float64(d)*(1-a) + float64(s)*a + 0.5) }
	px[0], px[1], px[2], px[3] = mix(px[0], c.R), mix(px[1], c.G), mix(px[2], c.B), 0xff
}

func (p *pngCanvas) fill(x0, y0, x1, y1 int, c color.RGBA) {
	r := image.Rect(x0, y0, x1, y1).Intersect(p.img.Rect)
	for y := r.Min.Y; y < r.Max.Y; y++ {
		row := p.img.Pix[p.img.PixOffset(r.Min.X, y):p.img.PixOffset(r.Max.X, y)]
		for i := 0; i < len(row); i += 4 {
			row[i], row[i+1], row[i+2], row[i+3] = c.R, c.G, c.B, 0xff
		}
	}
}

// clampInt converts a pixel coordinate, keeping absurd values (from a
// degenerate layout) from overflowing int.
func clampInt(v float64) int {
	if math.IsNaN(v) {
		return 0
	}
	return int(math.Max(math.Min(v, 1<<20), -1<<20))
}

func (p *pngCanvas) rule(x1, y1, x2, y2 float64, c color.RGBA) {
	switch {
	case y1 == y2:
		y := clampInt(math.Floor(y1))
		a, b := clampInt(math.Floor(math.Min(x1, x2))), clampInt(math.Floor(math.Max(x1, x2)))
		p.fill(a, y, b+1, y+1, c)
	case x1 == x2:
		x := clampInt(math.Floor(x1))
		a, b := clampInt(math.Floor(math.Min(y1, y2))), clampInt(math.Floor(math.Max(y1, y2)))
		p.fill(x, a, x+1, b+1, c)
	default:
		p.polyline([]float64{x1, y1, x2, y2}, 1, c)
	}
}

// fillRect rounds to whole pixels the way the SVG backend does.
func (p *pngCanvas) fillRect(x, y, w, h float64, c color.RGBA) {
	x0, y0 := math.Round(x), math.Round(y)
	x1, y1 := math.Max(math.Round(x+w), x0+1), math.Max(math.Round(y+h), y0+1)
	p.fill(clampInt(x0), clampInt(y0), clampInt(x1), clampInt(y1), c)
}

func (p *pngCanvas) polyline(xy []float64, width float64, c color.RGBA) {
	r := width / 2
	if len(xy) == 2 {
		p.segment(xy[0], xy[1], xy[0], xy[1], r)
	}
	for i := 0; i+3 < len(xy); i += 2 {
		p.segment(xy[i], xy[i+1], xy[i+2], xy[i+3], r)
	}
	// Blend the collected coverage once, then clear what was used.
	w := p.img.Rect.Dx()
	for y := p.my0; y < p.my1; y++ {
		for x := p.mx0; x < p.mx1; x++ {
			if m := p.mask[y*w+x]; m > 0 {
				p.blend(x, y, c, float64(m)/255)
				p.mask[y*w+x] = 0
			}
		}
	}
	p.resetMask()
}

// segment adds a round-capped stroke of half-width r from (x0, y0) to
// (x1, y1) to the mask. It walks the major axis and only the band of
// pixels the stroke can touch, so a long diagonal costs its length, not
// its bounding box.
func (p *pngCanvas) segment(x0, y0, x1, y1, r float64) {
	bw, bh := p.img.Rect.Dx(), p.img.Rect.Dy()
	// Strokes entirely outside the image: nothing to do (and no huge
	// loops over coordinates far away).
	if math.Max(x0, x1)+r+1 < 0 || math.Min(x0, x1)-r-1 > float64(bw) ||
		math.Max(y0, y1)+r+1 < 0 || math.Min(y0, y1)-r-1 > float64(bh) {
		return
	}
	dx, dy := x1-x0, y1-y0
	l2 := dx*dx + dy*dy
	// Coverage is r+0.5 minus the distance, clamped to [0, 1]: the
	// square root is only needed in the one-pixel fringe between these.
	outer, inner := (r+0.5)*(r+0.5), 0.0
	if r > 0.5 {
		inner = (r - 0.5) * (r - 0.5)
	}
	cover := func(ix, iy int) {
		if ix < 0 || iy < 0 || ix >= bw || iy >= bh {
			return
		}
		cx, cy := float64(ix)+0.5, float64(iy)+0.5
		t := 0.0
		if l2 > 0 {
			t = ((cx-x0)*dx + (cy-y0)*dy) / l2
			if t < 0 {
				t = 0
			} else if t > 1 {
				t = 1
			}
		}
		ex, ey := cx-(x0+t*dx), cy-(y0+t*dy)
		d2 := ex*ex + ey*ey
		if d2 >= outer {
			return
		}
		m := uint8(255)
		if d2 > inner {
			m = uint8((r+0.5-math.Sqrt(d2))*255 + 0.5)
		}
		i := iy*bw + ix
		if m > p.mask[i] {
			p.mask[i] = m
		}
		p.mx0, p.my0 = min(p.mx0, ix), min(p.my0, iy)
		p.mx1, p.my1 = max(p.mx1, ix+1), max(p.my1, iy+1)
	}
	band := r*1.5 + 1.5
	if math.Abs(dx) >= math.Abs(dy) {
		lo, hi := math.Min(x0, x1), math.Max(x0, x1)
		from := max(clampInt(math.Floor(lo-r-1)), 0)
		to := min(clampInt(math.Ceil(hi+r+1)), bw-1)
		for ix := from; ix <= to; ix++ {
			cx := math.Max(lo, math.Min(hi, float64(ix)+0.5))
			yl := y0
			if dx != 0 {
				yl = y0 + (cx-x0)*dy/dx
			}
			a := max(clampInt(math.Floor(yl-band)), 0)
			b := min(clampInt(math.Ceil(yl+band)), bh-1)
			for iy := a; iy <= b; iy++ {
				cover(ix, iy)
			}
		}
		return
	}
	lo, hi := math.Min(y0, y1), math.Max(y0, y1)
	from := max(clampInt(math.Floor(lo-r-1)), 0)
	to := min(clampInt(math.Ceil(hi+r+1)), bh-1)
	for iy := from; iy <= to; iy++ {
		cy := math.Max(lo, math.Min(hi, float64(iy)+0.5))
		xl := x0 + (cy-y0)*dx/dy
		a := max(clampInt(math.Floor(xl-band)), 0)
		b := min(clampInt(math.Ceil(xl+band)), bw-1)
		for ix := a; ix <= b; ix++ {
			cover(ix, iy)
		}
	}
}

func (p *pngCanvas) circle(cx, cy, r float64, c color.RGBA) {
	if !finite(cx) || !finite(cy) {
		return
	}
	x0, x1 := clampInt(math.Floor(cx-r-1)), clampInt(math.Ceil(cx+r+1))
	y0, y1 := clampInt(math.Floor(cy-r-1)), clampInt(math.Ceil(cy+r+1))
	for y := y0; y <= y1; y++ {
		for x := x0; x <= x1; x++ {
			dx, dy := float64(x)+0.5-cx, float64(y)+0.5-cy
			p.blend(x, y, c, math.Min(r+0.5-math.Sqrt(dx*dx+dy*dy), 1))
		}
	}
}

func (p *pngCanvas) text(x, y float64, s string, sz textSize, a anchor, vertical bool, c color.RGBA) {
	if s == "" {
		return
	}
	k := p.textScale(sz)
	w, h := p.textWidth(s, sz), p.textHeight(sz)
	along := 0.0 // offset of the first glyph along the reading direction
	switch a {
	case anchorMiddle:
		along = -w / 2
	case anchorEnd:
		along = -w
	}
	// Whole pixels, so that every glyph pixel is one solid block.
	var ox, oy int
	if vertical {
		ox, oy = clampInt(math.Round(x-h/2)), clampInt(math.Round(y-along))
	} else {
		ox, oy = clampInt(math.Round(x+along)), clampInt(math.Round(y-h/2))
	}
	pos := 0
	for _, r := range s {
		g := glyph(r)
		for col := 0; col < 5; col++ {
			bits := g[col]
			for row := 0; row < 8; row++ {
				if bits&(1<<row) == 0 {
					continue
				}
				u, v := (pos+col)*k, row*k // along the text, down the glyph
				if vertical {
					// Reading upwards: along is -y, down the glyph is +x.
					p.fill(ox+v, oy-u-k, ox+v+k, oy-u, c)
				} else {
					p.fill(ox+u, oy+v, ox+u+k, oy+v+k, c)
				}
			}
		}
		pos += 6
	}
}

func (p *pngCanvas) beginSeries(string) {}
func (p *pngCanvas) endSeries()         {}
