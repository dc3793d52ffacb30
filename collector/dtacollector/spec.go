package dtacollector

import (
	"fmt"
	"net"
	"net/netip"
	"path/filepath"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/internal/dtamem"
	"github.com/rdma-appliance/appliance/internal/dtawire"
	"github.com/rdma-appliance/appliance/internal/service"
	"github.com/rdma-appliance/appliance/internal/spec"
	"github.com/rdma-appliance/appliance/verbs"
)

// Spec is a collector's configuration file (`appliance dta collect -f`):
// where it listens, the RDMA connection parameters it offers translators,
// and the primitives it hosts. A primitive whose block is absent is not
// served: the offer leaves its region out, and the translator drops its
// reports.
//
//	name: collector0
//	exchange: 10.9.0.1:40050    # TCP address of the translator exchange (default: the RDMA address)
//	key-file: dta.key           # the secret translators prove they hold
//	translators: [{name: t0, ip: 10.9.0.100}]   # only these (default: any with the key)
//	max-translators: 64         # connections (QPs) at once
//	listen: 127.0.0.1:9300      # HTTP: /metrics, /healthz, /v1/...
//	mtu: 1024                   # path MTU offered (256..4096)
//	max-atomic: 16              # responder resources (max_dest_rd_atomic)
//	huge-pages: true            # primitives' memory on 2 MiB pages when reserved
//	redundancy: 2               # N the queries read (Key-Write, Key-Increment)
//	recv-depth: 256             # receives kept posted per QP for WRITE with immediate
//	key-write: {slots: 1048576, data-width: 4}
//	key-increment: {slots: 262144}
//	append:
//	  batch: 4
//	  lists: [{id: 1, entries: 65536, pollers: 2, cores: "2-3", recent: 64}]
//	sketches: [{id: 7, kind: count-min, columns: 1024, rows: 4, reporters: 3, group: 16}]
//	postcards: {slots: 65536, hops: 5, cache: 4096}
//	layout: per-slot-crc        # or dta-public: the public DTA collector's memory layout
type Spec struct {
	// Name names the collector in its offers, logs and metrics.
	Name string `yaml:"name"`
	// Exchange is the TCP address translators dial. Empty is the
	// collector's RDMA address (its GID) on port 40050: the exchange
	// hands out remote access to memory, so it listens on no more
	// interfaces than it must. A wildcard host (":40050", "0.0.0.0")
	// needs ExchangeWildcard.
	Exchange         string `yaml:"exchange"`
	ExchangeWildcard bool   `yaml:"exchange-wildcard"`
	// KeyFile holds the secret translators authenticate with (see
	// dtamem.ReadKey); a relative path is taken from the file's
	// directory. It is required unless the exchange is on loopback.
	KeyFile string `yaml:"key-file"`
	// Key is KeyFile's content, read by Validate; callers building a
	// Spec in memory may set it themselves.
	Key []byte `yaml:"-" json:"-"`
	// Translators, when given, admits only these translators, each from
	// its own address: a translator's neighbour entry and QP are bound
	// to the name it authenticated with.
	Translators []AllowSpec `yaml:"translators"`
	// MaxTranslators bounds the connections (one QP and CQ each) served
	// at once (default 64); exchanges not done yet are bounded too.
	MaxTranslators int `yaml:"max-translators"`
	// Listen is the HTTP address (default 127.0.0.1:9300).
	Listen string `yaml:"listen"`
	// MTU is the path MTU in bytes the collector's QPs use (default 1024).
	MTU int `yaml:"mtu"`
	// MaxAtomic is each QP's responder resources: how many FETCH_ADDs a
	// translator may have outstanding (default 16).
	MaxAtomic int `yaml:"max-atomic"`
	// HugePages maps the primitives' memory on huge pages when the kernel
	// has them reserved (the DTA paper's collector used 1 GB pages).
	HugePages bool `yaml:"huge-pages"`
	// Redundancy is the N queries read Key-Write and Key-Increment with
	// (default 2), and the N offered to translators.
	Redundancy int `yaml:"redundancy"`
	// RecvDepth is how many receive requests each QP keeps posted, so
	// WRITEs with immediate (push notifications) never meet an empty
	// receive queue (default 256).
	RecvDepth int `yaml:"recv-depth"`
	// Layout is the memory layout (dtamem.Layout): per-slot-crc, the
	// default, or dta-public, the public DTA collector's Key-Write slot
	// hashing and 4-byte Append entries, for a Tofino running the public
	// translator. Translators must write the same layout: the exchange
	// refuses one that does not.
	Layout string `yaml:"layout"`

	KeyWrite     *KeyWriteSpec     `yaml:"key-write"`
	KeyIncrement *KeyIncrementSpec `yaml:"key-increment"`
	Append       *AppendSpec       `yaml:"append"`
	Sketches     []SketchSpec      `yaml:"sketches"`
	Postcards    *PostcardSpec     `yaml:"postcards"`
}

// AllowSpec is a translator the collector admits.
type AllowSpec struct {
	Name string `yaml:"name"`
	IP   string `yaml:"ip"`
}

// KeyWriteSpec sizes the Key-Write table.
type KeyWriteSpec struct {
	// Slots is the table's size in entries, a power of two.
	Slots uint64 `yaml:"slots"`
	// DataWidth is the data bytes per entry: 4 (default) or a larger
	// multiple of 4 up to 64. Translators must send this width.
	DataWidth int `yaml:"data-width"`
}

// KeyIncrementSpec sizes the Key-Increment count-min array.
type KeyIncrementSpec struct {
	// Slots is the number of 8-byte counters, a power of two.
	Slots uint64 `yaml:"slots"`
}

// AppendSpec configures the Append lists.
type AppendSpec struct {
	// Batch is how many entries translators gather per WRITE (default 4).
	Batch int        `yaml:"batch"`
	Lists []ListSpec `yaml:"lists"`
}

// ListSpec is one Append list.
type ListSpec struct {
	ID uint32 `yaml:"id"`
	// Entries is the ring's size, a power of two and a multiple of the
	// batch.
	Entries uint64 `yaml:"entries"`
	// Pollers is how many goroutines share the list (default 1): poller i
	// of P reads positions i, i+P, ...
	Pollers int `yaml:"pollers"`
	// Cores pins the pollers, one core each (DPDK -l syntax, "2-3");
	// empty leaves them unpinned.
	Cores string `yaml:"cores"`
	// Recent is how many of the latest entries each poller keeps for the
	// query API (default 64).
	Recent int `yaml:"recent"`
}

// SketchSpec is one Sketch-Merge sketch.
type SketchSpec struct {
	ID uint16 `yaml:"id"`
	// Kind is count-min or hyperloglog.
	Kind string `yaml:"kind"`
	// Columns (a power of two) of Rows 4-byte counters.
	Columns uint32 `yaml:"columns"`
	Rows    int    `yaml:"rows"`
	// Reporters is how many reporters the translator merges per column.
	Reporters int `yaml:"reporters"`
	// Group is how many merged columns one WRITE carries (0: the
	// translator's default).
	Group int `yaml:"group"`
}

// PostcardSpec sizes the Postcarder flow table.
type PostcardSpec struct {
	// Slots is the table's size in flow records, a power of two.
	Slots uint64 `yaml:"slots"`
	// Hops is a path's length, 1..32.
	Hops int `yaml:"hops"`
	// Cache is the translator's flow cache (a power of two; 0: its
	// default).
	Cache int `yaml:"cache"`
}

// Defaults.
const (
	DefaultListen     = "127.0.0.1:9300"
	DefaultMTU        = 1024
	DefaultMaxAtomic  = 16
	DefaultRedundancy = 2
	DefaultRecvDepth  = 256
	DefaultRecent     = 64
	// DefaultMaxTranslators bounds the connections of a collector.
	DefaultMaxTranslators = 64
	defaultBatch          = 4
	// maxSlots keeps a table's byte size far from overflowing; memory
	// beyond what the host has fails at allocation with the size named.
	maxSlots = 1 << 36
)

// LoadSpec reads and validates a collector file; every problem is
// reported with its file, line and key.
func LoadSpec(path string) (Spec, error) {
	return spec.LoadAs[Spec](path)
}

// DecodeSpec is LoadSpec for YAML held in memory; name is used in errors.
func DecodeSpec(name string, data []byte) (Spec, error) {
	return spec.DecodeAs[Spec](name, data)
}

// CheckExchange checks an exchange address: host:port, a wildcard host
// only when wildcard is set, and a key unless the host is loopback
// (the exchange hands out remote write access to the collector's
// memory). Empty is the default: the collector's RDMA address, which
// needs a key too.
func CheckExchange(addr string, wildcard, haveKey bool) error {
	host := ""
	if addr != "" {
		h, _, err := net.SplitHostPort(addr)
		if err != nil {
			return fmt.Errorf("%q: want host:port (port %d by default; absent: the RDMA address)", addr, dtamem.ExchangePort)
		}
		host = h
		if ip, err := netip.ParseAddr(h); h == "" || (err == nil && ip.IsUnspecified()) {
			if !wildcard {
				return fmt.Errorf("%q listens on every interface: name the address translators reach (or set exchange-wildcard: true)", addr)
			}
		}
	}
	if !haveKey && !service.LoopbackHost(host) {
		what := fmt.Sprintf("%q is", addr)
		if addr == "" {
			what = "the default exchange (the RDMA address) is"
		}
		return fmt.Errorf("%s reachable off this host: set key-file, the secret translators must prove they hold", what)
	}
	return nil
}

func pow2(n uint64) bool { return n > 0 && n&(n-1) == 0 }

// Validate records every problem of s in doc and fills the defaults.
func (s *Spec) Validate(doc *spec.Doc) {
	if s.Name == "" {
		s.Name = "collector"
	}
	if s.KeyFile != "" {
		p := s.KeyFile
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(doc.File), p)
		}
		k, err := dtamem.ReadKey(p)
		if err != nil {
			doc.Errorf("key-file", "%v", err)
		}
		s.Key = k
	}
	if err := CheckExchange(s.Exchange, s.ExchangeWildcard, s.Key != nil); err != nil {
		doc.Errorf("exchange", "%v", err)
	}
	if s.MaxTranslators == 0 {
		s.MaxTranslators = DefaultMaxTranslators
	} else if s.MaxTranslators < 1 || s.MaxTranslators > 4096 {
		doc.Errorf("max-translators", "%d: want 1..4096", s.MaxTranslators)
	}
	allowed := map[string]bool{}
	for i, a := range s.Translators {
		key := fmt.Sprintf("translators[%d]", i)
		if !dtamem.ValidName(a.Name) {
			doc.Errorf(key+".name", "%q: want 1..%d letters, digits, '.', '_' or '-'", a.Name, dtamem.MaxNameLen)
		} else if allowed[a.Name] {
			doc.Errorf(key+".name", "%q named twice", a.Name)
		}
		allowed[a.Name] = true
		if _, err := netip.ParseAddr(a.IP); err != nil {
			doc.Errorf(key+".ip", "%q: want the translator's RDMA address", a.IP)
		}
	}
	if s.Listen == "" {
		s.Listen = DefaultListen
	} else if _, _, err := net.SplitHostPort(s.Listen); err != nil {
		doc.Errorf("listen", "%q: want host:port", s.Listen)
	}
	if s.MTU == 0 {
		s.MTU = DefaultMTU
	} else if verbs.MTUFromBytes(s.MTU) == 0 || verbs.MTUFromBytes(s.MTU).Bytes() != s.MTU {
		doc.Errorf("mtu", "%d: want 256, 512, 1024, 2048 or 4096", s.MTU)
	}
	if s.MaxAtomic == 0 {
		s.MaxAtomic = DefaultMaxAtomic
	} else if s.MaxAtomic < 1 || s.MaxAtomic > 255 {
		doc.Errorf("max-atomic", "%d: want 1..255", s.MaxAtomic)
	}
	if s.Redundancy == 0 {
		s.Redundancy = DefaultRedundancy
	} else if s.Redundancy < 1 || s.Redundancy > dtawire.MaxRedundancy {
		doc.Errorf("redundancy", "%d: want 1..%d", s.Redundancy, dtawire.MaxRedundancy)
	}
	if s.RecvDepth == 0 {
		s.RecvDepth = DefaultRecvDepth
	} else if s.RecvDepth < 1 || s.RecvDepth > 1<<14 {
		doc.Errorf("recv-depth", "%d: want 1..16384", s.RecvDepth)
	}
	layout, err := dtamem.ParseLayout(s.Layout)
	if err != nil {
		doc.Errorf("layout", "%v", err)
	}
	served := 0
	if kw := s.KeyWrite; kw != nil {
		served++
		if !pow2(kw.Slots) || kw.Slots > maxSlots {
			doc.Errorf("key-write.slots", "%d: a power of two up to 2^36", kw.Slots)
		}
		if kw.DataWidth == 0 {
			kw.DataWidth = 4
		} else if err := (dtawire.Format{DataWidth: kw.DataWidth}).Validate(); err != nil {
			doc.Errorf("key-write.data-width", "%d: a multiple of 4 from 4 to %d", kw.DataWidth, dtawire.MaxDataWidth)
		}
	}
	if ki := s.KeyIncrement; ki != nil {
		served++
		if !pow2(ki.Slots) || ki.Slots > maxSlots {
			doc.Errorf("key-increment.slots", "%d: a power of two up to 2^36", ki.Slots)
		}
	}
	if a := s.Append; a != nil {
		served++
		s.validateAppend(doc, a, layout)
	}
	ids := map[uint16]bool{}
	for i := range s.Sketches {
		served++
		k := &s.Sketches[i]
		key := fmt.Sprintf("sketches[%d]", i)
		if ids[k.ID] {
			doc.Errorf(key+".id", "sketch %d defined twice", k.ID)
		}
		ids[k.ID] = true
		kind, err := ParseSketchKind(k.Kind)
		if err != nil {
			doc.Errorf(key+".kind", "%q: want count-min or hyperloglog", k.Kind)
			continue
		}
		r := dtamem.SketchRegion{Kind: kind, Columns: k.Columns, Rows: k.Rows, Reporters: k.Reporters, Group: k.Group}
		if err := r.Validate(); err != nil {
			// The region's own rules, pinned to the key they are about.
			var field string
			switch {
			case !pow2(uint64(k.Columns)):
				field = "columns"
			case k.Rows < 1 || k.Rows > dtawire.MaxSketchCounters || (kind == dtawire.SketchCountMin && k.Rows > dtawire.MaxRedundancy),
				kind == dtawire.SketchHyperLogLog && (!pow2(uint64(k.Rows)) || int(k.Columns)*k.Rows < 16):
				field = "rows"
			case k.Reporters < 1 || k.Reporters > dtamem.MaxReporters:
				field = "reporters"
			default:
				field = "group"
			}
			doc.Errorf(key+"."+field, "%v", err)
			continue
		}
		// A sketch's WRITE is one packet (WRITE Only): its group of
		// columns must fit the path MTU.
		if n := writeLen(&r); s.MTU > 0 && n > s.MTU {
			doc.Errorf(key+".group", "a WRITE of %d columns is %d bytes, over the mtu %d: fewer columns per group (or fewer rows)",
				n/r.ColumnLen(), n, s.MTU)
		}
	}
	if p := s.Postcards; p != nil {
		served++
		if !pow2(p.Slots) || p.Slots > maxSlots {
			doc.Errorf("postcards.slots", "%d: a power of two up to 2^36", p.Slots)
		}
		if p.Hops < 1 || p.Hops > dtamem.MaxHops {
			doc.Errorf("postcards.hops", "%d: want 1..%d", p.Hops, dtamem.MaxHops)
		}
		if p.Cache < 0 || (p.Cache > 0 && !pow2(uint64(p.Cache))) {
			doc.Errorf("postcards.cache", "%d: a power of two (0: the translator's default)", p.Cache)
		}
	}
	if served == 0 {
		doc.Errorf("", "no primitive: give at least one of key-write, key-increment, append, sketches, postcards")
	}
}

func (s *Spec) validateAppend(doc *spec.Doc, a *AppendSpec, layout dtamem.Layout) {
	el := layout.AppendEntryLen()
	if a.Batch == 0 {
		a.Batch = defaultBatch
	} else if a.Batch < 1 || a.Batch > dtamem.MaxBatch {
		doc.Errorf("append.batch", "%d: want 1..%d", a.Batch, dtamem.MaxBatch)
	} else if s.MTU > 0 && a.Batch*el > s.MTU {
		doc.Errorf("append.batch", "%d entries are %d bytes, over the mtu %d: one batch is one WRITE packet", a.Batch, a.Batch*el, s.MTU)
	}
	if len(a.Lists) == 0 {
		doc.Errorf("append.lists", "at least one list")
	}
	ids := map[uint32]bool{}
	cores := map[int]string{}
	for i := range a.Lists {
		l := &a.Lists[i]
		key := fmt.Sprintf("append.lists[%d]", i)
		if ids[l.ID] {
			doc.Errorf(key+".id", "list %d defined twice", l.ID)
		}
		ids[l.ID] = true
		if !pow2(l.Entries) || l.Entries > maxSlots || (a.Batch > 0 && l.Entries%uint64(a.Batch) != 0) {
			doc.Errorf(key+".entries", "%d: a power of two up to 2^36 and a multiple of the batch %d", l.Entries, a.Batch)
		}
		if l.Pollers == 0 {
			l.Pollers = 1
		} else if l.Pollers < 1 || l.Pollers > 64 {
			doc.Errorf(key+".pollers", "%d: want 1..64", l.Pollers)
		}
		if l.Recent == 0 {
			l.Recent = DefaultRecent
		} else if l.Recent < 1 || l.Recent > 4096 {
			doc.Errorf(key+".recent", "%d: want 1..4096", l.Recent)
		}
		if l.Cores == "" {
			continue
		}
		cl, err := dpdk.ParseCoreList(l.Cores)
		if err != nil {
			doc.Errorf(key+".cores", "%q: %v", l.Cores, err)
			continue
		}
		if len(cl) != l.Pollers {
			doc.Errorf(key+".cores", "%d cores for %d pollers: one core each", len(cl), l.Pollers)
		}
		for _, c := range cl {
			if other, dup := cores[c]; dup {
				doc.Errorf(key+".cores", "core %d already polls %s", c, other)
			}
			cores[c] = fmt.Sprintf("list %d", l.ID)
		}
	}
}

// writeLen is the size of a sketch's merged-column WRITE: Group columns,
// or by default as many as fit in 1024 bytes (the translator's rule).
func writeLen(r *dtamem.SketchRegion) int {
	g := r.Group
	if g == 0 {
		g = min(max(1, 1024/r.ColumnLen()), int(r.Columns))
	}
	return g * r.ColumnLen()
}

// ParseSketchKind parses count-min or hyperloglog.
func ParseSketchKind(s string) (uint8, error) {
	switch s {
	case "count-min":
		return dtawire.SketchCountMin, nil
	case "hyperloglog":
		return dtawire.SketchHyperLogLog, nil
	}
	return 0, fmt.Errorf("dta collector: sketch kind %q (count-min or hyperloglog)", s)
}

// SketchKindName is the spec's name of a sketch kind.
func SketchKindName(k uint8) string {
	if k == dtawire.SketchHyperLogLog {
		return "hyperloglog"
	}
	return "count-min"
}

// Geometry is the regions of a validated spec without addresses: what
// the collector allocates, registers and then advertises with its
// addresses and keys filled in.
func (s *Spec) Geometry() dtamem.Regions {
	var r dtamem.Regions
	r.Layout, _ = dtamem.ParseLayout(s.Layout) // validated
	if kw := s.KeyWrite; kw != nil {
		r.KeyWrite = &dtamem.KeyWriteRegion{Slots: kw.Slots, DataWidth: kw.DataWidth}
	}
	if ki := s.KeyIncrement; ki != nil {
		r.KeyIncrement = &dtamem.KeyIncrementRegion{Slots: ki.Slots}
	}
	if a := s.Append; a != nil {
		r.Batch = a.Batch
		r.Lists = map[uint32]dtamem.ListRegion{}
		for _, l := range a.Lists {
			r.Lists[l.ID] = dtamem.ListRegion{Entries: l.Entries}
		}
	}
	if len(s.Sketches) > 0 {
		r.Sketches = map[uint16]dtamem.SketchRegion{}
		for _, k := range s.Sketches {
			kind, _ := ParseSketchKind(k.Kind)
			r.Sketches[k.ID] = dtamem.SketchRegion{Kind: kind, Columns: k.Columns, Rows: k.Rows, Reporters: k.Reporters, Group: k.Group}
		}
	}
	if p := s.Postcards; p != nil {
		r.Postcards = &dtamem.PostcardRegion{Slots: p.Slots, Hops: p.Hops, Cache: p.Cache}
	}
	return r
}
