package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/rdma-appliance/appliance/internal/service"
)

// defaultServices are the services' default listen addresses, looked up where
// each command defines it, in the order status prints them. `mesh analyze
// --serve` has no default and `mesh probe` listens on a free port by default,
// so theirs are the addresses the packaged units give them
// (packaging/systemd).
var defaultServices = []struct{ name, addr string }{
	{"inject", injectListen},
	{"dump", dumpListen},
	{"dta-collect", "127.0.0.1:9300"},   // collector/dtacollector.DefaultListen
	{"dta-translate", "127.0.0.1:9310"}, // translator/dtatranslator's default
	{"mesh-analyze", "127.0.0.1:9400"},
	{"mesh-probe", "127.0.0.1:9410"},
}

// addrList is a repeatable --addr flag.
type addrList []string

func (a *addrList) String() string     { return strings.Join(*a, ",") }
func (a *addrList) Set(s string) error { *a = append(*a, s); return nil }

// serviceStatus is one row of `appliance status`.
type serviceStatus struct {
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

// queryService asks one service for /healthz and /metrics (Client.Get:
// a failing /healthz answers 503 with the body that names the failing
// components).
func queryService(ctx context.Context, name, addr string, timeout time.Duration) serviceStatus {
	st := serviceStatus{Name: name, Addr: addr}
	c := service.NewClient(addr)
	c.HTTP.Timeout = timeout
	get := func(path string) (int, []byte, error) { return c.Get(ctx, path) }
	code, body, err := get("/healthz")
	if err != nil {
		st.Error = shortNetErr(err)
		return st
	}
	st.Running = true
	var h service.Health
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

func init() {
	var defaults []string
	for _, d := range defaultServices {
		defaults = append(defaults, d.name+" "+d.addr)
	}
	register(&Command{
		Name:    "status",
		Summary: "query running services' /healthz and /metrics and print a table",
		Usage:   "[--addr [NAME=]ADDR ...] [--timeout 2s] [--json]",
		Long: `Without --addr, asks every service at its default listen address:
  ` + strings.Join(defaults, "\n  ") + `
and shows the ones that do not answer as not running. With --addr (repeat it),
asks those addresses only, and one that does not answer is an error.

Columns: the service (the name it reports), its address, healthy (yes, or no
with the failing components from /healthz), version, uptime, and the metric
families and samples /metrics exposes. The exit status is 1 when a service
is unhealthy or an --addr does not answer.`,
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			var addrs addrList
			fs.Var(&addrs, "addr", "a service's HTTP address, [NAME=]HOST:PORT (repeatable; default: every service's default address)")
			timeout := fs.Duration("timeout", 2*time.Second, "how long to wait for each service")
			asJSON := fs.Bool("json", false, "print JSON")
			return func(ctx context.Context, env *Env, args []string) error {
				if len(args) > 0 {
					return Usagef("status takes no arguments (use --addr)")
				}
				type target struct{ name, addr string }
				var ts []target
				explicit := len(addrs) > 0
				for _, a := range addrs {
					name, addr, ok := strings.Cut(a, "=")
					if !ok {
						name, addr = "", a
					}
					if addr == "" {
						return Usagef("--addr %q: no address", a)
					}
					ts = append(ts, target{name, addr})
				}
				if !explicit {
					for _, d := range defaultServices {
						ts = append(ts, target{d.name, d.addr})
					}
				}
				rows := make([]serviceStatus, len(ts))
				var wg sync.WaitGroup
				for i, t := range ts {
					wg.Go(func() { rows[i] = queryService(ctx, t.name, t.addr, *timeout) })
				}
				wg.Wait()
				var bad []string
				for _, r := range rows {
					if (r.Running && !r.Healthy) || (explicit && !r.Running) {
						bad = append(bad, r.Addr)
					}
				}
				if *asJSON {
					enc := json.NewEncoder(env.Stdout)
					enc.SetIndent("", "  ")
					if err := enc.Encode(rows); err != nil {
						return err
					}
				} else {
					printStatus(env.Stdout, rows)
				}
				if len(bad) > 0 {
					return fmt.Errorf("unhealthy or unreachable: %s", strings.Join(bad, ", "))
				}
				return nil
			}
		},
	})
}

func printStatus(w io.Writer, rows []serviceStatus) {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tADDR\tHEALTHY\tVERSION\tUPTIME\tMETRICS\tFAILING / ERROR")
	for _, r := range rows {
		name := r.Service
		if name == "" {
			name = r.Name
		}
		if name == "" {
			name = "?"
		}
		healthy, version, uptime, metrics, why := "no", "-", "-", "-", ""
		switch {
		case !r.Running:
			healthy, why = "not running", r.Error
		default:
			if r.Healthy {
				healthy = "yes"
			}
			version, uptime = dash(r.Version), dash(r.Uptime)
			metrics = fmt.Sprintf("%d families, %d samples", r.Families, r.Samples)
			var parts []string
			for _, f := range r.Failing {
				parts = append(parts, f+": "+r.Checks[f])
			}
			if r.Error != "" {
				parts = append(parts, r.Error)
			}
			why = strings.Join(parts, "; ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, r.Addr, healthy, version, uptime, metrics, dash(why))
	}
	tw.Flush()
}
