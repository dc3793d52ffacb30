package report

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
)

// hostile are strings a report's data may carry (a test name from a
// YAML file, a counter name from a NIC, a line from a log) that would
// turn into markup, an event handler or a link if written unescaped.
var hostile = []string{
	`<script>alert(1)</script>`,
	`"onmouseover=alert(1) x="`,
	`'onmouseover=alert(1) x='`,
	`</table></td><p>`,
	`javascript:alert(1)`,
	`<a href="javascript:alert(1)">x</a>`,
	`<img src=x onerror=alert(1)>`,
	`</svg><script>alert(1)</script>`,
	`&lt;script&gt;`,
}

// hostilePage puts s into every field a caller sets: titles, headings
// (which are also the table of contents' link text), text, key-value
// pairs, table captions, headers and cells of every status, chart
// titles, labels, series and categories, image alt text and drawing
// captions.
func hostilePage(s string) *Page {
	p := NewPage(s)
	p.Subtitle = s
	p.Section(s).Subsection(s).Paragraph(s).Paragraphf("%s", s).Pre(s).
		KeyValues(KV{Key: s, Value: s}, KV{Key: "cell", Value: Warn(s)})
	p.Section(s).Table(Table{
		Caption: s,
		Header:  []string{s, s},
		Rows:    [][]Cell{{{Text: s}, Pass(s), Fail(s)}, {Warn(s), Skip(s)}},
	})
	p.Section(s).
		Chart(&Chart{Title: s, XLabel: s, YLabel: s, Series: []Series{{Name: s, Y: []float64{1, 2}}}}).
		Chart(&Chart{Title: s, Kind: Bar, Categories: []string{s}, Series: []Series{{Name: s, Y: []float64{1}}}}).
		ChartPNG(&Chart{Title: s, Width: 60, Height: 40, Series: []Series{{Y: []float64{1}}}}).
		Image(s, "image/gif", []byte("GIF89a")).
		InlineSVG(s, []byte(`<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"></svg>`))
	return p
}

// htmlFields is how many times hostilePage shows s as HTML text or an
// attribute value, outside the charts' SVG.
const htmlFields = 2 + // title, h1
	1 + // subtitle
	3 + 3 + // headings, their links in the table of contents
	1 + 2 + 1 + // subsection, paragraphs, pre
	2 + 1 + // key and value, the Warn cell
	1 + 2 + 5 + // caption, headers, cells
	2 + // the PNG chart's and the image's alt text
	1 // the drawing's caption

func TestPageHostileFields(t *testing.T) {
	for _, s := range hostile {
		page := renderPage(t, hostilePage(s))
		if strings.ContainsAny(s, `<>"'&`) && strings.Contains(page, s) {
			t.Errorf("%q appears unescaped in the page", s)
		}
		doc, err := scanHTML(page)
		if err != nil {
			t.Errorf("%q: the page does not tokenize: %v", s, err)
			continue
		}
		for _, bad := range []string{"script", "iframe", "object", "embed", "foreignObject"} {
			if doc.elements[bad] > 0 {
				t.Errorf("%q: the page has a <%s> element", s, bad)
			}
		}
		// kv, table, and nothing the data closed or opened.
		if doc.elements["table"] != 2 || doc.ends["table"] != 2 || doc.elements["p"] != 4 || doc.elements["a"] != 3 ||
			doc.elements["img"] != 2 || doc.elements["svg"] != 3 {
			t.Errorf("%q changed the page's structure: elements %v, end tags %v", s, doc.elements, doc.ends)
		}
		for _, a := range doc.attrs {
			name := strings.ToLower(a.Name.Local)
			switch {
			case strings.HasPrefix(name, "on"):
				t.Errorf("%q: an event handler %s=%q", s, a.Name.Local, a.Value)
			case name == "href" && !strings.HasPrefix(a.Value, "#"):
				t.Errorf("%q: a link to %q", s, a.Value)
			case name == "src" && !strings.HasPrefix(a.Value, "data:image/"):
				t.Errorf("%q: an image from %q", s, a.Value)
			}
		}
		// Escaped, not dropped: every field still reads as it was given.
		n := 0
		for _, v := range doc.values {
			n += strings.Count(v, s)
		}
		if n < htmlFields {
			t.Errorf("%q reads back %d times, want at least %d", s, n, htmlFields)
		}
	}
}

// TestPageHostileImageType: an image type is not a way into the src
// attribute.
func TestPageHostileImageType(t *testing.T) {
	for _, s := range append(hostile, "image/png;base64,x\" onerror=\"alert(1)") {
		if _, err := NewPage("x").Image("x", s, nil).WriteTo(io.Discard); err == nil {
			t.Errorf("image type %q accepted", s)
		}
	}
}

type htmlScan struct {
	elements, ends map[string]int
	attrs          []xml.Attr
	// values are the text and attribute values, entities decoded.
	values []string
}

// scanHTML tokenizes a page the forgiving way encoding/xml reads HTML
// (void elements, HTML entities): enough to count the elements and
// attributes the escaping must not have let in.
func scanHTML(page string) (htmlScan, error) {
	d := xml.NewDecoder(strings.NewReader(page))
	d.Strict, d.AutoClose, d.Entity = false, xml.HTMLAutoClose, xml.HTMLEntity
	doc := htmlScan{elements: map[string]int{}, ends: map[string]int{}}
	var text bytes.Buffer
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return doc, err
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			doc.values = append(doc.values, text.String())
			text.Reset()
			doc.elements[tok.Name.Local]++
			doc.attrs = append(doc.attrs, tok.Attr...)
			for _, a := range tok.Attr {
				doc.values = append(doc.values, a.Value)
			}
		case xml.EndElement:
			doc.values = append(doc.values, text.String())
			text.Reset()
			doc.ends[tok.Name.Local]++
		case xml.CharData:
			text.Write(tok)
		}
	}
	return doc, nil
}
