package cli

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/rdma-appliance/appliance/appliance/lumina"
	"github.com/rdma-appliance/appliance/collector/luminaanalyzer"
	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/service"
)

// luminaCmd is `appliance lumina`.
var luminaCmd = &Command{
	Name:    "lumina",
	Summary: "Lumina: run RNIC tests from Lumina's test files, analyse their traces",
	Sub:     []*Command{luminaRunCmd, luminaAnalyzeCmd, luminaFuzzCmd, luminaPaperCmd, luminaTrafficgenCmd},
}

var luminaRunCmd = &Command{
	Name:    "run",
	Summary: "run a Lumina test file (Lumina's own YAML) and analyse its traces",
	Usage:   "-f test.yml|--ready NAME --lab [--iter-mode paper|p4] [--result-path DIR] [--json]",
	Long: `Reads a Lumina test file unchanged (local-workspace, result-path, aggregate-pcap-filename,
rewrite-udp-dst-port, num-repeats, switch, requester, responder, requester-mirror,
responder-mirror, traffic with data-pkt-events), validates it as Lumina does, and runs
it num-repeats times. Each repeat lands in result-path/<timestamp>/<repeat>/: the
dumpers' files (dumps/), the merged trace (aggregate-pcap-filename), meta.json (the
connections' metadata, intents and entries with hits, injector and RNIC counters),
trafficgen.json, integrity.json and the analyzers' results. Each repeat is also written
in Lumina's own layout in result-path/<repeat>/ (the test file, pcap-result/,
switch-result/ with the message and state snapshots, rdma-result/ with the requester's
and responder's counters at start and finish, ethtool -S included), so Lumina's
lumina-analyzer reads it unchanged; result-path/0, 1, ... of an earlier run are removed
first, as Lumina's orchestrator does.

Without --lab the test runs on the machines it names: the software injector
('appliance inject run') answers on switch.control-ip:listen-port, each dumper
('appliance dump') on its control-ip:--dumper-port, and the two sides of the traffic
generator are started over SSH (username, ssh-key-filepath, workspace) on the
requester and the responder ('appliance lumina trafficgen', RDMA device nic.ib-device).
A component that cannot be reached is named with what to check; what was collected
before a failure stays in the result directory.

Before the repeats (--setup, the default) the machines are set up as Lumina's
orchestrator does: the ip-list assigned with its prefixes (ip addr replace), trust=dscp
and the DSCP-to-priority map (prio-dscp-map or Lumina's default; mlnx_qos on CX4-6,
lldptool on E810), the DCQCN/CNP knobs (mlx5 sysfs ecn/roce_np, ecn/roce_rp and the
ROCE_ACCL register for adaptive-retrans and slow-restart; irdma's configfs for the E810's
dcqcn-enable), the injector file written from the test as Lumina writes its switch
config (the four ports at their switch-port, port-speed and fec-type; a route per
ip-list address to its NIC's MAC, read from the host; --injector-file names one of
your own instead), switchd with the injector program from sde-path and the injector's
control API ('appliance inject tofino', bfshell), and a dumper on each mirror server
(on afpacket:<if-name>; with --dumper-dpdk on eal:<pci-addr> with four queues on cores of
the NIC's NUMA node, an E810 or XL710 bound to vfio-pci or igb_uio first, as Lumina's
roce-pkt-dump runs). The injector and the dumpers listen on their control-ip and take
changes only with a bearer token: --remote-token-file names the token file on those
machines, and the orchestrator sends its own (--token-file), the same token.
Each change is read first and put back after the run, or at once when a later command
fails. Every value reaches the hosts as a quoted argument. --dry-run prints these
commands per machine and exits.

Lumina's files run unchanged: ip-list entries with a prefix (10.0.0.1/24; the address
is the GID), roce-parameters of ConnectX (dcqcn-rp-enable, dcqcn-np-enable,
min-time-between-cnps, adaptive-retrans, slow-restart) and E810 (dcqcn-enable). The
events are checked against the merged trace, not the injector's counters: each
data-pkt-events entry must show at its (QP, PSN, ITER) with its mark, once; an intent
that never fired makes the repeat invalid.

--lab maps the hosts, the switch and the dumpers to the in-process testbed: soft
RNICs configured from nic.type (CX4, CX5, CX6; E810 behaves as CX5) and
roce-parameters (dcqcn-np-enable, min-time-between-cnps, dcqcn-rp-enable,
adaptive-retrans), the software injector, two dumpers with the file's pkt-dump-conf.
The testbed runs on virtual time: one goroutine steps the RNICs, the injector and
the dumpers in a discrete-event loop, the links have the switch's port-speed and a
50 ns propagation delay, the switch a 1 MiB buffer per egress port, the RNICs the
processing delays of their profiles; two runs give the same trace, byte for byte,
and its timings are the NIC model's. --wall-clock runs it on goroutines instead.
Ready-made tests are in appliance/lumina/testdata/tests.`,
	Flags: luminaRunFlags,
}

type luminaRunOptions struct {
	file, ready, iter, resultPath, binary, reqArgs, respArgs, injFile, remoteToken string
	lab, json, dryRun, setup, wallClock, dumperDPDK                                bool
	dumperPort                                                                     int
	args                                                                           []string
}

func luminaRunFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o luminaRunOptions
	fs.StringVar(&o.file, "f", "", "Lumina test file")
	fs.StringVar(&o.ready, "ready", "", "run a ready-made test instead: "+strings.Join(lumina.ReadyMade(), ", "))
	fs.BoolVar(&o.lab, "lab", false, "run on this machine's in-process testbed")
	fs.BoolVar(&o.wallClock, "wall-clock", false, "with --lab: run the testbed on goroutines and this host's clock instead of virtual time (timings are then the host's, and runs differ)")
	fs.StringVar(&o.iter, "iter-mode", "paper", "injector ITER rule: paper (the paper's) or p4 (the public P4 program's)")
	fs.StringVar(&o.resultPath, "result-path", "", "override the file's result-path")
	fs.BoolVar(&o.json, "json", false, "print the summary as JSON")
	fs.StringVar(&o.binary, "binary", "appliance", "without --lab: the appliance binary on the hosts")
	fs.IntVar(&o.dumperPort, "dumper-port", 9200, "without --lab: the dumpers' HTTP port on the mirrors' control-ips")
	fs.StringVar(&o.reqArgs, "requester-device", "", "without --lab: device flags for the requester's traffic generator (default -d ibv:<ib-device> -i <ib-port>)")
	fs.StringVar(&o.respArgs, "responder-device", "", "without --lab: the same for the responder")
	fs.BoolVar(&o.setup, "setup", true, "without --lab: set the machines up as Lumina does (addresses, DSCP, DCQCN knobs, injector, dumpers) and restore them after")
	fs.StringVar(&o.injFile, "injector-file", "", "without --lab: an injector file already on the switch, used as it is (default: written from the test to <switch workspace>/injector.yml)")
	fs.BoolVar(&o.dryRun, "dry-run", false, "print the setup commands per machine (what --setup runs) and exit")
	fs.StringVar(&o.remoteToken, "remote-token-file", "", "with --setup: the bearer token file on the switch and the mirror servers that the injector and the dumpers are started with (the token of --token-file)")
	fs.BoolVar(&o.dumperDPDK, "dumper-dpdk", false, "with --setup: dumpers on DPDK ports (eal:<pci-addr>, 4 queues on the NIC's NUMA node; E810/XL710 bound to vfio-pci/igb_uio and back), as Lumina's roce-pkt-dump; needs the appliance built with -tags dpdk there")
	return bind(&o, &o.args, runLuminaRun)
}

// runner loads the test the flags name and sets up its runner.
func (o *luminaRunOptions) runner(env *Env) (*lumina.Runner, error) {
	if len(o.args) > 0 || (o.file == "") == (o.ready == "") {
		return nil, Usagef("want -f test.yml or --ready NAME, and no arguments")
	}
	mode, err := intent.ParseIterMode(o.iter)
	if err != nil {
		return nil, Usagef("%v", err)
	}
	var t *lumina.Test
	if o.ready != "" {
		t, err = lumina.LoadReadyMade(o.ready)
	} else {
		t, err = lumina.LoadTest(o.file)
	}
	if err != nil {
		return nil, err
	}
	if o.resultPath != "" {
		t.Spec.ResultPath = o.resultPath
	}
	r := &lumina.Runner{Test: t, Lab: o.lab, IterMode: mode, Analyze: analyzeHook, WallClock: o.wallClock}
	if o.lab {
		r.Analyze = lumina.AnalyzeRunOptions(lumina.SoftOptions())
	} else {
		r.Remote = &lumina.Remote{Exec: remoteExec, RequesterArgs: strings.Fields(o.reqArgs), ResponderArgs: strings.Fields(o.respArgs),
			Setup: o.setup, SetupOptions: lumina.SetupOptions{Binary: o.binary, DumperPort: o.dumperPort, InjectorFile: o.injFile,
				RemoteTokenFile: o.remoteToken, DumperDPDK: o.dumperDPDK}}
	}
	if !o.json {
		r.Progress = env.Stderr
	}
	return r, nil
}

func runLuminaRun(ctx context.Context, env *Env, o luminaRunOptions) error {
	if o.dryRun && o.lab {
		return Usagef("--dry-run prints what the hardware mode runs on the machines; --lab runs none")
	}
	r, err := o.runner(env)
	if err != nil {
		return err
	}
	if !o.lab && o.setup && !o.dryRun && !service.HasDefaultToken() {
		return Usagef("--setup starts the injector and the dumpers with --remote-token-file's token: give this process the same token with --token-file (or APPLIANCE_TOKEN_FILE)")
	}
	if o.dryRun {
		pl, err := r.Remote.Plan(r.Test, r.IterMode)
		if err != nil {
			return err
		}
		return pl.WriteDry(env.Stdout)
	}
	sum, runErr := r.Run(ctx)
	if sum == nil {
		return runErr
	}
	if o.json {
		if err := writeJSON(env.Stdout, sum); err != nil {
			return err
		}
	} else {
		writeLuminaSummary(env, sum)
	}
	if runErr != nil {
		return runErr
	}
	for _, rep := range sum.Repeats {
		if !rep.Valid {
			why := rep.Integrity
			if rep.Integrity == "ok" {
				why = "events " + rep.Events
			}
			return fmt.Errorf("repeat %d is an invalid test: %s", rep.Repeat, why)
		}
	}
	return nil
}

// remoteExec starts commands on the test's hosts; tests replace it.
var remoteExec lumina.Executor = lumina.SSH{}

// analyzeHook runs the analyzers on a finished repeat.
var analyzeHook = lumina.AnalyzeRun

var luminaAnalyzeCmd = &Command{
	Name:    "analyze",
	Summary: "run Lumina's analyzers on a run directory (meta.json and its trace) and write the report",
	Usage:   "[--json] [--soft] DIR...",
	Long: `Reads a run directory written by 'appliance lumina run' (meta.json, the merged trace)
and runs the analyzers in one streaming pass: Go-back-N sender and receiver checks (first
violation with its packet), NACK generation and reaction latency per dropped PSN, timeout
retransmission intervals and retry counts, CNP pacing scope and interval, whether NAKs
trigger CNPs, Lumina's own CNP check (test_cnp's expected counts per port, IP pair and
destination IP for the receiver's NIC), counters expected vs observed, message
completion times. Writes
analysis.json, summary.txt, the plots (SVG and PNG) and report.html into DIR and prints
the summary. A run whose trace failed its integrity check is reported as invalid and no
figure of it is presented as a result (exit status 1).`,
	Flags: luminaAnalyzeFlags,
}

type luminaAnalyzeOptions struct {
	json, soft bool
	args       []string
}

func luminaAnalyzeFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o luminaAnalyzeOptions
	fs.BoolVar(&o.json, "json", false, "print analysis.json instead of the summary")
	fs.BoolVar(&o.soft, "soft", false, "the run came from the software testbed (--lab): allow its middlebox's long delays")
	return bind(&o, &o.args, runLuminaAnalyze)
}

func runLuminaAnalyze(ctx context.Context, env *Env, o luminaAnalyzeOptions) error {
	opt := luminaanalyzer.Options{}
	if o.soft {
		opt = lumina.SoftOptions()
	}
	if len(o.args) == 0 {
		return Usagef("want at least one run directory")
	}
	bad := 0
	for _, dir := range o.args {
		m, err := luminaanalyzer.ReadMeta(dir)
		if err != nil {
			return err
		}
		rep, err := lumina.Analyze(ctx, dir, m, opt)
		if err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
		if err := writeAnalysis(env, dir, rep, o.json); err != nil {
			return err
		}
		if !rep.Valid {
			bad++
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d runs are invalid tests", bad, len(o.args))
	}
	return nil
}

// writeAnalysis prints a run's analysis: analysis.json, or the summary
// and where the report is.
func writeAnalysis(env *Env, dir string, rep *luminaanalyzer.Report, asJSON bool) error {
	if asJSON {
		b, err := rep.MarshalIndent()
		if err != nil {
			return err
		}
		env.Stdout.Write(append(b, '\n'))
		return nil
	}
	fmt.Fprintf(env.Stdout, "== %s\n", dir)
	if err := rep.WriteText(env.Stdout); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "report: %s\n", filepath.Join(dir, luminaanalyzer.ReportFile))
	return nil
}

func writeLuminaSummary(env *Env, sum *lumina.Summary) {
	fmt.Fprintf(env.Stdout, "test %s: %d repeats in %s\n", sum.Test, len(sum.Repeats), sum.Dir)
	for _, r := range sum.Repeats {
		valid := "valid"
		if !r.Valid {
			valid = "INVALID"
		}
		fmt.Fprintf(env.Stdout, "  repeat %d: %s, %d packets, traffic %s, %.2f Gbit/s", r.Repeat, valid, r.Packets, r.Traffic, r.Goodput/1e9)
		if r.Events != "ok" && r.Events != "" {
			fmt.Fprintf(env.Stdout, "; events %s", r.Events)
		}
		if r.Analysis != "" {
			fmt.Fprintf(env.Stdout, "; %s", r.Analysis)
		}
		fmt.Fprintln(env.Stdout)
		if r.Error != "" {
			fmt.Fprintf(env.Stdout, "    error: %s\n", r.Error)
		}
	}
}
