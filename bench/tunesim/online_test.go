package tunesim

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/tuning"
)

// TestOnlineRunSpec: the example online run file tunes one fabric that
// never restarts: every evaluation is one window right after the
// configuration it judges, the windows follow each other on one clock,
// and the running switches end with the last configuration applied.
func TestOnlineRunSpec(t *testing.T) {
	rs, err := tuning.LoadRunSpec(filepath.Join("testdata", "tune-online.yml"), Simulator{})
	if err != nil {
		t.Fatal(err)
	}
	// Short: 8 windows of 2 ms (the file's window is 8 ms).
	rs.Budget, rs.Target.Duration = 8, "2ms"
	se, err := rs.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	lt, ok := se.Target.(*LiveTarget)
	if !ok {
		t.Fatalf("online target is a %T", se.Target)
	}
	var last tuning.Point
	se.Tuner.Progress = func(r tuning.Record) { last = r.Point }
	r, err := se.Tuner.Run(context.Background())
	if err != nil || r.Evaluations != 8 {
		t.Fatalf("%v after %d evaluations", err, r.Evaluations)
	}
	ws := lt.Windows()
	if len(ws) != 8 {
		t.Fatalf("%d windows for 8 evaluations", len(ws))
	}
	step := int64(lt.Sc.Settle + lt.Sc.Window)
	for i, w := range ws {
		if w.From != int64(i)*step+int64(lt.Sc.Settle) || w.Applied != int64(i)*step {
			t.Fatalf("window %d: %+v, want applied at %d and measured from %d (one running fabric)", i, w, int64(i)*step, int64(i)*step+int64(lt.Sc.Settle))
		}
	}
	c, err := se.Space.Config(last)
	if err != nil {
		t.Fatal(err)
	}
	for sw, layer := range map[string]string{"tor7": "tor", "agg6": "agg", "core3": "core"} {
		got, err := lt.SwitchWatermark(sw)
		if err != nil {
			t.Fatal(err)
		}
		if w := c.Scopes[layer]; got.Kmin != w.Kmin*se.Space.Cell || got.Headroom != w.Headroom*se.Space.Cell {
			t.Fatalf("%s runs Kmin %d headroom %d, the last evaluation applied %v", sw, got.Kmin, got.Headroom, w)
		}
	}
	if n := len(r.Records); n == 0 || r.Records[0].Score == r.Records[n-1].Score && r.Records[1].Score == r.Records[2].Score {
		t.Fatalf("scores do not move: %+v", r.Records)
	}
}

// TestOnlineRunSpecErrors: online is for the simulator's online scenarios.
func TestOnlineRunSpecErrors(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"target: {kind: simulator, scenario: incast-2, online: true}\n", "tune.yml:1: target.scenario: \"incast-2\": one of the online scenarios fig11"},
		{"target: {kind: simulator, scenario: fig11}\n", "tune.yml:1: target.scenario"},
		{"target: {kind: fluid, online: true}\n", "tune.yml:1: target.online"},
		{"target: {kind: simulator, scenario: fig11, online: true}\nalgorithm: {remeasure: false, reheat: 0.1}\n", "reheat watches re-measurements"},
		{"target: {kind: simulator, scenario: fig11, online: true}\nalgorithm:\n  samples: 0\n", "tune.yml:3: algorithm.samples: 0: 1 to 100"},
		{"target: {kind: simulator, scenario: fig11, online: true}\nalgorithm:\n  aggregate: mode\n", "tune.yml:3: algorithm.aggregate: \"mode\": mean or median"},
		{"target: {kind: simulator, scenario: fig11, online: true}\nalgorithm:\n  reheat-sigma: -1\n", "tune.yml:3: algorithm.reheat-sigma: -1: not negative"},
		{"target: {kind: simulator, scenario: fig11, online: true}\nalgorithm:\n  reheat-after: 0\n", "tune.yml:3: algorithm.reheat-after: 0: 1 to 64"},
		{"target: {kind: simulator, scenario: incast-2}\nalgorithm:\n  reheat-sigma: 3\n", "tune.yml:3: algorithm.reheat-sigma: the drift test is for online runs"},
	} {
		_, err := tuning.DecodeRunSpec("tune.yml", []byte(c.yaml), Simulator{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.yaml, err, c.want)
		}
	}
}

// TestOnlineRunSpecJudging: an online run file gets the drift test and
// one window per judgement unless it says otherwise.
func TestOnlineRunSpecJudging(t *testing.T) {
	rs, err := tuning.DecodeRunSpec("tune.yml", []byte("target: {kind: simulator, scenario: fig11, online: true}\n"), Simulator{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := rs.AnnealParams()
	if err != nil {
		t.Fatal(err)
	}
	def := tuning.OnlineTuning()
	if p.ReheatSigma != def.ReheatSigma || p.Reheat != def.Reheat || p.ReheatAfter != def.ReheatAfter || p.Samples != def.Samples {
		t.Fatalf("online defaults %+v, want %+v", p, def)
	}
	rs, err = tuning.DecodeRunSpec("tune.yml", []byte("target: {kind: simulator, scenario: fig11, online: true}\n"+
		"algorithm: {reheat: 0.02, reheat-sigma: 4, reheat-after: 3, samples: 3, aggregate: median}\n"), Simulator{})
	if err != nil {
		t.Fatal(err)
	}
	if p, err = rs.AnnealParams(); err != nil {
		t.Fatal(err)
	}
	if p.Reheat != 0.02 || p.ReheatSigma != 4 || p.ReheatAfter != 3 || p.Samples != 3 || !p.Median {
		t.Fatalf("file's judging not taken: %+v", p)
	}
}

// TestRecoveries: a tuned trace that alternates high and low windows (as
// fig11's 2-to-1 does) reaches 98% of the reference in one lucky window
// at once, but its 4-window mean only when the low windows come up; a
// phase it never reaches is -1 on both counts. The windows at x and on
// proposals are averaged apart.
func TestRecoveries(t *testing.T) {
	tr := OnlineRun{Phases: map[string]PhaseStats{}}
	add := func(ph string, kind string, v ...float64) {
		for _, f := range v {
			tr.Scores, tr.Phase, tr.Judging = append(tr.Scores, f), append(tr.Phase, ph), append(tr.Judging, kind)
		}
	}
	add("a", "x", 10, 10)
	// b: reference 10. High 10, low 9 (mean 9.5 < 9.8) for 6 windows,
	// then high 10, low 9.8 (mean 9.9).
	for range 3 {
		add("b", "x", 10)
		add("b", "proposal", 9)
	}
	for range 3 {
		add("b", "x", 10)
		add("b", "proposal", 9.8)
	}
	add("c", "x", 1, 1, 1)
	// b again, higher than its preset reference: the best level known
	// for b is this stretch's 4-window mean 12, which the first stretch
	// never reached (its best is 9.9 < 11.76); the second reaches it at
	// once.
	add("b", "x", 12, 12, 12, 12)
	got := recoveries(tr, map[string]float64{"a": 10, "b": 10, "c": 10})
	want := []Recovery{{Phase: "b", At: 2, Steps: 0, Sustained: 6, Ref: 10, Best: 12, SustainedBest: -1},
		{Phase: "c", At: 14, Steps: -1, Sustained: -1, Ref: 10, Best: 10, SustainedBest: -1},
		{Phase: "b", At: 17, Steps: 0, Sustained: 0, Ref: 10, Best: 12, SustainedBest: 0}}
	if len(got) != len(want) {
		t.Fatalf("recoveries %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("recovery %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	for _, ph := range []string{"a", "b", "c"} {
		tr.Phases[ph] = PhaseStats{}
	}
	splitJudging(&tr)
	if b := tr.Phases["b"]; b.AtX < 10.79 || b.AtX > 10.81 || b.NAtX != 10 || b.NProposal != 6 || b.Proposals < 9.39 || b.Proposals > 9.41 {
		t.Fatalf("phase b at x %g (%d), proposals %g (%d); want 10.8 (10), 9.4 (6)", b.AtX, b.NAtX, b.Proposals, b.NProposal)
	}
}

// TestWriteOnlineVerdicts: a preset ahead of the tuned run on the median
// FCT or on drops is named with it, as on score, throughput, queue and
// the P99.
func TestWriteOnlineVerdicts(t *testing.T) {
	tuned := PhaseStats{Windows: 1, Score: 1, Throughput: 20e9, Queue: 1000, P50: 100, P99: 200, Drops: 5}
	better := tuned
	better.P50, better.Drops = 90, 0
	same := tuned
	r := OnlineResult{Scenario: "s", Steps: 1,
		Tuned: OnlineRun{Name: "bytetuning", Phases: map[string]PhaseStats{"p": tuned}, Scores: []float64{1}, Phase: []string{"p"}},
		Base:  []OnlineRun{{Name: "a", Phases: map[string]PhaseStats{"p": better}}, {Name: "b", Phases: map[string]PhaseStats{"p": same}}}}
	var b strings.Builder
	if err := WriteOnline(&b, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "presets better than the tuned run: a (P50 FCT, drops)\n") {
		t.Fatalf("verdict:\n%s", b.String())
	}
}
