package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/internal/service"
)

// scanRepo scans the module as main does.
func scanRepo(t *testing.T) map[string]Metric {
	t.Helper()
	wd, _ := os.Getwd()
	t.Cleanup(func() { _ = os.Chdir(wd) })
	if err := os.Chdir("../.."); err != nil {
		t.Fatal(err)
	}
	out := map[string]Metric{}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") ||
			strings.HasPrefix(path, "internal/metrics/") || strings.Contains(path, "testdata") {
			return err
		}
		ms, err := scan(path)
		for _, m := range ms {
			out[m.Name] = m
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFindsEveryServiceMetric: every family a bare service exposes is found
// in the source, with its help text and type, and the per-field families of
// the services' tables are expanded.
func TestFindsEveryServiceMetric(t *testing.T) {
	found := scanRepo(t)
	s := service.New("x", "127.0.0.1:0", nil)
	for _, line := range strings.Split(s.Metrics.String(), "\n") {
		if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
			name, help, _ := strings.Cut(rest, " ")
			if p, _, _ := strings.Cut(name, "_"); p == "go" || p == "process" {
				// The runtime collectors' families, one row each.
				if m, ok := found[p+"_*"]; !ok || m.Pkg != "internal/service" {
					t.Errorf("%s: no %s_* row: %+v", name, p, m)
				}
				continue
			}
			if m, ok := found[name]; !ok || m.Help != help {
				t.Errorf("%s: found %+v, want help %q", name, m, help)
			}
		}
	}
	// Every family the source registers is the appliance's (a scrape
	// shows only the families that have series; this sees them all).
	for name, m := range found {
		if !strings.HasPrefix(name, "appliance_") && name != "go_*" && name != "process_*" {
			t.Errorf("%s (%s:%d): not prefixed appliance_", name, m.File, m.Line)
		}
	}
	for name, typ := range map[string]string{
		"appliance_dump_arena_full_total":                 "counter",
		"appliance_inject_port_event_ecn_total":           "counter",
		"appliance_dta_translator_collector_up":           "gauge",
		"appliance_dta_translator_seq_nacks_total":        "counter",
		"appliance_dta_collector_list_entries_per_second": "gauge",
	} {
		if m := found[name]; m.Type != typ || m.Help == "" {
			t.Errorf("%s: %+v", name, m)
		}
	}
}

// TestDashboardMetricsExist: every metric the Grafana dashboard queries is
// one the services register.
func TestDashboardMetricsExist(t *testing.T) {
	found := scanRepo(t)
	b, err := os.ReadFile("packaging/grafana/appliance.json")
	if err != nil {
		t.Fatal(err)
	}
	names := regexp.MustCompile(`\b(appliance|hostmesh)_[a-z0-9_]+`).FindAllString(string(b), -1)
	if len(names) < 30 {
		t.Fatalf("only %d metric references", len(names))
	}
	for _, n := range names {
		if _, ok := found[n]; !ok {
			t.Errorf("the dashboard queries %s, which no service registers", n)
		}
	}
}

// TestClientGolangConstructors: a family registered with client_golang's
// own constructors (through a registry's MustRegister) is found, its name
// joined from the Opts as the library joins it.
func TestClientGolangConstructors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.go")
	src := `package x

func register(r *metrics.Registry) {
	r.MustRegister(prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "appliance", Subsystem: "x",
		Name: "wait_seconds", Help: "Waits.", Buckets: prometheus.DefBuckets}, []string{"queue"}))
	r.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "appliance_x_depth", Help: "Depth."}, depth))
	r.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: "not a literal"}))
}
`
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	ms, err := scan(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].Name != "appliance_x_wait_seconds" || ms[0].Type != "histogram" || ms[0].Help != "Waits." ||
		strings.Join(ms[0].Labels, ",") != "queue" || ms[1].Name != "appliance_x_depth" || ms[1].Type != "gauge" || ms[1].Line != 6 {
		t.Fatalf("found %+v", ms)
	}
}
