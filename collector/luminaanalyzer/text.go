package luminaanalyzer

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteText writes a human summary of the report: one section per
// analyzer, verdicts first. An invalid test is said so at the top and
// every section is marked NOT VALID.
func (r *Report) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	p := func(format string, args ...any) { fmt.Fprintf(bw, format+"\n", args...) }
	title := r.Test
	if title == "" {
		title = r.Trace
	}
	p("Lumina analysis: %s (repeat %d)", title, r.Repeat)
	if !r.Valid {
		p("")
		p("*** INVALID TEST: %s ***", r.Invalid)
		p("*** The figures below come from an incomplete trace and are NOT results. ***")
	}
	section := func(name string, valid bool) {
		p("")
		if valid {
			p("== %s", name)
		} else {
			p("== %s (NOT VALID)", name)
		}
	}
	notes := func(ns []string) {
		for _, n := range ns {
			p("  note: %s", n)
		}
	}
	s := r.Summary
	p("trace: %d packets (%d RoCE, %d outside the connections), %v, events: drop %d, ecn %d, bit-error %d; %d CNPs",
		s.Packets, s.RoCE, s.Unmatched, dur(s.DurationNs), s.Events["drop"], s.Events["ecn"], s.Events["bit-error"], s.CNPs)
	for k, n := range s.Malformed {
		p("  %d records skipped: %s", n, k)
	}

	section("Go-back-N logic", r.GBN.Valid)
	if r.GBN.Compliant {
		p("compliant: %d connections, no violation", len(r.Connections))
	} else {
		p("NOT compliant: %d violations", r.GBN.Count)
		for _, v := range r.GBN.Violations {
			p("  conn %d %s (%s): %s", v.Conn, v.Machine, v.Node, v.Reason)
			p("      offending packet: %v (%d violations of this machine)", v.Packet, v.Count)
		}
	}
	for i, c := range r.Connections {
		if i == maxTextRows {
			p("  ... %d more connections in the JSON report", len(r.Connections)-i)
			break
		}
		term := ""
		if c.Terminated != "" {
			term = "; " + c.Terminated
		}
		p("  conn %d %s %v qpn %#x -> %v qpn %#x: %d data, %d lost, %d retransmitted, %d gaps, %d NAKs, %d timeouts, %d CNPs%s",
			c.Index, strings.Join(c.Verbs, "+"), c.Conn.RequesterIP, c.Conn.RequesterQPN, c.Conn.ResponderIP,
			c.Conn.ResponderQPN, c.DataPackets, c.Lost, c.Retransmitted, c.Gaps, c.NAKs+c.ReadGaps, c.Timeouts, c.CNPs, term)
	}
	notes(r.GBN.Notes)

	rt := r.Retransmission
	section("Retransmission latency (NAK-triggered)", rt.Valid)
	p("%d NAKed gaps, %d lost transmissions", len(rt.NACK), len(rt.Losses))
	if len(rt.NACK) > 0 {
		p("  NACK generation: %s", statStr(rt.Generation))
		p("  NACK reaction:   %s", statStr(rt.Reaction))
		p("  total:           %s", statStr(rt.Total))
		p("  %5s %6s %8s %8s %12s %12s", "conn", "msg", "rel_psn", "event", "generation", "reaction")
		for i, n := range rt.NACK {
			if i == maxTextRows {
				p("  ... %d more in the JSON report", len(rt.NACK)-i)
				break
			}
			p("  %5d %6d %8d %8v %12v %12v", n.Conn, n.Message, n.RelPSN, n.Event, dur(n.GenerationNs), dur(n.ReactionNs))
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
		p("  losses recovered by: %s", strings.Join(parts, ", "))
	}
	notes(rt.Notes)

	to := r.Timeouts
	section("Timeout retransmission", to.Valid)
	p("timeout %d (minimum %v), retry_cnt %d: %d retransmissions without a NAK, %d below the minimum",
		to.Timeout, dur(to.MinTimeoutNs), to.RetryCnt, len(to.Retransmissions), to.BelowMinimum)
	if len(to.Retransmissions) > 0 {
		p("  intervals: %s", statStr(to.Intervals))
	}
	for i, m := range to.Messages {
		if i == maxTextRows {
			p("  ... %d more messages in the JSON report", len(to.Messages)-i)
			break
		}
		gu := ""
		if m.GaveUp {
			gu = fmt.Sprintf(", gave up PSN %d: %s", m.PSN, m.Verdict)
		}
		p("  conn %d msg %d: %d timeouts, %d NAK retries, at most %d retries in a row%s", m.Conn, m.Message, m.Timeouts,
			m.NAKRetries, m.MaxRetries, gu)
	}
	if to.GiveUps > 0 {
		p("  %d give-ups; retries vs retry_cnt: %s", to.GiveUps, to.RetryVerdict)
	}
	notes(to.Notes)

	cn := r.CNP
	section("CNP", cn.Valid)
	p("%d CNPs; %d CE-marked packets, %d answered; %d gaps, %d CNPs explained only by a gap (NAK triggers CNP: %s); %d unexplained",
		cn.CNPs, cn.CEMarked, cn.CEAnswered, cn.Gaps, cn.NAKCNPs, cn.NAKTriggersCNP, cn.Unexplained)
	if cn.MinTimeBetweenCNPsNs > 0 {
		p("  configured min_time_between_cnps: %v", dur(cn.MinTimeBetweenCNPsNs))
	}
	if cn.Turnaround.Count > 0 {
		p("  NP turnaround (trigger to CNP): %s; timing tolerance %v", statStr(cn.Turnaround), dur(cn.ToleranceNs))
	}
	for _, pr := range cn.ByIPPair {
		p("  %s -> %s: %d CNPs", pr.Src, pr.Dst, pr.Count)
	}
	for i, q := range cn.ByQP {
		if i == maxTextRows {
			p("  ... %d more QPs in the JSON report", len(cn.ByQP)-i)
			break
		}
		p("  conn %d %s qpn %#x: %d CE marks, %d CNPs, %d suppressed", q.Conn, q.Node, q.QPN, q.CEMarked, q.CNPs, q.Suppressed)
	}
	for _, sc := range cn.Scopes {
		if cn.CEMarked == 0 && cn.NAKCNPs == 0 {
			break // nothing could draw a CNP: no scope to test
		}
		v := "consistent"
		if !sc.Consistent {
			v = "ruled out: " + sc.FirstConflict
		}
		p("  %-12s groups %d, min CNP gap %v, interval in (%v, %v]: %s", sc.Scope, sc.Keys,
			dur(sc.ObservedMinIntervalNs), dur(sc.LowerNs), dur(sc.UpperNs), v)
	}
	p("  pacing scope: %s", cn.Scope)
	notes(cn.Notes)

	co := r.Counters
	section("Counters", co.Valid)
	if len(co.Checks) > 0 {
		p("%d mismatches", co.Mismatches)
	}
	for _, c := range co.Checks {
		if !c.Present {
			continue
		}
		mark := "ok"
		if !c.Match {
			mark = "MISMATCH"
		}
		p("  %-9s %-32s expected %6d observed %6d  %-8s (%s)", c.Node, c.Counter, c.Expected, c.Observed, mark, c.Basis)
	}
	notes(co.Notes)

	mc := r.MCT
	section("Message completion time", mc.Valid)
	if mc.Overall.Count > 0 {
		p("overall: %s", statStr(mc.Overall))
		for _, q := range mc.PerQP {
			p("  qp %d: %s", q.QP, statStr(q.Stats))
		}
	}
	notes(mc.Notes)
	if len(r.Notes) > 0 {
		p("")
		notes(r.Notes)
	}
	return bw.Flush()
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
