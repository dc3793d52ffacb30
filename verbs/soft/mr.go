package soft

import (
	"fmt"
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

// keyTable maps keys to regions. Keys are index<<8 | generation, like the
// mlx5 mkey layout, so a stale key of a deregistered region does not match a
// new region in the same slot. Lookups on the poll loop read an immutable
// slice through an atomic pointer; registration copies it under the
// device's object lock.
type keyTable struct {
	tab  atomic.Pointer[[]*mr]
	gen  []uint8 // per slot, under the object lock
	free []int   // free slots, under the object lock
}

func (t *keyTable) lookup(key uint32) *mr {
	tp := t.tab.Load()
	if tp == nil {
		return nil
	}
	tab := *tp
	i := int(key >> 8)
	if i >= len(tab) {
		return nil
	}
	if m := tab[i]; m != nil && m.key == key {
		return m
	}
	return nil
}

const maxMRs = 1 << 20

func (d *Device) registerMR(m *mr) error {
	d.objMu.Lock()
	defer d.objMu.Unlock()
	t := &d.keys
	var old []*mr
	if tp := t.tab.Load(); tp != nil {
		old = *tp
	}
	var i int
	if n := len(t.free); n > 0 {
		i = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		if len(t.gen) >= maxMRs {
			return fmt.Errorf("soft: reg mr: %w: %d regions", verbs.ErrNoMemory, len(t.gen))
		}
		i = len(t.gen)
		t.gen = append(t.gen, 0)
	}
	t.gen[i]++
	// Keys start at index 1 so that no valid key is 0 or a small number a
	// careless caller might pass.
	m.key = uint32(i+1)<<8 | uint32(t.gen[i])
	nt := make([]*mr, max(len(old), i+2))
	copy(nt, old)
	nt[i+1] = m
	t.tab.Store(&nt)
	return nil
}

func (d *Device) unregisterMR(m *mr) {
	d.objMu.Lock()
	defer d.objMu.Unlock()
	t := &d.keys
	tp := t.tab.Load()
	if tp == nil {
		return
	}
	i := int(m.key >> 8)
	old := *tp
	if i >= len(old) || old[i] != m {
		return
	}
	nt := make([]*mr, len(old))
	copy(nt, old)
	nt[i] = nil
	t.tab.Store(&nt)
	t.free = append(t.free, i-1)
}
