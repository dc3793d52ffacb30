package hostmesh

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// LabResult is the lab's Hostmesh stage: a short round in the simulator
// with a flapping spine link, and a fault-free round, scored strictly.
type LabResult struct {
	Pass   bool   `json:"pass"`
	Reason string `json:"reason"`
	// The faulty round: cluster, injected link, the top suspect across all
	// kinds, every alert, the false ones, and how long detection took (at
	// the paper's time scale).
	Machines, RNICs, Spines int
	Fault                   string   `json:"fault"`
	Truth                   string   `json:"truth"`
	Named                   string   `json:"named"`
	Alerts                  []string `json:"alerts"`
	FalseAlerts             int      `json:"false_alerts"`
	DetectSeconds           float64  `json:"detect_seconds"`
	Probes                  int      `json:"probes"`
	Timeouts                int      `json:"timeouts"`
	SwitchDropRate          float64  `json:"switch_drop_rate"`
	NetP50Ns                int64    `json:"net_p50_ns"`
	NetP99Ns                int64    `json:"net_p99_ns"`
	ProcP50Ns               int64    `json:"proc_p50_ns"`
	// FaultFreeAlerts are the fault-free round's alerts (want none).
	FaultFreeAlerts []string `json:"fault_free_alerts"`
	WallMs          int64    `json:"wall_ms"`
}

// LabRun runs a short Hostmesh round in the simulator (4 machines of 8
// RNICs, 4 spines, the analyzer at simulator scale judging six windows,
// a few seconds on two cores): a spine link flaps in the fourth window and
// the analyzer's top suspect must be it, with no other alert in any
// window; a fault-free round must raise no alert. outDir ("" for none)
// gets hostmesh-report.txt and hostmesh.json.
func LabRun(ctx context.Context, outDir string) (LabResult, error) {
	t0 := time.Now()
	sc := ClusterScenario(4)
	const seed = 42
	run, err := runScenario(ctx, FaultLinkFlap, seed, sc, newRand(seed))
	if err != nil {
		return LabResult{}, err
	}
	clean, err := runScenario(ctx, FaultNone, seed+1, sc, newRand(seed+1))
	if err != nil {
		return LabResult{}, err
	}
	var alerts, cleanAlerts []string
	for _, w := range run.Windows {
		alerts = append(alerts, w.Alerts...)
	}
	for _, w := range clean.Windows {
		cleanAlerts = append(cleanAlerts, w.Alerts...)
	}
	fw := faultWindow(run)
	if fw == nil {
		return LabResult{}, fmt.Errorf("hostmesh: lab round analyzed no window")
	}
	res := LabResult{Machines: sc.Machines, RNICs: sc.RNICs, Spines: sc.Spines, Fault: run.Fault, Truth: run.Truth.String(), Named: run.Top.String(),
		Alerts: alerts, FalseAlerts: run.FalseAlerts, DetectSeconds: -1, Probes: run.Stats.Probes, Timeouts: run.Stats.Timeouts,
		SwitchDropRate: fw.SwitchDropRate, NetP50Ns: run.Stats.NetP50, NetP99Ns: run.Stats.NetP99, ProcP50Ns: run.Stats.ProcP50,
		FaultFreeAlerts: cleanAlerts}
	if run.DetectNs >= 0 {
		res.DetectSeconds = float64(run.DetectNs) * Scale / 1e9
	}
	switch {
	case !run.Correct:
		res.Reason = fmt.Sprintf("flapping link %s: the top suspect was %s", run.Truth, run.Top)
	case run.FalseAlerts > 0:
		res.Reason = fmt.Sprintf("flapping link %s named, but %d false alerts: %s", run.Truth, run.FalseAlerts, run.False[0])
	case len(cleanAlerts) > 0:
		res.Reason = fmt.Sprintf("fault-free round raised %d alerts: %s", len(cleanAlerts), cleanAlerts[0])
	case run.Stats.NetP50 <= 0 || run.Stats.ProcP50 <= 0:
		res.Reason = "no positive latencies"
	default:
		res.Pass = true
		res.Reason = fmt.Sprintf("flapping %s the top suspect after %.0f s, no false alert among %d probes; fault-free round quiet",
			run.Truth.Name, res.DetectSeconds, run.Stats.Probes)
	}
	res.WallMs = time.Since(t0).Milliseconds()
	if outDir != "" {
		var txt bytes.Buffer
		fmt.Fprintf(&txt, "# faulty round: %s on %s from %v\n", run.Fault, run.Truth, time.Duration(run.FaultAt))
		for _, r := range run.Reports {
			r.WriteText(&txt)
		}
		fmt.Fprintf(&txt, "# fault-free round\n")
		for _, r := range clean.Reports {
			r.WriteText(&txt)
		}
		if err := os.WriteFile(filepath.Join(outDir, "hostmesh-report.txt"), txt.Bytes(), 0o644); err != nil {
			return res, err
		}
		js, _ := json.MarshalIndent(struct {
			Result LabResult `json:"result"`
			Report any       `json:"report"`
		}{res, fw}, "", "  ")
		if err := os.WriteFile(filepath.Join(outDir, "hostmesh.json"), js, 0o644); err != nil {
			return res, err
		}
	}
	return res, nil
}
