package report

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"html/template"
	"io"
	"strings"
)

// InlineSVG adds an SVG drawing the appliance made (a provenance graph)
// inline, at its own size in a box that scrolls sideways: a wide graph
// scaled down to the column would shrink its labels below reading size.
// The drawing must be one svg element without scripts, event handlers,
// links or embedded documents (a page stays inert and self-contained);
// anything else is an error when the page is written.
func (p *Page) InlineSVG(caption string, svg []byte) *Page {
	return p.add(func() (block, error) {
		if err := CheckInlineSVG(svg); err != nil {
			return block{}, fmt.Errorf("report: drawing %q: %w", caption, err)
		}
		// Trusted as markup only now that CheckInlineSVG has found it
		// one inert svg element, which is what the appliance's graph
		// renderers make.
		return block{Kind: "drawing", Text: caption, SVG: template.HTML(bytes.TrimSpace(svg))}, nil
	})
}

// inlineBanned are the SVG elements that run, link or load something.
var inlineBanned = map[string]bool{"script": true, "foreignObject": true, "iframe": true, "object": true, "embed": true,
	"image": true, "use": true, "a": true, "style": true, "animate": true, "set": true}

// CheckInlineSVG says why svg may not be put inline in a page: it must
// be well-formed XML of one svg element, with nothing that runs, links or
// loads (scripts, event handlers, links, images, embedded documents).
func CheckInlineSVG(svg []byte) error {
	dec := xml.NewDecoder(bytes.NewReader(svg))
	depth, roots := 0, 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("not well-formed: %w", err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				if roots++; roots > 1 || el.Name.Local != "svg" {
					return fmt.Errorf("not a single <svg> element")
				}
			}
			if inlineBanned[el.Name.Local] {
				return fmt.Errorf("holds a <%s> element, which a self-contained page does not allow", el.Name.Local)
			}
			for _, a := range el.Attr {
				n := strings.ToLower(a.Name.Local)
				if strings.HasPrefix(n, "on") || n == "href" || strings.Contains(strings.ToLower(a.Value), "javascript:") {
					return fmt.Errorf("holds a %s attribute, which a self-contained page does not allow", a.Name.Local)
				}
			}
			depth++
		case xml.EndElement:
			depth--
		case xml.CharData:
			if depth == 0 && len(bytes.TrimSpace(el)) > 0 {
				return fmt.Errorf("not a single <svg> element")
			}
		case xml.ProcInst, xml.Directive:
			return fmt.Errorf("holds a processing instruction or directive")
		}
	}
	if roots != 1 {
		return fmt.Errorf("not a single <svg> element")
	}
	return nil
}
