package hawkeyeanalyzer

import (
	"cmp"
	"slices"
	"testing"

	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
)

// scenario builds one incident's telemetry the way switches would record
// it: flows' hops at each switch (ingress, egress, packets, paused packets,
// average queue depth they saw); port records and port-pair meters are
// derived from the hops (1000 B per packet), pause frames set per port.
type scenario struct {
	links  []hawkeyewire.Link
	hosts  map[string]uint32
	hops   map[string][]hawkeyewire.FlowRecord
	pauses map[PortID]uint32
	order  []string
	victim hawkeyewire.FlowKey
}

func newScenario() *scenario {
	return &scenario{hosts: map[string]uint32{}, hops: map[string][]hawkeyewire.FlowRecord{}, pauses: map[PortID]uint32{}}
}

// link joins a:ap to b:bp.
func (s *scenario) link(a string, ap int, b string, bp int) *scenario {
	s.links = append(s.links, hawkeyewire.Link{A: a, APort: ap, B: b, BPort: bp})
	return s
}

// host attaches host h (IP 10.0.0.n) to a:ap.
func (s *scenario) host(a string, ap int, h string) *scenario {
	s.links = append(s.links, hawkeyewire.Link{A: a, APort: ap, Host: h})
	if _, ok := s.hosts[h]; !ok {
		s.hosts[h] = 10<<24 | uint32(len(s.hosts)+1)
	}
	return s
}

// flow is the RoCE flow from host src to host dst with source port sport.
func (s *scenario) flow(src, dst string, sport uint16) hawkeyewire.FlowKey {
	return hawkeyewire.FlowKey{Src: s.hosts[src], Dst: s.hosts[dst], Sport: sport, Dport: 4791, Proto: 17}
}

// hop records flow f at switch sw: in -> out, packets, paused, average
// queue depth.
func (s *scenario) hop(sw string, f hawkeyewire.FlowKey, in, out int, packets, paused uint32, qdepth uint64) *scenario {
	if _, ok := s.hops[sw]; !ok {
		s.order = append(s.order, sw)
	}
	s.hops[sw] = append(s.hops[sw], hawkeyewire.FlowRecord{Key: f, In: in, Out: out, Packets: packets, Paused: paused,
		QdepthSum: qdepth * uint64(packets)})
	return s
}

// pause sets the PFC pause frames sw:port received.
func (s *scenario) pause(sw string, port int, frames uint32) *scenario {
	s.pauses[PortID{sw, port}] = frames
	return s
}

func (s *scenario) telemetry() *hawkeyewire.Telemetry {
	t := &hawkeyewire.Telemetry{Event: 1, Victim: s.victim, Time: 1_000_000, Hosts: s.hosts, Links: s.links}
	names := slices.Clone(s.order)
	for id := range s.pauses {
		if _, ok := s.hops[id.Switch]; !ok && !slices.Contains(names, id.Switch) {
			names = append(names, id.Switch)
		}
	}
	slices.Sort(names)
	for _, sw := range names {
		ports := map[int]*hawkeyewire.PortRecord{}
		meters := map[[2]int]uint64{}
		portOf := func(p int) *hawkeyewire.PortRecord {
			if ports[p] == nil {
				ports[p] = &hawkeyewire.PortRecord{Port: p}
			}
			return ports[p]
		}
		for _, f := range s.hops[sw] {
			p := portOf(f.Out)
			p.Packets += f.Packets
			p.Paused += f.Paused
			p.QdepthSum += f.QdepthSum
			meters[[2]int{f.In, f.Out}] += 1000 * uint64(f.Packets)
		}
		for id, fr := range s.pauses {
			if id.Switch == sw {
				p := portOf(id.Port)
				p.PauseFrames = fr
				p.PausedNow = true
				p.PauseLeftNs = 3355
			}
		}
		e := hawkeyewire.EpochReport{ID: 7, Start: 0, Flows: slices.Clone(s.hops[sw])}
		for _, p := range ports {
			e.Ports = append(e.Ports, *p)
		}
		slices.SortFunc(e.Ports, func(a, b hawkeyewire.PortRecord) int { return cmp.Compare(a.Port, b.Port) })
		for k, b := range meters {
			e.Meters = append(e.Meters, hawkeyewire.MeterRecord{In: k[0], Out: k[1], Bytes: b})
		}
		slices.SortFunc(e.Meters, func(a, b hawkeyewire.MeterRecord) int {
			return cmp.Or(cmp.Compare(a.In, b.In), cmp.Compare(a.Out, b.Out))
		})
		t.Reports = append(t.Reports, hawkeyewire.SwitchReport{Switch: sw, Epochs: []hawkeyewire.EpochReport{e}, Bytes: 1500})
	}
	return t
}

// without drops the reports of the named switches.
func without(t *hawkeyewire.Telemetry, sws ...string) *hawkeyewire.Telemetry {
	c := *t
	c.Reports = nil
	for _, r := range t.Reports {
		if !slices.Contains(sws, r.Switch) {
			c.Reports = append(c.Reports, r)
		}
	}
	return &c
}

// incastCase is Figure 1(a): bursts from A1..A4 into SW4.P1 (towards R)
// pause SW2.P3, whose queue of F2 pauses SW1.P1, where the victim F1 (Y to
// Z, never near SW4) waits.
type incastCase struct {
	s                  *scenario
	f1, f2             hawkeyewire.FlowKey
	bursts             []hawkeyewire.FlowKey
	sw1p1, sw2p3, sw41 string
}

func newIncast() *incastCase {
	s := newScenario()
	s.link("SW1", 1, "SW2", 1).link("SW2", 3, "SW4", 2).
		host("SW4", 1, "R").host("SW1", 3, "X").host("SW1", 4, "Y").host("SW2", 4, "Z")
	for i, a := range []string{"A1", "A2", "A3", "A4"} {
		s.host("SW4", 3+i, a)
	}
	c := &incastCase{s: s, sw1p1: "SW1:1", sw2p3: "SW2:3", sw41: "SW4:1"}
	c.f1 = s.flow("Y", "Z", 1001)
	c.f2 = s.flow("X", "R", 1002)
	s.hop("SW1", c.f1, 4, 1, 100, 60, 20000).hop("SW2", c.f1, 1, 4, 100, 0, 500)
	s.hop("SW1", c.f2, 3, 1, 100, 60, 20000).hop("SW2", c.f2, 1, 3, 100, 70, 60000).hop("SW4", c.f2, 2, 1, 100, 0, 80000)
	for i, a := range []string{"A1", "A2", "A3", "A4"} {
		f := s.flow(a, "R", uint16(2001+i))
		c.bursts = append(c.bursts, f)
		s.hop("SW4", f, 3+i, 1, 1000, 0, 90000)
	}
	s.pause("SW1", 1, 20).pause("SW2", 3, 30)
	s.victim = c.f1
	return c
}

// stormCase is Figure 1(b): host H1 keeps pausing SW1.P1; the flows to H1
// pause SW2.P1 and SW3.P1, where the victim F1 (H5 to H4, not to H1) waits
// behind them.
type stormCase struct {
	s          *scenario
	f1, f2, f3 hawkeyewire.FlowKey
}

func newStorm() *stormCase {
	s := newScenario()
	s.host("SW1", 1, "H1").link("SW2", 1, "SW1", 2).link("SW3", 1, "SW1", 3).host("SW1", 4, "H4").
		host("SW2", 2, "H2").host("SW3", 2, "H3").host("SW3", 3, "H5")
	c := &stormCase{s: s}
	c.f2 = s.flow("H2", "H1", 3001)
	c.f3 = s.flow("H3", "H1", 3002)
	c.f1 = s.flow("H5", "H4", 3003)
	s.hop("SW2", c.f2, 2, 1, 100, 80, 30000).hop("SW1", c.f2, 2, 1, 100, 95, 50000)
	s.hop("SW3", c.f3, 2, 1, 100, 80, 30000).hop("SW1", c.f3, 3, 1, 100, 95, 50000)
	s.hop("SW3", c.f1, 3, 1, 100, 70, 30000).hop("SW1", c.f1, 3, 4, 100, 0, 200)
	s.pause("SW1", 1, 500).pause("SW2", 1, 40).pause("SW3", 1, 40)
	s.victim = c.f1
	return c
}

// ring is the cyclic buffer dependency of Figures 1(c) and 1(d): SWk.P2
// leads to SW(k+1).P1 around four switches, host Hk on SWk.P3, and flows
// F1..F4 each crossing two loop ports, so that every loop port's queue
// feeds the next.
type ring struct {
	s              *scenario
	f1, f2, f3, f4 hawkeyewire.FlowKey
}

func newRing(loopPaused uint32, loopQ uint64) *ring {
	s := newScenario()
	for k := 1; k <= 4; k++ {
		s.link(sw(k), 2, sw(k%4+1), 1)
	}
	for k := 1; k <= 4; k++ {
		s.host(sw(k), 3, "H"+string(rune('0'+k)))
	}
	r := &ring{s: s}
	r.f1 = s.flow("H1", "H3", 4001)
	r.f2 = s.flow("H2", "H4", 4002)
	r.f3 = s.flow("H3", "H1", 4003)
	r.f4 = s.flow("H4", "H2", 4004)
	// Fk enters at SWk, crosses SWk.P2 and SW(k+1).P2, leaves at SW(k+2).
	for k, f := range []hawkeyewire.FlowKey{r.f1, r.f2, r.f3, r.f4} {
		a, b, c := k+1, (k+1)%4+1, (k+2)%4+1
		s.hop(sw(a), f, 3, 2, 100, loopPaused, loopQ).hop(sw(b), f, 1, 2, 100, loopPaused, loopQ).hop(sw(c), f, 1, 3, 100, 0, 300)
	}
	for k := 1; k <= 4; k++ {
		s.pause(sw(k), 2, 50)
	}
	return r
}

func sw(k int) string { return "SW" + string(rune('0'+k)) }

// newInLoop is Figure 1(c): bursts B1, B2 into SW2.P2, inside the loop.
func newInLoop() (*ring, []hawkeyewire.FlowKey) {
	r := newRing(90, 60000)
	s := r.s
	s.host("SW2", 4, "B1").host("SW2", 5, "B2")
	var bursts []hawkeyewire.FlowKey
	for i, b := range []string{"B1", "B2"} {
		f := s.flow(b, "H3", uint16(5001+i))
		bursts = append(bursts, f)
		s.hop("SW2", f, 4+i, 2, 300, 100, 80000).hop("SW3", f, 1, 3, 300, 0, 300)
	}
	s.victim = r.f1
	return r, bursts
}

// newInLoopNextToContention is Figure 1(c)'s loop with a congested port
// next to it, as a fabric's long background flows make one: flow G from
// H1 crosses loop port SW1.P2 to SW2.P4 (towards R), where background
// flows D1, D2 queue without any pause. SW1.P2 then waits for SW2.P4 too,
// but for less than it waits for the loop (SW2.P2, which the bursts fill).
func newInLoopNextToContention() (*ring, []hawkeyewire.FlowKey, []hawkeyewire.FlowKey) {
	r, bursts := newInLoop()
	s := r.s
	s.host("SW2", 6, "R")
	g := s.flow("H1", "R", 6001)
	s.hop("SW1", g, 3, 2, 60, 54, 60000).hop("SW2", g, 1, 6, 60, 0, 30000)
	var bg []hawkeyewire.FlowKey
	for i, h := range []string{"D1", "D2"} {
		s.host("SW2", 7+i, h)
		f := s.flow(h, "R", uint16(7101+i))
		bg = append(bg, f)
		s.hop("SW2", f, 7+i, 6, 400, 0, 30000)
	}
	return r, bursts, bg
}

// newOutOfLoopInjection is Figure 1(d): host HI keeps pausing SW2.P4,
// outside the loop; flow G from H1 crosses loop port SW1.P2 to it.
func newOutOfLoopInjection() *ring {
	r := newRing(95, 60000)
	s := r.s
	s.host("SW2", 4, "HI")
	g := s.flow("H1", "HI", 6001)
	s.hop("SW1", g, 3, 2, 100, 95, 60000).hop("SW2", g, 1, 4, 100, 98, 70000)
	s.pause("SW2", 4, 1000)
	s.victim = r.f3
	return r
}

// newOutOfLoopContention is the same loop started by an incast of C1..C3
// into SW2.P4 (towards R) outside the loop.
func newOutOfLoopContention() (*ring, []hawkeyewire.FlowKey) {
	r := newRing(95, 60000)
	s := r.s
	s.host("SW2", 4, "R")
	g := s.flow("H1", "R", 6001)
	s.hop("SW1", g, 3, 2, 100, 95, 60000).hop("SW2", g, 1, 4, 100, 0, 70000)
	var bursts []hawkeyewire.FlowKey
	for i, h := range []string{"C1", "C2", "C3"} {
		s.host("SW2", 5+i, h)
		f := s.flow(h, "R", uint16(7001+i))
		bursts = append(bursts, f)
		s.hop("SW2", f, 5+i, 4, 800, 0, 90000)
	}
	s.victim = r.f3
	return r, bursts
}

// newContention is normal flow contention: C1..C3 and the victim V into
// SW1.P1 towards R, no PFC anywhere.
func newContention() (*scenario, []hawkeyewire.FlowKey) {
	s := newScenario()
	s.host("SW1", 1, "R").host("SW1", 2, "V").link("SW1", 6, "SW2", 1).host("SW2", 2, "W")
	v := s.flow("V", "R", 8000)
	s.hop("SW1", v, 2, 1, 50, 0, 20000)
	var cs []hawkeyewire.FlowKey
	for i, h := range []string{"C1", "C2", "C3"} {
		s.host("SW1", 3+i, h)
		f := s.flow(h, "R", uint16(8001+i))
		cs = append(cs, f)
		s.hop("SW1", f, 3+i, 1, 500, 0, 30000)
	}
	// Unrelated quiet traffic elsewhere.
	o := s.flow("W", "R", 8100)
	s.hop("SW2", o, 2, 1, 20, 0, 100).hop("SW1", o, 6, 1, 20, 0, 25000)
	s.victim = v
	return s, cs
}

func keys(rs []RootCause) []hawkeyewire.FlowKey {
	var out []hawkeyewire.FlowKey
	for _, r := range rs {
		if r.Flow != nil {
			out = append(out, *r.Flow)
		}
	}
	return out
}

func sameSet(a, b []hawkeyewire.FlowKey) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortFunc(a, compareFlowKey)
	slices.SortFunc(b, compareFlowKey)
	return slices.Equal(a, b)
}

func mustEdge(t *testing.T, g *Graph, from, to string) *PortEdge {
	t.Helper()
	e := g.Edge(from, to)
	if e == nil {
		t.Fatalf("no port edge %s -> %s; edges: %+v", from, to, g.PortEdges)
	}
	if !(e.Weight > 0) {
		t.Fatalf("edge %s -> %s has weight %v", from, to, e.Weight)
	}
	return e
}

func outDegree(g *Graph, port string) int {
	n := 0
	for _, e := range g.PortEdges {
		if e.From == port {
			n++
		}
	}
	return n
}

func contributorsAt(g *Graph, port string) []hawkeyewire.FlowKey {
	var out []hawkeyewire.FlowKey
	for _, e := range g.Contributions(port) {
		if e.Contributor {
			out = append(out, g.Flows[e.flow].Key)
		}
	}
	return out
}
