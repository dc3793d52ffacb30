package lab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rdma-appliance/appliance/bench/hawkeyeeval"
	"github.com/rdma-appliance/appliance/collector/hawkeyeanalyzer"
	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
	"github.com/rdma-appliance/appliance/internal/spec"
)

// HawkeyeSpec configures the Hawkeye stage: a few traces of every
// anomaly type through detection, telemetry, collection and diagnosis.
type HawkeyeSpec struct {
	Enabled bool `yaml:"enabled"`
	Traces  int  `yaml:"traces"`
	// Anomalies limits the stage to these types (bench/hawkeyeeval's names:
	// incast-backpressure, pfc-storm, in-loop-deadlock,
	// out-of-loop-deadlock-contention, out-of-loop-deadlock-injection,
	// flow-contention); empty runs all six.
	Anomalies []string `yaml:"anomalies"`
}

func (v *HawkeyeSpec) validate(d *spec.Doc) {
	if v.Enabled && (v.Traces < 1 || v.Traces > 200) {
		d.Errorf("hawkeye.traces", "must be 1..200, got %d", v.Traces)
	}
	var names []string
	for _, a := range hawkeyeeval.Anomalies {
		names = append(names, a.String())
	}
	for i, n := range v.Anomalies {
		if !slices.Contains(names, n) {
			d.Errorf(fmt.Sprintf("hawkeye.anomalies[%d]", i), "%q: the types are %s", n, strings.Join(names, ", "))
		}
	}
}

// anomalies are the types the stage runs, in table order.
func (v *HawkeyeSpec) anomalies() []hawkeyeeval.Anomaly {
	if len(v.Anomalies) == 0 {
		return hawkeyeeval.Anomalies
	}
	var out []hawkeyeeval.Anomaly
	for _, a := range hawkeyeeval.Anomalies {
		if slices.Contains(v.Anomalies, a.String()) {
			out = append(out, a)
		}
	}
	return out
}

// hawkeyeCase is the diagnosis the stage keeps of one anomaly type, with
// its provenance graph, for the report and the dashboard.
type hawkeyeCase struct {
	injected hawkeyeeval.Anomaly
	right    bool // a true positive: the type injected and its root cause first
	typed    bool // diagnosed as the type injected
	own      bool // of a victim of the anomaly
	d        *hawkeyeanalyzer.Diagnosis
	svg      []byte
}

// hawkeyeMethods are the methods the stage runs: Hawkeye and the
// baseline it must equal.
var hawkeyeMethods = []hawkeyeeval.Method{hawkeyeeval.Hawkeye, hawkeyeeval.FullPolling}

// runHawkeye scores Hawkeye strictly (bench/hawkeyeeval: every detection
// diagnosed and scored) on every anomaly type of a k=4 fat-tree, prints
// what it got per type, and keeps one diagnosis per type, with its
// graph, in hawkeye/. It passes when Hawkeye found (a true positive) at
// least half the manifested anomalies and a storm and a deadlock are
// there to show; the per-type figures say where it fell short, and
// bench/hawkeyeeval's evaluation measures it.
func runHawkeye(ctx context.Context, l *Lab, row *Row) error {
	v := l.Spec.Hawkeye
	anomalies := v.anomalies()
	gal := &gallery{kept: map[hawkeyeeval.Anomaly]*hawkeyeCase{}}
	params := hawkeyeeval.DefaultParams()
	k4 := hawkeyeeval.Topology{K: 4}
	scores, err := hawkeyeeval.Evaluate(ctx, hawkeyeeval.Options{Topologies: []hawkeyeeval.Topology{k4}, Anomalies: anomalies,
		Methods: hawkeyeMethods, Traces: v.Traces, Params: params, Keep: true, OnTrace: gal.take})
	if err != nil {
		return err
	}
	rep := scores.Report(params)
	rep.Goals = nil // set for k=8; the stage runs k=4
	var b strings.Builder
	fmt.Fprintf(&b, "Hawkeye, k=4 fat-tree, %d traces per type, %s, strict scoring\n\n", v.Traces, params)
	rep.WriteTable(&b)
	if err := os.WriteFile(l.Path("hawkeye-eval.txt"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	if len(anomalies) == len(hawkeyeeval.Anomalies) {
		row.Ran = fmt.Sprintf("%d traces of each of the 6 anomaly types (incast, PFC storm, in-loop and out-of-loop deadlocks, contention) placed at random on a k=4 fat-tree: agent, telemetry, polling, diagnosis of every detection, strict scoring",
			v.Traces)
	} else {
		row.Ran = fmt.Sprintf("%d traces of each of %s on a k=4 fat-tree: agent, telemetry, polling, diagnosis of every detection, strict scoring",
			v.Traces, strings.Join(v.Anomalies, ", "))
	}
	manifested, found := 0, 0
	for _, a := range anomalies {
		s := scores.Get(params, k4, a, hawkeyeeval.Hawkeye)
		manifested += s.Manifested
		found += s.Found
		short := strings.SplitN(a.String(), "-", 2)[0]
		if strings.HasPrefix(a.String(), "out-of-loop") {
			short = "ool-" + strings.TrimPrefix(a.String(), "out-of-loop-deadlock-")
		}
		// Found/manifested, then precision over every detection.
		row.Figure(short, "%d/%d P%.0f%%", s.Found, s.Manifested, 100*s.Precision())
	}
	for _, sm := range rep.Summary {
		if sm.Method == hawkeyeeval.Hawkeye {
			row.Figure("avg_precision", "%.0f%%", 100*sm.Precision)
			row.Figure("avg_recall", "%.0f%%", 100*sm.Recall)
			row.Figure("bytes_vs_full", "%.0f%%", 100*sm.VsFullPolling)
		}
	}
	cases, err := gal.write(l.Path("hawkeye"), anomalies)
	if err != nil {
		return err
	}
	row.Figure("graphs", "%d", len(cases))
	l.record(func(r *results) { r.hawkeye = cases })
	if manifested == 0 {
		return fmt.Errorf("no trace showed its anomaly")
	}
	if 2*found < manifested {
		return fmt.Errorf("found %d of %d manifested anomalies: fewer than half", found, manifested)
	}
	// The lab shows a PFC storm and a deadlock diagnosed: a run of
	// those types that leaves no diagnosis to show is a failure.
	var missing []string
	for _, a := range anomalies {
		if (a == hawkeyeeval.Storm || a == hawkeyeeval.InLoopDeadlock) && gal.kept[a] == nil {
			missing = append(missing, a.String())
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("no diagnosis to show for %s", strings.Join(missing, ", "))
	}
	row.Pass = true
	return nil
}

// gallery keeps, per anomaly type, one diagnosis of Hawkeye's from the
// traces as they are scored: a true positive if there is one, else a
// victim's diagnosis of the right type, else any victim's, else any.
type gallery struct {
	kept map[hawkeyeeval.Anomaly]*hawkeyeCase
}

// rank orders what the gallery prefers.
func (c *hawkeyeCase) rank() int {
	switch {
	case c == nil:
		return -1
	case c.right:
		return 3
	case c.typed:
		return 2
	case c.own:
		return 1
	}
	return 0
}

// take is the evaluation's OnTrace: it looks at the trace's detections
// and keeps the best diagnosis so far for the trace's type.
func (g *gallery) take(tr *hawkeyeeval.TraceResult) {
	if !tr.Manifested {
		return
	}
	causes := hawkeyeeval.CausesOf(tr)
	var best *hawkeyeCase
	var bestT *hawkeyewire.Telemetry
	for _, in := range tr.Incidents {
		for _, r := range in.Results {
			if r.Method != hawkeyeeval.Hawkeye || r.Telemetry == nil {
				continue
			}
			o, _, _ := hawkeyeeval.Judge(in.Victim, in.Expect, causes, r.Verdict)
			c := &hawkeyeCase{injected: tr.Anomaly, right: o == hawkeyeeval.TruePositive, own: in.Victim,
				typed: in.Victim && o != hawkeyeeval.WrongType}
			if c.rank() > best.rank() {
				best, bestT = c, r.Telemetry
			}
		}
	}
	if best == nil || best.rank() <= g.kept[tr.Anomaly].rank() {
		return
	}
	best.d = hawkeyeanalyzer.Diagnose(bestT, hawkeyeanalyzer.Options{})
	best.svg = best.d.GraphSVG()
	g.kept[tr.Anomaly] = best
}

// write saves each kept diagnosis as JSON, DOT and SVG under dir and
// returns them in table order.
func (g *gallery) write(dir string, anomalies []hawkeyeeval.Anomaly) ([]*hawkeyeCase, error) {
	var out []*hawkeyeCase
	for _, a := range anomalies {
		c := g.kept[a]
		if c == nil {
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		base := filepath.Join(dir, a.String())
		f, err := os.Create(base + ".json")
		if err != nil {
			return nil, err
		}
		err = c.d.WriteJSON(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("hawkeye: %s.json: %w", base, err)
		}
		if err := os.WriteFile(base+".dot", c.d.DOT(), 0o644); err != nil {
			return nil, err
		}
		if err := os.WriteFile(base+".svg", c.svg, 0o644); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// rootCauses are a diagnosis's root causes in words.
func rootCauses(d *hawkeyeanalyzer.Diagnosis) []string {
	var out []string
	for i, r := range d.RootCauses {
		if r.Kind == "host" {
			out = append(out, fmt.Sprintf("%d. host %s, pausing %s (%.0f pause frames)", i+1, r.Host, r.Port, r.Contribution))
			continue
		}
		out = append(out, fmt.Sprintf("%d. flow %s at %s (%.0f B, %.0f%% of the queue)", i+1, r.Name, r.Port, r.Contribution, 100*r.Share))
	}
	return out
}
