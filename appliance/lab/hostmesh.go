package lab

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rdma-appliance/appliance/appliance/hostmesh"
	"github.com/rdma-appliance/appliance/internal/spec"
)

// HostmeshSpec switches the Hostmesh stage on: a probing round in the
// simulator that must localize an injected link fault without a false
// alert.
type HostmeshSpec struct {
	Enabled bool `yaml:"enabled"`
}

func (v *HostmeshSpec) validate(*spec.Doc) {}

// runHostmesh runs hostmesh.LabRun, scored as the evaluation scores: the
// analyzer's top suspect across all kinds must be the flapping link, no
// other alert may be raised in any window, and a fault-free round must
// raise none.
func runHostmesh(ctx context.Context, l *Lab, row *Row) error {
	res, err := hostmesh.LabRun(ctx, l.OutDir)
	if err != nil {
		return err
	}
	l.record(func(r *results) { r.hostmesh = &res })
	row.Ran = fmt.Sprintf("same-host full-mesh probing (UD probes, CQE timestamps) on %d machines x %d RNICs, %d spines in the simulator, %s injected; analyzer windows, RNIC rule, link/switch voting, scored strictly",
		res.Machines, res.RNICs, res.Spines, res.Fault)
	row.Figure("probes", "%d", res.Probes)
	row.Figure("timeouts", "%d", res.Timeouts)
	row.Figure("named", "%s", res.Named)
	row.Figure("truth", "%s", res.Truth)
	row.Figure("false_alerts", "%d", res.FalseAlerts)
	row.Figure("detect_s", "%.1f", res.DetectSeconds)
	row.Figure("net_p99", "%v", time.Duration(res.NetP99Ns))
	row.Figure("fault_free_alerts", "%d", len(res.FaultFreeAlerts))
	if !res.Pass {
		return errors.New(res.Reason)
	}
	row.Pass = true
	return nil
}
