package hawkeyeanalyzer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
)

// Decode reads one incident's telemetry as JSON.
func Decode(r io.Reader) (*hawkeyewire.Telemetry, error) {
	var t hawkeyewire.Telemetry
	dec := json.NewDecoder(r)
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	return &t, nil
}

// WriteJSON writes the diagnosis as indented JSON.
func (d *Diagnosis) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // flow names hold "->"
	return enc.Encode(d)
}

// WriteText writes a human summary of the diagnosis.
func (d *Diagnosis) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "victim      %s\n", d.Victim)
	fmt.Fprintf(&b, "anomaly     %s: %s\n", d.Type, d.Type.Describe())
	fmt.Fprintf(&b, "confidence  %.2f\n", d.Confidence)
	if d.Initiator != "" {
		fmt.Fprintf(&b, "initiator   %s\n", d.Initiator)
	}
	if len(d.RootCauses) > 0 {
		b.WriteString("root causes (ranked):\n")
		for i, r := range d.RootCauses {
			if r.Kind == "host" {
				fmt.Fprintf(&b, "  %2d. host %s, pausing %s (%.0f pause frames)\n", i+1, r.Host, r.Port, r.Contribution)
				continue
			}
			v := ""
			if r.Victim {
				v = " (the victim)"
			}
			fmt.Fprintf(&b, "  %2d. flow %s at %s: %.0f B of the contention queue (%.1f%%)%s\n",
				i+1, r.Name, r.Port, r.Contribution, 100*r.Share, v)
		}
	} else {
		b.WriteString("root causes: none identified\n")
	}
	if len(d.Path) > 0 {
		fmt.Fprintf(&b, "PFC spreading path: %s\n", strings.Join(d.Path, " -> "))
	}
	if len(d.Loops) == 0 {
		b.WriteString("loops: none\n")
	}
	for i, l := range d.Loops {
		fmt.Fprintf(&b, "loop %d: %s -> %s\n", i+1, strings.Join(l, " -> "), l[0])
	}
	if len(d.VictimPath) > 0 {
		b.WriteString("victim path:\n")
		for _, h := range d.VictimPath {
			mark := ""
			if h.PFC {
				mark = "  [paused by PFC]"
			}
			fmt.Fprintf(&b, "  %-16s %d/%d packets paused, queue %.0f B, contention %.0f B%s\n",
				h.Port, h.Paused, h.Packets, h.Qdepth, h.Contention, mark)
		}
	}
	if len(d.SpreadingFlows) > 0 {
		fmt.Fprintf(&b, "PFC-spreading flows: %s\n", strings.Join(d.SpreadingFlows, ", "))
	}
	if len(d.Explanation) > 0 {
		b.WriteString("why:\n")
		for _, e := range d.Explanation {
			fmt.Fprintf(&b, "  - %s\n", e)
		}
	}
	if len(d.Problems) > 0 {
		b.WriteString("problems with the telemetry:\n")
		for _, p := range d.Problems {
			fmt.Fprintf(&b, "  - %s\n", p)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// dotFlowsPerPort bounds the flows drawn per port, so that a graph of
// thousands of flows stays readable.
const dotFlowsPerPort = 8

// DOT renders the relevant part of the provenance graph in Graphviz's
// language: every port on a port-level edge or on the victim's path, the
// victim, the root causes, the PFC-spreading flows and the flows most
// paused at the drawn ports. Port-level edges are bold (the initial
// congestion point is doubled), flow-port edges (paused packets) dashed,
// port-flow edges of contributors red. Edges point the wait-for way.
func (d *Diagnosis) DOT() []byte {
	g := d.Graph
	var b bytes.Buffer
	b.WriteString("digraph hawkeye {\n  rankdir=LR;\n  node [fontname=\"Helvetica\", fontsize=10];\n  edge [fontname=\"Helvetica\", fontsize=9];\n")
	fmt.Fprintf(&b, "  label=%s;\n  labelloc=t;\n", dotQuote(fmt.Sprintf("%s — %s (confidence %.2f)", d.Victim, d.Type.Describe(), d.Confidence)))
	if g == nil {
		b.WriteString("}\n")
		return b.Bytes()
	}
	ports, flows := d.drawn(dotFlowsPerPort)
	portList := sortedKeys(ports)
	onPath := make(map[string]bool)
	for _, id := range d.Path {
		onPath[id] = true
	}
	for _, p := range portList {
		n := &g.Ports[p]
		attrs := []string{"shape=box"}
		label := n.ID
		if n.Peer != "" {
			label += "\\n-> " + n.Peer
		}
		label += fmt.Sprintf("\\nq %.0f B, paused %d/%d", n.Qdepth, n.Paused, n.Packets)
		switch {
		case n.IsPaused():
			attrs = append(attrs, "style=filled", "fillcolor=\"#f4c7c3\"")
		case n.Contention >= g.opt.MinContention:
			attrs = append(attrs, "style=filled", "fillcolor=\"#fce8b2\"")
		}
		if n.ID == d.Initiator {
			attrs = append(attrs, "peripheries=2", "penwidth=2")
		}
		fmt.Fprintf(&b, "  p%d [label=%s, %s];\n", p, dotQuoteLabel(label), strings.Join(attrs, ", "))
	}
	for _, f := range sortedKeys(flows) {
		attrs := "shape=ellipse"
		if g.Flows[f].Key == g.Victim {
			attrs += ", style=filled, fillcolor=\"#c6dafc\""
		}
		fmt.Fprintf(&b, "  f%d [label=%s, %s];\n", f, dotQuote(g.Flows[f].Name), attrs)
	}
	for _, e := range g.PortEdges {
		style := "penwidth=2"
		if onPath[e.From] && onPath[e.To] {
			style = "penwidth=3, color=\"#a50e0e\""
		}
		fmt.Fprintf(&b, "  p%d -> p%d [label=%s, %s];\n", e.from, e.to, dotQuote(fmt.Sprintf("%.3g", e.Weight)), style)
	}
	for _, e := range g.FlowPortEdges {
		if flows[e.flow] && ports[e.port] {
			fmt.Fprintf(&b, "  f%d -> p%d [label=\"%d\", style=dashed];\n", e.flow, e.port, e.Paused)
		}
	}
	for _, p := range portList {
		for _, ei := range g.pfEdges[p] {
			e := &g.PortFlowEdges[ei]
			if !flows[e.flow] {
				continue
			}
			style := "color=gray"
			if e.Contributor {
				style = "color=red"
			}
			fmt.Fprintf(&b, "  p%d -> f%d [label=%s, %s];\n", e.port, e.flow, dotQuote(fmt.Sprintf("%.0f B", e.Contribution)), style)
		}
	}
	b.WriteString("}\n")
	return b.Bytes()
}

// drawn selects the part of the graph worth drawing: every port on a
// port-level edge, on the victim's path or initiating, the victim, the
// root-cause and PFC-spreading flows, and at each drawn port the
// flowsPerPort flows most paused there. The rest of a graph of thousands
// of flows would bury the ones that explain the diagnosis. d.Graph must
// not be nil.
func (d *Diagnosis) drawn(flowsPerPort int) (ports, flows map[int]bool) {
	ports = d.drawnPorts()
	flows = make(map[int]bool)
	for _, f := range d.drawnFlows(ports, flowsPerPort) {
		flows[f] = true
	}
	return ports, flows
}

// drawnPorts are the ports drawn: on a port-level edge, on the victim's
// path, or the initiator.
func (d *Diagnosis) drawnPorts() map[int]bool {
	g := d.Graph
	ports := make(map[int]bool)
	for _, e := range g.PortEdges {
		ports[e.from], ports[e.to] = true, true
	}
	for _, h := range d.VictimPath {
		if i, ok := g.portIdx[parsePortID(h.Port)]; ok {
			ports[i] = true
		}
	}
	if i, ok := g.portIdx[parsePortID(d.Initiator)]; ok {
		ports[i] = true
	}
	return ports
}

// drawnFlows are the flows drawn at ports, without repeats: the victim,
// the root causes and the PFC-spreading flows first, then the most paused
// at each port in port order.
func (d *Diagnosis) drawnFlows(ports map[int]bool, flowsPerPort int) []int {
	g := d.Graph
	seen := make(map[int]bool)
	var out []int
	add := func(f int) {
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	if v, ok := g.flowIdx[g.Victim]; ok {
		add(v)
	}
	for _, r := range d.RootCauses {
		if r.Flow != nil {
			if i, ok := g.flowIdx[*r.Flow]; ok {
				add(i)
			}
		}
	}
	for _, name := range d.SpreadingFlows {
		for _, f := range g.Flows {
			if f.Name == name {
				add(g.flowIdx[f.Key])
			}
		}
	}
	for _, p := range sortedKeys(ports) {
		for _, hi := range g.mostPaused(p, flowsPerPort) {
			add(g.hops[hi].flow)
		}
	}
	return out
}

// mostPaused returns the hops at port p with paused packets, the most
// paused first, at most n.
func (g *Graph) mostPaused(p, n int) []int {
	hs := slices.Clone(g.portHops[p])
	slices.SortStableFunc(hs, func(a, c int) int {
		return int(min(max(int64(g.hops[c].paused)-int64(g.hops[a].paused), -1), 1))
	})
	out := hs[:0]
	for _, hi := range hs {
		if g.hops[hi].paused == 0 || len(out) == n {
			break
		}
		out = append(out, hi)
	}
	return out
}

func sortedKeys(m map[int]bool) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// dotQuote quotes s as a DOT string (switch names come from the input).
func dotQuote(s string) string {
	r := strings.NewReplacer("\\", "\\\\", "\"", "\\\"", "\n", "\\n", "\r", "")
	return "\"" + r.Replace(s) + "\""
}

// dotQuoteLabel is dotQuote for labels that already hold \n line breaks.
func dotQuoteLabel(s string) string {
	parts := strings.Split(s, "\\n")
	for i, p := range parts {
		q := dotQuote(p)
		parts[i] = q[1 : len(q)-1]
	}
	return "\"" + strings.Join(parts, "\\n") + "\""
}

// ErrNoGraphviz is returned by SVG when Graphviz's dot is not installed.
var ErrNoGraphviz = errors.New("graphviz (dot) is not installed")

// SVG renders DOT source to SVG with Graphviz's dot.
func SVG(ctx context.Context, dot []byte) ([]byte, error) {
	path, err := exec.LookPath("dot")
	if err != nil {
		return nil, ErrNoGraphviz
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "-Tsvg")
	cmd.Stdin = bytes.NewReader(dot)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("dot -Tsvg: %v: %s", err, strings.TrimSpace(errb.String()))
	}
	return out.Bytes(), nil
}
