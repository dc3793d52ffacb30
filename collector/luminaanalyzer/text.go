package luminaanalyzer

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// WriteText writes a human summary of the report: one section per
// analyzer, verdicts first. An invalid test is said so at the top and
// every section is marked NOT VALID.
func (r *Report) WriteText(w io.Writer) error {
	tw := &textWriter{bw: bufio.NewWriter(w)}
	tw.header(r)
	tw.gbn(r)
	tw.retransmission(&r.Retransmission)
	tw.timeouts(&r.Timeouts)
	tw.cnp(&r.CNP)
	switch {
	case r.LuminaCNP != nil:
		tw.p("  Lumina's test_cnp (%s, NAK triggers CNP %v, min time between CNPs %v): %s", r.LuminaCNP.NIC,
			r.LuminaCNP.NACKTriggersCNP, dur(r.LuminaCNP.MinTimeNs), r.LuminaCNP)
	case r.LuminaCNPError != "":
		tw.p("  Lumina's test_cnp: not run: %s", r.LuminaCNPError)
	}
	tw.counters(&r.Counters)
	tw.mct(&r.MCT)
	if len(r.Notes) > 0 {
		tw.p("")
		tw.notes(r.Notes)
	}
	return tw.bw.Flush()
}

// textWriter writes the summary's lines; the first write error is the
// one Flush returns.
type textWriter struct{ bw *bufio.Writer }

func (tw *textWriter) p(format string, args ...any) { fmt.Fprintf(tw.bw, format+"\n", args...) }

// section starts an analyzer's section, marked when its figures come
// from a trace that failed the integrity check.
func (tw *textWriter) section(name string, valid bool) {
	tw.p("")
	if valid {
		tw.p("== %s", name)
	} else {
		tw.p("== %s (NOT VALID)", name)
	}
}

func (tw *textWriter) notes(ns []string) {
	for _, n := range ns {
		tw.p("  note: %s", n)
	}
}

// header names the test and the trace, and says first when the test is
// invalid, so that no figure below is taken for a result.
func (tw *textWriter) header(r *Report) {
	title := r.Test
	if title == "" {
		title = r.Trace
	}
	tw.p("Lumina analysis: %s (repeat %d)", title, r.Repeat)
	if !r.Valid {
		tw.p("")
		tw.p("*** INVALID TEST: %s ***", r.Invalid)
		tw.p("*** The figures below come from an incomplete trace and are NOT results. ***")
	}
	s := r.Summary
	tw.p("trace: %d packets (%d RoCE, %d outside the connections), %v, events: drop %d, ecn %d, bit-error %d; %d CNPs",
		s.Packets, s.RoCE, s.Unmatched, dur(s.DurationNs), s.Events["drop"], s.Events["ecn"], s.Events["bit-error"], s.CNPs)
	// By reason, so two runs over one trace print the same text.
	for _, k := range slices.Sorted(maps.Keys(s.Malformed)) {
		tw.p("  %d records skipped: %s", s.Malformed[k], k)
	}
}

// gbn is the Go-back-N verdict with each violation's offending packet,
// then a line per connection.
func (tw *textWriter) gbn(r *Report) {
	tw.section("Go-back-N logic", r.GBN.Valid)
	if r.GBN.Compliant {
		tw.p("compliant: %d connections, no violation", len(r.Connections))
	} else {
		tw.p("NOT compliant: %d violations", r.GBN.Count)
		for _, v := range r.GBN.Violations {
			tw.p("  conn %d %s (%s): %s", v.Conn, v.Machine, v.Node, v.Reason)
			tw.p("      offending packet: %v (%d violations of this machine)", v.Packet, v.Count)
		}
	}
	for i, c := range r.Connections {
		if i == maxTextRows {
			tw.p("  ... %d more connections in the JSON report", len(r.Connections)-i)
			break
		}
		term := ""
		if c.Terminated != "" {
			term = "; " + c.Terminated
		}
		tw.p("  conn %d %s %v qpn %#x -> %v qpn %#x: %d data, %d lost, %d retransmitted, %d gaps, %d NAKs, %d timeouts, %d CNPs%s",
			c.Index, strings.Join(c.Verbs, "+"), c.Conn.RequesterIP, c.Conn.RequesterQPN, c.Conn.ResponderIP,
			c.Conn.ResponderQPN, c.DataPackets, c.Lost, c.Retransmitted, c.Gaps, c.NAKs+c.ReadGaps, c.Timeouts, c.CNPs, term)
	}
	tw.notes(r.GBN.Notes)
}

// retransmission is the NAK-triggered retransmission latency (NACK
// generation and reaction) and what recovered each loss.
func (tw *textWriter) retransmission(rt *RetransReport) {
	tw.section("Retransmission latency (NAK-triggered)", rt.Valid)
	tw.p("%d NAKed gaps, %d lost transmissions", len(rt.NACK), len(rt.Losses))
	if len(rt.NACK) > 0 {
		tw.p("  NACK generation: %s", statStr(rt.Generation))
		tw.p("  NACK reaction:   %s", statStr(rt.Reaction))
		tw.p("  total:           %s", statStr(rt.Total))
		tw.p("  %5s %6s %8s %8s %12s %12s", "conn", "msg", "rel_psn", "event", "generation", "reaction")
		for i, n := range rt.NACK {
			if i == maxTextRows {
				tw.p("  ... %d more in the JSON report", len(rt.NACK)-i)
				break
			}
			tw.p("  %5d %6d %8d %8v %12v %12v", n.Conn, n.Message, n.RelPSN, n.Event, dur(n.GenerationNs), dur(n.ReactionNs))
		}
	}
	byCause := map[string]int{}
	for _, l := range rt.Losses {
		c := l.RecoveredBy
		if c == "" {
			c = "never resent"
		}
		byCause[c]++
	}
	if len(byCause) > 0 {
		var parts []string
		for _, k := range []string{"nak", "read-gap", "rnr", "timeout", "unexplained", "never resent"} {
			if byCause[k] > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", k, byCause[k]))
			}
		}
		tw.p("  losses recovered by: %s", strings.Join(parts, ", "))
	}
	tw.notes(rt.Notes)
}

// timeouts is the timeout retransmission: intervals against the
// configured minimum, per message retries, and the give-ups against
// retry_cnt.
func (tw *textWriter) timeouts(to *TimeoutReport) {
	tw.section("Timeout retransmission", to.Valid)
	tw.p("timeout %d (minimum %v), retry_cnt %d: %d retransmissions without a NAK, %d below the minimum",
		to.Timeout, dur(to.MinTimeoutNs), to.RetryCnt, len(to.Retransmissions), to.BelowMinimum)
	if len(to.Retransmissions) > 0 {
		tw.p("  intervals: %s", statStr(to.Intervals))
	}
	for i, m := range to.Messages {
		if i == maxTextRows {
			tw.p("  ... %d more messages in the JSON report", len(to.Messages)-i)
			break
		}
		gu := ""
		if m.GaveUp {
			gu = fmt.Sprintf(", gave up PSN %d: %s", m.PSN, m.Verdict)
		}
		tw.p("  conn %d msg %d: %d timeouts, %d NAK retries, at most %d retries in a row%s", m.Conn, m.Message, m.Timeouts,
			m.NAKRetries, m.MaxRetries, gu)
	}
	if to.GiveUps > 0 {
		tw.p("  %d give-ups; retries vs retry_cnt: %s", to.GiveUps, to.RetryVerdict)
	}
	tw.notes(to.Notes)
}

// cnp is the CNP analysis: counts, the breakdown by IP pair and QP, each
// pacing scope's bounds or the conflict that rules it out, the verdict.
func (tw *textWriter) cnp(cn *CNPReport) {
	tw.section("CNP", cn.Valid)
	tw.p("%d CNPs; %d CE-marked packets, %d answered; %d gaps, %d CNPs explained only by a gap (NAK triggers CNP: %s); %d unexplained",
		cn.CNPs, cn.CEMarked, cn.CEAnswered, cn.Gaps, cn.NAKCNPs, cn.NAKTriggersCNP, cn.Unexplained)
	if cn.MinTimeBetweenCNPsNs > 0 {
		tw.p("  configured min_time_between_cnps: %v", dur(cn.MinTimeBetweenCNPsNs))
	}
	if cn.Turnaround.Count > 0 {
		tw.p("  NP turnaround (trigger to CNP): %s; timing tolerance %v", statStr(cn.Turnaround), dur(cn.ToleranceNs))
	}
	for _, pr := range cn.ByIPPair {
		tw.p("  %s -> %s: %d CNPs", pr.Src, pr.Dst, pr.Count)
	}
	for i, q := range cn.ByQP {
		if i == maxTextRows {
			tw.p("  ... %d more QPs in the JSON report", len(cn.ByQP)-i)
			break
		}
		tw.p("  conn %d %s qpn %#x: %d CE marks, %d CNPs, %d suppressed", q.Conn, q.Node, q.QPN, q.CEMarked, q.CNPs, q.Suppressed)
	}
	for _, sc := range cn.Scopes {
		if cn.CEMarked == 0 && cn.NAKCNPs == 0 {
			break // nothing could draw a CNP: no scope to test
		}
		v := "consistent"
		if !sc.Consistent {
			v = "ruled out: " + sc.FirstConflict
		}
		tw.p("  %-12s groups %d, min CNP gap %v, interval in (%v, %v]: %s", sc.Scope, sc.Keys,
			dur(sc.ObservedMinIntervalNs), dur(sc.LowerNs), dur(sc.UpperNs), v)
	}
	tw.p("  pacing scope: %s", cn.Scope)
	tw.notes(cn.Notes)
}

// counters compares each RNIC counter present with what the trace
// implies.
func (tw *textWriter) counters(co *CounterReport) {
	tw.section("Counters", co.Valid)
	if len(co.Checks) > 0 {
		tw.p("%d mismatches", co.Mismatches)
	}
	for _, c := range co.Checks {
		if !c.Present {
			continue
		}
		mark := "ok"
		if !c.Match {
			mark = "MISMATCH"
		}
		tw.p("  %-9s %-32s expected %6d observed %6d  %-8s (%s)", c.Node, c.Counter, c.Expected, c.Observed, mark, c.Basis)
	}
	tw.notes(co.Notes)
}

// mct is the message completion time, overall and per QP.
func (tw *textWriter) mct(mc *MCTReport) {
	tw.section("Message completion time", mc.Valid)
	if mc.Overall.Count > 0 {
		tw.p("overall: %s", statStr(mc.Overall))
		for _, q := range mc.PerQP {
			tw.p("  qp %d: %s", q.QP, statStr(q.Stats))
		}
	}
	tw.notes(mc.Notes)
}

// maxTextRows bounds each per-item list of the text summary; the JSON
// report has them all.
const maxTextRows = 32

func statStr(s Stats) string {
	if s.Count == 0 {
		return "no samples"
	}
	return fmt.Sprintf("n=%d min %v median %v p99 %v max %v", s.Count, dur(s.MinNs), dur(s.MedianNs), dur(s.P99Ns), dur(s.MaxNs))
}

// dur prints nanoseconds as a duration, "-" for an unknown (negative)
// figure.
func dur(ns int64) string {
	if ns < 0 {
		return "-"
	}
	return time.Duration(ns).String()
}
