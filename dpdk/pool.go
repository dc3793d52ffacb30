package dpdk

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rdma-appliance/appliance/dpdk/hugemem"
)

// Pool is a fixed set of packet buffers, the counterpart of an rte_mempool of
// mbufs. All buffers are carved out of one arena mapped outside the Go heap
// (huge pages when the kernel has them reserved), so the garbage collector
// never scans packet bytes and C code may be given their addresses.
//
// Get and Put take a mutex; the burst forms GetBulk and PutBulk take it once
// per burst, which is what the poll loops use.
type Pool struct {
	name     string
	dataRoom int
	arena    []byte
	huge     bool
	pkts     []Packet

	mu   sync.Mutex
	free []*Packet

	allocFails  atomic.Uint64
	doubleFrees atomic.Uint64
}

// PoolStats are a pool's counters.
type PoolStats struct {
	Size        int    // buffers in the pool
	Available   int    // buffers in the free list
	AllocFails  uint64 // Get/GetBulk calls that found the pool short
	DoubleFrees uint64 // Put of a packet already free (ignored)
	HugePages   bool   // the arena is backed by huge pages
}

// NewPool maps an arena for n buffers of dataRoom bytes each. A dataRoom of 0
// means DefaultDataRoom.
func NewPool(name string, n, dataRoom int) (*Pool, error) {
	if dataRoom == 0 {
		dataRoom = DefaultDataRoom
	}
	if n <= 0 || dataRoom <= 0 {
		return nil, fmt.Errorf("dpdk: pool %q: invalid size %d x %d bytes", name, n, dataRoom)
	}
	// Round each buffer to a cache line so neighbouring packets written by
	// different cores never share one.
	stride := (dataRoom + 63) &^ 63
	size := n * stride
	arena, huge, err := hugemem.Map(size, true)
	if err != nil {
		return nil, fmt.Errorf("dpdk: pool %q: mapping %d bytes: %w", name, size, err)
	}
	p := &Pool{name: name, dataRoom: dataRoom, arena: arena, huge: huge,
		pkts: make([]Packet, n), free: make([]*Packet, n)}
	for i := range p.pkts {
		pkt := &p.pkts[i]
		pkt.buf = arena[i*stride : i*stride+dataRoom : i*stride+dataRoom]
		pkt.pool = p
		pkt.free = true
		pkt.Reset()
		if poolDebug {
			poison(pkt)
		}
		p.free[i] = pkt
	}
	return p, nil
}

// Name is the pool's name.
func (p *Pool) Name() string { return p.name }

// DataRoom is the size of each buffer.
func (p *Pool) DataRoom() int { return p.dataRoom }

// Size is the number of buffers in the pool.
func (p *Pool) Size() int { return len(p.pkts) }

// Get takes one packet, reset, or returns nil when the pool is empty.
func (p *Pool) Get() *Packet {
	p.mu.Lock()
	n := len(p.free)
	if n == 0 {
		p.mu.Unlock()
		p.allocFails.Add(1)
		return nil
	}
	pkt := p.free[n-1]
	p.free = p.free[:n-1]
	pkt.free = false
	p.mu.Unlock()
	if poolDebug {
		checkPoison(p, pkt)
	}
	pkt.Reset()
	return pkt
}

// GetBulk fills pkts with reset packets and returns how many it could take;
// fewer than len(pkts) means the pool ran short.
func (p *Pool) GetBulk(pkts []*Packet) int {
	p.mu.Lock()
	n := min(len(pkts), len(p.free))
	top := len(p.free) - n
	copy(pkts, p.free[top:])
	clear(p.free[top:])
	p.free = p.free[:top]
	for _, pkt := range pkts[:n] {
		pkt.free = false
	}
	p.mu.Unlock()
	if n < len(pkts) {
		p.allocFails.Add(1)
	}
	for _, pkt := range pkts[:n] {
		if poolDebug {
			checkPoison(p, pkt)
		}
		pkt.Reset()
	}
	return n
}

// Put returns a packet to the pool. A packet that is already free is ignored
// and counted, so a double free cannot hand one buffer to two owners.
func (p *Pool) Put(pkt *Packet) {
	if pkt == nil {
		return
	}
	p.mu.Lock()
	if pkt.free || pkt.pool != p {
		p.mu.Unlock()
		p.doubleFrees.Add(1)
		return
	}
	pkt.free = true
	if poolDebug {
		poison(pkt)
	}
	p.free = append(p.free, pkt)
	p.mu.Unlock()
}

// PutBulk returns packets of this pool; see Put for double frees.
func (p *Pool) PutBulk(pkts []*Packet) {
	var bad uint64
	p.mu.Lock()
	for _, pkt := range pkts {
		if pkt == nil {
			continue
		}
		if pkt.free || pkt.pool != p {
			bad++
			continue
		}
		pkt.free = true
		if poolDebug {
			poison(pkt)
		}
		p.free = append(p.free, pkt)
	}
	p.mu.Unlock()
	if bad > 0 {
		p.doubleFrees.Add(bad)
	}
}

// Available is the number of free buffers.
func (p *Pool) Available() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.free)
}

// Stats returns the pool's counters.
func (p *Pool) Stats() PoolStats {
	return PoolStats{Size: len(p.pkts), Available: p.Available(), AllocFails: p.allocFails.Load(),
		DoubleFrees: p.doubleFrees.Load(), HugePages: p.huge}
}

// Close unmaps the arena. Every packet must be back in the pool: closing a
// pool whose buffers are still in use would leave them pointing at unmapped
// memory, so Close refuses.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.arena == nil {
		return nil
	}
	if len(p.free) != len(p.pkts) {
		return fmt.Errorf("dpdk: pool %q: %d of %d buffers still in use", p.name, len(p.pkts)-len(p.free), len(p.pkts))
	}
	arena := p.arena
	p.arena = nil
	p.free = nil
	return hugemem.Unmap(arena)
}

// Cache is a per-worker stash of free packets in front of a Pool, like the
// per-lcore cache of an rte_mempool: a worker that both allocates and frees
// (or only frees, like a receiver) touches the pool's lock once per cache
// refill or flush instead of once per burst. A Cache belongs to one goroutine.
type Cache struct {
	pool *Pool
	objs []*Packet
	size int
}

// NewCache returns a cache holding up to size packets (default 256).
func (p *Pool) NewCache(size int) *Cache {
	if size <= 0 {
		size = 256
	}
	return &Cache{pool: p, objs: make([]*Packet, 0, 2*size), size: size}
}

// GetBulk fills pkts from the cache, refilling it from the pool when short.
func (c *Cache) GetBulk(pkts []*Packet) int {
	if len(c.objs) < len(pkts) {
		have := len(c.objs)
		want := min(cap(c.objs), c.size+len(pkts)) - have
		n := c.pool.GetBulk(c.objs[have : have+want])
		c.objs = c.objs[:have+n]
	}
	n := min(len(pkts), len(c.objs))
	top := len(c.objs) - n
	copy(pkts, c.objs[top:])
	clear(c.objs[top:])
	c.objs = c.objs[:top]
	for _, pkt := range pkts[:n] {
		if poolDebug {
			checkPoison(c.pool, pkt)
		}
		pkt.Reset()
	}
	return n
}

// Get takes one packet, or nil when the pool is empty.
func (c *Cache) Get() *Packet {
	var one [1]*Packet
	if c.GetBulk(one[:]) == 0 {
		return nil
	}
	return one[0]
}

// PutBulk frees packets into the cache; packets of other pools go straight to
// theirs, and the cache flushes down to its size when it overflows.
func (c *Cache) PutBulk(pkts []*Packet) {
	for _, pkt := range pkts {
		if pkt == nil {
			continue
		}
		if pkt.pool != c.pool || pkt.free {
			pkt.pool.Put(pkt)
			continue
		}
		if len(c.objs) == cap(c.objs) {
			c.pool.PutBulk(c.objs[c.size:])
			clear(c.objs[c.size:])
			c.objs = c.objs[:c.size]
		}
		if poolDebug {
			poison(pkt)
		}
		c.objs = append(c.objs, pkt)
	}
}

// Flush returns every cached packet to the pool; call it when the worker stops.
func (c *Cache) Flush() {
	c.pool.PutBulk(c.objs)
	clear(c.objs)
	c.objs = c.objs[:0]
}
