package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/rdma-appliance/appliance/collector/hostmeshanalyzer"
	"github.com/rdma-appliance/appliance/internal/service"
)

func init() {
	meshCmd.Sub = append(meshCmd.Sub, &Command{
		Name:    "analyze",
		Summary: "the Hostmesh analyzer: on a file of agent batches, or as a service agents post to",
		Usage:   "[--window 20s] [--json] FILE | --serve ADDR",
		Long: `Windows of the agents' probe results (20 s by default): an RNIC is anomalous when more than
10% of its probes time out (worst first; a dead RNIC's peers and a single bad switch link do
not make an RNIC anomalous), and its probes count as RNIC problems for a minute; the remaining
timeouts, and probes over the high-latency threshold, vote on links and switches along their
traced paths (Hostmesh's Algorithm 1). Each window reports the SLA percentiles (P50..P999) of
host processing delay and one-way network latency, the RNIC and switch-network drop rates,
the ranked suspects and alert lines.

FILE holds batches as 'appliance mesh probe --out' writes them (JSON, one after another).
With --serve the analyzer listens (POST /v1/results from agents, GET /v1/report, /v1/reports,
/metrics, /healthz) and analyzes a window every --window.`,
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			window := fs.Duration("window", 20*time.Second, "analysis window")
			hold := fs.Duration("hold", time.Minute, "how long an anomalous RNIC's probes count as RNIC problems")
			serve := fs.String("serve", "", "listen on this address as the analyzer service")
			asJSON := fs.Bool("json", false, "print the reports as JSON")
			return func(ctx context.Context, env *Env, args []string) error {
				cfg := hostmeshanalyzer.Config{Window: *window, Hold: *hold}
				if *serve != "" {
					if len(args) > 0 {
						return Usagef("--serve takes no file")
					}
					a := hostmeshanalyzer.NewAnalyzer(cfg)
					sv := hostmeshanalyzer.NewService(a, env.Log)
					h := service.New("hostmesh-analyzer", *serve, env.Log)
					sv.Register(h)
					go sv.Run(ctx)
					go func() {
						<-h.Ready()
						env.Log.Info("hostmesh analyzer", "listen", h.Addr(), "window", *window)
					}()
					err := h.Run(ctx)
					if errors.Is(err, context.Canceled) {
						err = nil
					}
					return err
				}
				if len(args) != 1 {
					return Usagef("want one FILE of batches, or --serve ADDR")
				}
				f, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer f.Close()
				bs, err := hostmeshanalyzer.ReadBatches(f)
				if err != nil {
					return fmt.Errorf("%s: %w", args[0], err)
				}
				reps := hostmeshanalyzer.AnalyzeAll(bs, cfg)
				if *asJSON {
					enc := json.NewEncoder(env.Stdout)
					enc.SetIndent("", "  ")
					return enc.Encode(reps)
				}
				if len(reps) == 0 {
					fmt.Fprintln(env.Stdout, "no probe results")
				}
				for _, r := range reps {
					r.WriteText(env.Stdout)
				}
				return nil
			}
		},
	})
}
