package inject

import (
	"fmt"
	"sync"

	"github.com/rdma-appliance/appliance/verbs/roce"
)

// connKey names one direction of a connection: the data packets from Src to
// Dst for the QP DstQPN.
type connKey struct {
	Src, Dst [16]byte
	DstQPN   uint32
}

// connState is a connection's ITER registers and its entries. The match is
// two-level: the connection (the first three key fields) by hash, then
// {PSN, ITER} in the connection's own small map, which is nil for the
// connections no intent names.
type connState struct {
	last   uint32 // paper: PSN of the previous packet; p4: the expected PSN
	iter   uint16
	events map[uint64]int32 // psn<<16 | iter -> entry index
	anyPSN map[uint16]int32 // iter -> entry index, for psn: all
}

func psnIter(psn uint32, iter uint16) uint64 { return uint64(psn)<<16 | uint64(iter) }

// Table is the injector's match-action state: the event entries and the
// ITER registers of every connection direction that carries data. The data
// path (Lookup) runs on one goroutine with the table locked for a burst;
// Load replaces the contents under the same lock, so a control-plane update
// lands between bursts, never in the middle of one.
type Table struct {
	mu      sync.Mutex
	mode    IterMode
	conns   map[connKey]*connState
	entries []Entry
	hits    []uint64 // per entry
	// index finds a connection's state from its key without Go's map
	// hashing of 36 bytes: an open-addressed table hashed on the QPN and
	// the low bits of the destination address, which already tell
	// connections apart; the whole key is compared on a hit.
	index []connSlot
}

type connSlot struct {
	key connKey
	st  *connState
}

func (k *connKey) hash() uint32 {
	d := uint32(k.Dst[12])<<24 | uint32(k.Dst[13])<<16 | uint32(k.Dst[14])<<8 | uint32(k.Dst[15])
	s := uint32(k.Src[15])
	return (k.DstQPN*0x9e3779b1 ^ d*0x85ebca6b ^ s*0xc2b2ae35) >> 3
}

// buildIndex sizes the index to at most half full.
func buildIndex(cs map[connKey]*connState) []connSlot {
	n := 16
	for n < 2*len(cs) {
		n *= 2
	}
	idx := make([]connSlot, n)
	mask := uint32(n - 1)
	for k, st := range cs {
		for i := k.hash() & mask; ; i = (i + 1) & mask {
			if idx[i].st == nil {
				idx[i] = connSlot{key: k, st: st}
				break
			}
		}
	}
	return idx
}

// find returns the state of k, nil when the metadata has no such
// connection.
func (t *Table) find(k *connKey) *connState {
	mask := uint32(len(t.index) - 1)
	for i := k.hash() & mask; ; i = (i + 1) & mask {
		sl := &t.index[i]
		if sl.st == nil || sl.key == *k {
			return sl.st
		}
	}
}

// NewTable returns an empty table counting rounds with mode.
func NewTable(mode IterMode) *Table {
	return &Table{mode: mode, conns: map[connKey]*connState{}, index: make([]connSlot, 16)}
}

// Mode returns the ITER mode.
func (t *Table) Mode() IterMode { return t.mode }

// dataDirection is the direction of a connection's data packets: requester
// to responder, except READ, whose data (the responses) flows back.
func dataDirection(i int, c Conn, g Geometry, opt Options) connKey {
	if g.Verb == VerbRead || g.Verb == VerbSendRead && i >= opt.SendConns {
		return connKey{Src: c.ResponderIP.As16(), Dst: c.RequesterIP.As16(), DstQPN: c.RequesterQPN}
	}
	return connKey{Src: c.RequesterIP.As16(), Dst: c.ResponderIP.As16(), DstQPN: c.ResponderQPN}
}

// Load replaces the entries and the connection registers: each connection's
// data direction starts in round 1 with its initial PSN (the paper's "last
// PSN = IPSN - 1"; the P4 program's "expected = IPSN"). Entries must come
// from Compile with the same connections.
func (t *Table) Load(entries []Entry, conns []Conn, g Geometry, opt Options) error {
	cs := make(map[connKey]*connState, len(conns))
	for i, c := range conns {
		st := &connState{iter: 1, last: (c.RequesterIPSN - 1) & roce.PSNMask}
		if t.mode == IterP4 {
			st.last = c.RequesterIPSN & roce.PSNMask
		}
		cs[dataDirection(i, c, g, opt)] = st
	}
	for i, e := range entries {
		st := cs[connKey{Src: e.Key.Src, Dst: e.Key.Dst, DstQPN: e.Key.DstQPN}]
		if st == nil {
			return fmt.Errorf("inject: entry %v names no connection of the metadata", e)
		}
		if e.Key.PSN == AnyPSN {
			if st.anyPSN == nil {
				st.anyPSN = map[uint16]int32{}
			}
			st.anyPSN[e.Key.Iter] = int32(i)
			continue
		}
		if st.events == nil {
			st.events = map[uint64]int32{}
		}
		st.events[psnIter(e.Key.PSN, e.Key.Iter)] = int32(i)
	}
	t.mu.Lock()
	t.conns = cs
	t.index = buildIndex(cs)
	t.entries = append(t.entries[:0], entries...)
	t.hits = make([]uint64, len(entries))
	t.mu.Unlock()
	return nil
}

// Entries returns the loaded entries with their hit counts.
func (t *Table) Entries() ([]Entry, []uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Entry(nil), t.entries...), append([]uint64(nil), t.hits...)
}

// Lock and Unlock bracket a burst of Lookups.
func (t *Table) Lock()   { t.mu.Lock() }
func (t *Table) Unlock() { t.mu.Unlock() }

// Lookup runs the ITER logic and the match for one RoCE packet, with the
// table locked, and counts the hit. Only data packets (those whose opcode
// carries payload: SEND, WRITE, READ responses) of a connection in the
// metadata take part; everything else gets EventNone and round 0. As in
// the paper, the ITER registers are updated before the match, so a
// retransmitted packet already counts in its new round.
func (t *Table) Lookup(p *roce.Packet, frame []byte) (EventType, uint16) {
	info := p.Info()
	if !info.Payload || (info.Transport != roce.TransportRC && info.Transport != roce.TransportUC) {
		return EventNone, 0
	}
	k := connKey{Src: p.SrcGID(frame), Dst: p.DstGID(frame), DstQPN: p.DestQP}
	st := t.find(&k)
	if st == nil {
		return EventNone, 0
	}
	psn := p.PSN
	switch t.mode {
	case IterPaper:
		if roce.ComparePSN(psn, st.last) <= 0 {
			st.iter++
		}
		st.last = psn
	case IterP4:
		if psn != st.last {
			st.iter++
		} else if info.Position.IsStart() {
			st.iter = 1
		}
		st.last = (psn + 1) & roce.PSNMask
	}
	idx, ok := int32(0), false
	if st.events != nil {
		idx, ok = st.events[psnIter(psn, st.iter)]
	}
	if !ok && st.anyPSN != nil {
		idx, ok = st.anyPSN[st.iter]
	}
	if !ok {
		return EventNone, st.iter
	}
	t.hits[idx]++
	return t.entries[idx].Event, st.iter
}

// String summarises the table.
func (t *Table) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return fmt.Sprintf("%d entries, %d connections, iter mode %v", len(t.entries), len(t.conns), t.mode)
}
