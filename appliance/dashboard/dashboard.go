// Package dashboard is the collector's read-only web page: one HTML page
// and the same data as JSON, mounted on a service's HTTP plumbing
// (internal/service) next to its /metrics and /healthz. It shows the
// services it knows (lab stages with their key figures, and running
// services it queries itself for health and counter rates), the recent
// Hawkeye diagnoses with their provenance graphs, Hostmesh's SLA
// percentiles and alerts, DTA list rates, and finished Lumina runs.
//
// The page is for an operator's browser on a collector that may have no
// route to the internet, so it loads nothing: inline CSS, graphs as
// inline SVG, no fonts, no framework, no script; it reloads itself with
// a meta refresh. Everything on it is text escaped by html/template
// except the graphs, which are checked to be inert SVG first.
package dashboard

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/rdma-appliance/appliance/internal/report"
	"github.com/rdma-appliance/appliance/internal/service"
)

// Snapshot is everything the page shows; /dashboard.json serves it.
type Snapshot struct {
	Title string `json:"title"`
	// Source says where the data comes from (a lab run, its output
	// directory).
	Source    string      `json:"source,omitempty"`
	Updated   time.Time   `json:"updated"`
	Services  []Service   `json:"services"`
	Diagnoses []Diagnosis `json:"hawkeye_diagnoses"`
	Hostmesh  *Hostmesh   `json:"hostmesh,omitempty"`
	DTALists  []DTAList   `json:"dta_lists"`
	Lumina    []LuminaRun `json:"lumina_runs"`
}

// Service is one row of the services table: a lab stage or a running
// service.
type Service struct {
	Name string `json:"name"`
	// Kind is "lab stage" or "service" (queried live).
	Kind string `json:"kind"`
	Addr string `json:"addr,omitempty"`
	// Status is a word ("pass", "fail", "running", "healthy",
	// "failing", "down"); OK says whether it is a good one.
	Status  string   `json:"status"`
	OK      bool     `json:"ok"`
	Version string   `json:"version,omitempty"`
	Uptime  string   `json:"uptime,omitempty"`
	Detail  string   `json:"detail,omitempty"`
	Figures []Figure `json:"figures,omitempty"`
}

// Figure is a named value: a stage's key figure or a counter's rate.
type Figure struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Diagnosis is one Hawkeye diagnosis with its provenance graph.
type Diagnosis struct {
	// Injected is the anomaly injected (in the lab), "" when unknown.
	Injected string `json:"injected,omitempty"`
	// Type is the diagnosed type, Describe it in words.
	Type       string     `json:"type"`
	Describe   string     `json:"describe"`
	Right      *bool      `json:"right,omitempty"` // diagnosed as injected
	Victim     string     `json:"victim"`
	Summary    string     `json:"summary"`
	Confidence float64    `json:"confidence"`
	RootCauses []string   `json:"root_causes,omitempty"`
	Path       []string   `json:"path,omitempty"`
	Loops      [][]string `json:"loops,omitempty"`
	Note       string     `json:"note,omitempty"`
	// SVG is the provenance graph (collector/hawkeyeanalyzer's GraphSVG).
	SVG string `json:"svg,omitempty"`
}

// Hostmesh is a Hostmesh round: SLA percentiles and alerts.
type Hostmesh struct {
	Summary         string   `json:"summary"`
	Pass            bool     `json:"pass"`
	Fault           string   `json:"fault,omitempty"`
	Truth           string   `json:"truth,omitempty"`
	Named           string   `json:"named,omitempty"`
	Probes          int      `json:"probes"`
	Timeouts        int      `json:"timeouts"`
	NetP50Ns        int64    `json:"net_p50_ns"`
	NetP99Ns        int64    `json:"net_p99_ns"`
	ProcP50Ns       int64    `json:"proc_p50_ns"`
	SwitchDropRate  float64  `json:"switch_drop_rate"`
	Alerts          []string `json:"alerts"`
	FaultFreeAlerts []string `json:"fault_free_alerts"`
}

// DTAList is one Append list of a DTA collector.
type DTAList struct {
	Collector string `json:"collector"`
	ID        uint32 `json:"id"`
	Entries   uint64 `json:"entries"`  // read by the collector's pollers
	Capacity  uint64 `json:"capacity"` // the list's ring size
	// Rate is entries a second over the reporting run, LastRate the
	// collector's own rate over its last second.
	Rate     float64 `json:"entries_per_second"`
	LastRate float64 `json:"last_second_rate"`
}

// LuminaRun is a finished Lumina test run.
type LuminaRun struct {
	Test    string `json:"test"`
	Dir     string `json:"dir,omitempty"`
	Valid   bool   `json:"valid"`
	OK      bool   `json:"ok"`
	Verdict string `json:"verdict"`
	Packets uint64 `json:"packets,omitempty"`
	Figures string `json:"figures,omitempty"`
}

// Target is a running service the dashboard queries itself.
type Target struct {
	Name string `json:"name"`
	Addr string `json:"addr"`
}

// DefaultInterval is how often targets are queried.
const DefaultInterval = 5 * time.Second

// DefaultRefresh is how often the page reloads itself.
const DefaultRefresh = 10 * time.Second

// Dashboard serves the page. Source gives what the page shows besides
// the live targets (nil: nothing); it is called on every request, so it
// can show a run as it goes.
type Dashboard struct {
	Title   string
	Source  func() Snapshot
	Targets []Target
	// Interval between queries of the targets; Refresh of the page
	// (0: defaults; a negative Refresh turns reloading off).
	Interval time.Duration
	Refresh  time.Duration
	// Timeout bounds one query of a target (default 2 s).
	Timeout time.Duration
	Log     *slog.Logger

	mu   sync.Mutex
	live map[Target]*liveState
}

// Register mounts the page on svc: GET /dashboard (HTML; ?refresh=N
// seconds, 0 for none), GET /dashboard.json, and GET
// /dashboard/graph/{n} (the n-th diagnosis's graph as an SVG file).
func (d *Dashboard) Register(svc *service.Service) {
	svc.HandleFunc("GET /dashboard", d.servePage)
	svc.HandleFunc("GET /dashboard.json", d.serveJSON)
	svc.HandleFunc("GET /dashboard/graph/{n}", d.serveGraph)
}

// Snapshot is what the page shows now: the source's data with the live
// targets' rows after its services.
func (d *Dashboard) Snapshot() Snapshot {
	var s Snapshot
	if d.Source != nil {
		s = d.Source()
	}
	if s.Title == "" {
		s.Title = d.Title
	}
	if s.Title == "" {
		s.Title = "Appliance dashboard"
	}
	s.Updated = time.Now().UTC().Round(time.Second)
	s.Services = slices.Clone(s.Services)
	d.mu.Lock()
	for _, t := range d.Targets {
		st := d.live[t]
		if st == nil {
			s.Services = append(s.Services, Service{Name: t.Name, Kind: "service", Addr: t.Addr, Status: "not yet queried"})
			continue
		}
		s.Services = append(s.Services, st.row)
	}
	d.mu.Unlock()
	return s
}

// Run queries the targets every Interval until ctx ends. Without
// targets it returns at once.
func (d *Dashboard) Run(ctx context.Context) error {
	if len(d.Targets) == 0 {
		return nil
	}
	iv := d.Interval
	if iv <= 0 {
		iv = DefaultInterval
	}
	tick := time.NewTicker(iv)
	defer tick.Stop()
	for {
		d.Poll(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// Poll queries every target once, concurrently, and keeps the answers;
// the rates come from the counters' change since the last poll.
func (d *Dashboard) Poll(ctx context.Context) {
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	var wg sync.WaitGroup
	for _, t := range d.Targets {
		wg.Go(func() {
			sc := scrape(ctx, t, timeout)
			d.mu.Lock()
			defer d.mu.Unlock()
			if d.live == nil {
				d.live = map[Target]*liveState{}
			}
			st := d.live[t]
			if st == nil {
				st = &liveState{}
				d.live[t] = st
			}
			st.update(t, sc)
		})
	}
	wg.Wait()
}

func (d *Dashboard) refresh(r *http.Request) time.Duration {
	if v := r.URL.Query().Get("refresh"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			return time.Duration(n) * time.Second
		}
	}
	switch {
	case d.Refresh < 0:
		return 0
	case d.Refresh == 0:
		return DefaultRefresh
	}
	return d.Refresh
}

func (d *Dashboard) servePage(w http.ResponseWriter, r *http.Request) {
	s := d.Snapshot()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	// The page loads nothing and runs nothing: say so to the browser too.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:")
	if err := WritePage(w, &s, d.refresh(r)); err != nil && d.Log != nil {
		d.Log.Warn("dashboard page", "err", err) // the headers are gone: the log has it
	}
}

func (d *Dashboard) serveJSON(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	service.WriteJSON(w, http.StatusOK, d.Snapshot())
}

func (d *Dashboard) serveGraph(w http.ResponseWriter, r *http.Request) {
	s := d.Snapshot()
	n, err := strconv.Atoi(r.PathValue("n"))
	if err != nil || n < 0 || n >= len(s.Diagnoses) || s.Diagnoses[n].SVG == "" {
		service.WriteError(w, http.StatusNotFound, fmt.Errorf("no graph %q: %d diagnoses", r.PathValue("n"), len(s.Diagnoses)))
		return
	}
	if err := report.CheckInlineSVG([]byte(s.Diagnoses[n].SVG)); err != nil {
		service.WriteError(w, http.StatusInternalServerError, fmt.Errorf("graph %d: %w", n, err))
		return
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	_, _ = w.Write([]byte(s.Diagnoses[n].SVG))
}
