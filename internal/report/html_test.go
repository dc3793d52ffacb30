package report

import (
	"bytes"
	"encoding/base64"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// samplePage is a report shaped like the Lumina run summary: key-value
// parameters, a result table with verdicts, a line chart and a bar
// chart, a log excerpt.
func samplePage() *Page {
	p := NewPage("Lumina run 2024-05-01 <WRITE>")
	p.Subtitle = "testbed lab-1 · 8 QPs · 3 events"
	p.Section("Parameters").KeyValues(
		KV{"verb", "RDMA WRITE"},
		KV{"message size", 65536},
		KV{"QPs", 8},
		KV{"rate (Gbit/s)", 12.5},
		KV{"trace whole", true},
	)
	p.Section("Results").Table(Table{
		Caption: "Injected events",
		Header:  []string{"event", "PSN", "expected", "observed", "verdict"},
		Rows: [][]Cell{
			Row("drop", 1024, "retransmit", "retransmit", true),
			Row("ECN", 2048, "CNP", "CNP", true),
			Row("corrupt", 4096, "NAK", "none", false),
			Row("drop", 8192, "retransmit", Warn("late")),
		},
	})
	p.Paragraph("One event of three was not handled as expected; see the trace below.")
	p.Section("Throughput").Chart(&Chart{
		Title: "Goodput per QP", XLabel: "time (ms)", YLabel: "Gbit/s",
		Series: []Series{sine("QP 1", 200, 0), sine("QP 2", 200, 2)},
	}).Chart(&Chart{
		Title: "Packets per dumper", Kind: Bar, YLabel: "packets",
		Categories: []string{"dumper0", "dumper1", "dumper2", "dumper3"},
		Series: []Series{
			{Name: "per-packet WRR", Y: []float64{2500, 2498, 2502, 2500}},
			{Name: "flow hash", Y: []float64{5000, 0, 4000, 1000}},
		},
	})
	p.Section("Trace").Pre("psn=1024 DROP\npsn=1025 <NAK seq err>\npsn=1024 RETX\n")
	return p
}

func renderPage(t testing.TB, p *Page) string {
	t.Helper()
	var b bytes.Buffer
	n, err := p.WriteTo(&b)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(b.Len()) {
		t.Fatalf("WriteTo returned %d, wrote %d", n, b.Len())
	}
	return b.String()
}

func TestPageSelfContained(t *testing.T) {
	html := renderPage(t, samplePage())
	for _, bad := range []string{"<script", "<link", "<iframe", "@import", "src=\"http", "href=\"http", "url(http"} {
		if strings.Contains(strings.ToLower(html), bad) {
			t.Errorf("page contains %q: not self-contained", bad)
		}
	}
	// Every src is a data: URI and every href an anchor in the page.
	for _, m := range regexp.MustCompile(`(src|href)="([^"]*)"`).FindAllStringSubmatch(html, -1) {
		if !strings.HasPrefix(m[2], "data:") && !strings.HasPrefix(m[2], "#") {
			t.Errorf("%s=%q refers outside the page", m[1], m[2])
		}
	}
	if strings.Count(html, "<html") != 1 || strings.Count(html, "</html>") != 1 || !strings.HasPrefix(html, "<!DOCTYPE html>") {
		t.Error("not one HTML document")
	}
	for _, want := range []string{"<style>", `<td class="pass">pass</td>`, `<td class="fail">fail</td>`, `<td class="warn">late</td>`,
		`<td class="num">1024</td>`, "<svg", "Goodput per QP", "dumper3", `<nav class="toc">`, `<h2 id="s3">Throughput</h2>`} {
		if !strings.Contains(html, want) {
			t.Errorf("page has no %q", want)
		}
	}
	if n := strings.Count(html, "<svg"); n != 2 {
		t.Errorf("%d inline SVGs, want 2", n)
	}
	// The inline SVGs are well-formed on their own.
	for _, m := range regexp.MustCompile(`(?s)<svg.*?</svg>`).FindAllString(html, -1) {
		parseSVG(t, []byte(m))
	}
}

func TestPageEscapes(t *testing.T) {
	evil := `<script>alert("x")</script> & 'q'`
	p := NewPage(evil)
	p.Subtitle = evil
	p.Section(evil).Subsection(evil).Paragraph(evil).Pre(evil).
		KeyValues(KV{evil, evil}).
		Table(Table{Caption: evil, Header: []string{evil}, Rows: [][]Cell{{Fail(evil)}}}).
		Chart(&Chart{Title: evil, Series: []Series{{Name: evil, Y: []float64{1}}}}).
		Image(evil, "image/png", []byte{1, 2, 3})
	html := renderPage(t, p)
	if strings.Contains(html, "<script") || strings.Contains(html, `"x"`) || strings.Contains(html, "'q'") {
		t.Errorf("unescaped text in page:\n%s", html)
	}
	const escaped = `&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; &#39;q&#39;`
	if n := strings.Count(html, escaped); n < 10 {
		t.Errorf("escaped text appears %d times, want every place it was used", n)
	}
}

func TestPageImages(t *testing.T) {
	c := &Chart{Title: "png chart", Width: 300, Height: 200, Series: []Series{{Y: []float64{1, 3, 2}}}}
	html := renderPage(t, NewPage("images").ChartPNG(c).Image("dot", "image/gif", []byte("GIF89a")))
	m := regexp.MustCompile(`src="data:image/png;base64,([^"]+)"`).FindStringSubmatch(html)
	if m == nil {
		t.Fatal("no PNG data URI")
	}
	raw, err := base64.StdEncoding.DecodeString(m[1])
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 300 || b.Dy() != 200 {
		t.Errorf("embedded PNG is %v", b)
	}
	if !strings.Contains(html, `alt="dot" src="data:image/gif;base64,R0lGODlh"`) {
		t.Error("GIF not embedded")
	}
	if _, err := NewPage("bad").Image("x", "text/html", nil).WriteTo(&bytes.Buffer{}); err == nil {
		t.Error("text/html accepted as an image")
	}
}

func TestPageWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "report.html")
	p := samplePage()
	if err := p.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != renderPage(t, p) {
		t.Error("file differs from WriteTo")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
	if err := NewPage("x").WriteFile(filepath.Join(dir, "missing", "r.html")); err == nil {
		t.Error("writing into a missing directory succeeded")
	}
}

func TestRowCells(t *testing.T) {
	row := Row("a", 3, 2.5, 0.1+0.2, true, false, nil, Skip("n/a"), uint8(7))
	want := []Cell{{"a", StatusNone}, {"3", StatusNone}, {"2.5", StatusNone}, {"0.3", StatusNone}, {"pass", StatusPass}, {"fail", StatusFail}, {}, {"n/a", StatusSkip}, {"7", StatusNone}}
	for i := range want {
		if row[i] != want[i] {
			t.Errorf("cell %d = %+v, want %+v", i, row[i], want[i])
		}
	}
	for s, num := range map[string]bool{"12": true, "-3.5": true, "40%": true, "1e6": true, "NaN": false, "12 Gbit/s": false, "": false, "v1": false} {
		if isNumber(s) != num {
			t.Errorf("isNumber(%q) = %v", s, !num)
		}
	}
}

// TestLinks: a Links block lists each page with its note, the href
// escaped for its attribute and a note's status as its class.
func TestLinks(t *testing.T) {
	p := NewPage("index")
	p.Links(Link{Text: "Figure 8", Href: "fig8.html", Note: Pass("reproduced")},
		Link{Text: "odd <name>", Href: `x".html`, Note: Fail("missed")}, Link{Text: "plain", Href: "p.html"})
	var b strings.Builder
	if _, err := p.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{`<a href="fig8.html">Figure 8</a> <span class="pass">reproduced</span>`,
		`<a href="x%22.html">odd &lt;name&gt;</a> <span class="fail">missed</span>`, `<a href="p.html">plain</a></li>`} {
		if !strings.Contains(out, want) {
			t.Errorf("page lacks %q:\n%s", want, out)
		}
	}
}
