package inject

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync"

	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/mirror"
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
// {PSN, ITER} in the connection's own small tables, which are empty for the
// connections no intent names.
type connState struct {
	last   uint32 // paper: PSN of the previous packet; p4: the expected PSN
	iter   uint16
	events entryMap // psn<<16 | iter -> entry index
	anyPSN entryMap // iter -> entry index, for psn: all
}

func psnIter(psn uint32, iter uint16) uint64 { return uint64(psn)<<16 | uint64(iter) }

// entryMap is an open-addressed map from a 40-bit key to an entry index.
// A Go map costs a runtime call and a generic hash per probe; the data
// path probes one or two of these per packet, and they never change
// between Loads, so a flat array probed inline is enough.
type entryMap struct {
	slots []entrySlot // nil when empty; otherwise a power of two, at most half full
	shift uint8
	n     int
}

type entrySlot struct {
	key uint64 // key | entryUsed; 0 marks an empty slot
	idx int32
}

// entryUsed tells a slot holding key 0 (a valid {PSN 0, ITER 0}) from an
// empty one; keys use 40 bits.
const entryUsed = 1 << 63

func (m *entryMap) slot(key uint64) uint64 { return (key * 0x9e3779b97f4a7c15) >> m.shift }

// set inserts or replaces key; the map grows to stay at most half full.
func (m *entryMap) set(key uint64, idx int32) {
	if m.slots == nil {
		m.slots, m.shift = make([]entrySlot, 4), 64-2
	}
	mask := uint64(len(m.slots) - 1)
	for i := m.slot(key); m.slots[i].key != 0; i = (i + 1) & mask {
		if m.slots[i].key == key|entryUsed {
			m.slots[i].idx = idx
			return
		}
	}
	if 2*(m.n+1) > len(m.slots) {
		old := m.slots
		m.slots, m.shift = make([]entrySlot, 2*len(old)), m.shift-1
		for _, sl := range old {
			if sl.key != 0 {
				m.put(sl)
			}
		}
	}
	m.put(entrySlot{key: key | entryUsed, idx: idx})
	m.n++
}

// put stores sl in the first free slot of its probe sequence; sl.key is
// not in the map.
func (m *entryMap) put(sl entrySlot) {
	mask := uint64(len(m.slots) - 1)
	for i := m.slot(sl.key &^ entryUsed); ; i = (i + 1) & mask {
		if m.slots[i].key == 0 {
			m.slots[i] = sl
			return
		}
	}
}

// get returns key's entry index.
func (m *entryMap) get(key uint64) (int32, bool) {
	if m.slots == nil {
		return 0, false
	}
	mask := uint64(len(m.slots) - 1)
	for i := m.slot(key); ; i = (i + 1) & mask {
		sl := &m.slots[i]
		if sl.key == key|entryUsed {
			return sl.idx, true
		}
		if sl.key == 0 {
			return 0, false
		}
	}
}

// Table is the injector's match-action state: the event entries and the
// ITER registers of every connection direction that carries data. The data
// path (Lookup) runs on one goroutine with the table locked for a burst;
// Load replaces the contents under the same lock, so a control-plane update
// lands between bursts, never in the middle of one.
type Table struct {
	mu      sync.Mutex
	mode    intent.IterMode
	conns   map[connKey]*connState
	entries []intent.Entry
	hits    []uint64 // per entry
	// index finds a connection's state from its key without Go's map
	// hashing of 36 bytes: an open-addressed table hashed on the QPN and
	// the low bits of the destination address, which already tell
	// connections apart; the whole key is compared on a hit.
	index []connSlot
}

// wireKey is a connKey as words loaded straight from the frame (the
// addresses' bytes in little-endian words): building the 16-byte GIDs byte
// by byte and comparing them as arrays cost more than the rest of the
// lookup, mostly in stalled loads of the just-stored bytes.
type wireKey struct {
	s0, s1, d0, d1 uint64
	qpn            uint32
}

func wireKeyOf(k *connKey) wireKey {
	return wireKey{s0: binary.LittleEndian.Uint64(k.Src[0:8]), s1: binary.LittleEndian.Uint64(k.Src[8:16]),
		d0: binary.LittleEndian.Uint64(k.Dst[0:8]), d1: binary.LittleEndian.Uint64(k.Dst[8:16]), qpn: k.DstQPN}
}

// v4Mapped is the upper word of an IPv4-mapped GID (::ffff:a.b.c.d) without
// the address, which fills its upper 32 bits.
const v4Mapped = 0xffff << 16

func (k *wireKey) hash() uint32 {
	d := bits.ReverseBytes32(uint32(k.d1 >> 32))
	s := uint32(k.s1 >> 56)
	return (k.qpn*0x9e3779b1 ^ d*0x85ebca6b ^ s*0xc2b2ae35) >> 3
}

type connSlot struct {
	key wireKey
	st  *connState
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
		wk := wireKeyOf(&k)
		for i := wk.hash() & mask; ; i = (i + 1) & mask {
			if idx[i].st == nil {
				idx[i] = connSlot{key: wk, st: st}
				break
			}
		}
	}
	return idx
}

// find returns the state of k, nil when the metadata has no such
// connection.
func (t *Table) find(k *wireKey) *connState {
	mask := uint32(len(t.index) - 1)
	for i := k.hash() & mask; ; i = (i + 1) & mask {
		sl := &t.index[i]
		if sl.st == nil || sl.key.qpn == k.qpn && sl.key.d1 == k.d1 && sl.key.s1 == k.s1 &&
			sl.key.d0 == k.d0 && sl.key.s0 == k.s0 {
			return sl.st
		}
	}
}

// NewTable returns an empty table counting rounds with mode.
func NewTable(mode intent.IterMode) *Table {
	return &Table{mode: mode, conns: map[connKey]*connState{}, index: make([]connSlot, 16)}
}

// Mode returns the ITER mode.
func (t *Table) Mode() intent.IterMode { return t.mode }

// dataDirection is the match key of connection i's data packets.
func dataDirection(i int, c intent.Conn, g intent.Geometry, opt intent.Options) connKey {
	src, dst, qpn := intent.DataDirection(i, c, g, opt)
	return connKey{Src: src, Dst: dst, DstQPN: qpn}
}

// Load replaces the entries and the connection registers: each connection's
// data direction starts in round 1 with its initial PSN (the paper's "last
// PSN = IPSN - 1"; the P4 program's "expected = IPSN"). Entries must come
// from Compile with the same connections.
func (t *Table) Load(entries []intent.Entry, conns []intent.Conn, g intent.Geometry, opt intent.Options) error {
	cs := make(map[connKey]*connState, len(conns))
	for i, c := range conns {
		st := &connState{iter: 1, last: (c.RequesterIPSN - 1) & roce.PSNMask}
		if t.mode == intent.IterP4 {
			st.last = c.RequesterIPSN & roce.PSNMask
		}
		cs[dataDirection(i, c, g, opt)] = st
	}
	for i, e := range entries {
		st := cs[connKey{Src: e.Key.Src, Dst: e.Key.Dst, DstQPN: e.Key.DstQPN}]
		if st == nil {
			return fmt.Errorf("inject: entry %v names no connection of the metadata", e)
		}
		if e.Key.PSN == intent.AnyPSN {
			st.anyPSN.set(uint64(e.Key.Iter), int32(i))
			continue
		}
		st.events.set(psnIter(e.Key.PSN, e.Key.Iter), int32(i))
	}
	t.mu.Lock()
	t.conns = cs
	t.index = buildIndex(cs)
	t.entries = append(t.entries[:0], entries...)
	t.hits = make([]uint64, len(entries))
	t.mu.Unlock()
	return nil
}

// SetRound sets the ITER registers of the connection whose data packets
// go from src to dst for QP dstQPN, as injector.p4's control plane can
// write its conn_psn and conn_iter cells: the PSN the next packet is
// compared with (paper mode: the previous packet's; p4 mode: the expected
// one) and the round. Load starts every connection in round 1; this puts
// one in any state, which replaying a switch test needs. A last above
// roce.PSNMask stands for a cell the control plane never writes (conn_psn
// keeps PSN << 8, and its low byte set): p4 mode then expects no PSN, as
// the switch's comparison of the whole word finds none equal; paper
// mode's serial comparison reads the 24 bits, as the switch's does.
func (t *Table) SetRound(src, dst [16]byte, dstQPN uint32, last uint32, iter uint16) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.conns[connKey{Src: src, Dst: dst, DstQPN: dstQPN}]
	if st == nil {
		return fmt.Errorf("inject: no connection %x -> %x qpn %#x", src, dst, dstQPN)
	}
	st.last, st.iter = last, iter
	return nil
}

// Entries returns the loaded entries with their hit counts.
func (t *Table) Entries() ([]intent.Entry, []uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]intent.Entry(nil), t.entries...), append([]uint64(nil), t.hits...)
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
func (t *Table) Lookup(p *roce.Packet, frame []byte) (mirror.EventType, uint16) {
	cls := opClasses[p.Opcode]
	if cls&opMatched == 0 {
		return mirror.EventNone, 0
	}
	k := wireKey{qpn: p.DestQP}
	if o := p.Net.L3Off; p.Net.L3Proto == header.EtherTypeIPv6 {
		a := frame[o+8 : o+40]
		k.s0, k.s1 = binary.LittleEndian.Uint64(a[0:8]), binary.LittleEndian.Uint64(a[8:16])
		k.d0, k.d1 = binary.LittleEndian.Uint64(a[16:24]), binary.LittleEndian.Uint64(a[24:32])
	} else {
		a := frame[o+12 : o+20]
		k.s1 = v4Mapped | uint64(binary.LittleEndian.Uint32(a[0:4]))<<32
		k.d1 = v4Mapped | uint64(binary.LittleEndian.Uint32(a[4:8]))<<32
	}
	st := t.find(&k)
	if st == nil {
		return mirror.EventNone, 0
	}
	psn := p.PSN
	switch t.mode {
	case intent.IterPaper:
		if roce.ComparePSN(psn, st.last) <= 0 {
			st.iter++
		}
		st.last = psn
	case intent.IterP4:
		if psn != st.last {
			st.iter++
		} else if cls&opStart != 0 {
			st.iter = 1
		}
		st.last = (psn + 1) & roce.PSNMask
	}
	idx, ok := st.events.get(psnIter(psn, st.iter))
	if !ok {
		idx, ok = st.anyPSN.get(uint64(st.iter))
	}
	if !ok {
		return mirror.EventNone, st.iter
	}
	t.hits[idx]++
	return t.entries[idx].Event, st.iter
}

// opClasses holds, per opcode, the two properties Lookup asks of it, so
// the data path reads one byte instead of copying the opcode's OpInfo.
var opClasses = func() (c [256]uint8) {
	for op := range c {
		info := roce.OpcodeInfo(roce.Opcode(op))
		if info.Payload && (info.Transport == roce.TransportRC || info.Transport == roce.TransportUC) {
			c[op] |= opMatched
		}
		if info.Position.IsStart() {
			c[op] |= opStart
		}
	}
	return c
}()

const (
	opMatched = 1 << iota // data packets: payload, RC or UC
	opStart               // first or only packet of a message
)

// String summarises the table.
func (t *Table) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return fmt.Sprintf("%d entries, %d connections, iter mode %v", len(t.entries), len(t.conns), t.mode)
}
