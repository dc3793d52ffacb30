package report

import (
	"bytes"
	"strings"
	"testing"
)

func TestInlineSVG(t *testing.T) {
	svg := `<svg xmlns="http://www.w3.org/2000/svg" width="300" height="40"><text x="4" y="20">a &lt;graph&gt;</text></svg>`
	p := NewPage("graphs")
	p.Section("Graph").InlineSVG("caption <one>", []byte("\n"+svg+"\n"))
	html := renderPage(t, p)
	if !strings.Contains(html, `<div class="drawing" style="overflow-x: auto; margin: 12px 0;">`+svg+"</div>") ||
		!strings.Contains(html, "caption &lt;one&gt;") {
		t.Fatalf("page:\n%s", html)
	}
	for _, bad := range []string{
		`<p>not svg</p>`,
		`<svg><script>alert(1)</script></svg>`,
		`<svg><rect onclick="x()"/></svg>`,
		`<svg><a href="http://example.com"><text>x</text></a></svg>`,
		`<svg><image href="x.png"/></svg>`,
		`<svg><foreignObject><div/></foreignObject></svg>`,
		`<svg></svg><svg></svg><p>`,
		`<svgx></svgx>`,
		`<svg></svg><p>x</p><svg></svg>`,
		`<svg><text>unclosed</svg>`,
		`<?xml-stylesheet href="x.css"?><svg></svg>`,
		`<svg><set attributeName="href" to="javascript:x()"/></svg>`,
	} {
		p := NewPage("bad")
		p.InlineSVG("bad", []byte(bad))
		var b bytes.Buffer
		if _, err := p.WriteTo(&b); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}
