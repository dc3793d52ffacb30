package hawkeyeeval

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/bench/hawkeyesim"
	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
)

// Hand-made traces: the rules of the paper's scoring, pinned.

var (
	burst1 = hawkeyewire.FlowKey{Src: 1, Dst: 9, Sport: 1, Dport: 4791, Proto: 17}
	burst2 = hawkeyewire.FlowKey{Src: 2, Dst: 9, Sport: 2, Dport: 4791, Proto: 17}
	other  = hawkeyewire.FlowKey{Src: 3, Dst: 9, Sport: 3, Dport: 4791, Proto: 17}
	k4     = Topology{4}
	p0     = DefaultParams()
)

func incastTrace(manifested bool, incidents ...Incident) *TraceResult {
	tr := &TraceResult{Topology: k4, Anomaly: Incast, Manifested: manifested, Keys: []hawkeyewire.FlowKey{burst1, burst2},
		Truth: Truth{Anomaly: Incast, Outside: NoAnomaly}, Incidents: incidents}
	if !manifested {
		tr.Reason = "the incast drew no PFC from the receiver's ToR"
	}
	return tr
}

func detection(victim bool, expect Anomaly, v Verdict, switches ...string) Incident {
	in := Incident{Victim: victim, Results: []Result{{Method: Hawkeye, Verdict: v, Bytes: 100, Switches: switches}}}
	if victim {
		in.Expect = []Anomaly{expect}
		in.Causal = []string{"tor0", "agg0"}
	}
	return in
}

var right = Verdict{Anomaly: Incast, Flows: []hawkeyewire.FlowKey{burst1, other}}

func tally(trs ...*TraceResult) *Score {
	sc := Scores{}
	for _, tr := range trs {
		sc.Tally(p0, tr, []Method{Hawkeye})
	}
	return sc.Get(p0, k4, Incast, Hawkeye)
}

// TestNonVictimIsFalsePositive: a detection of a flow the anomaly did not
// hurt counts against precision whatever its diagnosis says, even the
// anomaly's type and root cause.
func TestNonVictimIsFalsePositive(t *testing.T) {
	s := tally(incastTrace(true, detection(true, Incast, right), detection(false, Incast, right)))
	if s.TP != 1 || s.FP != 1 || s.NonVictim != 1 || s.Precision() != 0.5 || s.Recall() != 1 {
		t.Fatalf("%+v: precision %.2f recall %.2f", s, s.Precision(), s.Recall())
	}
}

// TestWrongTypeIsFalsePositive: a victim diagnosed as another type (or as
// none) is a false positive, however right its root cause; a trace with
// no true positive is a false negative.
func TestWrongTypeIsFalsePositive(t *testing.T) {
	wrong := right
	wrong.Anomaly = Contention
	none := Verdict{Anomaly: NoAnomaly}
	s := tally(incastTrace(true, detection(true, Incast, wrong), detection(true, Incast, none)))
	if s.TP != 0 || s.FP != 2 || s.WrongType != 2 || s.Precision() != 0 || s.Recall() != 0 || s.Top3 != 0 {
		t.Fatalf("%+v", s)
	}
}

// TestNotManifestedApart: a trace whose anomaly did not manifest is
// counted in its own column, by reason, and its detections enter neither
// precision nor recall.
func TestNotManifestedApart(t *testing.T) {
	s := tally(incastTrace(true, detection(true, Incast, right)),
		incastTrace(false, detection(false, Incast, right), detection(true, Incast, Verdict{Anomaly: Storm})))
	if s.Traces != 2 || s.Manifested != 1 || s.NotManifested["the incast drew no PFC from the receiver's ToR"] != 1 ||
		s.Detections != 1 || s.Recall() != 1 || s.Precision() != 1 {
		t.Fatalf("%+v", s)
	}
}

// TestTop1Top3: the true positive needs an injected root cause ranked
// first; ranked second or third it counts for top-3 only, and the
// detection is a false positive of the wrong root cause.
func TestTop1Top3(t *testing.T) {
	second := Verdict{Anomaly: Incast, Flows: []hawkeyewire.FlowKey{other, burst2}}
	fourth := Verdict{Anomaly: Incast, Flows: []hawkeyewire.FlowKey{other, other, other, burst1}}
	s := tally(incastTrace(true, detection(true, Incast, right), detection(true, Incast, second), detection(true, Incast, fourth)))
	if s.TP != 1 || s.WrongRoot != 2 || s.Top1 != 1 || s.Top3 != 2 || s.Victims != 3 || s.Found != 1 {
		t.Fatalf("%+v", s)
	}
	if o, t1, t3 := Judge(true, []Anomaly{Incast}, CausesOf(incastTrace(true)), second); o != WrongRoot || t1 || !t3 {
		t.Fatalf("second: %v top1 %v top3 %v", o, t1, t3)
	}
	// A host root cause ranks before the flows.
	c := Causes{Host: "h3"}
	if o, _, _ := Judge(true, []Anomaly{Storm}, c, Verdict{Anomaly: Storm, Host: "h3"}); o != TruePositive {
		t.Fatalf("storm with the host: %v", o)
	}
	if o, _, t3 := Judge(true, []Anomaly{Storm}, c, Verdict{Anomaly: Storm, Host: "h4"}); o != WrongRoot || t3 {
		t.Fatalf("storm with another host: %v %v", o, t3)
	}
}

// TestOutOfLoopExpects: an out-of-loop deadlock's victim away from the
// loop may be diagnosed as the outside cause when that is what its
// ground truth allows, and only then.
func TestOutOfLoopExpects(t *testing.T) {
	c := Causes{Host: "h3"}
	v := Verdict{Anomaly: Storm, Host: "h3"}
	if o, _, _ := Judge(true, []Anomaly{OutLoopInjection, Storm}, c, v); o != TruePositive {
		t.Fatalf("either: %v", o)
	}
	if o, _, _ := Judge(true, []Anomaly{OutLoopInjection}, c, v); o != WrongType {
		t.Fatalf("loop victim diagnosed as the storm: %v", o)
	}
}

// TestTelemetryFigures: bytes and switches are per detection, causal
// coverage over the victims' causal switches.
func TestTelemetryFigures(t *testing.T) {
	s := tally(incastTrace(true, detection(true, Incast, right, "tor0", "tor1"), detection(false, Incast, right, "tor0")))
	if s.BytesPerIncident() != 100 || s.SwitchesPolled() != 1.5 || s.Causal != 2 || s.Covered != 1 || s.Coverage() != 0.5 {
		t.Fatalf("%+v", s)
	}
}

// TestShardsMerge: scores tallied in shards and merged equal the whole,
// also through the shard files' JSON.
func TestShardsMerge(t *testing.T) {
	a := incastTrace(true, detection(true, Incast, right), detection(false, Incast, right))
	b := incastTrace(false, detection(true, Incast, right))
	c := incastTrace(true, detection(true, Incast, Verdict{Anomaly: Storm}))
	whole := Scores{}
	for _, tr := range []*TraceResult{a, b, c} {
		whole.Tally(p0, tr, []Method{Hawkeye, FullPolling})
	}
	var parts [][]Score
	for _, trs := range [][]*TraceResult{{a}, {b, c}} {
		sc := Scores{}
		for _, tr := range trs {
			sc.Tally(p0, tr, []Method{Hawkeye, FullPolling})
		}
		js, err := json.Marshal(sc.Flatten())
		if err != nil {
			t.Fatal(err)
		}
		var back []Score
		if err := json.Unmarshal(js, &back); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, back)
	}
	if merged := Merge(parts...); !reflect.DeepEqual(merged.Flatten(), whole.Flatten()) {
		t.Fatalf("merged %+v\nwhole %+v", merged.Flatten(), whole.Flatten())
	}
}

// TestSweepCells: scores of several parameter sets make Figure 7's
// cells, each with its own precision and recall.
func TestSweepCells(t *testing.T) {
	sc := Scores{}
	p1, p2 := Params{EpochShift: 17, Threshold: 200}, Params{EpochShift: 21, Threshold: 500}
	sc.Tally(p1, incastTrace(true, detection(true, Incast, right)), []Method{Hawkeye})
	sc.Tally(p2, incastTrace(true, detection(true, Incast, right), detection(false, Incast, right)), []Method{Hawkeye})
	cells := sc.SweepCells()
	if len(cells) != 2 || cells[0].Threshold != 200 || cells[0].Precision != 1 || cells[1].EpochNs != 1<<21 || cells[1].Precision != 0.5 ||
		cells[1].Recall != 1 || cells[1].Anomalies[Incast] != [2]float64{0.5, 1} {
		t.Fatalf("%+v", cells)
	}
	charts := SweepCharts(cells)
	prec, rec := charts["hawkeye-figure7-precision-k4.svg"], charts["hawkeye-figure7-recall-k4.svg"]
	if len(charts) != 2 || prec == nil || rec == nil || len(prec.Series) != 2 || prec.Series[1].Name != "threshold 500%" ||
		!slices.Equal(prec.Series[1].X, []float64{2097.152}) || !slices.Equal(prec.Series[1].Y, []float64{50}) ||
		!slices.Equal(rec.Series[0].Y, []float64{100}) {
		t.Fatalf("charts %+v", charts)
	}
	var b strings.Builder
	writeSweep(&b, cells)
	// p1 ran at 200% only and p2 at 500% only: the grid's other two
	// cells were not run and say so.
	if !strings.Contains(b.String(), "100% / 100%") || !strings.Contains(b.String(), "50% / 100%") || !slices.Equal(slices.DeleteFunc(strings.Fields(b.String()), func(f string) bool { return f != "-" }), []string{"-", "-"}) ||
		strings.Contains(b.String(), "0% / 0%") {
		t.Fatalf("%s", b.String())
	}
}

// TestThroughLoop: a flow waits on an out-of-loop deadlock's loop when a
// chain of paused links leads from its path to a loop port (a loop switch
// paused by the next one round the loop), not when the chain only reaches
// a loop switch by another port, nor when it starts elsewhere.
func TestThroughLoop(t *testing.T) {
	loop := []int{10, 11}
	if !throughLoop([]int{1}, map[int][]int{1: {2}, 2: {10}, 10: {11}}, loop) {
		t.Error("path 1 -> 2 -> loop port 10 -> 11: through the loop")
	}
	if !throughLoop([]int{1}, map[int][]int{1: {11}, 11: {10}}, loop) {
		t.Error("path 1 -> loop port 11 -> 10: through the loop")
	}
	if throughLoop([]int{1}, map[int][]int{1: {10}, 10: {7}}, loop) {
		t.Error("path 1 -> 10 -> 7 (the storm's ToR): 10's loop port was not paused")
	}
	if throughLoop([]int{5}, map[int][]int{1: {10}, 10: {11}}, loop) {
		t.Error("path 5 has no paused link")
	}
}

// TestNPAs: detections whose polling packets' paths overlap, raised while
// an NPA's diagnosis is open, are one NPA (two NPAs a detection bridges
// merge); a detection after the NPA's last read, on another path, or
// past the epochs the switches keep, opens its own.
func TestNPAs(t *testing.T) {
	det := func(at int64, sws ...string) *pending {
		p := &pending{Incident: Incident{Time: at}, read: at + readDelay}
		for _, s := range sws {
			p.visits = append(p.visits, hawkeyesim.Visit{Switch: s})
		}
		return p
	}
	a, b, c := det(0, "s1", "s2"), det(100_000, "s2", "s3"), det(200_000, "s9")
	e := det(250_000, "s3", "s9")
	late := det(2_000_000, "s1")
	col := &collector{r: &run{incidents: []*pending{a, b, c, e, late}}, o: RunOptions{Params: DefaultParams()}}
	got := col.npas()
	if len(got) != 2 {
		t.Fatalf("%d NPAs, want 2", len(got))
	}
	if m := got[0].members; len(m) != 4 || !slices.Contains(m, a) || !slices.Contains(m, b) ||
		!slices.Contains(m, c) || !slices.Contains(m, e) {
		t.Errorf("first NPA has %d members, want a, b, c and e", len(m))
	}
	if m := got[1].members; len(m) != 1 || m[0] != late {
		t.Errorf("the late detection is not alone")
	}

	// A chain of overlapping detections 400 us apart is cut where the
	// last read no longer holds the first detection's epoch (4 of 1 ms).
	var chain []*pending
	for i := range 12 {
		chain = append(chain, det(int64(i)*400_000, "s1"))
	}
	col.r.incidents = chain
	got = col.npas()
	if len(got) != 2 || len(got[0].members) != 10 {
		t.Fatalf("chain split into %d NPAs, the first of %d detections; want the first 10 (reads up to 4.1 ms) together",
			len(got), len(got[0].members))
	}
}

// TestDeadlockNPA: in an NPA where one member's diagnosis found a
// deadlock, the members whose pause the analyzer traced to the same
// initial congestion point take it; a member traced elsewhere, or not
// diagnosed at all, keeps its own.
func TestDeadlockNPA(t *testing.T) {
	root := hawkeyewire.FlowKey{Src: 1, Dst: 2, Sport: 3, Dport: 4791, Proto: 17}
	member := func(v Verdict) *pending {
		return &pending{Incident: Incident{Results: []Result{{Method: Hawkeye, Verdict: v}}}}
	}
	early := member(Verdict{Anomaly: Incast, initiator: "tor1:2"})
	dl := member(Verdict{Anomaly: OutLoopContention, Flows: []hawkeyewire.FlowKey{root}, initiator: "tor1:2"})
	other := member(Verdict{Anomaly: Incast, initiator: "tor9:0"})
	none := member(Verdict{Anomaly: NoAnomaly, initiator: "tor1:2"})
	deadlockNPA([]*pending{early, dl, other, none}, 0)
	if v := early.Results[0].Verdict; v.Anomaly != OutLoopContention || len(v.Flows) != 1 || v.Flows[0] != root {
		t.Errorf("early member: %v %v, want the deadlock and its root cause", v.Anomaly, v.Flows)
	}
	if v := other.Results[0].Verdict; v.Anomaly != Incast {
		t.Errorf("member traced to another origin: %v, want its own incast", v.Anomaly)
	}
	if v := none.Results[0].Verdict; v.Anomaly != NoAnomaly {
		t.Errorf("undiagnosed member: %v, want none", v.Anomaly)
	}
}
