package lab

import (
	"context"
	"errors"
	"fmt"

	"github.com/rdma-appliance/appliance/bench/tunesim"
	"github.com/rdma-appliance/appliance/internal/spec"
)

// TuningSpec switches the ByteTuning stage on: a short annealing run on
// the fabric simulator's 2-to-1 incast against every baseline preset.
type TuningSpec struct {
	Enabled bool `yaml:"enabled"`
}

func (v *TuningSpec) validate(*spec.Doc) {}

// runTuning runs tuning.LabRun: the best watermarks annealing finds must
// beat every baseline of the paper's Tables 2 and 3.
func runTuning(ctx context.Context, l *Lab, row *Row) error {
	res, err := tunesim.LabRun(ctx, l.Path("tuning"))
	if err != nil {
		return err
	}
	row.Ran = fmt.Sprintf("simulated annealing (Algorithm 1) over the paper's 3300-point watermark space on the %s scenario, %d evaluations, against the baseline presets",
		res.Scenario, res.Evaluations)
	row.Figure("evals", "%d", res.Evaluations)
	row.Figure("best", "%.3f", res.BestScore)
	row.Figure("best_baseline", "%s=%.3f", res.BestBaseline, res.BestBaselineScore)
	row.Figure("watermark", "%s", res.Best)
	row.Figure("took", "%.1fs", res.Seconds)
	if !res.Pass {
		return errors.New(res.Reason)
	}
	row.Pass = true
	return nil
}
