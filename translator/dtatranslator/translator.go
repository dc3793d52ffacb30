package dtatranslator

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/rdma-appliance/appliance/internal/dtamem"
	"github.com/rdma-appliance/appliance/internal/dtawire"
)

// appendList is a list's batch being gathered.
type appendList struct {
	region  dtamem.ListRegion
	head    uint64 // entries written so far
	n       int    // entries gathered
	since   int64  // when the oldest gathered entry arrived
	entries [dtamem.MaxBatch * dtamem.AppendEntryLen]byte
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
	// PostcardsDropped counts flows evicted unwritten (DropEvicted).
	PostcardsDropped uint64 `json:"postcards_dropped"`
}

// Translator turns reports into RDMA operations on one collector
// connection. It is the data path only: one goroutine calls Translate.
type Translator struct {
	Conn    *Conn
	Regions dtamem.Regions
	Stats   TranslateStats
	buf     [9216]byte
	entry   [4 + dtawire.MaxDataWidth]byte
	lists   map[uint32]*appendList
	// sketches and postcards are Sketch-Merge's and Postcarder's state.
	sketches  map[uint16]*sketchMerge
	postcards *postcards
	lastScan  int64
	// Now reads the clock for Append's flush timeout (nanoseconds);
	// tests replace it.
	Now func() int64
	// DropEvicted: a Postcarder flow that another flow pushes out of
	// its cache slot before it completed is counted (PostcardsDropped)
	// and not written, as the Tofino translator (p4/dtatofino) does,
	// which cannot write two records for one packet. The default writes
	// the partial record, which loses nothing; the replay of
	// translator.p4's tests sets it to be the switch's twin.
	DropEvicted bool
}

// NewTranslator checks the regions and returns a translator.
func NewTranslator(c *Conn, r dtamem.Regions) (*Translator, error) {
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
func (t *Translator) appendEntry(r *dtawire.Report, emit Emit) error {
	l := t.lists[r.ListID]
	if l == nil {
		t.Stats.Unsupported++
		return fmt.Errorf("%w: list %d", ErrNoRegion, r.ListID)
	}
	if l.n == t.Regions.BatchEntries() {
		// The last flush of this full batch could not be sent: send it
		// now, or refuse the entry (the caller has it resent).
		if err := t.flushList(l, emit); err != nil {
			return err
		}
	}
	if l.n == 0 {
		l.since = t.Now()
	}
	el := t.Regions.Layout.AppendEntryLen()
	t.Regions.Layout.PutEntry(l.entries[l.n*el:], l.head+uint64(l.n), r.Data)
	l.n++
	if l.n == t.Regions.BatchEntries() {
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
	el := t.Regions.Layout.AppendEntryLen()
	va := l.region.Addr + (l.head%l.region.Entries)*uint64(el)
	n, err := t.Conn.Write(t.buf[:], va, l.region.RKey, l.entries[:l.n*el], nil)
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
func (t *Translator) Translate(r *dtawire.Report, emit Emit) error {
	err := t.translate(r, emit)
	if err == nil && int(r.Opcode) < len(t.Stats.Reports) {
		t.Stats.Reports[r.Opcode]++
	}
	return err
}

func (t *Translator) translate(r *dtawire.Report, emit Emit) error {
	switch r.Opcode {
	case dtawire.OpKeyWrite:
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
		binary.BigEndian.PutUint32(e, t.Regions.Layout.KeyChecksum(r.Key))
		clear(e[4:])
		copy(e[4:], r.Data)
		var imm *uint32
		if r.Immediate {
			k := r.Key
			imm = &k
		}
		for n := 0; n < int(r.Redundancy); n++ {
			va := kw.Addr + t.Regions.Layout.Slot(r.Key, n, kw.Slots)*uint64(len(e))
			n, err := t.Conn.Write(t.buf[:], va, kw.RKey, e, imm)
			if err := t.send(emit, n, err); err != nil {
				return err
			}
		}
	case dtawire.OpKeyIncrement:
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
			va := ki.Addr + t.Regions.Layout.KeyIncrementSlot(r.Key, n, ki.Slots)*8
			n, err := t.Conn.FetchAdd(t.buf[:], va, ki.RKey, r.Counter)
			if err := t.send(emit, n, err); err != nil {
				return err
			}
		}
	case dtawire.OpAppend:
		return t.appendEntry(r, emit)
	case dtawire.OpSketchMerge:
		if err := t.sketchColumn(r, emit); err != nil {
			if !errors.Is(err, ErrNoRegion) {
				t.Stats.Refused++
			}
			return err
		}
	case dtawire.OpPostcarder:
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

// send hands a built frame to emit, counting a failure of either. A
// frame emit refused gives its PSN back, so the connection's next packet
// follows the last one sent without a gap.
func (t *Translator) send(emit Emit, n int, err error) error {
	if err == nil {
		if err = emit(t.buf[:n]); err != nil {
			t.Conn.Unsend()
		}
	}
	if err != nil {
		t.Stats.Errors++
	}
	return err
}
