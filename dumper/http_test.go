package dumper

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/internal/service"
)

// TestHTTP drives a capture over the control API: start, status, stop,
// the file list and a fetched file identical to the one on disk; then a
// service stop (SIGTERM in the CLI) during a capture writes it.
func TestHTTP(t *testing.T) {
	f, port := newFeeder(t, 1, 1024)
	d, err := New(Config{Name: "rm0", Port: port, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	s := service.New("dump", "127.0.0.1:0", nil)
	d.Register(s)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	<-s.Ready()
	c := service.NewClient(s.Addr())
	var st Status
	if err := c.Do(ctx, "POST", "/v1/start", nil, &st); err != nil || st.State != "capturing" {
		t.Fatalf("start: %v %+v", err, st)
	}
	if err := c.Do(ctx, "POST", "/v1/start", nil, nil); err == nil || !strings.Contains(err.Error(), "409") {
		t.Fatalf("second start: %v", err)
	}
	buf := make([]byte, 2048)
	for s := uint64(1); s <= 100; s++ {
		f.send(0, buf[:mirrored(buf, s, 0)])
	}
	waitReceived(t, d, 100)
	if err := c.Do(ctx, "GET", "/v1/status", nil, &st); err != nil || st.Captured != 100 || len(st.Workers) != 1 || !st.Workers[0].Alive {
		t.Fatalf("status: %v %+v", err, st)
	}
	resp, err := http.Get("http://" + s.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`appliance_dump_captured_packets_total{dumper="rm0",queue="0"} 100`, "appliance_dump_capturing 1"} {
		if !bytes.Contains(metrics, []byte(want)) {
			t.Errorf("metrics lack %q", want)
		}
	}
	// The worker's loop received the copies in at least one busy pass.
	if m := regexp.MustCompile(`appliance_dump_poll_loop_busy_polls_total\{dumper="rm0",queue="0"\} ([1-9][0-9]*)`).FindSubmatch(metrics); m == nil {
		t.Errorf("no busy polls in the metrics:\n%s", metrics)
	}
	var res Result
	if err := c.Do(ctx, "POST", "/v1/stop", nil, &res); err != nil || res.Written != 100 || len(res.Files) != 1 {
		t.Fatalf("stop: %v %+v", err, res)
	}
	var files []File
	if err := c.Do(ctx, "GET", "/v1/files", nil, &files); err != nil || len(files) != 1 || files[0].Name != "rm0-q0.pcap" {
		t.Fatalf("files: %v %+v", err, files)
	}
	resp, err = http.Get("http://" + s.Addr() + "/v1/files/" + files[0].Name)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want, _ := os.ReadFile(files[0].Path)
	if resp.StatusCode != 200 || !bytes.Equal(got, want) || len(want) == 0 {
		t.Fatalf("fetch: %d, %d bytes, file %d bytes", resp.StatusCode, len(got), len(want))
	}
	if resp, err := http.Get("http://" + s.Addr() + "/v1/files/nope.pcap"); err != nil || resp.StatusCode != 404 {
		t.Fatalf("missing file: %v %v", err, resp.StatusCode)
	}

	// A capture running when the service stops is written.
	if err := c.Do(ctx, "POST", "/v1/start", nil, nil); err != nil {
		t.Fatal(err)
	}
	for s := uint64(1); s <= 7; s++ {
		f.send(0, buf[:mirrored(buf, s, 0)])
	}
	waitReceived(t, d, 7)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("service did not stop")
	}
	if fs := d.Files(); len(fs) != 1 || fs[0].Packets != 7 {
		t.Fatalf("files after the service stopped: %+v", fs)
	}
}

// TestFilesPrivate: a dumper listening off loopback serves its captures,
// which hold the tested traffic, only to the token's holders.
func TestFilesPrivate(t *testing.T) {
	_, port := newFeeder(t, 1, 64)
	d, err := New(Config{Name: "rm1", Port: port, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	s := service.New("dump", "192.0.2.7:9200", nil)
	s.Token = []byte("dumper token 0123456789")
	d.Register(s)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	get := func(path, auth string) int {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, p := range []string{"/v1/files", "/v1/files/rm1-0.pcap"} {
		if code := get(p, ""); code != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %d", p, code)
		}
	}
	if code := get("/v1/files", "Bearer dumper token 0123456789"); code != http.StatusOK {
		t.Errorf("GET /v1/files with the token: %d", code)
	}
	if code := get("/v1/status", ""); code != http.StatusOK {
		t.Errorf("GET /v1/status: %d", code)
	}
}
