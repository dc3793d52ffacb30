//go:build dpdk

package eal

/*
#cgo pkg-config: libdpdk
#include <stdlib.h>
#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/yerden/go-dpdk/mempool"

	"github.com/rdma-appliance/appliance/dpdk"
)

// DefaultRingSize is the descriptor ring size per queue when Config.RingSize
// is 0, clamped to what the device supports.
const DefaultRingSize = 1024

// rssHF is the set of flow types spread over receive queues: IP, UDP and TCP,
// which covers RoCEv2 (UDP port 4791) by its 5-tuple.
const rssHF = C.RTE_ETH_RSS_IP | C.RTE_ETH_RSS_UDP | C.RTE_ETH_RSS_TCP

var _ dpdk.Port = (*Port)(nil)

// Port is an ethdev port.
type Port struct {
	info   dpdk.PortInfo
	dev    string
	pmd    string
	id     uint16
	rssHF  uint64
	pool   *dpdk.Pool
	txMax  int // the longest packet an mbuf of mp holds
	mp     *mempool.Mempool
	rxq    []rxQueue
	txq    []*C.struct_shim_txq
	rxc    []dpdk.QueueCounters
	txc    []dpdk.QueueCounters
	closed atomic.Bool

	mu   sync.Mutex // serialises Close against Stats
	last dpdk.Stats // the counters at Close
}

// rxQueue keeps a stack of spare buffers from the pool, stash[:ready], whose
// data addresses sit in the C queue's dst array: the C side copies received
// packets into the top of the stack.
type rxQueue struct {
	c     *C.struct_shim_rxq
	ready int
	stash [MaxBurst]*dpdk.Packet
}

// DeviceStats are the PMD's own counters, rte_eth_stats. Some PMDs leave some
// of them at zero (net_ring counts no bytes).
type DeviceStats struct {
	IPackets uint64 `json:"ipackets"`
	OPackets uint64 `json:"opackets"`
	IBytes   uint64 `json:"ibytes"`
	OBytes   uint64 `json:"obytes"`
	IMissed  uint64 `json:"imissed"`
	IErrors  uint64 `json:"ierrors"`
	OErrors  uint64 `json:"oerrors"`
	RxNoMbuf uint64 `json:"rx_nombuf"`
}

var (
	openMu    sync.Mutex
	openPorts = map[string]*Port{}
	poolSeq   atomic.Uint32
)

type driver struct{}

func (driver) Open(dev string, cfg dpdk.Config) (dpdk.Port, error) {
	p, err := Open(dev, cfg)
	if err != nil {
		return nil, err
	}
	return p, nil
}

func init() { dpdk.RegisterDriver("eal", driver{}) }

// rteErr describes a negative errno returned by a DPDK call.
func rteErr(ret C.int) error {
	if ret < 0 {
		ret = -ret
	}
	return errors.New(C.GoString(C.rte_strerror(ret)))
}

// Open opens the ethdev named dev, hot-plugging it with cfg.Options as device
// arguments when it does not exist yet, and starts it with cfg.RxQueues and
// cfg.TxQueues queues. dpdk.Open("eal:...") calls it; call it directly for the
// concrete type.
//
// Received packets are copied into buffers of cfg.Pool, and each receive
// queue keeps as many spare buffers as the longest burst asked of it (at most
// MaxBurst), so the pool must hold those besides the packets the application
// keeps. Transmitted packets may come from any pool whose data room is no
// larger than cfg.Pool's.
func Open(dev string, cfg dpdk.Config) (*Port, error) {
	if cfg.Pool == nil {
		return nil, fmt.Errorf("eal: %s: Config.Pool is required: received packets are copied into its buffers", dev)
	}
	cfg.RxQueues = max(cfg.RxQueues, 1)
	cfg.TxQueues = max(cfg.TxQueues, 1)
	if cfg.RingSize <= 0 {
		cfg.RingSize = DefaultRingSize
	}
	// The port's mbufs must hold any packet of the pool after DPDK's headroom,
	// and an mbuf's data room is 16 bits wide.
	mbufRoom := C.RTE_PKTMBUF_HEADROOM + cfg.Pool.DataRoom()
	if mbufRoom > 0xffff {
		return nil, fmt.Errorf("eal: %s: pool data room %d too large for an mbuf", dev, cfg.Pool.DataRoom())
	}
	args := devargs(dev, cfg.Options)
	if err := ensureInit(args); err != nil {
		return nil, err
	}

	openMu.Lock()
	defer openMu.Unlock()
	if openPorts[dev] != nil {
		return nil, fmt.Errorf("eal: %s is already open", dev)
	}
	id, err := findOrProbe(dev, args)
	if err != nil {
		return nil, err
	}
	p, err := setup(id, dev, cfg, uint32(mbufRoom))
	if err != nil {
		// Unplug what the failed setup leaves behind so a retry starts afresh.
		C.shim_port_release(C.uint16_t(id), 0)
		return nil, fmt.Errorf("eal: %s: %w", dev, err)
	}
	openPorts[dev] = p
	return p, nil
}

// findOrProbe returns the port id of dev, probing it first when no port of that
// name exists.
func findOrProbe(dev, args string) (uint16, error) {
	cname := C.CString(dev)
	defer C.free(unsafe.Pointer(cname))
	var id C.uint16_t
	if C.shim_port_by_name(cname, &id) == 0 {
		return uint16(id), nil
	}
	if args == dev && initVdevs[dev] != "" {
		args = initVdevs[dev]
	}
	cargs := C.CString(args)
	defer C.free(unsafe.Pointer(cargs))
	var probeErr error
	if ret := C.rte_dev_probe(cargs); ret == -C.EFAULT {
		// What rte_dev_probe says when no bus claims the name ("Bad address").
		probeErr = errors.New("no DPDK bus or driver knows the name")
	} else if ret < 0 {
		probeErr = rteErr(ret)
	} else if C.shim_port_by_name(cname, &id) == 0 {
		return uint16(id), nil
	} else {
		probeErr = errors.New("probed, but no ethdev of that name appeared")
	}
	var buf [1024]C.char
	C.shim_port_names(&buf[0], C.int(len(buf)))
	have := C.GoString(&buf[0])
	if have == "" {
		have = "none"
	}
	return 0, fmt.Errorf("eal: no DPDK port named %s (have: %s; probing %q: %v): %w",
		dev, have, args, probeErr, dpdk.ErrNoDevice)
}

func setup(id uint16, dev string, cfg dpdk.Config, mbufRoom uint32) (*Port, error) {
	cid := C.uint16_t(id)
	var di C.struct_shim_dev_info
	if ret := C.shim_dev_info(cid, &di); ret != 0 {
		return nil, fmt.Errorf("rte_eth_dev_info_get: %w", rteErr(ret))
	}
	pmd := C.GoString(&di.driver[0])
	if cfg.RxQueues > int(di.max_rx_queues) || cfg.TxQueues > int(di.max_tx_queues) {
		return nil, fmt.Errorf("%d rx / %d tx queues asked, %s has at most %d / %d",
			cfg.RxQueues, cfg.TxQueues, pmd, di.max_rx_queues, di.max_tx_queues)
	}
	if mbufRoom < uint32(di.min_rx_bufsize) {
		return nil, fmt.Errorf("%s needs receive buffers of %d bytes, the pool gives %d", pmd, di.min_rx_bufsize, mbufRoom)
	}
	nbRxd := clampDesc(cfg.RingSize, int(di.rx_desc_min), int(di.rx_desc_max))
	nbTxd := clampDesc(cfg.RingSize, int(di.tx_desc_min), int(di.tx_desc_max))
	socket := int(di.socket)

	rss := uint64(rssHF) & uint64(di.flow_type_rss_offloads)
	var rxOff, txOff uint64
	if cfg.RxQueues > 1 && rss != 0 && uint64(di.rx_offload_capa)&C.RTE_ETH_RX_OFFLOAD_RSS_HASH != 0 {
		rxOff |= C.RTE_ETH_RX_OFFLOAD_RSS_HASH
	}
	// Every mbuf we transmit comes from one pool with a reference count of 1:
	// exactly the case where a PMD may free them in bulk without checks.
	if uint64(di.tx_offload_capa)&C.RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE != 0 {
		txOff |= C.RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE
	}
	if cfg.RxQueues <= 1 {
		rss = 0
	}
	if ret := C.shim_configure(cid, C.uint16_t(cfg.RxQueues), C.uint16_t(cfg.TxQueues), C.uint64_t(rss),
		C.uint64_t(rxOff), C.uint64_t(txOff)); ret != 0 {
		return nil, fmt.Errorf("rte_eth_dev_configure: %w", rteErr(ret))
	}

	// The port's mempool feeds the PMD's receive rings and our transmit
	// copies: every descriptor of every ring may hold an mbuf, plus a burst in
	// flight per queue, plus what the per-lcore caches of the poller threads
	// (registered by the shim) may keep.
	n := cfg.RxQueues*(nbRxd+MaxBurst) + cfg.TxQueues*(nbTxd+MaxBurst) +
		C.SHIM_CACHE_THREADS*C.SHIM_CACHE_SIZE*3/2 + 1024
	size := uint32(1)
	for int(size) < n+1 {
		size <<= 1
	}
	size-- // rte_mempool is most memory-efficient at 2^k-1 elements
	name := fmt.Sprintf("apl%d_%d", id, poolSeq.Add(1))
	mp, err := mempool.CreateMbufPool(name, size, uint16(mbufRoom), mempool.OptSocket(socket), mempool.OptCacheSize(C.SHIM_CACHE_SIZE))
	if err != nil {
		return nil, fmt.Errorf("mbuf pool of %d x %d bytes: %w (is -m large enough?)", size, mbufRoom, err)
	}
	p := &Port{dev: dev, pmd: pmd, id: id, rssHF: rss, pool: cfg.Pool, mp: mp, txMax: cfg.Pool.DataRoom(),
		rxc: make([]dpdk.QueueCounters, cfg.RxQueues), txc: make([]dpdk.QueueCounters, cfg.TxQueues)}
	cmp := (*C.struct_rte_mempool)(unsafe.Pointer(mp))
	fail := func(err error) (*Port, error) {
		p.freeQueues()
		return nil, err
	}

	rxd, txd := C.uint16_t(nbRxd), C.uint16_t(nbTxd)
	if ret := C.shim_queues_setup(cid, C.uint16_t(cfg.RxQueues), C.uint16_t(cfg.TxQueues), &rxd, &txd,
		C.int(socket), cmp, C.uint64_t(txOff)); ret != 0 {
		return fail(fmt.Errorf("queue setup (%d rx x %d, %d tx x %d descriptors): %w",
			cfg.RxQueues, rxd, cfg.TxQueues, txd, rteErr(ret)))
	}
	p.rxq = make([]rxQueue, cfg.RxQueues)
	for q := range p.rxq {
		if p.rxq[q].c = C.shim_rxq_new(cid, C.uint16_t(q), C.int(socket)); p.rxq[q].c == nil {
			return fail(errors.New("rte_zmalloc: out of EAL memory for queue state"))
		}
	}
	p.txq = make([]*C.struct_shim_txq, cfg.TxQueues)
	for q := range p.txq {
		if p.txq[q] = C.shim_txq_new(cid, C.uint16_t(q), C.int(socket), cmp); p.txq[q] == nil {
			return fail(errors.New("rte_zmalloc: out of EAL memory for queue state"))
		}
	}
	if cfg.Promiscuous {
		// Not every PMD has the notion (net_null, net_ring); that is no error.
		if ret := C.rte_eth_promiscuous_enable(cid); ret != 0 && ret != -C.ENOTSUP {
			return fail(fmt.Errorf("rte_eth_promiscuous_enable: %w", rteErr(ret)))
		}
	}
	if ret := C.rte_eth_dev_start(cid); ret != 0 {
		return fail(fmt.Errorf("rte_eth_dev_start: %w", rteErr(ret)))
	}

	var pi C.struct_shim_port_info
	C.shim_port_info(cid, &pi)
	numa := socket
	if numa < 0 {
		numa = -1
	}
	p.info = dpdk.PortInfo{Name: "eal:" + dev, Driver: "eal", MTU: int(pi.mtu),
		RxQueues: cfg.RxQueues, TxQueues: cfg.TxQueues, SpeedMbps: int(pi.speed_mbps),
		NUMANode: numa, IfIndex: int(di.if_index)}
	for i := range p.info.MAC {
		p.info.MAC[i] = byte(pi.mac[i])
	}
	return p, nil
}

func clampDesc(n, lo, hi int) int {
	if hi > 0 && n > hi {
		n = hi
	}
	return max(n, lo)
}

// freeQueues gives back what setup took: spare buffers to the Go pool, queue
// state and the mbuf pool to the EAL. The device must be stopped first.
func (p *Port) freeQueues() {
	for q := range p.rxq {
		rq := &p.rxq[q]
		dpdk.FreeBulk(rq.stash[:rq.ready])
		clear(rq.stash[:rq.ready])
		rq.ready = 0
		if rq.c != nil {
			C.shim_free(unsafe.Pointer(rq.c))
			rq.c = nil
		}
	}
	for q, tq := range p.txq {
		if tq != nil {
			C.shim_free(unsafe.Pointer(tq))
			p.txq[q] = nil
		}
	}
	if p.mp != nil {
		p.mp.Free()
		p.mp = nil
	}
}

// Info implements dpdk.Port.
func (p *Port) Info() dpdk.PortInfo { return p.info }

// PortID is the DPDK port id.
func (p *Port) PortID() uint16 { return p.id }

// PMD is the name of the poll-mode driver, e.g. "net_null".
func (p *Port) PMD() string { return p.pmd }

// RSSHashFunctions is the rss_hf the port was configured with (0: no RSS).
func (p *Port) RSSHashFunctions() uint64 { return p.rssHF }

// refill tops the spare-buffer stack up to want buffers.
func (rq *rxQueue) refill(pool *dpdk.Pool, want int) {
	got := pool.GetBulk(rq.stash[rq.ready:want])
	for j := rq.ready; j < rq.ready+got; j++ {
		b := rq.stash[j].Buffer()
		rq.c.dst[j] = C.uintptr_t(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
		rq.c.room[j] = C.uint32_t(len(b))
	}
	rq.ready += got
}

// RxBurst implements dpdk.Port. When the pool has no buffer to spare the queue
// is not polled at all, so the device's ring fills and it counts the misses,
// as a NIC out of mbufs would; RxNoBuf counts such polls.
func (p *Port) RxBurst(q int, pkts []*dpdk.Packet) int {
	if q < 0 || q >= len(p.rxq) || len(pkts) == 0 || p.closed.Load() {
		return 0
	}
	rq := &p.rxq[q]
	want := min(len(pkts), MaxBurst)
	if rq.ready < want {
		rq.refill(p.pool, want)
	}
	nb := min(want, rq.ready)
	if nb == 0 {
		p.rxc[q].RxNoBuf.Add(1)
		return 0
	}
	top := rq.ready
	k := int(C.shim_rx(rq.c, C.uint16_t(top), C.uint16_t(nb)))
	if drop := rq.c.too_big; drop != 0 {
		p.rxc[q].Dropped.Add(uint64(drop))
	}
	if k == 0 {
		return 0
	}
	now := dpdk.Nanotime()
	var bytes uint64
	for i := range k {
		pkt := rq.stash[top-1-i]
		rq.stash[top-1-i] = nil
		n := int(rq.c.len[i])
		_ = pkt.SetLen(n) // C checked n against this buffer's room
		pkt.Hash = uint32(rq.c.hash[i])
		pkt.Timestamp = now
		pkt.Port = p.id
		pkt.Queue = uint16(q)
		pkts[i] = pkt
		bytes += uint64(n)
	}
	rq.ready -= k
	c := &p.rxc[q]
	c.RxPackets.Add(uint64(k))
	c.RxBytes.Add(bytes)
	return k
}

// ReadEPB receives a burst on queue q and writes each packet, its first
// snap bytes, as a pcapng Enhanced Packet Block of interface 0 stamped with
// the receive time (nanoseconds) straight from its mbuf into buf: one cgo
// call per burst and no Go buffer per packet. It takes as many packets as
// whole blocks fit in buf (at most MaxBurst) and returns how many it wrote
// and the bytes they take. Counters as RxBurst.
func (p *Port) ReadEPB(q int, buf []byte, snap int) (n, used int) {
	if q < 0 || q >= len(p.rxq) || p.closed.Load() || snap <= 0 {
		return 0, 0
	}
	nb := min(len(buf)/(32+(snap+3)&^3), MaxBurst)
	if nb == 0 {
		return 0, 0
	}
	rq := &p.rxq[q]
	k := int(C.shim_rx_epb(rq.c, C.uint16_t(nb), C.uint32_t(snap), C.uint64_t(dpdk.Nanotime()),
		(*C.char)(unsafe.Pointer(unsafe.SliceData(buf)))))
	if k == 0 {
		return 0, 0
	}
	c := &p.rxc[q]
	c.RxPackets.Add(uint64(k))
	c.RxBytes.Add(uint64(rq.c.bytes))
	return k, int(rq.c.used)
}

// ReadSlots receives packets on queue q and copies each, its first stride
// bytes, straight from its mbuf into the next slot of arena (slot i is
// arena[i*stride:(i+1)*stride]), with the bytes copied in lens[i] and its
// length on the wire in wire[i]: a capture arena filled in the cgo call that
// receives the packets, one copy per packet and no Go buffer. It polls the
// PMD in bursts of burst packets until it has as many packets as there are
// slots in arena, lens and wire (at most MaxBurst) or a burst comes back
// short, so a busy queue costs one cgo call per several bursts. It returns
// how many packets it took and their bytes on the wire. stride is at most
// 65535, the longest length lens holds. Counters as RxBurst.
func (p *Port) ReadSlots(q, burst int, arena []byte, stride int, lens []uint16, wire []uint32) (n int, bytes uint64) {
	if q < 0 || q >= len(p.rxq) || p.closed.Load() || stride <= 0 || stride > 0xffff || burst <= 0 {
		return 0, 0
	}
	nb := min(len(arena)/stride, len(lens), len(wire), MaxBurst)
	if nb == 0 {
		return 0, 0
	}
	rq := &p.rxq[q]
	k := int(C.shim_rx_slots(rq.c, C.uint16_t(nb), C.uint16_t(min(burst, nb)), C.uint32_t(stride),
		(*C.char)(unsafe.Pointer(unsafe.SliceData(arena))), (*C.uint16_t)(unsafe.Pointer(unsafe.SliceData(lens))),
		(*C.uint32_t)(unsafe.Pointer(unsafe.SliceData(wire)))))
	if k == 0 {
		return 0, 0
	}
	b := uint64(rq.c.bytes)
	c := &p.rxc[q]
	c.RxPackets.Add(uint64(k))
	c.RxBytes.Add(b)
	return k, b
}

// StreamsSlots reports whether ReadSlots writes slots of stride bytes with
// non-temporal stores, past the cache (when the arena and the stride are
// 16-byte aligned: a large Go allocation is): a caller that reads a slot
// back right after the call then misses the cache.
func (p *Port) StreamsSlots(stride int) bool { return stride%16 == 0 }

// TxBurst implements dpdk.Port. The packets are copied into mbufs, so those
// sent go straight back to their pool; when the device's ring or the port's
// mbuf pool is full the rest stay with the caller. A packet no mbuf of the port
// can hold (empty, or from a pool with a larger data room than the port's) is
// taken, freed and counted in TxErrors, as a NIC drops a frame it cannot send.
func (p *Port) TxBurst(q int, pkts []*dpdk.Packet) int {
	if q < 0 || q >= len(p.txq) || len(pkts) == 0 || p.closed.Load() {
		return 0
	}
	tq := p.txq[q]
	nb := min(len(pkts), MaxBurst)
	for i, pkt := range pkts[:nb] {
		d := pkt.Data()
		if len(d) == 0 || len(d) > p.txMax {
			if i == 0 {
				pkt.Free()
				p.txc[q].TxErrors.Add(1)
				return 1
			}
			nb = i // send what precedes it; the next call drops it
			break
		}
		tq.src[i] = C.uintptr_t(uintptr(unsafe.Pointer(unsafe.SliceData(d))))
		tq.len[i] = C.uint32_t(len(d))
	}
	sent := int(C.shim_tx(tq, C.uint16_t(nb)))
	if sent == 0 {
		return 0
	}
	var bytes uint64
	for i := range sent {
		bytes += uint64(tq.len[i])
	}
	dpdk.FreeBulk(pkts[:sent])
	c := &p.txc[q]
	c.TxPackets.Add(uint64(sent))
	c.TxBytes.Add(bytes)
	return sent
}

// DeviceStats reads the PMD's counters.
func (p *Port) DeviceStats() (DeviceStats, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() {
		return DeviceStats{}, fmt.Errorf("eal: %s is closed", p.dev)
	}
	return p.deviceStats()
}

func (p *Port) deviceStats() (DeviceStats, error) {
	var s C.struct_shim_stats
	if ret := C.shim_stats_get(C.uint16_t(p.id), &s); ret != 0 {
		return DeviceStats{}, fmt.Errorf("eal: %s: rte_eth_stats_get: %w", p.dev, rteErr(ret))
	}
	return DeviceStats{IPackets: uint64(s.ipackets), OPackets: uint64(s.opackets), IBytes: uint64(s.ibytes),
		OBytes: uint64(s.obytes), IMissed: uint64(s.imissed), IErrors: uint64(s.ierrors),
		OErrors: uint64(s.oerrors), RxNoMbuf: uint64(s.rx_nombuf)}, nil
}

// Stats implements dpdk.Port. Packets and bytes are what crossed RxBurst and
// TxBurst, counted the same way by every PMD (some count no bytes); the losses
// only the device sees (imissed, ierrors, oerrors, rx_nombuf) are added to the
// driver's own (oversized packets, polls without a spare buffer).
func (p *Port) Stats() dpdk.Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() {
		return p.last
	}
	return p.stats()
}

func (p *Port) stats() dpdk.Stats {
	s := dpdk.SumCounters(p.rxc)
	s.Add(dpdk.SumCounters(p.txc))
	if d, err := p.deviceStats(); err == nil {
		s.Dropped += d.IMissed
		s.Errors += d.IErrors
		s.TxErrors += d.OErrors
		s.RxNoBuf += d.RxNoMbuf
	}
	return s
}

// Close stops the port, unplugs its device (so that opening it again creates
// it afresh) and returns the spare buffers to the pool. No burst may run on the
// port during or after Close, as with rte_eth_dev_stop.
func (p *Port) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() {
		return nil
	}
	p.last = p.stats()
	p.closed.Store(true)
	var err error
	if ret := C.shim_port_release(C.uint16_t(p.id), C.uint16_t(len(p.rxq))); ret != 0 {
		err = fmt.Errorf("eal: close %s: %w", p.dev, rteErr(ret))
	}
	p.freeQueues()
	openMu.Lock()
	delete(openPorts, p.dev)
	openMu.Unlock()
	return err
}

// String names the port for logs.
func (p *Port) String() string {
	return fmt.Sprintf("%s (DPDK port %d, %s)", p.info.Name, p.id, p.pmd)
}

// threadLcore is the lcore id of the calling thread, registering it as the
// first burst on it would; -1 when it could not get one.
func threadLcore() int { return int(C.shim_thread_lcore()) }

// lcoreInUse says whether lcore id lc belongs to a thread registered by the
// shim.
func lcoreInUse(lc int) bool { return C.rte_lcore_has_role(C.uint(lc), C.ROLE_NON_EAL) > 0 }
