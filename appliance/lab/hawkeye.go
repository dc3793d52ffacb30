package lab

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/rdma-appliance/appliance/appliance/spec"
	bhawk "github.com/rdma-appliance/appliance/bench/hawkeye"
)

// HawkeyeSpec configures the Hawkeye stage: a few traces of every
// anomaly type through detection, telemetry, collection and diagnosis.
type HawkeyeSpec struct {
	Enabled bool `yaml:"enabled"`
	Traces  int  `yaml:"traces"`
}

func (v *HawkeyeSpec) validate(d *spec.Doc) {
	if v.Enabled && (v.Traces < 1 || v.Traces > 200) {
		d.Errorf("hawkeye.traces", "must be 1..200, got %d", v.Traces)
	}
}

// runHawkeye scores Hawkeye on every anomaly type, including a PFC storm
// and the deadlocks; every type must be diagnosed right in most traces.
func runHawkeye(ctx context.Context, l *Lab, row *Row) error {
	v := l.Spec.Hawkeye
	methods := []bhawk.Method{bhawk.Hawkeye, bhawk.FullPolling}
	scores, err := bhawk.Evaluate(ctx, v.Traces, bhawk.Anomalies, methods, bhawk.Analyzer, nil)
	if err != nil {
		return err
	}
	var b strings.Builder
	bhawk.WriteTable(&b, scores, bhawk.Anomalies, methods)
	if err := os.WriteFile(l.Path("hawkeye-eval.txt"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	row.Ran = fmt.Sprintf("%d traces of each of the 6 anomaly types (incast, PFC storm, in-loop and out-of-loop deadlocks, contention) on a k=4 fat-tree: agent, telemetry, polling, diagnosis",
		v.Traces)
	var weak []string
	tp, n := 0, 0
	for _, a := range bhawk.Anomalies {
		s := scores[a][bhawk.Hawkeye]
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
	for _, a := range bhawk.Anomalies {
		hb += scores[a][bhawk.Hawkeye].Bytes
		fb += scores[a][bhawk.FullPolling].Bytes
	}
	if fb > 0 {
		row.Figure("bytes_vs_full", "%.0f%%", 100*float64(hb)/float64(fb))
	}
	if n == 0 {
		return fmt.Errorf("no trace showed its anomaly")
	}
	if len(weak) > 0 {
		return fmt.Errorf("diagnosed right in fewer than half the traces: %s", strings.Join(weak, ", "))
	}
	row.Pass = true
	return nil
}
