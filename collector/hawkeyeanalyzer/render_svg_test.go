package hawkeyeanalyzer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"encoding/xml"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

var updateSVG = flag.Bool("update-svg", false, "rewrite testdata/svg/*.svg from the current renderer")

// svgCases are the hand-built incidents of every type plus the
// degenerate diagnoses GraphSVG must still draw.
func svgCases(t *testing.T) map[string]*Diagnosis {
	cases := map[string]*Diagnosis{}
	for name, ex := range examples() {
		cases[strings.TrimSuffix(name, ".json")] = Diagnose(ex.tel, Options{})
	}
	cases["nil"] = nil
	cases["no-telemetry"] = Diagnose(nil, Options{})
	cases["zero"] = &Diagnosis{}
	// Read back from JSON, a diagnosis has no graph: drawn from what it
	// carries.
	var b bytes.Buffer
	if err := cases["deadlock-out-injection"].WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var back Diagnosis
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	cases["from-json"] = &back
	// A victim that is only queued, in a graph of one port.
	s := newScenario().host("SW1", 1, "A").host("SW1", 2, "B")
	s.victim = s.flow("A", "B", 1)
	s.hop("SW1", s.victim, 1, 2, 10, 0, 100)
	cases["one-port"] = Diagnose(s.telemetry(), Options{})
	return cases
}

// TestGraphSVGGolden compares each case's SVG with its golden file
// (go test -run GraphSVGGolden -update-svg rewrites them; look at them in
// a browser before committing).
func TestGraphSVGGolden(t *testing.T) {
	for name, d := range svgCases(t) {
		got := d.GraphSVG()
		path := filepath.Join("testdata", "svg", name+".svg")
		if *updateSVG {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update-svg to write the golden files)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: SVG differs from %s (%d bytes, want %d); rerun with -update-svg and check it in a browser",
				name, path, len(got), len(want))
		}
		if again := d.GraphSVG(); !bytes.Equal(got, again) {
			t.Errorf("%s: two renderings differ", name)
		}
	}
}

// TestGraphSVGMarks checks that the diagnosis's findings are marked.
func TestGraphSVGMarks(t *testing.T) {
	cases := svgCases(t)
	for _, c := range []struct {
		name string
		want []string
	}{
		{"storm", []string{`class="node host root-cause" data-id="H1"`, `class="node port paused path initiator" data-id="SW1:1"`,
			`class="edge port-port path"`, `class="edge port-host root-cause"`, `class="node flow victim"`, "root cause #1"}},
		{"deadlock-in-loop", []string{`class="edge port-port loop back"`, `class="node port paused loop initiator" data-id="SW2:2"`,
			"root cause #1", "root cause #2", `class="edge port-flow contributor"`, `class="edge flow-port"`}},
		{"incast", []string{`class="node port congested path initiator" data-id="SW4:1"`, `class="edge port-port path"`,
			"root cause #4"}},
		{"contention", []string{"normal flow contention", `class="node flow victim`}},
		{"incast-missing-sw4", []string{"What the telemetry lacked:", "SW4"}},
		{"from-json", []string{`class="edge port-port loop back"`, `data-id="HI"`, `class="node flow victim"`}},
		{"no-telemetry", []string{"no port or flow to draw", "no switch reports"}},
		{"nil", []string{"no diagnosis."}},
	} {
		svg := string(cases[c.name].GraphSVG())
		for _, w := range c.want {
			if !strings.Contains(svg, w) {
				t.Errorf("%s: no %q in\n%s", c.name, w, svg)
			}
		}
	}
}

var (
	svgNumRE  = regexp.MustCompile(`(?:x|y|width|height|x1|y1|x2|y2)="(-?[0-9.]+)"`)
	svgRectRE = regexp.MustCompile(`<g class="node [^"]*" data-id="[^"]*"><title>[^<]*</title>(?:<rect [^>]*fill="none"[^>]*/>)?<rect x="([0-9.-]+)" y="([0-9.-]+)" width="([0-9.]+)" height="([0-9.]+)"`)
)

// checkSVG checks what every rendering must be: well-formed XML with an
// svg root of positive size, nothing outside it, no reference to anything
// outside the document, no NaN, and node boxes that do not overlap.
func checkSVG(t *testing.T, name string, svg []byte) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	depth, root := 0, ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: not well-formed XML: %v\n%s", name, err, svg)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				if root != "" {
					t.Fatalf("%s: two root elements", name)
				}
				root = el.Name.Local
			}
			switch el.Name.Local {
			case "script", "image", "foreignObject", "use", "a", "style":
				t.Fatalf("%s: element %s in a self-contained drawing", name, el.Name.Local)
			}
			for _, a := range el.Attr {
				if a.Name.Local == "href" || strings.HasPrefix(a.Name.Local, "on") {
					t.Fatalf("%s: attribute %s", name, a.Name.Local)
				}
			}
			depth++
		case xml.EndElement:
			depth--
		}
	}
	if root != "svg" {
		t.Fatalf("%s: root %q", name, root)
	}
	s := string(svg)
	if strings.Contains(s, "NaN") || strings.Contains(s, "Inf") || strings.Count(s, "http") != 1 {
		t.Fatalf("%s: NaN, Inf or an external reference in\n%s", name, s)
	}
	var width, height float64
	for i, m := range svgNumRE.FindAllStringSubmatch(s, 2) {
		v, _ := strconv.ParseFloat(m[1], 64)
		if i == 0 {
			width = v
		} else {
			height = v
		}
	}
	if !(width > 0 && height > 0) {
		t.Fatalf("%s: size %gx%g", name, width, height)
	}
	type box struct{ x, y, w, h float64 }
	var boxes []box
	for _, m := range svgRectRE.FindAllStringSubmatch(s, -1) {
		var v [4]float64
		for i := range v {
			v[i], _ = strconv.ParseFloat(m[i+1], 64)
		}
		b := box{v[0], v[1], v[2], v[3]}
		if b.x < 0 || b.y < 0 || b.x+b.w > width+0.1 || b.y+b.h > height+0.1 {
			t.Errorf("%s: node box %+v outside %gx%g", name, b, width, height)
		}
		for _, o := range boxes {
			if b.x < o.x+o.w && o.x < b.x+b.w && b.y < o.y+o.h && o.y < b.y+b.h {
				t.Errorf("%s: node boxes %+v and %+v overlap", name, b, o)
			}
		}
		boxes = append(boxes, b)
	}
	if strings.Count(s, `<g class="node `) != len(boxes) {
		t.Errorf("%s: %d nodes, %d boxes read", name, strings.Count(s, `<g class="node `), len(boxes))
	}
}

func TestGraphSVGWellFormed(t *testing.T) {
	for name, d := range svgCases(t) {
		checkSVG(t, name, d.GraphSVG())
	}
}

// TestGraphSVGOddInput draws the fuzz corpus of FuzzDiagnose (absurd
// counters, names with markup and control bytes, missing pieces): every
// drawing must still be valid.
func TestGraphSVGOddInput(t *testing.T) {
	files, err := filepath.Glob("testdata/fuzz/FuzzDiagnose/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fuzz corpus: %v", err)
	}
	for _, f := range files {
		data := readCorpus(t, f)
		tel, err := Decode(bytes.NewReader(data))
		if err != nil {
			continue
		}
		checkSVG(t, filepath.Base(f), Diagnose(tel, Options{}).GraphSVG())
	}
	// Markup and bytes XML cannot hold in every name.
	s := newScenario().host("<SW&1>", 1, "A\x00\"'").host("<SW&1>", 2, "B]]>")
	s.link("<SW&1>", 3, "SW\x1b2", 1).host("SW\x1b2", 2, "C")
	s.victim = s.flow("A\x00\"'", "C", 1)
	s.hop("<SW&1>", s.victim, 1, 3, 100, 90, 30000).hop("SW\x1b2", s.victim, 1, 2, 100, 0, 50000)
	other := s.flow("B]]>", "C", 2)
	s.hop("<SW&1>", other, 2, 3, 100, 80, 30000).hop("SW\x1b2", other, 1, 2, 100, 0, 50000)
	s.pause("<SW&1>", 3, 50)
	checkSVG(t, "markup", Diagnose(s.telemetry(), Options{}).GraphSVG())
}

// readCorpus reads a Go fuzz corpus file holding one []byte value.
func readCorpus(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if inner, ok := strings.CutPrefix(line, "[]byte("); ok {
			v, err := strconv.Unquote(strings.TrimSuffix(inner, ")"))
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			return []byte(v)
		}
	}
	t.Fatalf("%s: no []byte value", path)
	return nil
}

// TestGraphSVGLarge draws the benchmark's incident (thousands of flows):
// the drawing stays within its limits and quick.
func TestGraphSVGLarge(t *testing.T) {
	d := Diagnose(benchTelemetry(), Options{})
	t0 := time.Now()
	svg := d.GraphSVG()
	took := time.Since(t0)
	checkSVG(t, "large", svg)
	s := string(svg)
	ports := strings.Count(s, `<g class="node port`)
	flows := strings.Count(s, `<g class="node flow`)
	if ports == 0 || ports > svgMaxPorts || flows == 0 || flows > svgMaxFlows {
		t.Fatalf("%d ports and %d flows drawn of %d and %d", ports, flows, len(d.Graph.Ports), len(d.Graph.Flows))
	}
	if took > 2*time.Second {
		t.Fatalf("took %v", took)
	}
	t.Logf("%d of %d ports, %d of %d flows in %v, %d bytes", ports, len(d.Graph.Ports), flows, len(d.Graph.Flows), took, len(svg))
}

// TestGraphSVGDrawsDOTsNodes: the SVG draws the ports DOT draws, and
// the flows DOT would draw with svgFlowsPerPort per port.
func TestGraphSVGDrawsDOTsNodes(t *testing.T) {
	for name, d := range svgCases(t) {
		if d == nil || d.Graph == nil {
			continue
		}
		svg := string(d.GraphSVG())
		ports, flows := d.drawn(svgFlowsPerPort)
		for p := range ports {
			if !strings.Contains(svg, `data-id="`+xmlEscaped(d.Graph.Ports[p].ID)+`"`) {
				t.Errorf("%s: port %s not drawn", name, d.Graph.Ports[p].ID)
			}
		}
		for f := range flows {
			if !strings.Contains(svg, `data-id="`+xmlEscaped(d.Graph.Flows[f].Name)+`"`) {
				t.Errorf("%s: flow %s not drawn", name, d.Graph.Flows[f].Name)
			}
		}
		hosts := 0
		for _, r := range d.RootCauses {
			if r.Kind == "host" {
				hosts++
			}
		}
		if got := strings.Count(svg, `<g class="node `); got != len(ports)+len(flows)+hosts {
			t.Errorf("%s: %d nodes drawn, want %d", name, got, len(ports)+len(flows)+hosts)
		}
	}
}
