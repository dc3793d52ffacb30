package dtacollector

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/internal/dtamem"
	"github.com/rdma-appliance/appliance/internal/dtawire"
)

// Errors of queries, matched with errors.Is; the HTTP API maps them to
// status codes (the first four to 404, ErrNoConsensus and ErrMismatch to 409,
// ErrBadQuery to 400).
var (
	// ErrNotServed: the collector does not host the primitive asked about.
	ErrNotServed = errors.New("not served by this collector")
	// ErrUnknownList and ErrUnknownSketch: no list or sketch has that id.
	ErrUnknownList   = errors.New("no such Append list")
	ErrUnknownSketch = errors.New("no such sketch")
	// ErrNotFound: the key is not in memory (never reported, or its
	// slots were all overwritten by other keys).
	ErrNotFound = errors.New("not found")
	// ErrNoConsensus: fewer slots than asked agree on the key's data.
	ErrNoConsensus = errors.New("no consensus")
	// ErrMismatch: a postcard record's hops differ from the path it was
	// checked against.
	ErrMismatch = errors.New("path differs")
	// ErrBadQuery: the query itself is wrong (a consensus beyond N, a
	// point query on a HyperLogLog sketch...).
	ErrBadQuery = errors.New("bad query")
)

// Hex is bytes shown as hexadecimal in JSON.
type Hex []byte

var (
	_ json.Marshaler   = Hex(nil)
	_ json.Unmarshaler = (*Hex)(nil)
)

// MarshalJSON implements json.Marshaler.
func (h Hex) MarshalJSON() ([]byte, error) { return []byte(`"` + hex.EncodeToString(h) + `"`), nil }

// UnmarshalJSON implements json.Unmarshaler.
func (h *Hex) UnmarshalJSON(b []byte) error {
	s, err := strconv.Unquote(string(b))
	if err != nil {
		return err
	}
	*h, err = hex.DecodeString(s)
	return err
}

// KeyWriteResult is a Key-Write key read back.
type KeyWriteResult struct {
	Key  uint32 `json:"key"`
	Data Hex    `json:"data"`
	// Value is the data's first four bytes as a big-endian number: the
	// whole value at the default width.
	Value uint32 `json:"value"`
	// N slots were read; Matching of them hold the key's checksum, and
	// Agreeing of those hold Data.
	N        int `json:"n"`
	Matching int `json:"matching"`
	Agreeing int `json:"agreeing"`
}

// rlock holds the memory for a query; false once the collector is closed.
func (c *Collector) rlock() error {
	c.memMu.RLock()
	if c.closed {
		c.memMu.RUnlock()
		return ErrClosed
	}
	return nil
}

// KeyWrite reads a key from the Key-Write table over the collector's N
// slots. With consensus k > 1 it answers only when at least k of the
// slots whose checksum matches hold the same data (a slot another key
// overwrote fails the checksum; a slot holding an older value of the key
// disagrees); otherwise it answers the first matching slot
// (dtamem.QueryKeyWriteConsensus).
func (c *Collector) KeyWrite(key uint32, consensus int) (KeyWriteResult, error) {
	kw := c.regions.KeyWrite
	if kw == nil {
		return KeyWriteResult{}, fmt.Errorf("key-write: %w", ErrNotServed)
	}
	n := c.spec.Redundancy
	if consensus < 0 || consensus > n {
		return KeyWriteResult{}, fmt.Errorf("key-write key %d: consensus %d of %d slots: %w", key, consensus, n, ErrBadQuery)
	}
	if err := c.rlock(); err != nil {
		return KeyWriteResult{}, err
	}
	defer c.memMu.RUnlock()
	res := KeyWriteResult{Key: key, N: n}
	data, m, agreeing := c.regions.Layout.QueryKeyWriteConsensus(c.kwMem, key, n, kw.Slots, kw.DataWidth, consensus)
	res.Matching = m
	if m == 0 {
		return res, fmt.Errorf("key-write key %d: %w in its %d slots", key, ErrNotFound, n)
	}
	if data == nil {
		return res, fmt.Errorf("key-write key %d: %w: %d of %d slots match its checksum, at most %d agree, %d wanted",
			key, ErrNoConsensus, m, n, agreeing, consensus)
	}
	res.Data = append(Hex(nil), data...)
	res.Value = binary.BigEndian.Uint32(res.Data)
	res.Agreeing = agreeing
	return res, nil
}

// KeyIncrementResult is a Key-Increment key's count.
type KeyIncrementResult struct {
	Key   uint32 `json:"key"`
	Count uint64 `json:"count"`
	N     int    `json:"n"`
}

// KeyIncrement reads a key's count: the minimum of its N counters
// (count-min; collisions only ever add).
func (c *Collector) KeyIncrement(key uint32) (KeyIncrementResult, error) {
	ki := c.regions.KeyIncrement
	if ki == nil {
		return KeyIncrementResult{}, fmt.Errorf("key-increment: %w", ErrNotServed)
	}
	if err := c.rlock(); err != nil {
		return KeyIncrementResult{}, err
	}
	defer c.memMu.RUnlock()
	n := c.spec.Redundancy
	return KeyIncrementResult{Key: key, N: n, Count: c.regions.Layout.QueryKeyIncrement(c.kiMem, key, n, ki.Slots)}, nil
}

// sketch finds a sketch.
func (c *Collector) sketch(id uint16) (*dtamem.SketchRegion, []byte, error) {
	if len(c.regions.Sketches) == 0 {
		return nil, nil, fmt.Errorf("sketch-merge: %w", ErrNotServed)
	}
	s, ok := c.regions.Sketches[id]
	if !ok {
		return nil, nil, fmt.Errorf("sketch %d: %w (the collector has %d)", id, ErrUnknownSketch, len(c.regions.Sketches))
	}
	return &s, c.sketchMem[id], nil
}

// SketchCountResult is a Count-Min point query's answer.
type SketchCountResult struct {
	Sketch uint16 `json:"sketch"`
	Key    uint32 `json:"key"`
	Count  uint32 `json:"count"`
}

// SketchCount is a point query on a Count-Min sketch: an upper bound of
// the key's count over every reporter of the last merged round.
func (c *Collector) SketchCount(id uint16, key uint32) (SketchCountResult, error) {
	s, mem, err := c.sketch(id)
	if err != nil {
		return SketchCountResult{}, err
	}
	if s.Kind != dtawire.SketchCountMin {
		return SketchCountResult{}, fmt.Errorf("sketch %d is a %s sketch: a point count needs count-min: %w", id, SketchKindName(s.Kind), ErrBadQuery)
	}
	if err := c.rlock(); err != nil {
		return SketchCountResult{}, err
	}
	defer c.memMu.RUnlock()
	return SketchCountResult{Sketch: id, Key: key, Count: dtamem.SketchCount(mem, s, key)}, nil
}

// CardinalityResult is a HyperLogLog estimate.
type CardinalityResult struct {
	Sketch      uint16  `json:"sketch"`
	Cardinality float64 `json:"cardinality"`
	Registers   int     `json:"registers"`
}

// SketchCardinality estimates the number of distinct keys every reporter
// saw, from a HyperLogLog sketch.
func (c *Collector) SketchCardinality(id uint16) (CardinalityResult, error) {
	s, mem, err := c.sketch(id)
	if err != nil {
		return CardinalityResult{}, err
	}
	if s.Kind != dtawire.SketchHyperLogLog {
		return CardinalityResult{}, fmt.Errorf("sketch %d is a %s sketch: cardinality needs hyperloglog: %w", id, SketchKindName(s.Kind), ErrBadQuery)
	}
	if err := c.rlock(); err != nil {
		return CardinalityResult{}, err
	}
	defer c.memMu.RUnlock()
	return CardinalityResult{Sketch: id, Cardinality: dtamem.SketchCardinality(mem, s), Registers: int(s.Columns) * s.Rows}, nil
}

// PostcardResult is a flow's path.
type PostcardResult struct {
	Key uint32 `json:"key"`
	dtamem.Path
	// Complete says every hop reported (the record was not evicted
	// early); Reported counts the hops that did and Missing names those
	// that did not, so an incomplete record never passes for a path.
	Complete bool  `json:"complete"`
	Reported int   `json:"reported"`
	Missing  []int `json:"missing,omitempty"`
	// Expected is the path asked to check the record against
	// (PostcardCheck); every reported hop matched it.
	Expected []uint32 `json:"expected,omitempty"`
}

// Postcard reads a flow's path from the postcard table.
func (c *Collector) Postcard(key uint32) (PostcardResult, error) { return c.PostcardCheck(key, nil) }

// PostcardCheck reads a flow's path and, when want is not nil, checks
// every hop of it against want: each hop of a complete record, each
// reported hop of an incomplete one. A hop that differs is ErrMismatch
// naming the hops; an incomplete record is an answer (Complete false,
// Missing), not an error, since the hops it has are the flow's.
func (c *Collector) PostcardCheck(key uint32, want []uint32) (PostcardResult, error) {
	p := c.regions.Postcards
	if p == nil {
		return PostcardResult{}, fmt.Errorf("postcarder: %w", ErrNotServed)
	}
	if want != nil && len(want) != p.Hops {
		return PostcardResult{}, fmt.Errorf("postcard key %d: %d expected hops for a %d-hop table: %w", key, len(want), p.Hops, ErrBadQuery)
	}
	if err := c.rlock(); err != nil {
		return PostcardResult{}, err
	}
	path, ok := dtamem.QueryPostcard(c.pcMem, p, key)
	c.memMu.RUnlock()
	if !ok {
		return PostcardResult{}, fmt.Errorf("postcard key %d: %w (no record, or another flow's in its slot)", key, ErrNotFound)
	}
	missing := path.Missing()
	res := PostcardResult{Key: key, Path: path, Complete: len(missing) == 0, Reported: p.Hops - len(missing), Missing: missing, Expected: want}
	if want == nil {
		return res, nil
	}
	if wrong := path.Wrong(want); len(wrong) > 0 {
		var b strings.Builder
		for i, h := range wrong {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "hop %d has %d, expected %d", h, path.Hops[h], want[h])
		}
		return res, fmt.Errorf("postcard key %d: %s: %w", key, b.String(), ErrMismatch)
	}
	return res, nil
}

// List is an Append list's state with its latest recent entries (0:
// the list's configured number).
func (c *Collector) List(id uint32, recent int) (ListStatus, error) {
	if len(c.lists) == 0 {
		return ListStatus{}, fmt.Errorf("append: %w", ErrNotServed)
	}
	l, ok := c.lists[id]
	if !ok {
		return ListStatus{}, fmt.Errorf("list %d: %w (the collector has lists %v)", id, ErrUnknownList, c.listIDs)
	}
	if recent == 0 {
		recent = l.spec.Recent
	}
	if recent < 0 || recent > 4096 {
		return ListStatus{}, fmt.Errorf("list %d: %d recent entries: want 0..4096: %w", id, recent, ErrBadQuery)
	}
	if err := c.rlock(); err != nil {
		return ListStatus{}, err
	}
	defer c.memMu.RUnlock()
	return l.status(c.regions.Batch, recent), nil
}

// Memory is one primitive's memory.
type Memory struct {
	Primitive string `json:"primitive"`
	Bytes     uint64 `json:"bytes"`
	Addr      uint64 `json:"addr"`
	RKey      uint32 `json:"rkey"`
}

// RegionsInfo is what the collector offers translators and how its
// memory is laid out.
type RegionsInfo struct {
	Name       string         `json:"name"`
	IP         string         `json:"ip"`
	MAC        string         `json:"mac"`
	MTU        int            `json:"mtu"`
	MaxAtomic  int            `json:"max_atomic"`
	Redundancy int            `json:"redundancy"`
	HugePages  bool           `json:"huge_pages"` // asked for; the kernel may have had none
	Regions    dtamem.Regions `json:"regions"`
	Memory     []Memory       `json:"memory"`
}

// Info is the collector's offer and memory.
func (c *Collector) Info() RegionsInfo {
	o := c.offer()
	ri := RegionsInfo{Name: o.Name, IP: o.IP.String(), MAC: o.MAC, MTU: o.MTU, MaxAtomic: o.MaxAtomic,
		Redundancy: o.Redundancy, HugePages: c.spec.HugePages, Regions: o.Regions}
	ri.Memory = c.memory()
	return ri
}

func (c *Collector) memory() []Memory {
	c.memMu.RLock()
	defer c.memMu.RUnlock()
	out := make([]Memory, 0, len(c.prims))
	for _, p := range c.prims {
		m := Memory{Primitive: p.name, Bytes: uint64(len(p.buf))}
		if p.mr != nil {
			m.Addr, m.RKey = p.mr.Addr(), p.mr.RKey()
		}
		out = append(out, m)
	}
	return out
}

// Stats are the collector's counters.
type Stats struct {
	Name        string       `json:"name"`
	Uptime      string       `json:"uptime"`
	Connections int          `json:"connections"`
	Connects    uint64       `json:"connects"`
	Refused     uint64       `json:"refused"`
	AuthFailed  uint64       `json:"auth_failed"`
	Pushes      uint64       `json:"pushes"`
	RecentPush  []Push       `json:"recent_pushes,omitempty"`
	Lists       []ListStatus `json:"lists,omitempty"`
	Memory      []Memory     `json:"memory"`
}

// Stats reads the collector's counters (lists without their entries).
func (c *Collector) Stats() Stats {
	pushes, recent := c.Pushes()
	c.mu.Lock()
	nconn := len(c.conns)
	c.mu.Unlock()
	st := Stats{Name: c.spec.Name, Uptime: time.Since(c.start).Round(time.Millisecond).String(), Connections: nconn,
		Connects: c.connects.Load(), Refused: c.refused.Load(), AuthFailed: c.authFail.Load(), Pushes: pushes, RecentPush: recent, Memory: c.memory()}
	for _, id := range c.listIDs {
		st.Lists = append(st.Lists, c.lists[id].status(c.regions.Batch, 0))
	}
	return st
}

// ParseKey reads a key as the API and the CLI take it: decimal, 0x-hex,
// or a dotted IPv4 address (big-endian, as switches report addresses).
func ParseKey(s string) (uint32, error) {
	if strings.Count(s, ".") == 3 {
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is4() {
			return 0, fmt.Errorf("key %q: %w", s, ErrBadQuery)
		}
		b := a.As4()
		return binary.BigEndian.Uint32(b[:]), nil
	}
	v, err := strconv.ParseUint(s, 0, 32)
	if err != nil {
		return 0, fmt.Errorf("key %q: want a number up to 2^32-1 (decimal or 0x-hex) or an IPv4 address: %w", s, ErrBadQuery)
	}
	return uint32(v), nil
}

// ParsePath reads a path to check a postcard record against: each hop's
// data, comma-separated, decimal or 0x-hex.
func ParsePath(s string) ([]uint32, error) {
	f := strings.Split(s, ",")
	if len(f) > dtamem.MaxHops {
		return nil, fmt.Errorf("path %q: %d hops, at most %d: %w", s, len(f), dtamem.MaxHops, ErrBadQuery)
	}
	path := make([]uint32, len(f))
	for i, h := range f {
		v, err := strconv.ParseUint(strings.TrimSpace(h), 0, 32)
		if err != nil {
			return nil, fmt.Errorf("path %q: hop %d %q: want a number up to 2^32-1: %w", s, i, h, ErrBadQuery)
		}
		path[i] = uint32(v)
	}
	return path, nil
}
