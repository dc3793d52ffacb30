package hostmeshanalyzer

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/rdma-appliance/appliance/internal/service"
)

// ResultsPath is where agents post their batches.
const ResultsPath = "/v1/results"

// Service is the analyzer behind HTTP: agents POST batches to
// /v1/results; every window the results of the window that just ended are
// analyzed, the alerts logged and the report kept for GET /v1/report
// (the latest) and GET /v1/reports (the last 16).
type Service struct {
	A   *Analyzer
	log *slog.Logger
	// Now is the clock windows end on (time.Now in ns by default).
	Now func() int64

	mu      sync.Mutex
	reports []*Report
}

// NewService wraps an analyzer.
func NewService(a *Analyzer, log *slog.Logger) *Service {
	return &Service{A: a, log: log, Now: func() int64 { return time.Now().UnixNano() }}
}

// Register adds the endpoints, metrics and health check to h.
func (s *Service) Register(h *service.Service) {
	h.HandleFunc("POST "+ResultsPath, func(w http.ResponseWriter, r *http.Request) {
		var b Batch
		if err := service.ReadJSON(r, &b); err != nil {
			service.WriteError(w, http.StatusBadRequest, err)
			return
		}
		s.A.Add(&b)
		service.WriteJSON(w, http.StatusOK, map[string]int{"taken": len(b.Results)})
	})
	h.HandleFunc("GET /v1/report", func(w http.ResponseWriter, r *http.Request) {
		rs := s.Reports()
		if len(rs) == 0 {
			service.WriteError(w, http.StatusNotFound, errors.New("no window analyzed yet"))
			return
		}
		service.WriteJSON(w, http.StatusOK, rs[len(rs)-1])
	})
	h.HandleFunc("GET /v1/reports", func(w http.ResponseWriter, r *http.Request) {
		service.WriteJSON(w, http.StatusOK, s.Reports())
	})
	m := h.Metrics
	m.CounterFunc("appliance_hostmesh_batches_total", "batches taken from agents", func() float64 { return float64(s.A.counts()[0]) })
	m.CounterFunc("appliance_hostmesh_results_total", "probe results taken", func() float64 { return float64(s.A.counts()[1]) })
	m.CounterFunc("appliance_hostmesh_results_dropped_total", "probe results dropped over the bound", func() float64 { return float64(s.A.counts()[2]) })
	m.CounterFunc("appliance_hostmesh_switch_records_malformed_total", "switch PG drop records dropped as malformed", func() float64 { return float64(s.A.counts()[3]) })
	last := func(f func(*Report) float64) func() float64 {
		return func() float64 {
			if rs := s.Reports(); len(rs) > 0 {
				return f(rs[len(rs)-1])
			}
			return 0
		}
	}
	m.GaugeFunc("appliance_hostmesh_rnic_drop_ratio", "RNIC drop rate of the last window", last(func(r *Report) float64 { return r.RNICDropRate }))
	m.GaugeFunc("appliance_hostmesh_switch_drop_ratio", "switch-network drop rate of the last window", last(func(r *Report) float64 { return r.SwitchDropRate }))
	m.GaugeFunc("appliance_hostmesh_network_latency_p99_seconds", "P99 one-way network latency of the last window", last(func(r *Report) float64 { return float64(r.Network.P99) / 1e9 }))
	m.GaugeFunc("appliance_hostmesh_processing_delay_p99_seconds", "P99 host processing delay of the last window", last(func(r *Report) float64 { return float64(r.Processing.P99) / 1e9 }))
	m.GaugeFunc("appliance_hostmesh_alerts", "alert lines of the last window", last(func(r *Report) float64 { return float64(len(r.Alerts)) }))
}

func (a *Analyzer) counts() [4]uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return [4]uint64{a.Batches, a.Taken, a.Dropped, a.Malformed}
}

// Reports are the last windows' reports, oldest first.
func (s *Service) Reports() []*Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Report(nil), s.reports...)
}

// Tick analyzes the window ending now, keeps the report and logs its alerts.
func (s *Service) Tick() *Report {
	r := s.A.Analyze(s.Now())
	s.mu.Lock()
	s.reports = append(s.reports, r)
	if len(s.reports) > 16 {
		s.reports = s.reports[len(s.reports)-16:]
	}
	s.mu.Unlock()
	for _, a := range r.Alerts {
		s.log.Warn(a)
	}
	s.log.Info("hostmesh window", "probes", r.Probes, "timeouts", r.Timeouts, "rnic_drop_rate", r.RNICDropRate,
		"switch_drop_rate", r.SwitchDropRate, "net_p99", time.Duration(r.Network.P99), "proc_p99", time.Duration(r.Processing.P99))
	return r
}

// Run analyzes a window every Window until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	t := time.NewTicker(s.A.Config().Window)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			s.Tick()
		}
	}
}

// Serve runs the analyzer as a service on addr (agents post to it) until
// ctx ends, a window analyzed every cfg.Window; the end of ctx is a clean
// stop.
func Serve(ctx context.Context, addr string, cfg Config, log *slog.Logger) error {
	sv := NewService(NewAnalyzer(cfg), log)
	h := service.New("hostmesh-analyzer", addr, log)
	sv.Register(h)
	go sv.Run(ctx)
	go func() {
		<-h.Ready()
		log.Info("hostmesh analyzer", "listen", h.Addr(), "window", cfg.Window)
	}()
	err := h.Run(ctx)
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// ReadBatches reads batches as JSON values one after another (what `mesh
// probe --out` writes).
func ReadBatches(r io.Reader) ([]Batch, error) {
	dec := json.NewDecoder(bufio.NewReader(r))
	var out []Batch
	for {
		var b Batch
		if err := dec.Decode(&b); err == io.EOF {
			return out, nil
		} else if err != nil {
			return out, fmt.Errorf("batch %d: %w", len(out)+1, err)
		}
		out = append(out, b)
	}
}

// AnalyzeAll runs an analyzer over recorded batches, window after window
// from the first result to the last. Windows that hold no result are
// skipped: a recording whose clock jumps (a host's bad timestamp, years
// apart from the others) would otherwise ask for millions of empty
// reports, or never end when a timestamp is near the clock's end.
func AnalyzeAll(batches []Batch, cfg Config) []*Report {
	a := NewAnalyzer(cfg)
	for i := range batches {
		a.Add(&batches[i])
	}
	first, last, ok := a.Span()
	if !ok {
		return nil
	}
	// In uint64, where the distances between any two int64 times fit.
	w := uint64(a.cfg.Window)
	step := func(from int64, windows uint64) int64 {
		if room := uint64(math.MaxInt64) - uint64(from); windows > room/w {
			return math.MaxInt64
		}
		return int64(uint64(from) + windows*w)
	}
	var out []*Report
	for end := step(first, 1); ; {
		out = append(out, a.Analyze(end))
		if end > last || end == math.MaxInt64 {
			return out
		}
		// The next window holding a result: Analyze forgot those
		// before end, so next >= end.
		next, _, ok := a.Span()
		if !ok {
			return out
		}
		end = step(end, (uint64(next)-uint64(end))/w+1)
	}
}

// WriteText prints a report for people: totals, SLA, the ranked suspects
// and the alerts.
func (r *Report) WriteText(w io.Writer) error {
	d := func(ns int64) string { return time.Duration(ns).String() }
	fmt.Fprintf(w, "window %s .. %s: %d probes, %d timeouts (%d RNIC, %d switch network), %d high latency (> %s), %d unlocalized\n",
		time.Unix(0, r.Start).UTC().Format(time.RFC3339Nano), time.Unix(0, r.End).UTC().Format(time.RFC3339Nano),
		r.Probes, r.Timeouts, r.RNICProblems, r.SwitchProblems, r.HighLatency, d(r.HighLatencyNs), r.Unlocalized)
	fmt.Fprintf(w, "drop rates: RNIC %.4f%%, switch network %.4f%%\n", 100*r.RNICDropRate, 100*r.SwitchDropRate)
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "SLA\tP50\tP90\tP99\tP999\tmax\n")
	for _, x := range []struct {
		n string
		p Percentiles
	}{{"network latency", r.Network}, {"processing delay", r.Processing}} {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", x.n, d(x.p.P50), d(x.p.P90), d(x.p.P99), d(x.p.P999), d(x.p.Max))
	}
	tw.Flush()
	for i, s := range r.RNICs {
		if i == 5 {
			break
		}
		note := ""
		switch {
		case s.Down:
			note = " down"
		case s.Held:
			note = " anomalous (held)"
		case s.Anomalous:
			note = " anomalous"
		case s.Explained != "":
			note = " explained by " + s.Explained
		}
		fmt.Fprintf(w, "rnic %s: %d/%d timeouts%s\n", s.RNIC, s.Timeouts, s.Probes, note)
	}
	for i, p := range r.PFC {
		if i == 3 {
			break
		}
		note := ""
		if p.Storming {
			note = " storming"
		}
		fmt.Fprintf(w, "pfc %s: sent %d pauses (%s, %.1f%%), received %d (%s)%s\n", p.RNIC, p.TxPause, d(p.TxPauseNs), 100*p.TxShare,
			p.RxPause, d(p.RxPauseNs), note)
	}
	for i, d := range r.Discards {
		if i == 3 {
			break
		}
		fmt.Fprintf(w, "discards %s: %d lossless frames at %s; of %d probes over it %d timed out, %d slow (%d slow next to it)\n", d.Switch, d.Discards,
			strings.Join(d.Ports, ", "), d.Traversed, d.Timeouts, d.SlowOver, d.SlowNear)
	}
	for i, v := range r.Links {
		if i == 3 {
			break
		}
		fmt.Fprintf(w, "link #%d %s: %d votes (%d timeouts, %d high latency) of %d probes\n", i+1, v.Name, v.Votes, v.Timeouts, v.HighLat, v.Traversed)
	}
	for i, v := range r.Switches {
		if i == 3 {
			break
		}
		fmt.Fprintf(w, "switch #%d %s: %d votes of %d probes\n", i+1, v.Name, v.Votes, v.Traversed)
	}
	for i, h := range r.Hosts {
		if i == 3 {
			break
		}
		fmt.Fprintf(w, "host %s: processing P50 %s P99 %s\n", h.Host, d(h.Processing.P50), d(h.Processing.P99))
	}
	for _, a := range r.Alerts {
		fmt.Fprintln(w, a)
	}
	_, err := fmt.Fprintln(w)
	return err
}
