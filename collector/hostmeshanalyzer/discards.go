package hostmeshanalyzer

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// DiscardStatus is one switch's lossless class over a window: the frames
// its ingress priority group of the probes' class discarded (the switch's
// own counters, spread evenly over their intervals), the ports that
// discarded, and the abnormal probes the analysis charged to it: the
// probes over it that timed out, and the slow probes over it or over a
// switch next to it.
type DiscardStatus struct {
	Switch   string `json:"switch"`
	Discards uint64 `json:"discards"`
	// Held: it discarded none in this window, but did within Hold
	// before it.
	Held      bool     `json:"held,omitempty"`
	Ports     []string `json:"ports"`
	Traversed int      `json:"traversed"` // probes of the window over it
	Timeouts  int      `json:"timeouts_over,omitempty"`
	// SlowOver are the slow probes over it, SlowNear those over a
	// switch next to it.
	SlowOver int `json:"slow_over,omitempty"`
	SlowNear int `json:"slow_near,omitempty"`
	discards float64
}

// losslessDiscards is step 0b, from the switches' ingress discard counters
// of the lossless class (PG drops): a switch whose lossless class
// discarded in the window has PFC off for it or headroom too short for its
// cables, and the frames it discards are RDMA's, lost where the fabric
// promised not to lose any. The probes over it (their traced path crosses
// it, or an RNIC of theirs hangs off it) are charged to it, timeouts and
// all: a lost probe there is its discard, as likely as any other fault's.
// The incast that exposes it also leaves queues upstream, on the links
// into it and, PFC holding the senders (short headroom still pauses) or
// uncontrolled senders filling their uplinks (PFC off does not), on the
// links one switch further: slow probes over a switch next to it are its
// ripples (castVotes charges them). A switch that discarded within Hold
// before the window is held: the slow probes over it and next to it are
// still its, the lost ones are not. Without a discard nothing is charged:
// a lossless class with proper headroom never discards, whatever the
// load, and the other steps judge the window as before. Like a storm, a
// discarding switch hides a second fault on the probes charged to it: in
// a two-tier rail-optimized cluster every spine is next to every rail.
func (w *window) losslessDiscards(recs []PGDrop) {
	w.charged = make([]string, len(w.win))
	w.discarding = map[string]*DiscardStatus{}
	ports := map[string]map[string]bool{}
	for i := range recs {
		d := &recs[i]
		if d.PG != w.c.LosslessPG || d.Discards == 0 {
			continue
		}
		f, ok := overlap(d.From, d.To, w.start, w.end)
		if !ok {
			continue
		}
		st := w.discarding[d.Switch]
		if st == nil {
			st = &DiscardStatus{Switch: d.Switch}
			w.discarding[d.Switch] = st
			ports[d.Switch] = map[string]bool{}
		}
		st.discards += f * float64(d.Discards)
		ports[d.Switch][d.Port] = true
	}
	for sw, st := range w.discarding {
		st.Discards = uint64(math.Round(st.discards))
		if st.Discards == 0 {
			delete(w.discarding, sw)
			continue
		}
		st.Ports = sortedKeys(ports[sw])
		w.a.discardHeld[sw] = w.end + int64(w.c.Hold)
	}
	// A switch that discarded lately is held as an RNIC is: the incast
	// that overflowed it outlives its discards (an RC flow that gave up
	// leaves the others at line rate, their queues standing where they
	// converge), and the probes those queues delay are still its.
	for sw, until := range w.a.discardHeld {
		switch {
		case until <= w.start:
			delete(w.a.discardHeld, sw)
		case w.discarding[sw] == nil:
			w.discarding[sw] = &DiscardStatus{Switch: sw, Held: true}
		}
	}
	if len(w.discarding) == 0 {
		return
	}
	of, next := w.attachments()
	w.rippleOf = map[string]string{}
	for _, sw := range sortedKeys(w.discarding) {
		for n := range next[sw] {
			if w.discarding[n] == nil && w.rippleOf[n] == "" {
				w.rippleOf[n] = sw
			}
		}
	}
	for i := range w.win {
		if w.behind[i] {
			continue
		}
		r := &w.win[i]
		sw := ""
		for _, n := range w.paths[i] {
			if w.discarding[n] != nil {
				sw = n
				break
			}
		}
		for _, k := range [2]string{r.SrcKey(), r.DstKey()} {
			if sw == "" && w.discarding[of[k]] != nil {
				sw = of[k]
			}
		}
		// A held switch discarded nothing in this window: a probe lost
		// over it is not its discard.
		if sw == "" || r.Timeout && w.discarding[sw].Held {
			continue
		}
		w.charged[i] = sw
		st := w.discarding[sw]
		st.Traversed++
		if r.Timeout {
			st.Timeouts++
		}
	}
}

// overlap is the share of an interval [from, to] of a counter in the
// window [start, end), counters spread evenly over their interval (an
// instant's reading counts whole in the window it falls in); ok false
// when they do not meet.
func overlap(from, to, start, end int64) (float64, bool) {
	if to == from {
		return 1, to > start && to <= end
	}
	lo, hi := max(from, start), min(to, end)
	if hi <= lo {
		return 0, false
	}
	return float64(hi-lo) / float64(to-from), true
}

// attachments are what the traced paths tell of the topology: the switch
// each RNIC hangs off, and each switch's neighbours (switches a path
// crosses right before or after it).
func (w *window) attachments() (of map[string]string, next map[string]map[string]bool) {
	of, next = map[string]string{}, map[string]map[string]bool{}
	link := func(a, b string) {
		if next[a] == nil {
			next[a] = map[string]bool{}
		}
		next[a][b] = true
	}
	for _, p := range w.paths {
		if len(p) < 3 {
			continue
		}
		of[p[0]], of[p[len(p)-1]] = p[1], p[len(p)-2]
		for j := 2; j < len(p)-1; j++ {
			link(p[j-1], p[j])
			link(p[j], p[j-1])
		}
	}
	return of, next
}

// rippleCharge is castVotes' question for a slow probe: the discarding
// switch whose incast's queues delayed it, when its path crosses a switch
// next to one, or "".
func (w *window) rippleCharge(p []string) string {
	for _, n := range p {
		if sw := w.rippleOf[n]; sw != "" {
			return sw
		}
	}
	return ""
}

// discardSuspects are step 0b's verdicts: each switch whose lossless class
// discarded while the probes over it suffered, with the abnormal probes
// charged to it. Suffered means a probe over it timed out or MinVotes
// were slow: a probe of 50 bytes fits in a few hundred bytes of headroom
// where a 1 KB frame does not, so under a short headroom the switch
// discards RDMA's frames while the probes over it only queue. It ranks
// after a PFC storm (whose pauses may overflow a short headroom) and
// before the drops the voting finds: a switch that says it discarded
// lossless frames needs no vote to be believed. A switch that discarded
// while the probes over it went through unharmed is in the report
// (Discards) without an alert: the analysis alerts on what probing sees.
func (w *window) discardSuspects() []Suspect {
	var sus []Suspect
	for _, sw := range sortedKeys(w.discarding) {
		st := w.discarding[sw]
		w.rep.Discards = append(w.rep.Discards, *st)
		if st.Timeouts == 0 && st.SlowOver < w.c.MinVotes {
			continue
		}
		what := fmt.Sprintf("its lossless class (PG %d) discarded %d frames at %s", w.c.LosslessPG, st.Discards, strings.Join(st.Ports, ", "))
		if st.Held {
			what = fmt.Sprintf("its lossless class (PG %d) discarded frames within the last %v (held)", w.c.LosslessPG, w.c.Hold)
		}
		sus = append(sus, Suspect{Kind: KindSwitch, Name: sw, Basis: "discards", Evidence: st.Timeouts + st.SlowOver + st.SlowNear,
			Share: share(st.Timeouts+st.SlowOver, st.Traversed),
			Alert: fmt.Sprintf("ALERT switch %s: %s; of the %d probes over it %d timed out and %d were slow, %d slow next to it (PFC off or headroom short?)",
				sw, what, st.Traversed, st.Timeouts, st.SlowOver, st.SlowNear)})
	}
	slices.SortFunc(w.rep.Discards, func(x, y DiscardStatus) int {
		return cmp.Or(cmp.Compare(y.Discards, x.Discards), cmp.Compare(x.Switch, y.Switch))
	})
	return sus
}
