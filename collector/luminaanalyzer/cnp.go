package luminaanalyzer

import (
	"cmp"
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
// Each CNP is matched to the trigger that drew it by order: the NP
// receives its packets over one link and handles them first in first out,
// and its CNPs leave over one link too, so its CNPs come in the order of
// their triggers. A CNP therefore belongs to the earliest waiting trigger
// of its connection, and every trigger waiting before that one, of any
// connection, drew none: its CNP would have come first. The NP's ACKs and
// NAKs prove progress the same way: once it acknowledged a packet, the
// triggers before that packet that are still waiting drew no CNP (with a
// grace of Options.CNPTolerance, should an RNIC queue its CNPs a little
// behind its ACKs). A trigger left waiting longer than Options.CNPWindow
// drew none either.
//
// Then every scope is tested. Its key groups the triggers (per port: the
// NP; per destination IP: NP and the CNP's destination; per IP pair: both
// addresses; per QP: the NP's QP). The NP handles its triggers in the
// order the middlebox saw them, but not when: only after the trigger's
// mirror time and, for a trigger that drew a CNP, before the CNP's. Its
// receive queue may hold a trigger for milliseconds. So, within a group,
// with y1, y2 consecutive triggers that drew CNPs and x a suppressed one
// after y:
//
//   - y2 drew a CNP, so the interval is at most t(CNP of y2) - t(y1);
//   - x drew none, so the interval is more than t(x) - t(CNP of y);
//   - x with no y before it in its group cannot be explained at all.
//
// These bounds hold whatever the delays between middlebox and NP. A scope
// is consistent when nothing is unexplained, the lower bound stays below
// the upper one and the configured interval, if any, lies between them,
// all within the tolerance.

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

// trigQueue holds an NP's triggers waiting for a CNP, in trace order.
type trigQueue struct {
	idx  []int32
	head int
}

func (q *trigQueue) len() int { return len(q.idx) - q.head }

func (q *trigQueue) pop() {
	q.head++
	if q.head == len(q.idx) {
		q.idx, q.head = q.idx[:0], 0
	}
}

func (q *trigQueue) push(i int32) {
	if q.head > 0 && q.head >= len(q.idx)/2 {
		n := copy(q.idx, q.idx[q.head:])
		q.idx, q.head = q.idx[:n], 0
	}
	q.idx = append(q.idx, i)
}

// maxWaiting bounds an NP's waiting triggers; beyond it the oldest are
// taken as suppressed.
const maxWaiting = 1 << 16

type cnpState struct {
	trig      []trigger
	cnps      []cnpRec
	waiting   [2]trigQueue // by NP node
	truncated bool
	interval  [2]int64 // configured pacing interval by NP node (0 unknown)
	window    int64
	grace     int64
}

func (s *cnpState) init(a *Analyzer) {
	s.interval[nodeRequester] = max(a.m.RequesterNIC.MinTimeBetweenCNPs, 0)
	s.interval[nodeResponder] = max(a.m.ResponderNIC.MinTimeBetweenCNPs, 0)
	s.window = int64(a.opt.CNPWindow)
	s.grace = int64(a.opt.CNPTolerance)
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
	q := &s.waiting[node]
	s.expire(q, r.ts)
	if q.len() >= maxWaiting {
		q.pop()
	}
	s.trig = append(s.trig, trigger{ts: r.ts, seq: r.seq, conn: int32(c.idx), node: uint8(node), kind: uint8(kind), cnp: -1})
	q.push(int32(len(s.trig) - 1))
}

// expire drops the triggers older than the window.
func (s *cnpState) expire(q *trigQueue, now int64) {
	for q.len() > 0 && now-s.trig[q.idx[q.head]].ts > s.window {
		q.pop()
	}
}

// progress records that node has handled the packet with sequence number
// seq by time ts: the triggers waiting before it, older than the grace,
// drew no CNP. (The packet itself may be a trigger whose CNP trails the
// acknowledgement.)
func (a *Analyzer) progress(node int, seq uint64, ts int64) {
	s := &a.cnp
	q := &s.waiting[node]
	for q.len() > 0 {
		t := &s.trig[q.idx[q.head]]
		if t.seq >= seq || ts-t.ts < s.grace {
			break
		}
		q.pop()
	}
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
	q := &s.waiting[np]
	s.expire(q, r.ts)
	ti := int32(-1)
	for k := q.head; k < len(q.idx); k++ {
		if s.trig[q.idx[k]].conn == int32(c.idx) {
			ti = q.idx[k]
			break
		}
	}
	if ti >= 0 {
		// Everything waiting before the trigger drew no CNP.
		for q.idx[q.head] != ti {
			q.pop()
		}
		q.pop()
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

// cnpReport is the CNP analysis of Lumina §6.4 on the triggers and CNPs
// matched during the trace: the counts, the CNPs by IP pair and QP
// (Table 4), the NP's turnaround, every pacing scope tested, the verdict
// on the scope, and the plot series.
func (a *Analyzer) cnpReport() CNPReport {
	rep := a.cnpCounts()
	a.cnpBreakdown(&rep)
	a.cnpTurnaround(&rep)
	nakYes := rep.NAKTriggersCNP == "yes"
	groupings := make([][]int, len(scopeNames))
	for sc := range scopeNames {
		var res ScopeResult
		res, groupings[sc] = a.testScope(sc, nakYes, rep.ToleranceNs)
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
	rep.Scope = a.scopeVerdict(&rep, groupings, nakYes)
	a.cnpEvents(&rep)
	return rep
}

// cnpCounts counts the CNPs and their triggers, and decides whether the
// NP sends a CNP with a NAK: only a gap that drew a CNP says yes, and a
// trace without gaps cannot tell.
func (a *Analyzer) cnpCounts() CNPReport {
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
	return rep
}

// cnpBreakdown counts the CNPs by IP pair and by NP QP (Lumina's Table 4),
// with each QP's CE marks and the triggers it suppressed.
func (a *Analyzer) cnpBreakdown(rep *CNPReport) {
	s := &a.cnp
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
}

// cnpTurnaround is the NP's turnaround, trigger to CNP at the middlebox:
// how long its receive queue held the triggers. It also sets the timing
// tolerance the scope tests allow.
func (a *Analyzer) cnpTurnaround(rep *CNPReport) {
	s := &a.cnp
	var turn []int64
	for _, cr := range s.cnps {
		if cr.trig >= 0 {
			turn = append(turn, cr.ts-s.trig[cr.trig].ts)
		}
	}
	rep.Turnaround = statsOf(turn)
	rep.ToleranceNs = a.cnpTolerance(rep.MinTimeBetweenCNPsNs)
}

// cnpTolerance is the timing tolerance for a pacing interval m: the
// configured one, or 1% of m when that is more.
func (a *Analyzer) cnpTolerance(m int64) int64 { return max(int64(a.opt.CNPTolerance), m/100) }

// drawsCNP says whether trigger t is one the NP answers with a CNP when
// its pacer lets it: CE marks always, gaps only on NICs that send a CNP
// with each NAK.
func drawsCNP(t *trigger, nakYes bool) bool { return t.kind == trigCE || nakYes }

// conflict counts a trigger that the scope cannot explain, keeping the
// first one's description.
func (res *ScopeResult) conflict(format string, args ...any) {
	res.Conflicts++
	if res.FirstConflict == "" {
		res.FirstConflict = fmt.Sprintf(format, args...)
	}
}

// testScope tests pacing scope sc against the trace: it bounds the
// interval from each group's triggers (see the bounds at the top of this
// file) and measures the CNPs' own spacing. It returns the result and the
// group of every CNP-drawing trigger, so that scopes grouping the trace
// alike can be told.
func (a *Analyzer) testScope(sc int, nakYes bool, tol int64) (ScopeResult, []int) {
	res := ScopeResult{Scope: scopeNames[sc], ObservedMinIntervalNs: -1, LowerNs: -1, UpperNs: -1}
	ids := map[scopeKey]int{}
	grouping := a.scopeBounds(sc, nakYes, ids, &res)
	res.Keys = len(ids)
	if res.Conflicts == 0 && res.LowerNs >= 0 && res.UpperNs >= 0 && res.LowerNs >= res.UpperNs+tol {
		res.conflict("the suppressed triggers need an interval above %v, the CNPs sent one at most %v",
			time.Duration(res.LowerNs), time.Duration(res.UpperNs))
	}
	// The CNPs' own spacing in each group.
	prev := map[scopeKey]int64{}
	for _, cr := range a.cnp.cnps {
		k := a.keyOf(sc, cr.conn, cr.node)
		if t, ok := prev[k]; ok {
			if d := cr.ts - t; res.ObservedMinIntervalNs < 0 || d < res.ObservedMinIntervalNs {
				res.ObservedMinIntervalNs = d
			}
		}
		prev[k] = cr.ts
	}
	res.Consistent = res.Conflicts == 0
	return res, grouping
}

// scopeBounds walks the CNP-drawing triggers in their groups of scope sc
// (numbered in ids): a trigger that drew a CNP bounds the interval from
// above, a suppressed one from below, and either conflicts when it
// contradicts the configured interval or has nothing before it to
// explain it.
func (a *Analyzer) scopeBounds(sc int, nakYes bool, ids map[scopeKey]int, res *ScopeResult) []int {
	s := &a.cnp
	id := func(k scopeKey) int {
		if v, ok := ids[k]; ok {
			return v
		}
		ids[k] = len(ids)
		return len(ids) - 1
	}
	// The group's last CNP-drawing trigger and its CNP.
	var lastTrig, lastCNP []int64
	var grouping []int
	for i := range s.trig {
		t := &s.trig[i]
		if !drawsCNP(t, nakYes) {
			continue
		}
		g := id(a.keyOf(sc, t.conn, t.node))
		grouping = append(grouping, g)
		for len(lastTrig) <= g {
			lastTrig, lastCNP = append(lastTrig, -1), append(lastCNP, -1)
		}
		m := s.interval[t.node]
		tol := a.cnpTolerance(m)
		if t.cnp >= 0 {
			at := s.cnps[t.cnp].ts
			if lastTrig[g] >= 0 {
				gap := at - lastTrig[g]
				if res.UpperNs < 0 || gap < res.UpperNs {
					res.UpperNs = gap
				}
				if m > 0 && gap < m-tol {
					res.conflict("%s at seq %d (connection %d) drew a CNP at most %v after its group's previous "+
						"CNP-drawing trigger, within the interval %v", trigNames[t.kind], t.seq, t.conn,
						time.Duration(gap), time.Duration(m))
				}
			}
			lastTrig[g], lastCNP[g] = t.ts, at
			continue
		}
		if lastTrig[g] < 0 {
			res.conflict("%s at seq %d (connection %d) drew no CNP, though its group had sent none before",
				trigNames[t.kind], t.seq, t.conn)
			continue
		}
		need := max(t.ts-lastCNP[g], 0)
		res.LowerNs = max(res.LowerNs, need)
		if m > 0 && need >= m+tol {
			res.conflict("%s at seq %d (connection %d) drew no CNP, at least %v after its group's previous CNP, "+
				"beyond the interval %v", trigNames[t.kind], t.seq, t.conn, time.Duration(need), time.Duration(m))
		}
	}
	return grouping
}

// scopeVerdict names the pacing scope the trace supports: one consistent
// scope, several that group this trace's triggers alike (the trace cannot
// tell them apart), or why there is no answer.
func (a *Analyzer) scopeVerdict(rep *CNPReport, groupings [][]int, nakYes bool) string {
	var suppressed int
	for i := range a.cnp.trig {
		if drawsCNP(&a.cnp.trig[i], nakYes) && a.cnp.trig[i].cnp < 0 {
			suppressed++
		}
	}
	switch {
	case rep.CEMarked == 0 && !nakYes:
		return "unknown: no CE-marked packet"
	case len(rep.Consistent) == 0:
		return "none: no pacing scope explains the trace"
	case len(rep.Consistent) == len(scopeNames) && suppressed == 0:
		return "any: every trigger drew a CNP"
	case len(rep.Consistent) == 1:
		return rep.Consistent[0]
	}
	same := true
	g0 := groupings[slices.Index(scopeNames[:], rep.Consistent[0])]
	for _, sc := range rep.Consistent[1:] {
		if !slices.Equal(g0, groupings[slices.Index(scopeNames[:], sc)]) {
			same = false
		}
	}
	if same {
		return strings.Join(rep.Consistent, " = ") + " (the same grouping in this trace)"
	}
	return "ambiguous: " + strings.Join(rep.Consistent, ", ")
}

// cnpEvents is the plot series: every trigger and CNP with its peer, in
// trace order, up to Options.MaxRecords.
func (a *Analyzer) cnpEvents(rep *CNPReport) {
	s := &a.cnp
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
	slices.SortStableFunc(rep.Events, func(x, y CNPEvent) int { return cmp.Compare(x.Seq, y.Seq) })
}

func cmpAddr(x, y string) int {
	ax, ex := netip.ParseAddr(x)
	ay, ey := netip.ParseAddr(y)
	if ex != nil || ey != nil {
		return strings.Compare(x, y)
	}
	return ax.Compare(ay)
}
