package tunesim

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rdma-appliance/appliance/tuning"
)

// LabResult is the lab's short tuning run.
type LabResult struct {
	Scenario    string           `json:"scenario"`
	Evaluations int              `json:"evaluations"`
	Stopped     string           `json:"stopped"`
	BestScore   float64          `json:"best_score"`
	Best        tuning.Watermark `json:"best_watermark"`
	// BestBaseline is the highest-scoring preset of Tables 2 and 3.
	BestBaseline      string             `json:"best_baseline"`
	BestBaselineScore float64            `json:"best_baseline_score"`
	Baselines         map[string]float64 `json:"baselines"`
	Seconds           float64            `json:"seconds"`
	Pass              bool               `json:"pass"`
	Reason            string             `json:"reason"`
}

// LabEvals is the lab run's budget.
const LabEvals = 60

// LabRun is a short ByteTuning run for the lab: annealing with 60
// evaluations over the paper's space on the simulator's 2-to-1 incast
// (about 7 ms of wall time per evaluation), then every baseline. It
// passes when the best watermark found scores above every baseline
// (fixed normalisation) and the run spent its budget inside the space.
// Results land in outDir: result.json, convergence.svg/png,
// watermarks.txt (H3C Comware) and lab.json.
func LabRun(ctx context.Context, outDir string) (LabResult, error) {
	t0 := time.Now()
	sc := SimScenarios()["incast-2"]
	res := LabResult{Scenario: sc.Name, Baselines: map[string]float64{}}
	st, err := NewSimTarget(sc)
	if err != nil {
		return res, err
	}
	space := tuning.PaperSpace(sc.Scopes...)
	obj := sc.Objective
	obj.Norm = tuning.Fixed
	opt, err := tuning.NewAnneal(&space, BenchAnneal(LabEvals), 1, nil)
	if err != nil {
		return res, err
	}
	tu := &tuning.Tuner{Space: &space, Objective: obj, Target: st, Optimizer: opt, Budget: LabEvals, Interval: sc.Duration,
		StateFile: filepath.Join(outDir, "state.json")}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return res, err
	}
	// A fresh run each time: the lab does not resume.
	os.Remove(tu.StateFile)
	r, err := tu.Run(ctx)
	res.Evaluations, res.Stopped, res.BestScore = r.Evaluations, r.Stopped, r.BestFixed
	if err != nil {
		res.Reason = r.Stopped
		return res, fmt.Errorf("lab tuning: %w", err)
	}
	res.Best = r.Best.Scopes[sc.Scopes[0]]
	for _, b := range tuning.Baselines(space.Cell, sc.Capacity, sc.RTT) {
		if err := st.Apply(ctx, tuning.Uniform(space.Cell, b.W, sc.Scopes...)); err != nil {
			return res, fmt.Errorf("baseline %s: %w", b.Name, err)
		}
		tel, err := st.Measure(ctx, sc.Duration)
		if err != nil {
			return res, fmt.Errorf("baseline %s: %w", b.Name, err)
		}
		f, _ := obj.Score(tel, nil)
		res.Baselines[b.Name] = f
		if res.BestBaseline == "" || f > res.BestBaselineScore {
			res.BestBaseline, res.BestBaselineScore = b.Name, f
		}
	}
	se := &tuning.Session{Space: space, Tuner: tu, Target: st}
	if _, err := se.WriteReport(outDir, r, "comware"); err != nil {
		return res, err
	}
	res.Seconds = time.Since(t0).Seconds()
	switch {
	case r.Evaluations != LabEvals:
		res.Reason = fmt.Sprintf("ran %d of %d evaluations: %s", r.Evaluations, LabEvals, r.Stopped)
	case res.BestScore <= res.BestBaselineScore:
		res.Reason = fmt.Sprintf("best %.4f does not beat baseline %s at %.4f", res.BestScore, res.BestBaseline, res.BestBaselineScore)
	default:
		res.Pass = true
		res.Reason = fmt.Sprintf("best %.4f beats the best baseline (%s, %.4f) by %.1f%% after %d evaluations",
			res.BestScore, res.BestBaseline, res.BestBaselineScore, 100*(res.BestScore/res.BestBaselineScore-1), r.Evaluations)
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return res, err
	}
	return res, os.WriteFile(filepath.Join(outDir, "lab.json"), b, 0o644)
}
