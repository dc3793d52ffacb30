package inject

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/internal/service"
)

func TestHTTPControl(t *testing.T) {
	pool, err := dpdk.NewPool("injhttp", 64, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	l := ring.NewLink(fmt.Sprintf("injhttp%p", t), ring.Config{})
	in, err := New(Config{Traffic: []TrafficPort{{Name: "p0", Port: l.A()}}, Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	s := service.New("inject", "127.0.0.1:0", nil)
	in.Register(s)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	do := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	intents, conns, g := listing2()
	body, _ := json.Marshal(LoadRequest{Intents: intents, Conns: conns, Geometry: g, OneBased: true, Reset: true})
	var loaded struct {
		Entries  int    `json:"entries"`
		IterMode string `json:"iter_mode"`
	}
	if code, out := do("POST", "/v1/load", string(body)); code != 200 || json.Unmarshal([]byte(out), &loaded) != nil ||
		loaded.Entries != 3 || loaded.IterMode != "paper" {
		t.Fatalf("load: %d %s", code, out)
	}
	// An intent naming a connection that does not exist: rejected with
	// the reason, and the loaded table stays.
	bad, _ := json.Marshal(LoadRequest{Intents: []intent.Intent{{QP: 5, PSN: 1, Iter: 1, Type: mirror.EventDrop}}, Conns: conns, Geometry: g, OneBased: true})
	if code, out := do("POST", "/v1/load", string(bad)); code != 422 || !strings.Contains(out, "qpn 5: the test has 2 connections") {
		t.Fatalf("bad load: %d %s", code, out)
	}
	if code, out := do("POST", "/v1/load", `{"intents": [], "colour": 1}`); code != 400 || !strings.Contains(out, "colour") {
		t.Fatalf("unknown field: %d %s", code, out)
	}
	code, out := do("GET", "/v1/entries", "")
	var ents []EntryHits
	if code != 200 || json.Unmarshal([]byte(out), &ents) != nil || len(ents) != 3 || ents[0].Event != "ecn" {
		t.Fatalf("entries: %d %s", code, out)
	}
	var st mirror.InjectorStats
	if code, out := do("GET", "/v1/stats", ""); code != 200 || json.Unmarshal([]byte(out), &st) != nil ||
		len(st.Ports) != 1 || st.Ports[0].Name != "p0" {
		t.Fatalf("stats: %d %s", code, out)
	}
	if code, out := do("GET", "/metrics", ""); code != 200 || !strings.Contains(out, `appliance_inject_port_rx_packets_total{port="p0",role="traffic"} 0`) ||
		!strings.Contains(out, "appliance_inject_poll_loop_polls_total 0") || !strings.Contains(out, "appliance_inject_poll_loop_busy_polls_total 0") {
		t.Fatalf("metrics: %d %s", code, out)
	}
	// The loop is not running: health names it.
	if code, out := do("GET", "/healthz", ""); code == 200 || !strings.Contains(out, "injector loop") {
		t.Fatalf("healthz: %d %s", code, out)
	}
}
