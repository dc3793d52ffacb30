package dashboard

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/internal/service"
)

// maxRates is how many counter rates a service's row shows: the
// busiest, which say what it is doing.
const maxRates = 6

// scraped is one query of a service: /healthz and /metrics.
type scraped struct {
	at       time.Time
	err      error
	health   service.Health
	healthy  bool
	counters map[string]float64 // series ("name{labels}") -> value
	samples  int
}

// liveState is what the dashboard knows of a target: the last query,
// and the rates from the one before.
type liveState struct {
	last *scraped
	row  Service
}

func (st *liveState) update(t Target, sc *scraped) {
	row := Service{Name: t.Name, Kind: "service", Addr: t.Addr}
	switch {
	case sc.err != nil && sc.health.Service == "":
		row.Status, row.Detail = "down", shortNetErr(sc.err)
	default:
		if sc.health.Service != "" && sc.health.Service != t.Name {
			row.Name = t.Name + " (" + sc.health.Service + ")"
			if t.Name == "" {
				row.Name = sc.health.Service
			}
		}
		row.Version, row.Uptime = sc.health.Version, sc.health.Uptime
		row.Status, row.OK = "healthy", sc.healthy
		if !sc.healthy {
			row.Status = "failing"
			var parts []string
			for _, f := range sc.health.Failing {
				parts = append(parts, f+": "+sc.health.Checks[f])
			}
			row.Detail = strings.Join(parts, "; ")
		}
		if sc.err != nil {
			row.Detail = strings.TrimPrefix(row.Detail+"; "+sc.err.Error(), "; ")
		}
		if st.last != nil && st.last.err == nil && sc.err == nil {
			row.Figures = rates(st.last, sc)
		}
		if row.Figures == nil && sc.err == nil {
			row.Figures = []Figure{{"metric samples", strconv.Itoa(sc.samples)}}
		}
	}
	st.row = row
	if sc.err == nil {
		st.last = sc
	}
}

// rates are the counters' per-second rates between two queries, the
// busiest first; counters that went back (a restart) are left out.
func rates(a, b *scraped) []Figure {
	dt := b.at.Sub(a.at).Seconds()
	if dt <= 0 {
		return nil
	}
	type rate struct {
		name string
		v    float64
	}
	var rs []rate
	for k, v := range b.counters {
		old, ok := a.counters[k]
		if !ok || v < old {
			continue
		}
		rs = append(rs, rate{k, (v - old) / dt})
	}
	slices.SortFunc(rs, func(x, y rate) int {
		if c := cmp.Compare(y.v, x.v); c != 0 {
			return c
		}
		return cmp.Compare(x.name, y.name)
	})
	out := []Figure{}
	for _, r := range rs {
		if len(out) == maxRates || (r.v == 0 && len(out) > 0) {
			break
		}
		out = append(out, Figure{r.name, formatRate(r.v)})
	}
	return out
}

func formatRate(v float64) string {
	switch {
	case v >= 1e9:
		return strconv.FormatFloat(v/1e9, 'f', 2, 64) + "G/s"
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', 2, 64) + "M/s"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', 2, 64) + "k/s"
	}
	return strconv.FormatFloat(v, 'f', 2, 64) + "/s"
}

// scrape asks one service for /healthz and /metrics, as `appliance
// status` does: a failing /healthz answers 503 with the document that
// names the failing components.
func scrape(ctx context.Context, t Target, timeout time.Duration) *scraped {
	sc := &scraped{at: time.Now()}
	c := service.NewClient(t.Addr)
	c.HTTP.Timeout = timeout
	get := func(path string) (int, []byte, error) { return c.Get(ctx, path) }
	code, body, err := get("/healthz")
	if err != nil {
		sc.err = fmt.Errorf("/healthz: %w", err)
		return sc
	}
	if err := json.Unmarshal(body, &sc.health); err != nil || sc.health.Service == "" {
		sc.err = fmt.Errorf("/healthz answered %d, not a health document", code)
		sc.health = service.Health{}
		return sc
	}
	sc.healthy = code == http.StatusOK && sc.health.Status == "ok"
	code, body, err = get("/metrics")
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("answered %d", code)
	}
	if err != nil {
		sc.err = fmt.Errorf("/metrics: %w", err)
		return sc
	}
	sc.counters, sc.samples = parseCounters(string(body))
	return sc
}

// parseCounters reads the Prometheus text format: the samples of the
// service's counter families, by series, and how many samples there are
// in all.
func parseCounters(text string) (map[string]float64, int) {
	counters := map[string]float64{}
	types := map[string]string{}
	samples := 0
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			if f := strings.Fields(rest); len(f) == 2 {
				types[f[0]] = f[1]
			}
			continue
		}
		if line == "" || line[0] == '#' {
			continue
		}
		series, value, ok := splitSample(line)
		if !ok {
			continue
		}
		samples++
		name := series
		if i := strings.IndexByte(series, '{'); i >= 0 {
			name = series[:i]
		}
		if types[name] != "counter" && types[strings.TrimSuffix(name, "_total")] != "counter" {
			continue
		}
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			// The Go runtime's and the process's counters (bytes
			// allocated, network bytes) are every service's busiest;
			// a row shows what the service itself is doing.
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		counters[series] = v
	}
	return counters, samples
}

// splitSample splits "name{labels} value [timestamp]"; label values may
// hold spaces and braces inside quotes.
func splitSample(line string) (series, value string, ok bool) {
	end := strings.IndexAny(line, " {")
	if end < 0 {
		return "", "", false
	}
	if line[end] == '{' {
		closing := -1
		inQuote, esc := false, false
	scan:
		for i := end + 1; i < len(line); i++ {
			switch c := line[i]; {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inQuote = !inQuote
			case c == '}' && !inQuote:
				closing = i
				break scan
			}
		}
		if closing < 0 {
			return "", "", false // unclosed labels
		}
		end = closing + 1
	}
	f := strings.Fields(line[end:])
	if len(f) == 0 {
		return "", "", false
	}
	return line[:end], f[0], true
}

// shortNetErr keeps what tells an operator why a service did not answer
// ("connection refused"), not the whole request.
func shortNetErr(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 && strings.Contains(s, "dial") {
		return s[i+2:]
	}
	return s
}
