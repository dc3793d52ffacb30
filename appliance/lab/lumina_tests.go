package lab

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/rdma-appliance/appliance/appliance/dashboard"
	"github.com/rdma-appliance/appliance/appliance/lumina"
	"github.com/rdma-appliance/appliance/collector/luminaanalyzer"
	"github.com/rdma-appliance/appliance/internal/spec"
)

// LuminaTestsSpec configures the lumina-tests stage: ready-made Lumina
// test files run as `appliance lumina run --lab` runs them, analyzers and
// HTML reports included.
type LuminaTestsSpec struct {
	Enabled bool     `yaml:"enabled"`
	Tests   []string `yaml:"tests"`
}

func (v *LuminaTestsSpec) validate(d *spec.Doc) {
	if !v.Enabled {
		return
	}
	if len(v.Tests) == 0 {
		d.Errorf("lumina-tests.tests", "no tests: name some of %s", strings.Join(lumina.ReadyMade(), ", "))
	}
	for i, t := range v.Tests {
		if !slices.Contains(lumina.ReadyMade(), t) {
			d.Errorf(fmt.Sprintf("lumina-tests.tests[%d]", i), "%q: ready-made tests are %s", t, strings.Join(lumina.ReadyMade(), ", "))
		}
	}
}

// runLuminaTests runs each ready-made test once and keeps its analysis.
func runLuminaTests(ctx context.Context, l *Lab, row *Row) error {
	ts := l.Spec.LuminaTests
	row.Ran = fmt.Sprintf("ready-made Lumina tests %s through the soft testbed, analyzed (go-back-N, NACK latency, timeouts, CNP pacing, counters); reports in lumina-tests/", strings.Join(ts.Tests, ", "))
	if l.Netns {
		row.Ran += "; every link a veth pair between network namespaces"
	}
	var problems []string
	for _, name := range ts.Tests {
		t, err := lumina.LoadReadyMade(name)
		if err != nil {
			return err
		}
		t.Spec.ResultPath = l.Path("lumina-tests/" + name)
		t.Spec.NumRepeats = 1
		var rep *luminaanalyzer.Report
		r := &lumina.Runner{Test: t, Lab: true, Analyze: func(ctx context.Context, dir string, m *luminaanalyzer.Meta) (string, bool, error) {
			var err error
			if rep, err = lumina.Analyze(ctx, dir, m, lumina.SoftOptions()); err != nil {
				return "", false, err
			}
			v, ok := lumina.Verdict(rep)
			return v, ok, nil
		}}
		if l.Netns {
			r.Testbed = func(c *lumina.TestbedConfig) { c.Netns = true }
		}
		sum, err := r.Run(ctx)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", name, err))
			l.addLuminaRun(dashboard.LuminaRun{Test: name, Verdict: err.Error()})
			continue
		}
		res := sum.Repeats[0]
		run := dashboard.LuminaRun{Test: name, Dir: res.Dir, Valid: res.Valid, OK: res.AnalysisOK, Verdict: res.Analysis, Packets: res.Packets}
		if res.Error != "" {
			run.Verdict = strings.TrimPrefix(run.Verdict+"; "+res.Error, "; ")
		}
		if rep != nil {
			run.Figures = figureOf(rep)
		}
		l.addLuminaRun(run)
		if !res.Valid || !res.AnalysisOK || rep == nil {
			problems = append(problems, fmt.Sprintf("%s: %s", name, res.Analysis))
			continue
		}
		row.Figure(name, "%s", figureOf(rep))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	row.Pass = true
	return nil
}

func (l *Lab) addLuminaRun(run dashboard.LuminaRun) {
	l.record(func(r *results) { r.lumina = append(r.lumina, run) })
}

// figureOf is a test's key figure: what the analyzers found most telling.
func figureOf(rep *luminaanalyzer.Report) string {
	var parts []string
	if g := rep.Retransmission.Generation; g.Count > 0 {
		parts = append(parts, fmt.Sprintf("nack-gen=%.0fus nack-react=%.0fus", float64(g.MedianNs)/1e3,
			float64(rep.Retransmission.Reaction.MedianNs)/1e3))
	}
	if t := rep.Timeouts; t.GiveUps > 0 {
		parts = append(parts, fmt.Sprintf("retries=%s(%d)", t.RetryVerdict, t.RetryCnt))
	}
	if rep.CNP.CNPs > 0 && rep.Summary.Events["ecn"] > 0 {
		parts = append(parts, fmt.Sprintf("cnps=%d scope=%s", rep.CNP.CNPs, strings.Join(rep.CNP.Consistent, "|")))
	}
	if len(parts) == 0 {
		parts = append(parts, "gbn=ok")
	}
	return strings.Join(parts, ",")
}
