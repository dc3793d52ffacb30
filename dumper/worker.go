package dumper

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/afpacket"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dpdk/hugemem"
	"github.com/rdma-appliance/appliance/dumper/capture"
	"github.com/rdma-appliance/appliance/dumper/pcap"
	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// worker captures one receive queue into its arena.
type worker struct {
	d     *Dumper
	queue int
	core  int

	// The arena: slot i is arena[i*snap : i*snap+lens[i]]; wire[i] is the
	// frame's length before the snap.
	arena []byte
	lens  []uint16
	wire  []uint32
	// With track, seqMax and outOfOrder follow the copies' order as they
	// arrive, from their mirror sequences read while they are in the
	// cache: Stop has anything to sort only when a copy came out of order,
	// and otherwise reads each slot once, to write it. A port that streams
	// its slots past the cache (StreamingSlotReader) leaves it off: reading
	// a sequence back would be a memory access per packet on the capture
	// path, which Stop's scan of the arena pays instead.
	track      bool
	seqMax     uint64
	outOfOrder uint64
	n          int // slots used; owned by the worker while it runs
	bufs       []*dpdk.Packet
	order      []slot // sort scratch for write
	epoch      int64  // Unix ns at Start, to extend 48-bit timestamps

	// loop counts the poll loop's passes (its utilisation).
	loop dpdk.LoopStats
	// Counters, written by the worker, read by Status.
	_         [64]byte
	received  atomic.Uint64
	captured  atomic.Uint64
	bytes     atomic.Uint64
	arenaFull atomic.Uint64
	alive     atomic.Bool
	_         [64]byte
	err       atomic.Pointer[string]
}

type slot struct {
	seq uint64
	idx uint32
}

func newWorker(d *Dumper, q, core int) *worker {
	np := d.cfg.NumPkts
	w := &worker{d: d, queue: q, core: core,
		arena: make([]byte, np*d.cfg.SnapLen),
		lens:  make([]uint16, np),
		wire:  make([]uint32, np),
		bufs:  make([]*dpdk.Packet, d.cfg.Burst),
		order: make([]slot, 0, np)}
	// Transparent huge pages where the kernel has them: the capture
	// writes the arena end to end, and on 4 KiB pages each 4 KiB of it
	// costs the copies' stores a TLB miss. On net_null with 64-byte
	// slots ReadSlots took 1.6-2.5 ns a packet less in three runs of
	// dpdk/eal BenchmarkReadSlotsParts (pages=THP against pages=4KiB),
	// though BenchmarkVsTestpmd's ratio showed no change beyond its
	// noise. Without them the arena is on small pages as before.
	_ = hugemem.Advise(w.arena)
	// Touch every page now: a fresh arena is mapped lazily, and the
	// first write to each page would otherwise fault on the capture path.
	for i := 0; i < len(w.arena); i += 4096 {
		w.arena[i] = 1
	}
	for i := 0; i < len(w.lens); i += 4096 / 2 {
		w.lens[i] = 1
	}
	for i := 0; i < len(w.wire); i += 4096 / 4 {
		w.wire[i] = 1
	}
	s, ok := d.cfg.Port.(StreamingSlotReader)
	w.track = !ok || !s.StreamsSlots(d.cfg.SnapLen)
	return w
}

func (w *worker) reset(epoch int64) {
	w.n, w.epoch = 0, epoch
	w.seqMax, w.outOfOrder = 0, 0
	w.received.Store(0)
	w.captured.Store(0)
	w.bytes.Store(0)
	w.arenaFull.Store(0)
	w.err.Store(nil)
}

func (w *worker) status() WorkerStatus {
	s := WorkerStatus{Queue: w.queue, Core: w.core, Received: w.received.Load(), Captured: w.captured.Load(),
		Bytes: w.bytes.Load(), ArenaFull: w.arenaFull.Load(), Alive: w.alive.Load(),
		Polls: w.loop.Polls.Load(), BusyPolls: w.loop.Busy.Load()}
	if e := w.err.Load(); e != nil {
		s.Error = *e
	}
	return s
}

// run polls the queue through the shared capture loop until the dumper
// stops, then drains what is left in the queue. It reports on started
// whether it could pin its core.
func (w *worker) run(started chan<- error) {
	w.alive.Store(true)
	defer w.alive.Store(false)
	pinned := make(chan error, 1)
	// An unpinned worker parks in the kernel when its queue is idle, as
	// the capture does, instead of waking every millisecond (a thousand
	// thread wakeups a second, which cost more CPU than the frames between
	// them); Stop wakes it.
	l := &capture.Loop{Port: w.d.cfg.Port, Queue: w.queue, Core: w.core, Burst: len(w.bufs),
		Stop: &w.d.stop, Stats: &w.loop, ParkIdle: true}
	go func() {
		if err := <-pinned; err != nil {
			msg := err.Error()
			w.err.Store(&msg)
			started <- err
			return
		}
		started <- nil
	}()
	if sr, ok := w.d.cfg.Port.(SlotReader); ok {
		l.RunPoll(func(want int) int { return w.readSlots(sr, want) }, pinned)
		return
	}
	l.Run(w.capture, pinned)
}

// SlotReader is a port that copies received frames straight into slots of
// an arena in the call that receives them (the eal driver: from the mbufs,
// one cgo call per burst; afpacket: from the kernel's ring), so a frame is
// copied once, not into a packet buffer and then into the arena. See
// eal.Port.ReadSlots and afpacket.Port.ReadSlots.
type SlotReader interface {
	ReadSlots(q, burst int, arena []byte, stride int, lens []uint16, wire []uint32) (n int, bytes uint64)
}

// StreamingSlotReader is a SlotReader that may write the arena with
// non-temporal stores, past the cache (eal.Port, whose copies of slots of
// a stride that is a multiple of 16 are such stores): StreamsSlots says
// whether it does for slots of stride bytes.
type StreamingSlotReader interface {
	SlotReader
	StreamsSlots(stride int) bool
}

// Both drivers that fill an arena themselves; afpacket copies through the
// cache.
var _ SlotReader = (*afpacket.Port)(nil)

// slotPoll is how many receive bursts one poll of a SlotReader port may
// take while they come back full: one cgo transition per slotPoll bursts
// on a busy queue, per burst on a quiet one.
const slotPoll = 8

// readSlots is one poll of a worker whose port fills the arena itself: up
// to slotPoll bursts of want frames into the next free slots. Once the
// arena is full the frames are received all the same (so the port does not
// count them as its drops) and counted by capture.
func (w *worker) readSlots(sr SlotReader, want int) int {
	i := w.n
	k := min(slotPoll*want, len(w.lens)-i)
	if k == 0 {
		n := w.d.cfg.Port.RxBurst(w.queue, w.bufs[:want])
		if n > 0 {
			w.capture(w.bufs[:n])
			dpdk.FreeBulk(w.bufs[:n])
			clear(w.bufs[:n])
		}
		return n
	}
	snap := w.d.cfg.SnapLen
	n, bytes := sr.ReadSlots(w.queue, want, w.arena[i*snap:(i+k)*snap], snap, w.lens[i:i+k], w.wire[i:i+k])
	if n == 0 {
		return 0
	}
	if w.track {
		for j := i; j < i+n; j++ {
			w.noteSeq(w.seqOf(j))
		}
	}
	w.n += n
	w.received.Add(uint64(n))
	w.captured.Add(uint64(n))
	w.bytes.Add(bytes)
	return n
}

// capture copies a burst into the arena; it is the whole per-packet path.
func (w *worker) capture(pkts []*dpdk.Packet) {
	snap := w.d.cfg.SnapLen
	var got, bytes, full uint64
	for _, p := range pkts {
		if w.n == len(w.lens) {
			full++
			continue
		}
		data := p.Data()
		i := w.n
		c := copy(w.arena[i*snap:(i+1)*snap], data)
		w.lens[i] = uint16(c)
		wl := p.OrigLen()
		w.wire[i] = uint32(wl)
		w.noteSeq(w.seqOf(i))
		w.n++
		got++
		bytes += uint64(wl)
	}
	w.received.Add(uint64(len(pkts)))
	w.captured.Add(got)
	w.bytes.Add(bytes)
	if full > 0 {
		w.arenaFull.Add(full)
	}
}

// Reasons a captured frame is not written.
const (
	malShort   = iota // cut before the UDP header, or a header did not decode
	malNotUDP         // IP but not UDP, or not IP
	malForeign        // UDP to another port than the rewrite port
	malReasons
)

var malNames = [malReasons]string{"short", "not-udp", "foreign-port"}

type malformed [malReasons]uint64

func (m *malformed) add(o *malformed) {
	for i := range m {
		m[i] += o[i]
	}
}

func (m *malformed) byReason() map[string]uint64 {
	var out map[string]uint64
	for i, v := range m {
		if v > 0 {
			if out == nil {
				out = map[string]uint64{}
			}
			out[malNames[i]] = v
		}
	}
	return out
}

// seqOf is the mirror sequence of the copy in slot i: its source MAC (0 for
// a copy too short to hold one, which write counts malformed).
func (w *worker) seqOf(i int) uint64 {
	if w.lens[i] < 12 {
		return 0
	}
	b := w.arena[i*w.d.cfg.SnapLen:]
	return uint64(binary.BigEndian.Uint16(b[6:8]))<<32 | uint64(binary.BigEndian.Uint32(b[8:12]))
}

// noteSeq follows the order of the copies as one with mirror sequence s
// arrives.
func (w *worker) noteSeq(s uint64) {
	if s < w.seqMax {
		w.outOfOrder++
	}
	w.seqMax = max(w.seqMax, s)
}

// write sorts the worker's copies by mirror sequence, restores them and
// writes them to path.
func (w *worker) write(ctx context.Context, path string, mal *malformed) (File, error) {
	f := File{Name: filepath.Base(path), Path: path, Queue: w.queue}
	cfg := &w.d.cfg
	if !w.track {
		w.seqMax, w.outOfOrder = 0, 0
		for i := range w.n {
			w.noteSeq(w.seqOf(i))
		}
	}
	// Copies are nearly always in order (one queue of one injector's
	// mirror); only then is there anything to sort.
	f.OutOfOrder = w.outOfOrder
	w.order = w.order[:0]
	if f.OutOfOrder > 0 {
		for i := range w.n {
			w.order = append(w.order, slot{seq: w.seqOf(i), idx: uint32(i)})
		}
		slices.SortStableFunc(w.order, func(a, b slot) int { return cmp.Compare(a.seq, b.seq) })
	}
	// Direct I/O: the whole arena goes out in one sequential pass, the
	// case O_DIRECT is for, and the page cache's copy of it would be most
	// of what Stop costs.
	opts := pcap.WriterOptions{Format: pcap.FormatPcap, LinkType: pcap.LinkTypeEthernet, SnapLen: cfg.SnapLen,
		Nanosecond: true, DirectIO: true}
	if cfg.Zstd {
		opts.Compress, opts.ZstdLevel = pcap.CompressZstd, cfg.ZstdLevel
	}
	pw, err := pcap.Create(path, opts)
	if err != nil {
		return f, fmt.Errorf("queue %d: %w", w.queue, err)
	}
	for k := range w.n {
		if k&4095 == 0 && ctx.Err() != nil {
			pw.Close()
			return f, fmt.Errorf("queue %d: %w after %d of %d copies", w.queue, ctx.Err(), k, w.n)
		}
		i := k
		if len(w.order) > 0 {
			i = int(w.order[k].idx)
		}
		rec := w.arena[i*cfg.SnapLen : i*cfg.SnapLen+int(w.lens[i])]
		ts48, orig, ok := restoreFast(rec, cfg.RewritePort, int(w.wire[i]))
		if !ok {
			var bad int
			if ts48, orig, bad = restore(rec, cfg.RewritePort, int(w.wire[i])); bad >= 0 {
				mal[bad]++
				continue
			}
		}
		if err := pw.WritePacket(extend48(ts48, w.epoch), rec, orig); err != nil {
			pw.Close()
			return f, fmt.Errorf("queue %d: %w", w.queue, err)
		}
		f.Packets++
	}
	if err := pw.Close(); err != nil {
		return f, fmt.Errorf("queue %d: %w", w.queue, err)
	}
	if fi, err := os.Stat(path); err == nil {
		f.Bytes = fi.Size()
	}
	return f, nil
}

// restore turns a mirrored copy back into the frame the injector mirrored
// (mirror.Restore) and returns its 48-bit mirror timestamp and the frame's
// original length; for a frame that is not a copy, the malformed reason
// (-1 otherwise).
func restore(rec []byte, rewrite uint16, arrived int) (ts48 int64, orig, bad int) {
	var p header.Parsed
	if err := header.DecodeTruncated(rec, &p); err != nil {
		return 0, 0, malShort
	}
	if p.L4Proto != header.IPProtoUDP || (p.L3Proto != header.EtherTypeIPv4 && p.L3Proto != header.EtherTypeIPv6) {
		return 0, 0, malNotUDP
	}
	if p.L4Off+header.UDPHeaderLen > len(rec) {
		return 0, 0, malShort
	}
	if header.UDP(rec[p.L4Off:]).DstPort() != rewrite {
		return 0, 0, malForeign
	}
	m, err := mirror.Restore(rec, &p)
	if err != nil {
		return 0, 0, malShort
	}
	return m.Timestamp, origLen(rec, &p, arrived), -1
}

// restoreFast is restore for the copies nearly every capture holds
// (untagged Ethernet, IPv4 without options or IPv6 without extension
// headers, not a fragment, UDP to the rewrite port), without decoding the
// frame in general: what restore does to such a copy, byte for byte
// (FuzzRestoreFast holds the two paths equal). It returns false, changing
// nothing, for any other frame, which restore then takes.
func restoreFast(rec []byte, rewrite uint16, arrived int) (ts48 int64, orig int, ok bool) {
	const l3 = header.EthernetHeaderLen
	if len(rec) < l3+header.IPv6HeaderLen+header.UDPHeaderLen { // the few shorter copies take the general path
		return 0, 0, false
	}
	var hl, tl int // IP header length, IP packet length
	var ip4 header.IPv4
	var ip6 header.IPv6
	switch binary.BigEndian.Uint16(rec[12:14]) {
	case header.EtherTypeIPv4:
		ip4 = header.IPv4(rec[l3 : l3+header.IPv4MinHeaderLen])
		if ip4[0] != 0x45 || ip4[9] != header.IPProtoUDP || binary.BigEndian.Uint16(ip4[6:8])&0x3fff != 0 {
			return 0, 0, false
		}
		hl, tl = header.IPv4MinHeaderLen, int(binary.BigEndian.Uint16(ip4[2:4]))
		if tl < hl {
			return 0, 0, false
		}
	case header.EtherTypeIPv6:
		ip6 = header.IPv6(rec[l3 : l3+header.IPv6HeaderLen])
		if ip6[0]>>4 != 6 || ip6[6] != header.IPProtoUDP {
			return 0, 0, false
		}
		hl, tl = header.IPv6HeaderLen, header.IPv6HeaderLen+int(binary.BigEndian.Uint16(ip6[4:6]))
	default:
		return 0, 0, false
	}
	u := header.UDP(rec[l3+hl : l3+hl+header.UDPHeaderLen])
	have := len(rec) - l3 // a copy cut short by the snap length is taken as the decoder takes it
	l4len, ul := min(tl, have)-hl, int(u.Length())
	if l4len < header.UDPHeaderLen || ul < header.UDPHeaderLen || ul > l4len && tl <= have || u.DstPort() != rewrite {
		return 0, 0, false
	}
	ts48 = int64(binary.BigEndian.Uint16(rec[0:2]))<<32 | int64(binary.BigEndian.Uint32(rec[2:6]))
	u.SetSrcPort(u.Checksum())
	u.SetDstPort(roce.UDPPort)
	u.SetChecksum(0)
	if ip4 != nil {
		if mirror.EventType(ip4[8]) == mirror.EventECN {
			ip4.SetECN(header.ECNCE)
		}
		ip4.UpdateChecksum()
	} else if mirror.EventType(ip6[7]) == mirror.EventECN {
		ip6.SetECN(header.ECNCE)
	}
	return ts48, max(l3+tl, arrived), true
}

// origLen is the length of the frame the injector mirrored: the IP
// header's length when the copy is complete enough to hold it (the
// injector may have truncated the copy, as a Tofino mirror session does),
// otherwise what arrived.
func origLen(rec []byte, p *header.Parsed, arrived int) int {
	switch p.L3Proto {
	case header.EtherTypeIPv4:
		if n := p.L3Off + int(binary.BigEndian.Uint16(rec[p.L3Off+2:])); n > arrived {
			return n
		}
	case header.EtherTypeIPv6:
		if n := p.L3Off + 40 + int(binary.BigEndian.Uint16(rec[p.L3Off+4:])); n > arrived {
			return n
		}
	}
	return arrived
}

// extend48 turns a 48-bit nanosecond timestamp into Unix nanoseconds: the
// value nearest to ref (the capture's start) with those low 48 bits. A
// capture would have to last 39 hours to be wrong.
func extend48(ts48, ref int64) int64 {
	const wrap = int64(1) << 48
	t := ref&^(wrap-1) | ts48&(wrap-1)
	switch {
	case t-ref > wrap/2:
		t -= wrap
	case ref-t > wrap/2:
		t += wrap
	}
	if t < 0 { // pcap cannot hold times before 1970
		t += wrap
	}
	return t
}
