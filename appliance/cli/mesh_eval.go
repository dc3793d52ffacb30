package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/appliance/hostmesh"
	"github.com/rdma-appliance/appliance/internal/progress"
)

var meshEvalCmd = &Command{
	Name:    "eval",
	Summary: "evaluate Hostmesh in the fabric simulator, scored strictly: the top suspect must be the injected fault, any other alert is false",
	Usage:   "[--hosts 4,16] [--runs 20] [--types T,...] [--seed N] [--out DIR] [--json FILE] [--shard i/n]",
	Long: `For every cluster size (--hosts, machines of 8 RNICs on 8 rails, as many spines as machines up to 8,
25G links, web-search background traffic at 5% load) and fault type, --runs randomized runs in the
simulator: the real agent core probes on simulated UD packets, traces paths with TTL-limited probes that
the switches answer, and the analyzer judges six windows, the fault starting at a random time of the
fourth, on an element drawn at random. Fault types: link-flap, silent-drop, corrupt-link (a spine link),
dead-rnic, pfc-storm (an RNIC), cpu-overload (a host), congested-uplink (an ECMP collision on a rail
uplink), acl-deny (a switch ACL that makes an RNIC RDMA-unreachable), pfc-headroom (a switch short of
PFC headroom or without PFC, exposed by an incast), and none (fault-free).

Scoring: a run localizes its fault when the analyzer's top suspect across all kinds (RNIC, link, switch,
host), in the first window that alerts after the fault began, is the faulty element; every other alert
of every window is a false alert, counted per run and per hour of probing; a fault-free run passes only
without any alert. Detection time runs from the fault to the end of the first window naming it. Goals:
top-1 >= 95% per fault type, <= 0.1 false alerts per run, no alert in fault-free runs; the table's last
column says which are missed.

The simulated agents run 1000 times faster than the paper's: a 100 us interval, 20 ms window and 60 ms
hold, so a window holds the paper's number of probes; times are reported at the paper's scale. The probe
timeout is 5 ms, not 500 us: the simulated network runs in real time, and its queues under PFC delay
probes by up to about 2 ms, which a timeout (a drop) must stay well above, as the paper's 500 ms does.

Types: ` + strings.Join(hostmesh.FaultTypes, ", ") + `. The table is printed and, with --out,
written to DIR/hostmesh-eval.txt with every run in DIR/hostmesh-eval.json; --json FILE writes the
figures per cluster and fault type (runs, top1, false_alerts_per_run, false_alerts_per_hour,
detect_seconds).

--shard i/n runs only part i of n of the runs (a batch system's array jobs) and writes its rows
to DIR/hostmesh-eval-shard-i-of-n.json; 'appliance mesh merge' adds shards up to the table.`,
	Flags: meshEvalFlags,
}

type meshEvalOptions struct {
	runs                           int
	hosts, types, out, json, shard string
	seed                           uint64
	args                           []string
}

// maxEvalRuns keeps runs of different types from sharing seeds
// (hostmesh.RunSeed); maxEvalHosts bounds a cluster the simulator runs
// in reasonable time.
const (
	maxEvalRuns  = 100_000
	maxEvalHosts = 64
)

func meshEvalFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o meshEvalOptions
	fs.IntVar(&o.runs, "runs", 20, "runs per cluster size and fault type")
	fs.StringVar(&o.hosts, "hosts", "4,16", "cluster sizes: machines of 8 RNICs, comma-separated")
	fs.StringVar(&o.types, "types", strings.Join(hostmesh.FaultTypes, ","), "fault types")
	fs.Uint64Var(&o.seed, "seed", 1, "first seed")
	fs.StringVar(&o.out, "out", "", "directory for the table and the runs")
	fs.StringVar(&o.json, "json", "", "file for the figures per cluster and fault type")
	fs.StringVar(&o.shard, "shard", "", "run part i/n of the runs and write its rows for 'mesh merge'")
	return bind(&o, &o.args, runMeshEval)
}

// parseEvalHosts reads --hosts.
func parseEvalHosts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 2 || n > maxEvalHosts {
			return nil, Usagef("--hosts %q: want cluster sizes of 2 to %d machines, like 4,16", s, maxEvalHosts)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, Usagef("--hosts %q: want at least one cluster size, like 4,16", s)
	}
	return out, nil
}

// parseEvalTypes reads --types.
func parseEvalTypes(s string) ([]string, error) {
	var out []string
	for _, t := range strings.Split(s, ",") {
		if t = strings.TrimSpace(t); t == "" {
			continue
		}
		if !slices.Contains(hostmesh.FaultTypes, t) {
			return nil, Usagef("--types: unknown fault type %q (want some of %s)", t, strings.Join(hostmesh.FaultTypes, ", "))
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return nil, Usagef("--types %q: want at least one fault type of %s", s, strings.Join(hostmesh.FaultTypes, ", "))
	}
	return out, nil
}

func runMeshEval(ctx context.Context, env *Env, o meshEvalOptions) error {
	if len(o.args) > 0 {
		return Usagef("no arguments, got %q", o.args)
	}
	if o.runs < 1 || o.runs > maxEvalRuns {
		return Usagef("--runs %d: want 1 to %d", o.runs, maxEvalRuns)
	}
	hosts, err := parseEvalHosts(o.hosts)
	if err != nil {
		return err
	}
	ts, err := parseEvalTypes(o.types)
	if err != nil {
		return err
	}
	si, sn, err := parseShard(o.shard)
	if err != nil {
		return err
	}
	if o.shard != "" && o.out == "" {
		return Usagef("--shard needs --out for the shard's rows")
	}
	t0 := time.Now()
	m := progress.New(env.Stderr, progress.Options{Label: "mesh eval", Unit: "runs"})
	total := (o.runs*len(ts)*len(hosts) - si + sn - 1) / sn
	n := 0
	rows, all, err := hostmesh.EvalShard(ctx, hosts, ts, o.runs, o.seed, si, sn, func(r *hostmesh.Run) {
		n++
		mark := "ok"
		if !r.Correct || r.FalseAlerts > 0 {
			mark = fmt.Sprintf("MISS (top %s, %d false alerts)", r.Top, r.FalseAlerts)
		}
		m.Update(int64(n), int64(total), fmt.Sprintf("%dx8 %s seed %d %s", r.Machines, r.Fault, r.Seed, mark))
	})
	m.Finish()
	if err != nil {
		return err
	}
	if o.shard != "" {
		path, err := writeShard(o.out, "hostmesh-eval", si, sn, rows)
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "shard %d/%d: %d runs, rows written to %s\n", si, sn, len(all), path)
		return nil
	}
	return writeMeshEval(env, o.out, o.json, rows, all, fmt.Sprintf("%d runs in %s", len(all), time.Since(t0).Round(time.Second)))
}

// writeMeshEval prints the evaluation's table and misses and writes the
// table and every run to an out directory, the figures to a JSON file.
func writeMeshEval(env *Env, out, jsonFile string, rows []hostmesh.EvalRow, all []*hostmesh.Run, footer string) error {
	var tab bytes.Buffer
	hostmesh.WriteEvalTable(&tab, rows)
	fmt.Fprintln(&tab, footer)
	env.Stdout.Write(tab.Bytes())
	for _, r := range rows {
		for _, miss := range r.Misses {
			fmt.Fprintf(env.Stdout, "miss %dx8 %s: %s\n", r.Hosts, r.Fault, miss)
		}
	}
	if jsonFile != "" {
		var b bytes.Buffer
		if err := hostmesh.WriteEvalJSON(&b, rows); err != nil {
			return err
		}
		if err := os.WriteFile(jsonFile, b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	if out == "" {
		return nil
	}
	if _, err := writeOut(out, "hostmesh-eval.txt", tab.Bytes()); err != nil {
		return err
	}
	if all == nil {
		return nil
	}
	js, err := json.MarshalIndent(map[string]any{"rows": rows, "runs": all}, "", "  ")
	if err != nil {
		return err
	}
	_, err = writeOut(out, "hostmesh-eval.json", js)
	return err
}

var meshMergeCmd = &Command{
	Name:    "merge",
	Summary: "add up the shards of a Hostmesh evaluation into its table",
	Usage:   "[--out DIR] [--json FILE] hostmesh-eval-shard-*.json...",
	Long: "Reads the rows 'appliance mesh eval --shard i/n' wrote and prints the whole evaluation's table;\n" +
		"with --out, writes it to DIR/hostmesh-eval.txt, with --json the figures as 'mesh eval --json' does.",
	Flags: meshMergeFlags,
}

type meshMergeOptions struct {
	out, json string
	args      []string
}

func meshMergeFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o meshMergeOptions
	fs.StringVar(&o.out, "out", "", "directory for hostmesh-eval.txt")
	fs.StringVar(&o.json, "json", "", "file for the figures per cluster and fault type")
	return bind(&o, &o.args, runMeshMerge)
}

func runMeshMerge(ctx context.Context, env *Env, o meshMergeOptions) error {
	parts, err := readShards[hostmesh.EvalRow](o.args)
	if err != nil {
		return err
	}
	return writeMeshEval(env, o.out, o.json, hostmesh.MergeRows(parts...), nil, fmt.Sprintf("%d shards merged", len(parts)))
}
