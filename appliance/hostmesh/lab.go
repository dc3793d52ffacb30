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
// with a flapping spine link, and a fault-free round.
type LabResult struct {
	Pass   bool   `json:"pass"`
	Reason string `json:"reason"`
	// The faulty round: cluster, injected link, what the analyzer named.
	Machines, RNICs, Spines int
	Fault                   string   `json:"fault"`
	Truth                   string   `json:"truth"`
	Named                   string   `json:"named"`
	Alerts                  []string `json:"alerts"`
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
// RNICs, 4 spines, the analyzer at simulator scale, about a second on two
// cores): a spine link flaps during the window and the analyzer must name
// it top-ranked; a fault-free round must raise no alert. outDir ("" for
// none) gets hostmesh-report.txt and hostmesh.json.
func LabRun(ctx context.Context, outDir string) (LabResult, error) {
	t0 := time.Now()
	sc := Scenario{Machines: 4, RNICs: 8, Spines: 4, Bandwidth: 25e9, Delay: 1000, Background: 0.05}
	const seed = 42
	run, err := runScenario(ctx, FaultLinkFlap, seed, sc, newRand(seed))
	if err != nil {
		return LabResult{}, err
	}
	clean, err := runScenario(ctx, FaultNone, seed+1, sc, newRand(seed+1))
	if err != nil {
		return LabResult{}, err
	}
	res := LabResult{Machines: sc.Machines, RNICs: sc.RNICs, Spines: sc.Spines, Fault: run.Fault, Truth: run.Truth, Named: run.Named,
		Alerts: run.Alerts, Probes: run.Stats.Probes, Timeouts: run.Stats.Timeouts, SwitchDropRate: run.Report.SwitchDropRate,
		NetP50Ns: run.Stats.NetP50, NetP99Ns: run.Stats.NetP99, ProcP50Ns: run.Stats.ProcP50, FaultFreeAlerts: clean.Alerts}
	switch {
	case !run.Correct:
		res.Reason = fmt.Sprintf("flapping link %s: the analyzer named %q", run.Truth, run.Named)
	case len(clean.Alerts) > 0:
		res.Reason = fmt.Sprintf("fault-free round raised %d alerts: %s", len(clean.Alerts), clean.Alerts[0])
	case run.Stats.NetP50 <= 0 || run.Stats.ProcP50 <= 0:
		res.Reason = "no positive latencies"
	default:
		res.Pass = true
		res.Reason = fmt.Sprintf("flapping %s named top-ranked among %d probes; fault-free round quiet", run.Truth, run.Stats.Probes)
	}
	res.WallMs = time.Since(t0).Milliseconds()
	if outDir != "" {
		var txt bytes.Buffer
		fmt.Fprintf(&txt, "# faulty round: %s on %s\n", run.Fault, run.Truth)
		run.Report.WriteText(&txt)
		fmt.Fprintf(&txt, "# fault-free round\n")
		clean.Report.WriteText(&txt)
		if err := os.WriteFile(filepath.Join(outDir, "hostmesh-report.txt"), txt.Bytes(), 0o644); err != nil {
			return res, err
		}
		js, _ := json.MarshalIndent(struct {
			Result LabResult `json:"result"`
			Report any       `json:"report"`
		}{res, run.Report}, "", "  ")
		if err := os.WriteFile(filepath.Join(outDir, "hostmesh.json"), js, 0o644); err != nil {
			return res, err
		}
	}
	return res, nil
}
