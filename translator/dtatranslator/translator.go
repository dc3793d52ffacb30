package dtatranslator

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// KeyWriteRegion is a collector's Key-Write table: Slots entries of
// KeyWriteEntryLen(DataWidth) bytes at Addr, registered under RKey.
type KeyWriteRegion struct {
	Addr      uint64 `json:"addr"`
	RKey      uint32 `json:"rkey"`
	Slots     uint64 `json:"slots"` // a power of two
	DataWidth int    `json:"data_width"`
}

// KeyIncrementRegion is a collector's Key-Increment count-min array:
// Slots 8-byte counters at Addr.
type KeyIncrementRegion struct {
	Addr  uint64 `json:"addr"`
	RKey  uint32 `json:"rkey"`
	Slots uint64 `json:"slots"`
}

// ListRegion is one Append list: a ring of Entries entries of
// AppendEntryLen bytes at Addr.
type ListRegion struct {
	Addr    uint64 `json:"addr"`
	RKey    uint32 `json:"rkey"`
	Entries uint64 `json:"entries"` // a power of two, a multiple of the batch
}

// Regions are what a collector advertises.
type Regions struct {
	KeyWrite     *KeyWriteRegion     `json:"key_write,omitempty"`
	KeyIncrement *KeyIncrementRegion `json:"key_increment,omitempty"`
	// Lists are the Append lists by list id; Batch is how many entries
	// the translator gathers per WRITE (default 4).
	Lists map[uint32]ListRegion `json:"lists,omitempty"`
	Batch int                   `json:"batch,omitempty"`
	// Sketches are the Sketch-Merge sketches by sketch id.
	Sketches map[uint16]SketchRegion `json:"sketches,omitempty"`
	// Postcards is the Postcarder flow table.
	Postcards *PostcardRegion `json:"postcards,omitempty"`
}

// Validate checks the regions' geometry.
func (r *Regions) Validate() error {
	pow2 := func(n uint64) bool { return n > 0 && n&(n-1) == 0 }
	if kw := r.KeyWrite; kw != nil {
		if !pow2(kw.Slots) {
			return fmt.Errorf("dta: key-write slots %d: a power of two", kw.Slots)
		}
		if err := (Format{DataWidth: kw.DataWidth}).Validate(); err != nil {
			return err
		}
	}
	if ki := r.KeyIncrement; ki != nil && !pow2(ki.Slots) {
		return fmt.Errorf("dta: key-increment slots %d: a power of two", ki.Slots)
	}
	if r.Batch < 0 || r.Batch > MaxBatch {
		return fmt.Errorf("dta: append batch %d: want 1..%d", r.Batch, MaxBatch)
	}
	for id, l := range r.Lists {
		if !pow2(l.Entries) || l.Entries%uint64(r.batch()) != 0 {
			return fmt.Errorf("dta: list %d: %d entries: a power of two and a multiple of the batch %d", id, l.Entries, r.batch())
		}
	}
	for id, s := range r.Sketches {
		if err := s.Validate(); err != nil {
			return fmt.Errorf("dta: sketch %d: %w", id, err)
		}
	}
	if p := r.Postcards; p != nil {
		if err := p.Validate(); err != nil {
			return fmt.Errorf("dta: postcards: %w", err)
		}
	}
	return nil
}

// MaxWrite is the largest WRITE the regions make the translator send:
// each is one packet, so it must fit the collector's path MTU.
func (r *Regions) MaxWrite() int {
	n := 0
	if kw := r.KeyWrite; kw != nil {
		n = KeyWriteEntryLen(max(kw.DataWidth, 4))
	}
	if len(r.Lists) > 0 {
		n = max(n, r.batch()*AppendEntryLen)
	}
	for _, s := range r.Sketches {
		n = max(n, s.group()*s.ColumnLen())
	}
	if p := r.Postcards; p != nil {
		n = max(n, p.RecordLen())
	}
	return n
}

func (r *Regions) batch() int {
	if r.Batch == 0 {
		return 4
	}
	return r.Batch
}

// Append entries are 8 bytes: {data, sequence}, big-endian. The sequence
// counts the list's entries from 1 (wrapping past 2^32 to 1, never 0), so
// a poller knows an entry is new when its sequence is the one it expects
// next, whatever the data (a zero report included) and whatever stale
// entry the slot held from the previous lap of the ring. The sequence
// comes last because an RNIC places a WRITE's bytes in ascending order:
// once a poller sees the sequence, the data before it is there.
const AppendEntryLen = 8

// MaxBatch bounds the entries of one Append WRITE.
const MaxBatch = 128

// appendList is a list's batch being gathered.
type appendList struct {
	region  ListRegion
	head    uint64 // entries written so far
	n       int    // entries gathered
	since   int64  // when the oldest gathered entry arrived
	entries [MaxBatch * AppendEntryLen]byte
}

// Emit receives each RDMA frame the translation produces; the frame is
// only valid during the call.
type Emit func(frame []byte) error

// TranslateStats are the translator's counters.
type TranslateStats struct {
	Reports     [6]uint64 `json:"reports"` // translated, by opcode
	Unsupported uint64    `json:"unsupported"`
	Errors      uint64    `json:"errors"`
	// SketchWrites counts merged column groups written; Refused the
	// Sketch-Merge and Postcarder reports that did not fit their state.
	SketchWrites uint64 `json:"sketch_writes"`
	Refused      uint64 `json:"refused"`
	// PostcardsComplete and PostcardsEvicted count flow records written
	// with every hop, and written early (cache collision or timeout).
	PostcardsComplete uint64 `json:"postcards_complete"`
	PostcardsEvicted  uint64 `json:"postcards_evicted"`
}

// Translator turns reports into RDMA operations on one collector
// connection. It is the data path only: one goroutine calls Translate.
type Translator struct {
	Conn    *Conn
	Regions Regions
	Stats   TranslateStats
	buf     [9216]byte
	entry   [4 + MaxDataWidth]byte
	lists   map[uint32]*appendList
	// sketches and postcards are Sketch-Merge's and Postcarder's state.
	sketches  map[uint16]*sketchMerge
	postcards *postcards
	lastScan  int64
	// Now reads the clock for Append's flush timeout (nanoseconds);
	// tests replace it.
	Now func() int64
}

// NewTranslator checks the regions and returns a translator.
func NewTranslator(c *Conn, r Regions) (*Translator, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	t := &Translator{Conn: c, Regions: r, lists: map[uint32]*appendList{}, Now: func() int64 { return time.Now().UnixNano() }}
	for id, l := range r.Lists {
		t.lists[id] = &appendList{region: l}
	}
	t.sketches = map[uint16]*sketchMerge{}
	for id, s := range r.Sketches {
		t.sketches[id] = newSketchMerge(s)
	}
	if r.Postcards != nil {
		t.postcards = newPostcards(*r.Postcards)
	}
	return t, nil
}

// appendEntry gathers one Append report and writes the batch when full.
func (t *Translator) appendEntry(r *Report, emit Emit) error {
	l := t.lists[r.ListID]
	if l == nil {
		t.Stats.Unsupported++
		return fmt.Errorf("%w: list %d", ErrNoRegion, r.ListID)
	}
	if l.n == t.Regions.batch() {
		// The last flush of this full batch could not be sent: send it
		// now, or refuse the entry (the caller has it resent).
		if err := t.flushList(l, emit); err != nil {
			return err
		}
	}
	if l.n == 0 {
		l.since = t.Now()
	}
	e := l.entries[l.n*AppendEntryLen:]
	seq := uint32((l.head+uint64(l.n))%(1<<32-1)) + 1
	copy(e[0:4], r.Data)
	binary.BigEndian.PutUint32(e[4:8], seq)
	l.n++
	if l.n == t.Regions.batch() {
		// The entry is gathered whatever the flush does: a batch that
		// could not go out is sent by the next entry or by Flush.
		_ = t.flushList(l, emit)
	}
	return nil
}

// flushList writes a list's gathered entries with one WRITE.
func (t *Translator) flushList(l *appendList, emit Emit) error {
	if l.n == 0 {
		return nil
	}
	va := l.region.Addr + (l.head%l.region.Entries)*AppendEntryLen
	n, err := t.Conn.Write(t.buf[:], va, l.region.RKey, l.entries[:l.n*AppendEntryLen], nil)
	if err := t.send(emit, n, err); err != nil {
		return err
	}
	l.head += uint64(l.n)
	l.n = 0
	return nil
}

// Flush writes the Append batches and the cached Postcarder flows that
// have waited longer than timeout (all of them with timeout 0), so a quiet
// list does not strand its entries nor a flow missing a hop its record.
// The translator's loop calls it between bursts.
func (t *Translator) Flush(timeout time.Duration, emit Emit) error {
	now := t.Now()
	for _, l := range t.lists {
		if l.n > 0 && now-l.since >= int64(timeout) {
			if err := t.flushList(l, emit); err != nil {
				return err
			}
		}
	}
	// The flow cache is scanned whole, so at most twice a timeout: a flow
	// then waits at most one and a half.
	if t.postcards != nil && (timeout == 0 || now-t.lastScan >= int64(timeout)/2) {
		t.lastScan = now
		return t.flushPostcards(now, int64(timeout), emit)
	}
	return nil
}

// ErrNoRegion is returned for a report whose primitive the collector
// does not serve.
var ErrNoRegion = errors.New("dta: the collector has no region for this primitive")

// Translate turns one report into its RDMA operations:
//
//	Key-Write      N WRITEs of {CRC32(key), data} to slots CRC32(key||n) mod slots
//	Key-Increment  N FETCH_ADDs of counter to counters CRC32(key||n) mod slots
//	Append         one WRITE of B {data, sequence} entries per list batch
//	Sketch-Merge   one WRITE per group of columns every reporter has sent, merged
//	Postcarder     one WRITE of a flow's record once every hop reported (or evicted)
//
// A report with the immediate flag becomes WRITE with immediate (the key
// as immediate), so the collector hears of it at once. While the
// collector's atomic window is full, a Key-Increment report is refused
// with ErrAtomicWindow and nothing is sent: the caller feeds the
// collector's ACKs to the connection and tries again.
func (t *Translator) Translate(r *Report, emit Emit) error {
	err := t.translate(r, emit)
	if err == nil && int(r.Opcode) < len(t.Stats.Reports) {
		t.Stats.Reports[r.Opcode]++
	}
	return err
}

func (t *Translator) translate(r *Report, emit Emit) error {
	switch r.Opcode {
	case OpKeyWrite:
		kw := t.Regions.KeyWrite
		if kw == nil {
			t.Stats.Unsupported++
			return ErrNoRegion
		}
		w := kw.DataWidth
		if w == 0 {
			w = 4
		}
		e := t.entry[:4+w]
		binary.BigEndian.PutUint32(e, KeyChecksum(r.Key))
		clear(e[4:])
		copy(e[4:], r.Data)
		var imm *uint32
		if r.Immediate {
			k := r.Key
			imm = &k
		}
		for n := 0; n < int(r.Redundancy); n++ {
			va := kw.Addr + Slot(r.Key, n, kw.Slots)*uint64(len(e))
			n, err := t.Conn.Write(t.buf[:], va, kw.RKey, e, imm)
			if err := t.send(emit, n, err); err != nil {
				return err
			}
		}
	case OpKeyIncrement:
		ki := t.Regions.KeyIncrement
		if ki == nil {
			t.Stats.Unsupported++
			return ErrNoRegion
		}
		// All N or none: a report half applied would skew the
		// count-min estimate.
		if t.Conn.AtomicRoom() < int(r.Redundancy) {
			return ErrAtomicWindow
		}
		for n := 0; n < int(r.Redundancy); n++ {
			va := ki.Addr + KeyIncrementSlot(r.Key, n, ki.Slots)*8
			n, err := t.Conn.FetchAdd(t.buf[:], va, ki.RKey, r.Counter)
			if err := t.send(emit, n, err); err != nil {
				return err
			}
		}
	case OpAppend:
		return t.appendEntry(r, emit)
	case OpSketchMerge:
		if err := t.sketchColumn(r, emit); err != nil {
			if !errors.Is(err, ErrNoRegion) {
				t.Stats.Refused++
			}
			return err
		}
	case OpPostcarder:
		if err := t.postcard(r, emit); err != nil {
			if !errors.Is(err, ErrNoRegion) {
				t.Stats.Refused++
			}
			return err
		}
	default:
		t.Stats.Unsupported++
		return fmt.Errorf("%w: %v", ErrNoRegion, r.Opcode)
	}
	return nil
}

// Poller reads one Append list in collector memory from its tail; several
// pollers may share a list by taking disjoint positions (Start, Step).
type Poller struct {
	Mem     []byte // the list's ring
	Entries uint64
	next    uint64 // the position to read next
	Step    uint64 // 1, or the number of pollers sharing the list
}

// NewPoller reads positions start, start+step, ... of a list.
func NewPoller(mem []byte, entries, start, step uint64) *Poller {
	if step == 0 {
		step = 1
	}
	return &Poller{Mem: mem, Entries: entries, next: start, Step: step}
}

// Poll calls fn for each new entry (up to max) and returns how many it
// read. An entry is new when its sequence is the one expected at the
// poller's position.
func (p *Poller) Poll(max int, fn func(data uint32)) int {
	n := 0
	for n < max {
		off := (p.next % p.Entries) * AppendEntryLen
		e := p.Mem[off : off+AppendEntryLen]
		if binary.BigEndian.Uint32(e[4:]) != uint32(p.next%(1<<32-1))+1 {
			break
		}
		fn(binary.BigEndian.Uint32(e))
		p.next += p.Step
		n++
	}
	return n
}

// send hands a built frame to emit, counting a failure of either.
func (t *Translator) send(emit Emit, n int, err error) error {
	if err == nil {
		err = emit(t.buf[:n])
	}
	if err != nil {
		t.Stats.Errors++
	}
	return err
}

// QueryKeyWrite reads a key from a Key-Write table in collector memory:
// the data of the first of its N slots whose checksum matches, or false.
func QueryKeyWrite(mem []byte, key uint32, n int, slots uint64, dataWidth int) ([]byte, bool) {
	el := uint64(KeyWriteEntryLen(dataWidth))
	sum := KeyChecksum(key)
	// Load every slot's checksum before comparing any: the N reads are
	// independent cache misses, and issued together they overlap.
	var off [MaxRedundancy]uint64
	var got [MaxRedundancy]uint32
	n = min(n, MaxRedundancy)
	for i := 0; i < n; i++ {
		off[i] = Slot(key, i, slots) * el
		got[i] = binary.BigEndian.Uint32(mem[off[i] : off[i]+4])
	}
	for i := 0; i < n; i++ {
		if got[i] == sum {
			return mem[off[i]+4 : off[i]+el], true
		}
	}
	return nil, false
}

// QueryKeyIncrement reads a key's count: the minimum of its N counters
// (count-min). The RNIC applies atomics in the collector's own byte order.
func QueryKeyIncrement(mem []byte, key uint32, n int, slots uint64) uint64 {
	var m uint64
	for i := 0; i < n; i++ {
		off := KeyIncrementSlot(key, i, slots) * 8
		v := binary.NativeEndian.Uint64(mem[off : off+8])
		if i == 0 || v < m {
			m = v
		}
	}
	return m
}
