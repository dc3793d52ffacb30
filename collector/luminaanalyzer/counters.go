package luminaanalyzer

import (
	"fmt"
	"sort"
)

// Counter analysis: what each RNIC's mlx5 counters should have counted,
// given the trace. Only counters the metadata reports are checked; each
// expected figure says what it counts (Basis), so a mismatch names the
// behaviour that differs.
func (a *Analyzer) counterReport(rep *Report) CounterReport {
	cr := CounterReport{}
	m := a.m
	if m.Requester == nil && m.Responder == nil {
		cr.Notes = append(cr.Notes, "the metadata holds no RNIC counters")
		return cr
	}
	type want struct {
		node     int
		names    []string // summed: a NIC counts a CNP as handled or ignored
		expected int64
		basis    string
	}
	rq, rs := &a.node[nodeRequester], &a.node[nodeResponder]
	giveUps := int64(rep.Timeouts.GiveUps)
	wants := []want{
		{nodeResponder, []string{"np_cnp_sent"}, rs.cnpSent, "CNPs the responder sent"},
		{nodeResponder, []string{"np_ecn_marked_roce_packets"}, rs.ceRx, "CE-marked packets delivered to the responder"},
		{nodeResponder, []string{"out_of_sequence"}, rs.nakTx, "NAK sequence errors the responder sent (mlx5 counts one per gap)"},
		{nodeResponder, []string{"duplicate_request"}, rs.dup, "requests delivered before the expected PSN"},
		{nodeResponder, []string{"rx_icrc_encapsulated"}, rs.icrc, "bit-error events on packets to the responder"},
		{nodeResponder, []string{"rp_cnp_handled", "rp_cnp_ignored"}, rs.cnpRx, "CNPs delivered to the responder"},
		{nodeRequester, []string{"np_cnp_sent"}, rq.cnpSent, "CNPs the requester sent"},
		{nodeRequester, []string{"np_ecn_marked_roce_packets"}, rq.ceRx, "CE-marked packets delivered to the requester"},
		{nodeRequester, []string{"rp_cnp_handled", "rp_cnp_ignored"}, rq.cnpRx, "CNPs delivered to the requester"},
		{nodeRequester, []string{"packet_seq_err"}, rq.nakRx, "NAK sequence errors delivered to the requester"},
		{nodeRequester, []string{"local_ack_timeout_err"}, rq.timeouts + giveUps,
			"retransmissions without a NAK, plus the final expiry of each give-up"},
		{nodeRequester, []string{"implied_nak_seq_err"}, rq.readGaps, "READs re-issued after a gap in the responses"},
		{nodeRequester, []string{"rx_icrc_encapsulated"}, rq.icrc, "bit-error events on packets to the requester"},
		{nodeRequester, []string{"req_cqe_error"}, rq.terminated + giveUps,
			"connections ended by a fatal NAK or by exhausting their retries"},
	}
	for _, w := range wants {
		counters := m.Requester
		if w.node == nodeResponder {
			counters = m.Responder
		}
		var obs uint64
		present := false
		for _, n := range w.names {
			if v, ok := counters[n]; ok {
				obs += v
				present = true
			}
		}
		name := w.names[0]
		if len(w.names) > 1 {
			name = w.names[0] + "+" + w.names[1]
		}
		c := CounterCheck{Node: nodeNames[w.node], Counter: name, Expected: uint64(max(w.expected, 0)), Observed: obs,
			Present: present, Basis: w.basis}
		c.Match = present && c.Expected == c.Observed
		if present && !c.Match {
			cr.Mismatches++
		}
		cr.Checks = append(cr.Checks, c)
	}
	return cr
}

// mctReport summarises Meta.MCT.
func (a *Analyzer) mctReport() MCTReport {
	mr := MCTReport{}
	var all []int64
	for i, q := range a.m.MCT {
		v := append([]int64(nil), q...)
		all = append(all, q...)
		mr.PerQP = append(mr.PerQP, QPStats{QP: i, Stats: statsOf(v)})
	}
	mr.Overall = statsOf(all)
	if len(a.m.MCT) == 0 {
		mr.Notes = append(mr.Notes, "the metadata holds no message completion times")
	}
	return mr
}

// Report finishes the analysis and returns its results. Call it once,
// after the last Packet.
func (a *Analyzer) Report() *Report {
	m := a.m
	rep := &Report{Test: m.Test, Repeat: m.Repeat, Trace: m.Trace, Valid: m.Valid,
		Options: ReportSettings{SlackNs: int64(a.opt.Slack), CNPToleranceNs: int64(a.opt.CNPTolerance),
			CNPWindowNs: int64(a.opt.CNPWindow), MaxRecords: a.opt.MaxRecords}}
	if !m.Valid {
		rep.Invalid = "invalid test: the trace failed its integrity check"
		if m.IntegrityNote != "" {
			rep.Invalid += ": " + m.IntegrityNote
		}
	}
	rep.Summary = a.summary()

	// Give-ups: a connection whose oldest unacknowledged PSN was lost on
	// its last transmission, and never sent again, was given up.
	gaveUp := map[int]bool{}
	for i := range a.conns {
		c := &a.conns[i]
		s := &c.s[streamReq]
		if !s.txOn || c.terminated != "" || s.una == s.sentEnd {
			continue
		}
		una := s.una
		data := s
		if c.reads.covers(una) {
			data = &c.s[streamRsp]
		}
		sl, ok := data.lastTxOf(una)
		if !ok || !(pref{ev: sl.ev}).lost() {
			rep.Notes = append(rep.Notes, fmt.Sprintf("connection %d: the trace ends with PSN %d unacknowledged", c.idx, una))
			continue
		}
		mr := a.msgRetries(c, una)
		mr.GaveUp, mr.PSN = true, una
		switch {
		case s.retries == int(m.RetryCnt):
			mr.Verdict = "exact"
		case s.retries > int(m.RetryCnt):
			mr.Verdict = "more"
		default:
			mr.Verdict = "fewer"
		}
		gaveUp[i] = true
		c.terminated = fmt.Sprintf("gave up PSN %d after %d retries", una, s.retries)
	}
	rep.Timeouts = a.timeoutReport()
	rep.Timeouts.GiveUps = len(gaveUp)

	// Connections and Go-back-N.
	rep.GBN = GBNReport{Violations: a.viol, Count: a.violCount}
	if rep.GBN.Violations == nil {
		rep.GBN.Violations = []Violation{}
	}
	for i := range a.conns {
		c := &a.conns[i]
		for mach, vi := range c.violIdx {
			if vi >= 0 {
				a.viol[vi].Count = c.violN[mach]
			}
		}
		cr := c.rep
		cr.Index, cr.Conn = i, c.c
		cr.ToRequester, cr.ToResponder = c.packets[toRequester], c.packets[toResponder]
		cr.Verbs = []string{}
		for b, n := range []string{"write", "send", "read", "atomic"} {
			if c.verbs&(1<<b) != 0 {
				cr.Verbs = append(cr.Verbs, n)
			}
		}
		var nv int64
		for _, n := range c.violN {
			nv += n
		}
		cr.Compliant = nv == 0
		cr.Terminated = c.terminated
		rep.Connections = append(rep.Connections, cr)
		if c.s[streamReq].lossDrop || c.s[streamRsp].lossDrop {
			rep.Retransmission.Notes = append(rep.Retransmission.Notes,
				fmt.Sprintf("connection %d: more than %d losses outstanding at once; the oldest were not followed",
					i, maxOutstandingLosses))
		}
	}
	sort.SliceStable(rep.GBN.Violations, func(i, j int) bool {
		return rep.GBN.Violations[i].Packet.Seq < rep.GBN.Violations[j].Packet.Seq
	})
	rep.GBN.Compliant = a.violCount == 0
	if len(m.Conns) == 0 {
		rep.GBN.Notes = append(rep.GBN.Notes, "the metadata lists no connection: nothing was checked")
	}

	// Retransmission latencies.
	rt := &rep.Retransmission
	rt.NACK, rt.Losses, rt.Truncated = a.nack, a.losses, a.truncated.retrans
	if rt.NACK == nil {
		rt.NACK = []NACKLatency{}
	}
	if rt.Losses == nil {
		rt.Losses = []Loss{}
	}
	var gen, react, tot []int64
	for _, n := range a.nack {
		gen = append(gen, n.GenerationNs)
		if n.ReactionNs >= 0 {
			react = append(react, n.ReactionNs)
			tot = append(tot, n.TotalNs)
		}
	}
	rt.Generation, rt.Reaction, rt.Total = statsOf(gen), statsOf(react), statsOf(tot)

	rep.CNP = a.cnpReport()
	rep.Counters = a.counterReport(rep)
	rep.MCT = a.mctReport()
	rep.Notes = append(rep.Notes, a.notes...)
	if rep.Summary.Backwards > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d packets have a timestamp before the previous one's: "+
			"latencies around them are unreliable", rep.Summary.Backwards))
	}
	v := m.Valid
	rep.GBN.Valid, rep.Retransmission.Valid, rep.Timeouts.Valid = v, v, v
	rep.CNP.Valid, rep.Counters.Valid, rep.MCT.Valid = v, v, v
	return rep
}

func (a *Analyzer) summary() TraceSummary {
	s := &a.sum
	ts := TraceSummary{Packets: s.packets, RoCE: s.roce, Unmatched: s.unmatched, CNPs: s.cnps, Backwards: s.backwards,
		FirstSeq: s.firstSeq, LastSeq: s.lastSeq, FirstNs: s.firstTs, LastNs: s.lastTs, DurationNs: s.lastTs - s.firstTs,
		Events: map[string]int64{}}
	for i, n := range s.malformed {
		if n > 0 {
			if ts.Malformed == nil {
				ts.Malformed = map[string]int64{}
			}
			ts.Malformed[malNames[i]] = n
		}
	}
	for e, n := range s.events {
		if n > 0 || e < 4 {
			ts.Events[eventName(e)] = n
		}
	}
	return ts
}

func eventName(e int) string {
	names := [...]string{"none", "drop", "ecn", "bit-error"}
	if e < len(names) {
		return names[e]
	}
	return fmt.Sprintf("event(%d)", e)
}

func (a *Analyzer) timeoutReport() TimeoutReport {
	m := a.m
	tr := TimeoutReport{Timeout: m.Timeout, MinTimeoutNs: a.baseTimeout, ToleranceNs: a.timerTol, RetryCnt: m.RetryCnt,
		Retransmissions: a.touts, Truncated: a.truncated.timeouts, Messages: []MessageRetries{}}
	if tr.Retransmissions == nil {
		tr.Retransmissions = []TimeoutRetx{}
	}
	var iv []int64
	for _, t := range a.touts {
		if t.IntervalNs >= 0 {
			iv = append(iv, t.IntervalNs)
		}
		if t.BelowMinimum {
			tr.BelowMinimum++
		}
	}
	tr.Intervals = statsOf(iv)
	verdicts := map[string]bool{}
	for _, mr := range a.msgs {
		if mr.Timeouts == 0 && !mr.GaveUp {
			continue // NAK retries alone are the retransmission analysis'
		}
		tr.Messages = append(tr.Messages, mr)
		if mr.GaveUp {
			verdicts[mr.Verdict] = true
		}
	}
	sort.SliceStable(tr.Messages, func(i, j int) bool {
		x, y := tr.Messages[i], tr.Messages[j]
		if x.Conn != y.Conn {
			return x.Conn < y.Conn
		}
		return x.Message < y.Message
	})
	switch len(verdicts) {
	case 0:
	case 1:
		for v := range verdicts {
			tr.RetryVerdict = v
		}
	default:
		tr.RetryVerdict = "mixed"
	}
	if a.baseTimeout == 0 {
		tr.Notes = append(tr.Notes, "the metadata gives no timeout: intervals are not compared with a minimum")
	}
	return tr
}
