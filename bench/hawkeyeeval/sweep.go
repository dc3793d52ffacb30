package hawkeyeeval

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/rdma-appliance/appliance/internal/report"
)

// Figure 7's axes: epochs of 2^17 (131 us) to 2^21 (2.1 ms) ns, the
// paper's 100 us to 2 ms in the powers of two a data plane picks epochs
// by, and detection thresholds of 200% to 500% of the fabric's largest RTT.
var (
	SweepEpochs     = []uint{17, 18, 19, 20, 21}
	SweepThresholds = []int{200, 300, 400, 500}
)

// Sweep runs Hawkeye's evaluation at every epoch and threshold of the
// grid (Figure 7), o's traces at each, and returns every cell's scores.
// Progress counts traces over the whole grid.
func Sweep(ctx context.Context, o Options, epochs []uint, thresholds []int) (Scores, error) {
	all := Scores{}
	o.Methods = []Method{Hawkeye}
	progress := o.Progress
	cells := len(epochs) * len(thresholds)
	cell := 0
	for _, e := range epochs {
		for _, th := range thresholds {
			c := o
			c.Params = Params{EpochShift: e, Threshold: th}
			base := cell
			if progress != nil {
				c.Progress = func(done, total int) { progress(base*total+done, cells*total) }
			}
			sc, err := Evaluate(ctx, c)
			for k, s := range sc {
				all[k] = s
			}
			if err != nil {
				return all, err
			}
			cell++
		}
	}
	return all, nil
}

// SweepCell is Hawkeye's precision and recall at one epoch and threshold
// on one topology: per anomaly type and averaged over them.
type SweepCell struct {
	Topology  Topology               `json:"topology"`
	EpochNs   int64                  `json:"epoch_ns"`
	Threshold int                    `json:"threshold_percent"`
	Precision float64                `json:"average_precision"`
	Recall    float64                `json:"average_recall"`
	Anomalies map[Anomaly][2]float64 `json:"anomalies"` // precision, recall
}

// SweepCells are the cells of swept scores, Hawkeye's.
func (sc Scores) SweepCells() []SweepCell {
	var out []SweepCell
	for _, p := range sc.Params() {
		only := sc.Only(p)
		tps, as, _ := only.axes()
		for _, tp := range tps {
			c := SweepCell{Topology: tp, EpochNs: int64(p.Epoch()), Threshold: p.Threshold, Anomalies: map[Anomaly][2]float64{}}
			s := only.summary(p, tp, as, Hawkeye)
			c.Precision, c.Recall = s.Precision, s.Recall
			for _, a := range as {
				x := only.Get(p, tp, a, Hawkeye)
				c.Anomalies[a] = [2]float64{x.Precision(), x.Recall()}
			}
			out = append(out, c)
		}
	}
	return out
}

// writeSweep prints Figure 7 for each topology: average precision /
// recall per epoch (rows) and threshold (columns).
func writeSweep(w io.Writer, cells []SweepCell) {
	var tps []Topology
	for _, c := range cells {
		if !slices.Contains(tps, c.Topology) {
			tps = append(tps, c.Topology)
		}
	}
	for _, tp := range tps {
		var epochs []int64
		var ths []int
		at := map[[2]int64]SweepCell{}
		for _, c := range cells {
			if c.Topology != tp {
				continue
			}
			if !slices.Contains(epochs, c.EpochNs) {
				epochs = append(epochs, c.EpochNs)
			}
			if !slices.Contains(ths, c.Threshold) {
				ths = append(ths, c.Threshold)
			}
			at[[2]int64{c.EpochNs, int64(c.Threshold)}] = c
		}
		slices.Sort(epochs)
		slices.Sort(ths)
		fmt.Fprintf(w, "Figure 7: Hawkeye's average precision / recall over the anomaly types, fat-tree %s\n", tp)
		tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
		fmt.Fprint(tw, "EPOCH \\ THRESHOLD\t")
		for _, t := range ths {
			fmt.Fprintf(tw, "%d%%\t", t)
		}
		fmt.Fprintln(tw)
		for _, e := range epochs {
			fmt.Fprintf(tw, "%v\t", time.Duration(e))
			for _, t := range ths {
				// A cell a partial sweep did not run is not 0% / 0%.
				c, ok := at[[2]int64{e, int64(t)}]
				if !ok {
					fmt.Fprint(tw, "-\t")
					continue
				}
				fmt.Fprintf(tw, "%.0f%% / %.0f%%\t", 100*c.Precision, 100*c.Recall)
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
		fmt.Fprintln(w)
	}
}

// SweepCharts draws Figure 7 per topology: Hawkeye's average precision
// and its average recall (two charts, as the paper's two panels) over the
// epoch, one line per detection threshold. They are named
// hawkeye-figure7-{precision,recall}-TOPOLOGY.svg.
func SweepCharts(cells []SweepCell) map[string]*report.Chart {
	out := map[string]*report.Chart{}
	type key struct {
		tp Topology
		th int
	}
	series := map[key]*[2]report.Series{}
	var keys []key
	for _, c := range cells {
		k := key{c.Topology, c.Threshold}
		if series[k] == nil {
			name := fmt.Sprintf("threshold %d%%", c.Threshold)
			series[k] = &[2]report.Series{{Name: name}, {Name: name}}
			keys = append(keys, k)
		}
		s := series[k]
		x := float64(c.EpochNs) / 1e3
		s[0].X, s[0].Y = append(s[0].X, x), append(s[0].Y, 100*c.Precision)
		s[1].X, s[1].Y = append(s[1].X, x), append(s[1].Y, 100*c.Recall)
	}
	slices.SortFunc(keys, func(a, b key) int {
		if a.tp != b.tp {
			return a.tp.K - b.tp.K
		}
		return a.th - b.th
	})
	for _, k := range keys {
		for i, what := range []string{"precision", "recall"} {
			name := fmt.Sprintf("hawkeye-figure7-%s-%s.svg", what, k.tp)
			c := out[name]
			if c == nil {
				c = &report.Chart{Title: fmt.Sprintf("Figure 7: Hawkeye's average %s over the anomaly types, fat-tree %s", what, k.tp),
					XLabel: "epoch (us)", YLabel: what + " (%)", Kind: report.Line, Markers: true}
				out[name] = c
			}
			s := series[k][i]
			// Cells come in no set order: the line goes by epoch.
			idx := make([]int, len(s.X))
			for j := range idx {
				idx[j] = j
			}
			slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(s.X[a], s.X[b]) })
			sorted := report.Series{Name: s.Name}
			for _, j := range idx {
				sorted.X, sorted.Y = append(sorted.X, s.X[j]), append(sorted.Y, s.Y[j])
			}
			c.Series = append(c.Series, sorted)
		}
	}
	return out
}
