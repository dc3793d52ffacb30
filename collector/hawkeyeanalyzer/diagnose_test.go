package hawkeyeanalyzer

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
)

func diagnose(t *testing.T, tel *hawkeyewire.Telemetry) *Diagnosis {
	t.Helper()
	d := Diagnose(tel, Options{})
	// Every diagnosis renders in the three forms.
	var buf bytes.Buffer
	if err := d.WriteJSON(&buf); err != nil {
		t.Fatalf("json: %v", err)
	}
	if err := d.WriteText(&buf); err != nil {
		t.Fatalf("text: %v", err)
	}
	if dot := d.DOT(); !bytes.HasPrefix(dot, []byte("digraph")) {
		t.Fatalf("dot: %s", dot)
	}
	return d
}

func wantType(t *testing.T, d *Diagnosis, want Anomaly) {
	t.Helper()
	if d.Type != want {
		var b bytes.Buffer
		d.WriteText(&b)
		t.Fatalf("type %s, want %s\n%s", d.Type, want, b.String())
	}
}

// Figure 12(a): F1 and F2 are paused at SW1.P1 (dotted flow-port edges),
// F2 also at SW2.P3; the port-level path SW1.P1 -> SW2.P3 -> SW4.P1 ends
// at SW4.P1, whose contributors F3..F6 (the bursts) are the root causes.
func TestIncastBackpressure(t *testing.T) {
	c := newIncast()
	tel := c.s.telemetry()
	g := Build(tel, Options{})
	mustEdge(t, g, "SW1:1", "SW2:3")
	mustEdge(t, g, "SW2:3", "SW4:1")
	if e := g.Edge("SW1:1", "SW2:4"); e != nil {
		t.Errorf("SW1:1 should not wait for the uncongested SW2:4: %+v", e)
	}
	if n := outDegree(g, "SW4:1"); n != 0 {
		t.Errorf("SW4:1, the initial congestion point, has out-degree %d", n)
	}
	for _, fp := range []struct {
		f    hawkeyewire.FlowKey
		port string
		want uint64
	}{{c.f1, "SW1:1", 60}, {c.f2, "SW1:1", 60}, {c.f2, "SW2:3", 70}, {c.f1, "SW2:4", 0}} {
		if got := g.PausedAt(fp.f, fp.port); got != fp.want {
			t.Errorf("flow-port edge %s -> %s: %d paused, want %d", FlowName(fp.f), fp.port, got, fp.want)
		}
	}
	if got := contributorsAt(g, "SW4:1"); !sameSet(got, c.bursts) {
		t.Errorf("contributors at SW4:1: %v, want the bursts", got)
	}
	for _, e := range g.Contributions("SW4:1") {
		if g.Flows[e.flow].Key == c.f2 && (e.Contributor || e.Net >= 0) {
			t.Errorf("F2 at SW4:1 should be a victim (net %v, contributor %v)", e.Net, e.Contributor)
		}
	}

	d := diagnose(t, tel)
	wantType(t, d, Incast)
	if !sameSet(keys(d.RootCauses), c.bursts) {
		t.Errorf("root causes %v, want the bursts", keys(d.RootCauses))
	}
	if want := []string{"SW4:1", "SW2:3", "SW1:1"}; !slices.Equal(d.Path, want) {
		t.Errorf("path %v, want %v", d.Path, want)
	}
	if d.Initiator != "SW4:1" || len(d.Loops) != 0 {
		t.Errorf("initiator %q loops %v", d.Initiator, d.Loops)
	}
	if !slices.Equal(d.SpreadingFlows, []string{FlowName(c.f2)}) {
		t.Errorf("spreading flows %v, want F2", d.SpreadingFlows)
	}
	if d.Confidence < 0.9 || len(d.Problems) != 0 {
		t.Errorf("confidence %.2f problems %v", d.Confidence, d.Problems)
	}
	for i := 1; i < len(d.RootCauses); i++ {
		if d.RootCauses[i].Contribution > d.RootCauses[i-1].Contribution {
			t.Errorf("root causes not ranked: %+v", d.RootCauses)
		}
	}
	if len(d.VictimPath) != 2 || d.VictimPath[0].Port != "SW1:1" || !d.VictimPath[0].PFC || d.VictimPath[1].PFC {
		t.Errorf("victim path %+v", d.VictimPath)
	}

	// F2 as the victim: the same diagnosis.
	c.s.victim = c.f2
	d = diagnose(t, c.s.telemetry())
	wantType(t, d, Incast)
	if !sameSet(keys(d.RootCauses), c.bursts) {
		t.Errorf("F2 victim: root causes %v", keys(d.RootCauses))
	}
	// A burst as the victim, never paused: it sits in the initially
	// congested queue, which pauses upstream ports.
	c.s.victim = c.bursts[0]
	d = diagnose(t, c.s.telemetry())
	wantType(t, d, Incast)
	if !sameSet(keys(d.RootCauses), c.bursts) || !d.RootCauses[slices.IndexFunc(d.RootCauses, func(r RootCause) bool { return *r.Flow == c.bursts[0] })].Victim {
		t.Errorf("burst victim: root causes %+v", d.RootCauses)
	}
	if d.Path[0] != "SW4:1" || len(d.Path) != 3 {
		t.Errorf("burst victim: path %v", d.Path)
	}
}

// Figure 12(b): the PFC path runs from SW1.P1 to SW2 and SW3; SW1.P1 has no
// positive port-flow edge: host H1's injection is the root cause.
func TestPFCStorm(t *testing.T) {
	c := newStorm()
	tel := c.s.telemetry()
	g := Build(tel, Options{})
	mustEdge(t, g, "SW2:1", "SW1:1")
	mustEdge(t, g, "SW3:1", "SW1:1")
	if e := g.Edge("SW3:1", "SW1:4"); e != nil {
		t.Errorf("SW3:1 should not wait for SW1:4: %+v", e)
	}
	if n := outDegree(g, "SW1:1"); n != 0 {
		t.Errorf("SW1:1 out-degree %d", n)
	}
	if got := contributorsAt(g, "SW1:1"); len(got) != 0 {
		t.Errorf("SW1:1 should have no contributors, has %v", got)
	}
	if g.PausedAt(c.f1, "SW3:1") != 70 {
		t.Errorf("victim not paused at SW3:1")
	}
	d := diagnose(t, tel)
	wantType(t, d, Storm)
	if h := d.RootHosts(); !slices.Equal(h, []string{"H1"}) || len(d.RootFlows()) != 0 {
		t.Errorf("root causes %+v, want host H1", d.RootCauses)
	}
	if want := []string{"SW1:1", "SW3:1"}; !slices.Equal(d.Path, want) {
		t.Errorf("path %v, want %v", d.Path, want)
	}
	if d.Confidence < 0.9 {
		t.Errorf("confidence %.2f", d.Confidence)
	}
}

// Figure 12(c): a loop of port-level edges, every loop port with
// out-degree 1; SW2.P2's contributors (the bursts) are the root causes.
func TestDeadlockInLoop(t *testing.T) {
	r, bursts := newInLoop()
	tel := r.s.telemetry()
	g := Build(tel, Options{})
	for k := 1; k <= 4; k++ {
		from, to := sw(k)+":2", sw(k%4+1)+":2"
		mustEdge(t, g, from, to)
		if n := outDegree(g, from); n != 1 {
			t.Errorf("%s out-degree %d, want 1", from, n)
		}
	}
	if got := contributorsAt(g, "SW2:2"); !sameSet(got, bursts) {
		t.Errorf("contributors at SW2:2 %v, want the bursts", got)
	}
	d := diagnose(t, tel)
	wantType(t, d, DeadlockInLoop)
	if !sameSet(keys(d.RootCauses), bursts) {
		t.Errorf("root causes %v", keys(d.RootCauses))
	}
	if d.Initiator != "SW2:2" {
		t.Errorf("initiator %s", d.Initiator)
	}
	if want := [][]string{{"SW2:2", "SW1:2", "SW4:2", "SW3:2"}}; len(d.Loops) != 1 || !slices.Equal(d.Loops[0], want[0]) {
		t.Errorf("loops %v, want %v", d.Loops, want)
	}
	if want := []string{"SW2:2", "SW1:2"}; !slices.Equal(d.Path, want) {
		t.Errorf("path %v, want %v", d.Path, want)
	}
	if d.Confidence < 0.9 {
		t.Errorf("confidence %.2f problems %v", d.Confidence, d.Problems)
	}
	// Any flow of the loop as the victim finds the same deadlock.
	for _, v := range []hawkeyewire.FlowKey{r.f2, r.f3, r.f4} {
		r.s.victim = v
		d := diagnose(t, r.s.telemetry())
		wantType(t, d, DeadlockInLoop)
		if !sameSet(keys(d.RootCauses), bursts) {
			t.Errorf("victim %s: root causes %v", FlowName(v), keys(d.RootCauses))
		}
	}
}

// An in-loop deadlock whose loop port SW1.P2 also waits for a port
// outside the loop congested by background flows (out-degree 2): the
// loop's own burst filled it, and SW1.P2 waits for the loop more than
// for the outside port, so the initiator is in the loop (the lab's k=4
// trace: loop port tor4:2 also fed agg4:3, which long background flows
// congested). Without the bursts the loop has no contention of its own,
// and the same exit is its initiator.
func TestDeadlockInLoopNextToContention(t *testing.T) {
	r, bursts, bg := newInLoopNextToContention()
	tel := r.s.telemetry()
	g := Build(tel, Options{})
	exit, loop := mustEdge(t, g, "SW1:2", "SW2:6"), mustEdge(t, g, "SW1:2", "SW2:2")
	if n := outDegree(g, "SW1:2"); n != 2 || !(exit.Weight < loop.Weight) {
		t.Fatalf("SW1:2 out-degree %d, exit weight %.3g, loop weight %.3g: the case needs a lighter exit", n, exit.Weight, loop.Weight)
	}
	if got := contributorsAt(g, "SW2:6"); !sameSet(got, bg) {
		t.Fatalf("SW2:6 contributors %v, want the background flows", got)
	}
	d := diagnose(t, tel)
	wantType(t, d, DeadlockInLoop)
	if !sameSet(keys(d.RootCauses), bursts) || d.Initiator != "SW2:2" {
		t.Errorf("root causes %v at %s, want the bursts at SW2:2", keys(d.RootCauses), d.Initiator)
	}
	if !slices.ContainsFunc(d.Explanation, func(s string) bool { return strings.Contains(s, "less than for the loop itself") }) {
		t.Errorf("the explanation does not say why the exit is not the initiator: %v", d.Explanation)
	}
	// The exit outweighing the loop edge: out of the loop.
	r2, _, _ := newInLoopNextToContention()
	g2 := r2.s.flow("H1", "R", 6001)
	r2.s.hops["SW1"] = slices.DeleteFunc(r2.s.hops["SW1"], func(f hawkeyewire.FlowRecord) bool { return f.Key == g2 })
	r2.s.hops["SW2"] = slices.DeleteFunc(r2.s.hops["SW2"], func(f hawkeyewire.FlowRecord) bool { return f.Key == g2 })
	r2.s.hop("SW1", g2, 3, 2, 600, 540, 60000).hop("SW2", g2, 1, 6, 600, 0, 90000)
	d = diagnose(t, r2.s.telemetry())
	wantType(t, d, DeadlockOutOfLoopContention)
	if ks := keys(d.RootCauses); d.Initiator != "SW2:6" || !slices.Contains(ks, bg[0]) || !slices.Contains(ks, bg[1]) {
		t.Errorf("heavier exit: root causes %v at %s, want the flows queued at SW2:6", ks, d.Initiator)
	}
}

// Figure 12(d): loop port SW1.P2 has a second out-edge, to SW2.P4 outside
// the loop, which host HI pauses without flow contention.
func TestDeadlockOutOfLoopInjection(t *testing.T) {
	r := newOutOfLoopInjection()
	tel := r.s.telemetry()
	g := Build(tel, Options{})
	mustEdge(t, g, "SW1:2", "SW2:4")
	if n := outDegree(g, "SW1:2"); n != 2 {
		t.Errorf("SW1:2 out-degree %d, want 2", n)
	}
	for k := 1; k <= 4; k++ {
		mustEdge(t, g, sw(k)+":2", sw(k%4+1)+":2")
	}
	if n := outDegree(g, "SW2:4"); n != 0 {
		t.Errorf("SW2:4 out-degree %d", n)
	}
	if got := contributorsAt(g, "SW2:4"); len(got) != 0 {
		t.Errorf("SW2:4 contributors %v", got)
	}
	d := diagnose(t, tel)
	wantType(t, d, DeadlockOutOfLoopInjection)
	if h := d.RootHosts(); !slices.Equal(h, []string{"HI"}) {
		t.Errorf("root causes %+v", d.RootCauses)
	}
	if d.Initiator != "SW2:4" {
		t.Errorf("initiator %s", d.Initiator)
	}
	if len(d.Loops) != 1 || !slices.Equal(d.Loops[0], []string{"SW1:2", "SW4:2", "SW3:2", "SW2:2"}) {
		t.Errorf("loops %v", d.Loops)
	}
	if want := []string{"SW2:4", "SW1:2", "SW4:2", "SW3:2"}; !slices.Equal(d.Path, want) {
		t.Errorf("path %v, want %v", d.Path, want)
	}
}

func TestDeadlockOutOfLoopContention(t *testing.T) {
	r, bursts := newOutOfLoopContention()
	tel := r.s.telemetry()
	g := Build(tel, Options{})
	mustEdge(t, g, "SW1:2", "SW2:4")
	if got := contributorsAt(g, "SW2:4"); !sameSet(got, bursts) {
		t.Errorf("SW2:4 contributors %v", got)
	}
	d := diagnose(t, tel)
	wantType(t, d, DeadlockOutOfLoopContention)
	if !sameSet(keys(d.RootCauses), bursts) || d.Initiator != "SW2:4" {
		t.Errorf("root causes %v at %s", keys(d.RootCauses), d.Initiator)
	}
	if len(d.Loops) != 1 {
		t.Errorf("loops %v", d.Loops)
	}
}

func TestNormalContention(t *testing.T) {
	s, cs := newContention()
	tel := s.telemetry()
	g := Build(tel, Options{})
	if len(g.PortEdges) != 0 {
		t.Errorf("port edges without PFC: %+v", g.PortEdges)
	}
	d := diagnose(t, tel)
	wantType(t, d, Contention)
	if !sameSet(keys(d.RootCauses), cs) {
		t.Errorf("root causes %v, want the contenders", keys(d.RootCauses))
	}
	if d.Initiator != "SW1:1" || len(d.Loops) != 0 {
		t.Errorf("initiator %s loops %v", d.Initiator, d.Loops)
	}
}

func TestNoAnomaly(t *testing.T) {
	s := newScenario()
	s.host("SW1", 1, "A").host("SW1", 2, "B")
	f := s.flow("A", "B", 1)
	s.hop("SW1", f, 1, 2, 100, 0, 300)
	s.victim = f
	d := diagnose(t, s.telemetry())
	wantType(t, d, None)
	if len(d.RootCauses) != 0 {
		t.Errorf("root causes %+v", d.RootCauses)
	}
}

func hasProblem(d *Diagnosis, sub string) bool {
	return slices.ContainsFunc(d.Problems, func(p string) bool { return strings.Contains(p, sub) })
}

// Bad input: the diagnosis names what is missing instead of a root cause.
func TestBadInput(t *testing.T) {
	t.Run("victim unseen", func(t *testing.T) {
		c := newIncast()
		c.s.victim = hawkeyewire.FlowKey{Src: 1, Dst: 2, Sport: 3, Dport: 4791, Proto: 17}
		d := diagnose(t, c.s.telemetry())
		wantType(t, d, Unknown)
		if len(d.RootCauses) != 0 || d.Confidence != 0 || !hasProblem(d, "appears in no switch") {
			t.Errorf("%+v", d)
		}
	})
	t.Run("initiator switch missing", func(t *testing.T) {
		c := newIncast()
		d := diagnose(t, without(c.s.telemetry(), "SW4"))
		wantType(t, d, Unknown)
		if len(d.RootCauses) != 0 || !hasProblem(d, "paused by switch SW4, which sent no telemetry") {
			t.Errorf("root causes %+v problems %v", d.RootCauses, d.Problems)
		}
		if !slices.Equal(d.Path, []string{"SW2:3", "SW1:1"}) {
			t.Errorf("the path as far as it is known: %v", d.Path)
		}
	})
	t.Run("storm switch missing", func(t *testing.T) {
		c := newStorm()
		d := diagnose(t, without(c.s.telemetry(), "SW1"))
		wantType(t, d, Unknown)
		if len(d.RootCauses) != 0 || !hasProblem(d, "SW1, which sent no telemetry") {
			t.Errorf("%+v %v", d.RootCauses, d.Problems)
		}
	})
	t.Run("loop switch missing", func(t *testing.T) {
		r, _ := newInLoop()
		d := diagnose(t, without(r.s.telemetry(), "SW3"))
		if d.Type != Unknown || len(d.RootCauses) != 0 || !hasProblem(d, "SW3") {
			t.Errorf("type %s root causes %+v problems %v", d.Type, d.RootCauses, d.Problems)
		}
	})
	t.Run("switch not in topology", func(t *testing.T) {
		c := newIncast()
		tel := c.s.telemetry()
		tel.Reports = append(tel.Reports, hawkeyewire.SwitchReport{Switch: "SW9", Epochs: tel.Reports[0].Epochs})
		d := diagnose(t, tel)
		if !hasProblem(d, "SW9 reported but is not in the topology") {
			t.Errorf("problems %v", d.Problems)
		}
		wantType(t, d, Incast)
	})
	t.Run("truncated", func(t *testing.T) {
		c := newIncast()
		tel := c.s.telemetry()
		for i := range tel.Reports {
			if tel.Reports[i].Switch == "SW4" {
				tel.Reports[i].Truncated = true
			}
		}
		d := diagnose(t, tel)
		wantType(t, d, Incast)
		if !hasProblem(d, "SW4's report was truncated") || d.Confidence > 0.75 {
			t.Errorf("confidence %.2f problems %v", d.Confidence, d.Problems)
		}
	})
	t.Run("truncated flows", func(t *testing.T) {
		// The poller lost most of SW4's flow records: the port counts
		// more packets than its flows.
		c := newIncast()
		tel := c.s.telemetry()
		for i := range tel.Reports {
			if r := &tel.Reports[i]; r.Switch == "SW4" {
				r.Truncated = true
				e := &r.Epochs[0]
				e.Flows = slices.DeleteFunc(e.Flows, func(f hawkeyewire.FlowRecord) bool { return f.Key != c.bursts[0] && f.Key != c.f2 })
			}
		}
		d := diagnose(t, tel)
		if !hasProblem(d, "account for only") || d.Confidence > 0.6 {
			t.Errorf("confidence %.2f problems %v", d.Confidence, d.Problems)
		}
	})
	t.Run("empty epoch", func(t *testing.T) {
		c := newIncast()
		tel := c.s.telemetry()
		tel.Reports[0].Epochs = append(tel.Reports[0].Epochs, hawkeyewire.EpochReport{ID: 8, Start: 1 << 20})
		d := diagnose(t, tel)
		if !hasProblem(d, "epoch 8 (start 1048576 ns) is empty") {
			t.Errorf("problems %v", d.Problems)
		}
		wantType(t, d, Incast)
	})
	t.Run("every epoch empty", func(t *testing.T) {
		c := newIncast()
		tel := c.s.telemetry()
		for i := range tel.Reports {
			tel.Reports[i].Epochs = []hawkeyewire.EpochReport{{ID: 1}}
		}
		d := diagnose(t, tel)
		wantType(t, d, Unknown)
		if !hasProblem(d, "is empty") {
			t.Errorf("problems %v", d.Problems)
		}
	})
	t.Run("duplicate epoch", func(t *testing.T) {
		c := newIncast()
		tel := c.s.telemetry()
		tel.Reports = append(tel.Reports, tel.Reports...)
		d := diagnose(t, tel)
		wantType(t, d, Incast)
		if !hasProblem(d, "reported twice") {
			t.Errorf("problems %v", d.Problems)
		}
		if d.VictimPath[0].Packets != 100 {
			t.Errorf("duplicate epochs counted twice: %+v", d.VictimPath[0])
		}
	})
	t.Run("no meters", func(t *testing.T) {
		// Without meters the flows' routes still give the buffer
		// dependencies: the same diagnosis, from route edges.
		c := newIncast()
		tel := c.s.telemetry()
		for i := range tel.Reports {
			for j := range tel.Reports[i].Epochs {
				tel.Reports[i].Epochs[j].Meters = nil
			}
		}
		d := diagnose(t, tel)
		wantType(t, d, Incast)
		if e := d.Graph.Edge("SW1:1", "SW2:3"); e == nil || !e.Route {
			t.Errorf("SW1:1 -> SW2:3 should be a route edge: %+v", e)
		}
		if !sameSet(keys(d.RootCauses), c.bursts) {
			t.Errorf("root causes %v", keys(d.RootCauses))
		}
	})
	t.Run("no meters, no next hop", func(t *testing.T) {
		// Neither meters nor the flows' records at the next switch: the
		// pause of SW2:3 is unexplained.
		c := newIncast()
		tel := c.s.telemetry()
		for i := range tel.Reports {
			for j := range tel.Reports[i].Epochs {
				tel.Reports[i].Epochs[j].Meters = nil
				if tel.Reports[i].Switch == "SW4" {
					tel.Reports[i].Epochs[j].Flows = nil
				}
			}
		}
		d := diagnose(t, tel)
		wantType(t, d, Unknown)
		if len(d.RootCauses) != 0 || !hasProblem(d, "no congested egress") {
			t.Errorf("%+v %v", d.RootCauses, d.Problems)
		}
	})
	t.Run("no flows", func(t *testing.T) {
		c := newIncast()
		tel := c.s.telemetry()
		for i := range tel.Reports {
			for j := range tel.Reports[i].Epochs {
				tel.Reports[i].Epochs[j].Flows = nil
			}
		}
		wantType(t, diagnose(t, tel), Unknown)
	})
	t.Run("empty", func(t *testing.T) {
		for _, tel := range []*hawkeyewire.Telemetry{nil, {}, {Reports: []hawkeyewire.SwitchReport{{}}}} {
			d := diagnose(t, tel)
			wantType(t, d, Unknown)
			if len(d.Problems) == 0 {
				t.Errorf("no problems for %+v", tel)
			}
		}
	})
}

func TestDeterministic(t *testing.T) {
	r := newOutOfLoopInjection()
	var first []byte
	for i := 0; i < 5; i++ {
		d := diagnose(t, r.s.telemetry())
		b, _ := json.Marshal(d)
		b = append(b, d.DOT()...)
		if first == nil {
			first = b
		} else if !bytes.Equal(first, b) {
			t.Fatalf("run %d differs", i)
		}
	}
}

func TestTelemetryJSONRoundTrip(t *testing.T) {
	c := newIncast()
	b, err := json.Marshal(c.s.telemetry())
	if err != nil {
		t.Fatal(err)
	}
	tel, err := Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	wantType(t, diagnose(t, tel), Incast)
	if _, err := Decode(strings.NewReader("{")); err == nil {
		t.Error("truncated JSON decoded")
	}
}

func TestText(t *testing.T) {
	c := newIncast()
	d := diagnose(t, c.s.telemetry())
	var b bytes.Buffer
	d.WriteText(&b)
	for _, want := range []string{"pfc_backpressure_incast", "PFC spreading path: SW4:1 -> SW2:3 -> SW1:1", "root causes (ranked)", "loops: none"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
}

// A deadlock whose closing traffic the meters never counted (its packets
// stuck in the paused queue): the flows' routes close the loop.
func TestDeadlockClosedByRoutes(t *testing.T) {
	r := newOutOfLoopInjection()
	tel := r.s.telemetry()
	for i := range tel.Reports {
		if tel.Reports[i].Switch != "SW2" {
			continue
		}
		e := &tel.Reports[i].Epochs[0]
		e.Meters = slices.DeleteFunc(e.Meters, func(m hawkeyewire.MeterRecord) bool { return m.In == 1 && m.Out == 2 })
	}
	d := diagnose(t, tel)
	wantType(t, d, DeadlockOutOfLoopInjection)
	if e := d.Graph.Edge("SW1:2", "SW2:2"); e == nil || !e.Route {
		t.Errorf("SW1:2 -> SW2:2 should be a route edge: %+v", e)
	}
	if e := d.Graph.Edge("SW1:2", "SW2:4"); e == nil || e.Route {
		t.Errorf("SW1:2 -> SW2:4 should be a meter edge: %+v", e)
	}
}

// TestVictimPathWithoutFlows: port-level telemetry alone (no flow
// records) still traces the PFC path when the victim's path is given as
// its ports: the storm's host is found, an incast's path and initiator
// too but not its flows; without the path the victim cannot be placed.
func TestVictimPathWithoutFlows(t *testing.T) {
	portsOnly := func(tel *hawkeyewire.Telemetry) *hawkeyewire.Telemetry {
		c := *tel
		c.Reports = nil
		for _, r := range tel.Reports {
			r.Epochs = slices.Clone(r.Epochs)
			for i := range r.Epochs {
				r.Epochs[i].Flows = nil
			}
			r.Evicted = nil
			c.Reports = append(c.Reports, r)
		}
		return &c
	}
	pathOf := func(d *Diagnosis) []PortID {
		var out []PortID
		for _, h := range d.VictimPath {
			out = append(out, parsePortID(h.Port))
		}
		return out
	}
	storm := newStorm().s.telemetry()
	full := diagnose(t, storm)
	d := Diagnose(portsOnly(storm), Options{VictimPath: pathOf(full)})
	wantType(t, d, Storm)
	if !slices.Equal(d.RootHosts(), []string{"H1"}) || !slices.Equal(d.Path, full.Path) {
		t.Fatalf("port-level storm: root causes %+v, path %v (with flows %v)", d.RootCauses, d.Path, full.Path)
	}
	incast := newIncast().s.telemetry()
	full = diagnose(t, incast)
	d = Diagnose(portsOnly(incast), Options{VictimPath: pathOf(full)})
	if d.Type != Incast || d.Initiator != full.Initiator || len(d.RootFlows()) != 0 {
		t.Fatalf("port-level incast: %s at %s, flows %v (with flows: %s at %s)", d.Type, d.Initiator, d.RootFlows(), full.Type, full.Initiator)
	}
	if d := Diagnose(portsOnly(storm), Options{}); d.Type != Unknown {
		t.Fatalf("without the victim's path: %s", d.Type)
	}
}

// TestDecodeStrict: every example file and every telemetry the writers
// produce decodes strictly; an unknown field, a missing one, a link
// leading nowhere or trailing data is an error that says where, where
// Decode would have taken the file.
func TestDecodeStrict(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	if len(files) == 0 {
		t.Fatal("no example files")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeStrict(bytes.NewReader(b)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	good, err := json.Marshal(newIncast().s.telemetry())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeStrict(bytes.NewReader(good)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ edit, want string }{
		{`"victim":{`, `"victim":{"colour":1,`},
		{`"reports":[{`, `"reports":[{"sw":"x",`},
		{`"paused":`, `"pausd":`},
		{`"qdepth_sum":`, `"qdepth":`},
		{`"time_ns":`, `"time":`},
	} {
		bad := strings.Replace(string(good), c.edit, c.want, 1)
		if _, err := Decode(strings.NewReader(bad)); err != nil {
			t.Errorf("Decode should take %q: %v", c.want, err)
		}
		_, err := DecodeStrict(strings.NewReader(bad))
		if err == nil {
			t.Errorf("%q accepted", c.want)
		}
		t.Logf("%s -> %v", c.want, err)
	}
	for _, bad := range []string{
		strings.Replace(string(good), `"a_port":1,"b":"SW2","b_port":1`, `"a_port":1`, 1),
		string(good) + `{}`,
		`{"event":1}`,
	} {
		if _, err := DecodeStrict(strings.NewReader(bad)); err == nil {
			t.Errorf("accepted %.80q", bad)
		}
	}
	_, err = DecodeStrict(strings.NewReader(strings.Replace(string(good), `"paused":`, `"pausd":`, 1)))
	if err == nil || !strings.Contains(err.Error(), "pausd") {
		t.Fatalf("the error should name the field: %v", err)
	}
}

// TestPauseSentUnpolled: a burst flow inside the incast's queue is never
// paused, so its poll traces no PFC and the paused upstream switches send
// nothing. Without the congested switch's transmitted-PFC counter the
// queue looks like plain contention; with it (SW4 sent XOFF out of port
// 2, which feeds SW4:1) it is the incast's.
func TestPauseSentUnpolled(t *testing.T) {
	for _, sent := range []uint32{0, 30} {
		c := newIncast()
		c.s.victim = c.bursts[0]
		tel := without(c.s.telemetry(), "SW1", "SW2")
		if sent > 0 {
			found := false
			for ri := range tel.Reports {
				r := &tel.Reports[ri]
				if r.Switch != "SW4" {
					continue
				}
				e := &r.Epochs[len(r.Epochs)-1]
				for pi := range e.Ports {
					if e.Ports[pi].Port == 2 {
						e.Ports[pi].PauseSent, found = sent, true
					}
				}
				if !found {
					e.Ports = append(e.Ports, hawkeyewire.PortRecord{Port: 2, PauseSent: sent})
					found = true
				}
			}
			if !found {
				t.Fatal("no report from SW4")
			}
		}
		d := Diagnose(tel, Options{})
		want := Contention
		if sent > 0 {
			want = Incast
		}
		if d.Type != want {
			t.Fatalf("pause sent %d: %s, want %s (%v)", sent, d.Type, want, d.Explanation)
		}
		if d.Initiator != c.sw41 || len(d.RootCauses) == 0 || !slices.Contains(c.bursts, *d.RootCauses[0].Flow) {
			t.Fatalf("pause sent %d: initiator %s, root causes %+v", sent, d.Initiator, d.RootCauses)
		}
	}
}

// TestStormSingleFlowQueue: the port to a pausing host holds one flow,
// most of whose packets (those enqueued before the pauses began) were
// not paused, so the port's contention estimate passes MinContention.
// One flow cannot outrun its last hop: the queue is the host's pause,
// and the diagnosis a storm from that host.
func TestStormSingleFlowQueue(t *testing.T) {
	s := newScenario()
	s.host("SW1", 1, "H1").link("SW2", 1, "SW1", 2).host("SW2", 2, "H2")
	f := s.flow("H2", "H1", 4001)
	s.hop("SW2", f, 2, 1, 100, 10, 1000).hop("SW1", f, 2, 1, 100, 30, 50000)
	s.pause("SW1", 1, 5)
	s.victim = f
	d := Diagnose(s.telemetry(), Options{})
	if d.Type != Storm || len(d.RootCauses) == 0 || d.RootCauses[0].Host != "H1" {
		t.Fatalf("%s, root causes %+v (%v)", d.Type, d.RootCauses, d.Explanation)
	}
}

// TestNICPausedVictim: the victim V (X to Y, one hop at SW1) was paused at
// no switch egress and its only queue is empty, but SW1 paused X's NIC
// (XOFF out of SW1:3): X's other flow F2 fills the paused SW1:1, so V's
// sender waits for SW1:1 and, down the PFC path, for the incast at SW4:1.
// Without the XOFF count V is no anomaly; with it, the incast, from the
// NIC. The same holds when V sent nothing in the epochs read (no flow
// record): its NIC's wait is all the telemetry says of it.
func TestNICPausedVictim(t *testing.T) {
	for _, tc := range []struct {
		sent   uint32
		record bool
		want   Anomaly
	}{{0, true, None}, {40, true, Incast}, {40, false, Incast}, {0, false, Unknown}} {
		c := newIncast()
		v := c.s.flow("X", "Y", 1003)
		if tc.record {
			c.s.hop("SW1", v, 3, 4, 4, 0, 100)
		}
		c.s.victim = v
		tel := c.s.telemetry()
		if tc.sent > 0 {
			setPauseSent(t, tel, "SW1", 3, tc.sent)
		}
		d := diagnose(t, tel)
		if d.Type != tc.want {
			t.Fatalf("pause sent %d, flow record %v: %s, want %s (%v %v)", tc.sent, tc.record, d.Type, tc.want, d.Explanation, d.Problems)
		}
		if tc.want != Incast {
			continue
		}
		if !sameSet(keys(d.RootCauses), c.bursts) || d.Initiator != c.sw41 {
			t.Errorf("flow record %v: initiator %s root causes %v, want the bursts at SW4:1", tc.record, d.Initiator, keys(d.RootCauses))
		}
		if want := []string{"SW4:1", "SW2:3", "SW1:1"}; !slices.Equal(d.Path, want) {
			t.Errorf("flow record %v: path %v, want %v", tc.record, d.Path, want)
		}
		if !slices.ContainsFunc(d.PortEdges, func(e PortEdge) bool { return e.From == "host X" && e.To == "SW1:1" }) ||
			slices.ContainsFunc(d.PortEdges, func(e PortEdge) bool { return e.From == "host X" && e.To == "SW1:4" }) {
			t.Errorf("flow record %v: the NIC's edges %v: want SW1:1 (paused), not the idle SW1:4", tc.record, d.PortEdges)
		}
		if !slices.ContainsFunc(d.Explanation, func(s string) bool { return strings.Contains(s, "sender's NIC") }) {
			t.Errorf("flow record %v: the explanation does not name the NIC: %v", tc.record, d.Explanation)
		}
	}
}

// setPauseSent sets the XOFF frames sw sent out of port in its newest
// epoch's port record (adding the record when the port had no traffic).
func setPauseSent(t *testing.T, tel *hawkeyewire.Telemetry, sw string, port int, n uint32) {
	t.Helper()
	for ri := range tel.Reports {
		r := &tel.Reports[ri]
		if r.Switch != sw {
			continue
		}
		e := &r.Epochs[len(r.Epochs)-1]
		for pi := range e.Ports {
			if e.Ports[pi].Port == port {
				e.Ports[pi].PauseSent = n
				return
			}
		}
		e.Ports = append(e.Ports, hawkeyewire.PortRecord{Port: port, PauseSent: n})
		return
	}
	t.Fatalf("no report from %s", sw)
}

// TestStormThenDrain: three flows to H1 at SW1:1, which H1 paused. In
// one epoch with the pause, most of their packets unpaused and queued
// three to one, the port is contended: an incast. When H1's pauses came
// in an epoch before the queue (all of that epoch's packets held, the
// next epoch's drained unpaused and queued behind one another: a storm
// that stopped, its senders' backlog released at once), the pause came
// first and the port is the storm's, whatever queue followed.
func TestStormThenDrain(t *testing.T) {
	s := newScenario()
	s.host("SW1", 1, "H1").host("SW1", 2, "H2").host("SW1", 3, "H3").host("SW1", 4, "H4")
	var fs []hawkeyewire.FlowKey
	for i, h := range []string{"H2", "H3", "H4"} {
		f := s.flow(h, "H1", uint16(5001+i))
		fs = append(fs, f)
		s.hop("SW1", f, 2+i, 1, 100, 20, 40000)
	}
	s.pause("SW1", 1, 5)
	s.victim = fs[0]
	if d := Diagnose(s.telemetry(), Options{}); d.Type != Incast {
		t.Fatalf("one epoch: %s, want %s (%v)", d.Type, Incast, d.Explanation)
	}
	tel := s.telemetry()
	r := &tel.Reports[0]
	held := hawkeyewire.EpochReport{ID: 6, Start: 0,
		Ports: []hawkeyewire.PortRecord{{Port: 1, Packets: 60, Paused: 60, QdepthSum: 60 * 40000, PauseFrames: 5}}}
	drain := hawkeyewire.EpochReport{ID: 7, Start: 1 << 20, Meters: r.Epochs[0].Meters,
		Ports: []hawkeyewire.PortRecord{{Port: 1, Packets: 240, QdepthSum: 240 * 40000}}}
	for _, f := range r.Epochs[0].Flows {
		a, b := f, f
		a.Packets, a.Paused, a.QdepthSum = 20, 20, 20*40000
		b.Packets, b.Paused, b.QdepthSum = 80, 0, 80*40000
		held.Flows = append(held.Flows, a)
		drain.Flows = append(drain.Flows, b)
	}
	r.Epochs = []hawkeyewire.EpochReport{held, drain}
	d := Diagnose(tel, Options{})
	if d.Type != Storm || len(d.RootCauses) == 0 || d.RootCauses[0].Host != "H1" {
		t.Fatalf("paused, then drained: %s, root causes %+v (%v %v)", d.Type, d.RootCauses, d.Explanation, d.Problems)
	}
}
