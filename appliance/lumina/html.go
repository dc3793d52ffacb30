package lumina

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/collector/luminaanalyzer"
	"github.com/rdma-appliance/appliance/internal/report"
)

// AnalyzeRun runs the analyzers on a finished repeat's directory and
// writes what a user reads: analysis.json, summary.txt, the plots (SVG
// and PNG) and report.html. It returns a one-line verdict and whether the
// RNICs behaved by the rules (a valid trace, Go-back-N kept, counters as
// the trace implies).
func AnalyzeRun(ctx context.Context, dir string, m *luminaanalyzer.Meta) (string, bool, error) {
	return AnalyzeRunOptions(luminaanalyzer.Options{})(ctx, dir, m)
}

// SoftOptions are the analyzers' settings for runs on the software
// testbed: its middlebox is a goroutine on a shared machine and may hold
// a packet for far longer than a switch, so an ACK can reach the
// requester a long time after it was mirrored.
func SoftOptions() luminaanalyzer.Options { return luminaanalyzer.Options{Slack: time.Second} }

// AnalyzeRunOptions is AnalyzeRun with the analyzers' options.
func AnalyzeRunOptions(opt luminaanalyzer.Options) func(ctx context.Context, dir string, m *luminaanalyzer.Meta) (string, bool, error) {
	return func(ctx context.Context, dir string, m *luminaanalyzer.Meta) (string, bool, error) {
		return analyzeRun(ctx, dir, m, opt)
	}
}

func analyzeRun(ctx context.Context, dir string, m *luminaanalyzer.Meta, opt luminaanalyzer.Options) (string, bool, error) {
	rep, err := Analyze(ctx, dir, m, opt)
	if err != nil {
		return "", false, err
	}
	v, ok := Verdict(rep)
	return v, ok, nil
}

// Analyze runs the analyzers on a finished run directory (meta m and its
// trace) and writes what a user reads there: analysis.json, summary.txt,
// the plots (SVG and PNG) and report.html. It returns the report.
func Analyze(ctx context.Context, dir string, m *luminaanalyzer.Meta, opt luminaanalyzer.Options) (*luminaanalyzer.Report, error) {
	// Lumina's own CNP check beside ours, as its test_cnp would judge the
	// run, in the same pass over the trace.
	opt.LuminaCNP = true
	rep, err := luminaanalyzer.AnalyzeOptions(ctx, filepath.Join(dir, m.Trace), m, opt)
	if err != nil {
		return nil, err
	}
	if err := rep.WriteFiles(dir); err != nil {
		return nil, err
	}
	if err := WriteReport(dir, m, rep); err != nil {
		return nil, err
	}
	return rep, nil
}

// Verdict sums a report up in one line.
func Verdict(rep *luminaanalyzer.Report) (string, bool) {
	if !rep.Valid {
		return "analysis withheld: " + rep.Invalid, false
	}
	var parts []string
	ok := rep.GBN.Compliant && rep.Counters.Mismatches == 0
	if rep.GBN.Compliant {
		parts = append(parts, "go-back-N ok")
	} else {
		v := "go-back-N VIOLATED"
		if len(rep.GBN.Violations) > 0 {
			first := rep.GBN.Violations[0]
			v += fmt.Sprintf(" (conn %d %s: %s at %v)", first.Conn, first.Machine, first.Reason, first.Packet)
		}
		parts = append(parts, v)
	}
	if g := rep.Retransmission.Generation; g.Count > 0 {
		parts = append(parts, fmt.Sprintf("%d NAKs: generation %s, reaction %s (median)", g.Count,
			usStr(g.MedianNs), usStr(rep.Retransmission.Reaction.MedianNs)))
	}
	if t := rep.Timeouts; len(t.Retransmissions) > 0 {
		s := fmt.Sprintf("%d timeout retransmissions", len(t.Retransmissions))
		if t.RetryVerdict != "" {
			s += ", retries " + t.RetryVerdict
		}
		parts = append(parts, s)
	}
	if c := rep.CNP; c.CNPs > 0 {
		parts = append(parts, fmt.Sprintf("%d CNPs, pacing %s", c.CNPs, orDash(c.Scope)))
	}
	if rep.Counters.Mismatches > 0 {
		parts = append(parts, fmt.Sprintf("%d counter mismatches", rep.Counters.Mismatches))
	}
	return strings.Join(parts, "; "), ok
}

func usStr(ns int64) string { return fmt.Sprintf("%.1fus", float64(ns)/1e3) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// plots are the report's charts, also written as files.
func plots(rep *luminaanalyzer.Report) map[string]*report.Chart {
	out := map[string]*report.Chart{}
	if n := rep.Retransmission.NACK; len(n) > 0 {
		var x, gen, react []float64
		for _, l := range n {
			x = append(x, float64(l.RelPSN))
			gen = append(gen, float64(l.GenerationNs)/1e3)
			react = append(react, float64(l.ReactionNs)/1e3)
		}
		out["nack-latency"] = &report.Chart{Title: "NACK latency per dropped packet (Lumina Fig. 8/9)", Kind: report.Scatter,
			XLabel: "dropped PSN within its message", YLabel: "microseconds",
			Series: []report.Series{{Name: "NACK generation", X: x, Y: gen}, {Name: "NACK reaction", X: x, Y: react}}}
	}
	if t := rep.Timeouts.Retransmissions; len(t) > 0 {
		var x, y []float64
		for _, r := range t {
			if r.IntervalNs >= 0 {
				x, y = append(x, float64(r.Retry)), append(y, float64(r.IntervalNs)/1e6)
			}
		}
		min := float64(rep.Timeouts.MinTimeoutNs) / 1e6
		out["timeouts"] = &report.Chart{Title: "Timeout retransmission intervals (Lumina Fig. 12)", Kind: report.Scatter,
			XLabel: "retry", YLabel: "milliseconds", Series: []report.Series{{Name: "interval", X: x, Y: y},
				{Name: "configured minimum", X: []float64{0, float64(max(len(x), 1))}, Y: []float64{min, min}}}}
	}
	if ev := rep.CNP.Events; len(ev) > 0 {
		series := map[string]*report.Series{}
		var order []string
		t0 := ev[0].TimeNs
		for _, e := range ev {
			s := series[e.Kind]
			if s == nil {
				s = &report.Series{Name: e.Kind}
				series[e.Kind] = s
				order = append(order, e.Kind)
			}
			s.X = append(s.X, float64(e.TimeNs-t0)/1e3)
			s.Y = append(s.Y, float64(e.Conn))
		}
		c := &report.Chart{Title: "CE marks, NAK gaps and CNPs over time", Kind: report.Scatter,
			XLabel: "microseconds from the first event", YLabel: "connection"}
		for _, k := range order {
			c.Series = append(c.Series, *series[k])
		}
		out["cnp-timeline"] = c
	}
	return out
}

// WriteReport writes report.html and the plots into a run directory.
func WriteReport(dir string, m *luminaanalyzer.Meta, rep *luminaanalyzer.Report) error {
	charts := plots(rep)
	if err := writeCharts(dir, charts); err != nil {
		return err
	}
	verdict, ok := Verdict(rep)
	p := report.NewPage(fmt.Sprintf("Lumina: %s, repeat %d", filepath.Base(m.Test), m.Repeat))
	p.Subtitle = verdict
	runSection(p, m, rep, ok)
	gbnSection(p, rep)
	retransmissionSection(p, rep, charts["nack-latency"])
	timeoutSection(p, rep, charts["timeouts"])
	cnpSection(p, rep, charts["cnp-timeline"])
	countersSection(p, rep)
	mctSection(p, m, rep)
	return p.WriteFile(filepath.Join(dir, luminaanalyzer.ReportFile))
}

// writeCharts writes each chart as SVG and PNG, for users who want a
// figure without the page.
func writeCharts(dir string, charts map[string]*report.Chart) error {
	for name, c := range charts {
		for ext, render := range map[string]func(*report.Chart, *os.File) error{
			".svg": func(c *report.Chart, f *os.File) error { return c.SVG(f) },
			".png": func(c *report.Chart, f *os.File) error { return c.PNG(f) }} {
			f, err := os.Create(filepath.Join(dir, name+ext))
			if err != nil {
				return err
			}
			err = render(c, f)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// runSection is what was run and whether the trace may be believed, with
// a line per connection; an invalid trace is said so before any figure.
func runSection(p *report.Page, m *luminaanalyzer.Meta, rep *luminaanalyzer.Report, ok bool) {
	p.Section("Run")
	validity := report.Verdict(rep.Valid)
	if !rep.Valid {
		validity.Text = "INVALID: " + rep.Invalid
	}
	p.KeyValues(
		report.KV{Key: "trace", Value: validity},
		report.KV{Key: "RNIC behaviour", Value: report.Verdict(ok)},
		report.KV{Key: "traffic", Value: fmt.Sprintf("%s, %d QPs x %d messages of %d B, MTU %d, tx-depth %d",
			m.Geometry.Verb, len(m.Conns), m.Geometry.NumMessages, m.Geometry.MessageSize, m.Geometry.MTU, m.TxDepth)},
		report.KV{Key: "packets", Value: rep.Summary.Packets},
		report.KV{Key: "events", Value: eventsLine(rep.Summary.Events)},
		report.KV{Key: "CNPs", Value: rep.Summary.CNPs},
		report.KV{Key: "duration", Value: usStr(rep.Summary.DurationNs)},
		report.KV{Key: "requester NIC", Value: fmt.Sprintf("%s, min-time-between-cnps %s", m.RequesterNIC.Type, usStr(m.RequesterNIC.MinTimeBetweenCNPs))},
		report.KV{Key: "responder NIC", Value: fmt.Sprintf("%s, min-time-between-cnps %s", m.ResponderNIC.Type, usStr(m.ResponderNIC.MinTimeBetweenCNPs))},
	)
	if !rep.Valid {
		p.Paragraph("The trace failed its integrity check: the figures below are not results.")
	}
	conns := report.Table{Caption: "Connections", Header: []string{"#", "requester QPN", "responder QPN", "data", "retransmitted",
		"lost", "NAKs", "timeouts", "CE", "CNPs", "go-back-N"}}
	for _, c := range rep.Connections {
		conns.Rows = append(conns.Rows, report.Row(c.Index, fmt.Sprintf("%#x", c.Conn.RequesterQPN), fmt.Sprintf("%#x", c.Conn.ResponderQPN),
			c.DataPackets, c.Retransmitted, c.Lost, c.NAKs, c.Timeouts, c.CEMarked, c.CNPs, c.Compliant))
	}
	p.Table(conns)
}

// gbnSection is the Go-back-N verdict, with each violation's packet.
func gbnSection(p *report.Page, rep *luminaanalyzer.Report) {
	p.Section("Go-back-N")
	if rep.GBN.Compliant {
		p.Paragraph("Every connection followed Go-back-N: NAKs for the expected PSN, retransmission from it, in order.")
		return
	}
	t := report.Table{Header: []string{"conn", "machine", "node", "packet", "reason", "violations"}}
	for _, v := range rep.GBN.Violations {
		t.Rows = append(t.Rows, []report.Cell{report.Row(v.Conn)[0], {Text: v.Machine}, {Text: v.Node},
			{Text: v.Packet.String()}, report.Fail(v.Reason), report.Row(v.Count)[0]})
	}
	p.Table(t)
}

// retransmissionSection is the NACK latency (Lumina Fig. 8/9) and what
// recovered each loss, the first 200 of them.
func retransmissionSection(p *report.Page, rep *luminaanalyzer.Report, chart *report.Chart) {
	p.Section("Retransmission latency")
	r := rep.Retransmission
	p.KeyValues(report.KV{Key: "NACK generation", Value: statsLine(r.Generation)},
		report.KV{Key: "NACK reaction", Value: statsLine(r.Reaction)},
		report.KV{Key: "total", Value: statsLine(r.Total)})
	if chart != nil {
		p.Chart(chart)
	}
	if len(r.Losses) == 0 {
		return
	}
	t := report.Table{Caption: "Losses and their recovery", Header: []string{"conn", "message", "rel. PSN", "packet", "recovered by", "latency"}}
	for i, l := range r.Losses {
		if i == 200 {
			t.Caption += fmt.Sprintf(" (first 200 of %d)", len(r.Losses))
			break
		}
		rec := report.Pass(l.RecoveredBy)
		if l.RecoveredBy == "" {
			rec = report.Fail("never resent")
		}
		t.Rows = append(t.Rows, []report.Cell{report.Row(l.Conn)[0], report.Row(l.Message)[0], report.Row(l.RelPSN)[0],
			{Text: l.Packet.String()}, rec, {Text: usStr(l.LatencyNs)}})
	}
	p.Table(t)
}

// timeoutSection is the timeout retransmission intervals against the
// configured minimum (Lumina Fig. 12) and the give-ups.
func timeoutSection(p *report.Page, rep *luminaanalyzer.Report, chart *report.Chart) {
	p.Section("Timeouts")
	to := rep.Timeouts
	p.KeyValues(report.KV{Key: "configured", Value: fmt.Sprintf("timeout %d (%s), retry_cnt %d", to.Timeout, usStr(to.MinTimeoutNs), to.RetryCnt)},
		report.KV{Key: "intervals", Value: statsLine(to.Intervals)},
		report.KV{Key: "below the minimum", Value: to.BelowMinimum},
		report.KV{Key: "gave up", Value: fmt.Sprintf("%d messages, retries %s", to.GiveUps, orDash(to.RetryVerdict))})
	if chart != nil {
		p.Chart(chart)
	}
}

// cnpSection is the CNP analysis: the counts, each pacing scope's test,
// the CNPs per IP pair and their timeline.
func cnpSection(p *report.Page, rep *luminaanalyzer.Report, chart *report.Chart) {
	p.Section("CNPs")
	cn := rep.CNP
	p.KeyValues(report.KV{Key: "CNPs", Value: cn.CNPs}, report.KV{Key: "CE-marked delivered", Value: cn.CEMarked},
		report.KV{Key: "CE answered", Value: cn.CEAnswered}, report.KV{Key: "pacing scope", Value: orDash(cn.Scope)},
		report.KV{Key: "consistent scopes", Value: strings.Join(cn.Consistent, ", ")},
		report.KV{Key: "NAK triggers CNP", Value: cn.NAKTriggersCNP}, report.KV{Key: "unexplained CNPs", Value: cn.Unexplained})
	if len(cn.Scopes) > 0 {
		t := report.Table{Caption: "Pacing scopes tested against the trace", Header: []string{"scope", "keys", "observed min interval",
			"interval bounds", "conflicts", "consistent"}}
		for _, s := range cn.Scopes {
			t.Rows = append(t.Rows, []report.Cell{{Text: s.Scope}, report.Row(s.Keys)[0], {Text: usOrDash(s.ObservedMinIntervalNs)},
				{Text: "[" + usOrDash(s.LowerNs) + ", " + usOrDash(s.UpperNs) + "]"}, report.Row(s.Conflicts)[0], report.Verdict(s.Consistent)})
		}
		p.Table(t)
	}
	if len(cn.ByIPPair) > 0 {
		t := report.Table{Caption: "CNPs per IP pair", Header: []string{"from", "to", "CNPs"}}
		for _, pr := range cn.ByIPPair {
			t.Rows = append(t.Rows, report.Row(pr.Src, pr.Dst, pr.Count))
		}
		p.Table(t)
	}
	if chart != nil {
		p.Chart(chart)
	}
}

// countersSection compares the RNICs' counters with what the trace
// implies, or says they were not available.
func countersSection(p *report.Page, rep *luminaanalyzer.Report) {
	p.Section("Counters")
	if len(rep.Counters.Checks) == 0 {
		p.Paragraph("The RNICs' counters were not available.")
		return
	}
	t := report.Table{Header: []string{"node", "counter", "expected", "observed", "basis", "match"}}
	for _, c := range rep.Counters.Checks {
		obs := fmt.Sprint(c.Observed)
		if !c.Present {
			obs = "-"
		}
		t.Rows = append(t.Rows, []report.Cell{{Text: c.Node}, {Text: c.Counter}, report.Row(c.Expected)[0], {Text: obs},
			{Text: c.Basis}, report.Verdict(c.Match)})
	}
	p.Table(t)
}

// mctSection is the message completion times, with their CDF from the
// traffic generators' own samples.
func mctSection(p *report.Page, m *luminaanalyzer.Meta, rep *luminaanalyzer.Report) {
	p.Section("Message completion times")
	p.KeyValues(report.KV{Key: "all messages", Value: statsLine(rep.MCT.Overall)})
	var sample []float64
	for _, q := range m.MCT {
		for _, ns := range q {
			sample = append(sample, float64(ns)/1e3)
		}
	}
	if len(sample) > 0 {
		p.Chart(&report.Chart{Title: "Message completion time CDF", Kind: report.Step, XLabel: "microseconds", YLabel: "fraction",
			Series: []report.Series{report.CDF("MCT", sample)}})
	}
}

func usOrDash(ns int64) string {
	if ns < 0 {
		return "-"
	}
	return usStr(ns)
}

func statsLine(s luminaanalyzer.Stats) string {
	if s.Count == 0 {
		return "-"
	}
	return fmt.Sprintf("n=%d min %s median %s p99 %s max %s", s.Count, usStr(s.MinNs), usStr(s.MedianNs), usStr(s.P99Ns), usStr(s.MaxNs))
}

// eventsLine lists the injected events the trace carries, in a fixed order.
func eventsLine(ev map[string]int64) string {
	var parts []string
	for _, k := range []string{"drop", "ecn", "bit-error"} {
		if ev[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, ev[k]))
		}
	}
	for k, v := range ev {
		if v > 0 && k != "drop" && k != "ecn" && k != "bit-error" && k != "none" {
			parts = append(parts, fmt.Sprintf("%s %d", k, v))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
