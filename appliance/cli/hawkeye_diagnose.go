package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/rdma-appliance/appliance/collector/hawkeyeanalyzer"
)

var hawkeyeDiagnoseCmd = &Command{
	Name:    "diagnose",
	Summary: "diagnose one incident's telemetry: anomaly type, ranked root causes, PFC spreading path, loops",
	Usage:   "[--json] [--dot FILE] [--svg FILE [--renderer auto|graphviz|native]] telemetry.json",
	Long: `Reads one incident's telemetry (the JSON of internal/hawkeyewire's Telemetry: the
victim, the topology as links, the switches' reports), builds the provenance graph of
Hawkeye's Algorithm 1 (port -> port edges from paused ports to the downstream queues
their traffic waits in, flow -> port edges by paused packets, port -> flow edges by
queue replay) and diagnoses it as Algorithm 2 does with the Table 2 signatures:
micro-burst incast PFC backpressure, PFC storm from host injection, initiator-in-loop
deadlock, initiator-out-of-loop deadlock (flow contention or host injection), normal
flow contention.

Prints the anomaly type, the root-cause flows ranked by contribution (or the
injecting host), the PFC spreading path from the initiator to the victim, the loops
found, the victim's hops, a confidence and how it was reached, and what the telemetry
lacked (switches that did not report, truncated reports, empty epochs): with gaps the
type is "unknown" rather than a guess. --dot writes the relevant part of the graph in
Graphviz's language. --svg draws it as SVG: with Graphviz's dot when it is installed,
and otherwise with the built-in renderer (a layered drawing, the victim on the left and
the root causes on the right, paused ports red, the PFC spreading path dark red, loops
purple, root causes ranked; self-contained and the same bytes for the same input);
--renderer graphviz insists on dot, --renderer native never runs it. The file is read
strictly: a field the format does not have, or one it requires that is missing, is an
error naming it, not a diagnosis of what was understood. Exits 0 whatever the diagnosis;
1 when the file cannot be read, is not telemetry as the format has it, or an SVG cannot
be drawn as asked.`,
	Flags: hawkeyeDiagnoseFlags,
}

type hawkeyeDiagnoseOptions struct {
	json               bool
	dot, svg, renderer string
	args               []string
}

func hawkeyeDiagnoseFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o hawkeyeDiagnoseOptions
	fs.BoolVar(&o.json, "json", false, "print the diagnosis as JSON")
	fs.StringVar(&o.dot, "dot", "", "write the provenance graph as DOT to FILE")
	fs.StringVar(&o.svg, "svg", "", "write the provenance graph as SVG to FILE (Graphviz's dot when installed, else the built-in renderer)")
	fs.StringVar(&o.renderer, "renderer", "auto", "how --svg draws: auto (dot when installed, else native), graphviz, native")
	return bind(&o, &o.args, runHawkeyeDiagnose)
}

func runHawkeyeDiagnose(ctx context.Context, env *Env, o hawkeyeDiagnoseOptions) error {
	if len(o.args) != 1 {
		return Usagef("want one telemetry file")
	}
	switch o.renderer {
	case "auto", "graphviz", "native":
	default:
		return Usagef("--renderer %q: auto, graphviz or native", o.renderer)
	}
	f, err := os.Open(o.args[0])
	if err != nil {
		return err
	}
	tel, err := hawkeyeanalyzer.DecodeStrict(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", o.args[0], err)
	}
	d := hawkeyeanalyzer.Diagnose(tel, hawkeyeanalyzer.Options{})
	if o.json {
		err = d.WriteJSON(env.Stdout)
	} else {
		err = d.WriteText(env.Stdout)
	}
	if err != nil || (o.dot == "" && o.svg == "") {
		return err
	}
	dot := d.DOT()
	if o.dot != "" {
		if err := os.WriteFile(o.dot, dot, 0o644); err != nil {
			return err
		}
	}
	if o.svg == "" {
		return nil
	}
	svg, err := diagnosisSVG(ctx, env, d, dot, o.renderer)
	if err != nil {
		return err
	}
	return os.WriteFile(o.svg, svg, 0o644)
}

// diagnosisSVG draws the provenance graph as renderer says: Graphviz's
// layout is the better one when dot is installed, the built-in renderer
// works everywhere (appliance hosts rarely have Graphviz).
func diagnosisSVG(ctx context.Context, env *Env, d *hawkeyeanalyzer.Diagnosis, dot []byte, renderer string) ([]byte, error) {
	if renderer == "native" {
		return d.GraphSVG(), nil
	}
	svg, err := hawkeyeanalyzer.SVG(ctx, dot)
	switch {
	case errors.Is(err, hawkeyeanalyzer.ErrNoGraphviz) && renderer == "auto":
		env.Log.Debug("graphviz not installed: built-in SVG renderer")
		return d.GraphSVG(), nil
	case err != nil:
		return nil, fmt.Errorf("--svg: %w", err)
	}
	return svg, nil
}
