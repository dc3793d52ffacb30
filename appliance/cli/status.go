package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/rdma-appliance/appliance/collector/dtacollector"
	"github.com/rdma-appliance/appliance/internal/service"
	"github.com/rdma-appliance/appliance/p4/dtatofino"
)

// defaultServices are the services' default listen addresses, looked up where
// each command defines it, in the order status prints them. `mesh analyze
// --serve` has no default and `mesh probe` listens on a free port by default,
// so theirs are the addresses the packaged units give them
// (packaging/systemd).
var defaultServices = []struct{ name, addr string }{
	{"inject", injectListen},
	{"dump", dumpListen},
	{"dta-collect", dtacollector.DefaultListen},
	{"dta-translate", "127.0.0.1:9310"}, // translator/dtatranslator's default
	{"dta-tofino", dtatofino.DefaultListen},
	{"mesh-analyze", "127.0.0.1:9400"},
	{"mesh-probe", "127.0.0.1:9410"},
}

// defaultNames are the defaults as the help text lists them.
func defaultNames() []string {
	var out []string
	for _, d := range defaultServices {
		out = append(out, d.name+" "+d.addr)
	}
	return out
}

// addrList is a repeatable --addr flag.
type addrList []string

func (a *addrList) String() string     { return strings.Join(*a, ",") }
func (a *addrList) Set(s string) error { *a = append(*a, s); return nil }

var statusCmd = &Command{
	Name:    "status",
	Summary: "query running services' /healthz and /metrics and print a table",
	Usage:   "[--addr [NAME=]ADDR ...] [--timeout 2s] [--json]",
	Long: `Without --addr, asks every service at its default listen address:
  ` + strings.Join(defaultNames(), "\n  ") + `
and shows the ones that do not answer as not running. With --addr (repeat it),
asks those addresses only, and one that does not answer is an error.

Columns: the service (the name it reports), its address, healthy (yes, or no
with the failing components from /healthz), version, uptime, and the metric
families and samples /metrics exposes. The exit status is 1 when a service
is unhealthy or an --addr does not answer.`,
	Flags: statusFlags,
}

type statusOptions struct {
	addrs   addrList
	timeout time.Duration
	json    bool
	args    []string
}

func statusFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o statusOptions
	fs.Var(&o.addrs, "addr", "a service's HTTP address, [NAME=]HOST:PORT (repeatable; default: every service's default address)")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Second, "how long to wait for each service")
	fs.BoolVar(&o.json, "json", false, "print JSON")
	return bind(&o, &o.args, runStatus)
}

func runStatus(ctx context.Context, env *Env, o statusOptions) error {
	if len(o.args) > 0 {
		return Usagef("status takes no arguments (use --addr)")
	}
	type target struct{ name, addr string }
	var ts []target
	explicit := len(o.addrs) > 0
	for _, a := range o.addrs {
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
	rows := make([]service.Probed, len(ts))
	var wg sync.WaitGroup
	for i, t := range ts {
		wg.Go(func() { rows[i] = service.Probe(ctx, t.name, t.addr, o.timeout) })
	}
	wg.Wait()
	var bad []string
	for _, r := range rows {
		if (r.Running && !r.Healthy) || (explicit && !r.Running) {
			bad = append(bad, r.Addr)
		}
	}
	if o.json {
		if err := writeJSON(env.Stdout, rows); err != nil {
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

func printStatus(w io.Writer, rows []service.Probed) {
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
