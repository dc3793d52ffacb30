package cli

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/rdma-appliance/appliance/appliance/lumina"
)

var luminaPaperCmd = &Command{
	Name:    "paper",
	Summary: "run the Lumina paper's figures on the virtual testbed and write one HTML page per figure",
	Usage:   "[--out DIR] [--figures fig8,fig9,fig10a,fig10b,table2,table3,table4,cnpcheck] [--keep-runs]",
	Long: `Runs the settings of the Lumina paper's §6 on the lab's virtual testbed (the twin: soft
RNICs with the cx4, cx5 and cx6 profiles, links at the paper's testbeds' speeds, 40G for
the CX4 Lx and 100G otherwise), each as a Lumina test file edited from the ready-made
ones, and reads every number back from the traces with the analyzer: Figures 8 and 9
(NACK generation and reaction, one packet of a 20 KB or 100 KB WRITE dropped, its
position swept), Figure 10 (CX6, the fifth packet dropped, 10-200 KB: retransmission
latency and message completion time), Table 2 (retries of five messages in adaptive and
non-adaptive mode) and Tables 3 and 4 (three QPs, two ECN marks each: the marks' times
and the CNPs per QP), and Lumina's own CNP check (test_cnp's expected CNPs per port, per IP
pair and per destination IP) on four QPs whose addresses tell the modes apart, on CX4, CX5,
CX6 and E810. Writes DIR/index.html and one page per figure (fig8.html, ...,
table4.html, cnpcheck.html), each with the paper's figure, the twin's, a chart or table and the
tolerance of each check; a check outside its tolerance is shown as a miss. The pages are
self-contained and need none of the runs' result directories (traces, dumps, analyses:
some 50 MB for the whole set), so those go to a temporary directory removed once the
pages are written; --keep-runs keeps them under DIR/runs instead. The whole set takes a
few hundred runs, about half a minute.`,
	Flags: luminaPaperFlags,
}

type luminaPaperOptions struct {
	out, figures string
	keepRuns     bool
	args         []string
}

func luminaPaperFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o luminaPaperOptions
	fs.StringVar(&o.out, "out", "lumina-paper", "directory for the pages and the runs")
	fs.StringVar(&o.figures, "figures", "", "comma-separated pages to write (default: all)")
	fs.BoolVar(&o.keepRuns, "keep-runs", false, "keep every run's result directory under DIR/runs (the pages do not need them)")
	return bind(&o, &o.args, runLuminaPaper)
}

func runLuminaPaper(ctx context.Context, env *Env, o luminaPaperOptions) error {
	if len(o.args) > 0 {
		return Usagef("no arguments")
	}
	var figs []string
	if o.figures != "" {
		figs = strings.Split(o.figures, ",")
	}
	pages, err := lumina.PaperReport(ctx, o.out, lumina.PaperOptions{Figures: figs, Progress: env.Stderr, KeepRuns: o.keepRuns})
	if err != nil {
		return err
	}
	for _, p := range pages {
		fmt.Fprintf(env.Stdout, "%s: %s: %d of %d checks within tolerance\n", filepath.Join(o.out, p.File), p.Title,
			len(p.Checks)-p.Misses(), len(p.Checks))
	}
	fmt.Fprintf(env.Stdout, "index: %s\n", filepath.Join(o.out, "index.html"))
	return nil
}
