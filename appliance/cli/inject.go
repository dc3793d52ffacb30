package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/service"
	"github.com/rdma-appliance/appliance/p4/luminatofino"
	"github.com/rdma-appliance/appliance/translator/inject"
)

const injectListen = inject.DefaultListen

var injectCmd = &Command{
	Name:    "inject",
	Summary: "Lumina's event injector: the software middlebox, its compiled entries, the Tofino script",
	Sub:     []*Command{injectRunCmd, injectTofinoCmd, injectCompileCmd, injectBfrtCmd},
}

var injectRunCmd = &Command{
	Name:    "run",
	Summary: "run the software injector on packet ports, controlled over HTTP",
	Usage:   "-f injector.yml [flags]",
	Long: `Forwards between the traffic ports (static routes, proxy ARP), mirrors every RoCE
packet with Lumina's metadata to the mirror ports (weighted round-robin, or flow hash),
and drops, ECN-marks or corrupts the packets the loaded intents name. Intents and the
traffic generator's metadata arrive per test:

  POST /v1/load     {"intents": [...], "connections": [...], "geometry": {...}, "reset": true}
  GET  /v1/entries  the compiled entries with hit counts
  GET  /v1/stats    per-port counters, RoCE packets received, copies mirrored
  POST /v1/reset    zero the counters and the mirror sequence
  GET  /metrics, /healthz

SIGHUP (systemctl reload) re-reads the file and applies its routes, mirror weights,
balance, mirror-snap, rewrite-udp-dst-port and dec-ttl between two bursts; a changed port,
core, burst, pool, iter-mode or listen address needs a restart, and such a file is not
applied at all (the log says which key).

The file's keys: listen, iter-mode (paper|p4), balance (wrr|flow-hash|ingress-port),
rewrite-udp-dst-port, mirror-snap, dec-ttl, core, burst, pool, ports [{name, role
traffic|mirror, port DRIVER:DEV, queues, addrs, weight}], routes [{prefix, port, mac}].`,
	Flags: injectRunFlags,
}

type injectRunOptions struct {
	file, listen string
	core         int
	args         []string
}

func injectRunFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o injectRunOptions
	fs.StringVar(&o.file, "f", "", "injector file (YAML)")
	fs.StringVar(&o.listen, "listen", "", "HTTP control address (default: the file's listen, else "+injectListen+")")
	fs.IntVar(&o.core, "core", -2, "pin the pipeline loop to this core (default: the file's core; -1 unpinned)")
	return bind(&o, &o.args, runInjectRun)
}

func runInjectRun(ctx context.Context, env *Env, o injectRunOptions) error {
	if len(o.args) > 0 || o.file == "" {
		return Usagef("want -f injector.yml and no arguments")
	}
	// SIGHUP reloads the file with the same overrides.
	load := func() (inject.Spec, error) {
		s, err := inject.LoadSpec(o.file)
		if err != nil {
			return s, err
		}
		if o.listen != "" {
			s.Listen = o.listen
		}
		if o.core != -2 {
			s.Core = &o.core
		}
		return s, nil
	}
	s, err := load()
	if err != nil {
		return err
	}
	st, err := inject.Run(ctx, s, inject.RunOptions{Log: env.Log, Pin: pinClaimed, Reload: load})
	if st != nil {
		fmt.Fprintf(env.Stdout, "injector: %d RoCE packets received, %d copies mirrored\n", st.RxRoCE, st.Mirrored)
	}
	return err
}

var injectTofinoCmd = &Command{
	Name:    "tofino",
	Summary: "serve the injector's control API for a Tofino: loads run bfshell with the rendered script",
	Usage:   "-f injector.yml --sde PATH [--listen ADDR]",
	Long: `Runs on the switch (or where bfshell reaches it) and answers the same HTTP API as
'inject run', so 'lumina run' and the traffic generator drive a Tofino the way they
drive the software injector: POST /v1/load renders the test's bfrt_python script from
the file's Tofino keys and runs '$SDE/run_bfshell.sh -b' with it; GET /v1/stats runs
the counter script and returns the per-port counters and the mirror sequence; GET
/v1/entries lists the entries (the switch does not count hits per entry). Start
switchd with p4/luminatofino/injector.p4 compiled by bf-p4c first.`,
	Flags: injectTofinoFlags,
}

type injectTofinoOptions struct {
	file, sde, listen string
	args              []string
}

func injectTofinoFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o injectTofinoOptions
	fs.StringVar(&o.file, "f", "", "injector file (YAML) with the Tofino keys")
	fs.StringVar(&o.sde, "sde", os.Getenv("SDE"), "the SDE's directory (default $SDE)")
	fs.StringVar(&o.listen, "listen", "", "HTTP control address (default: the file's listen, else "+injectListen+")")
	return bind(&o, &o.args, runInjectTofino)
}

func runInjectTofino(ctx context.Context, env *Env, o injectTofinoOptions) error {
	if len(o.args) > 0 || o.file == "" || o.sde == "" {
		return Usagef("want -f injector.yml and --sde PATH (or $SDE)")
	}
	s, err := inject.LoadSpec(o.file)
	if err != nil {
		return err
	}
	addr := o.listen
	if addr == "" {
		addr = s.Listen
	}
	if addr == "" {
		addr = injectListen
	}
	svc := service.New("inject-tofino", addr, env.Log)
	(&luminatofino.Controller{Spec: s, Bfshell: luminatofino.DefaultBfshell(o.sde)}).Register(svc)
	return svc.Run(ctx)
}

var injectCompileCmd = &Command{
	Name:    "compile",
	Summary: "compile intents and runtime metadata into the injector's match entries",
	Usage:   "--load load.json [--json] [--iter-mode paper|p4]",
	Long: `Reads a load request (the body of POST /v1/load: intents, connections, geometry) and
prints the exact-match entries {src IP, dst IP, dst QPN, PSN, ITER} -> event that the
software injector and the Tofino program install for it. A request that names a QP or
PSN the test does not have is rejected with the reason.`,
	Flags: injectCompileFlags,
}

type injectCompileOptions struct {
	load string
	json bool
	args []string
}

func injectCompileFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o injectCompileOptions
	fs.StringVar(&o.load, "load", "", "load request (JSON); - for stdin")
	fs.BoolVar(&o.json, "json", false, "print JSON")
	return bind(&o, &o.args, runInjectCompile)
}

func runInjectCompile(ctx context.Context, env *Env, o injectCompileOptions) error {
	if len(o.args) > 0 || o.load == "" {
		return Usagef("want --load FILE and no arguments")
	}
	req, err := readLoad(o.load)
	if err != nil {
		return err
	}
	es, err := intent.Compile(req.Intents, req.Conns, req.Geometry,
		intent.Options{SendConns: req.SendConns, OneBased: req.OneBased})
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(env.Stdout, es)
	}
	tw := tabwriter.NewWriter(env.Stdout, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tENTRY")
	for i, e := range es {
		fmt.Fprintf(tw, "%d\t%v\n", i, e)
	}
	return tw.Flush()
}

var injectBfrtCmd = &Command{
	Name:    "bfrt",
	Summary: "render the Tofino injector's bfrt_python script (or its counter script) for bfshell -b",
	Usage:   "-f injector.yml --load load.json [--counters] [-o FILE]",
	Long: `Turns the injector file's Tofino keys (front-panel or dev-port, speed, fec, autoneg, mac)
and a load request into the bfrt_python script that sets up p4/luminatofino/injector.p4 on a
Tofino: ports, routes and proxy ARP, mirror sessions and the weighted round-robin,
ITER initial state, event entries. --counters renders the script that prints the
per-port counters instead (parse its output with the orchestrator).
Run it with: bfshell -b FILE`,
	Flags: injectBfrtFlags,
}

type injectBfrtOptions struct {
	file, load, out string
	counters        bool
	args            []string
}

func injectBfrtFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o injectBfrtOptions
	fs.StringVar(&o.file, "f", "", "injector file (YAML)")
	fs.StringVar(&o.load, "load", "", "load request (JSON); - for stdin")
	fs.BoolVar(&o.counters, "counters", false, "render the counter-reading script")
	fs.StringVar(&o.out, "o", "", "write the script here instead of stdout")
	return bind(&o, &o.args, runInjectBfrt)
}

func runInjectBfrt(ctx context.Context, env *Env, o injectBfrtOptions) error {
	if len(o.args) > 0 || o.file == "" || o.load == "" {
		return Usagef("want -f injector.yml --load load.json")
	}
	s, err := inject.LoadSpec(o.file)
	if err != nil {
		return err
	}
	req, err := readLoad(o.load)
	if err != nil {
		return err
	}
	p, err := luminatofino.FromSpec(s, req)
	if err != nil {
		return err
	}
	var script string
	if o.counters {
		script, err = p.CounterScript()
	} else {
		script, err = p.Script()
	}
	if err != nil {
		return err
	}
	if o.out == "" {
		_, err = io.WriteString(env.Stdout, script)
		return err
	}
	return os.WriteFile(o.out, []byte(script), 0o644)
}

// readLoad reads a load request, strictly: unknown fields are errors.
func readLoad(path string) (inject.LoadRequest, error) {
	var r io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return inject.LoadRequest{}, err
		}
		defer f.Close()
		r = f
	}
	var req inject.LoadRequest
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf("%s: %w", path, err)
	}
	return req, nil
}
