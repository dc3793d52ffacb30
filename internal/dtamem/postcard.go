package dtamem

import (
	"encoding/binary"
	"fmt"
)

// Postcarder: every switch on a flow's path sends a postcard {key, hop,
// data}; the translator gathers a flow's postcards in a cache and writes
// the flow's record once every hop has reported, or when the flow is
// evicted (another flow takes its cache slot, or it waited past the
// flush timeout), so the collector gets one WRITE per flow instead of one
// per hop. A record sits in the key's first Key-Write slot:
//
//	checksum 32 (CRC32(key)) | hop bitmap 32 (bit h: hop h reported) | Hops x data 32
//
// all big-endian. A query checks the checksum, so a slot another flow
// overwrote reads as empty, never as the wrong path.

// MaxHops bounds a Postcarder region's hops (the bitmap's width).
const MaxHops = 32

// PostcardRegion is a collector's postcard table.
type PostcardRegion struct {
	Addr  uint64 `json:"addr"`
	RKey  uint32 `json:"rkey"`
	Slots uint64 `json:"slots"` // a power of two
	Hops  int    `json:"hops"`  // a path's length, 1..MaxHops
	// Cache is the translator's flow cache in flows (a power of two,
	// default 4096).
	Cache int `json:"cache,omitempty"`
}

// RecordLen is one flow record's size.
func (p *PostcardRegion) RecordLen() int { return 8 + 4*p.Hops }

// CacheFlows is the translator's flow cache size, the default applied.
func (p *PostcardRegion) CacheFlows() int {
	if p.Cache == 0 {
		return 4096
	}
	return p.Cache
}

// Validate checks the table's geometry.
func (p *PostcardRegion) Validate() error {
	pow2 := func(n uint64) bool { return n > 0 && n&(n-1) == 0 }
	switch {
	case !pow2(p.Slots):
		return fmt.Errorf("slots %d: a power of two", p.Slots)
	case p.Hops < 1 || p.Hops > MaxHops:
		return fmt.Errorf("hops %d: 1..%d", p.Hops, MaxHops)
	case p.Cache < 0 || !pow2(uint64(p.CacheFlows())):
		return fmt.Errorf("cache %d: a power of two", p.Cache)
	}
	return nil
}

// Path is a flow's record read back: the hops that reported and their
// data.
type Path struct {
	Mask uint32   `json:"mask"`
	Hops []uint32 `json:"hops"` // by hop index; zero where Mask lacks the hop
}

// FullMask is the hop bitmap of a record every hop reported to.
func (p *PostcardRegion) FullMask() uint32 { return ^uint32(0) >> (32 - p.Hops) }

// Complete says every hop of the path reported: a record the translator
// wrote before that (its flow evicted from the cache, or flushed after
// waiting) holds only the hops that had.
func (p Path) Complete() bool { return len(p.Hops) > 0 && p.Mask == ^uint32(0)>>(32-len(p.Hops)) }

// Missing are the hops that did not report, in order (none when
// complete).
func (p Path) Missing() []int {
	var m []int
	for h := range p.Hops {
		if p.Mask&(1<<h) == 0 {
			m = append(m, h)
		}
	}
	return m
}

// Wrong are the hops whose reported data differs from want's, the path
// the flow is expected to have taken: every hop of a complete record is
// compared, and of an incomplete one every hop that reported (a missing
// hop is not wrong, Missing says it). A want of another length than the
// record's makes every hop wrong.
func (p Path) Wrong(want []uint32) []int {
	var w []int
	for h, d := range p.Hops {
		switch {
		case len(want) != len(p.Hops):
			w = append(w, h)
		case p.Mask&(1<<h) != 0 && d != want[h]:
			w = append(w, h)
		}
	}
	return w
}

// QueryPostcard reads a flow's record from a postcard table in collector
// memory, or false when the slot holds another flow or none. A record
// whose bitmap names hops beyond the table's is not one the translator
// wrote (a translator with another geometry, or memory not a postcard
// table's): false too, rather than hops that do not exist.
func QueryPostcard(mem []byte, p *PostcardRegion, key uint32) (Path, bool) {
	rl := p.RecordLen()
	off := Slot(key, 0, p.Slots) * uint64(rl)
	rec := mem[off : off+uint64(rl)]
	mask := binary.BigEndian.Uint32(rec[4:])
	if binary.BigEndian.Uint32(rec) != KeyChecksum(key) || mask == 0 || mask&^p.FullMask() != 0 {
		return Path{}, false
	}
	path := Path{Mask: mask, Hops: make([]uint32, p.Hops)}
	for h := range path.Hops {
		path.Hops[h] = binary.BigEndian.Uint32(rec[8+4*h:])
	}
	return path, true
}
