package dtatranslator

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/rdma-appliance/appliance/internal/dtamem"
	"github.com/rdma-appliance/appliance/internal/dtawire"
)

// Errors of Sketch-Merge translation; reports refused with them are
// counted and dropped (a retransmittable one is resent on NACK).
var (
	// ErrColumnOrder: a reporter skipped columns (a lost report).
	ErrColumnOrder = errors.New("dta: sketch column out of order")
	// ErrSketchAhead: a reporter started a round again before every
	// other reporter finished the column in the last one.
	ErrSketchAhead = errors.New("dta: reporter a round ahead")
	// ErrSketchGeometry: the report's kind, reporter or counters do not
	// match the sketch.
	ErrSketchGeometry = errors.New("dta: report does not fit the sketch")
)

// sketchMerge is the translator's merge state of one sketch.
type sketchMerge struct {
	region   dtamem.SketchRegion
	all      uint64   // every reporter's bit
	counters []uint32 // Columns*Rows, merged so far this round
	mask     []uint64 // per column: the reporters that sent it
	next     []uint32 // per reporter: the column it sends next
	done     []uint16 // per group: columns complete
	out      []byte   // one group, big-endian
}

func newSketchMerge(r dtamem.SketchRegion) *sketchMerge {
	g := r.GroupColumns()
	return &sketchMerge{region: r, all: ^uint64(0) >> (64 - r.Reporters),
		counters: make([]uint32, int(r.Columns)*r.Rows), mask: make([]uint64, r.Columns),
		next: make([]uint32, r.Reporters), done: make([]uint16, int(r.Columns)/g), out: make([]byte, g*r.ColumnLen())}
}

// sketchColumn merges a report's column and, when its group is complete, writes it.
func (t *Translator) sketchColumn(r *dtawire.Report, emit Emit) error {
	m := t.sketches[r.SketchID]
	if m == nil {
		t.Stats.Unsupported++
		return fmt.Errorf("%w: sketch %d", ErrNoRegion, r.SketchID)
	}
	s := &m.region
	if r.Kind != s.Kind || int(r.ReporterID) >= s.Reporters || r.NumCounters() != s.Rows || r.Column >= s.Columns {
		return fmt.Errorf("%w: sketch %d kind %d reporter %d column %d with %d counters", ErrSketchGeometry,
			r.SketchID, r.Kind, r.ReporterID, r.Column, r.NumCounters())
	}
	want := m.next[r.ReporterID]
	if r.Column != want {
		// An earlier column again is a duplicate (a resent report the
		// translator already merged): dropped without complaint. Columns
		// wrap from round to round, so "earlier" is serial arithmetic:
		// up to half the sketch behind.
		if behind := (want - r.Column) % s.Columns; behind <= s.Columns/2 {
			return nil
		}
		return fmt.Errorf("%w: reporter %d sent column %d, expected %d", ErrColumnOrder, r.ReporterID, r.Column, want)
	}
	bit := uint64(1) << r.ReporterID
	c := r.Column
	if m.mask[c]&bit != 0 {
		return fmt.Errorf("%w: reporter %d, column %d", ErrSketchAhead, r.ReporterID, c)
	}
	m.next[r.ReporterID] = (c + 1) % s.Columns
	col := m.counters[int(c)*s.Rows : int(c+1)*s.Rows]
	for i := range col {
		v := r.CounterAt(i)
		if s.Kind == dtawire.SketchCountMin {
			col[i] += v
		} else {
			col[i] = max(col[i], v)
		}
	}
	m.mask[c] |= bit
	if m.mask[c] != m.all {
		return nil
	}
	g := s.GroupColumns()
	gi := int(c) / g
	m.done[gi]++
	if int(m.done[gi]) < g {
		return nil
	}
	// The group is complete: one WRITE, then the columns start the next
	// round empty.
	first := gi * g
	vals := m.counters[first*s.Rows : (first+g)*s.Rows]
	for i, v := range vals {
		binary.BigEndian.PutUint32(m.out[4*i:], v)
	}
	clear(vals)
	clear(m.mask[first : first+g])
	m.done[gi] = 0
	va := s.Addr + uint64(first*s.ColumnLen())
	n, err := t.Conn.Write(t.buf[:], va, s.RKey, m.out, nil)
	if err := t.send(emit, n, err); err != nil {
		return err
	}
	t.Stats.SketchWrites++
	return nil
}
