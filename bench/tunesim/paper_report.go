package tunesim

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/rdma-appliance/appliance/internal/report"
	"github.com/rdma-appliance/appliance/tuning"
)

// paperMetric is one column the tables compare methods on, and which
// way is better.
type paperMetric struct {
	name   string
	unit   string
	of     func(CaseRun) float64
	higher bool
}

func paperMetrics(table string) []paperMetric {
	ms := []paperMetric{
		{"P50 FCT", "us", func(r CaseRun) float64 { return r.P50us }, false},
		{"P99 FCT", "us", func(r CaseRun) float64 { return r.P99us }, false},
		{"throughput", "Gbit/s", func(r CaseRun) float64 { return r.Gbps }, true},
		{"switch queue", "KB", func(r CaseRun) float64 { return r.QueueKB }, false},
	}
	if table == "redis" {
		ms = append(ms,
			paperMetric{"mean FCT", "us", func(r CaseRun) float64 { return r.MeanUs }, false},
			paperMetric{"IOPS", "K", func(r CaseRun) float64 { return r.IOPS / 1e3 }, true},
			paperMetric{"ECN-marked packets", "", func(r CaseRun) float64 { return float64(r.ECNMarks) }, false})
	}
	return ms
}

// WritePaperTable prints each case's table (every method's columns) and,
// per metric, how the tuned runs fare against every preset: the paper's
// "wins and losses" reading.
func WritePaperTable(w io.Writer, rows []PaperRow, o PaperOptions) error {
	o.Defaults()
	for _, r := range rows {
		fmt.Fprintf(w, "== %s: %s\n", r.Case, r.Description)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		head := []string{"method", "score", "P50 FCT us", "P99 FCT us", "mean FCT us", "done", "unfinished", "skipped",
			"Gbit/s", "queue KB", "queue cells", "ECN marks", "PFC pauses", "paused us", "drops"}
		if r.Table == "redis" {
			head = append(head, "KIOPS")
		}
		head = append(head, "watermark")
		fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
		for _, m := range r.Runs {
			cells := []string{m.Method, fmt.Sprintf("%.4f", m.Score), fmt.Sprintf("%.1f", m.P50us), fmt.Sprintf("%.1f", m.P99us),
				fmt.Sprintf("%.1f", m.MeanUs), fmt.Sprint(m.Completed), fmt.Sprint(m.Unfinished), fmt.Sprint(m.Skipped),
				fmt.Sprintf("%.2f", m.Gbps), fmt.Sprintf("%.1f", m.QueueKB), fmt.Sprintf("%.0f", m.QueueCells),
				fmt.Sprint(m.ECNMarks), fmt.Sprint(m.Pauses), fmt.Sprintf("%.0f", m.PausedUs), fmt.Sprint(m.Drops)}
			if r.Table == "redis" {
				cells = append(cells, fmt.Sprintf("%.2f", m.IOPS/1e3))
			}
			cells = append(cells, m.Watermark.String())
			fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, line := range paperVerdicts(r) {
			fmt.Fprintln(w, "  "+line)
		}
		fmt.Fprintln(w)
	}
	norm, window, busy := "the history normalisation (Eq. 14 as written), f(x) re-scored every iteration (line 7)", "the whole run's (posting and drain, to the last completion)", "queues its burst's message behind the one in flight"
	if o.Norm == tuning.Fixed {
		norm = "the fixed normalisation"
	}
	if o.PostingWindow {
		window = "the posting window's"
	}
	if o.Skip {
		busy = "skips the burst"
	}
	if o.PathTelemetry {
		norm += ", summed over every switch on the paths"
	}
	fmt.Fprintf(w, "Tuned: simulated annealing (the paper's parameters, cooled within %d configurations) on the scenario's objective\n"+
		"(Eq. 14, beta 0.5: throughput and queue, FCT is not in it) under %s, seeds 1..%d; fabric seed %d.\n"+
		"The score column is the fixed normalisation for every method. A busy QP %s.\n"+
		"FCT: each message's (incast, from its burst) or SET-to-reply exchange's (redis) completion minus its post, from the\n"+
		"simulator, over the messages posted in the posting window and finished by the end of the drain; throughput and queue\n"+
		"are %s, at the receiver-side leaf; ECN marks, pauses, paused time and drops the whole run's.\n", o.Evals, norm, o.Seeds, o.SimSeed, busy, window)
	return nil
}

// tieFrac is how close two methods' values are to count as equal: the
// simulator's throughputs differ in the sixth digit where every method
// delivers line rate, and that is no win.
const tieFrac = 0.001

// paperVerdicts says, per metric, which presets each tuned run beats and
// by how much it trails the best of them where it loses.
func paperVerdicts(r PaperRow) []string {
	var tuned, presets []CaseRun
	for _, m := range r.Runs {
		if m.Evals > 0 {
			tuned = append(tuned, m)
		} else {
			presets = append(presets, m)
		}
	}
	var out []string
	for _, t := range tuned {
		var parts []string
		for _, mt := range paperMetrics(r.Table) {
			v := mt.of(t)
			beats, ties := 0, 0
			best := presets[0]
			for _, p := range presets {
				pv := mt.of(p)
				switch {
				case math.Abs(pv-v) <= tieFrac*math.Max(math.Abs(pv), math.Abs(v)):
					ties++
				case (v > pv) == mt.higher:
					beats++
				}
				if (mt.of(p) > mt.of(best)) == mt.higher && mt.of(p) != mt.of(best) {
					best = p
				}
			}
			s := fmt.Sprintf("%s: beats %d of %d presets", mt.name, beats, len(presets))
			if ties > 0 {
				s += fmt.Sprintf(" (%d equal within %g%%)", ties, 100*tieFrac)
			}
			if bv := mt.of(best); bv != 0 {
				s += fmt.Sprintf(", %+.2f%% vs best (%s)", 100*(v-bv)/bv, best.Method)
			}
			parts = append(parts, s)
		}
		out = append(out, t.Method+": "+strings.Join(parts, "; "))
	}
	return out
}

// PaperCharts are the tables as bar charts: per table and metric, one
// bar per case and method.
func PaperCharts(rows []PaperRow) []*report.Chart {
	var out []*report.Chart
	for _, table := range []string{"incast", "redis"} {
		var rs []PaperRow
		for _, r := range rows {
			if r.Table == table {
				rs = append(rs, r)
			}
		}
		if len(rs) == 0 {
			continue
		}
		for _, mt := range paperMetrics(table) {
			c := &report.Chart{Title: fmt.Sprintf("%s: %s per method", table, mt.name), Kind: report.Bar, YLabel: mt.unit, Width: 1000}
			if !mt.higher {
				// Log: the 39-to-1's FCTs are 100 times the 2-to-1's.
				c.Title += " (lower is better)"
				c.LogY = true
			}
			for _, r := range rs {
				c.Categories = append(c.Categories, r.Case)
			}
			for i, m := range rs[0].Runs {
				s := report.Series{Name: m.Method}
				for _, r := range rs {
					s.Y = append(s.Y, mt.of(r.Runs[i]))
				}
				c.Series = append(c.Series, s)
			}
			out = append(out, c)
		}
	}
	return out
}

// WritePaper writes paper.txt, paper.json, paper.html (tables and
// charts) and each chart as paper-N.png into dir.
func WritePaper(dir string, rows []PaperRow, o PaperOptions) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var txt strings.Builder
	if err := WritePaperTable(&txt, rows, o); err != nil {
		return err
	}
	if err := writeTextJSON(dir, "paper", txt.String(), rows); err != nil {
		return err
	}
	return writeChartsPage(dir, "paper", "ByteTuning: the paper's evaluations on the simulator", txt.String(), PaperCharts(rows))
}

// fig13Metrics are Fig. 13's panels.
var fig13Metrics = []paperMetric{
	{"ECN-marked packets", "", func(r CaseRun) float64 { return float64(r.ECNMarks) }, false},
	{"throughput", "Gbit/s", func(r CaseRun) float64 { return r.Gbps }, true},
	{"PFC pauses sent", "", func(r CaseRun) float64 { return float64(r.Pauses) }, false},
	{"PFC paused time", "us", func(r CaseRun) float64 { return r.PausedUs }, false},
}

// WriteFig13Table prints the study: per knob setting, tuned and vendor
// on each panel's metric and the tuned run's change against vendor.
func WriteFig13Table(w io.Writer, caseName string, pts []Fig13Point) error {
	fmt.Fprintf(w, "== Fig. 13: DCQCN knobs on %s, tuned vs vendor (change = tuned against vendor)\n", caseName)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{"rrmp us", "mtbc us"}
	for _, m := range fig13Metrics {
		head = append(head, m.name+" tuned", "vendor", "change")
	}
	fmt.Fprintln(tw, strings.Join(append(head, "tuned watermark"), "\t")+"\t")
	for _, p := range pts {
		cells := []string{fmt.Sprintf("%g", p.RRMPus), fmt.Sprintf("%g", p.MTBCus)}
		for _, m := range fig13Metrics {
			t, v := m.of(p.Tuned), m.of(p.Vendor)
			ch := "-"
			if v != 0 {
				ch = fmt.Sprintf("%+.2f%%", 100*(t-v)/v)
			}
			cells = append(cells, fmt.Sprintf("%.2f", t), fmt.Sprintf("%.2f", v), ch)
		}
		cells = append(cells, p.Tuned.Watermark.String())
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	return tw.Flush()
}

// Fig13Charts are the study's panels: per metric, tuned and vendor bars
// for each knob setting ("rrmp/mtbc" in us).
func Fig13Charts(pts []Fig13Point) []*report.Chart {
	var out []*report.Chart
	for _, m := range fig13Metrics {
		c := &report.Chart{Title: "Fig. 13: " + m.name + " by rate_reduce_monitor_period/min_time_between_cnps (us)", Kind: report.Bar, YLabel: m.unit, Width: 1000}
		t, v := report.Series{Name: "tuned"}, report.Series{Name: "vendor"}
		for _, p := range pts {
			c.Categories = append(c.Categories, fmt.Sprintf("%g/%g", p.RRMPus, p.MTBCus))
			t.Y = append(t.Y, m.of(p.Tuned))
			v.Y = append(v.Y, m.of(p.Vendor))
		}
		c.Series = []report.Series{t, v}
		out = append(out, c)
	}
	return out
}

// WriteFig13 writes fig13.txt, fig13.json, fig13.html and fig13-N.png
// into dir.
func WriteFig13(dir, caseName string, pts []Fig13Point) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var txt strings.Builder
	if err := WriteFig13Table(&txt, caseName, pts); err != nil {
		return err
	}
	if err := writeTextJSON(dir, "fig13", txt.String(), pts); err != nil {
		return err
	}
	return writeChartsPage(dir, "fig13", "ByteTuning Fig. 13: DCQCN knobs", txt.String(), Fig13Charts(pts))
}

// writeChartsPage writes NAME.html (the text and the charts) and each
// chart as NAME-N.png.
func writeChartsPage(dir, name, title, text string, charts []*report.Chart) error {
	page := report.NewPage(title)
	page.Pre(text)
	for i, c := range charts {
		page.Chart(c)
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%d.png", name, i+1)))
		if err != nil {
			return err
		}
		perr := c.PNG(f)
		if cerr := f.Close(); perr == nil {
			perr = cerr
		}
		if perr != nil {
			return perr
		}
	}
	return page.WriteFile(filepath.Join(dir, name+".html"))
}

// writeTextJSON writes NAME.txt (text) and NAME.json (v) into dir.
func writeTextJSON(dir, name, text string, v any) error {
	if err := os.WriteFile(filepath.Join(dir, name+".txt"), []byte(text), 0o644); err != nil {
		return err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name+".json"), b, 0o644)
}
