package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/collector/hawkeyeanalyzer"
	"github.com/rdma-appliance/appliance/internal/service"
)

// storm is a real diagnosis with its graph, from collector/hawkeyeanalyzer's
// example incident.
func storm(t *testing.T) Diagnosis {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "collector", "hawkeyeanalyzer", "testdata", "storm.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tel, err := hawkeyeanalyzer.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	d := hawkeyeanalyzer.Diagnose(tel, hawkeyeanalyzer.Options{})
	right := true
	return Diagnosis{Injected: "pfc-storm", Type: string(d.Type), Describe: d.Type.Describe(), Right: &right, Victim: d.Victim,
		Summary: d.Summary, Confidence: d.Confidence, RootCauses: []string{"host H1 at SW1:1"}, Path: d.Path, SVG: string(d.GraphSVG())}
}

func sample(t *testing.T) Snapshot {
	return Snapshot{
		Title:  "Lab <dashboard>",
		Source: "appliance lab, out /tmp/x",
		Services: []Service{
			{Name: "hawkeye", Kind: "lab stage", Status: "pass", OK: true, Detail: "3 traces <of> each", Figures: []Figure{{"pfc", "3/3"}}},
			{Name: "dta", Kind: "lab stage", Status: "fail", Detail: `list 1: "<script>alert(1)</script>"`},
		},
		Diagnoses: []Diagnosis{storm(t), {Injected: "bad", Type: "unknown", SVG: `<svg><script>alert(1)</script></svg>`}},
		Hostmesh: &Hostmesh{Summary: "4 machines", Pass: true, Probes: 6400, Timeouts: 158, NetP50Ns: 2100, NetP99Ns: 5848,
			ProcP50Ns: 900, Alerts: []string{"link rail1~spine3 flapping"}, Named: "rail1~spine3", Truth: "rail1~spine3"},
		DTALists: []DTAList{{Collector: "lab-collector", ID: 1, Entries: 3335, Rate: 11116.7, LastRate: 0}},
		Lumina:   []LuminaRun{{Test: "cnp-pacing", Valid: true, OK: true, Verdict: "ok", Packets: 2000, Figures: "cnps=78"}},
	}
}

// selfContained fails unless the page loads nothing: no script, every
// reference inside the page or to the dashboard's own paths.
func selfContained(t *testing.T, page string) {
	t.Helper()
	low := strings.ToLower(page)
	for _, bad := range []string{"<script", "<link", "<iframe", "@import", "url(", "<img", "javascript:"} {
		if strings.Contains(low, bad) {
			t.Errorf("page holds %q", bad)
		}
	}
	for _, m := range regexp.MustCompile(`(src|href)="([^"]*)"`).FindAllStringSubmatch(page, -1) {
		if !strings.HasPrefix(m[2], "#") && !strings.HasPrefix(m[2], "/dashboard") {
			t.Errorf("%s=%q refers outside the page", m[1], m[2])
		}
	}
	if n := strings.Count(page, `="http`); n != strings.Count(page, `xmlns="http://www.w3.org/2000/svg"`) {
		t.Errorf("%d absolute URLs in attributes besides the SVG namespace", n)
	}
}

func TestWritePage(t *testing.T) {
	s := sample(t)
	var b strings.Builder
	if err := WritePage(&b, &s, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	selfContained(t, page)
	for _, want := range []string{
		`<meta http-equiv="refresh" content="10">`, `<table id="services-table">`, `<td class="ok">pass</td>`,
		`<td class="bad">fail</td>`, "3 traces &lt;of&gt; each", "&lt;script&gt;alert(1)&lt;/script&gt;",
		`<div class="graph" id="graph-0"><svg xmlns="http://www.w3.org/2000/svg" class="hawkeye-graph"`,
		"graph not shown: holds a &lt;script&gt; element", "PFC storm from host PFC injection", "(the injected type)",
		"link rail1~spine3 flapping", "5.848µs", `<table id="dta-lists">`, "11.12k/s", `<table id="lumina-runs">`, "cnps=78",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "<script>") {
		t.Fatal("a script got through")
	}
	var empty strings.Builder
	if err := WritePage(&empty, &Snapshot{Title: "empty"}, 0); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"No services known yet.", "No diagnosis yet.", "No Hostmesh round yet.", "No DTA collection yet.", "No Lumina run yet."} {
		if !strings.Contains(empty.String(), want) {
			t.Errorf("empty page lacks %q", want)
		}
	}
	if strings.Contains(empty.String(), "http-equiv") {
		t.Error("refresh 0 still reloads")
	}
}

func TestParseCounters(t *testing.T) {
	text := `# HELP a_total Things.
# TYPE a_total counter
a_total 5
# TYPE b counter
b{port="ring:x y",q="a}\"b"} 7 1700000000000
b_total{x="1"} 3
# TYPE g gauge
g 9
# TYPE h histogram
h_bucket{le="1"} 2
h_count 2
broken{x="1" 4
# TYPE go_memstats_frees_total counter
go_memstats_frees_total 1e+06
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 3
`
	c, n := parseCounters(text)
	// The runtime's counters are samples, not what a service's row shows.
	want := map[string]float64{"a_total": 5, `b{port="ring:x y",q="a}\"b"}`: 7, `b_total{x="1"}`: 3}
	if n != 8 || len(c) != len(want) {
		t.Fatalf("%d samples, counters %v", n, c)
	}
	for k, v := range want {
		if c[k] != v {
			t.Errorf("%s = %v, want %v (%v)", k, c[k], v, c)
		}
	}
}

// TestServeLive mounts the dashboard on a service, with the service
// itself, a second service and an address nobody answers as targets.
func TestServeLive(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	other := service.New("dta-collect", "127.0.0.1:0", nil)
	things := other.Metrics.Counter("dta_entries_total", "Entries.")
	var broken atomic.Bool
	other.AddCheck("list pollers", func() error {
		if broken.Load() {
			return errors.New("poller 1 stalled")
		}
		return nil
	})
	svc := service.New("lab", "127.0.0.1:0", nil)
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	s := sample(t)
	d := &Dashboard{Source: func() Snapshot { return s }}
	d.Register(svc)
	errc := make(chan error, 2)
	go func() { errc <- other.Run(ctx) }()
	go func() { errc <- svc.Run(ctx) }()
	for _, sv := range []*service.Service{other, svc} {
		select {
		case <-sv.Ready():
		case err := <-errc:
			t.Fatal(err)
		}
	}
	d.Targets = []Target{{"lab", svc.Addr()}, {"collector", other.Addr()}, {"gone", deadAddr}}
	d.Poll(ctx)
	things.Add(1000)
	time.Sleep(50 * time.Millisecond)
	broken.Store(true)
	d.Poll(ctx)

	get := func(path string) (int, string, http.Header) {
		resp, err := http.Get("http://" + svc.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	code, body, _ := get("/dashboard.json")
	var got Snapshot
	if code != 200 || json.Unmarshal([]byte(body), &got) != nil {
		t.Fatalf("json: %d %s", code, body)
	}
	if len(got.Services) != 5 || len(got.Diagnoses) != 2 || got.Hostmesh == nil {
		t.Fatalf("snapshot %+v", got)
	}
	rows := map[string]Service{}
	for _, r := range got.Services {
		rows[r.Name] = r
	}
	if r := rows["lab"]; !r.OK || r.Status != "healthy" || r.Kind != "service" || len(r.Figures) == 0 {
		t.Errorf("self: %+v", r)
	}
	r := rows["collector (dta-collect)"]
	if r.OK || r.Status != "failing" || !strings.Contains(r.Detail, "poller 1 stalled") {
		t.Errorf("collector: %+v", r)
	}
	if len(r.Figures) == 0 || r.Figures[0].Name != "dta_entries_total" || !strings.HasSuffix(r.Figures[0].Value, "/s") {
		t.Errorf("collector rates: %+v", r.Figures)
	}
	if r := rows["gone"]; r.OK || r.Status != "down" || r.Detail == "" {
		t.Errorf("gone: %+v", r)
	}
	code, body, h := get("/dashboard")
	if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/html") || !strings.Contains(h.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Fatalf("page: %d %v", code, h)
	}
	selfContained(t, body)
	if !strings.Contains(body, `<table id="services-table">`) || !strings.Contains(body, "dta_entries_total") ||
		!strings.Contains(body, `class="hawkeye-graph"`) || !strings.Contains(body, `content="10"`) {
		t.Fatalf("page:\n%s", body)
	}
	if _, body, _ := get("/dashboard?refresh=0"); strings.Contains(body, "http-equiv") {
		t.Error("?refresh=0 still reloads")
	}
	code, body, h = get("/dashboard/graph/0")
	if code != 200 || h.Get("Content-Type") != "image/svg+xml" || !strings.HasPrefix(body, "<svg") {
		t.Fatalf("graph 0: %d %s", code, h.Get("Content-Type"))
	}
	for _, p := range []string{"/dashboard/graph/1", "/dashboard/graph/2", "/dashboard/graph/x"} {
		if code, _, _ := get(p); code != 404 && code != 500 {
			t.Errorf("%s: %d", p, code)
		}
	}
	// Run polls until the context ends.
	rctx, rcancel := context.WithTimeout(ctx, 120*time.Millisecond)
	d.Interval = 20 * time.Millisecond
	if err := d.Run(rctx); err != nil {
		t.Fatal(err)
	}
	rcancel()
	cancel()
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}
