//go:build linux

package afpacket

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/rdma-appliance/appliance/dpdk"
)

// tpFtReqFillRxhash is TP_FT_REQ_FILL_RXHASH: the kernel writes the flow
// hash into each frame header, which RxBurst passes on as Packet.Hash. It is
// free where the NIC supplies the hash, but on veth and NICs without RSS
// the kernel runs its flow dissector for it on every frame, so it is asked
// for only with rxhash=1.
const tpFtReqFillRxhash = 0x1

// blockDesc is a view of the head of a TPACKET_V3 block: struct
// tpacket_block_desc with the struct tpacket_hdr_v1 it holds.
type blockDesc struct {
	version       uint32
	offsetToPriv  uint32
	status        uint32 // TP_STATUS_KERNEL or TP_STATUS_USER (| TP_STATUS_BLK_TMO ...)
	numPkts       uint32
	offsetToFirst uint32
	blkLen        uint32
	seqNum        uint64
	tsFirst       [2]uint32
	tsLast        [2]uint32
}

// frameHdr is a view of struct tpacket3_hdr.
type frameHdr = unix.Tpacket3Hdr

// rxQueue is one RX socket and its ring. The kernel fills blocks in ring
// order and hands each over by setting TP_STATUS_USER in its status; the
// queue reads them in the same order and hands each back with
// TP_STATUS_KERNEL once every frame in it is copied out.
type rxQueue struct {
	// The ring, read by RxBurst.
	ring    []byte
	base    unsafe.Pointer
	bsize   uintptr
	nblocks int
	cur     int     // the block being read, or the next to read when left == 0
	left    int     // frames of block cur not yet read; we own the block while > 0
	frame   uintptr // ring offset of the next frame of block cur

	// guard is 0 when the queue is idle, 1 during a burst or Wait and 2 once
	// closed, so Close never unmaps the ring under a burst.
	guard atomic.Int32

	fd int
	// file owns fd and registers it with the Go runtime's poller, through
	// which Wait sleeps; raw and waitFn are kept so Wait allocates nothing.
	file     *os.File
	raw      syscall.RawConn
	waitFn   func(uintptr) bool
	ready    bool         // set by waitFn
	deadline time.Time    // the read deadline set on file, zero for none
	closed   *atomic.Bool // the port's closed flag, which ends a Wait

	// woken is set by Port.Wake until the next Wait replaces the past
	// deadline Wake set.
	woken atomic.Bool

	// view is the Frame ReadFrames hands out, blk the Block ReadBlocks
	// does, kept so they never allocate.
	view dpdk.Frame
	blk  Block

	// The kernel's counters, accumulated (reading them resets them).
	kpackets, kdrops, kfreeze atomic.Uint64
}

func newRxQueue(o options, filter []bpf.RawInstruction) (q *rxQueue, err error) {
	// Protocol 0: the socket receives nothing until bind names the
	// interface and ETH_P_ALL, so no frame slips into the ring before it
	// is set up, and none of another interface.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, unix.EPERM) {
			return nil, fmt.Errorf("AF_PACKET socket: %w (needs CAP_NET_RAW)", err)
		}
		return nil, fmt.Errorf("AF_PACKET socket: %w", err)
	}
	q = &rxQueue{fd: fd, bsize: uintptr(o.blockSize), nblocks: o.blocks}
	// The socket is non-blocking, so os.NewFile registers it with the
	// runtime poller (edge-triggered epoll); the kernel wakes it each time
	// it hands a block over.
	q.file = os.NewFile(uintptr(fd), "afpacket")
	defer func() {
		if err != nil {
			q.close()
		}
	}()
	if q.raw, err = q.file.SyscallConn(); err != nil {
		return nil, err
	}
	q.waitFn = func(uintptr) bool {
		q.ready = q.available(1) > 0
		return q.ready || (q.closed != nil && q.closed.Load())
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V3); err != nil {
		return nil, fmt.Errorf("PACKET_VERSION: %w", err)
	}
	// The kernel stamps software timestamps in any case, in nanoseconds in a
	// V3 frame; asking for raw hardware ones makes it use the NIC's stamp
	// when the device has one.
	ts := unix.SOF_TIMESTAMPING_SOFTWARE
	if o.hwtstamp {
		ts |= unix.SOF_TIMESTAMPING_RAW_HARDWARE
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_TIMESTAMP, ts); err != nil {
		return nil, fmt.Errorf("PACKET_TIMESTAMP: %w", err)
	}
	// The filter goes on before bind, so no frame it would reject can
	// reach the ring. A snap length alone is what libpcap attaches for
	// one: a filter whose only instruction accepts snaplen bytes, so the
	// kernel copies no more; with a filter, its accepting returns are
	// clamped to the snap length.
	var prog []unix.SockFilter
	for _, ins := range filter {
		sf := unix.SockFilter{Code: ins.Op, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}
		if o.snaplen > 0 && ins.Op == unix.BPF_RET|unix.BPF_K && ins.K > uint32(o.snaplen) {
			sf.K = uint32(o.snaplen)
		}
		prog = append(prog, sf)
	}
	if len(prog) == 0 && o.snaplen > 0 {
		prog = []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: uint32(o.snaplen)}}
	}
	if len(prog) > 0 {
		fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
		if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &fprog); err != nil {
			return nil, fmt.Errorf("attaching the filter (%d instructions): %w", len(prog), err)
		}
	}
	fpb := o.blockSize / o.frameSize
	var features uint32
	if o.rxhash {
		features = tpFtReqFillRxhash
	}
	req := unix.TpacketReq3{
		Block_size:       uint32(o.blockSize),
		Block_nr:         uint32(o.blocks),
		Frame_size:       uint32(o.frameSize),
		Frame_nr:         uint32(fpb * o.blocks),
		Retire_blk_tov:   uint32(o.timeout.Milliseconds()),
		Feature_req_word: features,
	}
	if err := unix.SetsockoptTpacketReq3(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
		return nil, fmt.Errorf("PACKET_RX_RING %d x %d bytes: %w", o.blocks, o.blockSize, err)
	}
	// MAP_POPULATE faults the whole ring in now rather than on the first lap.
	q.ring, err = unix.Mmap(fd, 0, o.blockSize*o.blocks, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("mmap rx ring: %w", err)
	}
	q.base = unsafe.Pointer(&q.ring[0])
	// A capture port should not see the frames the host sends out of the
	// interface, its own TX included. Kernels before 4.20 lack the option;
	// there the TX sockets' qdisc bypass still keeps our own frames out.
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil && err != unix.ENOPROTOOPT {
		return nil, fmt.Errorf("PACKET_IGNORE_OUTGOING: %w", err)
	}
	return q, nil
}

func (q *rxQueue) bind(ifindex int) error {
	sa := unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifindex}
	if err := unix.Bind(q.fd, &sa); err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	return nil
}

// joinFanout puts the queues' sockets in one fanout group. The first socket
// asks the kernel for an unused group id, so two ports (or two processes) on
// one interface never land in each other's group by accident. Defragmenting
// stays off: it would hold back IP fragments, which RoCE never sends anyway.
func joinFanout(qs []*rxQueue, mode string) error {
	var typ int
	switch mode {
	case FanoutHash:
		typ = unix.PACKET_FANOUT_HASH
	case FanoutLB:
		typ = unix.PACKET_FANOUT_LB
	case FanoutCPU:
		typ = unix.PACKET_FANOUT_CPU
	case FanoutQM:
		typ = unix.PACKET_FANOUT_QM
	case FanoutRnd:
		typ = unix.PACKET_FANOUT_RND
	}
	// The group, not each socket, owns the packet hook, so ignoring outgoing
	// frames must be asked of the group too (Linux 6.9+; older kernels
	// refuse the flag and the group sees outgoing frames).
	flags := unix.PACKET_FANOUT_FLAG_IGNORE_OUTGOING
	first := func(flags int) error {
		return unix.SetsockoptInt(qs[0].fd, unix.SOL_PACKET, unix.PACKET_FANOUT,
			(typ|flags|unix.PACKET_FANOUT_FLAG_UNIQUEID)<<16)
	}
	err := first(flags)
	if err == unix.EINVAL {
		flags = 0
		err = first(flags)
	}
	if err != nil {
		return err
	}
	v, err := unix.GetsockoptInt(qs[0].fd, unix.SOL_PACKET, unix.PACKET_FANOUT)
	if err != nil {
		return err
	}
	id := v & 0xffff
	for _, q := range qs[1:] {
		if err := unix.SetsockoptInt(q.fd, unix.SOL_PACKET, unix.PACKET_FANOUT, id|(typ|flags)<<16); err != nil {
			return err
		}
	}
	return nil
}

func (q *rxQueue) block(i int) *blockDesc {
	return (*blockDesc)(unsafe.Add(q.base, uintptr(i)*q.bsize))
}

func (q *rxQueue) nextBlock(i int) int {
	if i++; i == q.nblocks {
		return 0
	}
	return i
}

// available counts the frames that can be read now, stopping once it has
// counted max or more. It reads block status words only: no system call.
func (q *rxQueue) available(max int) int {
	n, i := q.left, q.cur
	if n > 0 {
		i = q.nextBlock(i)
	}
	for n < max {
		b := q.block(i)
		if atomic.LoadUint32(&b.status)&unix.TP_STATUS_USER == 0 {
			break
		}
		n += int(b.numPkts)
		if i = q.nextBlock(i); i == q.cur {
			break
		}
	}
	return n
}

// take starts reading block cur, which available has seen handed over.
func (q *rxQueue) take() {
	for q.left == 0 {
		b := q.block(q.cur)
		q.left = int(b.numPkts)
		q.frame = uintptr(q.cur)*q.bsize + uintptr(b.offsetToFirst)
		if q.left == 0 {
			q.release() // the kernel does not retire empty blocks; be safe if it did
		}
	}
}

// next returns the next frame's header and ring offset, taking the next
// block when the current one is read.
func (q *rxQueue) next() (*frameHdr, uintptr) {
	if q.left == 0 {
		q.take()
	}
	off := q.frame
	h := (*frameHdr)(unsafe.Add(q.base, off))
	q.frame += uintptr(h.Next_offset)
	return h, off
}

// done counts a frame as read: after a block's last, the block goes back
// to the kernel.
func (q *rxQueue) done() {
	if q.left--; q.left == 0 {
		q.release()
	}
}

// vlanTag is the tag the kernel took out of a frame whose status says
// TP_STATUS_VLAN_VALID.
func vlanTag(h *frameHdr) (tpid, tci uint16) {
	tpid = unix.ETH_P_8021Q
	if h.Status&unix.TP_STATUS_VLAN_TPID_VALID != 0 && h.Hv1.Vlan_tpid != 0 {
		tpid = h.Hv1.Vlan_tpid
	}
	return tpid, uint16(h.Hv1.Vlan_tci)
}

// release hands block cur back to the kernel. The atomic store orders our
// reads of the block before the kernel can see it free.
func (q *rxQueue) release() {
	atomic.StoreUint32(&q.block(q.cur).status, unix.TP_STATUS_KERNEL)
	q.cur = q.nextBlock(q.cur)
	q.left = 0
}

// RxBurst implements dpdk.Port. It takes buffers for the whole burst from
// the pool in one GetBulk, copies each frame into one, re-inserting a VLAN
// tag the kernel stripped, and stamps it with the kernel's receive time.
// Frames it has no buffer for are read and dropped (RxNoBuf), so a starved
// pool never stalls the ring; frames larger than a buffer are dropped as
// Errors.
func (p *Port) RxBurst(qi int, pkts []*dpdk.Packet) int {
	if qi < 0 || qi >= len(p.rx) || len(pkts) == 0 {
		return 0
	}
	q := p.rx[qi]
	if !q.guard.CompareAndSwap(0, 1) {
		return 0 // closed (or misused from two goroutines)
	}
	// Deferred, so that even a panic (a bad slice from the caller) cannot
	// leave the guard held and Close waiting for ever.
	defer q.guard.Store(0)
	want := min(q.available(len(pkts)), len(pkts))
	if want == 0 {
		return 0
	}
	got := p.pool.GetBulk(pkts[:want])
	var n, bytes, bad int
	for i := 0; i < want; i++ {
		h, off := q.next()
		if i < got {
			if l := copyFrame(pkts[n], h, off, q); l >= 0 {
				pkt := pkts[n]
				pkt.Timestamp = int64(h.Sec)*1e9 + int64(h.Nsec)
				pkt.Hash = h.Hv1.Rxhash
				pkt.Port = p.id
				pkt.Queue = uint16(qi)
				bytes += l
				n++
			} else {
				bad++
			}
		}
		q.done()
	}
	if n < got {
		// Buffers left over by frames that did not fit.
		p.pool.PutBulk(pkts[n:got])
	}
	c := &p.rxc[qi]
	c.RxPackets.Add(uint64(n))
	c.RxBytes.Add(uint64(bytes))
	if got < want {
		c.RxNoBuf.Add(uint64(want - got))
	}
	if bad > 0 {
		c.Errors.Add(uint64(bad))
	}
	return n
}

// ReadSlots copies received frames on queue qi straight from the ring into
// the slots of a capture arena (slot i is arena[i*stride:(i+1)*stride]),
// each frame's first stride bytes with a VLAN tag the kernel took out put
// back, the bytes copied in lens[i] and its length on the wire in wire[i]:
// one copy per frame and no packet buffer, as the dumper wants them (its
// SlotReader; eal.Port.ReadSlots is the DPDK one). It takes as many frames
// as there are slots in arena, lens and wire, or as the ring holds, and
// returns how many it took and their bytes on the wire. burst is the DPDK
// driver's receive burst and means nothing here. Counters as RxBurst.
func (p *Port) ReadSlots(qi, burst int, arena []byte, stride int, lens []uint16, wire []uint32) (n int, bytes uint64) {
	if qi < 0 || qi >= len(p.rx) || stride <= 0 || stride > 0xffff {
		return 0, 0
	}
	nb := min(len(arena)/stride, len(lens), len(wire))
	if nb == 0 {
		return 0, 0
	}
	q := p.rx[qi]
	if !q.guard.CompareAndSwap(0, 1) {
		return 0, 0
	}
	defer q.guard.Store(0)
	want := min(q.available(nb), nb)
	bad := 0
	for i := 0; i < want; i++ {
		h, off := q.next()
		start := off + uintptr(h.Mac)
		end := start + uintptr(h.Snaplen)
		if end > uintptr(len(q.ring)) {
			bad++ // a corrupt header; never seen, but do not read past the ring
			q.done()
			continue
		}
		src := q.ring[start:end:end]
		dst := arena[n*stride : (n+1)*stride : (n+1)*stride]
		w := int(h.Len)
		if h.Status&unix.TP_STATUS_VLAN_VALID != 0 && len(src) >= 12 {
			w += 4 // the tag putFrame puts back
		}
		c := putFrame(dst, src, h)
		lens[n], wire[n] = uint16(c), uint32(w)
		bytes += uint64(w)
		n++
		q.done()
	}
	c := &p.rxc[qi]
	c.RxPackets.Add(uint64(n))
	c.RxBytes.Add(bytes)
	if bad > 0 {
		c.Errors.Add(uint64(bad))
	}
	return n, bytes
}

// ReadFrames implements dpdk.FrameReader: fn sees each frame in the ring,
// which is handed back to the kernel block by block once read.
func (p *Port) ReadFrames(qi, max int, fn func(f *dpdk.Frame)) int {
	if qi < 0 || qi >= len(p.rx) || max <= 0 {
		return 0
	}
	q := p.rx[qi]
	if !q.guard.CompareAndSwap(0, 1) {
		return 0
	}
	defer q.guard.Store(0)
	want := min(q.available(max), max)
	if want == 0 {
		return 0
	}
	f := &q.view
	var bytes int
	for i := 0; i < want; i++ {
		h, off := q.next()
		if frameAt(q.ring, off, h, f) {
			bytes += f.WireLen
			fn(f)
		}
		q.done()
	}
	c := &p.rxc[qi]
	c.RxPackets.Add(uint64(want))
	c.RxBytes.Add(uint64(bytes))
	return want
}

// Block is the frames of one TPACKET_V3 block, in place in the kernel's
// ring, as ReadBlocks hands them over: Next steps through them. A capture
// loop that writes frames out works on a whole block per call (one pass,
// no callback per frame), as libpcap does.
type Block struct {
	ring  []byte
	base  unsafe.Pointer
	off   uintptr // ring offset of the next frame
	left  int
	bytes int // wire bytes of the frames Next returned
}

// Next fills f with the block's next frame and reports whether there was
// one. f.Data points into the ring: valid until the callback returns.
func (b *Block) Next(f *dpdk.Frame) bool {
	for b.left > 0 {
		b.left--
		off := b.off
		h := (*frameHdr)(unsafe.Add(b.base, off))
		b.off += uintptr(h.Next_offset)
		if !frameAt(b.ring, off, h, f) {
			continue
		}
		b.bytes += f.WireLen
		return true
	}
	return false
}

// frameAt fills f with the frame whose header h is at ring offset off; it
// reports false for a header pointing past the ring (a corrupt header;
// never seen, but the ring must not be read past its end).
func frameAt(ring []byte, off uintptr, h *frameHdr, f *dpdk.Frame) bool {
	start := off + uintptr(h.Mac)
	end := start + uintptr(h.Snaplen)
	if end > uintptr(len(ring)) {
		return false
	}
	f.Data = ring[start:end:end]
	f.VLAN = 0
	f.WireLen = int(h.Len)
	if h.Status&unix.TP_STATUS_VLAN_VALID != 0 {
		tpid, tci := vlanTag(h)
		f.VLAN = uint32(tpid)<<16 | uint32(tci)
		f.WireLen += 4
	}
	f.Timestamp = int64(h.Sec)*1e9 + int64(h.Nsec)
	f.HWTimestamp = h.Status&unix.TP_STATUS_TS_RAW_HARDWARE != 0
	return true
}

// WriteEPB writes the block's next frames as pcapng Enhanced Packet Blocks
// of interface 0 into buf: each frame's first snap bytes, its original
// length and its time in nanoseconds, as a capture file of nanosecond
// resolution wants them. It is the capture's loop over a block without a
// Frame per frame. It stops before the first frame whose record does not
// fit in buf, once used reaches stopAt, before a frame stamped at or after
// until, and before a frame the kernel took a VLAN tag out of (which the
// caller must put back: Next returns it). It returns the frames written,
// the bytes used, their wire bytes and how many carry a hardware time.
// The records are dumper/pcap's (PutEPB), written here because a port
// driver's floor may not import it, as eal's shim writes them in C;
// dumper/capture's TestRecordsPath holds the files to pcap's writer.
func (b *Block) WriteEPB(buf []byte, snap, stopAt int, until int64) (n, used int, wire uint64, hw int) {
	// The block's position in locals: as fields they would be loaded and
	// stored around every record the loop writes.
	left, off, ring := b.left, b.off, b.ring
	out := unsafe.Pointer(unsafe.SliceData(buf))
	for left > 0 && used < stopAt {
		h := (*frameHdr)(unsafe.Add(b.base, off))
		start := off + uintptr(h.Mac)
		end := start + uintptr(h.Snaplen)
		next := off + uintptr(h.Next_offset)
		if end > uintptr(len(ring)) {
			// A corrupt header, never seen: skipped, as Next does.
			left--
			off = next
			continue
		}
		ts := int64(h.Sec)*1e9 + int64(h.Nsec)
		st := h.Status
		if st&unix.TP_STATUS_VLAN_VALID != 0 || ts >= until {
			break
		}
		c := min(int(end-start), snap)
		blen := 32 + (c+3)&^3
		if blen > len(buf)-used {
			break
		}
		// The record through pointers: the checks above bound every
		// access, which the compiler cannot see through slice indexes.
		r := unsafe.Add(out, used)
		hd := (*[28]byte)(r)
		binary.LittleEndian.PutUint32((*[4]byte)(unsafe.Add(r, blen-8))[:], 0) // the padding, before the data overwrites what it covers
		binary.LittleEndian.PutUint64(hd[0:], 6|uint64(blen)<<32)              // Enhanced Packet Block, its length
		binary.LittleEndian.PutUint64(hd[8:], uint64(ts)&^0xffffffff)          // interface 0, time (high word)
		binary.LittleEndian.PutUint64(hd[16:], uint64(ts)&0xffffffff|uint64(c)<<32)
		binary.LittleEndian.PutUint32(hd[24:], max(h.Len, h.Snaplen))
		copy(unsafe.Slice((*byte)(unsafe.Add(r, 28)), c), unsafe.Slice((*byte)(unsafe.Add(b.base, start)), c))
		binary.LittleEndian.PutUint32((*[4]byte)(unsafe.Add(r, blen-4))[:], uint32(blen))
		used += blen
		n++
		wire += uint64(h.Len)
		hw += int(st / unix.TP_STATUS_TS_RAW_HARDWARE) // the top bit
		left--
		off = next
	}
	b.left, b.off = left, off
	b.bytes += int(wire)
	return n, used, wire, hw
}

// Len is how many frames of the block Next has not returned yet.
func (b *Block) Len() int { return b.left }

// ReadBlocks calls fn once per block the kernel has handed over, until it
// has passed max frames or more (whole blocks, so possibly more than max),
// and returns how many frames it passed. Each block goes back to the
// kernel when fn returns: fn must read every frame it wants with Next,
// the others count as read. Like ReadFrames it never blocks.
func (p *Port) ReadBlocks(qi, max int, fn func(b *Block)) int {
	if qi < 0 || qi >= len(p.rx) || max <= 0 {
		return 0
	}
	q := p.rx[qi]
	if !q.guard.CompareAndSwap(0, 1) {
		return 0
	}
	defer q.guard.Store(0)
	n, bytes := 0, 0
	for n < max {
		if q.left == 0 {
			bd := q.block(q.cur)
			if atomic.LoadUint32(&bd.status)&unix.TP_STATUS_USER == 0 {
				break
			}
			if q.left = int(bd.numPkts); q.left == 0 {
				q.release() // the kernel does not retire empty blocks; be safe if it did
				continue
			}
			q.frame = uintptr(q.cur)*q.bsize + uintptr(bd.offsetToFirst)
		}
		// (q.left > 0 here may be the rest of a block an RxBurst or
		// ReadFrames call began.)
		b := &q.blk
		b.ring, b.base, b.off, b.left, b.bytes = q.ring, q.base, q.frame, q.left, 0
		fn(b)
		n += q.left
		bytes += b.bytes
		q.release()
	}
	if n > 0 {
		c := &p.rxc[qi]
		c.RxPackets.Add(uint64(n))
		c.RxBytes.Add(uint64(bytes))
	}
	return n
}

// copyFrame copies the frame with header h (at ring offset off) into pkt and
// returns its length, or -1 when it does not fit in the buffer.
func copyFrame(pkt *dpdk.Packet, h *frameHdr, off uintptr, q *rxQueue) int {
	start := off + uintptr(h.Mac)
	end := start + uintptr(h.Snaplen)
	if end > uintptr(len(q.ring)) {
		return -1 // a corrupt header; never seen, but do not read past the ring
	}
	src := q.ring[start:end]
	dst := pkt.Buffer()
	l := len(src)
	vlan := h.Status&unix.TP_STATUS_VLAN_VALID != 0 && len(src) >= 12
	if vlan {
		l += 4
	}
	if l > len(dst) {
		return -1
	}
	putFrame(dst, src, h)
	_ = pkt.SetLen(l)
	if h.Len > h.Snaplen {
		pkt.WireLen = int(h.Len)
		if vlan {
			pkt.WireLen += 4
		}
	}
	return l
}

// putFrame copies the frame src with header h into dst, as much of it as
// dst holds, and returns the bytes copied. The kernel took the outermost
// VLAN tag out of the frame into the header (skb_vlan_untag runs before
// packet taps); it goes back where it was, after the two MAC addresses, so
// consumers see the wire frame.
func putFrame(dst, src []byte, h *frameHdr) int {
	if h.Status&unix.TP_STATUS_VLAN_VALID == 0 || len(src) < 12 {
		return copy(dst, src)
	}
	tpid, tci := vlanTag(h)
	tag := [4]byte{byte(tpid >> 8), byte(tpid), byte(tci >> 8), byte(tci)}
	c := copy(dst, src[:12])
	c += copy(dst[c:], tag[:])
	return c + copy(dst[c:], src[12:])
}

// setDeadline makes the poller wake a Wait within timeout (never, when
// negative), keeping the current deadline if it already does that.
func (q *rxQueue) setDeadline(timeout time.Duration) error {
	if q.woken.Swap(false) {
		// Wake put the file's deadline in the past: replace it.
		q.deadline = time.Unix(1, 0)
	}
	if timeout < 0 {
		if q.deadline.IsZero() {
			return nil
		}
		q.deadline = time.Time{}
		return q.file.SetReadDeadline(q.deadline)
	}
	now := time.Now()
	limit := now.Add(timeout)
	if !q.deadline.IsZero() && q.deadline.After(now) && !q.deadline.After(limit) {
		return nil
	}
	q.deadline = limit
	return q.file.SetReadDeadline(limit)
}

// harvest adds the kernel's counters, which reading resets, to ours.
func (q *rxQueue) harvest(c *dpdk.QueueCounters) {
	st, err := unix.GetsockoptTpacketStatsV3(q.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	if err != nil {
		return
	}
	q.kpackets.Add(uint64(st.Packets))
	q.kdrops.Add(uint64(st.Drops))
	q.kfreeze.Add(uint64(st.Freeze_q_cnt))
	c.Dropped.Add(uint64(st.Drops))
}

func (q *rxQueue) close() error {
	var errs []error
	if q.ring != nil {
		errs = append(errs, unix.Munmap(q.ring))
		q.ring, q.base = nil, nil
	}
	if q.file != nil {
		errs = append(errs, q.file.Close())
		q.file, q.fd = nil, -1
	}
	return errors.Join(errs...)
}
