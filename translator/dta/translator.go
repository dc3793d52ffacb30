package dta

import (
	"encoding/binary"
	"fmt"
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

// Regions are what a collector advertises.
type Regions struct {
	KeyWrite     *KeyWriteRegion     `json:"key_write,omitempty"`
	KeyIncrement *KeyIncrementRegion `json:"key_increment,omitempty"`
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
	return nil
}

// Emit receives each RDMA frame the translation produces; the frame is
// only valid during the call.
type Emit func(frame []byte) error

// Translation counters.
type TranslateStats struct {
	Reports     [6]uint64 `json:"reports"` // by opcode
	Unsupported uint64    `json:"unsupported"`
	Errors      uint64    `json:"errors"`
}

// Translator turns reports into RDMA operations on one collector
// connection. It is the data path only: one goroutine calls Translate.
type Translator struct {
	Conn    *Conn
	Regions Regions
	Stats   TranslateStats
	buf     [9216]byte
	entry   [4 + MaxDataWidth]byte
}

// NewTranslator checks the regions and returns a translator.
func NewTranslator(c *Conn, r Regions) (*Translator, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return &Translator{Conn: c, Regions: r}, nil
}

// ErrNoRegion is returned for a report whose primitive the collector
// does not serve.
var ErrNoRegion = fmt.Errorf("dta: the collector has no region for this primitive")

// Translate turns one report into its RDMA operations:
//
//	Key-Write      N WRITEs of {CRC32(key), data} to slots CRC32(key||n) mod slots
//	Key-Increment  N FETCH_ADDs of counter to counters CRC32(key||n) mod slots
//
// A report with the immediate flag becomes WRITE with immediate (the key
// as immediate), so the collector hears of it at once. While the
// collector's atomic window is full, a Key-Increment report is refused
// with ErrAtomicWindow and nothing is sent: the caller feeds the
// collector's ACKs to the connection and tries again.
func (t *Translator) Translate(r *Report, emit Emit) error {
	if int(r.Opcode) < len(t.Stats.Reports) {
		t.Stats.Reports[r.Opcode]++
	}
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
			m, err := t.Conn.Write(t.buf[:], va, kw.RKey, e, imm)
			if err == nil {
				err = emit(t.buf[:m])
			}
			if err != nil {
				t.Stats.Errors++
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
			t.Stats.Reports[r.Opcode]--
			return ErrAtomicWindow
		}
		for n := 0; n < int(r.Redundancy); n++ {
			va := ki.Addr + KeyIncrementSlot(r.Key, n, ki.Slots)*8
			m, err := t.Conn.FetchAdd(t.buf[:], va, ki.RKey, r.Counter)
			if err == nil {
				err = emit(t.buf[:m])
			}
			if err != nil {
				t.Stats.Errors++
				return err
			}
		}
	default:
		t.Stats.Unsupported++
		return fmt.Errorf("%w: %v", ErrNoRegion, r.Opcode)
	}
	return nil
}

// QueryKeyWrite reads a key from a Key-Write table in collector memory:
// the data of the first of its N slots whose checksum matches, or false.
func QueryKeyWrite(mem []byte, key uint32, n int, slots uint64, dataWidth int) ([]byte, bool) {
	el := KeyWriteEntryLen(dataWidth)
	sum := KeyChecksum(key)
	for i := 0; i < n; i++ {
		off := Slot(key, i, slots) * uint64(el)
		e := mem[off : off+uint64(el)]
		if binary.BigEndian.Uint32(e) == sum {
			return e[4:], true
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
