package lab

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/appliance/dashboard"
	"github.com/rdma-appliance/appliance/internal/report"
	"github.com/rdma-appliance/appliance/internal/service"
)

// shortLab is the lab cut to what the dashboard shows, quick: a PFC storm
// and an in-loop deadlock diagnosed, a small DTA collection, a Lumina
// capture test (and a ready-made test where timing verdicts mean
// something), a Hostmesh round.
func shortLab(t *testing.T) Spec {
	t.Helper()
	s, err := LoadSpec("")
	if err != nil {
		t.Fatal(err)
	}
	s.Wire.Enabled, s.Verbs.Enabled, s.Fabric.Enabled, s.Tuning.Enabled = false, false, false, false
	s.Hawkeye.Traces, s.Hawkeye.Anomalies = 1, []string{"pfc-storm", "in-loop-deadlock"}
	s.DTA.Reports = 2000
	s.Lumina.BalanceRounds = 0
	s.LuminaTests.Tests = []string{"cnp-pacing"}
	s.LuminaTests.Enabled = !raceEnabled // see TestLuminaTestsStage
	return s
}

// TestDashboardInChromium is the dashboard's acceptance test: a lab runs
// with `--serve` (ServeDashboard, as the CLI does) and a second service
// to query live; headless Chromium loads http://ADDR/dashboard, its
// screenshot must show something, and the document it built must hold
// the services table and the provenance graphs.
func TestDashboardInChromium(t *testing.T) {
	t0 := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	other := service.New("dta-collect", "127.0.0.1:0", nil)
	other.Metrics.Counter("dta_list_entries_total", "Entries read.").Add(7)
	otherDone := make(chan error, 1)
	go func() { otherDone <- other.Run(ctx) }()
	<-other.Ready()

	l := &Lab{Spec: shortLab(t), OutDir: t.TempDir()}
	ready := make(chan string, 1)
	served := make(chan error, 1)
	go func() {
		served <- l.ServeDashboard(ctx, DashboardOptions{Addr: "127.0.0.1:0", Interval: 200 * time.Millisecond,
			Targets: []dashboard.Target{{Name: "collector", Addr: other.Addr()}}, Ready: ready})
	}()
	var addr string
	select {
	case addr = <-ready:
	case err := <-served:
		t.Fatal(err)
	}
	base := "http://" + addr
	// Served before the stages ran: every stage pending.
	var early dashboard.Snapshot
	getJSON(t, base+"/dashboard.json", &early)
	if len(early.Services) == 0 || early.Services[0].Kind != "lab stage" || early.Services[0].OK {
		t.Fatalf("before the run: %+v", early.Services)
	}

	rep, err := l.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var sum strings.Builder
	rep.WriteSummary(&sum)
	if !rep.Pass() {
		t.Fatalf("lab failed:\n%s", sum.String())
	}
	labTook := time.Since(t0)
	time.Sleep(500 * time.Millisecond) // two polls of the live services, for rates

	var snap dashboard.Snapshot
	getJSON(t, base+"/dashboard.json", &snap)
	rows := map[string]dashboard.Service{}
	for _, r := range snap.Services {
		rows[r.Name] = r
	}
	for _, st := range []string{"lumina", "dta", "hawkeye", "hostmesh"} {
		if r := rows[st]; r.Kind != "lab stage" || !r.OK || len(r.Figures) == 0 {
			t.Errorf("stage %s: %+v", st, r)
		}
	}
	if r := rows["lab"]; r.Kind != "service" || !r.OK || len(r.Figures) == 0 {
		t.Errorf("the lab's own service: %+v", r)
	}
	if r := rows["collector (dta-collect)"]; !r.OK || len(r.Figures) == 0 {
		t.Errorf("the live collector: %+v", r)
	}
	if len(snap.Diagnoses) != 2 || snap.Diagnoses[0].Injected != "pfc-storm" || snap.Diagnoses[1].Injected != "in-loop-deadlock" ||
		snap.Hostmesh == nil || len(snap.DTALists) != 2 || snap.DTALists[0].Entries == 0 || len(snap.Lumina) == 0 {
		t.Fatalf("snapshot: %d diagnoses, hostmesh %v, DTA lists %+v, Lumina runs %+v", len(snap.Diagnoses), snap.Hostmesh != nil,
			snap.DTALists, snap.Lumina)
	}

	// The page as a browser sees it.
	bctx, bcancel := context.WithTimeout(ctx, 60*time.Second)
	defer bcancel()
	b0 := time.Now()
	dom, err := report.DumpDOM(bctx, base+"/dashboard?refresh=0")
	if errors.Is(err, report.ErrNoBrowser) {
		t.Skipf("%v (Debian: apt-get install chromium)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<table id="services-table">`, ">hawkeye<", ">hostmesh<", "collector (dta-collect)",
		`class="hawkeye-graph"`, "PFC storm from host PFC injection", "PFC deadlock, initiator in the loop",
		`class="edge port-port loop back"`, `<table id="hostmesh-sla">`, `<table id="dta-lists">`, `<table id="lumina-runs">`} {
		if !strings.Contains(dom, want) {
			t.Errorf("the DOM Chromium built lacks %q", want)
		}
	}
	if n := strings.Count(dom, `<svg xmlns="http://www.w3.org/2000/svg" class="hawkeye-graph"`); n != 2 {
		t.Errorf("%d provenance graphs in the DOM, want 2", n)
	}
	shot := filepath.Join(l.OutDir, "dashboard.png")
	if err := report.ScreenshotURL(bctx, base+"/dashboard?refresh=0", shot, report.ScreenshotWidth, report.ScreenshotHeight); err != nil {
		t.Fatal(err)
	}
	share, err := report.InkShare(shot)
	if err != nil {
		t.Fatal(err)
	}
	if share < report.MinInk {
		t.Fatalf("the dashboard's screenshot is blank (%.2f%% ink)", 100*share)
	}
	t.Logf("lab %v, Chromium %v, %.1f%% ink", labTook.Round(time.Millisecond), time.Since(b0).Round(time.Millisecond), 100*share)

	// The graph alone, as a file a browser opens.
	resp, err := http.Get(base + "/dashboard/graph/1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "PFC deadlock") {
		t.Fatalf("graph 1: %d", resp.StatusCode)
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if err := <-otherDone; err != nil {
		t.Fatal(err)
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("%s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
}
