package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestServiceLifecycle(t *testing.T) {
	s := New("testsvc", "127.0.0.1:0", nil)
	var flushed bool
	s.OnStop("capture", func(context.Context) error { flushed = true; return nil })
	s.OnStop("broken", func(context.Context) error { return errors.New("disk full") })
	healthy := true
	s.AddCheck("port ring:a", func() error {
		if healthy {
			return nil
		}
		return errors.New("link down")
	})
	s.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		var in map[string]int
		if err := ReadJSON(r, &in); err != nil {
			WriteError(w, http.StatusBadRequest, err)
			return
		}
		WriteJSON(w, http.StatusOK, in)
	})
	s.Metrics.Counter("testsvc_things_total", "Things.").Add(5)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	select {
	case <-s.Ready():
	case err := <-done:
		t.Fatal(err)
	}
	c := NewClient(s.Addr())

	var h Health
	if err := c.Do(ctx, "GET", "/healthz", nil, &h); err != nil || h.Status != "ok" {
		t.Fatalf("healthz: %+v %v", h, err)
	}
	healthy = false
	err := c.Do(ctx, "GET", "/healthz", nil, &h)
	if err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("failing healthz: %v", err)
	}
	resp, err := http.Get("http://" + s.Addr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"port ring:a": "link down"`) {
		t.Fatalf("failing component not named: %s", body)
	}

	var out map[string]int
	if err := c.Do(ctx, "POST", "/echo", map[string]int{"a": 1}, &out); err != nil || out["a"] != 1 {
		t.Fatalf("echo: %v %v", out, err)
	}
	err = c.Do(ctx, "POST", "/echo", map[string]string{"a": "x"}, &out)
	if err == nil || !strings.Contains(err.Error(), "bad request body") {
		t.Fatalf("bad body: %v", err)
	}

	resp, err = http.Get("http://" + s.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"testsvc_things_total 5", "appliance_up 1", `appliance_build_info{goversion="go`, `service="testsvc",version="dev"} 1`,
		`appliance_http_requests_total{code="200",path="/echo"} 1`, `appliance_http_requests_total{code="400",path="/echo"} 1`,
		"go_goroutines ", "process_start_time_seconds "} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("content type %q", ct)
	}

	cancel()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "stopping broken: disk full") {
			t.Fatalf("stop error: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("service did not stop")
	}
	if !flushed {
		t.Fatal("stop hook did not run")
	}
}

func TestListenError(t *testing.T) {
	s := New("x", "256.0.0.1:1", nil)
	if err := s.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "x: listen") {
		t.Fatalf("listen error: %v", err)
	}
}

// TestComponents: a component that fails stops the service, named, after
// the others were stopped and the stop hooks ran; at a normal stop every
// component's context ends before the hooks run.
func TestComponents(t *testing.T) {
	s := New("svc", "127.0.0.1:0", nil)
	var order []string
	s.OnStop("flush", func(context.Context) error { order = append(order, "flush"); return nil })
	s.Go("poller 0", func(ctx context.Context) error {
		<-ctx.Done()
		order = append(order, "poller 0 stopped")
		return nil
	})
	s.Go("poller 1", func(ctx context.Context) error { return errors.New("core 3 is already polled by dumper d0") })
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	select {
	case err := <-done:
		if err == nil || err.Error() != "svc: poller 1: core 3 is already polled by dumper d0" {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a failed component did not stop the service")
	}
	if strings.Join(order, ",") != "poller 0 stopped,flush" {
		t.Fatalf("stop order %v", order)
	}

	s = New("svc", "127.0.0.1:0", nil)
	s.Go("poller", func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-s.Ready(); cancel() }()
	if err := s.Run(ctx); err != nil {
		t.Fatalf("normal stop: %v", err)
	}
}

// TestRequestsByRoute: requests are counted by the route that served them,
// whatever path the client sent; a request no route serves (not found,
// wrong method, a redirect made from the client's path) is "other".
func TestRequestsByRoute(t *testing.T) {
	s := New("svc", "127.0.0.1:0", nil)
	s.HandleFunc("GET /v1/lists/{id}", func(w http.ResponseWriter, r *http.Request) {})
	s.HandleFunc("POST /v1/load", func(w http.ResponseWriter, r *http.Request) {})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	for _, path := range []string{"/v1/lists/1", "/v1/lists/2", "/v1/lists/%ff", "/v1/load", "/nope", "/a%09b", "/v1/../v1/lists/3"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	got := map[string]float64{}
	fams, err := s.Metrics.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "appliance_http_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			var path, code string
			for _, l := range m.GetLabel() {
				if l.GetName() == "path" {
					path = l.GetValue()
				} else {
					code = l.GetValue()
				}
			}
			got[path+" "+code] = m.GetCounter().GetValue()
		}
	}
	// /v1/lists/3 after the redirect of its uncleaned path; the redirect
	// itself counts under the route it leads to.
	want := map[string]float64{"/v1/lists/{id} 200": 4, "other 405": 1, "other 404": 2, "/v1/lists/{id} 307": 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("requests by route %v, want %v", got, want)
	}
}

// TestControlAccess: mutating requests on a listener off loopback need
// the token (401 without, or when the service has none), every one needs
// a JSON content type (415: a web page's simple POST), bodies are
// bounded, and reads stay open.
func TestControlAccess(t *testing.T) {
	echo := func(s *Service) *httptest.Server {
		s.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
			var in map[string]any
			if err := ReadJSON(r, &in); err != nil {
				WriteError(w, http.StatusBadRequest, err)
				return
			}
			WriteJSON(w, http.StatusOK, in)
		})
		srv := httptest.NewServer(s.Handler())
		t.Cleanup(srv.Close)
		return srv
	}
	do := func(srv *httptest.Server, method, path, ctype, auth, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const tok = "0123456789abcdef-token"
	const json = "application/json"

	// Off loopback without a token: no changes at all, reads open.
	open := echo(New("x", "192.0.2.1:9300", nil))
	if code, out := do(open, "POST", "/echo", json, "", `{}`); code != 401 || !strings.Contains(out, "has no token") {
		t.Fatalf("off loopback, no token: %d %s", code, out)
	}
	for _, p := range []string{"/metrics", "/healthz"} {
		if code, _ := do(open, "GET", p, "", "", ""); code != 200 {
			t.Fatalf("GET %s: %d", p, code)
		}
	}

	s := New("x", "192.0.2.1:9300", nil)
	s.Token = []byte(tok)
	srv := echo(s)
	for _, tc := range []struct {
		ctype, auth, body string
		code              int
		want              string
	}{
		{json, "", `{}`, 401, "Bearer"},
		{json, "Bearer wrong-token-wrong-token", `{}`, 401, "wrong token"},
		{json, "Basic " + tok, `{}`, 401, "Bearer"},
		{"text/plain", "Bearer " + tok, `{"a":1}`, 415, "application/json"},
		{"", "Bearer " + tok, ``, 415, "application/json"},
		{"application/json; charset=utf-8", "Bearer " + tok, `{"a":1}`, 200, `"a": 1`},
		{json, "Bearer " + tok, `{"a":"` + strings.Repeat("x", MaxBody) + `"}`, 400, "over 16777216 bytes"},
	} {
		if code, out := do(srv, "POST", "/echo", tc.ctype, tc.auth, tc.body); code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("POST %q %q: %d %.200s, want %d %q", tc.ctype, tc.auth, code, out, tc.code, tc.want)
		}
	}
	// DELETE and PUT are mutating too, even where no route takes them.
	if code, _ := do(srv, "DELETE", "/echo", json, "", ""); code != 401 {
		t.Fatalf("DELETE without the token: %d", code)
	}

	// The client sends the process's token and the content type.
	SetDefaultToken([]byte(tok))
	defer SetDefaultToken(nil)
	var out map[string]int
	if err := NewClient(srv.URL).Do(context.Background(), "POST", "/echo", map[string]int{"b": 2}, &out); err != nil || out["b"] != 2 {
		t.Fatalf("client with the default token: %v %v", out, err)
	}
	SetDefaultToken(nil)

	// On loopback without a token: changes are taken, but only as JSON.
	lo := echo(New("x", "127.0.0.1:0", nil))
	if code, _ := do(lo, "POST", "/echo", "text/plain", "", `{}`); code != 415 {
		t.Fatalf("loopback text/plain: %d", code)
	}
	if code, _ := do(lo, "POST", "/echo", json, "", `{}`); code != 200 {
		t.Fatalf("loopback JSON: %d", code)
	}
}

// TestReadToken: a token file must be private enough and long enough.
func TestReadToken(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		body string
		mode os.FileMode
		want string
	}{
		{"short", 0o600, "want at least 16"},
		{"0123456789abcdef0123", 0o644, "lets every user read it"},
		{"0123456789 abcdef0123", 0o600, "printable ASCII"},
		{"  0123456789abcdef0123\n", 0o600, ""},
	} {
		p := filepath.Join(dir, "tok")
		os.Remove(p)
		if err := os.WriteFile(p, []byte(tc.body), tc.mode); err != nil {
			t.Fatal(err)
		}
		tok, err := ReadToken(p)
		if tc.want == "" {
			if err != nil || string(tok) != "0123456789abcdef0123" {
				t.Fatalf("%q: %q %v", tc.body, tok, err)
			}
		} else if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.body, err, tc.want)
		}
	}
}
