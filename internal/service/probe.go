package service

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Probed is what a running service says of itself through /healthz and
// /metrics (a row of `appliance status`).
type Probed struct {
	Name     string            `json:"name"` // what was asked for (the default's name, or NAME= of --addr)
	Addr     string            `json:"addr"`
	Service  string            `json:"service,omitempty"` // the name the service reports
	Running  bool              `json:"running"`
	Healthy  bool              `json:"healthy"`
	Version  string            `json:"version,omitempty"`
	Uptime   string            `json:"uptime,omitempty"`
	Failing  []string          `json:"failing,omitempty"`
	Checks   map[string]string `json:"checks,omitempty"`
	Samples  int               `json:"metric_samples"`
	Families int               `json:"metric_families"`
	Error    string            `json:"error,omitempty"`
}

// Probe asks the service at addr, which the caller calls name, for
// /healthz and /metrics (Client.Get: a failing /healthz answers 503 with
// the body that names the failing components), waiting timeout for each.
func Probe(ctx context.Context, name, addr string, timeout time.Duration) Probed {
	st := Probed{Name: name, Addr: addr}
	c := NewClient(addr)
	c.HTTP.Timeout = timeout
	get := func(path string) (int, []byte, error) { return c.Get(ctx, path) }
	code, body, err := get("/healthz")
	if err != nil {
		st.Error = shortNetErr(err)
		return st
	}
	st.Running = true
	var h Health
	if jerr := json.Unmarshal(body, &h); jerr != nil {
		st.Error = fmt.Sprintf("/healthz answered %d, not a health document", code)
		return st
	}
	st.Service, st.Version, st.Uptime, st.Checks = h.Service, h.Version, h.Uptime, h.Checks
	st.Failing = h.Failing
	st.Healthy = code == http.StatusOK && h.Status == "ok"
	if code, body, err = get("/metrics"); err != nil || code != http.StatusOK {
		if err == nil {
			err = fmt.Errorf("answered %d", code)
		}
		st.Error = "/metrics: " + shortNetErr(err)
		return st
	}
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "# TYPE "):
			st.Families++
		case line != "" && !strings.HasPrefix(line, "#"):
			st.Samples++
		}
	}
	return st
}

// shortNetErr keeps the end of a net/http error ("connection refused"),
// which is what tells an operator why.
func shortNetErr(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 && strings.Contains(s, "dial") {
		return s[i+2:]
	}
	return s
}
