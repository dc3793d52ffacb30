package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"

	"github.com/rdma-appliance/appliance/appliance/lab"
)

func init() {
	register(&Command{
		Name:    "lab",
		Summary: "run the in-process testbed on its embedded default (what `make run` runs)",
		Usage:   "[--out DIR] [--config FILE] [--print-default]",
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
         rounds of the per-packet load-balancing experiment (Fig 7b).
  lumina-tests  ready-made Lumina test files (fast-retransmission sweep,
         timeout retries, CNP pacing) run as 'lumina run --lab' runs them,
         analyzed, with an HTML report each under lumina-tests/.
The exit status is 0 only when every stage passes.`,
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			out := fs.String("out", "lab-out", "directory for the lab's artifacts")
			config := fs.String("config", "", "lab configuration YAML (default: the embedded one)")
			printDefault := fs.Bool("print-default", false, "print the embedded default configuration and exit")
			return func(ctx context.Context, env *Env, args []string) error {
				if len(args) > 0 {
					return Usagef("lab takes no arguments")
				}
				if *printDefault {
					_, err := env.Stdout.Write(lab.DefaultYAML())
					return err
				}
				s, err := lab.LoadSpec(*config)
				if err != nil {
					return err
				}
				dir, err := filepath.Abs(*out)
				if err != nil {
					return err
				}
				l := &lab.Lab{Spec: s, OutDir: dir, Log: env.Log, Progress: env.Stderr}
				rep, err := l.Run(ctx)
				if rep != nil {
					fmt.Fprintln(env.Stdout)
					rep.WriteSummary(env.Stdout)
					fmt.Fprintf(env.Stdout, "\nartifacts: %s\n", dir)
				}
				if err != nil {
					return err
				}
				if !rep.Pass() {
					return errors.New("some lab stages failed (see the table above)")
				}
				return nil
			}
		},
	})
}
