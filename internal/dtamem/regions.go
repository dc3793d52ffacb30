package dtamem

import (
	"fmt"

	"github.com/rdma-appliance/appliance/internal/dtawire"
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
// Layout.AppendEntryLen bytes at Addr.
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
	// Layout is how the Key-Write and Key-Increment slots are hashed
	// and the Append entries laid out (absent: the default).
	Layout Layout `json:"layout,omitempty"`
}

// Validate checks the regions' geometry.
func (r *Regions) Validate() error {
	pow2 := func(n uint64) bool { return n > 0 && n&(n-1) == 0 }
	if int(r.Layout) >= len(layoutNames) {
		return fmt.Errorf("dta: unknown %v", r.Layout)
	}
	if kw := r.KeyWrite; kw != nil {
		if !pow2(kw.Slots) {
			return fmt.Errorf("dta: key-write slots %d: a power of two", kw.Slots)
		}
		if err := (dtawire.Format{DataWidth: kw.DataWidth}).Validate(); err != nil {
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
		if !pow2(l.Entries) || l.Entries%uint64(r.BatchEntries()) != 0 {
			return fmt.Errorf("dta: list %d: %d entries: a power of two and a multiple of the batch %d", id, l.Entries, r.BatchEntries())
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
		n = max(n, r.BatchEntries()*r.Layout.AppendEntryLen())
	}
	for _, s := range r.Sketches {
		n = max(n, s.GroupColumns()*s.ColumnLen())
	}
	if p := r.Postcards; p != nil {
		n = max(n, p.RecordLen())
	}
	return n
}

// BatchEntries is how many entries one Append WRITE carries, the default
// applied.
func (r *Regions) BatchEntries() int {
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
