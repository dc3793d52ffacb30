package lumina

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/verbs/roce"
)

// CNP analysis.
//
// A notification point (NP) answers a CE-marked packet with a CNP to the
// sending QP unless its pacer sent one less than min_time_between_cnps ago
// in the same scope (Lumina §6.4: per port on ConnectX-6 Dx, per
// destination IP on ConnectX-4 and 5); recent NICs also send a CNP with
// each NAK. The trace holds the triggers (CE-marked packets delivered,
// out-of-order arrivals that open a gap) and the CNPs, all stamped at the
// middlebox.
//
// Each CNP is matched to the trigger of its connection that drew it: with
// a pacing interval M, the earliest waiting trigger younger than M/2 (a
// burst of marks draws the CNP with its first), else the latest waiting
// one (the NP was slower than M/2 to answer an isolated mark); with no
// interval, triggers and CNPs pair first-in first-out. A trigger left
// waiting for longer than Options.CNPWindow drew none: it was suppressed.
//
// Then every scope is tested. Its key groups the triggers (per port: the
// NP; per destination IP: NP and the CNP's destination; per IP pair: both
// addresses; per QP: the NP's QP). Within a group, a trigger that drew a
// CNP shows the interval is at most its distance from the previous
// CNP-drawing trigger, and a suppressed one that it is more than its
// distance from it; a suppressed trigger with no CNP before it in its
// group cannot be explained at all. Using the triggers' times for both
// cancels the path delay to the NP, which the CNPs' own times would add.

const (
	trigCE = iota
	trigGap
)

var trigNames = [2]string{"ce", "gap"}

type trigger struct {
	ts   int64
	seq  uint64
	conn int32
	node uint8 // the notification point: the node that received it
	kind uint8
	cnp  int32 // the CNP it drew, or -1
}

type cnpRec struct {
	ts   int64
	seq  uint64
	conn int32
	node uint8 // the notification point: the node that sent it
	trig int32
}

// trigRing holds a connection's triggers waiting for a CNP, oldest first.
type trigRing struct {
	idx [32]int32
	n   int
}

func (r *trigRing) push(i int32) {
	if r.n == len(r.idx) {
		copy(r.idx[:], r.idx[1:])
		r.n--
	}
	r.idx[r.n] = i
	r.n++
}

func (r *trigRing) remove(k int) {
	copy(r.idx[k:r.n], r.idx[k+1:r.n])
	r.n--
}

type cnpState struct {
	trig      []trigger
	cnps      []cnpRec
	truncated bool
	interval  [2]int64 // configured pacing interval by NP node (0 unknown)
	window    int64
}

func (s *cnpState) init(a *Analyzer) {
	s.interval[nodeRequester] = max(a.m.RequesterNIC.MinTimeBetweenCNPs, 0)
	s.interval[nodeResponder] = max(a.m.ResponderNIC.MinTimeBetweenCNPs, 0)
	s.window = int64(a.opt.CNPWindow)
}

// ceMark records a CE-marked packet delivered in direction dir.
func (a *Analyzer) ceMark(c *conn, dir int, r pref) {
	a.node[dir].ceRx++
	c.rep.CEMarked++
	a.trigger(c, dir, trigCE, r)
}

// trigger records something that may draw a CNP from node.
func (a *Analyzer) trigger(c *conn, node, kind int, r pref) {
	s := &a.cnp
	if len(s.trig) >= a.opt.MaxRecords {
		s.truncated = true
		return
	}
	s.trig = append(s.trig, trigger{ts: r.ts, seq: r.seq, conn: int32(c.idx), node: uint8(node), kind: uint8(kind), cnp: -1})
	c.pend[node].push(int32(len(s.trig) - 1))
}

// cnpPacket handles a CNP going in direction dir (sent by the other node).
func (a *Analyzer) cnpPacket(c *conn, dir int, r pref) {
	s := &a.cnp
	np := 1 - dir
	a.node[np].cnpSent++
	if !r.lost() {
		a.node[dir].cnpRx++
	}
	c.rep.CNPs++
	if len(s.cnps) >= a.opt.MaxRecords {
		s.truncated = true
		return
	}
	ring := &c.pend[np]
	// Forget the triggers older than the window: they were suppressed.
	k := 0
	for k < ring.n && r.ts-s.trig[ring.idx[k]].ts > s.window {
		k++
	}
	if k > 0 {
		copy(ring.idx[:], ring.idx[k:ring.n])
		ring.n -= k
	}
	pick := -1
	if ring.n > 0 {
		if m := s.interval[np]; m <= 0 {
			pick = 0
		} else {
			for j := range ring.n {
				if r.ts-s.trig[ring.idx[j]].ts <= m/2 {
					pick = j
					break
				}
			}
			if pick < 0 {
				pick = ring.n - 1
			}
		}
	}
	ti := int32(-1)
	if pick >= 0 {
		ti = ring.idx[pick]
		ring.remove(pick)
		s.trig[ti].cnp = int32(len(s.cnps))
	}
	s.cnps = append(s.cnps, cnpRec{ts: r.ts, seq: r.seq, conn: int32(c.idx), node: uint8(np), trig: ti})
}

type scopeKey struct {
	a, b roce.GID
	x    int32
}

var scopeNames = [...]string{ScopePort, ScopeDestIP, ScopeIPPair, ScopeQP}

// keyOf is the pacer key of scope sc for NP node of connection ci.
func (a *Analyzer) keyOf(sc int, ci int32, node uint8) scopeKey {
	c := &a.conns[ci]
	np, rp := c.gid[node], c.gid[1-node]
	switch scopeNames[sc] {
	case ScopePort:
		return scopeKey{x: int32(node)}
	case ScopeDestIP:
		return scopeKey{a: rp, x: int32(node)}
	case ScopeIPPair:
		return scopeKey{a: np, b: rp}
	}
	return scopeKey{x: ci*2 + int32(node)}
}

func (a *Analyzer) cnpReport() CNPReport {
	s := &a.cnp
	rep := CNPReport{CNPs: a.node[0].cnpSent + a.node[1].cnpSent, Truncated: s.truncated,
		MinTimeBetweenCNPsNs: max(s.interval[nodeRequester], s.interval[nodeResponder])}
	if s.interval[0] != s.interval[1] && s.interval[0] > 0 && s.interval[1] > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("the RNICs are configured with different CNP intervals "+
			"(requester %v, responder %v)", time.Duration(s.interval[0]), time.Duration(s.interval[1])))
	}
	var gapCNPs int64
	for _, t := range s.trig {
		switch t.kind {
		case trigCE:
			rep.CEMarked++
			if t.cnp >= 0 {
				rep.CEAnswered++
			}
		case trigGap:
			rep.Gaps++
			if t.cnp >= 0 {
				gapCNPs++
			}
		}
	}
	rep.NAKCNPs = gapCNPs
	switch {
	case rep.Gaps == 0:
		rep.NAKTriggersCNP = "unknown"
	case gapCNPs > 0:
		rep.NAKTriggersCNP = "yes"
	default:
		rep.NAKTriggersCNP = "no"
	}
	for _, cr := range s.cnps {
		if cr.trig < 0 {
			rep.Unexplained++
		}
	}
	if rep.Unexplained > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d CNPs follow no CE mark or gap of their connection "+
			"within %v", rep.Unexplained, a.opt.CNPWindow))
	}
	// Counts by IP pair and by NP QP.
	pairs := map[[2]roce.GID]int64{}
	type qk struct {
		conn int32
		node uint8
	}
	qps := map[qk]*CNPQueue{}
	var qorder []qk
	q := func(ci int32, node uint8) *CNPQueue {
		k := qk{ci, node}
		if e, ok := qps[k]; ok {
			return e
		}
		c := &a.conns[ci]
		e := &CNPQueue{Conn: int(ci), Node: nodeNames[node], QPN: c.qpn[node]}
		qps[k] = e
		qorder = append(qorder, k)
		return e
	}
	for _, cr := range s.cnps {
		c := &a.conns[cr.conn]
		pairs[[2]roce.GID{c.gid[cr.node], c.gid[1-cr.node]}]++
		q(cr.conn, cr.node).CNPs++
	}
	nakYes := rep.NAKTriggersCNP == "yes"
	for _, t := range s.trig {
		e := q(t.conn, t.node)
		if t.kind == trigCE {
			e.CEMarked++
		}
		if t.cnp < 0 && (t.kind == trigCE || nakYes) {
			e.Suppressed++
		}
	}
	for k, n := range pairs {
		rep.ByIPPair = append(rep.ByIPPair, CNPPair{Src: k[0].String(), Dst: k[1].String(), Count: n})
	}
	slices.SortFunc(rep.ByIPPair, func(x, y CNPPair) int {
		if c := cmpAddr(x.Src, y.Src); c != 0 {
			return c
		}
		return cmpAddr(x.Dst, y.Dst)
	})
	slices.SortFunc(qorder, func(x, y qk) int {
		if x.conn != y.conn {
			return int(x.conn - y.conn)
		}
		return int(x.node) - int(y.node)
	})
	for _, k := range qorder {
		rep.ByQP = append(rep.ByQP, *qps[k])
	}

	// Scopes.
	include := func(t *trigger) bool { return t.kind == trigCE || nakYes }
	groupings := make([][]int, len(scopeNames))
	for sc := range scopeNames {
		res := ScopeResult{Scope: scopeNames[sc], ObservedMinIntervalNs: -1, LowerNs: -1, UpperNs: -1}
		ids := map[scopeKey]int{}
		id := func(k scopeKey) int {
			if v, ok := ids[k]; ok {
				return v
			}
			ids[k] = len(ids)
			return len(ids) - 1
		}
		var last []int64
		var grouping []int
		conflict := func(format string, args ...any) {
			res.Conflicts++
			if res.FirstConflict == "" {
				res.FirstConflict = fmt.Sprintf(format, args...)
			}
		}
		for i := range s.trig {
			t := &s.trig[i]
			if !include(t) {
				continue
			}
			g := id(a.keyOf(sc, t.conn, t.node))
			grouping = append(grouping, g)
			for len(last) <= g {
				last = append(last, -1)
			}
			m := s.interval[t.node]
			tol := max(int64(a.opt.CNPTolerance), m/10)
			if t.cnp >= 0 {
				if last[g] >= 0 {
					gap := t.ts - last[g]
					if res.UpperNs < 0 || gap < res.UpperNs {
						res.UpperNs = gap
					}
					if m > 0 && gap < m-tol {
						conflict("%s at seq %d (connection %d) drew a CNP %v after the previous CNP-drawing trigger "+
							"of its group, within the interval %v", trigNames[t.kind], t.seq, t.conn,
							time.Duration(gap), time.Duration(m))
					}
				}
				last[g] = t.ts
				continue
			}
			if last[g] < 0 {
				conflict("%s at seq %d (connection %d) drew no CNP, though its group had sent none before",
					trigNames[t.kind], t.seq, t.conn)
				continue
			}
			need := t.ts - last[g]
			res.LowerNs = max(res.LowerNs, need)
			if m > 0 && need >= m+tol {
				conflict("%s at seq %d (connection %d) drew no CNP, %v after the previous CNP-drawing trigger of "+
					"its group, beyond the interval %v", trigNames[t.kind], t.seq, t.conn, time.Duration(need),
					time.Duration(m))
			}
		}
		res.Keys = len(ids)
		groupings[sc] = grouping
		tol := max(int64(a.opt.CNPTolerance), rep.MinTimeBetweenCNPsNs/10)
		if res.Conflicts == 0 && res.LowerNs >= 0 && res.UpperNs >= 0 && res.LowerNs >= res.UpperNs+tol {
			conflict("the suppressed triggers need an interval above %v, the CNPs sent one at most %v",
				time.Duration(res.LowerNs), time.Duration(res.UpperNs))
		}
		// The CNPs' own spacing in each group.
		lastCNP := map[scopeKey]int64{}
		for _, cr := range s.cnps {
			k := a.keyOf(sc, cr.conn, cr.node)
			if t, ok := lastCNP[k]; ok {
				if d := cr.ts - t; res.ObservedMinIntervalNs < 0 || d < res.ObservedMinIntervalNs {
					res.ObservedMinIntervalNs = d
				}
			}
			lastCNP[k] = cr.ts
		}
		res.Consistent = res.Conflicts == 0
		rep.Scopes = append(rep.Scopes, res)
	}
	for i := range rep.Scopes {
		for j := range rep.Scopes {
			if i != j && slices.Equal(groupings[i], groupings[j]) {
				rep.Scopes[i].SameGrouping = append(rep.Scopes[i].SameGrouping, rep.Scopes[j].Scope)
			}
		}
		if rep.Scopes[i].Consistent {
			rep.Consistent = append(rep.Consistent, rep.Scopes[i].Scope)
		}
	}
	var suppressed int
	for i := range s.trig {
		if include(&s.trig[i]) && s.trig[i].cnp < 0 {
			suppressed++
		}
	}
	switch {
	case rep.CEMarked == 0 && !nakYes:
		rep.Scope = "unknown: no CE-marked packet"
	case len(rep.Consistent) == 0:
		rep.Scope = "none: no pacing scope explains the trace"
	case len(rep.Consistent) == len(scopeNames) && suppressed == 0:
		rep.Scope = "any: every trigger drew a CNP"
	case len(rep.Consistent) == 1:
		rep.Scope = rep.Consistent[0]
	default:
		same := true
		g0 := groupings[slices.Index(scopeNames[:], rep.Consistent[0])]
		for _, sc := range rep.Consistent[1:] {
			if !slices.Equal(g0, groupings[slices.Index(scopeNames[:], sc)]) {
				same = false
			}
		}
		if same {
			rep.Scope = strings.Join(rep.Consistent, " = ") + " (the same grouping in this trace)"
		} else {
			rep.Scope = "ambiguous: " + strings.Join(rep.Consistent, ", ")
		}
	}
	// The plot series.
	for _, t := range s.trig {
		if len(rep.Events) >= a.opt.MaxRecords {
			rep.Truncated = true
			break
		}
		e := CNPEvent{Kind: trigNames[t.kind], Conn: int(t.conn), Node: nodeNames[t.node], Seq: t.seq, TimeNs: t.ts}
		if t.cnp >= 0 {
			e.Peer = s.cnps[t.cnp].seq
		}
		rep.Events = append(rep.Events, e)
	}
	for _, cr := range s.cnps {
		if len(rep.Events) >= a.opt.MaxRecords {
			rep.Truncated = true
			break
		}
		e := CNPEvent{Kind: "cnp", Conn: int(cr.conn), Node: nodeNames[cr.node], Seq: cr.seq, TimeNs: cr.ts}
		if cr.trig >= 0 {
			e.Peer = s.trig[cr.trig].seq
		}
		rep.Events = append(rep.Events, e)
	}
	slices.SortStableFunc(rep.Events, func(x, y CNPEvent) int {
		switch {
		case x.Seq < y.Seq:
			return -1
		case x.Seq > y.Seq:
			return 1
		}
		return 0
	})
	return rep
}

func cmpAddr(x, y string) int {
	ax, ex := netip.ParseAddr(x)
	ay, ey := netip.ParseAddr(y)
	if ex != nil || ey != nil {
		return strings.Compare(x, y)
	}
	return ax.Compare(ay)
}
