package report

import (
	"html/template"
	"image/color"
	"io"
	"math"
	"strconv"
	"unicode/utf8"
)

// SVG writes the chart as a standalone SVG document. It is also valid
// inline in HTML, which is how Page embeds it.
func (c *Chart) SVG(w io.Writer) error {
	_, err := w.Write(c.appendSVG(nil))
	return err
}

// html is the chart's SVG for a page's template. The SVG is trusted as
// markup because it is made right here by appendSVG, which writes every
// string of the chart through appendEscaped.
func (c *Chart) html() template.HTML { return template.HTML(c.appendSVG(nil)) }

func (c *Chart) appendSVG(buf []byte) []byte {
	width, height := c.size()
	cv := &svgCanvas{buf: buf}
	b := cv.buf
	b = append(b, `<svg xmlns="http://www.w3.org/2000/svg" width="`...)
	b = strconv.AppendInt(b, int64(width), 10)
	b = append(b, `" height="`...)
	b = strconv.AppendInt(b, int64(height), 10)
	b = append(b, `" viewBox="0 0 `...)
	b = strconv.AppendInt(b, int64(width), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(height), 10)
	b = append(b, `" font-family="Helvetica, Arial, sans-serif" role="img"`...)
	if c.Title != "" {
		b = append(b, ` aria-label="`...)
		b = appendEscaped(b, c.Title)
		b = append(b, '"')
	}
	b = append(b, ">\n"...)
	if c.Title != "" {
		b = append(b, "<title>"...)
		b = appendEscaped(b, c.Title)
		b = append(b, "</title>\n"...)
	}
	cv.buf = b
	render(cv, c)
	cv.buf = append(cv.buf, "</svg>\n"...)
	return cv.buf
}

// svgCanvas writes SVG elements into a byte slice: appending numbers
// with strconv instead of fmt keeps a 10k-point chart cheap.
type svgCanvas struct {
	buf []byte
}

var svgFontSize = [...]float64{sizeTick: 11, sizeLabel: 12, sizeTitle: 15}

// textWidth estimates: the viewer picks the font, so this is an upper
// bound for common sans-serif faces (about 0.6 em per character).
func (s *svgCanvas) textWidth(t string, sz textSize) float64 {
	return float64(utf8.RuneCountInString(t)) * 0.6 * svgFontSize[sz]
}

func (s *svgCanvas) textHeight(sz textSize) float64 { return svgFontSize[sz] }

// rule snaps to the pixel center so that a one-unit stroke covers
// exactly one pixel row or column instead of blurring over two.
func (s *svgCanvas) rule(x1, y1, x2, y2 float64, c color.RGBA) {
	b := append(s.buf, `<line x1="`...)
	b = appendNum(b, crisp(x1))
	b = append(b, `" y1="`...)
	b = appendNum(b, crisp(y1))
	b = append(b, `" x2="`...)
	b = appendNum(b, crisp(x2))
	b = append(b, `" y2="`...)
	b = appendNum(b, crisp(y2))
	b = append(b, `" stroke="`...)
	b = appendColor(b, c)
	b = append(b, `" stroke-width="1" shape-rendering="crispEdges"/>`+"\n"...)
	s.buf = b
}

func crisp(v float64) float64 { return math.Floor(v) + 0.5 }

func (s *svgCanvas) fillRect(x, y, w, h float64, c color.RGBA) {
	x0, y0 := math.Round(x), math.Round(y)
	x1, y1 := math.Max(math.Round(x+w), x0+1), math.Max(math.Round(y+h), y0+1)
	b := append(s.buf, `<rect x="`...)
	b = appendNum(b, x0)
	b = append(b, `" y="`...)
	b = appendNum(b, y0)
	b = append(b, `" width="`...)
	b = appendNum(b, x1-x0)
	b = append(b, `" height="`...)
	b = appendNum(b, y1-y0)
	b = append(b, `" fill="`...)
	b = appendColor(b, c)
	b = append(b, `" shape-rendering="crispEdges"/>`+"\n"...)
	s.buf = b
}

func (s *svgCanvas) polyline(xy []float64, width float64, c color.RGBA) {
	b := append(s.buf, `<polyline fill="none" stroke="`...)
	b = appendColor(b, c)
	b = append(b, `" stroke-width="`...)
	b = appendNum(b, width)
	b = append(b, `" stroke-linejoin="round" stroke-linecap="round" points="`...)
	for i := 0; i+1 < len(xy); i += 2 {
		if i > 0 {
			b = append(b, ' ')
		}
		b = appendNum(b, xy[i])
		b = append(b, ',')
		b = appendNum(b, xy[i+1])
	}
	b = append(b, `"/>`+"\n"...)
	s.buf = b
}

func (s *svgCanvas) circle(cx, cy, r float64, c color.RGBA) {
	b := append(s.buf, `<circle cx="`...)
	b = appendNum(b, cx)
	b = append(b, `" cy="`...)
	b = appendNum(b, cy)
	b = append(b, `" r="`...)
	b = appendNum(b, r)
	b = append(b, `" fill="`...)
	b = appendColor(b, c)
	b = append(b, `"/>`+"\n"...)
	s.buf = b
}

func (s *svgCanvas) text(x, y float64, t string, sz textSize, a anchor, vertical bool, c color.RGBA) {
	if t == "" {
		return
	}
	size := svgFontSize[sz]
	b := append(s.buf, `<text x="`...)
	b = appendNum(b, x)
	b = append(b, `" y="`...)
	// y is the center; SVG places the baseline, about a third of the
	// font size below the center for Latin text. (dominant-baseline would
	// say this directly but is not honoured by every SVG renderer.)
	b = appendNum(b, y+0.35*size)
	b = append(b, '"')
	if vertical {
		b = append(b, ` transform="rotate(-90 `...)
		b = appendNum(b, x)
		b = append(b, ' ')
		b = appendNum(b, y)
		b = append(b, `)"`...)
	}
	switch a {
	case anchorMiddle:
		b = append(b, ` text-anchor="middle"`...)
	case anchorEnd:
		b = append(b, ` text-anchor="end"`...)
	}
	b = append(b, ` font-size="`...)
	b = appendNum(b, size)
	if sz == sizeTitle {
		b = append(b, `" font-weight="bold`...)
	}
	b = append(b, `" fill="`...)
	b = appendColor(b, c)
	b = append(b, `">`...)
	b = appendEscaped(b, t)
	b = append(b, "</text>\n"...)
	s.buf = b
}

// beginSeries groups a series' elements; the title is the tooltip a
// browser shows over them.
func (s *svgCanvas) beginSeries(name string) {
	s.buf = append(s.buf, `<g class="series">`...)
	if name != "" {
		s.buf = append(s.buf, "<title>"...)
		s.buf = appendEscaped(s.buf, name)
		s.buf = append(s.buf, "</title>"...)
	}
	s.buf = append(s.buf, '\n')
}

func (s *svgCanvas) endSeries() { s.buf = append(s.buf, "</g>\n"...) }

// appendNum writes v with at most one decimal: a tenth of a pixel is
// below what a screen shows and keeps large charts small.
func appendNum(b []byte, v float64) []byte {
	if !finite(v) {
		return append(b, '0')
	}
	r := math.Round(v * 10)
	if r == math.Trunc(r/10)*10 {
		return strconv.AppendFloat(b, r/10, 'f', 0, 64)
	}
	return strconv.AppendFloat(b, r/10, 'f', 1, 64)
}

func appendColor(b []byte, c color.RGBA) []byte {
	const hex = "0123456789abcdef"
	return append(b, '#', hex[c.R>>4], hex[c.R&15], hex[c.G>>4], hex[c.G&15], hex[c.B>>4], hex[c.B&15])
}

// appendEscaped writes text for XML character data or an attribute
// value. Characters XML 1.0 forbids (most control characters, invalid
// UTF-8) become U+FFFD: a label from a log file must not make the whole
// document unparseable.
func appendEscaped(b []byte, s string) []byte {
	for _, r := range s {
		switch r {
		case '<':
			b = append(b, "&lt;"...)
		case '>':
			b = append(b, "&gt;"...)
		case '&':
			b = append(b, "&amp;"...)
		case '"':
			b = append(b, "&#34;"...)
		case '\'':
			b = append(b, "&#39;"...)
		default:
			if !xmlChar(r) {
				r = utf8.RuneError
			}
			b = utf8.AppendRune(b, r)
		}
	}
	return b
}

// xmlChar reports whether r may appear in an XML 1.0 document.
func xmlChar(r rune) bool {
	switch {
	case r == '\t' || r == '\n' || r == '\r':
		return true
	case r < 0x20:
		return false
	case r == utf8.RuneError:
		return true // decoding already replaced invalid bytes with it
	case r >= 0xD800 && r <= 0xDFFF, r == 0xFFFE, r == 0xFFFF:
		return false
	}
	return r <= utf8.MaxRune
}
