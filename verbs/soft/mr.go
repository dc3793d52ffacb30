package soft

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"maps"
	mrand "math/rand/v2"
	"sync/atomic"
	"unsafe"

	"github.com/rdma-appliance/appliance/verbs"
)

// pd is a protection domain: MRs, QPs and AHs of one PD may only be used
// together.
type pd struct {
	dev   *Device
	users atomic.Int32 // MRs, QPs and AHs created in it
	dead  atomic.Bool
}

var _ verbs.PD = (*pd)(nil)

func (p *pd) Dealloc() error {
	if p.users.Load() != 0 {
		return fmt.Errorf("soft: dealloc pd: %w", verbs.ErrBusy)
	}
	if p.dead.Swap(true) {
		return fmt.Errorf("soft: dealloc pd: %w", verbs.ErrClosed)
	}
	return nil
}

// mr is a registered memory region. Its address is the real address of the
// buffer, as ibverbs reports it: Go's collector does not move heap objects,
// and the address is only ever used as a number (VA - Addr is an offset into
// buf), never turned back into a pointer.
type mr struct {
	pd     *pd
	buf    []byte
	addr   uint64
	key    uint32
	access verbs.Access
	dead   atomic.Bool
}

var _ verbs.MR = (*mr)(nil)

func (m *mr) LKey() uint32         { return m.key }
func (m *mr) RKey() uint32         { return m.key }
func (m *mr) Addr() uint64         { return m.addr }
func (m *mr) Len() int             { return len(m.buf) }
func (m *mr) Buf() []byte          { return m.buf }
func (m *mr) Access() verbs.Access { return m.access }

func (m *mr) Dereg() error {
	if m.dead.Swap(true) {
		return fmt.Errorf("soft: dereg mr: %w", verbs.ErrClosed)
	}
	m.pd.dev.unregisterMR(m)
	m.pd.users.Add(-1)
	return nil
}

// slice returns the n bytes at va if they lie inside the region, or nil.
// It is written so that no overflow of va+n can pass the check.
func (m *mr) slice(va uint64, n uint32) ([]byte, bool) {
	if va < m.addr {
		return nil, false
	}
	off := va - m.addr
	if off > uint64(len(m.buf)) || uint64(n) > uint64(len(m.buf))-off {
		return nil, false
	}
	return m.buf[off : off+uint64(n) : off+uint64(n)], true
}

func (p *pd) RegMR(buf []byte, access verbs.Access) (verbs.MR, error) {
	if p.dead.Load() {
		return nil, fmt.Errorf("soft: reg mr: %w", verbs.ErrClosed)
	}
	if len(buf) == 0 {
		return nil, fmt.Errorf("soft: reg mr: %w: empty buffer", verbs.ErrInvalidArgument)
	}
	if err := access.Validate(); err != nil {
		return nil, fmt.Errorf("soft: reg mr: %w", err)
	}
	if uint64(len(buf)) > maxMRSize {
		return nil, fmt.Errorf("soft: reg mr: %w: %d bytes", verbs.ErrTooLarge, len(buf))
	}
	m := &mr{pd: p, buf: buf, addr: uint64(uintptr(unsafe.Pointer(&buf[0]))), access: access}
	if err := p.dev.registerMR(m); err != nil {
		return nil, err
	}
	p.users.Add(1)
	return m, nil
}

// maxMRSize is the largest region; keys index a table, so there is no
// per-region cost beyond the entry.
const maxMRSize = 1 << 40

// keyTable maps keys to regions. Keys are random (crypto/rand), not an
// index and a generation: an rkey is the only thing between a peer that
// can reach a QP and the region behind it, so a peer that saw one key
// (its own) must not be able to guess another region's, or the next
// one's. A stale key of a deregistered region is as unlikely to match a
// new one as any guess (2^-32 per live region). Lookups on the poll loop
// read an immutable map through an atomic pointer; registration copies
// it under the device's object lock.
type keyTable struct {
	tab atomic.Pointer[map[uint32]*mr]
}

func (t *keyTable) lookup(key uint32) *mr {
	tp := t.tab.Load()
	if tp == nil {
		return nil
	}
	return (*tp)[key]
}

const maxMRs = 1 << 20

// randomKey is a key no live region has. Keys are never 0 nor below
// 256, a number a careless caller might pass.
func randomKey(live map[uint32]*mr) uint32 {
	var b [4]byte
	for {
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
		k := binary.LittleEndian.Uint32(b[:])
		if _, used := live[k]; k >= 256 && !used {
			return k
		}
	}
}

// iovaBase is where a reproducible device's region addresses start.
const iovaBase = 0x7f0000000000

// seededKey is randomKey from a seeded generator.
func seededKey(r *mrand.Rand, live map[uint32]*mr) uint32 {
	for {
		k := r.Uint32()
		if _, used := live[k]; k >= 256 && !used {
			return k
		}
	}
}

func (d *Device) registerMR(m *mr) error {
	d.objMu.Lock()
	defer d.objMu.Unlock()
	t := &d.keys
	var old map[uint32]*mr
	if tp := t.tab.Load(); tp != nil {
		old = *tp
	}
	if len(old) >= maxMRs {
		return fmt.Errorf("soft: reg mr: %w: %d regions", verbs.ErrNoMemory, len(old))
	}
	nt := make(map[uint32]*mr, len(old)+1)
	maps.Copy(nt, old)
	if d.keyRNG != nil {
		// Reproducible: the same registrations give the same keys and
		// addresses, run after run.
		m.key = seededKey(d.keyRNG, old)
		m.addr = d.nextIOVA
		d.nextIOVA += (uint64(len(m.buf))+4095)&^4095 + 4096 // a guard page between regions
	} else {
		m.key = randomKey(old)
	}
	nt[m.key] = m
	t.tab.Store(&nt)
	return nil
}

func (d *Device) unregisterMR(m *mr) {
	d.objMu.Lock()
	defer d.objMu.Unlock()
	t := &d.keys
	tp := t.tab.Load()
	if tp == nil || (*tp)[m.key] != m {
		return
	}
	nt := maps.Clone(*tp)
	delete(nt, m.key)
	t.tab.Store(&nt)
}
