// Package dumper is Lumina's dumper: it captures the mirrored copies that
// the event injector sends to one of its mirror ports and, when the test
// stops, writes them as nanosecond pcap files that dumper/trace merges.
//
// A dumper polls every receive queue of one port with its own worker, each
// on its own core when cores are given (the injector's random UDP source
// ports spread the copies over the queues by RSS). A worker copies the
// first snap-len bytes of each copy into a preallocated arena of num-pkts
// slots (Lumina's pkt-dump-conf keys) and does nothing else, so the
// capture path allocates nothing and touches each packet once; when the
// arena is full, further copies are counted and freed. Copies the port
// itself could not deliver (a full receive queue) are in the port's
// dropped counter; the status reports both, because either one makes the
// trace fail its integrity check.
//
// Stop (HTTP, or SIGTERM in the CLI) ends the capture and does the rest
// of Lumina's dumper: each worker's copies are sorted by mirror sequence,
// restored (original UDP source port, destination port 4791, ECN CE where
// the injector marked it, IPv4 checksum; mirror.Restore) and written
// to one pcap per queue, optionally zstd-compressed, each record stamped
// with its 48-bit mirror timestamp extended to Unix nanoseconds. Frames
// that are not mirrored copies (not IP/UDP, another UDP port, cut short)
// are counted by reason and left out; nothing a port delivers can crash a
// worker.
package dumper

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/internal/mirror"
)

// Lumina's pkt-dump-conf defaults.
const (
	DefaultSnapLen = 128
	DefaultNumPkts = 16383
	// MaxSnapLen keeps a slot's length in 16 bits.
	MaxSnapLen = 65535
)

// Config configures a Dumper.
type Config struct {
	// Name names the dumper in logs, files and the trace report.
	Name string
	// Port is the mirror port. The dumper polls its receive queues but
	// does not own it: the caller closes it after Close.
	Port dpdk.Port
	// Queues are the receive queues to capture, one worker each; empty
	// means every queue of the port.
	Queues []int
	// Cores pins worker i to Cores[i]; empty leaves workers unpinned
	// (with a backoff when idle, for machines where the dumper shares
	// cores). Claims, when set, refuses a core another poller holds.
	Cores  []int
	Claims *dpdk.CoreClaims
	// SnapLen bytes of each copy are kept (default 128), in an arena of
	// NumPkts copies per worker (default 16383).
	SnapLen int
	NumPkts int
	// RewritePort is the copies' UDP destination port (Lumina's
	// rewrite-udp-dst-port, default 9741); frames to other ports are not
	// copies and are counted as foreign.
	RewritePort uint16
	// Dir and File name the output: File "dump.pcap" gives
	// Dir/dump-q0.pcap, Dir/dump-q1.pcap, ... (".zst" appended when
	// compressed). File defaults to Name + ".pcap".
	Dir  string
	File string
	// Zstd compresses the files at ZstdLevel (a zstd CLI level, default 1).
	Zstd      bool
	ZstdLevel int
	// Burst is the receive burst size (default 32).
	Burst int
	// Stepped starts no worker goroutines: the caller moves each queue's
	// packets into the arenas with Poll, between its own steps (the Lumina
	// twin on virtual time runs every part of the testbed from one
	// goroutine, so its runs are deterministic). Cores do not apply.
	Stepped bool
	// Now is the wall clock read at Start (the epoch that extends the
	// copies' 48-bit timestamps, the capture's duration); nil means
	// time.Now. A simulation gives its virtual clock.
	Now func() time.Time
}

// Status is the dumper's state and counters.
type Status struct {
	Name    string         `json:"name"`
	State   string         `json:"state"` // idle, capturing, stopped
	Started time.Time      `json:"started,omitzero"`
	Workers []WorkerStatus `json:"workers"`
	// Captured, ArenaFull and PortDropped sum the workers and the port
	// counters since Start.
	Captured    uint64     `json:"captured"`
	ArenaFull   uint64     `json:"arena_full"`
	PortDropped uint64     `json:"port_dropped"`
	Port        dpdk.Stats `json:"port"`
}

// WorkerStatus are one worker's counters.
type WorkerStatus struct {
	Queue     int    `json:"queue"`
	Core      int    `json:"core"` // -1 when not pinned
	Received  uint64 `json:"received"`
	Captured  uint64 `json:"captured"`
	Bytes     uint64 `json:"bytes"`
	ArenaFull uint64 `json:"arena_full"`
	// Polls and BusyPolls count the worker's poll loop passes and those
	// that received something: its utilisation.
	Polls     uint64 `json:"polls"`
	BusyPolls uint64 `json:"busy_polls"`
	Alive     bool   `json:"alive"`
	Error     string `json:"error,omitempty"`
}

// File is one written pcap.
type File struct {
	Name    string `json:"name"` // base name, what GET /v1/files/{name} serves
	Path    string `json:"path"`
	Queue   int    `json:"queue"`
	Packets uint64 `json:"packets"`
	Bytes   int64  `json:"bytes"`
	// OutOfOrder counts copies that reached the worker behind a higher
	// sequence number (the file is sorted regardless).
	OutOfOrder uint64 `json:"out_of_order"`
}

// Result is what Stop wrote and what the capture lost.
type Result struct {
	Name        string            `json:"name"`
	Files       []File            `json:"files"`
	Captured    uint64            `json:"captured"`
	Written     uint64            `json:"written"`
	ArenaFull   uint64            `json:"arena_full"`
	PortDropped uint64            `json:"port_dropped"`
	Malformed   map[string]uint64 `json:"malformed,omitempty"` // by reason
	Duration    time.Duration     `json:"duration_ns"`
}

// Lost is every copy the capture saw or should have seen but did not write.
func (r *Result) Lost() uint64 {
	n := r.ArenaFull + r.PortDropped
	for _, v := range r.Malformed {
		n += v
	}
	return n
}

// Errors callers branch on.
var (
	ErrRunning    = errors.New("dumper: already capturing")
	ErrNotRunning = errors.New("dumper: not capturing")
	ErrClosed     = errors.New("dumper: closed")
)

// Dumper captures one mirror port.
type Dumper struct {
	cfg     Config
	workers []*worker

	mu      sync.Mutex // serialises Start, Stop, Close
	state   atomic.Int32
	started time.Time
	base    dpdk.Stats // port counters at Start
	stop    atomic.Bool
	wg      sync.WaitGroup
	files   []File // of the last Stop
	closed  bool
}

const (
	stateIdle int32 = iota
	stateCapturing
	stateStopped
)

var stateNames = [...]string{"idle", "capturing", "stopped"}

// New validates cfg and allocates every worker's arena.
func New(cfg Config) (*Dumper, error) {
	if cfg.Port == nil {
		return nil, errors.New("dumper: no port")
	}
	if cfg.Name == "" {
		cfg.Name = "dumper"
	}
	if cfg.SnapLen == 0 {
		cfg.SnapLen = DefaultSnapLen
	}
	if cfg.NumPkts == 0 {
		cfg.NumPkts = DefaultNumPkts
	}
	if cfg.RewritePort == 0 {
		cfg.RewritePort = mirror.DefaultRewritePort
	}
	if cfg.Burst <= 0 {
		cfg.Burst = 32
	}
	if cfg.File == "" {
		cfg.File = cfg.Name + ".pcap"
	}
	if cfg.Dir == "" {
		cfg.Dir = "."
	}
	switch {
	case cfg.SnapLen < 64 || cfg.SnapLen > MaxSnapLen:
		return nil, fmt.Errorf("dumper %s: snap-len %d: want 64..%d (the metadata needs the Ethernet, IP and UDP headers)", cfg.Name, cfg.SnapLen, MaxSnapLen)
	case cfg.NumPkts < 1 || cfg.NumPkts > 1<<28:
		return nil, fmt.Errorf("dumper %s: num-pkts %d: want 1..2^28", cfg.Name, cfg.NumPkts)
	case int64(cfg.NumPkts)*int64(cfg.SnapLen) > 1<<34:
		return nil, fmt.Errorf("dumper %s: arena of %d x %d bytes is over 16 GiB per worker", cfg.Name, cfg.NumPkts, cfg.SnapLen)
	case strings.ContainsRune(cfg.File, os.PathSeparator):
		return nil, fmt.Errorf("dumper %s: file %q: a base name, the directory is Dir", cfg.Name, cfg.File)
	}
	info := cfg.Port.Info()
	if len(cfg.Queues) == 0 {
		for q := 0; q < max(info.RxQueues, 1); q++ {
			cfg.Queues = append(cfg.Queues, q)
		}
	}
	seen := map[int]bool{}
	for _, q := range cfg.Queues {
		if q < 0 || q >= max(info.RxQueues, 1) || seen[q] {
			return nil, fmt.Errorf("dumper %s: queue %d: port %s has %d receive queues (each captured once)", cfg.Name, q, info.Name, info.RxQueues)
		}
		seen[q] = true
	}
	if len(cfg.Cores) > 0 && len(cfg.Cores) < len(cfg.Queues) {
		return nil, fmt.Errorf("dumper %s: %d cores for %d queues: one core per queue", cfg.Name, len(cfg.Cores), len(cfg.Queues))
	}
	d := &Dumper{cfg: cfg}
	for i, q := range cfg.Queues {
		core := -1
		if len(cfg.Cores) > 0 {
			core = cfg.Cores[i]
		}
		d.workers = append(d.workers, newWorker(d, q, core))
	}
	return d, nil
}

// Config returns the configuration with defaults applied.
func (d *Dumper) Config() Config { return d.cfg }

// Start begins a capture: the arenas are emptied, the counters zeroed and
// the workers start polling.
func (d *Dumper) Start() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	if d.state.Load() == stateCapturing {
		return ErrRunning
	}
	if d.cfg.Claims != nil {
		for i, w := range d.workers {
			if w.core < 0 {
				continue
			}
			if err := d.cfg.Claims.Claim(w.core, fmt.Sprintf("dumper %s queue %d", d.cfg.Name, w.queue)); err != nil {
				for _, v := range d.workers[:i] {
					if v.core >= 0 {
						d.cfg.Claims.Release(v.core)
					}
				}
				return fmt.Errorf("dumper %s: %w", d.cfg.Name, err)
			}
		}
	}
	d.stop.Store(false)
	d.base = d.cfg.Port.Stats()
	d.started = d.now()
	for _, w := range d.workers {
		w.reset(d.started.UnixNano())
	}
	if d.cfg.Stepped {
		d.state.Store(stateCapturing)
		return nil
	}
	start := make(chan error, len(d.workers))
	for _, w := range d.workers {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			w.run(start)
		}()
	}
	var errs []error
	for range d.workers {
		if err := <-start; err != nil {
			errs = append(errs, err)
		}
	}
	d.state.Store(stateCapturing)
	if len(errs) > 0 {
		_, _ = d.stopLocked(context.Background(), false)
		return fmt.Errorf("dumper %s: %w", d.cfg.Name, errors.Join(errs...))
	}
	return nil
}

// Stop ends the capture, lets the workers drain their queues, and writes
// one pcap per worker. It returns what was written and what was lost.
func (d *Dumper) Stop(ctx context.Context) (*Result, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.state.Load() != stateCapturing {
		return nil, ErrNotRunning
	}
	return d.stopLocked(ctx, true)
}

func (d *Dumper) stopLocked(ctx context.Context, write bool) (*Result, error) {
	d.stop.Store(true)
	if wk, ok := d.cfg.Port.(dpdk.Waker); ok {
		for _, w := range d.workers {
			wk.Wake(w.queue) // a parked worker sees the stop
		}
	}
	d.wg.Wait()
	if d.cfg.Stepped {
		// What the caller's last steps left in the queues, as a worker
		// drains its queue when it stops.
		for d.pollLocked() > 0 {
		}
	}
	d.state.Store(stateStopped)
	if d.cfg.Claims != nil {
		for _, w := range d.workers {
			if w.core >= 0 {
				d.cfg.Claims.Release(w.core)
			}
		}
	}
	st := d.statusLocked()
	res := &Result{Name: d.cfg.Name, Captured: st.Captured, ArenaFull: st.ArenaFull, PortDropped: st.PortDropped,
		Duration: d.now().Sub(d.started)}
	if !write {
		return res, nil
	}
	if err := os.MkdirAll(d.cfg.Dir, 0o755); err != nil {
		return res, fmt.Errorf("dumper %s: %w", d.cfg.Name, err)
	}
	// Workers write in parallel, as they captured: sorting and restoring
	// a full arena is the slow part of a stop.
	files := make([]File, len(d.workers))
	mal := make([]malformed, len(d.workers))
	errs := make([]error, len(d.workers))
	var wg sync.WaitGroup
	for i, w := range d.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			files[i], errs[i] = w.write(ctx, d.filePath(w.queue), &mal[i])
		}()
	}
	wg.Wait()
	var m malformed
	for i := range mal {
		m.add(&mal[i])
		res.Written += files[i].Packets
	}
	res.Files, res.Malformed = files, m.byReason()
	d.files = files
	if err := errors.Join(errs...); err != nil {
		return res, fmt.Errorf("dumper %s: %w", d.cfg.Name, err)
	}
	return res, nil
}

// filePath is the output of the worker on queue q.
func (d *Dumper) filePath(q int) string {
	ext := filepath.Ext(d.cfg.File)
	base := strings.TrimSuffix(d.cfg.File, ext)
	if ext == "" {
		ext = ".pcap"
	}
	name := fmt.Sprintf("%s-q%d%s", base, q, ext)
	if d.cfg.Zstd {
		name += ".zst"
	}
	return filepath.Join(d.cfg.Dir, name)
}

// Files lists the files of the last Stop.
func (d *Dumper) Files() []File {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]File(nil), d.files...)
}

// Status reads the state and counters; it is safe while capturing.
func (d *Dumper) Status() Status {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.statusLocked()
}

func (d *Dumper) statusLocked() Status {
	st := Status{Name: d.cfg.Name, State: stateNames[d.state.Load()], Started: d.started}
	for _, w := range d.workers {
		ws := w.status()
		st.Workers = append(st.Workers, ws)
		st.Captured += ws.Captured
		st.ArenaFull += ws.ArenaFull
	}
	ps := d.cfg.Port.Stats()
	if d.state.Load() != stateIdle {
		ps = ps.Sub(d.base)
	}
	st.Port = ps
	st.PortDropped = ps.Dropped + ps.RxNoBuf
	return st
}

func (d *Dumper) now() time.Time {
	if d.cfg.Now != nil {
		return d.cfg.Now()
	}
	return time.Now()
}

// Poll moves what waits in each queue of a Stepped dumper into its
// arenas, a burst per queue, and returns how many packets it took (0 when
// the dumper is not capturing or not Stepped).
func (d *Dumper) Poll() int {
	if !d.cfg.Stepped || d.state.Load() != stateCapturing {
		return 0
	}
	return d.pollLocked()
}

func (d *Dumper) pollLocked() int {
	total := 0
	for _, w := range d.workers {
		n := d.cfg.Port.RxBurst(w.queue, w.bufs)
		if n == 0 {
			continue
		}
		w.capture(w.bufs[:n])
		dpdk.FreeBulk(w.bufs[:n])
		clear(w.bufs[:n])
		total += n
	}
	return total
}

// Close stops a running capture without writing it and releases the
// arenas. The port stays open.
func (d *Dumper) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	if d.state.Load() == stateCapturing {
		_, _ = d.stopLocked(context.Background(), false)
	}
	d.closed = true
	for _, w := range d.workers {
		w.arena = nil
	}
	return nil
}
