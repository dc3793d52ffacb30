package dtacollector

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/internal/service"
)

// TestHTTP: the queries answer through the API as they do in Go; unknown
// things answer 404 saying what is unknown; /metrics and /healthz show
// the collector.
func TestHTTP(t *testing.T) {
	ld := load(t)
	h := service.New("dta-collect", "127.0.0.1:0", slog.New(slog.DiscardHandler))
	ld.c.Register(h)
	srv := httptest.NewServer(h.Handler())
	defer srv.Close()
	cl := service.NewClient(srv.URL)
	ctx := context.Background()

	var kw KeyWriteResult
	if err := cl.Do(ctx, "GET", "/v1/keywrite/7", nil, &kw); err != nil || kw.Value != ld.kw[7] || kw.Key != 7 {
		t.Fatalf("keywrite: %+v %v", kw, err)
	}
	var ki KeyIncrementResult
	if err := cl.Do(ctx, "GET", "/v1/keyincrement/0x5", nil, &ki); err != nil || ki.Count != ld.ki[5] {
		t.Fatalf("keyincrement: %+v %v", ki, err)
	}
	var sc SketchCountResult
	if err := cl.Do(ctx, "GET", "/v1/sketches/7/count/3", nil, &sc); err != nil || sc.Count < 9 {
		t.Fatalf("sketch count: %+v %v", sc, err)
	}
	var card CardinalityResult
	if err := cl.Do(ctx, "GET", "/v1/sketches/8/cardinality", nil, &card); err != nil || card.Cardinality < 1400 || card.Cardinality > 2600 {
		t.Fatalf("cardinality: %+v %v", card, err)
	}
	var pc PostcardResult
	if err := cl.Do(ctx, "GET", "/v1/postcards/104", nil, &pc); err != nil || !pc.Complete || pc.Hops[3] != 1043 {
		t.Fatalf("postcard: %+v %v", pc, err)
	}
	if err := cl.Do(ctx, "GET", "/v1/postcards/104?expect=1040,1041,1042,1043", nil, &pc); err != nil || !pc.Complete || len(pc.Expected) != 4 {
		t.Fatalf("postcard checked: %+v %v", pc, err)
	}
	if err := cl.Do(ctx, "GET", "/v1/postcards/104?expect=1040,1041,0x1,1043", nil, &pc); err == nil ||
		!strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), "hop 2 has 1042, expected 1") {
		t.Fatalf("postcard with a wrong hop: %v, want 409 naming hop 2", err)
	}
	if err := cl.Do(ctx, "GET", "/v1/postcards/104?expect=1040,x", nil, &pc); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("postcard with a bad path: %v, want 400", err)
	}
	var inc PostcardResult
	if err := cl.Do(ctx, "GET", "/v1/postcards/120", nil, &inc); err != nil || inc.Complete || inc.Reported != 2 || len(inc.Missing) != 2 {
		t.Fatalf("incomplete postcard: %+v %v", inc, err)
	}
	var ls ListStatus
	if err := cl.Do(ctx, "GET", "/v1/lists/2?recent=3", nil, &ls); err != nil || ls.Read != 10 || len(ls.Recent) != 3 || ls.Recent[2].Data != 9 {
		t.Fatalf("list: %+v %v", ls, err)
	}
	var regions RegionsInfo
	if err := cl.Do(ctx, "GET", "/v1/regions", nil, &regions); err != nil || regions.IP != collIP.String() ||
		regions.Regions.KeyWrite == nil || len(regions.Regions.Lists) != 2 || len(regions.Memory) != 5 {
		t.Fatalf("regions: %+v %v", regions, err)
	}
	var conns []ConnState
	if err := cl.Do(ctx, "GET", "/v1/connections", nil, &conns); err != nil || len(conns) != 1 || conns[0].Translator != "trans0" {
		t.Fatalf("connections: %+v %v", conns, err)
	}
	var st Stats
	if err := cl.Do(ctx, "GET", "/v1/stats", nil, &st); err != nil || st.Pushes != 10 || len(st.Lists) != 2 {
		t.Fatalf("stats: %+v %v", st, err)
	}

	for _, tc := range []struct {
		path   string
		status int
		says   string
	}{
		{"/v1/lists/9", 404, "list 9: no such Append list"},
		{"/v1/sketches/99/count/1", 404, "sketch 99: no such sketch"},
		{"/v1/sketches/7/cardinality", 400, "cardinality needs hyperloglog"},
		{"/v1/keywrite/123456", 404, "key-write key 123456: not found"},
		{"/v1/keywrite/1?consensus=5", 400, "consensus 5 of 2 slots"},
		{"/v1/keywrite/nokey", 400, `key "nokey"`},
		{"/v1/postcards/1", 404, "postcard key 1: not found"},
	} {
		resp, err := http.Get(srv.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		var eb service.ErrorBody
		err = json.NewDecoder(resp.Body).Decode(&eb)
		resp.Body.Close()
		if err != nil || resp.StatusCode != tc.status || !strings.Contains(eb.Error, tc.says) {
			t.Errorf("%s: %d %q, want %d saying %q", tc.path, resp.StatusCode, eb.Error, tc.status, tc.says)
		}
	}

	body := get(t, srv.URL+"/metrics")
	for _, m := range []string{
		`appliance_dta_collector_memory_bytes{primitive="key-write"} 524288`,
		`appliance_dta_collector_connections 1`,
		`appliance_dta_collector_push_notifications_total 10`,
		`appliance_dta_collector_list_entries_total{list="1"} 400`,
		`appliance_dta_collector_list_entries_per_second{list="2"}`,
		`appliance_dta_collector_poll_loop_busy_polls_total{list="1",poller="0"}`,
		`appliance_dta_collector_poll_loop_polls_total{list="2",poller="0"}`,
	} {
		if !strings.Contains(body, m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
	if hz := h.CheckHealth(); hz.Status != "ok" {
		t.Errorf("health %+v", hz)
	}
	ld.c.Close()
	if hz := h.CheckHealth(); hz.Status == "ok" || !strings.Contains(strings.Join(hz.Failing, ","), "exchange") {
		t.Errorf("health after Close %+v", hz)
	}
	resp, err := http.Get(srv.URL + "/v1/keywrite/7")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a query after Close: %d", resp.StatusCode)
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParsePostcardQuery(t *testing.T) {
	q, err := ParseQuery([]string{"postcard", "42", "101", "0x66", "103"}, QueryOptions{})
	if err != nil || q.Path != "/v1/postcards/42?expect=101%2C0x66%2C103" {
		t.Fatalf("postcard with a path: %+v %v", q, err)
	}
	if q, err := ParseQuery([]string{"postcard", "42"}, QueryOptions{}); err != nil || q.Path != "/v1/postcards/42" {
		t.Fatalf("postcard: %+v %v", q, err)
	}
	if _, err := ParseQuery([]string{"postcard", "42", "1", "z"}, QueryOptions{}); err == nil || !strings.Contains(err.Error(), `hop 1 "z"`) {
		t.Fatalf("postcard with a bad hop: %v", err)
	}
}
