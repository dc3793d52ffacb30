package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/rdma-appliance/appliance/appliance/lumina"
	"github.com/rdma-appliance/appliance/collector/luminaanalyzer"
	"github.com/rdma-appliance/appliance/internal/intent"
)

// luminaCmd is `appliance lumina`; each subcommand's file adds itself to
// its Sub in init.
var luminaCmd = &Command{
	Name:    "lumina",
	Summary: "Lumina: run RNIC tests from Lumina's test files, analyse their traces",
}

func init() {
	register(luminaCmd)
	luminaCmd.Sub = append(luminaCmd.Sub, &Command{
		Name:    "run",
		Summary: "run a Lumina test file (Lumina's own YAML) and analyse its traces",
		Usage:   "-f test.yml|--ready NAME --lab [--iter-mode paper|p4] [--result-path DIR] [--json]",
		Long: `Reads a Lumina test file unchanged (local-workspace, result-path, aggregate-pcap-filename,
rewrite-udp-dst-port, num-repeats, switch, requester, responder, requester-mirror,
responder-mirror, traffic with data-pkt-events), validates it as Lumina does, and runs
it num-repeats times. Each repeat lands in result-path/<timestamp>/<repeat>/: the
dumpers' files (dumps/), the merged trace (aggregate-pcap-filename), meta.json (the
connections' metadata, intents and entries with hits, injector and RNIC counters),
trafficgen.json, integrity.json and the analyzers' results.

Without --lab the test runs on the machines it names: the software injector
('appliance inject run') answers on switch.control-ip:listen-port, each dumper
('appliance dump') on its control-ip:--dumper-port, and the two sides of the traffic
generator are started over SSH (username, ssh-key-filepath, workspace) on the
requester and the responder ('appliance lumina trafficgen', RDMA device nic.ib-device).
A component that cannot be reached is named with what to check; what was collected
before a failure stays in the result directory.

--lab maps the hosts, the switch and the dumpers to the in-process testbed: soft
RNICs configured from nic.type (CX4, CX5, CX6; E810 behaves as CX5) and
roce-parameters (dcqcn-np-enable, min-time-between-cnps, dcqcn-rp-enable,
adaptive-retrans), the software injector, two dumpers with the file's pkt-dump-conf.
Ready-made tests are in appliance/lumina/testdata/tests.`,
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			file := fs.String("f", "", "Lumina test file")
			ready := fs.String("ready", "", "run a ready-made test instead: "+strings.Join(lumina.ReadyMade(), ", "))
			lab := fs.Bool("lab", false, "run on this machine's in-process testbed")
			iter := fs.String("iter-mode", "paper", "injector ITER rule: paper (the paper's) or p4 (the public P4 program's)")
			resultPath := fs.String("result-path", "", "override the file's result-path")
			asJSON := fs.Bool("json", false, "print the summary as JSON")
			binary := fs.String("binary", "appliance", "without --lab: the appliance binary on the hosts")
			dumperPort := fs.Int("dumper-port", 9200, "without --lab: the dumpers' HTTP port on the mirrors' control-ips")
			reqArgs := fs.String("requester-device", "", "without --lab: device flags for the requester's traffic generator (default -d ibv:<ib-device> -i <ib-port>)")
			respArgs := fs.String("responder-device", "", "without --lab: the same for the responder")
			return func(ctx context.Context, env *Env, args []string) error {
				if len(args) > 0 || (*file == "") == (*ready == "") {
					return Usagef("want -f test.yml or --ready NAME, and no arguments")
				}
				mode, err := intent.ParseIterMode(*iter)
				if err != nil {
					return Usagef("%v", err)
				}
				var t *lumina.Test
				if *ready != "" {
					t, err = lumina.LoadReadyMade(*ready)
				} else {
					t, err = lumina.LoadTest(*file)
				}
				if err != nil {
					return err
				}
				if *resultPath != "" {
					t.Spec.ResultPath = *resultPath
				}
				r := &lumina.Runner{Test: t, Lab: *lab, IterMode: mode, Analyze: analyzeHook}
				if *lab {
					r.Analyze = lumina.AnalyzeRunOptions(lumina.SoftOptions())
				} else {
					r.Remote = &lumina.Remote{Exec: remoteExec, Binary: *binary, DumperPort: *dumperPort,
						RequesterArgs: strings.Fields(*reqArgs), ResponderArgs: strings.Fields(*respArgs)}
				}
				if !*asJSON {
					r.Progress = env.Stderr
				}
				sum, runErr := r.Run(ctx)
				if sum == nil {
					return runErr
				}
				if *asJSON {
					enc := json.NewEncoder(env.Stdout)
					enc.SetIndent("", "  ")
					if err := enc.Encode(sum); err != nil {
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
						return fmt.Errorf("repeat %d is an invalid test: %s", rep.Repeat, rep.Integrity)
					}
				}
				return nil
			}
		},
	})
}

// remoteExec starts commands on the test's hosts; tests replace it.
var remoteExec lumina.Executor = lumina.SSH{}

// analyzeHook runs the analyzers on a finished repeat.
var analyzeHook = lumina.AnalyzeRun

func init() {
	luminaCmd.Sub = append(luminaCmd.Sub, &Command{
		Name:    "analyze",
		Summary: "run Lumina's analyzers on a run directory (meta.json and its trace) and write the report",
		Usage:   "[--json] [--soft] DIR...",
		Long: `Reads a run directory written by 'appliance lumina run' (meta.json, the merged trace)
and runs the analyzers in one streaming pass: Go-back-N sender and receiver checks (first
violation with its packet), NACK generation and reaction latency per dropped PSN, timeout
retransmission intervals and retry counts, CNP pacing scope and interval, whether NAKs
trigger CNPs, counters expected vs observed, message completion times. Writes
analysis.json, summary.txt, the plots (SVG and PNG) and report.html into DIR and prints
the summary. A run whose trace failed its integrity check is reported as invalid and no
figure of it is presented as a result (exit status 1).`,
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			asJSON := fs.Bool("json", false, "print analysis.json instead of the summary")
			soft := fs.Bool("soft", false, "the run came from the software testbed (--lab): allow its middlebox's long delays")
			return func(ctx context.Context, env *Env, args []string) error {
				opt := luminaanalyzer.Options{}
				if *soft {
					opt = lumina.SoftOptions()
				}
				if len(args) == 0 {
					return Usagef("want at least one run directory")
				}
				bad := 0
				for _, dir := range args {
					m, err := luminaanalyzer.ReadMeta(dir)
					if err != nil {
						return err
					}
					rep, err := lumina.Analyze(ctx, dir, m, opt)
					if err != nil {
						return fmt.Errorf("%s: %w", dir, err)
					}
					if *asJSON {
						b, err := rep.MarshalIndent()
						if err != nil {
							return err
						}
						env.Stdout.Write(append(b, '\n'))
					} else {
						fmt.Fprintf(env.Stdout, "== %s\n", dir)
						if err := rep.WriteText(env.Stdout); err != nil {
							return err
						}
						fmt.Fprintf(env.Stdout, "report: %s\n", filepath.Join(dir, luminaanalyzer.ReportFile))
					}
					if !rep.Valid {
						bad++
					}
				}
				if bad > 0 {
					return fmt.Errorf("%d of %d runs are invalid tests", bad, len(args))
				}
				return nil
			}
		},
	})
}

func writeLuminaSummary(env *Env, sum *lumina.Summary) {
	fmt.Fprintf(env.Stdout, "test %s: %d repeats in %s\n", sum.Test, len(sum.Repeats), sum.Dir)
	for _, r := range sum.Repeats {
		valid := "valid"
		if !r.Valid {
			valid = "INVALID"
		}
		fmt.Fprintf(env.Stdout, "  repeat %d: %s, %d packets, traffic %s, %.2f Gbit/s", r.Repeat, valid, r.Packets, r.Traffic, r.Goodput/1e9)
		if r.Analysis != "" {
			fmt.Fprintf(env.Stdout, "; %s", r.Analysis)
		}
		fmt.Fprintln(env.Stdout)
		if r.Error != "" {
			fmt.Fprintf(env.Stdout, "    error: %s\n", r.Error)
		}
	}
}
