package dtamem

import "encoding/binary"

// EntrySeq is the sequence the entry at list position pos carries:
// positions count from 0, sequences from 1, wrapping past 2^32-1 to 1 and
// never 0, so a zeroed ring holds no entry.
func EntrySeq(pos uint64) uint32 { return uint32(pos%(1<<32-1)) + 1 }

// PutEntry writes the entry of list position pos into e, as the
// translator's Append WRITE carries it.
func PutEntry(e []byte, pos uint64, data []byte) {
	copy(e[0:4], data)
	binary.BigEndian.PutUint32(e[4:8], EntrySeq(pos))
}

// EntryAt reads position pos of a ring of entries entries: the entry's
// data, and whether the slot holds that position's entry (and not a
// stale one of an earlier lap, or none yet). A reader racing the writer
// of the next lap reads the sequence again after the data (EntryAt twice).
func EntryAt(mem []byte, entries, pos uint64) (uint32, bool) {
	off := (pos % entries) * AppendEntryLen
	e := mem[off : off+AppendEntryLen]
	if binary.BigEndian.Uint32(e[4:]) != EntrySeq(pos) {
		return 0, false
	}
	return binary.BigEndian.Uint32(e), true
}

// Poller reads one Append list in collector memory from its tail; several
// pollers may share a list by taking disjoint positions (Start, Step).
//
// DTA never resends: a WRITE the collector's RNIC dropped (and the ones
// after it, up to the NAK that resynchronised the translator) leaves a
// hole in the ring that no later write fills, since the translator's
// tail has moved on. A poller that only waits for the next position
// would stop at the first hole for good, so Ahead and Skip let its owner
// step over a hole once later entries show it is one.
type Poller struct {
	Mem     []byte // the list's ring
	Entries uint64
	next    uint64 // the position to read next
	Step    uint64 // 1, or the number of pollers sharing the list
	// Lost counts this poller's positions skipped as holes.
	Lost uint64
	// Layout is the list's entry format. In LayoutPublic an entry has no
	// sequence and a slot holds one when it is not zero, so the poller
	// clears, for each position it reads, the slot half a ring ahead:
	// the previous lap's entry there would otherwise pass for a new one
	// when the poller gets to it. A writer more than half a ring ahead of
	// the poller loses the entries it wrote there (the ring is then
	// about to overrun anyway), and the latest half ring stays readable
	// (Layout.EntryAt) for the collector's recent entries.
	Layout Layout
}

// NewPoller reads positions start, start+step, ... of a list.
func NewPoller(mem []byte, entries, start, step uint64) *Poller {
	if step == 0 {
		step = 1
	}
	return &Poller{Mem: mem, Entries: entries, next: start, Step: step}
}

// Next is the position the poller reads next.
func (p *Poller) Next() uint64 { return p.next }

// Poll calls fn for each new entry (up to max) with its position and
// data, and returns how many it read. An entry is new when its sequence
// is the one expected at the poller's position.
func (p *Poller) Poll(max int, fn func(pos uint64, data uint32)) int {
	n := 0
	for n < max {
		d, ok := p.Layout.EntryAt(p.Mem, p.Entries, p.next)
		if !ok {
			break
		}
		if p.Layout == LayoutPublic {
			off := ((p.next + p.Entries/2) % p.Entries) * 4
			clear(p.Mem[off : off+4])
		}
		fn(p.next, d)
		p.next += p.Step
		n++
	}
	return n
}

// Ahead looks up to lookahead positions past the poller's (of any
// poller of the list) for the first that holds its entry, and returns
// it. Where the list has a single writer whose writes land in order, as
// one RC connection's do, an entry there means the poller's position
// was written before it or never will be. Lookahead is capped below the
// ring's size, past which positions alias the poller's own slot.
func (p *Poller) Ahead(lookahead uint64) (uint64, bool) {
	lookahead = min(lookahead, p.Entries-1)
	for q := p.next + 1; q <= p.next+lookahead; q++ {
		if _, ok := p.Layout.EntryAt(p.Mem, p.Entries, q); ok {
			return q, true
		}
	}
	return 0, false
}

// Skip moves the poller to its first position at or after q (from
// Ahead) and counts its positions passed over as lost. It never moves
// backwards.
func (p *Poller) Skip(q uint64) {
	if q <= p.next {
		return
	}
	k := (q - p.next + p.Step - 1) / p.Step
	p.next += k * p.Step
	p.Lost += k
}
