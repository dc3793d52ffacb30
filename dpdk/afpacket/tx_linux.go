//go:build linux

package afpacket

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rdma-appliance/appliance/dpdk"
)

// txBurstMax is how many messages one sendmmsg carries; longer bursts take
// several calls.
const txBurstMax = 256

// txHdrLen is where frame data starts in a TX ring slot: TPACKET3_HDRLEN
// less the sockaddr_ll, i.e. the aligned tpacket3_hdr.
const txHdrLen = (unix.SizeofTpacket3Hdr + unix.TPACKET_ALIGNMENT - 1) &^ (unix.TPACKET_ALIGNMENT - 1)

// iovec and mmsghdr are struct iovec and struct mmsghdr with addresses as
// uintptr: they point into pool arenas outside the Go heap, which the
// garbage collector must not be shown once a pool is unmapped.
type iovec struct {
	base uintptr
	len  uintptr
}

type msghdr struct {
	name       uintptr
	namelen    uint32
	iov        uintptr
	iovlen     uintptr
	control    uintptr
	controllen uintptr
	flags      int32
}

type mmsghdr struct {
	hdr    msghdr // padded to its alignment, as in C
	msglen uint32
}

// The layouts must be the kernel's.
var _ [unix.SizeofMmsghdr - unsafe.Sizeof(mmsghdr{})]byte
var _ [unsafe.Sizeof(mmsghdr{}) - unix.SizeofMmsghdr]byte
var _ [unix.SizeofIovec - unsafe.Sizeof(iovec{})]byte
var _ [unsafe.Sizeof(iovec{}) - unix.SizeofIovec]byte

// txQueue is one TX socket, bound to the interface with protocol 0 so it
// never receives, and with the qdisc bypassed: frames go straight to the
// driver, as a DPDK TX queue's would, and the kernel's packet taps (tcpdump,
// our own RX sockets) do not see them as outgoing frames.
type txQueue struct {
	fd     int
	mtuLen int // MTU + Ethernet header: longer frames need a VLAN tag
	maxLen int // largest frame accepted: mtuLen + a VLAN tag, or less if the TX slot is smaller

	// guard: see rxQueue.guard.
	guard atomic.Int32

	// TX ring (tx=ring).
	ring    []byte
	base    unsafe.Pointer
	fsize   uintptr // slot size
	fpb     int     // slots per block
	bsize   uintptr
	nframes int
	head    int  // next slot to fill
	unsent  bool // a kick left frames for the kernel to send

	// sendmmsg (tx=mmsg).
	msgs []mmsghdr
	iovs []iovec
}

func newTxQueue(ifindex int, o options, nframes, mtu int) (q *txQueue, err error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, unix.EPERM) {
			return nil, fmt.Errorf("AF_PACKET socket: %w (needs CAP_NET_RAW)", err)
		}
		return nil, fmt.Errorf("AF_PACKET socket: %w", err)
	}
	q = &txQueue{fd: fd, mtuLen: mtu + 14, maxLen: mtu + 14 + 4}
	defer func() {
		if err != nil {
			q.close()
		}
	}()
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1); err != nil {
		return nil, fmt.Errorf("PACKET_QDISC_BYPASS: %w", err)
	}
	// A deep socket buffer lets a whole ring of frames be in flight on a NIC
	// that completes transmits late; SO_SNDBUFFORCE passes wmem_max as root.
	const sndbuf = 4 << 20
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, sndbuf) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, sndbuf)
	}
	if o.tx == TxRing {
		if err := q.setupRing(o, nframes); err != nil {
			return nil, err
		}
		q.maxLen = min(q.maxLen, int(q.fsize)-txHdrLen)
	} else {
		q.msgs = make([]mmsghdr, txBurstMax)
		q.iovs = make([]iovec, txBurstMax)
		for i := range q.msgs {
			q.msgs[i].hdr.iov = uintptr(unsafe.Pointer(&q.iovs[i]))
			q.msgs[i].hdr.iovlen = 1
		}
	}
	sa := unix.SockaddrLinklayer{Ifindex: ifindex}
	if err := unix.Bind(fd, &sa); err != nil {
		return nil, fmt.Errorf("bind: %w", err)
	}
	return q, nil
}

func (q *txQueue) setupRing(o options, nframes int) error {
	if err := unix.SetsockoptInt(q.fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V3); err != nil {
		return fmt.Errorf("PACKET_VERSION: %w", err)
	}
	// Without PACKET_LOSS a malformed slot stops the kernel at it for good
	// (TP_STATUS_WRONG_FORMAT); with it the kernel skips the slot. TxBurst
	// checks lengths first, so the kernel has nothing to refuse anyway.
	if err := unix.SetsockoptInt(q.fd, unix.SOL_PACKET, unix.PACKET_LOSS, 1); err != nil {
		return fmt.Errorf("PACKET_LOSS: %w", err)
	}
	// Blocks of at least 64 KiB and whole pages; V3 TX slots are fixed size.
	fsize := o.frameSize
	bsize := 64 << 10
	for bsize < fsize {
		bsize <<= 1
	}
	fpb := bsize / fsize
	nblocks := max((nframes+fpb-1)/fpb, 1)
	req := unix.TpacketReq3{Block_size: uint32(bsize), Block_nr: uint32(nblocks),
		Frame_size: uint32(fsize), Frame_nr: uint32(fpb * nblocks)}
	if err := unix.SetsockoptTpacketReq3(q.fd, unix.SOL_PACKET, unix.PACKET_TX_RING, &req); err != nil {
		return fmt.Errorf("PACKET_TX_RING %d x %d bytes: %w", nblocks, bsize, err)
	}
	ring, err := unix.Mmap(q.fd, 0, bsize*nblocks, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("mmap tx ring: %w", err)
	}
	q.ring, q.base = ring, unsafe.Pointer(&ring[0])
	q.fsize, q.fpb, q.bsize, q.nframes = uintptr(fsize), fpb, uintptr(bsize), fpb*nblocks
	return nil
}

// slot returns the header of TX ring slot i.
func (q *txQueue) slot(i int) *frameHdr {
	return (*frameHdr)(unsafe.Add(q.base, uintptr(i/q.fpb)*q.bsize+uintptr(i%q.fpb)*q.fsize))
}

func (q *txQueue) next(i int) int {
	if i++; i == q.nframes {
		return 0
	}
	return i
}

func (q *txQueue) prev(i int) int {
	if i == 0 {
		return q.nframes - 1
	}
	return i - 1
}

// frameOK says whether the kernel will take frame b: at least an Ethernet
// header, at most MTU plus header, plus 4 bytes when it carries a VLAN tag.
func (q *txQueue) frameOK(b []byte) bool {
	if len(b) < 14 || len(b) > q.maxLen {
		return false
	}
	if len(b) > q.mtuLen {
		t := uint16(b[12])<<8 | uint16(b[13])
		return t == unix.ETH_P_8021Q || t == unix.ETH_P_8021AD
	}
	return true
}

// TxBurst implements dpdk.Port. It copies the frames out (into the TX ring,
// or into the kernel through sendmmsg) and frees every packet it takes, so
// the caller may reuse nothing it handed over. It never blocks: with the
// ring full, or the socket buffer full, it takes fewer packets and the
// caller keeps the rest. Frames the kernel would refuse (shorter than an
// Ethernet header, longer than the MTU allows) are taken, freed and counted
// as TxErrors. With the TX ring, frames accepted while the socket buffer
// was full go out with the next TxBurst; TxBurst with no packets sends them.
func (p *Port) TxBurst(qi int, pkts []*dpdk.Packet) int {
	if qi < 0 || qi >= len(p.tx) {
		return 0
	}
	q := p.tx[qi]
	if !q.guard.CompareAndSwap(0, 1) {
		return 0
	}
	r := q.burst(pkts)
	if r.taken > 0 {
		dpdk.FreeBulk(pkts[:r.taken])
	}
	c := &p.txc[qi]
	if r.sent > 0 {
		c.TxPackets.Add(uint64(r.sent))
		c.TxBytes.Add(uint64(r.bytes))
	}
	if r.taken > r.sent {
		c.TxErrors.Add(uint64(r.taken - r.sent))
	}
	if r.dropped > 0 {
		// Queued (and counted as sent) by this or an earlier burst, then
		// refused by the kernel.
		c.TxPackets.Add(^uint64(r.dropped - 1))
		c.TxBytes.Add(^uint64(r.droppedBytes - 1))
		c.TxErrors.Add(uint64(r.dropped))
	}
	return r.taken
}

// burst runs the burst under the queue guard, released by defer so that a
// panic cannot leave Close waiting for ever.
func (q *txQueue) burst(pkts []*dpdk.Packet) txResult {
	defer q.guard.Store(0)
	if q.ring != nil {
		return q.burstRing(pkts)
	}
	return q.burstMmsg(pkts)
}

// txResult is what a burst did: packets taken from the caller, how many of
// those went to the kernel and their bytes, and ring slots queued earlier
// that the kernel refused.
type txResult struct {
	taken, sent, bytes    int
	dropped, droppedBytes int
}

// burstRing fills ring slots in order, marks each TP_STATUS_SEND_REQUEST
// and kicks the kernel once, which sends every requested slot in the
// sendto call.
func (q *txQueue) burstRing(pkts []*dpdk.Packet) (r txResult) {
	for _, pkt := range pkts {
		h := q.slot(q.head)
		if atomic.LoadUint32(&h.Status) != unix.TP_STATUS_AVAILABLE {
			break // the kernel still owns the slot: the ring is full
		}
		r.taken++
		data := pkt.Data()
		if !q.frameOK(data) {
			continue
		}
		dst := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(h), txHdrLen)), len(data))
		copy(dst, data)
		h.Len = uint32(len(data))
		h.Snaplen = uint32(len(data))
		h.Next_offset = 0 // the kernel refuses variable-size V3 TX slots
		atomic.StoreUint32(&h.Status, unix.TP_STATUS_SEND_REQUEST)
		q.head = q.next(q.head)
		r.sent++
		r.bytes += len(data)
	}
	if r.sent > 0 || q.unsent {
		r.dropped, r.droppedBytes = q.kick()
	}
	return r
}

// kick asks the kernel to send the requested slots without waiting for
// them. The kernel stops early when the socket buffer is full and still
// reports success, so whether frames are left is read from the last slot.
func (q *txQueue) kick() (dropped, bytes int) {
	_, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(q.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	if e != 0 && !transient(e) {
		return q.dropPending()
	}
	q.unsent = atomic.LoadUint32(&q.slot(q.prev(q.head)).Status) == unix.TP_STATUS_SEND_REQUEST
	return 0, 0
}

// dropPending takes back the slots the kernel refused for good (the link is
// down, the interface gone). The kernel sends slots strictly in order and
// stops at the first it cannot send, so they are the run of requested slots
// that ends before head, and the kernel's own position is the first of
// them: rewinding head there keeps the two in step. (When every slot is
// pending the run is the whole ring and head is already the oldest.)
func (q *txQueue) dropPending() (n, bytes int) {
	i := q.prev(q.head)
	for n < q.nframes && atomic.LoadUint32(&q.slot(i).Status) == unix.TP_STATUS_SEND_REQUEST {
		h := q.slot(i)
		bytes += int(h.Len)
		atomic.StoreUint32(&h.Status, unix.TP_STATUS_AVAILABLE)
		n++
		i = q.prev(i)
	}
	q.head = q.next(i)
	q.unsent = false
	return n, bytes
}

// burstMmsg sends with sendmmsg, one call per txBurstMax packets. It returns
// the packets taken, how many of them the kernel accepted and their bytes.
func (q *txQueue) burstMmsg(pkts []*dpdk.Packet) (r txResult) {
	n := 0
	defer func() { r.taken = n }()
	for n < len(pkts) {
		m := 0
		for m < len(q.msgs) && n+m < len(pkts) {
			data := pkts[n+m].Data()
			if !q.frameOK(data) {
				break
			}
			q.iovs[m] = iovec{base: uintptr(unsafe.Pointer(&data[0])), len: uintptr(len(data))}
			m++
		}
		if m == 0 {
			n++ // pkts[n] would be refused: take and drop it
			continue
		}
		k, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(q.fd), uintptr(unsafe.Pointer(&q.msgs[0])), uintptr(m), unix.MSG_DONTWAIT, 0, 0)
		if e != 0 {
			if transient(e) {
				break // the caller keeps pkts[n:]
			}
			n++ // the kernel refused pkts[n]; take it as an error
			continue
		}
		for _, pkt := range pkts[n : n+int(k)] {
			r.bytes += pkt.Len()
		}
		n += int(k)
		r.sent += int(k)
		// When k < m the kernel lost the error of pkts[n]; the next call
		// starts there and reports it.
	}
	return r
}

func (q *txQueue) close() error {
	var errs []error
	if q.ring != nil {
		errs = append(errs, unix.Munmap(q.ring))
		q.ring, q.base = nil, nil
	}
	if q.fd >= 0 {
		errs = append(errs, unix.Close(q.fd))
		q.fd = -1
	}
	return errors.Join(errs...)
}
