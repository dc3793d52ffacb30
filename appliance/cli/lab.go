package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/rdma-appliance/appliance/appliance/dashboard"
	"github.com/rdma-appliance/appliance/appliance/lab"
)

var labCmd = &Command{
	Name:    "lab",
	Summary: "run the in-process testbed on its embedded default (what `make run` runs)",
	Usage:   "[--out DIR] [--config FILE] [--print-default] [--netns] [--serve ADDR [--services NAME=ADDR,...]]",
	Long: `The lab wires the appliance's software twins together on this machine and runs
each system's stage, then prints one summary table and writes its artifacts
(captures, summary.json) under --out. Today's stages:
  wire   RoCEv2 packets of every opcode class (RC, UC, UD, CNP; IPv4 and IPv6)
         cross an in-process ring link between pinned workers, are checked
         (parse, ICRC) and captured to wire.pcap.
  verbs  two software RNICs on an in-process link: perftest's WRITE bandwidth
         and SEND/READ latency, a WRITE/READ/ATOMIC/SEND exchange captured to
         verbs.pcap and checked frame by frame (and by tshark), and a WRITE
         run over a lossy link that go-back-N must complete.
  lumina requester and responder soft RNICs through the software event
         injector (drop, ECN, corrupt intents), every RoCE packet mirrored to
         a dumper pool; the dumps are merged into lumina.pcap and checked
         (integrity, events, retransmissions, CNPs, ICRC drops), then a few
         rounds of the per-packet load-balancing experiment (Fig 7b) on the
         twin, the dumpers at the cost measured on this machine.
  lumina-tests  ready-made Lumina test files (fast-retransmission sweep,
         timeout retries, CNP pacing) run as 'lumina run --lab' runs them,
         analyzed, with an HTML report each under lumina-tests/.
  dta    reporters -> the software translator -> a soft-RNIC collector, every
         primitive checked through the collector's queries.
  fabric the fabric simulator on an incast over background traffic, twice.
  hawkeye  traces of each anomaly type through the agent, telemetry, polling
         and the provenance analyzer; one diagnosis per type kept with its
         provenance graph in hawkeye/ (JSON, DOT, SVG) and report.html.
  tuning ByteTuning's annealing against the baseline watermarks.
  hostmesh  a Hostmesh round in the simulator that must name a flapping link.
report.html holds the summary and each stage's plots, tables and graphs.

With --serve ADDR the lab also serves its dashboard on the shared HTTP
plumbing (/metrics, /healthz) at ADDR: http://ADDR/dashboard is one
self-contained page (no external assets, reloads itself) with the stages as
services and their key figures, the Hawkeye diagnoses with their provenance
graphs, the Hostmesh SLA percentiles and alerts, the DTA list rates and the
finished Lumina runs; /dashboard.json has the same data and
/dashboard/graph/N the N-th graph as SVG. The page fills in as the stages
finish; after them the lab keeps serving until SIGTERM or Ctrl-C, then exits
with the lab's status. --services NAME=ADDR,... adds running services (an
appliance dta collect, mesh analyze...) that the dashboard queries every few
seconds for their health and counter rates, next to the lab's own.

With --netns (root) the lumina, lumina-tests and dta stages run their
packet paths across network namespaces: every link a veth pair, every port
AF_PACKET (the soft RNICs, the injector, the dumpers, the translator, the
collector and the reporters each in a namespace of their own), as they would
between machines. The other stages stay in-process: wire and verbs measure
the parser and the soft RNIC themselves, and fabric, hawkeye, tuning and
hostmesh run in the simulator.

The exit status is 0 only when every stage passes.`,
	Flags: labFlags,
}

type labOptions struct {
	out, config, serve, services string
	printDefault, netns          bool
	args                         []string
}

func labFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o labOptions
	fs.StringVar(&o.out, "out", "lab-out", "directory for the lab's artifacts")
	fs.StringVar(&o.config, "config", "", "lab configuration YAML (default: the embedded one)")
	fs.BoolVar(&o.printDefault, "print-default", false, "print the embedded default configuration and exit")
	fs.StringVar(&o.serve, "serve", "", "serve the dashboard at ADDR (HOST:PORT) during the run and after it, until SIGTERM")
	fs.StringVar(&o.services, "services", "", "with --serve: running services the dashboard queries live, NAME=ADDR[,NAME=ADDR...]")
	fs.BoolVar(&o.netns, "netns", false, "run the lumina, lumina-tests and dta packet paths over veth pairs between network namespaces (root)")
	return bind(&o, &o.args, runLab)
}

func runLab(ctx context.Context, env *Env, o labOptions) error {
	if len(o.args) > 0 {
		return Usagef("lab takes no arguments")
	}
	if o.printDefault {
		_, err := env.Stdout.Write(lab.DefaultYAML())
		return err
	}
	targets, err := parseTargets(o.services)
	if err != nil {
		return err
	}
	if len(targets) > 0 && o.serve == "" {
		return Usagef("--services needs --serve")
	}
	s, err := lab.LoadSpec(o.config)
	if err != nil {
		return err
	}
	dir, err := filepath.Abs(o.out)
	if err != nil {
		return err
	}
	l := &lab.Lab{Spec: s, OutDir: dir, Log: env.Log, Progress: env.Stderr, Netns: o.netns}
	var wait func() error
	if o.serve != "" {
		addr, w, err := l.StartDashboard(ctx, lab.DashboardOptions{Addr: o.serve, Targets: targets, Log: env.Log})
		if err != nil || w == nil {
			return err
		}
		wait = w
		fmt.Fprintf(env.Stderr, "lab: dashboard at http://%s/dashboard\n", addr)
	}
	rep, err := l.Run(ctx)
	if rep != nil {
		fmt.Fprintln(env.Stdout)
		rep.WriteSummary(env.Stdout)
		fmt.Fprintf(env.Stdout, "\nartifacts: %s\n", dir)
	}
	if wait != nil {
		if err == nil {
			fmt.Fprintf(env.Stdout, "dashboard: serving until SIGTERM or Ctrl-C\n")
		}
		// The context ends with SIGTERM (or with the run's error); then
		// the dashboard drains and stops.
		<-ctx.Done()
		if serr := wait(); serr != nil {
			return serr
		}
	}
	if err != nil {
		return err
	}
	if !rep.Pass() {
		return errors.New("some lab stages failed (see the table above)")
	}
	return nil
}

// parseTargets reads --services: NAME=ADDR pairs, comma separated (a
// bare ADDR is named after itself).
func parseTargets(s string) ([]dashboard.Target, error) {
	var out []dashboard.Target
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, addr, ok := strings.Cut(part, "=")
		if !ok {
			name, addr = part, part
		}
		if addr == "" || name == "" {
			return nil, Usagef("--services %q: want NAME=HOST:PORT", part)
		}
		out = append(out, dashboard.Target{Name: name, Addr: addr})
	}
	return out, nil
}
