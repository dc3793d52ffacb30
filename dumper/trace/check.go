package trace

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/rdma-appliance/appliance/internal/mirror"
)

const (
	// maxTrackedGaps bounds the gap ranges kept to match late copies
	// against (24 bytes each); gaps beyond it are counted only, and a late
	// copy that would have filled one counts as a duplicate.
	maxTrackedGaps = 1 << 16
	// maxDirections bounds the directions tracked one by one.
	maxDirections = 1 << 16
	half48        = 1 << 47
	wrap48        = 1 << 48
)

// attributionBudget bounds the calls to Options.Assign per merge, so that a
// corrupt sequence number (a gap of 2^47) cannot stall it; a variable for
// the fuzz tests.
var attributionBudget = 1 << 26

// dirKey is a direction: source and destination addresses, IPv4 mapped
// into IPv6.
type dirKey struct{ src, dst [16]byte }

func (k dirKey) addrs() (netip.Addr, netip.Addr) {
	return netip.AddrFrom16(k.src).Unmap(), netip.AddrFrom16(k.dst).Unmap()
}

// tsBack is a packet whose timestamp went back.
type tsBack struct {
	seq, prevSeq uint64
	delta        int64 // ns, negative (0 under StrictTimestamps)
	dir          int   // direction index, for condition 5
}

// orderBack is a record of a file whose sequence number went back.
type orderBack struct {
	source, path string
	seq, prevSeq uint64
}

// checker runs the integrity conditions over the packets in merged order.
// Everything it keeps per packet is fixed-size; lists of offenders stop at
// Options.MaxListed.
type checker struct {
	opts Options

	packets        uint64
	started        bool
	low, next      uint64 // lowest sequence number of the range, the one expected next
	minSeq, maxSeq uint64

	gaps             []SeqRange // sorted, disjoint
	untrackedGaps    uint64
	untrackedMissing uint64
	missing          uint64
	dups             uint64
	dupSeqs          []uint64
	late             uint64
	attr             map[string]uint64
	attrBudget       int
	attrIncomplete   bool

	prev48, prevSeq uint64
	ext, firstTS    int64
	wraps           int
	tsBack          uint64
	tsBacks         []tsBack

	dirIdx    map[dirKey]int
	dirs      []DirectionStats
	dirOther  uint64
	dirBack   uint64
	dirBacks  []tsBack
	orderBack []orderBack

	events [256]uint64
}

func newChecker(opts Options) *checker {
	c := &checker{opts: opts, dirIdx: make(map[dirKey]int), attr: make(map[string]uint64),
		attrBudget: attributionBudget}
	if opts.FirstSeq != 0 {
		c.started = true
		c.low, c.next = opts.FirstSeq, opts.FirstSeq
	}
	return c
}

// packet checks one packet, in merged order, and returns its extended
// timestamp.
//
// ref is the copy's capture time in Unix nanoseconds as its dumper wrote
// it (the dumper extends the 48-bit mirror timestamp from its clock):
// when its low 48 bits are the copy's timestamp, the trace's extended
// timestamps start from it, so the merged trace carries the dumpers'
// dates rather than ones within three days of 1970.
func (c *checker) packet(m *mirror.Meta, dir dirKey, ref int64) int64 {
	seq := m.Seq
	c.packets++
	c.events[m.Event]++
	if c.packets == 1 {
		c.minSeq, c.maxSeq = seq, seq
	} else {
		c.minSeq, c.maxSeq = min(c.minSeq, seq), max(c.maxSeq, seq)
	}

	// Condition 1.
	if !c.started {
		c.started = true
		c.low, c.next = seq, seq
	}
	switch {
	case seq == c.next:
		c.next++
	case seq > c.next:
		c.addGap(c.next, seq-1)
		c.next = seq + 1
	case seq < c.low:
		// Below everything so far: the range grows downwards.
		if seq+1 < c.low {
			c.addGap(seq+1, c.low-1)
		}
		c.low = seq
	case c.fill(seq):
		c.late++
	default:
		c.dups++
		if len(c.dupSeqs) < c.opts.MaxListed {
			c.dupSeqs = append(c.dupSeqs, seq)
		}
	}

	// Condition 2, with the timestamp extended past the 48-bit wrap: the
	// step from the previous packet is the 48-bit difference read as a
	// signed number, so a wrap is a small step forward and a step back is
	// negative.
	ts48 := uint64(m.Timestamp) & mirror.Mask48
	if c.packets == 1 {
		c.ext = int64(ts48)
		if ref > 0 && uint64(ref)&mirror.Mask48 == ts48 {
			c.ext = ref
		}
		c.firstTS = c.ext
	} else {
		d := int64((ts48 - c.prev48) & mirror.Mask48)
		if d >= half48 {
			d -= wrap48
			if ts48 > c.prev48 {
				c.wraps-- // back across the wrap
			}
		} else if ts48 < c.prev48 {
			c.wraps++
		}
		if d < 0 || d == 0 && c.opts.StrictTimestamps {
			c.tsBack++
			if len(c.tsBacks) < c.opts.MaxListed {
				c.tsBacks = append(c.tsBacks, tsBack{seq: seq, prevSeq: c.prevSeq, delta: d})
			}
		}
		c.ext += d
	}
	c.prev48, c.prevSeq = ts48, seq

	// Condition 5.
	i, ok := c.dirIdx[dir]
	if !ok {
		if len(c.dirs) == maxDirections {
			c.dirOther++
			return c.ext
		}
		i = len(c.dirs)
		c.dirIdx[dir] = i
		src, dst := dir.addrs()
		c.dirs = append(c.dirs, DirectionStats{Src: src, Dst: dst, FirstSeq: seq, FirstTimestamp: c.ext})
	}
	d := &c.dirs[i]
	if d.Packets > 0 && (c.ext < d.LastTimestamp || c.ext == d.LastTimestamp && c.opts.StrictTimestamps) {
		d.Backwards++
		c.dirBack++
		if len(c.dirBacks) < c.opts.MaxListed {
			c.dirBacks = append(c.dirBacks, tsBack{seq: seq, prevSeq: d.LastSeq, delta: c.ext - d.LastTimestamp, dir: i})
		}
	}
	d.Packets++
	d.LastSeq, d.LastTimestamp = seq, c.ext
	return c.ext
}

// addGap records the missing range [a, b], above every gap so far or (when
// the range grows downwards) below every gap.
func (c *checker) addGap(a, b uint64) {
	n := b - a + 1
	c.missing += n
	if len(c.gaps) < maxTrackedGaps {
		g := SeqRange{First: a, Last: b, Count: n}
		if len(c.gaps) > 0 && a < c.gaps[0].First {
			c.gaps = slices.Insert(c.gaps, 0, g)
		} else {
			c.gaps = append(c.gaps, g)
		}
	} else {
		c.untrackedGaps++
		c.untrackedMissing += n
	}
	if c.opts.Assign == nil {
		return
	}
	for s := a; ; s++ {
		if c.attrBudget == 0 {
			c.attrIncomplete = true
			return
		}
		c.attrBudget--
		c.attr[c.opts.Assign(s)]++
		if s == b {
			return
		}
	}
}

// fill removes seq from the gap holding it and reports whether there was
// one.
func (c *checker) fill(seq uint64) bool {
	lo, hi := 0, len(c.gaps)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if c.gaps[mid].Last < seq {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == len(c.gaps) || c.gaps[lo].First > seq {
		return false
	}
	g := &c.gaps[lo]
	switch {
	case g.First == g.Last:
		c.gaps = slices.Delete(c.gaps, lo, lo+1)
	case seq == g.First:
		g.First++
		g.Count--
	case seq == g.Last:
		g.Last--
		g.Count--
	default:
		upper := SeqRange{First: seq + 1, Last: g.Last, Count: g.Last - seq}
		g.Last, g.Count = seq-1, seq-g.First
		c.gaps = slices.Insert(c.gaps, lo+1, upper)
	}
	c.missing--
	if c.opts.Assign != nil {
		if name := c.opts.Assign(seq); c.attr[name] > 0 {
			c.attr[name]--
		}
	}
	return true
}

// finish closes the sequence range (a trailing gap up to the injector's
// last sequence number, when known) and fills in the report: the figures,
// each condition's status, and a violation for each condition failed.
func (c *checker) finish(r *Report) {
	o := &c.opts
	c.closeRange()
	c.figures(r)
	dead, deadNames := deadFiles(r)
	fail := [NumConditions + 1]bool{
		CondConsecutive: c.missing > 0 || c.dups > 0,
		CondTimestamps:  c.tsBack > 0,
		CondMirrored:    o.Mirrored >= 0 && c.packets != uint64(o.Mirrored),
		CondRxRoCE:      o.RxRoCE >= 0 && c.packets != uint64(o.RxRoCE),
		CondDirection:   c.dirBack > 0,
		CondSourceOrder: len(c.orderBack) > 0,
		CondDumpers:     len(dead) > 0,
	}
	c.conditions(r, &fail)

	add := func(cond Condition, v Violation) {
		v.Condition, v.Name = cond, violatedNames[cond]
		r.Violations = append(r.Violations, v)
	}
	if fail[CondConsecutive] {
		add(CondConsecutive, c.seqViolation(r))
	}
	if fail[CondTimestamps] {
		add(CondTimestamps, c.timestampViolation())
	}
	if fail[CondMirrored] {
		add(CondMirrored, Violation{Detail: fmt.Sprintf("the trace has %d packets, the injector mirrored %d", c.packets, o.Mirrored)})
	}
	if fail[CondRxRoCE] {
		add(CondRxRoCE, Violation{Detail: fmt.Sprintf("the trace has %d packets, the injector received %d RoCE packets", c.packets, o.RxRoCE)})
	}
	if fail[CondDirection] {
		add(CondDirection, c.directionViolation())
	}
	if fail[CondSourceOrder] {
		add(CondSourceOrder, c.orderViolation(r))
	}
	if fail[CondDumpers] {
		add(CondDumpers, dumperViolation(dead, deadNames))
	}
	r.Valid = len(r.Violations) == 0
}

// closeRange adds the trailing gap: with the first sequence number and the
// mirrored count known, copies lost after the last one in the trace are
// missing too (condition 1), not merely uncounted.
func (c *checker) closeRange() {
	o := &c.opts
	if o.FirstSeq != 0 && o.Mirrored >= 0 {
		if last := o.FirstSeq + uint64(o.Mirrored) - 1; o.Mirrored > 0 && c.next <= last {
			c.addGap(c.next, last)
			c.next = last + 1
		}
	}
}

// figures copies the check's counts into the report: the sequence and
// timestamp ranges, gaps, duplicates, the missing numbers by dumper, the
// events and the directions.
func (c *checker) figures(r *Report) {
	r.Packets = c.packets
	if c.packets > 0 {
		r.FirstSeq, r.LastSeq = c.minSeq, c.maxSeq
		r.FirstTimestamp, r.LastTimestamp = c.firstTS, c.ext
	}
	r.TimestampWraps, r.TimestampsBack = c.wraps, c.tsBack
	r.Missing, r.Gaps = c.missing, uint64(len(c.gaps))+c.untrackedGaps
	r.FirstGaps = slices.Clone(c.gaps[:min(len(c.gaps), c.opts.MaxListed)])
	r.Duplicates, r.Late = c.dups, c.late
	for name, n := range c.attr {
		if n > 0 {
			if r.MissingByDumper == nil {
				r.MissingByDumper = make(map[string]uint64)
			}
			r.MissingByDumper[name] = n
		}
		if s := r.Source(name); s != nil {
			s.Missing = n
		}
	}
	r.AttributionIncomplete = c.attrIncomplete
	r.Events = make(map[string]uint64)
	for ev, n := range c.events {
		if n > 0 {
			r.Events[mirror.EventType(ev).String()] = n
		}
	}
	r.Directions = c.dirs
	if r.Directions == nil {
		r.Directions = []DirectionStats{}
	}
	r.OtherDirections = c.dirOther
}

// deadFiles are the dumper files that failed (condition 7), with the name
// of each one's dumper.
func deadFiles(r *Report) ([]*FileStats, []string) {
	var dead []*FileStats
	var deadNames []string
	for i := range r.Sources {
		for j := range r.Sources[i].Files {
			if f := &r.Sources[i].Files[j]; f.Error != "" {
				dead = append(dead, f)
				deadNames = append(deadNames, r.Sources[i].Name)
			}
		}
	}
	return dead, deadNames
}

// conditions gives every condition its status; 3 and 4 are not checked
// when the injector's counter is unknown, so that an unknown counter is
// not taken for a pass.
func (c *checker) conditions(r *Report, fail *[NumConditions + 1]bool) {
	o := &c.opts
	r.Conditions = make([]ConditionResult, 0, NumConditions)
	for cond := Condition(1); cond <= NumConditions; cond++ {
		st := StatusPass
		switch {
		case cond == CondMirrored && o.Mirrored < 0, cond == CondRxRoCE && o.RxRoCE < 0:
			st = StatusNotChecked
		case fail[cond]:
			st = StatusFail
		}
		r.Conditions = append(r.Conditions, ConditionResult{Condition: cond, Name: cond.String(), Status: st})
	}
}

// timestampViolation describes condition 2: the first packets whose
// timestamp went back, each against the packet before it.
func (c *checker) timestampViolation() Violation {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s: ", c.tsBack, plural(c.tsBack, "time", "times"))
	v := Violation{}
	for i, t := range c.tsBacks {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "seq %d (%d ns after seq %d)", t.seq, t.delta, t.prevSeq)
		v.Seqs = append(v.Seqs, t.seq)
	}
	more(&b, c.tsBack, len(c.tsBacks))
	v.Detail = b.String()
	return v
}

// directionViolation describes condition 5: the first packets whose
// timestamp went back within their direction, naming it.
func (c *checker) directionViolation() Violation {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s: ", c.dirBack, plural(c.dirBack, "time", "times"))
	v := Violation{}
	for i, t := range c.dirBacks {
		if i > 0 {
			b.WriteString(", ")
		}
		d := &c.dirs[t.dir]
		fmt.Fprintf(&b, "seq %d (%v > %v, %d ns after seq %d)", t.seq, d.Src, d.Dst, t.delta, t.prevSeq)
		v.Seqs = append(v.Seqs, t.seq)
	}
	more(&b, c.dirBack, len(c.dirBacks))
	v.Detail = b.String()
	return v
}

// orderViolation describes condition 6: the first records that came
// after a higher sequence number in their file, naming the dumpers.
func (c *checker) orderViolation(r *Report) Violation {
	var b strings.Builder
	v := Violation{}
	var total uint64
	for _, s := range r.Sources {
		total += s.OutOfOrder
	}
	fmt.Fprintf(&b, "%d %s: ", total, plural(total, "record", "records"))
	for i, o := range c.orderBack {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s (%s): seq %d after %d", o.source, o.path, o.seq, o.prevSeq)
		v.Seqs = append(v.Seqs, o.seq)
		if !slices.Contains(v.Sources, o.source) {
			v.Sources = append(v.Sources, o.source)
		}
	}
	more(&b, total, len(c.orderBack))
	v.Detail = b.String()
	return v
}

// dumperViolation describes condition 7: each failed file's dumper and
// error, and how far it got.
func dumperViolation(dead []*FileStats, deadNames []string) Violation {
	var b strings.Builder
	v := Violation{}
	for i, f := range dead {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s (%s): %s", deadNames[i], f.Path, f.Error)
		if f.Packets > 0 {
			fmt.Fprintf(&b, " after %d packets (last seq %d)", f.Packets, f.LastSeq)
			v.Seqs = append(v.Seqs, f.LastSeq)
		}
		if !slices.Contains(v.Sources, deadNames[i]) {
			v.Sources = append(v.Sources, deadNames[i])
		}
	}
	v.Detail = b.String()
	return v
}

// seqViolation describes condition 1: the first gaps and duplicates and
// the attribution of the missing numbers.
func (c *checker) seqViolation(r *Report) Violation {
	var b strings.Builder
	v := Violation{Gaps: r.FirstGaps}
	if c.missing > 0 {
		fmt.Fprintf(&b, "%d %s, %d missing: ", r.Gaps, plural(r.Gaps, "gap", "gaps"), c.missing)
		for i, g := range r.FirstGaps {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(g.String())
			v.Seqs = append(v.Seqs, g.First)
		}
		more(&b, r.Gaps, len(r.FirstGaps))
	}
	if c.dups > 0 {
		if c.missing > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%d %s: seq ", c.dups, plural(c.dups, "duplicate", "duplicates"))
		for i, s := range c.dupSeqs {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%d", s)
			v.Seqs = append(v.Seqs, s)
		}
		more(&b, c.dups, len(c.dupSeqs))
	}
	if len(r.MissingByDumper) > 0 {
		type kv struct {
			name string
			n    uint64
		}
		var byName []kv
		for k, n := range r.MissingByDumper {
			byName = append(byName, kv{k, n})
		}
		slices.SortFunc(byName, func(a, b kv) int { return cmp.Compare(a.name, b.name) })
		b.WriteString("; missing by dumper:")
		for _, x := range byName {
			name := x.name
			if name == "" {
				name = "(unassigned)"
			}
			fmt.Fprintf(&b, " %s %d", name, x.n)
			v.Sources = append(v.Sources, x.name)
		}
		if c.attrIncomplete {
			b.WriteString(" (incomplete)")
		}
	}
	v.Detail = b.String()
	return v
}

func plural(n uint64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// more notes how many offenders were not listed.
func more(b *strings.Builder, total uint64, listed int) {
	if total > uint64(listed) {
		fmt.Fprintf(b, " and %d more", total-uint64(listed))
	}
}
