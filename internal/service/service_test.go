package service

import (
	"context"
	"errors"
	"io"
	"net/http"
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
	for _, want := range []string{"testsvc_things_total 5", "appliance_up 1", `appliance_build_info{version="dev",service="testsvc"`,
		`appliance_http_requests_total{path="/echo",code="200"} 1`} {
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
