package dpdk

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/bpf"
)

// Port is a poll-mode packet port. RxBurst and TxBurst never block and never
// allocate; a queue index out of range returns 0.
type Port interface {
	// Info describes the port.
	Info() PortInfo
	// RxBurst receives up to len(pkts) packets from queue q into pkts and
	// returns how many it stored; the caller owns them.
	RxBurst(q int, pkts []*Packet) int
	// TxBurst transmits packets on queue q and returns how many it took; it
	// owns those (pkts[:n]) and the caller keeps pkts[n:].
	TxBurst(q int, pkts []*Packet) int
	// Stats returns the port counters summed over queues.
	Stats() Stats
	// Close stops the port and releases what it holds.
	Close() error
}

// PortInfo describes a port.
type PortInfo struct {
	Name      string // as opened, e.g. "ring:lab0.a"
	Driver    string // "ring", "afpacket", "eal"
	MAC       [6]byte
	MTU       int
	RxQueues  int
	TxQueues  int
	SpeedMbps int // link speed when known, 0 otherwise
	NUMANode  int // -1 when unknown
	IfIndex   int // kernel interface index, 0 when not a kernel device
	// Filtered is set when the driver attached Config.Filter: the frames
	// the port delivers have passed it.
	Filtered bool
}

// Waiter is implemented by ports that can sleep until a queue has packets
// (afpacket parks in the kernel's poller), so a service that is not pinned
// to a dedicated core can idle without spinning.
type Waiter interface {
	// Wait blocks until queue q has packets, the timeout passes (false) or
	// the port closes (an error).
	Wait(q int, timeout time.Duration) (bool, error)
}

// Waker is implemented by Waiters whose Wait can be ended early from
// another goroutine, so a capture loop may sleep without a timeout (no
// timer wakes an idle process) and still see its stop flag at once.
type Waker interface {
	// Wake ends a Wait in progress on queue q (it returns false), or
	// the next one if none is.
	Wake(q int)
}

var portIDs atomic.Uint32

// NewPortID hands out process-wide port ids for Packet.Port, so packets
// from ports of different drivers never carry the same id. DPDK's own port
// ids (0..RTE_MAX_ETHPORTS) stay below the first id handed out here.
func NewPortID() uint16 { return uint16(1024 + portIDs.Add(1)%(65536-1024)) }

// Stats are port counters with DPDK's meaning: Dropped counts packets the port
// received but could not deliver (imissed, ring full, no buffer), Errors counts
// packets discarded as bad, TxErrors counts packets the port took but failed to
// send.
type Stats struct {
	RxPackets uint64 `json:"rx_packets"`
	RxBytes   uint64 `json:"rx_bytes"`
	TxPackets uint64 `json:"tx_packets"`
	TxBytes   uint64 `json:"tx_bytes"`
	Dropped   uint64 `json:"rx_dropped"`
	RxNoBuf   uint64 `json:"rx_nombuf"`
	Errors    uint64 `json:"rx_errors"`
	TxErrors  uint64 `json:"tx_errors"`
}

// Add accumulates o into s.
func (s *Stats) Add(o Stats) {
	s.RxPackets += o.RxPackets
	s.RxBytes += o.RxBytes
	s.TxPackets += o.TxPackets
	s.TxBytes += o.TxBytes
	s.Dropped += o.Dropped
	s.RxNoBuf += o.RxNoBuf
	s.Errors += o.Errors
	s.TxErrors += o.TxErrors
}

// Sub is s minus an earlier snapshot o: the counts since o was taken.
func (s Stats) Sub(o Stats) Stats {
	return Stats{RxPackets: s.RxPackets - o.RxPackets, RxBytes: s.RxBytes - o.RxBytes,
		TxPackets: s.TxPackets - o.TxPackets, TxBytes: s.TxBytes - o.TxBytes, Dropped: s.Dropped - o.Dropped,
		RxNoBuf: s.RxNoBuf - o.RxNoBuf, Errors: s.Errors - o.Errors, TxErrors: s.TxErrors - o.TxErrors}
}

// QueueCounters are the counters of one queue, written by the queue's worker
// and read by anyone. Each sits on its own cache lines so that workers of
// different queues do not share one.
type QueueCounters struct {
	_         [64]byte
	RxPackets atomic.Uint64
	RxBytes   atomic.Uint64
	TxPackets atomic.Uint64
	TxBytes   atomic.Uint64
	Dropped   atomic.Uint64
	RxNoBuf   atomic.Uint64
	Errors    atomic.Uint64
	TxErrors  atomic.Uint64
	_         [64]byte
}

// Snapshot reads the counters.
func (c *QueueCounters) Snapshot() Stats {
	return Stats{RxPackets: c.RxPackets.Load(), RxBytes: c.RxBytes.Load(), TxPackets: c.TxPackets.Load(),
		TxBytes: c.TxBytes.Load(), Dropped: c.Dropped.Load(), RxNoBuf: c.RxNoBuf.Load(),
		Errors: c.Errors.Load(), TxErrors: c.TxErrors.Load()}
}

// SumCounters adds the snapshots of several queues.
func SumCounters(qs []QueueCounters) Stats {
	var s Stats
	for i := range qs {
		s.Add(qs[i].Snapshot())
	}
	return s
}

// Config is what every driver needs to open a port.
type Config struct {
	// Pool supplies receive buffers. Required by drivers that copy into
	// buffers (afpacket, eal); the ring driver passes packets through.
	Pool *Pool
	// RxQueues and TxQueues default to 1.
	RxQueues int
	TxQueues int
	// RingSize is the descriptor ring size per queue (rounded up to a power of
	// two); 0 means the driver default.
	RingSize int
	// Promiscuous asks kernel-backed drivers to receive every frame.
	Promiscuous bool
	// Options are driver-specific key=value settings from the port string.
	Options map[string]string
	// Filter is a classic BPF program (as dpdk/filter compiles for the
	// kernel) that drivers able to filter in the kernel attach to their
	// receive queues, so rejected frames are never copied; such a driver
	// sets PortInfo.Filtered. Other drivers ignore it, and the caller
	// filters in user space.
	Filter []bpf.RawInstruction
}

func (c Config) withDefaults() Config {
	if c.RxQueues <= 0 {
		c.RxQueues = 1
	}
	if c.TxQueues <= 0 {
		c.TxQueues = 1
	}
	return c
}

// Driver opens ports of one kind.
type Driver interface {
	// Open opens the device named dev (the part of the port string after
	// "driver:" and before any ",key=value" options).
	Open(dev string, cfg Config) (Port, error)
}

// ErrNoDriver is returned for a port string whose driver is not registered,
// for example "eal:..." in a build without the dpdk tag.
var ErrNoDriver = errors.New("dpdk: no such driver")

// ErrNoDevice is returned by drivers when the named device does not exist.
var ErrNoDevice = errors.New("dpdk: no such device")

var (
	driversMu sync.RWMutex
	drivers   = map[string]Driver{}
)

// RegisterDriver makes a driver available to Open. Drivers call it from init.
func RegisterDriver(name string, d Driver) {
	driversMu.Lock()
	defer driversMu.Unlock()
	if _, dup := drivers[name]; dup {
		panic("dpdk: driver registered twice: " + name)
	}
	drivers[name] = d
}

// Drivers lists the registered driver names.
func Drivers() []string {
	driversMu.RLock()
	defer driversMu.RUnlock()
	names := make([]string, 0, len(drivers))
	for n := range drivers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ParsePortString splits "driver:device,key=value,..." into its parts.
func ParsePortString(s string) (driver, dev string, opts map[string]string, err error) {
	driver, rest, ok := strings.Cut(s, ":")
	if !ok || driver == "" || rest == "" {
		return "", "", nil, fmt.Errorf("dpdk: port %q: want driver:device[,key=value...]", s)
	}
	parts := strings.Split(rest, ",")
	dev = parts[0]
	for _, kv := range parts[1:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return "", "", nil, fmt.Errorf("dpdk: port %q: option %q is not key=value", s, kv)
		}
		if opts == nil {
			opts = map[string]string{}
		}
		opts[k] = v
	}
	return driver, dev, opts, nil
}

// Open opens a port from a string "driver:device[,key=value...]".
func Open(s string, cfg Config) (Port, error) {
	driver, dev, opts, err := ParsePortString(s)
	if err != nil {
		return nil, err
	}
	driversMu.RLock()
	d := drivers[driver]
	driversMu.RUnlock()
	if d == nil {
		return nil, fmt.Errorf("%w %q (have %s)", ErrNoDriver, driver, strings.Join(Drivers(), ", "))
	}
	if cfg.Options == nil {
		cfg.Options = opts
	} else {
		for k, v := range opts {
			cfg.Options[k] = v
		}
	}
	p, err := d.Open(dev, cfg.withDefaults())
	if err != nil {
		return nil, fmt.Errorf("dpdk: open %s: %w", s, err)
	}
	return p, nil
}

// Frame is a received frame seen where the driver keeps it (a kernel
// ring), valid only during the FrameReader's callback.
type Frame struct {
	// Data is the frame as the driver holds it: without the VLAN tag that
	// VLAN carries, when VLAN is not 0.
	Data []byte
	// VLAN is the outer tag the kernel took out of the frame, TPID<<16 |
	// TCI, or 0; the frame on the wire had it after the MAC addresses.
	VLAN uint32
	// Timestamp is the receive time in Unix nanoseconds; HWTimestamp says
	// the NIC stamped it.
	Timestamp   int64
	HWTimestamp bool
	// WireLen is the frame's length on the wire, tag included.
	WireLen int
}

// FrameReader is implemented by ports that can show received frames in
// place, without copying them into packet buffers: for a capture loop that
// only writes frames out, that copy is most of its work.
type FrameReader interface {
	// ReadFrames calls fn for up to max frames of receive queue q, in
	// order, and returns how many it passed; like RxBurst it never blocks
	// and counts the frames as received. fn must not keep f.Data.
	ReadFrames(q, max int, fn func(f *Frame)) int
}
