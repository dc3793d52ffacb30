package hawkeyeanalyzer

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"unicode/utf8"
)

// layout places the nodes in layers (Sugiyama's scheme): port-level
// loops broken by a depth-first search from the victim's ports,
// longest-path layers, dummy nodes where an edge spans layers,
// barycentric ordering to cut crossings, then coordinates. Flows sit at
// one end of their ports: the victim and flows that only wait before
// them, flows that fill a queue after it, so that the picture reads left
// to right as the waits go, from the victim to the root causes.
func (m *svgModel) layout() {
	m.top = svgMargin + float64(len(m.header))*18 + 10 // under the header's lines
	if len(m.nodes) == 0 {
		return
	}
	m.orientFlowEdges()
	m.breakLoops()
	m.assignLayers()
	m.addDummies()
	m.order()
	m.place()
	m.attach()
	m.placeLabels()
}

// orientFlowEdges decides which side of its ports each flow sits on: a
// flow that fills a contended queue goes after the port (a root cause, or
// a candidate), any other flow before the ports it waits at; its other
// edges run back against the layers.
func (m *svgModel) orientFlowEdges() {
	filled := make([]bool, len(m.nodes))
	for _, e := range m.edges {
		if e.kind == "port-flow" && slices.Contains(e.classes, "contributor") {
			filled[e.to] = true
		}
	}
	// The victim always starts the picture.
	if m.victim >= 0 {
		filled[m.victim] = false
	}
	for _, e := range m.edges {
		switch e.kind {
		case "flow-port":
			e.rev = filled[e.from]
		case "port-flow":
			e.rev = e.to == m.victim || !filled[e.to] && m.hasOut(e.to)
		}
	}
}

// breakLoops marks the port-level edges that close a loop (an edge into a
// port on the depth-first search's stack) as back edges, searching from
// the victim's ports first so that the loop is cut where the pause came
// back to the victim.
func (m *svgModel) breakLoops() {
	n := len(m.nodes)
	out := make([][]int, n)
	for i, e := range m.edges {
		if e.kind == "port-port" {
			out[e.from] = append(out[e.from], i)
		}
	}
	state := make([]uint8, n)
	var visit func(v int)
	visit = func(v int) {
		state[v] = 1
		for _, ei := range out[v] {
			e := m.edges[ei]
			switch state[e.to] {
			case 0:
				visit(e.to)
			case 1:
				e.back = true
			}
		}
		state[v] = 2
	}
	var starts []int
	for _, e := range m.edges {
		if e.from == m.victim && e.kind == "flow-port" {
			starts = append(starts, e.to)
		}
	}
	for v := range n {
		starts = append(starts, v)
	}
	for _, v := range starts {
		if state[v] == 0 {
			visit(v)
		}
	}
}

// assignLayers gives each node its longest-path layer over the edges left
// forward, then moves each source just before its first successor so
// that a lone flow does not sit far left of the port it waits at.
func (m *svgModel) assignLayers() {
	n := len(m.nodes)
	succ := make([][]int, n)
	pred := make([][]int, n)
	for _, e := range m.edges {
		if e.back {
			continue
		}
		u, v := e.ends()
		succ[u] = append(succ[u], v)
		pred[v] = append(pred[v], u)
	}
	topo := topoOrder(succ, pred)
	for _, u := range topo {
		for _, v := range succ[u] {
			m.nodes[v].layer = max(m.nodes[v].layer, m.nodes[u].layer+1)
		}
	}
	for _, u := range topo {
		if len(pred[u]) > 0 || len(succ[u]) == 0 {
			continue
		}
		l := math.MaxInt
		for _, v := range succ[u] {
			l = min(l, m.nodes[v].layer)
		}
		m.nodes[u].layer = max(0, l-1)
	}
}

// topoOrder is a topological order of the graph (Kahn's, lowest index
// first in each round); should a cycle be left it appends the rest rather
// than loop.
func topoOrder(succ, pred [][]int) []int {
	n := len(succ)
	indeg := make([]int, n)
	for v := range n {
		indeg[v] = len(pred[v])
	}
	var topo []int
	done := make([]bool, n)
	for len(topo) < n {
		progress := false
		for v := range n {
			if !done[v] && indeg[v] == 0 {
				done[v] = true
				topo = append(topo, v)
				for _, w := range succ[v] {
					indeg[w]--
				}
				progress = true
			}
		}
		if !progress { // a cycle left: cannot happen, but never loop
			for v := range n {
				if !done[v] {
					done[v] = true
					topo = append(topo, v)
				}
			}
		}
	}
	return topo
}

// addDummies puts a dummy node on every layer a forward edge crosses, so
// that the ordering sweeps see long edges too, and fills m.layers in the
// first order: the victim, then the nodes as found.
func (m *svgModel) addDummies() {
	for i, nd := range m.nodes {
		nd.seq = 1000 * (i + 1)
	}
	if m.victim >= 0 {
		m.nodes[m.victim].seq = 0
	}
	for _, e := range m.edges {
		if e.back {
			continue
		}
		u, v := e.ends()
		from, to := m.nodes[u], m.nodes[v]
		for l := from.layer + 1; l < to.layer; l++ {
			dn := &svgNode{key: fmt.Sprintf("d:%d", len(m.nodes)), kind: kindDummy, layer: l, h: svgDummyH, seq: from.seq + l}
			e.chain = append(e.chain, len(m.nodes))
			m.nodes = append(m.nodes, dn)
		}
	}
	nl := 0
	for _, nd := range m.nodes {
		nl = max(nl, nd.layer+1)
	}
	m.layers = make([][]int, nl)
	for i, nd := range m.nodes {
		m.layers[nd.layer] = append(m.layers[nd.layer], i)
	}
	for _, l := range m.layers {
		slices.SortStableFunc(l, func(a, b int) int { return cmp.Compare(m.nodes[a].seq, m.nodes[b].seq) })
	}
}

// segments are the edges' pieces between adjacent layers (back edges
// excepted), as node pairs left to right.
func (m *svgModel) segments() [][2]int {
	var segs [][2]int
	for _, e := range m.edges {
		if e.back {
			continue
		}
		l, r := e.ends()
		pts := append(append([]int{l}, e.chain...), r)
		for i := 1; i < len(pts); i++ {
			segs = append(segs, [2]int{pts[i-1], pts[i]})
		}
	}
	return segs
}

// order sorts each layer by the barycentre of its neighbours, sweeping
// down and up, and keeps the order with the fewest crossings.
func (m *svgModel) order() {
	segs := m.segments()
	up := make([][]int, len(m.nodes))
	down := make([][]int, len(m.nodes))
	for _, s := range segs {
		down[s[0]] = append(down[s[0]], s[1])
		up[s[1]] = append(up[s[1]], s[0])
	}
	setPos := func() {
		for _, l := range m.layers {
			for i, v := range l {
				m.nodes[v].pos = i
			}
		}
	}
	crossings := func() int {
		c := 0
		for i := range segs {
			for j := i + 1; j < len(segs); j++ {
				a, b := segs[i], segs[j]
				if m.nodes[a[0]].layer != m.nodes[b[0]].layer {
					continue
				}
				d1 := m.nodes[a[0]].pos - m.nodes[b[0]].pos
				d2 := m.nodes[a[1]].pos - m.nodes[b[1]].pos
				if d1*d2 < 0 {
					c++
				}
			}
		}
		return c
	}
	sortLayer := func(l []int, nb [][]int) {
		key := make(map[int]float64, len(l))
		for _, v := range l {
			if len(nb[v]) == 0 {
				key[v] = float64(m.nodes[v].pos)
				continue
			}
			s := 0.0
			for _, u := range nb[v] {
				s += float64(m.nodes[u].pos)
			}
			key[v] = s / float64(len(nb[v]))
		}
		slices.SortStableFunc(l, func(a, b int) int { return cmp.Compare(key[a], key[b]) })
		for i, v := range l {
			m.nodes[v].pos = i
		}
	}
	setPos()
	best := crossings()
	bestOrder := cloneLayers(m.layers)
	for it := range 8 {
		if it%2 == 0 {
			for l := 1; l < len(m.layers); l++ {
				sortLayer(m.layers[l], up)
			}
		} else {
			for l := len(m.layers) - 2; l >= 0; l-- {
				sortLayer(m.layers[l], down)
			}
		}
		if c := crossings(); c < best {
			best, bestOrder = c, cloneLayers(m.layers)
		}
	}
	m.layers = bestOrder
	setPos()
}

func cloneLayers(ls [][]int) [][]int {
	out := make([][]int, len(ls))
	for i, l := range ls {
		out[i] = slices.Clone(l)
	}
	return out
}

// place gives every node its centre: layers are columns, and within a
// column nodes move towards their neighbours' height without overlapping.
func (m *svgModel) place() {
	// Back edges run down the gaps beside the columns they join: leave
	// room for them at both ends.
	nback := 0
	for _, e := range m.edges {
		if e.back {
			nback++
		}
	}
	room := 0.0
	if nback > 0 {
		room = svgBackGap + float64(nback)*svgBackStep
	}
	x := svgMargin + room
	for _, l := range m.layers {
		w := 10.0
		for _, v := range l {
			w = max(w, m.nodes[v].w)
		}
		for _, v := range l {
			m.nodes[v].x = x + w/2
		}
		m.colL = append(m.colL, x)
		m.colR = append(m.colR, x+w)
		x += w + svgLayerGap
	}
	m.width = x - svgLayerGap + room + svgMargin
	// First stack every column from the top.
	for _, l := range m.layers {
		y := 0.0
		for _, v := range l {
			nd := m.nodes[v]
			nd.y = y + nd.h/2
			y += nd.h + svgNodeGap
		}
	}
	nb := make([][]int, len(m.nodes))
	for _, s := range m.segments() {
		nb[s[0]] = append(nb[s[0]], s[1])
		nb[s[1]] = append(nb[s[1]], s[0])
	}
	for it := range 8 {
		// Sweep right then left, so that both ends settle.
		for k := range m.layers {
			l := m.layers[k]
			if it%2 == 1 {
				l = m.layers[len(m.layers)-1-k]
			}
			want := make([]float64, len(l))
			for i, v := range l {
				want[i] = m.nodes[v].y
				if len(nb[v]) > 0 {
					ys := make([]float64, 0, len(nb[v]))
					for _, u := range nb[v] {
						ys = append(ys, m.nodes[u].y)
					}
					want[i] = median(ys)
				}
			}
			m.fitColumn(l, want)
		}
	}
	top := math.Inf(1)
	for _, nd := range m.nodes {
		top = min(top, nd.y-nd.h/2)
	}
	bottom := 0.0
	for _, nd := range m.nodes {
		nd.y += m.top - top
		bottom = max(bottom, nd.y+nd.h/2)
	}
	// Back edges arc below the nodes of the layers they span, nested:
	// the shortest innermost.
	var backs []*svgEdge
	for _, e := range m.edges {
		if e.back {
			backs = append(backs, e)
		}
	}
	slices.SortStableFunc(backs, func(a, b *svgEdge) int {
		return cmp.Compare(m.nodes[a.from].layer-m.nodes[a.to].layer, m.nodes[b.from].layer-m.nodes[b.to].layer)
	})
	level := map[int]float64{} // per layer, the lowest arc so far
	for k, e := range backs {
		e.nest = k
		lo, hi := m.nodes[e.to].layer, m.nodes[e.from].layer
		low := 0.0
		for l := lo; l <= hi; l++ {
			for _, v := range m.layers[l] {
				low = max(low, m.nodes[v].y+m.nodes[v].h/2)
			}
			low = max(low, level[l])
		}
		e.dip = low + 26
		for l := lo; l <= hi; l++ {
			level[l] = e.dip
		}
		bottom = max(bottom, e.dip+12)
	}
	m.height = bottom
}

// median of ys (the mean of the middle two for an even count): a node
// with many neighbours on one side is not dragged by the few far ones.
func median(ys []float64) float64 {
	slices.Sort(ys)
	n := len(ys)
	if n%2 == 1 {
		return ys[n/2]
	}
	return (ys[n/2-1] + ys[n/2]) / 2
}

// fitColumn places the nodes of a column, in their order, as close to
// their wanted heights as they can be without overlapping: the least
// squares fit under the minimum gaps, which shifting by the gaps turns
// into isotonic regression, solved by pooling adjacent violators.
func (m *svgModel) fitColumn(l []int, want []float64) {
	off := make([]float64, len(l))
	for i := 1; i < len(l); i++ {
		off[i] = off[i-1] + m.nodes[l[i-1]].h/2 + svgNodeGap + m.nodes[l[i]].h/2
	}
	type block struct {
		sum   float64
		n     int
		first int
	}
	var bs []block
	for i := range l {
		bs = append(bs, block{want[i] - off[i], 1, i})
		for len(bs) > 1 {
			a, b := bs[len(bs)-2], bs[len(bs)-1]
			if a.sum/float64(a.n) <= b.sum/float64(b.n) {
				break
			}
			bs = append(bs[:len(bs)-2], block{a.sum + b.sum, a.n + b.n, a.first})
		}
	}
	for _, b := range bs {
		z := b.sum / float64(b.n)
		for i := b.first; i < b.first+b.n; i++ {
			m.nodes[l[i]].y = z + off[i]
		}
	}
}

// attach spreads the edges meeting one side of a node over its height,
// in the order of their other ends, so that they do not all meet in one
// point.
func (m *svgModel) attach() {
	type end struct {
		e     *svgEdge
		other float64
		idx   int
		left  bool // lOff: the end at the edge's left node (a back edge: its target)
	}
	sides := make([][]end, 2*len(m.nodes)) // node*2: its left side, node*2+1: its right side
	for i, e := range m.edges {
		if e.back {
			// It leaves its source's right side downwards and enters
			// its target's left side from below.
			sides[2*e.from+1] = append(sides[2*e.from+1], end{e, e.dip, i, false})
			sides[2*e.to] = append(sides[2*e.to], end{e, e.dip, i, true})
			continue
		}
		l, r := e.ends()
		next, prev := r, l
		if len(e.chain) > 0 {
			next, prev = e.chain[0], e.chain[len(e.chain)-1]
		}
		sides[2*l+1] = append(sides[2*l+1], end{e, m.nodes[next].y, i, true})
		sides[2*r] = append(sides[2*r], end{e, m.nodes[prev].y, i, false})
	}
	for s, ends := range sides {
		nd := m.nodes[s/2]
		if len(ends) < 2 || nd.kind == kindDummy {
			continue
		}
		slices.SortStableFunc(ends, func(a, b end) int {
			if c := cmp.Compare(a.other, b.other); c != 0 {
				return c
			}
			return cmp.Compare(a.idx, b.idx)
		})
		step := min(10, (nd.h-8)/float64(len(ends)-1))
		for k, en := range ends {
			off := (float64(k) - float64(len(ends)-1)/2) * step
			if en.left {
				en.e.lOff = off
			} else {
				en.e.rOff = off
			}
		}
	}
}

// placeLabels puts each edge's label on its line where it covers no node
// and no label placed before it: the middle of the line first, then
// further towards its ends, then the other pieces of a long edge.
func (m *svgModel) placeLabels() {
	type box struct{ x0, y0, x1, y1 float64 }
	var taken []box
	for _, nd := range m.nodes {
		if nd.kind != kindDummy {
			taken = append(taken, box{nd.x - nd.w/2 - 2, nd.y - nd.h/2 - 2, nd.x + nd.w/2 + 2, nd.y + nd.h/2 + 2})
		}
	}
	boxAt := func(at pt, w float64) box { return box{at.x - w/2, at.y - 7, at.x + w/2, at.y + 6} }
	free := func(b box) bool {
		for _, t := range taken {
			if b.x0 < t.x1 && t.x0 < b.x1 && b.y0 < t.y1 && t.y0 < b.y1 {
				return false
			}
		}
		return true
	}
	ts := []float64{0.5, 0.35, 0.65, 0.2, 0.8}
	for _, e := range m.edges {
		if e.label == "" {
			continue
		}
		w := labelWidth(e.label)
		var cands []pt
		if e.back {
			x0, x1 := m.colL[m.nodes[e.to].layer], m.colR[m.nodes[e.from].layer]
			for _, t := range ts {
				cands = append(cands, pt{x0 + t*(x1-x0), e.dip})
			}
		} else {
			pts := m.points(e)
			mid := (len(pts) - 2) / 2
			segs := []int{mid}
			for d := 1; d < len(pts); d++ {
				for _, s := range []int{mid - d, mid + d} {
					if s >= 0 && s < len(pts)-1 {
						segs = append(segs, s)
					}
				}
			}
			for _, s := range segs {
				for _, t := range ts {
					cands = append(cands, onCurve(pts[s], pts[s+1], t))
				}
			}
		}
		e.at = cands[0]
		for _, c := range cands {
			if free(boxAt(c, w)) {
				e.at = c
				break
			}
		}
		taken = append(taken, boxAt(e.at, w))
	}
}

// onCurve is the point at t of the cubic an edge draws from p to q
// (horizontal tangents at both ends).
func onCurve(p, q pt, t float64) pt {
	dx := (q.x - p.x) / 2
	c1, c2 := pt{p.x + dx, p.y}, pt{q.x - dx, q.y}
	u := 1 - t
	a, b, c, d := u*u*u, 3*u*u*t, 3*u*t*t, t*t*t
	return pt{a*p.x + b*c1.x + c*c2.x + d*q.x, a*p.y + b*c1.y + c*c2.y + d*q.y}
}

func labelWidth(s string) float64 { return float64(utf8.RuneCountInString(s))*svgLabelW + 6 }
