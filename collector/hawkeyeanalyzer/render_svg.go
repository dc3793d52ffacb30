package hawkeyeanalyzer

import (
	"bytes"
	"cmp"
	"encoding/xml"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// GraphSVG draws the diagnosis's provenance graph as one self-contained
// SVG document, without Graphviz: appliance hosts rarely have it, and a
// report or the dashboard must show the graph anyway. It draws the part
// DOT draws (fewer flows per port), laid out in layers along the wait-for
// direction: the victim on the left, the ports it was paused at, the
// ports they wait for, the initial congestion point, and the flows or
// host that caused it on the right. Paused ports are red, congested ones
// amber, the victim blue; root causes have a red border and their rank,
// the initiator a double border; port-level edges carry their weight, the
// PFC spreading path is dark red and loops purple (the edge closing a
// loop runs back under the graph); the victim's route shows where it was
// not paused.
//
// The output depends only on the diagnosis (no clock, no map order), so
// it can be compared byte for byte. It never fails: a nil or empty
// diagnosis, or one decoded from JSON without its graph (drawn from the
// port edges, victim path and root causes it carries), still gives a
// valid picture saying what it lacks.
func (d *Diagnosis) GraphSVG() []byte {
	m := newSVGModel(d)
	m.layout()
	return m.render(d)
}

// What GraphSVG draws at most: a graph of hundreds of ports is not
// readable as a picture, and the diagnosis's own ports come first.
const (
	svgMaxPorts     = 40
	svgFlowsPerPort = 4
	svgMaxFlows     = 40
)

// Geometry, in pixels. Labels are monospace so that their width can be
// known without a font: 0.6 em is the advance of the common monospace
// fonts, and a little more leaves a margin.
const (
	svgFont      = 11.0
	svgCharW     = 0.62 * svgFont
	svgLineH     = 14.0
	svgLabelFont = 10.0
	svgLabelW    = 0.62 * svgLabelFont
	svgPadX      = 8.0
	svgPadY      = 6.0
	svgLayerGap  = 100.0
	svgNodeGap   = 18.0
	svgMargin    = 16.0
	svgArrow     = 8.0
	svgDummyH    = 8.0
	svgBackGap   = 12.0 // a back edge's vertical runs from the columns' sides
	svgBackStep  = 6.0  // and further out for each outer one
	svgCorner    = 8.0
	svgFontStack = "ui-monospace, SFMono-Regular, Menlo, Consolas, 'DejaVu Sans Mono', 'Liberation Mono', monospace"
)

// Colors, the same meaning as in DOT.
const (
	colPaused     = "#f4c7c3"
	colCongested  = "#fce8b2"
	colVictim     = "#c6dafc"
	colHost       = "#fde7e6"
	colPlain      = "#ffffff"
	colBorder     = "#5f6368"
	colRoot       = "#c5221f"
	colPath       = "#a50e0e"
	colLoop       = "#8e24aa"
	colWait       = "#3c4043"
	colFlowPort   = "#5f6368"
	colContrib    = "#d93025"
	colOther      = "#9aa0a6"
	colVictimPath = "#6f9be8"
)

// Dash patterns: a flow paused at a port, the victim's route.
const (
	dashPaused = "5,3"
	dashRoute  = "2,3"
)

type svgKind uint8

const (
	kindPort svgKind = iota
	kindFlow
	kindHost
	kindDummy
)

type svgNode struct {
	key     string
	kind    svgKind
	lines   []string
	title   string
	classes []string
	fill    string
	stroke  string
	strokeW float64
	double  bool // the initiator
	w, h    float64

	seq   int // the layers' first order: the victim, then as added
	layer int
	pos   int
	x, y  float64 // centre
}

type svgEdge struct {
	from, to int
	kind     string // port-port, flow-port, port-flow, port-host
	label    string
	title    string
	classes  []string
	color    string
	width    float64
	dash     string // stroke-dasharray, "" for a solid line

	// back marks a port-level edge that closes a loop: it arcs below
	// the graph. rev marks an edge laid out right to left: a flow's wait
	// that points back against the layers (the victim's own queue, a
	// root-cause flow paused upstream of the port it fills).
	back  bool
	rev   bool
	chain []int // dummy nodes between the layers it spans, left to right
	// Attachment offsets from the centre of the side of the left and
	// right node it meets (back edges: of their bottom sides).
	lOff, rOff float64
	dip        float64 // a back edge's horizontal run, below the nodes
	at         pt      // where the label goes
	nest       int     // a back edge's rank, the shortest first
}

// ends are the edge's nodes as laid out, left then right.
func (e *svgEdge) ends() (l, r int) {
	if e.rev {
		return e.to, e.from
	}
	return e.from, e.to
}

type svgModel struct {
	nodes   []*svgNode
	edges   []*svgEdge
	index   map[string]int
	victim  int
	header  []string // the title and the diagnosis in words
	omitted []string // what the limits left out
	empty   string   // why there is nothing to draw
	layers  [][]int
	colL    []float64 // each layer's column, left and right
	colR    []float64
	width   float64
	height  float64
	top     float64 // where the graph starts, under the header
}

func (m *svgModel) node(key string) int {
	if i, ok := m.index[key]; ok {
		return i
	}
	return -1
}

// hasOut says whether a flow waits at some drawn port.
func (m *svgModel) hasOut(v int) bool {
	return slices.ContainsFunc(m.edges, func(e *svgEdge) bool { return e.from == v && e.kind == "flow-port" })
}

func (m *svgModel) add(n *svgNode) int {
	if i, ok := m.index[n.key]; ok {
		return i
	}
	n.w, n.h = nodeSize(n.lines)
	m.index[n.key] = len(m.nodes)
	m.nodes = append(m.nodes, n)
	return len(m.nodes) - 1
}

func (m *svgModel) edge(e *svgEdge) {
	if e.from < 0 || e.to < 0 || e.from == e.to {
		return
	}
	m.edges = append(m.edges, e)
}

func nodeSize(lines []string) (w, h float64) {
	n := 0
	for _, l := range lines {
		n = max(n, utf8.RuneCountInString(l))
	}
	return float64(n)*svgCharW + 2*svgPadX, float64(len(lines))*svgLineH + 2*svgPadY
}

// highlights are the diagnosis's port pairs and ports worth marking.
type highlights struct {
	pathPair map[[2]string]bool // wait-for pairs (from, to) on the spreading path
	loopPair map[[2]string]bool
	onPath   map[string]bool
	inLoop   map[string]bool
	rank     map[string]int // root-cause flow name or "host NAME" -> rank from 1
	share    map[string]float64
}

func newHighlights(d *Diagnosis) highlights {
	h := highlights{pathPair: map[[2]string]bool{}, loopPair: map[[2]string]bool{}, onPath: map[string]bool{},
		inLoop: map[string]bool{}, rank: map[string]int{}, share: map[string]float64{}}
	// Path runs the way the pause spread (initiator first); edges point
	// the wait-for way, from the later port to the earlier.
	for i, id := range d.Path {
		h.onPath[id] = true
		if i > 0 {
			h.pathPair[[2]string{id, d.Path[i-1]}] = true
		}
	}
	for _, l := range d.Loops {
		for i, id := range l {
			h.inLoop[id] = true
			next := l[(i+1)%len(l)]
			// A loop lists the ports in spreading order too; mark both
			// directions so that either orientation of the data shows.
			h.loopPair[[2]string{id, next}] = true
			h.loopPair[[2]string{next, id}] = true
		}
	}
	for i, r := range d.RootCauses {
		key := r.Name
		if r.Kind == "host" {
			key = "host " + r.Host
		}
		if _, ok := h.rank[key]; !ok {
			h.rank[key] = i + 1
			h.share[key] = r.Share
		}
	}
	return h
}

func newSVGModel(d *Diagnosis) *svgModel {
	m := &svgModel{index: map[string]int{}, victim: -1, header: svgHeader(d)}
	switch {
	case d == nil:
		m.empty = "no diagnosis"
		return m
	case d.Graph != nil:
		m.fromGraph(d)
	default:
		m.fromDiagnosis(d)
	}
	if len(m.nodes) == 0 {
		m.empty = "the telemetry gave no port or flow to draw"
	}
	return m
}

// fromGraph takes nodes and edges from the provenance graph.
func (m *svgModel) fromGraph(d *Diagnosis) {
	g := d.Graph
	hl := newHighlights(d)
	ports := d.drawnPorts()
	if len(ports) > svgMaxPorts {
		ports = m.prunePorts(d, ports)
	}
	flows := d.drawnFlows(ports, svgFlowsPerPort)
	if len(flows) > svgMaxFlows {
		m.omitted = append(m.omitted, fmt.Sprintf("%d more flows", len(flows)-svgMaxFlows))
		flows = flows[:svgMaxFlows]
	}
	if v, ok := g.flowIdx[g.Victim]; ok {
		m.victim = m.add(m.flowNode(d, &g.Flows[v], true, hl))
	}
	for _, p := range sortedKeys(ports) {
		m.add(m.portNode(d, &g.Ports[p], hl))
	}
	fs := slices.Clone(flows)
	slices.Sort(fs)
	for _, f := range fs {
		m.add(m.flowNode(d, &g.Flows[f], g.Flows[f].Key == g.Victim, hl))
	}
	m.hostNodes(d, hl)
	for _, e := range g.PortEdges {
		from, to := m.node("p:"+e.From), m.node("p:"+e.To)
		via := "meters"
		if e.Route {
			via = "the flows' routes"
		}
		m.edge(m.portEdge(e.From, e.To, from, to, e.Weight, fmt.Sprintf("%s waits for %s: %s paused x %.2f of its traffic x queue %s (from %s)",
			e.From, e.To, trimFloat(e.Paused), e.Share, fmtBytes(e.Qdepth), via), hl))
	}
	for _, e := range g.FlowPortEdges {
		from, to := m.node("f:"+e.Flow), m.node("p:"+e.Port)
		m.edge(&svgEdge{from: from, to: to, kind: "flow-port", label: strconv.FormatUint(e.Paused, 10) + " paused",
			title: fmt.Sprintf("%s was paused at %s: %d packets", e.Flow, e.Port, e.Paused),
			color: colFlowPort, width: 1.2, dash: dashPaused})
	}
	for _, p := range sortedKeys(ports) {
		for _, ei := range g.pfEdges[p] {
			e := &g.PortFlowEdges[ei]
			m.edge(m.contribEdge(m.node("p:"+e.Port), m.node("f:"+e.Flow), e.Port, e.Flow, e.Contribution, e.Share, e.Contributor))
		}
	}
	m.hostEdges(d)
	m.victimPathEdges(d)
}

// victimPathEdges join the victim to the ports of its path it has no
// other edge with (where it was neither paused nor queued behind
// others), so that its whole route shows.
func (m *svgModel) victimPathEdges(d *Diagnosis) {
	if m.victim < 0 {
		return
	}
	for i, h := range d.VictimPath {
		p := m.node("p:" + h.Port)
		if p < 0 || slices.ContainsFunc(m.edges, func(e *svgEdge) bool {
			return e.from == m.victim && e.to == p || e.from == p && e.to == m.victim
		}) {
			continue
		}
		m.edge(&svgEdge{from: m.victim, to: p, kind: "victim-path", label: "hop " + strconv.Itoa(i+1),
			title: fmt.Sprintf("the victim passes %s (hop %d): %d packets, %d paused", h.Port, i+1, h.Packets, h.Paused),
			color: colVictimPath, width: 1.5, dash: dashRoute})
	}
}

// prunePorts keeps the ports the diagnosis names, then the ends of the
// heaviest port-level edges, up to svgMaxPorts.
func (m *svgModel) prunePorts(d *Diagnosis, ports map[int]bool) map[int]bool {
	g := d.Graph
	keep := map[int]bool{}
	named := func(id string) {
		if i, ok := g.portIdx[parsePortID(id)]; ok && ports[i] {
			keep[i] = true
		}
	}
	named(d.Initiator)
	for _, id := range d.Path {
		named(id)
	}
	for _, l := range d.Loops {
		for _, id := range l {
			named(id)
		}
	}
	for _, h := range d.VictimPath {
		named(h.Port)
	}
	for _, r := range d.RootCauses {
		named(r.Port)
	}
	es := slices.Clone(g.PortEdges)
	slices.SortStableFunc(es, func(a, b PortEdge) int { return cmp.Compare(b.Weight, a.Weight) })
	for _, e := range es {
		if len(keep) >= svgMaxPorts {
			break
		}
		keep[e.from] = true
		if len(keep) < svgMaxPorts {
			keep[e.to] = true
		}
	}
	m.omitted = append(m.omitted, fmt.Sprintf("%d more ports", len(ports)-len(keep)))
	return keep
}

func (m *svgModel) portNode(d *Diagnosis, p *PortNode, hl highlights) *svgNode {
	n := &svgNode{key: "p:" + p.ID, kind: kindPort, fill: colPlain, stroke: colBorder, strokeW: 1, classes: []string{"port"}}
	n.lines = append(n.lines, p.ID)
	if p.Peer != "" {
		n.lines = append(n.lines, "-> "+p.Peer)
	}
	n.lines = append(n.lines, fmt.Sprintf("q %s, paused %d/%d", fmtBytes(p.Qdepth), p.Paused, p.Packets))
	g := d.Graph
	switch {
	case p.IsPaused():
		n.fill = colPaused
		n.classes = append(n.classes, "paused")
	case p.Contention >= g.opt.MinContention:
		n.fill = colCongested
		n.classes = append(n.classes, "congested")
	}
	m.markPort(n, p.ID, d, hl)
	n.title = fmt.Sprintf("%s (peer %s): average queue %s, contention %s; %d of %d packets paused, %d pause frames",
		p.ID, dash(p.Peer), fmtBytes(p.Qdepth), fmtBytes(p.Contention), p.Paused, p.Packets, p.PauseFrames)
	return n
}

// markPort applies what the diagnosis says about a port.
func (m *svgModel) markPort(n *svgNode, id string, d *Diagnosis, hl highlights) {
	switch {
	case hl.inLoop[id]:
		n.stroke, n.strokeW = colLoop, 2
		n.classes = append(n.classes, "loop")
	case hl.onPath[id]:
		n.stroke, n.strokeW = colPath, 2
		n.classes = append(n.classes, "path")
	}
	if id == d.Initiator {
		n.double = true
		n.lines = append(n.lines, "initial congestion")
		n.classes = append(n.classes, "initiator")
	}
}

func (m *svgModel) flowNode(d *Diagnosis, f *FlowNode, victim bool, hl highlights) *svgNode {
	n := &svgNode{key: "f:" + f.Name, kind: kindFlow, fill: colPlain, stroke: colBorder, strokeW: 1, classes: []string{"flow"}}
	n.lines = append(n.lines, f.Name)
	if g := d.Graph; g != nil {
		src, dst := g.hostName[f.Key.Src], g.hostName[f.Key.Dst]
		if src != "" || dst != "" {
			n.lines = append(n.lines, "host "+dash(src)+" -> "+dash(dst))
		}
	}
	m.markFlow(n, f.Name, victim, d, hl)
	return n
}

func (m *svgModel) markFlow(n *svgNode, name string, victim bool, d *Diagnosis, hl highlights) {
	n.title = "flow " + name
	if victim {
		n.fill = colVictim
		n.lines = append(n.lines, "victim")
		n.classes = append(n.classes, "victim")
		n.title += " (the victim)"
	}
	if r := hl.rank[name]; r > 0 {
		n.stroke, n.strokeW = colRoot, 2.5
		n.lines = append(n.lines, fmt.Sprintf("root cause #%d (%.0f%% of the queue)", r, 100*hl.share[name]))
		n.classes = append(n.classes, "root-cause")
		n.title += fmt.Sprintf(", root cause #%d", r)
	} else if slices.Contains(d.SpreadingFlows, name) && !victim {
		n.lines = append(n.lines, "spreads the PFC")
		n.classes = append(n.classes, "spreading")
	}
}

// hostNodes adds the hosts named as root causes.
func (m *svgModel) hostNodes(d *Diagnosis, hl highlights) {
	for _, r := range d.RootCauses {
		if r.Kind != "host" || r.Host == "" {
			continue
		}
		key := "host " + r.Host
		m.add(&svgNode{key: "h:" + r.Host, kind: kindHost, fill: colHost, stroke: colRoot, strokeW: 2.5,
			lines:   []string{"host " + r.Host, fmt.Sprintf("root cause #%d", hl.rank[key]), fmt.Sprintf("%s pause frames", trimFloat(r.Contribution))},
			classes: []string{"host", "root-cause"},
			title:   fmt.Sprintf("host %s kept pausing %s: %s pause frames (or paused packets)", r.Host, r.Port, trimFloat(r.Contribution))})
	}
}

func (m *svgModel) hostEdges(d *Diagnosis) {
	for _, r := range d.RootCauses {
		if r.Kind != "host" || r.Host == "" {
			continue
		}
		m.edge(&svgEdge{from: m.node("p:" + r.Port), to: m.node("h:" + r.Host), kind: "port-host",
			label: trimFloat(r.Contribution) + " pauses", title: fmt.Sprintf("%s waits for host %s, which pauses it", r.Port, r.Host),
			color: colContrib, width: 2.5, classes: []string{"root-cause"}})
	}
}

func (m *svgModel) portEdge(fromID, toID string, from, to int, weight float64, title string, hl highlights) *svgEdge {
	e := &svgEdge{from: from, to: to, kind: "port-port", label: strconv.FormatFloat(weight, 'g', 3, 64), title: title,
		color: colWait, width: 2}
	switch k := [2]string{fromID, toID}; {
	case hl.loopPair[k]:
		e.color, e.width = colLoop, 3.5
		e.classes = append(e.classes, "loop")
	case hl.pathPair[k]:
		e.color, e.width = colPath, 3.5
		e.classes = append(e.classes, "path")
	}
	return e
}

func (m *svgModel) contribEdge(from, to int, port, flow string, contribution, share float64, contributor bool) *svgEdge {
	e := &svgEdge{from: from, to: to, kind: "port-flow", label: fmtBytes(contribution),
		title: fmt.Sprintf("%s waits for %s: %s of the contention queue (%.1f%%)", port, flow, fmtBytes(contribution), 100*share),
		color: colOther, width: 1}
	if contributor {
		e.color, e.width = colContrib, 1.8
		e.classes = append(e.classes, "contributor")
	}
	return e
}

// fromDiagnosis draws what a diagnosis carries without its graph (one
// read back from JSON): the port-level edges, the victim's hops and the
// root causes.
func (m *svgModel) fromDiagnosis(d *Diagnosis) {
	hl := newHighlights(d)
	hops := map[string]Hop{}
	for _, h := range d.VictimPath {
		hops[h.Port] = h
	}
	paused := map[string]bool{}
	for _, e := range d.PortEdges {
		paused[e.From] = true
	}
	var ids []string
	seen := map[string]bool{}
	addID := func(id string) {
		if id != "" && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	for _, e := range d.PortEdges {
		addID(e.From)
		addID(e.To)
	}
	for _, h := range d.VictimPath {
		addID(h.Port)
	}
	addID(d.Initiator)
	for _, r := range d.RootCauses {
		addID(r.Port)
	}
	slices.Sort(ids)
	if len(ids) > svgMaxPorts {
		m.omitted = append(m.omitted, fmt.Sprintf("%d more ports", len(ids)-svgMaxPorts))
		ids = ids[:svgMaxPorts]
	}
	if d.Victim != "" {
		n := &svgNode{key: "f:" + d.Victim, kind: kindFlow, fill: colPlain, stroke: colBorder, strokeW: 1,
			classes: []string{"flow"}, lines: []string{d.Victim}}
		m.markFlow(n, d.Victim, true, d, hl)
		m.victim = m.add(n)
	}
	for _, id := range ids {
		n := &svgNode{key: "p:" + id, kind: kindPort, fill: colPlain, stroke: colBorder, strokeW: 1, classes: []string{"port"},
			lines: []string{id}}
		h, ok := hops[id]
		if ok {
			n.lines = append(n.lines, fmt.Sprintf("q %s, paused %d/%d", fmtBytes(h.Qdepth), h.Paused, h.Packets))
		}
		if paused[id] || h.PFC {
			n.fill = colPaused
			n.classes = append(n.classes, "paused")
		}
		m.markPort(n, id, d, hl)
		n.title = "port " + id
		m.add(n)
	}
	for _, r := range d.RootCauses {
		if r.Kind == "host" || r.Name == "" {
			continue
		}
		n := &svgNode{key: "f:" + r.Name, kind: kindFlow, fill: colPlain, stroke: colBorder, strokeW: 1,
			classes: []string{"flow"}, lines: []string{r.Name}}
		m.markFlow(n, r.Name, r.Name == d.Victim, d, hl)
		m.add(n)
	}
	m.hostNodes(d, hl)
	for _, e := range d.PortEdges {
		m.edge(m.portEdge(e.From, e.To, m.node("p:"+e.From), m.node("p:"+e.To), e.Weight,
			fmt.Sprintf("%s waits for %s", e.From, e.To), hl))
	}
	for _, h := range d.VictimPath {
		if h.PFC {
			m.edge(&svgEdge{from: m.victim, to: m.node("p:" + h.Port), kind: "flow-port",
				label: strconv.FormatUint(h.Paused, 10) + " paused", title: fmt.Sprintf("the victim was paused at %s", h.Port),
				color: colFlowPort, width: 1.2, dash: dashPaused})
		}
	}
	for _, r := range d.RootCauses {
		if r.Kind != "host" {
			m.edge(m.contribEdge(m.node("p:"+r.Port), m.node("f:"+r.Name), r.Port, r.Name, r.Contribution, r.Share, true))
		}
	}
	m.hostEdges(d)
	m.victimPathEdges(d)
}

type pt struct{ x, y float64 }

// render writes the SVG.
func (m *svgModel) render(d *Diagnosis) []byte {
	var b bytes.Buffer
	header := m.header
	width := max(m.width, 420.0)
	for i, h := range header {
		fs := 12.0
		if i == 0 {
			fs = 14
		}
		width = max(width, 2*svgMargin+float64(utf8.RuneCountInString(h))*0.62*fs)
	}
	var notes []string
	if m.empty != "" {
		notes = append(notes, m.empty+".")
	}
	if d != nil && len(d.Problems) > 0 {
		notes = append(notes, "What the telemetry lacked:")
		for i, p := range d.Problems {
			if i == 6 {
				notes = append(notes, fmt.Sprintf("  ... and %d more", len(d.Problems)-i))
				break
			}
			notes = append(notes, "  - "+p)
		}
	}
	if len(m.omitted) > 0 {
		notes = append(notes, "Not drawn: "+strings.Join(m.omitted, ", ")+" (see the JSON or DOT output).")
	}
	height := m.top - 10
	if m.empty == "" {
		height = m.height + 8
	}
	notesY := height + 4
	for _, n := range notes {
		width = max(width, 2*svgMargin+float64(utf8.RuneCountInString(n))*svgCharW)
	}
	height += float64(len(notes)) * 16
	legend, legendH := m.legend(width, height+6)
	height += legendH + svgMargin

	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="hawkeye-graph" width="%s" height="%s" viewBox="0 0 %s %s" font-family="%s" font-size="%s" role="img" aria-label="`,
		num(width), num(height), num(width), num(height), svgFontStack, num(svgFont))
	esc(&b, header[0])
	b.WriteString("\">\n<title>")
	esc(&b, strings.Join(header, "; "))
	b.WriteString("</title>\n")
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%s" height="%s" fill="#ffffff"/>`+"\n", num(width), num(height))
	for i, h := range header {
		fs, weight, fill := 12.0, "normal", "#3c4043"
		if i == 0 {
			fs, weight, fill = 14, "bold", "#202124"
		}
		fmt.Fprintf(&b, `<text x="%s" y="%s" font-size="%s" font-weight="%s" fill="%s">`, num(svgMargin), num(svgMargin+12+float64(i)*18), num(fs), weight, fill)
		esc(&b, h)
		b.WriteString("</text>\n")
	}
	if m.empty == "" {
		b.WriteString(`<g class="edges">` + "\n")
		for _, e := range m.edges {
			m.renderEdge(&b, e)
		}
		b.WriteString("</g>\n<g class=\"nodes\">\n")
		for _, nd := range m.nodes {
			if nd.kind != kindDummy {
				renderNode(&b, nd)
			}
		}
		b.WriteString("</g>\n<g class=\"labels\">\n")
		for _, e := range m.edges {
			m.renderLabel(&b, e)
		}
		b.WriteString("</g>\n")
	}
	for i, n := range notes {
		fmt.Fprintf(&b, `<text class="note" x="%s" y="%s" fill="#5f6368">`, num(svgMargin), num(notesY+12+float64(i)*16))
		esc(&b, n)
		b.WriteString("</text>\n")
	}
	b.WriteString(legend)
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// svgHeader is the title and what the diagnosis concluded, in words.
func svgHeader(d *Diagnosis) []string {
	if d == nil {
		return []string{"Hawkeye provenance graph"}
	}
	h := []string{"Hawkeye provenance graph: " + d.Type.Describe(),
		fmt.Sprintf("victim %s, confidence %.2f", dash(d.Victim), d.Confidence)}
	var rc []string
	for i, r := range d.RootCauses {
		if i == 3 {
			rc = append(rc, fmt.Sprintf("%d more", len(d.RootCauses)-i))
			break
		}
		if r.Kind == "host" {
			rc = append(rc, "host "+r.Host)
		} else {
			rc = append(rc, r.Name)
		}
	}
	line := "root causes: none identified"
	if len(rc) > 0 {
		line = "root causes: " + strings.Join(rc, ", ")
	}
	if len(d.Path) > 0 {
		line += "; PFC spreading path " + strings.Join(d.Path, " -> ")
	}
	return append(h, line)
}

func renderNode(b *bytes.Buffer, nd *svgNode) {
	b.WriteString(`<g class="node `)
	b.WriteString(strings.Join(nd.classes, " "))
	b.WriteString(`" data-id="`)
	esc(b, strings.SplitN(nd.key, ":", 2)[1])
	b.WriteString("\"><title>")
	esc(b, nd.title)
	b.WriteString("</title>")
	x0, y0 := nd.x-nd.w/2, nd.y-nd.h/2
	rx := 3.0
	switch nd.kind {
	case kindFlow:
		rx = min(12, nd.h/2)
	case kindHost:
		rx = 0
	}
	if nd.double {
		fmt.Fprintf(b, `<rect x="%s" y="%s" width="%s" height="%s" rx="%s" fill="none" stroke="%s" stroke-width="1.5"/>`,
			num(x0-4), num(y0-4), num(nd.w+8), num(nd.h+8), num(rx+3), nd.stroke)
	}
	fmt.Fprintf(b, `<rect x="%s" y="%s" width="%s" height="%s" rx="%s" fill="%s" stroke="%s" stroke-width="%s"/>`,
		num(x0), num(y0), num(nd.w), num(nd.h), num(rx), nd.fill, nd.stroke, num(nd.strokeW))
	for i, l := range nd.lines {
		weight := ""
		fill := "#202124"
		if i == 0 {
			weight = ` font-weight="bold"`
		}
		if strings.HasPrefix(l, "root cause") || l == "initial congestion" {
			fill = colRoot
			weight = ` font-weight="bold"`
		}
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" fill="%s"%s>`, num(nd.x), num(y0+svgPadY+float64(i)*svgLineH+10.5), fill, weight)
		esc(b, l)
		b.WriteString("</text>")
	}
	b.WriteString("</g>\n")
}

// points is an edge's route left to right: the left node's right side,
// the dummy nodes, the right node's left side. The arrowhead goes at the
// right end, or the left one for a reversed edge.
func (m *svgModel) points(e *svgEdge) []pt {
	l, r := e.ends()
	ln, rn := m.nodes[l], m.nodes[r]
	pts := []pt{{ln.x + ln.w/2, ln.y + e.lOff}}
	for _, c := range e.chain {
		pts = append(pts, pt{m.nodes[c].x, m.nodes[c].y})
	}
	return append(pts, pt{rn.x - rn.w/2, rn.y + e.rOff})
}

func (m *svgModel) renderEdge(b *bytes.Buffer, e *svgEdge) {
	classes := append([]string{"edge", e.kind}, e.classes...)
	if e.back {
		classes = append(classes, "back")
	}
	if e.rev {
		classes = append(classes, "reversed")
	}
	fmt.Fprintf(b, `<g class="%s"><title>`, strings.Join(classes, " "))
	esc(b, e.title)
	b.WriteString("</title>")
	dash := ""
	if e.dash != "" {
		dash = ` stroke-dasharray="` + e.dash + `"`
	}
	var path strings.Builder
	var arrow [3]pt
	if e.back {
		// Out of the source's right side, down the gap beside its
		// column, left under the nodes, up the gap before the target's
		// column and into its left side.
		from, to := m.nodes[e.from], m.nodes[e.to]
		s := pt{from.x + from.w/2, from.y + e.rOff}
		tip := pt{to.x - to.w/2, to.y + e.lOff}
		gx1 := m.colR[from.layer] + svgBackGap + float64(e.nest)*svgBackStep
		gx0 := m.colL[to.layer] - svgBackGap - float64(e.nest)*svgBackStep
		r := svgCorner
		fmt.Fprintf(&path, "M%s %s H%s Q%s %s %s %s V%s Q%s %s %s %s H%s Q%s %s %s %s V%s Q%s %s %s %s H%s",
			num(s.x), num(s.y), num(gx1-r), num(gx1), num(s.y), num(gx1), num(s.y+r),
			num(e.dip-r), num(gx1), num(e.dip), num(gx1-r), num(e.dip),
			num(gx0+r), num(gx0), num(e.dip), num(gx0), num(e.dip-r),
			num(tip.y+r), num(gx0), num(tip.y), num(gx0+r), num(tip.y),
			num(tip.x-svgArrow))
		base := tip.x - svgArrow
		arrow = [3]pt{tip, {base, tip.y - 4.5}, {base, tip.y + 4.5}}
	} else {
		pts := m.points(e)
		// The line stops where the arrowhead starts.
		tip, dir := pts[len(pts)-1], -1.0
		if e.rev {
			tip, dir = pts[0], 1
			pts[0].x += svgArrow
		} else {
			pts[len(pts)-1].x -= svgArrow
		}
		fmt.Fprintf(&path, "M%s %s", num(pts[0].x), num(pts[0].y))
		for i := 1; i < len(pts); i++ {
			p, q := pts[i-1], pts[i]
			dx := (q.x - p.x) / 2
			fmt.Fprintf(&path, " C%s %s %s %s %s %s", num(p.x+dx), num(p.y), num(q.x-dx), num(q.y), num(q.x), num(q.y))
		}
		base := tip.x + dir*svgArrow
		arrow = [3]pt{tip, {base, tip.y - 4.5}, {base, tip.y + 4.5}}
	}
	fmt.Fprintf(b, `<path d="%s" fill="none" stroke="%s" stroke-width="%s"%s/>`, path.String(), e.color, num(e.width), dash)
	fmt.Fprintf(b, `<polygon points="%s,%s %s,%s %s,%s" fill="%s"/>`, num(arrow[0].x), num(arrow[0].y), num(arrow[1].x), num(arrow[1].y),
		num(arrow[2].x), num(arrow[2].y), e.color)
	b.WriteString("</g>\n")
}

// renderLabel writes an edge's label on a white ground where
// placeLabels put it, after every edge and node so that no line crosses
// it.
func (m *svgModel) renderLabel(b *bytes.Buffer, e *svgEdge) {
	if e.label == "" {
		return
	}
	at, w := e.at, labelWidth(e.label)
	fmt.Fprintf(b, `<rect x="%s" y="%s" width="%s" height="13" fill="#ffffff" fill-opacity="0.85"/>`, num(at.x-w/2), num(at.y-7), num(w))
	fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" font-size="%s" fill="%s">`, num(at.x), num(at.y+3.5), num(svgLabelFont), e.color)
	esc(b, e.label)
	b.WriteString("</text>\n")
}

// legend explains the marks, in rows no wider than width, from y down;
// it returns the SVG and its height.
func (m *svgModel) legend(width, y float64) (string, float64) {
	if m.empty != "" {
		return "", 0
	}
	type item struct {
		swatch string
		text   string
	}
	box := func(fill, stroke string, sw float64, rx float64) string {
		return fmt.Sprintf(`<rect x="0" y="-9" width="22" height="12" rx="%s" fill="%s" stroke="%s" stroke-width="%s"/>`, num(rx), fill, stroke, num(sw))
	}
	line := func(color string, w float64, dash string) string {
		d := ""
		if dash != "" {
			d = ` stroke-dasharray="` + dash + `"`
		}
		return fmt.Sprintf(`<path d="M0 -3 H16" stroke="%s" stroke-width="%s"%s/><polygon points="22,-3 15,-7 15,1" fill="%s"/>`, color, num(w), d, color)
	}
	// Only the marks the drawing uses.
	has := map[string]bool{}
	for _, nd := range m.nodes {
		for _, c := range nd.classes {
			has["node "+c] = true
		}
	}
	for _, e := range m.edges {
		has[e.kind] = true
		for _, c := range e.classes {
			has["edge "+c] = true
		}
	}
	var items []item
	for _, it := range []struct {
		on bool
		item
	}{
		{has["node paused"], item{box(colPaused, colBorder, 1, 3), "paused port"}},
		{has["node congested"], item{box(colCongested, colBorder, 1, 3), "congested port"}},
		{has["node victim"], item{box(colVictim, colBorder, 1, 6), "victim flow"}},
		{has["node root-cause"], item{box(colPlain, colRoot, 2.5, 6), "root cause"}},
		{has["node initiator"], item{box(colPlain, colBorder, 1, 3) + `<rect x="-3" y="-12" width="28" height="18" rx="5" fill="none" stroke="#5f6368"/>`, "initial congestion"}},
		{has["port-port"], item{line(colWait, 2, ""), "port waits for port (weight)"}},
		{has["edge path"], item{line(colPath, 3.5, ""), "PFC spreading path"}},
		{has["edge loop"], item{line(colLoop, 3.5, ""), "loop of pauses"}},
		{has["flow-port"], item{line(colFlowPort, 1.2, dashPaused), "flow paused at port (packets)"}},
		{has["port-flow"], item{line(colContrib, 1.8, ""), "port waits for flow (bytes; red: contributor)"}},
		{has["port-host"], item{line(colContrib, 2.5, ""), "port paused by host"}},
		{has["victim-path"], item{line(colVictimPath, 1.5, dashRoute), "victim's route, not paused there"}},
	} {
		if it.on {
			items = append(items, it.item)
		}
	}
	var b strings.Builder
	b.WriteString(`<g class="legend" font-size="10" fill="#3c4043">` + "\n")
	x, row := svgMargin, 0
	const rowH = 20.0
	for _, it := range items {
		w := 30 + float64(utf8.RuneCountInString(it.text))*svgLabelW + 18
		if x+w > width-svgMargin && x > svgMargin {
			x, row = svgMargin, row+1
		}
		fmt.Fprintf(&b, `<g transform="translate(%s %s)">%s<text x="30" y="1">`, num(x), num(y+12+float64(row)*rowH), it.swatch)
		b.WriteString(xmlEscaped(it.text))
		b.WriteString("</text></g>\n")
		x += w
	}
	b.WriteString("</g>\n")
	return b.String(), float64(row+1)*rowH + 4
}

// num prints a coordinate with one decimal at most.
func num(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "0"
	}
	s := strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64)
	if s == "-0" {
		return "0"
	}
	return s
}

// trimFloat prints a count held in a float without decimals noise.
func trimFloat(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// fmtBytes prints a byte count with a decimal unit.
func fmtBytes(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "? B"
	case a >= 1e9:
		return strconv.FormatFloat(v/1e9, 'f', 1, 64) + " GB"
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', 1, 64) + " MB"
	case a >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', 1, 64) + " KB"
	}
	return strconv.FormatFloat(v, 'f', 0, 64) + " B"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// esc writes s escaped for XML text and attribute values; characters XML
// cannot hold (input names may have any bytes) become U+FFFD.
func esc(b *bytes.Buffer, s string) { _ = xml.EscapeText(b, []byte(s)) }

func xmlEscaped(s string) string {
	var b bytes.Buffer
	esc(&b, s)
	return b.String()
}
