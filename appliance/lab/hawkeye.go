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
	right    bool // diagnosed as the type injected
	own      bool // from Hawkeye's own telemetry (else it may be full polling's)
	d        *hawkeyeanalyzer.Diagnosis
	svg      []byte
}

// runHawkeye scores Hawkeye on every anomaly type, including a PFC storm
// and the deadlocks; every type must be diagnosed right in most traces.
// It keeps one diagnosis per type, with its graph, in hawkeye/.
func runHawkeye(ctx context.Context, l *Lab, row *Row) error {
	v := l.Spec.Hawkeye
	anomalies := v.anomalies()
	methods := []hawkeyeeval.Method{hawkeyeeval.Hawkeye, hawkeyeeval.FullPolling}
	gal := &gallery{anomalies: anomalies, traces: v.Traces, methods: len(methods), kept: map[hawkeyeeval.Anomaly]*hawkeyeCase{}}
	scores, err := hawkeyeeval.Evaluate(ctx, v.Traces, anomalies, methods, gal.diagnose, gal.progress)
	if err != nil {
		return err
	}
	var b strings.Builder
	hawkeyeeval.WriteTable(&b, scores, anomalies, methods)
	if err := os.WriteFile(l.Path("hawkeye-eval.txt"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	if len(anomalies) == len(hawkeyeeval.Anomalies) {
		row.Ran = fmt.Sprintf("%d traces of each of the 6 anomaly types (incast, PFC storm, in-loop and out-of-loop deadlocks, contention) on a k=4 fat-tree: agent, telemetry, polling, diagnosis",
			v.Traces)
	} else {
		row.Ran = fmt.Sprintf("%d traces of each of %s on a k=4 fat-tree: agent, telemetry, polling, diagnosis", v.Traces, strings.Join(v.Anomalies, ", "))
	}
	var weak []string
	tp, n := 0, 0
	for _, a := range anomalies {
		s := scores[a][hawkeyeeval.Hawkeye]
		tp, n = tp+s.TP, n+s.Manifested
		short := strings.SplitN(a.String(), "-", 2)[0]
		if strings.HasPrefix(a.String(), "out-of-loop") {
			short = "ool-" + strings.TrimPrefix(a.String(), "out-of-loop-deadlock-")
		}
		row.Figure(short, "%d/%d", s.TP, s.Manifested)
		if s.Manifested > 0 && 2*s.TP < s.Manifested {
			weak = append(weak, a.String())
		}
	}
	var hb, fb int
	for _, a := range anomalies {
		hb += scores[a][hawkeyeeval.Hawkeye].Bytes
		fb += scores[a][hawkeyeeval.FullPolling].Bytes
	}
	if fb > 0 {
		row.Figure("bytes_vs_full", "%.0f%%", 100*float64(hb)/float64(fb))
	}
	cases, err := gal.write(l.Path("hawkeye"))
	if err != nil {
		return err
	}
	row.Figure("graphs", "%d", len(cases))
	l.record(func(r *results) { r.hawkeye = cases })
	if n == 0 {
		return fmt.Errorf("no trace showed its anomaly")
	}
	if len(weak) > 0 {
		return fmt.Errorf("diagnosed right in fewer than half the traces: %s", strings.Join(weak, ", "))
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

// gallery keeps, per anomaly type, the diagnosis of one trace: the
// first diagnosed as the type injected from the telemetry Hawkeye
// collected, else the best there is. It stands between bench/hawkeyeeval's
// evaluation and the analyzer, so the evaluation's scoring stays its own.
type gallery struct {
	anomalies []hawkeyeeval.Anomaly
	traces    int
	methods   int
	calls     []galleryCall // the current trace's diagnoses, in method order
	kept      map[hawkeyeeval.Anomaly]*hawkeyeCase
}

type galleryCall struct {
	t *hawkeyewire.Telemetry
	v hawkeyeeval.Verdict
}

// diagnose is the evaluation's Diagnoser: collector/hawkeyeanalyzer's analyzer,
// with the telemetry noted.
func (g *gallery) diagnose(t *hawkeyewire.Telemetry) (hawkeyeeval.Verdict, error) {
	v, err := hawkeyeeval.Analyzer(t)
	if err == nil {
		g.calls = append(g.calls, galleryCall{t, v})
	}
	return v, err
}

// progress ends a trace. The evaluation numbers its traces over the
// anomaly types in order, traces of each (bench/hawkeyeeval's Shard), and
// diagnoses a trace's methods in order, Hawkeye first: when every method
// was diagnosed, the first call had Hawkeye's own telemetry; when some
// method collected nothing, the first call may be another method's.
func (g *gallery) progress(done, _ int) {
	calls := g.calls
	g.calls = nil
	if done < 1 || len(calls) == 0 || g.traces < 1 {
		return
	}
	a := g.anomalies[min((done-1)/g.traces, len(g.anomalies)-1)]
	c := calls[0]
	right, own := c.v.Anomaly == a, len(calls) == g.methods
	if k := g.kept[a]; k != nil && (k.right && !right || k.right == right && (k.own || !own)) {
		return
	}
	d := hawkeyeanalyzer.Diagnose(c.t, hawkeyeanalyzer.Options{})
	g.kept[a] = &hawkeyeCase{injected: a, right: right, own: own, d: d, svg: d.GraphSVG()}
}

// write saves each kept diagnosis as JSON, DOT and SVG under dir and
// returns them in table order.
func (g *gallery) write(dir string) ([]*hawkeyeCase, error) {
	var out []*hawkeyeCase
	for _, a := range g.anomalies {
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
