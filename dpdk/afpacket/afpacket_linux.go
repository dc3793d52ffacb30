//go:build linux

package afpacket

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rdma-appliance/appliance/dpdk"
)

// ErrClosed is returned by Wait on a closed port.
var ErrClosed = errors.New("afpacket: port closed")

// Port is an AF_PACKET port: one socket and RX ring per RX queue, one socket
// (and TX ring) per TX queue, all bound to one interface.
type Port struct {
	info dpdk.PortInfo
	id   uint16
	pool *dpdk.Pool

	rx  []*rxQueue
	tx  []*txQueue
	rxc []dpdk.QueueCounters
	txc []dpdk.QueueCounters

	closed atomic.Bool
	// hwtsErr says why hwtstamp=1 got no hardware timestamps.
	hwtsErr error

	// mu orders Stats (which reads the sockets' kernel counters) against
	// Close (which closes the sockets); the data path never takes it.
	mu       sync.Mutex
	released bool
}

var (
	_ dpdk.Port        = (*Port)(nil)
	_ dpdk.Waiter      = (*Port)(nil)
	_ dpdk.FrameReader = (*Port)(nil)
	_ dpdk.Waker       = (*Port)(nil)
)

// KernelStats are the kernel's counters for one RX socket (PACKET_STATISTICS
// with tpacket_stats_v3), accumulated since the port opened: the kernel
// resets them on every read.
type KernelStats struct {
	Packets uint64 // frames the socket saw, dropped ones included
	Drops   uint64 // frames dropped because the ring was full
	FreezeQ uint64 // times the ring froze for want of a free block
}

type driver struct{}

func (driver) Open(dev string, cfg dpdk.Config) (dpdk.Port, error) {
	p, err := Open(dev, cfg)
	if err != nil {
		return nil, err
	}
	return p, nil
}

func init() { dpdk.RegisterDriver("afpacket", driver{}) }

// Open opens interface ifname with cfg; cfg.Options holds the port-string
// options (see the package documentation). The sockets are created in the
// network namespace of the calling thread and stay there: to open a port in
// another namespace, lock the goroutine to its thread and setns around Open.
func Open(ifname string, cfg dpdk.Config) (*Port, error) {
	if cfg.Pool == nil {
		return nil, fmt.Errorf("afpacket: %s: Config.Pool is required", ifname)
	}
	o, err := parseOptions(cfg.Options)
	if err != nil {
		return nil, err
	}
	nrx, ntx := max(cfg.RxQueues, 1), max(cfg.TxQueues, 1)
	if nrx > 1<<10 || ntx > 1<<10 {
		return nil, fmt.Errorf("afpacket: %s: %d RX / %d TX queues is too many", ifname, nrx, ntx)
	}
	txFrames := DefaultTxFrames
	if cfg.RingSize > 0 {
		txFrames = 1
		for txFrames < cfg.RingSize {
			txFrames <<= 1
		}
	}

	p := &Port{id: dpdk.NewPortID(), pool: cfg.Pool,
		rxc: make([]dpdk.QueueCounters, nrx), txc: make([]dpdk.QueueCounters, ntx)}
	ok := false
	defer func() {
		if !ok {
			p.closed.Store(true)
			p.release()
		}
	}()

	// The first RX socket doubles as the handle for the interface ioctls, so
	// everything about the interface is read in the namespace of the sockets.
	q0, err := newRxQueue(o, cfg.Filter)
	if err != nil {
		return nil, fmt.Errorf("afpacket: %s: %w", ifname, err)
	}
	q0.closed = &p.closed
	p.rx = append(p.rx, q0)
	link, err := readLink(q0.fd, ifname)
	if err != nil {
		return nil, err
	}
	for len(p.rx) < nrx {
		q, err := newRxQueue(o, cfg.Filter)
		if err != nil {
			return nil, fmt.Errorf("afpacket: %s: %w", ifname, err)
		}
		q.closed = &p.closed
		p.rx = append(p.rx, q)
	}
	for i, q := range p.rx {
		if err := q.bind(link.index); err != nil {
			return nil, fmt.Errorf("afpacket: %s: rx queue %d: %w", ifname, i, err)
		}
	}
	if nrx > 1 {
		if err := joinFanout(p.rx, o.fanout); err != nil {
			if link.flags&unix.IFF_UP == 0 {
				return nil, fmt.Errorf("afpacket: %s: fanout over %d queues needs the interface up: %w", ifname, nrx, err)
			}
			return nil, fmt.Errorf("afpacket: %s: fanout: %w", ifname, err)
		}
	}
	if o.hwtstamp {
		// The NIC stamps received frames only once asked to, as tcpdump's
		// -j adapter_unsynced asks: every frame, in its own clock. A device
		// without the feature (veth) keeps the kernel's stamps.
		hw := unix.HwTstampConfig{Rx_filter: unix.HWTSTAMP_FILTER_ALL}
		if err := unix.IoctlSetHwTstamp(q0.fd, ifname, &hw); err != nil {
			p.hwtsErr = fmt.Errorf("afpacket: %s: hardware timestamps: %w", ifname, err)
		}
	}
	if cfg.Promiscuous {
		// Membership belongs to the socket and the kernel counts it, so one
		// socket is enough and closing it drops promiscuous mode again.
		mreq := unix.PacketMreq{Ifindex: int32(link.index), Type: unix.PACKET_MR_PROMISC}
		if err := unix.SetsockoptPacketMreq(q0.fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq); err != nil {
			return nil, fmt.Errorf("afpacket: %s: promiscuous mode: %w", ifname, err)
		}
	}
	for len(p.tx) < ntx {
		q, err := newTxQueue(link.index, o, txFrames, link.mtu)
		if err != nil {
			return nil, fmt.Errorf("afpacket: %s: tx queue %d: %w", ifname, len(p.tx), err)
		}
		p.tx = append(p.tx, q)
	}
	p.info = dpdk.PortInfo{Name: "afpacket:" + ifname, Driver: "afpacket", MAC: link.mac, MTU: link.mtu,
		RxQueues: nrx, TxQueues: ntx, IfIndex: link.index, NUMANode: -1, Filtered: len(cfg.Filter) > 0}
	p.info.SpeedMbps, p.info.NUMANode = sysfsInfo(ifname, link)
	ok = true
	return p, nil
}

// HWTimestampErr is why the port, opened with hwtstamp=1, could not turn
// on the NIC's receive timestamps (nil when it did or was not asked to):
// frames then carry the kernel's.
func (p *Port) HWTimestampErr() error { return p.hwtsErr }

// ID is the port id stamped into received packets (Packet.Port).
func (p *Port) ID() uint16 { return p.id }

// Info implements dpdk.Port.
func (p *Port) Info() dpdk.PortInfo { return p.info }

// Stats implements dpdk.Port. Dropped is the kernel's count of frames it
// could not put in a full ring (tp_drops); RxNoBuf counts frames the driver
// read but dropped for want of a pool buffer; Errors counts frames too large
// for a pool buffer.
func (p *Port) Stats() dpdk.Stats {
	p.mu.Lock()
	if !p.released {
		for i, q := range p.rx {
			q.harvest(&p.rxc[i])
		}
	}
	p.mu.Unlock()
	s := dpdk.SumCounters(p.rxc)
	s.Add(dpdk.SumCounters(p.txc))
	return s
}

// KernelStats returns the kernel's counters of RX queue q.
func (p *Port) KernelStats(q int) KernelStats {
	if q < 0 || q >= len(p.rx) {
		return KernelStats{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.rx[q]
	if !p.released {
		r.harvest(&p.rxc[q])
	}
	return KernelStats{Packets: r.kpackets.Load(), Drops: r.kdrops.Load(), FreezeQ: r.kfreeze.Load()}
}

// Wait sleeps until RX queue q has frames to read, the timeout passes or the
// port closes, and reports whether frames are ready; a negative timeout
// waits without limit, a zero one only checks. It is for services that would
// rather sleep than spin when idle. The kernel wakes the socket when it hands
// over a block, which for a partly filled block is after the retire
// timeout: that is how late Wait may wake for a lone frame. Like RxBurst it
// must not run concurrently with another call on the same queue.
//
// The goroutine parks in the Go runtime's network poller rather than in a
// poll(2) system call: a thread blocked in a system call makes the
// runtime's sysmon thread poll every 20 us to hand its P to others, which
// in a capture loop that sleeps often cost more CPU than the capture.
// Setting a read deadline costs the poller a wakeup too, so a deadline set
// by an earlier Wait is kept while it falls within the timeout: Wait may
// then report false before the full timeout, as a spurious wakeup.
func (p *Port) Wait(q int, timeout time.Duration) (bool, error) {
	if q < 0 || q >= len(p.rx) {
		return false, fmt.Errorf("afpacket: %s: no rx queue %d", p.info.Name, q)
	}
	r := p.rx[q]
	if !r.guard.CompareAndSwap(0, 1) {
		return false, ErrClosed
	}
	defer r.guard.Store(0)
	if r.available(1) > 0 {
		return true, nil
	}
	if timeout == 0 {
		return false, nil
	}
	if err := r.setDeadline(timeout); err != nil {
		return false, fmt.Errorf("afpacket: %s: %w", p.info.Name, err)
	}
	if r.woken.Load() {
		// Woken while the deadline was being set, which may have undone
		// the Wake's.
		return false, nil
	}
	r.ready = false
	err := r.raw.Read(r.waitFn)
	switch {
	case p.closed.Load():
		return false, ErrClosed
	case r.ready:
		return true, nil
	case err == nil || errors.Is(err, os.ErrDeadlineExceeded):
		return false, nil
	}
	return false, fmt.Errorf("afpacket: %s: %w", p.info.Name, err)
}

// Wake implements dpdk.Waker: a read deadline in the past ends the Wait
// in progress on queue q, which the next Wait replaces.
func (p *Port) Wake(q int) {
	if q < 0 || q >= len(p.rx) || p.closed.Load() {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.released {
		p.rx[q].woken.Store(true)
		_ = p.rx[q].file.SetReadDeadline(time.Unix(1, 0))
	}
}

// Close implements dpdk.Port: it waits for bursts in progress to finish,
// then unmaps the rings and closes the sockets. Bursts after Close return 0.
// Closing twice is harmless.
func (p *Port) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	// A deadline in the past wakes a Wait in progress, which then sees
	// closed and lets go of its queue.
	for _, q := range p.rx {
		_ = q.file.SetReadDeadline(time.Unix(1, 0))
	}
	return p.release()
}

// release takes every queue's guard for good, so no burst can run on memory
// it unmaps, then frees the kernel resources.
func (p *Port) release() error {
	for _, q := range p.rx {
		lockForever(&q.guard)
	}
	for _, q := range p.tx {
		lockForever(&q.guard)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.released {
		return nil
	}
	p.released = true
	var errs []error
	for i, q := range p.rx {
		if q.fd >= 0 {
			q.harvest(&p.rxc[i])
		}
		errs = append(errs, q.close())
	}
	for _, q := range p.tx {
		errs = append(errs, q.close())
	}
	return errors.Join(errs...)
}

// lockForever takes a queue guard (0 idle, 1 busy) and leaves it at 2,
// closed, waiting for a burst in progress to end.
func lockForever(g *atomic.Int32) {
	for !g.CompareAndSwap(0, 2) {
		if g.Load() == 2 {
			return
		}
		runtime.Gosched()
	}
}

// link is what the interface ioctls tell.
type link struct {
	index int
	mtu   int
	flags uint16
	mac   [6]byte
}

func readLink(fd int, name string) (link, error) {
	var l link
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return l, fmt.Errorf("afpacket: interface name %q: %w", name, err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFINDEX, ifr); err != nil {
		if err == unix.ENODEV {
			return l, fmt.Errorf("afpacket: interface %q: %w", name, dpdk.ErrNoDevice)
		}
		return l, fmt.Errorf("afpacket: interface %q: %w", name, err)
	}
	l.index = int(ifr.Uint32())
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFMTU, ifr); err != nil {
		return l, fmt.Errorf("afpacket: interface %q: mtu: %w", name, err)
	}
	l.mtu = int(ifr.Uint32())
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return l, fmt.Errorf("afpacket: interface %q: flags: %w", name, err)
	}
	l.flags = ifr.Uint16()
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFHWADDR, ifr); err != nil {
		return l, fmt.Errorf("afpacket: interface %q: address: %w", name, err)
	}
	// struct ifreq is the 16-byte name then the union; SIOCGIFHWADDR fills
	// a struct sockaddr whose sa_data starts 2 bytes in.
	raw := (*[16 + 8]byte)(unsafe.Pointer(ifr))
	copy(l.mac[:], raw[16+2:])
	return l, nil
}

// sysfsInfo reads link speed and NUMA node from sysfs. /sys shows the
// devices of the namespace that mounted it, which need not be the
// namespace of our sockets, so the values count only when the device there
// has our ifindex and address.
func sysfsInfo(name string, l link) (speed, numa int) {
	numa = -1
	dir := "/sys/class/net/" + name + "/"
	read := func(f string) string {
		b, err := os.ReadFile(dir + f)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	mac := fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", l.mac[0], l.mac[1], l.mac[2], l.mac[3], l.mac[4], l.mac[5])
	if read("ifindex") != strconv.Itoa(l.index) || read("address") != mac {
		return 0, -1
	}
	if s, err := strconv.Atoi(read("speed")); err == nil && s > 0 {
		speed = s
	}
	if n, err := strconv.Atoi(read("device/numa_node")); err == nil && n >= 0 {
		numa = n
	}
	return speed, numa
}

// htons converts to network byte order, which sockaddr_ll wants.
func htons(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}

// transient reports whether a send error means "later" rather than "never".
func transient(e unix.Errno) bool {
	switch e {
	case unix.EAGAIN, unix.ENOBUFS, unix.EINTR, unix.ENOMEM:
		return true
	}
	return false
}
