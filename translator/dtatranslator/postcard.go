package dtatranslator

import (
	"encoding/binary"
	"fmt"

	"github.com/rdma-appliance/appliance/internal/dtamem"
	"github.com/rdma-appliance/appliance/internal/dtawire"
)

// flowCard is one cached flow.
type flowCard struct {
	key   uint32
	valid bool
	mask  uint32
	since int64
	hops  [dtamem.MaxHops]uint32
}

// postcards is the translator's flow cache.
type postcards struct {
	region dtamem.PostcardRegion
	full   uint32
	flows  []flowCard
	rec    [8 + 4*dtamem.MaxHops]byte
}

func newPostcards(r dtamem.PostcardRegion) *postcards {
	return &postcards{region: r, full: ^uint32(0) >> (32 - r.Hops), flows: make([]flowCard, r.CacheFlows())}
}

// postcard caches one hop's postcard and writes the flow when complete.
func (t *Translator) postcard(r *dtawire.Report, emit Emit) error {
	pc := t.postcards
	if pc == nil {
		t.Stats.Unsupported++
		return ErrNoRegion
	}
	if int(r.Hop) >= pc.region.Hops {
		return fmt.Errorf("%w: hop %d of a %d-hop postcard table", ErrSketchGeometry, r.Hop, pc.region.Hops)
	}
	f := &pc.flows[dtamem.KeyChecksum(r.Key)&uint32(len(pc.flows)-1)]
	if f.valid && f.key != r.Key {
		if t.DropEvicted {
			t.Stats.PostcardsDropped++
			f.valid = false
		} else {
			if err := t.writeFlow(f, emit); err != nil {
				return err
			}
			t.Stats.PostcardsEvicted++
		}
	}
	if !f.valid {
		*f = flowCard{key: r.Key, valid: true, since: t.Now()}
	}
	bit := uint32(1) << r.Hop
	// Complete when this hop is the one every other hop is waiting for,
	// as translator.p4 tests it: the same as "every hop now" for the
	// bitmaps postcards leave, and a cell held with more (HoldPostcards)
	// stays held there as here.
	complete := f.mask == pc.full&^bit
	f.hops[r.Hop] = r.Data32()
	f.mask |= bit
	if complete {
		t.Stats.PostcardsComplete++
		return t.writeFlow(f, emit)
	}
	return nil
}

// writeFlow writes a cached flow's record and frees its cache slot.
func (t *Translator) writeFlow(f *flowCard, emit Emit) error {
	pc := t.postcards
	rl := pc.region.RecordLen()
	rec := pc.rec[:rl]
	binary.BigEndian.PutUint32(rec[0:], dtamem.KeyChecksum(f.key))
	binary.BigEndian.PutUint32(rec[4:], f.mask)
	for h := 0; h < pc.region.Hops; h++ {
		binary.BigEndian.PutUint32(rec[8+4*h:], f.hops[h])
	}
	f.valid = false
	va := pc.region.Addr + dtamem.Slot(f.key, 0, pc.region.Slots)*uint64(rl)
	n, err := t.Conn.Write(t.buf[:], va, pc.region.RKey, rec, nil)
	return t.send(emit, n, err)
}

// flushPostcards writes the flows that have waited at least timeout.
func (t *Translator) flushPostcards(now, timeout int64, emit Emit) error {
	pc := t.postcards
	if pc == nil {
		return nil
	}
	for i := range pc.flows {
		f := &pc.flows[i]
		if f.valid && now-f.since >= timeout {
			if err := t.writeFlow(f, emit); err != nil {
				return err
			}
			t.Stats.PostcardsEvicted++
		}
	}
	return nil
}

// PostcardFlow is a flow the postcard cache holds: its key, the bitmap of
// the hops that reported, and their data (by hop index).
type PostcardFlow struct {
	Key  uint32
	Mask uint32
	Hops [dtamem.MaxHops]uint32
}

// HoldPostcards puts f in the cache slot that postcards of key at use (f's
// own key, or another that shares its slot) as if f's postcards had
// arrived there; the flow the slot held is dropped unwritten, and f waits
// for its timeout from now. It exists to replay a switch's state: the
// Tofino translator keeps the same cache in registers, one slot per cell
// index, and a test of it starts from the cells it sets (p4/dtatofino's
// replay of P4Testgen's tests). A Mask of 0 leaves the slot empty. A cell
// can hold a bitmap no run of postcards leaves (every hop: such a flow is
// written at once; hops beyond the region's): such a flow is held as the
// switch holds it, since no postcard can be the one its other hops wait
// for, until another flow evicts it.
func (t *Translator) HoldPostcards(at uint32, f PostcardFlow) error {
	pc := t.postcards
	if pc == nil {
		return ErrNoRegion
	}
	c := &pc.flows[dtamem.KeyChecksum(at)&uint32(len(pc.flows)-1)]
	*c = flowCard{key: f.Key, valid: f.Mask != 0, mask: f.Mask, since: t.Now(), hops: f.Hops}
	return nil
}
