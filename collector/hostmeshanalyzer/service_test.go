package hostmeshanalyzer

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/internal/service"
)

// TestForgedResults: an analyzer listening off loopback takes results
// only from agents with the token: a peer without it (or a web page's
// text/plain POST) cannot feed it forged probes.
func TestForgedResults(t *testing.T) {
	a := NewAnalyzer(Config{})
	h := service.New("mesh-analyze", "192.0.2.10:9400", slog.New(slog.DiscardHandler))
	h.Token = []byte("mesh analyzer token 0123")
	NewService(a, h.Log).Register(h)
	srv := httptest.NewServer(h.Handler())
	defer srv.Close()
	post := func(ctype, auth string) int {
		req, _ := http.NewRequest("POST", srv.URL+ResultsPath,
			strings.NewReader(`{"host":"h1","results":[{"host":"h1","src":"mlx5_0","dst":"mlx5_1"}]}`))
		req.Header.Set("Content-Type", ctype)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("application/json", ""); code != http.StatusUnauthorized {
		t.Fatalf("forged batch without the token: %d", code)
	}
	if code := post("text/plain", "Bearer mesh analyzer token 0123"); code != http.StatusUnsupportedMediaType {
		t.Fatalf("text/plain batch: %d", code)
	}
	if c := a.counts(); c[0] != 0 || c[1] != 0 {
		t.Fatalf("the analyzer took refused batches: %v", c)
	}
	if code := post("application/json", "Bearer mesh analyzer token 0123"); code != http.StatusOK {
		t.Fatalf("the agent's batch: %d", code)
	}
	if c := a.counts(); c[0] != 1 {
		t.Fatalf("batches %v", c)
	}
}
