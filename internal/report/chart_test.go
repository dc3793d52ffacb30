package report

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// svgDoc is what the tests read back from an SVG: it parses (so it is
// well-formed XML), and its text and elements can be checked.
type svgDoc struct {
	text     []string       // character data of <text> and <title>
	elements map[string]int // element counts by local name
	root     xml.StartElement
}

func parseSVG(t testing.TB, data []byte) *svgDoc {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(data))
	doc := &svgDoc{elements: map[string]int{}}
	var stack []string
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v\n%s", err, head(data))
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if len(stack) == 0 {
				doc.root = tok.Copy()
			}
			stack = append(stack, tok.Name.Local)
			doc.elements[tok.Name.Local]++
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if n := len(stack); n > 0 && (stack[n-1] == "text" || stack[n-1] == "title") {
				doc.text = append(doc.text, string(tok))
			}
		}
	}
	if doc.root.Name.Local != "svg" || doc.root.Name.Space != "http://www.w3.org/2000/svg" {
		t.Fatalf("root element is %v", doc.root.Name)
	}
	return doc
}

func head(b []byte) string {
	if len(b) > 2000 {
		return string(b[:2000]) + "..."
	}
	return string(b)
}

func (d *svgDoc) hasText(s string) bool { return slices.Contains(d.text, s) }

func (d *svgDoc) attr(name string) string {
	for _, a := range d.root.Attr {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

func sine(name string, n int, phase float64) Series {
	s := Series{Name: name}
	for i := 0; i < n; i++ {
		x := float64(i) / 10
		s.X = append(s.X, x)
		s.Y = append(s.Y, 50+40*math.Sin(x+phase))
	}
	return s
}

func renderBoth(t testing.TB, c *Chart) (*svgDoc, *image.RGBA) {
	t.Helper()
	var sb, pb bytes.Buffer
	if err := c.SVG(&sb); err != nil {
		t.Fatal(err)
	}
	if err := c.PNG(&pb); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&pb)
	if err != nil {
		t.Fatalf("PNG does not decode: %v", err)
	}
	w, h := c.size()
	if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
		t.Fatalf("PNG is %v, want %dx%d", b, w, h)
	}
	rgba := image.NewRGBA(img.Bounds())
	draw.Draw(rgba, rgba.Rect, img, image.Point{}, draw.Src)
	return parseSVG(t, sb.Bytes()), rgba
}

func TestSVGLine(t *testing.T) {
	c := &Chart{
		Title: "Lumina WRITE <run 7>", XLabel: "time (s)", YLabel: "Gbit/s",
		Series: []Series{sine("QP 1", 100, 0), sine("QP 2 & 3", 100, 1)},
		Width:  640, Height: 360,
	}
	doc, _ := renderBoth(t, c)
	for _, s := range []string{"Lumina WRITE <run 7>", "time (s)", "Gbit/s", "QP 1", "QP 2 & 3", "0", "100"} {
		if !doc.hasText(s) {
			t.Errorf("SVG has no text %q; texts: %q", s, doc.text)
		}
	}
	if doc.elements["polyline"] != 2+2 { // two series, two legend swatches
		t.Errorf("%d polylines, want 4", doc.elements["polyline"])
	}
	if doc.attr("width") != "640" || doc.attr("height") != "360" || doc.attr("viewBox") != "0 0 640 360" {
		t.Errorf("size attributes %v", doc.root.Attr)
	}
}

func TestSVGKinds(t *testing.T) {
	bar := &Chart{Kind: Bar, Title: "drops", Categories: []string{"dumper0", "dumper1", "dumper2"},
		Series: []Series{{Name: "WRR", Y: []float64{0, 1, 2}}, {Name: "flow", Y: []float64{5, -3, 9}}}}
	doc, _ := renderBoth(t, bar)
	for _, s := range []string{"dumper0", "dumper1", "dumper2", "WRR", "flow"} {
		if !doc.hasText(s) {
			t.Errorf("bar chart has no text %q", s)
		}
	}
	// background + six bars + two legend swatches
	if n := doc.elements["rect"]; n != 1+6+2 {
		t.Errorf("bar chart has %d rects, want 9", n)
	}

	scatter := &Chart{Kind: Scatter, Series: []Series{{Name: "rtt", X: []float64{1, 2, 3}, Y: []float64{3, 1, 2}}}}
	doc, _ = renderBoth(t, scatter)
	if n := doc.elements["circle"]; n != 3+1 {
		t.Errorf("scatter has %d circles, want 4", n)
	}

	cdf := &Chart{Kind: Step, Series: []Series{CDF("latency", []float64{5, 1, 3, 3})}}
	doc, _ = renderBoth(t, cdf)
	if !doc.hasText("latency") || !doc.hasText("1") || !doc.hasText("0") {
		t.Errorf("CDF texts %q", doc.text)
	}

	hist := &Chart{Kind: Bar, Series: []Series{Histogram("sizes", []float64{1, 1, 2, 3, 5, 8}, 4)}}
	doc, _ = renderBoth(t, hist)
	if n := doc.elements["rect"]; n != 1+4+1 {
		t.Errorf("histogram has %d rects, want 6", n)
	}

	logy := &Chart{LogY: true, Markers: true, Series: []Series{{Name: "q", Y: []float64{1, 10, 1e3, 1e6}}}}
	doc, _ = renderBoth(t, logy)
	for _, s := range []string{"1", "10", "100", "1000", "1M"} {
		if !doc.hasText(s) {
			t.Errorf("log axis has no tick %q; texts %q", s, doc.text)
		}
	}
}

// TestSVGEscapes: labels are data (file names, error strings) and must
// not break the document.
func TestSVGEscapes(t *testing.T) {
	evil := `</text><script>alert(1)</script> & "q" 'a' ` + "\x00\x1b\xff"
	c := &Chart{Title: evil, XLabel: evil, YLabel: evil, Series: []Series{{Name: evil, Y: []float64{1, 2}}},
		Kind: Bar, Categories: []string{evil, "b"}}
	var b bytes.Buffer
	if err := c.SVG(&b); err != nil {
		t.Fatal(err)
	}
	doc := parseSVG(t, b.Bytes())
	if doc.elements["script"] != 0 {
		t.Error("a label became a script element")
	}
	if !doc.hasText(strings.ToValidUTF8(`</text><script>alert(1)</script> & "q" 'a' `+"\ufffd\ufffd", "\ufffd") + "\ufffd") {
		t.Errorf("title text not kept as text: %q", doc.text)
	}
}

// dataPixel reports whether a pixel within radius r of (x, y) has
// color near col.
func dataPixel(img *image.RGBA, x, y float64, r int, col color.RGBA) bool {
	cx, cy := int(x), int(y)
	for dy := -r; dy <= r; dy++ {
		for dx := -r; dx <= r; dx++ {
			p := img.RGBAAt(cx+dx, cy+dy)
			if absDiff(p.R, col.R)+absDiff(p.G, col.G)+absDiff(p.B, col.B) < 60 {
				return true
			}
		}
	}
	return false
}

// TestPNGPixels checks the raster where the data is: each point of a
// line, a scatter and the top of each bar is drawn in its series' color,
// and the plot is blank away from it.
func TestPNGPixels(t *testing.T) {
	red := color.RGBA{0xff, 0, 0, 0xff}
	for _, c := range []*Chart{
		{Series: []Series{{Name: "r", X: []float64{0, 1, 2, 3}, Y: []float64{0, 10, 5, 20}, Color: "#ff0000"}}, Title: "line"},
		{Kind: Scatter, Series: []Series{{X: []float64{-5, 0, 7}, Y: []float64{1e6, 2e6, 1.5e6}, Color: "#ff0000"}}},
		{Kind: Step, Series: []Series{{X: []float64{1, 2, 4}, Y: []float64{0, 0.5, 1}, Color: "#ff0000"}}},
		{LogY: true, Series: []Series{{Y: []float64{1, 100, 1e4}, Color: "#ff0000"}}},
		{Kind: Bar, Categories: []string{"a", "b"}, Series: []Series{{Y: []float64{3, 7}, Color: "#ff0000"}}},
	} {
		t.Run(c.Kind.String(), func(t *testing.T) {
			_, img := renderBoth(t, c)
			l := computeLayout(c, newPNGCanvas(c.size()))
			xs, ys := c.points(0)
			for i := range xs {
				x, y := l.x.at(xs[i]), l.y.at(ys[i])
				if c.Kind == Bar {
					y++ // inside the bar's top edge
				}
				if !dataPixel(img, x, y, 1, red) {
					t.Errorf("point %d (%g, %g) at pixel (%.1f, %.1f): color %v", i, xs[i], ys[i], x, y, img.RGBAAt(int(x), int(y)))
				}
			}
			// The top left of the plot area has no data in any of these.
			if dataPixel(img, l.px0+8, l.py0+3, 2, red) {
				t.Error("data color where there is no data")
			}
		})
	}
}

// TestEdgeCases renders data that reports really produce — empty runs,
// one sample, NaN counters, values over all of float64 — in every kind,
// to both formats: no panic, well-formed SVG, PNG of the right size.
func TestEdgeCases(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	many := make([]Series, 30)
	for i := range many {
		many[i] = Series{Name: fmt.Sprintf("series %d with a long name", i), Y: []float64{float64(i), float64(i * 2)}}
	}
	cases := map[string]Chart{
		"no series":       {},
		"empty series":    {Series: []Series{{Name: "a"}, {Name: "b", X: []float64{1}}}},
		"single point":    {Series: []Series{{Name: "a", X: []float64{3}, Y: []float64{7}}}},
		"single zero":     {Series: []Series{{Y: []float64{0}}}},
		"all NaN":         {Series: []Series{{Y: []float64{nan, nan}}}},
		"NaN and Inf":     {Series: []Series{{X: []float64{0, 1, 2, 3, 4, nan}, Y: []float64{1, nan, inf, -inf, 5, 6}}}},
		"constant":        {Series: []Series{{Y: []float64{4, 4, 4, 4}}}},
		"huge range":      {Series: []Series{{X: []float64{-math.MaxFloat64, math.MaxFloat64}, Y: []float64{-math.MaxFloat64, math.MaxFloat64}}}},
		"tiny range":      {Series: []Series{{X: []float64{0, 5e-324, 1e-323}, Y: []float64{5e-324, 0, 1e-323}}}},
		"big offset":      {Series: []Series{{X: []float64{1e16, 1e16 + 2, 1e16 + 4}, Y: []float64{1e300, 1e300, 1e300}}}},
		"log nonpositive": {LogY: true, Series: []Series{{Y: []float64{0, -1, -5}}}},
		"log huge":        {LogY: true, Series: []Series{{Y: []float64{math.SmallestNonzeroFloat64, 1, math.MaxFloat64}}}},
		"log mixed":       {LogY: true, Series: []Series{{Y: []float64{0, 1, nan, 100, -3, 1e5}}}},
		"mismatched":      {Series: []Series{{X: []float64{1, 2, 3, 4, 5}, Y: []float64{1, 2}}}},
		"many series":     {Series: many, Markers: true},
		"tiny size":       {Width: 1, Height: 1, Title: "a very long title that cannot fit", XLabel: "x", YLabel: "y", Series: many[:3]},
		"huge size":       {Width: 1 << 30, Height: 1, Series: many[:1]},
		"bad color":       {Series: []Series{{Y: []float64{1, 2}, Color: "#zzz"}}},
		"unicode":         {Title: "Durchsatz – µs ✓", Series: []Series{{Name: "σ", Y: []float64{1, 2}}}},
		"unknown kind":    {Kind: 200, Series: []Series{{Y: []float64{1, 2}}}},
	}
	for _, kind := range []Kind{Line, Scatter, Bar, Step} {
		for name, c := range cases {
			t.Run(kind.String()+"/"+name, func(t *testing.T) {
				c := c
				if c.Kind != 200 {
					c.Kind = kind
				}
				if c.Width == 0 && c.Height == 0 {
					// Small, so that the race detector's run stays short;
					// the layout is the same code at any size.
					c.Width, c.Height = 320, 200
				}
				renderBoth(t, &c)
				if *keep != "" {
					savePNG(t, &c, filepath.Join(*keep, "edge-"+kind.String()+"-"+strings.ReplaceAll(name, " ", "_")+".png"))
				}
				if kind == Bar {
					c.Categories = []string{"only", "", "three"}
					renderBoth(t, &c)
				}
			})
		}
	}
}

func savePNG(t testing.TB, c *Chart, path string) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := c.PNG(f); err != nil {
		t.Fatal(err)
	}
}

func TestCDF(t *testing.T) {
	s := CDF("x", []float64{3, 1, math.NaN(), 2, 2, math.Inf(1)})
	wantX := []float64{1, 1, 2, 3}
	wantY := []float64{0, 0.25, 0.75, 1}
	if !slices.Equal(s.X, wantX) || !slices.Equal(s.Y, wantY) {
		t.Errorf("CDF = %v %v, want %v %v", s.X, s.Y, wantX, wantY)
	}
	if s := CDF("empty", nil); len(s.X) != 0 || s.Name != "empty" {
		t.Errorf("CDF of nothing: %+v", s)
	}
}

func TestHistogram(t *testing.T) {
	s := Histogram("h", []float64{0, 1, 2, 3, 4, 5, 6, 7, 8, 10, math.NaN()}, 5)
	wantX := []float64{1, 3, 5, 7, 9}
	wantY := []float64{2, 2, 2, 2, 2}
	if !slices.EqualFunc(s.X, wantX, approx) || !slices.Equal(s.Y, wantY) {
		t.Errorf("Histogram = %v %v, want %v %v", s.X, s.Y, wantX, wantY)
	}
	if s := Histogram("one", []float64{4, 4, 4}, 10); !slices.Equal(s.X, []float64{4}) || !slices.Equal(s.Y, []float64{3}) {
		t.Errorf("Histogram of a constant: %v %v", s.X, s.Y)
	}
	if s := Histogram("auto", make([]float64, 100), 0); len(s.Y) != 1 || s.Y[0] != 100 {
		t.Errorf("Histogram of zeros: %v %v", s.X, s.Y)
	}
	s = Histogram("wide", []float64{-math.MaxFloat64, 0, math.MaxFloat64}, 3)
	if len(s.Y) != 3 || s.Y[0]+s.Y[1]+s.Y[2] != 3 {
		t.Errorf("Histogram over all of float64: %v %v", s.X, s.Y)
	}
	if s := Histogram("none", []float64{math.NaN()}, 3); len(s.X) != 0 {
		t.Errorf("Histogram of NaN: %v", s)
	}
}

func TestFitText(t *testing.T) {
	cv := newPNGCanvas(200, 100)
	long := strings.Repeat("abcdefghij", 10000)
	for _, width := range []float64{0, 10, 17, 100, 1e9} {
		got := fitText(cv, long, sizeTick, width)
		if cv.textWidth(got, sizeTick) > width {
			t.Errorf("fitText(width %g) = %d chars, too wide", width, len(got))
		}
		if got != "" && got != long {
			// One more character would not have fitted.
			n := len(got) - 3
			if cv.textWidth(long[:n+1]+"...", sizeTick) <= width {
				t.Errorf("fitText(width %g) cut too much: %d chars", width, n)
			}
		}
	}
	if got := fitText(cv, "short", sizeTick, 100); got != "short" {
		t.Errorf("fitText shortened %q", got)
	}
}
