package report

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html/template"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Page builds one self-contained HTML report: inline CSS, charts as
// inline SVG, images as data: URIs, no scripts and no external
// references, so that the file reads the same anywhere it is copied.
// Methods add blocks in order and return the page for chaining; charts
// are rendered when the page is written. All text is escaped by
// html/template.
type Page struct {
	Title string
	// Subtitle is a line under the title: the run, the host, the date.
	Subtitle string
	blocks   []func() (block, error)
	sections []string
}

// NewPage starts a page.
func NewPage(title string) *Page { return &Page{Title: title} }

// Status styles a table cell: a verdict should be seen at a glance.
type Status uint8

// Cell statuses. The text of a cell still carries the verdict, so that
// the page reads correctly in grayscale and to color-blind readers.
const (
	StatusNone Status = iota
	StatusPass
	StatusFail
	StatusWarn
	StatusSkip
)

func (s Status) class() string {
	switch s {
	case StatusPass:
		return "pass"
	case StatusFail:
		return "fail"
	case StatusWarn:
		return "warn"
	case StatusSkip:
		return "skip"
	}
	return ""
}

// Cell is one table cell.
type Cell struct {
	Text   string
	Status Status
}

// Pass is a cell for a check that passed.
func Pass(text string) Cell { return Cell{text, StatusPass} }

// Fail is a failed cell.
func Fail(text string) Cell { return Cell{text, StatusFail} }

// Warn is a cell to look at.
func Warn(text string) Cell { return Cell{text, StatusWarn} }

// Skip is a cell for a check that did not run.
func Skip(text string) Cell { return Cell{text, StatusSkip} }

// Verdict is "pass" or "fail", styled.
func Verdict(ok bool) Cell {
	if ok {
		return Pass("pass")
	}
	return Fail("fail")
}

// Row converts values to cells: a Cell is kept, a bool becomes a
// Verdict, a float is printed without exponent noise, anything else as
// fmt.Sprint prints it.
func Row(vals ...any) []Cell {
	row := make([]Cell, len(vals))
	for i, v := range vals {
		row[i] = cellOf(v)
	}
	return row
}

func cellOf(v any) Cell {
	switch v := v.(type) {
	case Cell:
		return v
	case bool:
		return Verdict(v)
	case string:
		return Cell{Text: v}
	case float64:
		return Cell{Text: formatFloat(v)}
	case float32:
		return Cell{Text: formatFloat(float64(v))}
	case nil:
		return Cell{}
	}
	return Cell{Text: fmt.Sprint(v)}
}

// formatFloat prints v exactly when that is short (12.5, 0.001) and
// with six significant digits otherwise (0.1+0.2 is not worth 17).
func formatFloat(v float64) string {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if len(s) <= 12 && finite(v) {
		return s
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// Table is a generic table: a header row and rows of cells. Rows
// shorter than the header are padded.
type Table struct {
	Caption string
	Header  []string
	Rows    [][]Cell
}

// KV is one row of a key-value table; Value is converted as Row does.
type KV struct {
	Key   string
	Value any
}

// Section starts a section with a heading; sections are listed at the
// top of the page when there are three or more.
func (p *Page) Section(heading string) *Page {
	p.sections = append(p.sections, heading)
	n := len(p.sections)
	return p.add(func() (block, error) { return block{Kind: "section", N: n, Text: heading}, nil })
}

// Subsection is a heading within a section.
func (p *Page) Subsection(heading string) *Page {
	return p.add(func() (block, error) { return block{Kind: "subsection", Text: heading}, nil })
}

// Paragraph adds a paragraph of text.
func (p *Page) Paragraph(text string) *Page {
	return p.add(func() (block, error) { return block{Kind: "paragraph", Text: text}, nil })
}

// Paragraphf adds a paragraph formatted as fmt.Sprintf does.
func (p *Page) Paragraphf(format string, args ...any) *Page {
	return p.Paragraph(fmt.Sprintf(format, args...))
}

// Pre adds preformatted text: logs, command lines, diffs.
func (p *Page) Pre(text string) *Page {
	return p.add(func() (block, error) { return block{Kind: "pre", Text: strings.TrimRight(text, "\n")}, nil })
}

// KeyValues adds a two-column table of keys and values: a run's
// parameters, a summary.
func (p *Page) KeyValues(kvs ...KV) *Page {
	return p.add(func() (block, error) {
		rows := make([]kvCell, len(kvs))
		for i, kv := range kvs {
			rows[i] = kvCell{kv.Key, cellOf(kv.Value)}
		}
		return block{Kind: "kv", KVs: rows}, nil
	})
}

// Table adds a table.
func (p *Page) Table(t Table) *Page {
	return p.add(func() (block, error) {
		padded := t
		padded.Rows = make([][]Cell, len(t.Rows))
		for i, row := range t.Rows {
			padded.Rows[i] = row
			if len(row) < len(t.Header) {
				padded.Rows[i] = append(append(make([]Cell, 0, len(t.Header)), row...), make([]Cell, len(t.Header)-len(row))...)
			}
		}
		return block{Kind: "table", Table: &padded}, nil
	})
}

// Link is an entry of a Links list: a page next to this one.
type Link struct {
	Text, Href string
	// Note follows the link: what the page holds, its verdict.
	Note Cell
}

// Links adds a list of links to other pages, for a set of pages written
// side by side (an index and one page per figure). The hrefs are meant to
// be relative file names: the set is then copied and read as a whole.
func (p *Page) Links(links ...Link) *Page {
	return p.add(func() (block, error) { return block{Kind: "links", Links: links}, nil })
}

// Chart adds a chart as inline SVG: sharp at any zoom, and its text can
// be searched and copied.
func (p *Page) Chart(c *Chart) *Page {
	if c == nil {
		return p
	}
	return p.add(func() (block, error) { return block{Kind: "chart", SVG: c.html()}, nil })
}

// ChartPNG adds a chart as a PNG data: URI, for pages that are turned
// into something SVG does not survive.
func (p *Page) ChartPNG(c *Chart) *Page {
	if c == nil {
		return p
	}
	return p.add(func() (block, error) {
		var img bytes.Buffer
		if err := c.PNG(&img); err != nil {
			return block{}, err
		}
		return imageBlock(c.Title, "image/png", img.Bytes())
	})
}

// Image adds an image (PNG, JPEG, GIF, WebP or SVG) as a data: URI; an
// unknown type is an error when the page is written.
func (p *Page) Image(alt, mime string, data []byte) *Page {
	return p.add(func() (block, error) { return imageBlock(alt, mime, data) })
}

var imageTypes = map[string]bool{
	"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true, "image/svg+xml": true,
}

func imageBlock(alt, mime string, data []byte) (block, error) {
	if !imageTypes[mime] {
		return block{}, fmt.Errorf("report: image %q: type %q is not one a browser shows inline", alt, mime)
	}
	// The attribute is built here rather than by the template, which
	// would write every '+' of the base64 as "&#43;" (6% more bytes, and
	// a URI that reads back only after entity decoding). It is trusted
	// because nothing in it comes from the caller unchecked: the type is
	// one of imageTypes and the rest is the base64 alphabet, neither of
	// which can end the quoted value.
	src := "src=\"data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(data) + `"`
	return block{Kind: "image", Text: alt, Src: template.HTMLAttr(src)}, nil
}

func (p *Page) add(f func() (block, error)) *Page {
	p.blocks = append(p.blocks, f)
	return p
}

// WriteTo writes the page as one HTML document. The page is built in
// memory first, so a failing block leaves nothing half-written.
func (p *Page) WriteTo(w io.Writer) (int64, error) {
	var b bytes.Buffer
	if err := p.render(&b); err != nil {
		return 0, err
	}
	n, err := w.Write(b.Bytes())
	return int64(n), err
}

// WriteFile writes the page to path through a temporary file in the
// same directory, so that a reader refreshing the report never sees
// half of it.
func (p *Page) WriteFile(path string) error {
	var b bytes.Buffer
	if err := p.render(&b); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // fails harmlessly after the rename
	if _, err := f.Write(b.Bytes()); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// block is one part of the page's main column in the form the page
// template reads; Kind picks the template's form for it. Blocks are made
// when the page is written, so a chart changed after it was added is
// drawn as it is then.
type block struct {
	Kind string
	// Text is the heading, the paragraph, the preformatted text, the
	// image's alt text or the drawing's caption.
	Text  string
	N     int // a section's number, its anchor
	KVs   []kvCell
	Table *Table // rows padded to the header
	SVG   template.HTML
	Src   template.HTMLAttr
	Links []Link
}

type kvCell struct {
	Key   string
	Value Cell
}

type tocEntry struct {
	N       int
	Heading string
}

func (p *Page) render(b *bytes.Buffer) error {
	data := struct {
		Title, Subtitle string
		TOC             []tocEntry
		Blocks          []block
	}{Title: p.Title, Subtitle: p.Subtitle, Blocks: make([]block, 0, len(p.blocks))}
	if len(p.sections) >= 3 {
		for i, s := range p.sections {
			data.TOC = append(data.TOC, tocEntry{i + 1, s})
		}
	}
	for _, f := range p.blocks {
		bl, err := f()
		if err != nil {
			return err
		}
		data.Blocks = append(data.Blocks, bl)
	}
	return pageTemplate.Execute(b, data)
}

// cellClass styles a cell by its status, and a number without one
// right-aligned, so that digits line up.
func cellClass(c Cell) string {
	if cls := c.Status.class(); cls != "" {
		return cls
	}
	if isNumber(c.Text) {
		return "num"
	}
	return ""
}

// isNumber is true for text that reads as a number, a percentage or a
// number with a short unit ("12.5", "3%", "40 Gbit/s" is not).
func isNumber(s string) bool {
	s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "%"))
	if s == "" {
		return false
	}
	v, err := strconv.ParseFloat(s, 64)
	return err == nil && !math.IsNaN(v)
}

// pageCSS is the whole style sheet. System fonts only: a web font would
// be an external asset or hundreds of kilobytes inline.
const pageCSS = `:root { color-scheme: light; }
body { font: 14px/1.45 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #222; background: #fff; max-width: 1100px; margin: 24px auto; padding: 0 16px; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 32px 0 8px; padding-bottom: 4px; border-bottom: 1px solid #ddd; }
h3 { font-size: 16px; margin: 20px 0 6px; }
.sub { color: #666; margin: 0 0 16px; }
nav.toc { margin: 8px 0 16px; } nav.toc ol { margin: 0; padding-left: 22px; }
a { color: #1f5fa8; }
table { border-collapse: collapse; margin: 8px 0 16px; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #d0d0d0; padding: 4px 10px; text-align: left; vertical-align: top; }
thead th { background: #f1f3f5; }
table.kv th { background: #f7f7f7; font-weight: 600; }
caption { caption-side: top; text-align: left; font-weight: 600; padding: 4px 0; }
td.num { text-align: right; }
td.pass { background: #dcf2e0; color: #14532d; }
td.fail { background: #fbdcdb; color: #7f1d1d; font-weight: 600; }
td.warn { background: #fff1cc; color: #713f12; }
td.skip { background: #f1f1f1; color: #777; }
ul.links li { margin: 4px 0; } ul.links span.pass { color: #14532d; } ul.links span.fail { color: #7f1d1d; font-weight: 600; } ul.links span.warn { color: #713f12; }
pre { background: #f6f8fa; border: 1px solid #e1e4e8; padding: 10px; overflow: auto; font: 12px/1.4 ui-monospace, Menlo, Consolas, monospace; }
figure { margin: 12px 0; }
figure svg, figure img { display: block; max-width: 100%; height: auto; }
@media print { body { max-width: none; margin: 0; } h2 { break-after: avoid; } figure, table { break-inside: avoid; } }
`

// pageTemplate lays a page out. html/template escapes every caller's
// string for where it lands (text, attribute, URL); the only markup it
// lets through as is are the SVG of charts and drawings and the images'
// src attributes, each trusted where it is made.
var pageTemplate = template.Must(template.Must(template.New("page").Funcs(template.FuncMap{"class": cellClass}).
	Parse(pageHTML)).Parse(blockHTML))

const pageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="rdma-appliance report">
<title>{{.Title}}</title>
<style>
` + pageCSS + `</style>
</head>
<body>
<header><h1>{{.Title}}</h1>
{{with .Subtitle}}<p class="sub">{{.}}</p>
{{end}}</header>
{{with .TOC}}<nav class="toc"><ol>{{range .}}<li><a href="#s{{.N}}">{{.Heading}}</a></li>{{end}}</ol></nav>
{{end}}<main>
{{range .Blocks}}{{template "block" .}}{{end}}</main>
</body>
</html>
`

// blockHTML draws the blocks of the main column, one form per kind.
const blockHTML = `{{define "block"}}
{{- if eq .Kind "section"}}<h2 id="s{{.N}}">{{.Text}}</h2>
{{else if eq .Kind "subsection"}}<h3>{{.Text}}</h3>
{{else if eq .Kind "paragraph"}}<p>{{.Text}}</p>
{{else if eq .Kind "pre"}}<pre>{{.Text}}</pre>
{{else if eq .Kind "kv"}}<table class="kv">
{{range .KVs}}<tr><th>{{.Key}}</th>{{template "cell" .Value}}</tr>
{{end}}</table>
{{else if eq .Kind "table"}}{{with .Table}}<table>
{{with .Caption}}<caption>{{.}}</caption>
{{end}}{{with .Header}}<thead><tr>{{range .}}<th>{{.}}</th>{{end}}</tr></thead>
{{end}}<tbody>
{{range .Rows}}<tr>{{range .}}{{template "cell" .}}{{end}}</tr>
{{end}}</tbody>
</table>
{{end}}{{else if eq .Kind "links"}}<ul class="links">
{{range .Links}}{{$l := .}}<li><a href="{{.Href}}">{{.Text}}</a>{{with .Note.Text}} <span class="{{class $l.Note}}">{{.}}</span>{{end}}</li>
{{end}}</ul>
{{else if eq .Kind "chart"}}<figure class="chart">{{.SVG}}</figure>
{{else if eq .Kind "image"}}<figure class="image"><img alt="{{.Text}}" {{.Src}}></figure>
{{else if eq .Kind "drawing"}}<div class="drawing" style="overflow-x: auto; margin: 12px 0;">{{.SVG}}</div>
{{with .Text}}<p class="sub">{{.}}</p>
{{end}}{{end}}
{{- end}}

{{define "cell"}}{{with class .}}<td class="{{.}}">{{else}}<td>{{end}}{{.Text}}</td>{{end}}
`
