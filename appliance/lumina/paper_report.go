package lumina

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rdma-appliance/appliance/collector/luminaanalyzer"
	"github.com/rdma-appliance/appliance/internal/report"
)

// PaperFigures names the pages `lumina paper` can write, in the paper's
// order.
var PaperFigures = []string{"fig8", "fig9", "fig10a", "fig10b", "table2", "table3", "table4", "cnpcheck"}

// PaperCheck is one comparison on a figure's page: what the paper reports,
// what the twin's trace gave, and whether it is within the stated
// tolerance. A check that is not is a miss, shown as one.
type PaperCheck struct {
	What, Paper, Twin, Tolerance string
	OK                           bool
}

// PaperPage is one written page.
type PaperPage struct {
	Name, Title, File string
	Checks            []PaperCheck
}

// Misses counts the page's checks outside their tolerance.
func (p PaperPage) Misses() int {
	n := 0
	for _, c := range p.Checks {
		if !c.OK {
			n++
		}
	}
	return n
}

// PaperOptions adjust PaperReport.
type PaperOptions struct {
	// Figures selects pages (nil: all of PaperFigures).
	Figures []string
	// Progress gets a line per page (nil: none).
	Progress io.Writer
	// KeepRuns keeps every run's result directory under out/runs. The
	// pages need none of them (each is self-contained HTML with the
	// numbers read from the runs), so by default the runs go to a
	// temporary directory that is removed once the pages are written:
	// the full set leaves some 50 MB of traces and results otherwise.
	KeepRuns bool
}

// PaperReport runs the paper's settings on the twin (paper.go) and writes
// one HTML page per figure or table into out (fig8.html, ..., table4.html)
// and index.html linking them with their verdicts.
func PaperReport(ctx context.Context, out string, opt PaperOptions) (pages []PaperPage, err error) {
	figures := opt.Figures
	if len(figures) == 0 {
		figures = PaperFigures
	}
	for _, f := range figures {
		if !slices.Contains(PaperFigures, f) {
			return nil, fmt.Errorf("lumina: no paper figure %q (have %s)", f, strings.Join(PaperFigures, ", "))
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	w := &paperWriter{ctx: ctx, out: out, runs: filepath.Join(out, "runs")}
	if opt.KeepRuns {
		if err := os.MkdirAll(w.runs, 0o755); err != nil {
			return nil, err
		}
	} else {
		if w.runs, err = os.MkdirTemp("", "lumina-paper-runs-"); err != nil {
			return nil, err
		}
		defer func() {
			if rerr := os.RemoveAll(w.runs); rerr != nil && err == nil {
				err = rerr
			}
		}()
	}
	progress := opt.Progress
	for _, name := range PaperFigures {
		if !slices.Contains(figures, name) {
			continue
		}
		pg, err := w.page(name)
		if err != nil {
			return pages, fmt.Errorf("lumina: paper %s: %w", name, err)
		}
		pages = append(pages, pg)
		if progress != nil {
			fmt.Fprintf(progress, "%s: %d checks, %d missed\n", pg.File, len(pg.Checks), pg.Misses())
		}
	}
	idx := report.NewPage("Lumina's figures on the twin")
	idx.Subtitle = "The paper's §6 settings run on the virtual testbed; every number read from the traces by the analyzer"
	runs := "The runs' result directories were removed once their numbers were read (--keep-runs keeps them under runs/)."
	if opt.KeepRuns {
		runs = "The runs' result directories are under runs/."
	}
	idx.Paragraph("Each page puts the paper's figure beside the twin's, with the tolerance it is checked within; " +
		"a check outside its tolerance is a miss and says so. " + runs)
	var links []report.Link
	for _, pg := range pages {
		note := report.Pass(fmt.Sprintf("%d of %d checks within tolerance", len(pg.Checks), len(pg.Checks)))
		if m := pg.Misses(); m > 0 {
			note = report.Fail(fmt.Sprintf("%d of %d checks within tolerance, %d missed", len(pg.Checks)-m, len(pg.Checks), m))
		}
		links = append(links, report.Link{Text: pg.Title, Href: pg.File, Note: note})
	}
	idx.Links(links...)
	return pages, idx.WriteFile(filepath.Join(out, "index.html"))
}

// paperWriter runs the settings and keeps what two pages share (Figures 8
// and 9 read the same runs, as do Tables 3 and 4).
type paperWriter struct {
	ctx  context.Context
	out  string
	runs string // where the runs' result directories go
	nack map[string]*nackSweep
	cnp  map[string]CNPTable
}

// nackSweep is one NIC's Figures 8/9 runs: per message size, the dropped
// positions and their latencies.
type nackSweep struct {
	psn        map[int][]float64
	gen, react map[int][]float64
}

func (w *paperWriter) dir(name string) (string, error) {
	return os.MkdirTemp(w.runs, name+"-")
}

func (w *paperWriter) page(name string) (PaperPage, error) {
	var p *report.Page
	var pg PaperPage
	var err error
	switch name {
	case "fig8", "fig9":
		p, pg, err = w.nackPage(name)
	case "fig10a":
		p, pg, err = w.fig10a()
	case "fig10b":
		p, pg, err = w.fig10b()
	case "table2":
		p, pg, err = w.table2()
	case "table3", "table4":
		p, pg, err = w.cnpPage(name)
	case "cnpcheck":
		p, pg, err = w.cnpCheck()
	}
	if err != nil {
		return pg, err
	}
	pg.Name, pg.File = name, name+".html"
	p.Section("Checks")
	t := report.Table{Header: []string{"check", "paper", "twin", "tolerance", "verdict"}}
	for _, c := range pg.Checks {
		v := report.Pass("within")
		if !c.OK {
			v = report.Fail("MISSED")
		}
		t.Rows = append(t.Rows, []report.Cell{{Text: c.What}, {Text: c.Paper}, {Text: c.Twin}, {Text: c.Tolerance}, v})
	}
	p.Table(t)
	p.Links(report.Link{Text: "all figures", Href: "index.html"})
	return pg, p.WriteFile(filepath.Join(w.out, pg.File))
}

// sweepNACK runs Figures 8/9's setting for nic: every position of a 20 KB
// WRITE but the tail (whose loss a timeout recovers), every position of
// the first 20 of a 100 KB one and every fifth after.
func (w *paperWriter) sweepNACK(nic string) (*nackSweep, error) {
	if s := w.nack[nic]; s != nil {
		return s, nil
	}
	s := &nackSweep{psn: map[int][]float64{}, gen: map[int][]float64{}, react: map[int][]float64{}}
	for _, kb := range []int{20, 100} {
		for psn := 0; psn < kb-1; psn++ {
			if kb == 100 && psn >= 20 && psn%5 != 0 {
				continue
			}
			d, err := w.dir(fmt.Sprintf("fig89-%s-%dk-%d", nic, kb, psn))
			if err != nil {
				return nil, err
			}
			g, r, err := NACKSample(w.ctx, d, nic, kb<<10, psn)
			if err != nil {
				return nil, err
			}
			s.psn[kb] = append(s.psn[kb], float64(psn))
			s.gen[kb], s.react[kb] = append(s.gen[kb], g), append(s.react[kb], r)
		}
	}
	if w.nack == nil {
		w.nack = map[string]*nackSweep{}
	}
	w.nack[nic] = s
	return s, nil
}

func meanOf(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// within says whether v is within frac of want.
func within(v, want, frac float64) bool { return math.Abs(v-want) <= frac*want }

func (w *paperWriter) nackPage(name string) (*report.Page, PaperPage, error) {
	fig8 := name == "fig8"
	pg := PaperPage{Title: "Figure 9: NACK reaction latency"}
	p := report.NewPage(pg.Title)
	if fig8 {
		pg.Title = "Figure 8: NACK generation latency"
		p = report.NewPage(pg.Title)
	}
	p.Subtitle = "One connection, one WRITE of 20 KB or 100 KB, one packet dropped, its position swept (Lumina §6.2)"
	c := &report.Chart{Kind: report.Scatter, XLabel: "dropped packet (PSN within the message)", YLabel: "microseconds"}
	for _, nic := range PaperNICs {
		s, err := w.sweepNACK(nic)
		if err != nil {
			return nil, pg, err
		}
		all := func(m map[int][]float64) []float64 { return append(append([]float64(nil), m[20]...), m[100]...) }
		if fig8 {
			g := meanOf(all(s.gen))
			pg.Checks = append(pg.Checks, PaperCheck{What: nic + ": mean NACK generation", Paper: "about 1.1 us",
				Twin: fmt.Sprintf("%.2f us", g), Tolerance: "10%", OK: within(g, 1.1, 0.1)})
			c.Series = append(c.Series, report.Series{Name: nic + " 100 KB", X: s.psn[100], Y: s.gen[100]})
			continue
		}
		r := meanOf(all(s.react))
		lo, hi := 3.0, 6.0
		if nic == "CX4" {
			lo, hi = 150, 200
		}
		pg.Checks = append(pg.Checks, PaperCheck{What: nic + ": mean NACK reaction", Paper: fmt.Sprintf("%g-%g us", lo, hi),
			Twin: fmt.Sprintf("%.2f us", r), Tolerance: "inside the range", OK: r >= lo && r <= hi})
		if nic == "CX4" {
			continue
		}
		var early, late []float64
		for i, psn := range s.psn[100] {
			if psn < 20 {
				early = append(early, s.react[100][i])
			} else if psn >= 50 {
				late = append(late, s.react[100][i])
			}
		}
		e, l := meanOf(early), meanOf(late)
		pg.Checks = append(pg.Checks,
			PaperCheck{What: nic + ": 100 KB, one of the first 20 packets dropped", Paper: "about 6 us",
				Twin: fmt.Sprintf("%.2f us", e), Tolerance: "10%", OK: within(e, 6, 0.1)},
			PaperCheck{What: nic + ": 100 KB, a later packet (from the 50th) dropped", Paper: "about 3 us",
				Twin: fmt.Sprintf("%.2f us", l), Tolerance: "10%", OK: within(l, 3, 0.1)})
		c.Series = append(c.Series, report.Series{Name: nic + " 100 KB", X: s.psn[100], Y: s.react[100]},
			report.Series{Name: nic + " 20 KB", X: s.psn[20], Y: s.react[20]})
	}
	if fig8 {
		c.Title = "NACK generation latency against the dropped packet (100 KB)"
		p.Paragraph("The time from the first packet after the lost one to the NACK, both at the switch. The profiles' " +
			"generation delay is the paper's 1.1 us less the twin's path on the links of the NIC's testbed " +
			"(100G for CX5/CX6, 40G for the CX4 Lx). CX4's 13 us for the last packets of a message is not modelled.")
	} else {
		c.Title = "NACK reaction latency of CX5 and CX6 against the dropped packet"
		p.Paragraph("The time from the NACK to the retransmission, both at the switch. A retransmission is queued behind " +
			"the frames already in the transmit pipeline (66 on CX5/CX6) and the QP builds nothing new while it " +
			"reacts, so it waits for the longer of the reaction (3 us) and the pipeline's drain: about 6 us while the " +
			"NAK still finds the pipeline full (the first ~20 packets of 100 KB), 3 us once the message has left it. " +
			"CX5 and CX6 share these parameters, so CX6's points cover CX5's. CX4 reacts in firmware (175 us), off this " +
			"chart's scale.")
	}
	p.Section("Figure")
	p.Chart(c)
	return p, pg, nil
}

// fig10Sizes are Figure 10's message sizes, in KB.
var fig10Sizes = []int{10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 140, 160, 200}

// PlateauFrom is the first of sizes from which every later value stays
// within tol (a fraction) of the last one.
func PlateauFrom(sizes []int, v map[int]float64, tol float64) int {
	last := v[sizes[len(sizes)-1]]
	from := sizes[len(sizes)-1]
	for i := len(sizes) - 1; i >= 0 && math.Abs(v[sizes[i]]-last) <= tol*math.Abs(last); i-- {
		from = sizes[i]
	}
	return from
}

// fig10Checks are Figure 10's shape checks on a curve over sizes: flat
// near flat up to 50 KB, growth from there, constant beyond 120 KB, and
// where the growth ends against the paper's 120 KB.
func fig10Checks(what string, sizes []int, v map[int]float64, flat, flatTol float64) []PaperCheck {
	var out []PaperCheck
	worst := 0.0
	for _, kb := range sizes {
		if kb <= 50 {
			worst = max(worst, math.Abs(v[kb]-flat))
		}
	}
	out = append(out, PaperCheck{What: what + " up to 50 KB", Paper: fmt.Sprintf("flat, %g us", flat),
		Twin: fmt.Sprintf("at most %.2f us off", worst), Tolerance: fmt.Sprintf("%.2f us", flatTol), OK: worst <= flatTol})
	i50 := slices.Index(sizes, 50)
	grows := i50 >= 0 && i50+1 < len(sizes) && v[sizes[i50+1]] > v[50]+0.1
	out = append(out, PaperCheck{What: what + " beyond 50 KB", Paper: "grows", Twin: fmt.Sprintf("%.2f us at %d KB, %.2f at 50",
		v[sizes[i50+1]], sizes[i50+1], v[50]), Tolerance: "more than 0.1 us", OK: grows})
	worst = 0
	for _, kb := range sizes {
		if kb > 120 {
			worst = max(worst, math.Abs(v[kb]-v[120]))
		}
	}
	out = append(out, PaperCheck{What: what + " beyond 120 KB", Paper: "constant", Twin: fmt.Sprintf("at most %.2f us from 120 KB's", worst),
		Tolerance: "2% of 120 KB's", OK: worst <= 0.02*math.Abs(v[120])+1e-9})
	from := PlateauFrom(sizes, v, 0.02)
	out = append(out, PaperCheck{What: what + ": growth ends", Paper: "about 120 KB", Twin: fmt.Sprintf("by %d KB", from),
		Tolerance: "10%", OK: within(float64(from), 120, 0.1)})
	return out
}

func (w *paperWriter) fig10a() (*report.Page, PaperPage, error) {
	pg := PaperPage{Title: "Figure 10(a): retransmission latency against message size (CX6)"}
	p := report.NewPage(pg.Title)
	p.Subtitle = "One connection, the fifth packet of one WRITE dropped, 10-200 KB (Lumina §6.2)"
	lat := map[int]float64{}
	var x, y []float64
	for _, kb := range fig10Sizes {
		d, err := w.dir(fmt.Sprintf("fig10a-%dk", kb))
		if err != nil {
			return nil, pg, err
		}
		v, err := RetransLatency(w.ctx, d, "CX6", kb<<10)
		if err != nil {
			return nil, pg, err
		}
		lat[kb] = v
		x, y = append(x, float64(kb)), append(y, v)
	}
	pg.Checks = fig10Checks("retransmission latency", fig10Sizes, lat, 4.5, 0.45)
	p.Paragraph("The time from the lost packet to its retransmission, at the switch. The growth ends when the transmit " +
		"pipeline is full as the NAK arrives; with the 66-frame pipeline that Figure 9(b)'s levels give, that is about " +
		"85 KB. A pipeline drained at line rate cannot give both Figure 9(b)'s 6 us at 100 KB and growth to 120 KB " +
		"(that would need about 7.4 us at 100 KB), so the twin follows Figure 9(b) and misses this knee.")
	p.Section("Figure")
	p.Chart(&report.Chart{Title: "Retransmission latency (CX6, fifth packet dropped)", Kind: report.Line, Markers: true,
		XLabel: "message size (KB)", YLabel: "microseconds", Series: []report.Series{{Name: "twin", X: x, Y: y}}})
	return p, pg, nil
}

func (w *paperWriter) fig10b() (*report.Page, PaperPage, error) {
	pg := PaperPage{Title: "Figure 10(b): actual against ideal message completion time (CX6)"}
	p := report.NewPage(pg.Title)
	p.Subtitle = "The traffic generator's MCT with the fifth packet dropped, against the same message without a loss plus 4.5 us"
	excess := map[int]float64{}
	var x, actual, ideal []float64
	for _, kb := range fig10Sizes {
		var v [2]float64
		for i, ev := range []string{"ecn", "drop"} {
			d, err := w.dir(fmt.Sprintf("fig10b-%dk-%s", kb, ev))
			if err != nil {
				return nil, pg, err
			}
			if v[i], err = MCT(w.ctx, d, kb<<10, ev); err != nil {
				return nil, pg, err
			}
		}
		excess[kb] = v[1] - (v[0] + 4.5)
		x, actual, ideal = append(x, float64(kb)), append(actual, v[1]), append(ideal, v[0]+4.5)
	}
	pg.Checks = fig10Checks("actual MCT less the ideal", fig10Sizes, excess, 0, 0.45)
	p.Paragraph("\"Ideal\" is the MCT of the same message with an ECN mark on the fifth packet instead of a drop (no " +
		"retransmission; the reaction point is off) plus the paper's fixed 4.5 us. The actual MCT grows faster from " +
		"50 KB for as long as Figure 10(a)'s latency grows.")
	p.Section("Figure")
	p.Chart(&report.Chart{Title: "Message completion time (CX6)", Kind: report.Line, Markers: true, XLabel: "message size (KB)",
		YLabel: "microseconds", Series: []report.Series{{Name: "actual", X: x, Y: actual}, {Name: "ideal", X: x, Y: ideal}}})
	return p, pg, nil
}

// paperTable2 is Lumina's Table 2 in adaptive mode (non-adaptive: 7 for
// every message on every NIC).
var paperTable2 = map[string][5]int{"CX4": {13, 8, 7, 7, 7}, "CX5": {13, 8, 8, 8, 8}, "CX6": {13, 8, 8, 8, 8}}

func (w *paperWriter) table2() (*report.Page, PaperPage, error) {
	pg := PaperPage{Title: "Table 2: maximum retries of messages 1-5"}
	p := report.NewPage(pg.Title)
	p.Subtitle = "One connection, five 10 KB WRITEs, retry_cnt 7, timeout 14; the tail packet dropped until the QP gives up (Lumina §6.3)"
	p.Paragraph("A QP that gives up is in the error state and flushes the messages behind it, so message k gives up in a " +
		"run of its own: the tails of messages 1..k-1 are dropped 7 times each (Figure 12's setting, delivered on their " +
		"last retry), message k's on every transmission (the paper's count plus one: a NIC that gave up earlier leaves " +
		"drops unfired and the run invalid, one that retried more delivers). The retries are counted by the analyzer " +
		"from the trace. The adaptive budgets are the profiles' AdaptiveExtraRetries, which carry the paper's counts: " +
		"the paper gives them, not the NIC's rule.")
	t := report.Table{Header: []string{"mode", "NIC", "paper", "twin"}}
	for _, adaptive := range []bool{false, true} {
		for _, nic := range PaperNICs {
			var want, got [5]int
			ok := true
			for k := 1; k <= 5; k++ {
				want[k-1] = 7
				if adaptive {
					want[k-1] = paperTable2[nic][k-1]
				}
				d, err := w.dir(fmt.Sprintf("table2-%s-%v-%d", nic, adaptive, k))
				if err != nil {
					return nil, pg, err
				}
				col, err := RunTable2(w.ctx, d, nic, adaptive, k, want[k-1]+1)
				if err != nil {
					return nil, pg, err
				}
				got[k-1] = col.Retries
				ok = ok && col.GaveUp && col.Before == "" && col.Retries == want[k-1]
			}
			mode := map[bool]string{false: "non-adaptive", true: "adaptive"}[adaptive]
			t.Rows = append(t.Rows, report.Row(mode, nic, fmt.Sprint(want), fmt.Sprint(got)))
			pg.Checks = append(pg.Checks, PaperCheck{What: mode + " " + nic, Paper: fmt.Sprint(want), Twin: fmt.Sprint(got),
				Tolerance: "exact, each message gave up", OK: ok})
		}
	}
	p.Section("Table")
	p.Table(t)
	return p, pg, nil
}

func (w *paperWriter) cnpPage(name string) (*report.Page, PaperPage, error) {
	if w.cnp == nil {
		w.cnp = map[string]CNPTable{}
		for _, nic := range PaperNICs {
			d, err := w.dir("cnp-" + nic)
			if err != nil {
				return nil, PaperPage{}, err
			}
			if w.cnp[nic], err = RunCNPTable(w.ctx, d, nic); err != nil {
				return nil, PaperPage{}, err
			}
		}
	}
	setting := "Three connections from three requester addresses to one responder, a 1 MB WRITE each, the 50th and " +
		"950th packets ECN-marked, min_time_between_cnps 50 us, DCQCN's reaction off (Lumina §6.4); CX4 on 40G links"
	if name == "table4" {
		pg := PaperPage{Title: "Table 4: CNPs per QP"}
		p := report.NewPage(pg.Title)
		p.Subtitle = setting
		t := report.Table{Header: []string{"NIC", "pacing", "paper QP1-3", "twin QP1-3"}}
		for _, nic := range PaperNICs {
			want, scope := [3]int64{2, 2, 2}, "per destination IP"
			if nic == "CX6" {
				want, scope = [3]int64{2, 0, 0}, "per port"
			}
			got := w.cnp[nic].CNPs
			t.Rows = append(t.Rows, report.Row(nic, scope, fmt.Sprint(want), fmt.Sprint(got)))
			pg.Checks = append(pg.Checks, PaperCheck{What: nic + " CNPs of QP1-3", Paper: fmt.Sprint(want), Twin: fmt.Sprint(got),
				Tolerance: "exact", OK: got == want})
		}
		p.Section("Table")
		p.Table(t)
		return p, pg, nil
	}
	pg := PaperPage{Title: "Table 3: times of the ECN-marked packets"}
	p := report.NewPage(pg.Title)
	p.Subtitle = setting
	p.Paragraph("Times from the trace's first packet; the paper's QP1-3 are the QPs in the order of their first marks. " +
		"The second marks come from the three QPs sharing the link and are checked within 10%. The paper's first " +
		"marks are spread wider than the twin's equal shares, its QP1 ahead at both marks, as when the QPs did not " +
		"start together; the paper gives no start offsets, so none is modelled and those checks are misses.")
	paper1 := map[string][3]float64{"CX4": {10, 31, 45}, "CX5": {8, 17, 18}, "CX6": {9, 16, 17}}
	paper2 := map[string][3]float64{"CX4": {616, 630, 643}, "CX5": {246, 255, 258}, "CX6": {246, 254, 259}}
	t := report.Table{Header: []string{"NIC", "paper 1st (us)", "twin 1st (us)", "paper 2nd (us)", "twin 2nd (us)"}}
	f := func(v [3]float64) string { return fmt.Sprintf("%.1f / %.1f / %.1f", v[0], v[1], v[2]) }
	for _, nic := range PaperNICs {
		tab := w.cnp[nic]
		t.Rows = append(t.Rows, report.Row(nic, f(paper1[nic]), f(tab.First), f(paper2[nic]), f(tab.Second)))
		for i := range 3 {
			pg.Checks = append(pg.Checks,
				PaperCheck{What: fmt.Sprintf("%s QP%d 1st mark", nic, i+1), Paper: fmt.Sprintf("%g us", paper1[nic][i]),
					Twin: fmt.Sprintf("%.1f us", tab.First[i]), Tolerance: "10%", OK: within(tab.First[i], paper1[nic][i], 0.1)},
				PaperCheck{What: fmt.Sprintf("%s QP%d 2nd mark", nic, i+1), Paper: fmt.Sprintf("%g us", paper2[nic][i]),
					Twin: fmt.Sprintf("%.1f us", tab.Second[i]), Tolerance: "10%", OK: within(tab.Second[i], paper2[nic][i], 0.1)})
		}
	}
	p.Section("Table")
	p.Table(t)
	return p, pg, nil
}

// cnpCheck is Lumina's own CNP check (test_cnp's expected counts per
// pacing mode, luminaanalyzer.LuminaCNPCheck) on the twin's runs of
// CNPPacingTest: each NIC must pass the mode §6.4 and Lumina's code give
// it, and only that one.
func (w *paperWriter) cnpCheck() (*report.Page, PaperPage, error) {
	pg := PaperPage{Title: "Lumina's CNP check (test_cnp) per pacing mode"}
	p := report.NewPage(pg.Title)
	p.Subtitle = "Four QPs over two requester and four responder addresses, every packet ECN-marked, " +
		"min_time_between_cnps 100 us; with losses, two packets dropped and slow restart on"
	p.Paragraph("Lumina's e2e test_cnp derives, from the switch's timestamps of the ECN-marked packets (and of the NAKs " +
		"where the NIC sends a CNP with one), how many CNPs the receiver should send if it paced per NIC port, per IP " +
		"pair or per destination IP, and compares with the CNPs in the trace. The addresses group the QPs three ways, " +
		"so the three modes expect different counts and a NIC passes only its own: per port on CX6, per destination IP " +
		"on CX4 and CX5 (§6.4), every mode on the E810, which Lumina checks with no interval.")
	want := map[string][]string{"CX4": {luminaanalyzer.ScopeDestIP}, "CX5": {luminaanalyzer.ScopeDestIP},
		"CX6": {luminaanalyzer.ScopePort}, "E810": {luminaanalyzer.ScopePort, luminaanalyzer.ScopeIPPair, luminaanalyzer.ScopeDestIP}}
	t := report.Table{Header: []string{"NIC", "losses", "mode", "expected", "sent", "Lumina's verdict"}}
	for _, losses := range []bool{false, true} {
		for _, nic := range []string{"CX4", "CX5", "CX6", "E810"} {
			d, err := w.dir(fmt.Sprintf("cnpcheck-%s-%v", nic, losses))
			if err != nil {
				return nil, pg, err
			}
			l, err := RunLuminaCNP(w.ctx, d, nic, 50, losses)
			if err != nil {
				return nil, pg, err
			}
			for _, m := range l.Modes {
				var e, a []string
				for _, g := range m.Groups {
					e, a = append(e, fmt.Sprint(g.Expected)), append(a, fmt.Sprint(g.CNPs))
				}
				v := report.Fail("fail")
				if m.Pass {
					v = report.Pass("pass")
				}
				t.Rows = append(t.Rows, []report.Cell{{Text: nic}, {Text: fmt.Sprint(losses)}, {Text: m.Mode},
					{Text: strings.Join(e, " / ")}, {Text: strings.Join(a, " / ")}, v})
			}
			got := l.Passing()
			what := nic + " passes"
			if losses {
				what += " (with losses)"
			}
			pg.Checks = append(pg.Checks, PaperCheck{What: what, Paper: strings.Join(want[nic], ", "),
				Twin: strings.Join(got, ", "), Tolerance: "exact", OK: slices.Equal(got, want[nic])})
		}
	}
	p.Section("Expected and sent CNPs per group (port; IP pairs; data senders)")
	p.Table(t)
	return p, pg, nil
}
