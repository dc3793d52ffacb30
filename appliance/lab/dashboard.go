package lab

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/rdma-appliance/appliance/appliance/dashboard"
	"github.com/rdma-appliance/appliance/internal/service"
)

// Snapshot is the lab's results as the dashboard shows them: each stage
// as a service with its key figures (the one running, and the ones still
// to come), the Hawkeye diagnoses with their graphs, the Hostmesh round,
// the DTA lists and the Lumina runs. It can be called while the lab
// runs.
func (l *Lab) Snapshot() dashboard.Snapshot {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := dashboard.Snapshot{Title: "Appliance lab"}
	if !l.started.IsZero() {
		s.Source = fmt.Sprintf("appliance lab started %s, artifacts in %s", l.started.Format(time.RFC3339), l.OutDir)
	}
	ran := map[string]bool{}
	for _, r := range l.rows {
		ran[r.System] = true
		row := dashboard.Service{Name: r.System, Kind: "lab stage", Status: "pass", OK: r.Pass, Detail: r.Ran}
		if !r.Pass {
			row.Status = "fail"
			row.Detail = r.Error
		}
		row.Figures = append(row.Figures, dashboard.Figure{Name: "took", Value: r.Took.Round(time.Millisecond).String()})
		for _, k := range r.Order {
			row.Figures = append(row.Figures, dashboard.Figure{Name: k, Value: r.Figures[k]})
		}
		s.Services = append(s.Services, row)
		if r.System == "lumina" {
			// The capture stage is a Lumina test of its own.
			s.Lumina = append(s.Lumina, dashboard.LuminaRun{Test: "lab capture (lumina stage)", Valid: r.Figures["integrity"] == "ok",
				OK: r.Pass, Verdict: verdictOf(r), Figures: figuresOf(r, "packets", "events", "retransmitted", "cnps", "icrc_drops")})
		}
	}
	for _, st := range stages {
		if !st.enabled(l.Spec) || ran[st.name] {
			continue
		}
		status := "pending"
		if st.name == l.current {
			status = "running"
		}
		s.Services = append(s.Services, dashboard.Service{Name: st.name, Kind: "lab stage", Status: status})
	}
	for _, c := range l.res.hawkeye {
		right := c.typed
		d := dashboard.Diagnosis{Injected: c.injected.String(), Type: string(c.d.Type), Describe: c.d.Type.Describe(), Right: &right,
			Victim: c.d.Victim, Summary: c.d.Summary, Confidence: c.d.Confidence, RootCauses: rootCauses(c.d),
			Path: c.d.Path, Loops: c.d.Loops, SVG: string(c.svg)}
		if !c.own {
			d.Note = "a detection of a flow the anomaly did not hurt: no victim of this type was detected"
		}
		s.Diagnoses = append(s.Diagnoses, d)
	}
	if h := l.res.hostmesh; h != nil {
		s.Hostmesh = &dashboard.Hostmesh{
			Summary: fmt.Sprintf("%d machines x %d RNICs, %d spines in the simulator, %s injected; the analyzer's windows, RNIC rule and link voting",
				h.Machines, h.RNICs, h.Spines, h.Fault),
			Pass: h.Pass, Fault: h.Fault, Truth: h.Truth, Named: h.Named, Probes: h.Probes, Timeouts: h.Timeouts,
			NetP50Ns: h.NetP50Ns, NetP99Ns: h.NetP99Ns, ProcP50Ns: h.ProcP50Ns, SwitchDropRate: h.SwitchDropRate,
			Alerts: slices.Clone(h.Alerts), FaultFreeAlerts: slices.Clone(h.FaultFreeAlerts)}
	}
	s.DTALists = slices.Clone(l.res.dtaLists)
	s.Lumina = append(s.Lumina, l.res.lumina...)
	return s
}

func verdictOf(r Row) string {
	if r.Pass {
		return "pass"
	}
	return r.Error
}

// figuresOf joins a row's figures of these names, in this order.
func figuresOf(r Row, names ...string) string {
	out := ""
	for _, n := range names {
		if v, ok := r.Figures[n]; ok {
			if out != "" {
				out += " "
			}
			out += n + "=" + v
		}
	}
	return out
}

// DashboardOptions say where and how `appliance lab --serve` serves the
// dashboard.
type DashboardOptions struct {
	Addr string // listen address, HOST:PORT
	// Targets are running services to query live; the lab's own service
	// is added first.
	Targets []dashboard.Target
	// Interval between queries of the targets, Refresh of the page (0:
	// the dashboard's defaults).
	Interval, Refresh time.Duration
	Log               *slog.Logger
	// Ready, when set, receives the address listened on once serving.
	Ready chan<- string
}

// StartDashboard serves the dashboard in the background (ServeDashboard)
// and returns once it listens, so that a taken address fails before the
// stages run rather than after them. wait returns ServeDashboard's error
// after ctx ends; it is nil, with no error, when ctx ended before the
// dashboard listened.
func (l *Lab) StartDashboard(ctx context.Context, o DashboardOptions) (addr string, wait func() error, err error) {
	ready := make(chan string, 1)
	served := make(chan error, 1)
	o.Ready = ready
	go func() { served <- l.ServeDashboard(ctx, o) }()
	select {
	case addr := <-ready:
		return addr, func() error { return <-served }, nil
	case err := <-served:
		return "", nil, err
	}
}

// ServeDashboard serves the lab's dashboard (GET /dashboard, /dashboard.json,
// /dashboard/graph/N) with /metrics and /healthz on the shared service
// plumbing until ctx ends; it shows the lab's results as the stages
// finish and keeps showing them after. A listen error returns at once.
func (l *Lab) ServeDashboard(ctx context.Context, o DashboardOptions) error {
	svc := service.New("lab", o.Addr, o.Log)
	dash := &dashboard.Dashboard{Title: "Appliance lab", Source: l.Snapshot, Interval: o.Interval, Refresh: o.Refresh, Log: o.Log}
	dash.Register(svc)
	svc.AddCheck("lab", func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		var failed []string
		for _, r := range l.rows {
			if !r.Pass {
				failed = append(failed, r.System)
			}
		}
		if len(failed) > 0 {
			return fmt.Errorf("stages failed: %v", failed)
		}
		return nil
	})
	errc := make(chan error, 1)
	go func() { errc <- svc.Run(ctx) }()
	select {
	case <-svc.Ready():
	case err := <-errc:
		return err
	}
	dash.Targets = append([]dashboard.Target{{Name: "lab", Addr: svc.Addr()}}, o.Targets...)
	if o.Ready != nil {
		o.Ready <- svc.Addr()
	}
	err := dash.Run(ctx)
	return errors.Join(err, <-errc)
}
