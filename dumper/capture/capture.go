// Package capture is the appliance's capture path: the receive loop that
// every capturer runs (the Lumina dumper and `appliance capture`), and the
// capture sessions of `appliance capture` built on it.
//
// A Session opens a port with one receive queue per worker (AF_PACKET
// fanout or DPDK RSS spreads the frames), compiles the tcpdump filter and
// the RoCE filter, attaches what BPF can test in the kernel (AF_PACKET) or
// runs it in the loop (other ports), and writes every frame that passes to
// pcapng or pcap files, optionally zstd-compressed and rotated by size or
// time into a ring of files, or to standard output. On an AF_PACKET port
// the loop writes frames straight from the kernel's ring into the file
// buffer: one copy per frame, as tcpdump.
//
// While it runs, a Session counts frames, bytes, drops by where they
// happened (the kernel ring, the port, the writer) and, for RoCEv2 frames,
// per queue pair: packets, retransmissions seen (a PSN at or behind one
// already seen), NAKs, CNPs and ECN marks.
package capture

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/afpacket"
	"github.com/rdma-appliance/appliance/dpdk/filter"
	"github.com/rdma-appliance/appliance/dumper/pcap"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// Config configures a Session.
type Config struct {
	// Port is a port string ("afpacket:eth0,fanout=hash", "eal:0000:3b:00.0",
	// "ring:lab0.b") opened with Queues receive queues, one worker each,
	// pinned to Cores[i] when Cores is given.
	Port     string
	Queues   int
	Cores    []int
	PoolSize int
	Burst    int
	// Filter is a tcpdump expression; RoCE a RoCE filter (see ParseRoCE)
	// for RoCEv2 on RoCEPort (default 4791).
	Filter   string
	RoCE     string
	RoCEPort uint16
	// SnapLen bytes of each frame are kept (0: all, 262144).
	SnapLen int
	// Output is where frames go. PerQueue writes one stream per queue
	// (NAME-qN...) instead of one shared by all queues.
	Output   Output
	PerQueue bool
	// Count and Duration stop the capture (0: no limit).
	Count    uint64
	Duration time.Duration
	// Drain is how long the workers keep reading after a stop, at least:
	// an AF_PACKET ring hands over a partly filled block only after its
	// block timeout, which New adds here.
	Drain time.Duration
	// OpenPort, when set, opens the port instead of dpdk.Open (tests and
	// the lab hand in ring ports).
	OpenPort func(name string, cfg dpdk.Config) (dpdk.Port, error)
}

// Stats are a session's counters so far.
type Stats struct {
	Elapsed  time.Duration `json:"elapsed_ns"`
	Received uint64        `json:"received"` // frames the capture saw (after a kernel filter)
	Bytes    uint64        `json:"bytes"`    // their length on the wire
	Written  uint64        `json:"written"`  // frames handed to the output
	// Filtered frames failed the filter in user space (the kernel drops
	// those it filters unseen); RoCERejected failed the RoCE filter.
	Filtered     uint64 `json:"filtered"`
	RoCERejected uint64 `json:"roce_rejected"`
	// Drops by where they happened: the kernel's ring was full (AF_PACKET
	// tp_drops), the port had no buffer or queue room (imissed, no mbuf),
	// the writer could not save them (a write error, a full disk).
	KernelDrops uint64 `json:"kernel_drops"`
	PortDrops   uint64 `json:"port_drops"`
	WriterDrops uint64 `json:"writer_drops"`
	// HWTimestamps counts frames the NIC stamped.
	HWTimestamps uint64 `json:"hw_timestamps"`
}

// QPStats are the counters of one queue pair, by destination address and
// QPN as the BTH names it.
type QPStats struct {
	DstGID          string `json:"dst_gid"`
	QPN             uint32 `json:"qpn"`
	Packets         uint64 `json:"packets"`
	Bytes           uint64 `json:"bytes"`
	Retransmissions uint64 `json:"retransmissions"`
	NAKs            uint64 `json:"naks"`
	CNPs            uint64 `json:"cnps"`
	ECNMarked       uint64 `json:"ecn_marked"`
	FirstPSN        uint32 `json:"first_psn"`
	LastPSN         uint32 `json:"last_psn"`
}

// Result is what a finished session wrote and counted.
type Result struct {
	Port     string    `json:"port"`
	Filter   string    `json:"filter,omitempty"`
	RoCE     string    `json:"roce,omitempty"`
	RoCEPort uint16    `json:"roce_port"`
	Kernel   bool      `json:"kernel_filter"` // the filter ran in the kernel
	Stats    Stats     `json:"stats"`
	QPs      []QPStats `json:"qps"`
	Files    []File    `json:"files"`
	Stopped  string    `json:"stopped"` // why: signal, count, duration, error
}

// Session is one capture.
type Session struct {
	cfg     Config
	port    dpdk.Port
	pool    *dpdk.Pool
	prog    *filter.Program
	rf      *RoCEFilter
	workers []*worker
	sinks   []*sink
	stop    atomic.Bool
	started time.Time
	base    dpdk.Stats
	reason  atomic.Pointer[string]
	total   atomic.Uint64 // frames written, for Count
	done    chan struct{}
	running chan struct{} // closed once the workers run
	once    sync.Once
}

type worker struct {
	s     *Session
	loop  *Loop
	sink  *sink
	queue int
	core  int
	// Counters kept by the worker and published every publishEvery
	// frames (and at the end), so the per-frame path has no atomic
	// operation for them.
	nrecv, nbytes, nrej, nhw uint64
	unpub, qpPub             int
	_                        [64]byte
	received                 atomic.Uint64
	bytes                    atomic.Uint64
	roceRej                  atomic.Uint64
	hwts                     atomic.Uint64
	_                        [64]byte
	qps                      qpTable
	pkt                      roce.Packet
	quick                    quickPkt
	view                     dpdk.Frame
	lost                     []byte // where an EPBReader writes after a write error
	fast                     bool   // blocks take the records path
	loopStats                dpdk.LoopStats
}

// publishLocked publishes the counters, taking the sink's lock when
// workers share it.
func (w *worker) publishLocked() {
	if w.sink.shared {
		w.sink.mu.Lock()
		defer w.sink.mu.Unlock()
	}
	w.publish()
	w.publishQPs()
}

// publishEvery is how many frames a worker handles before publishing its
// counters: a live line or a scrape lags by no more than that.
const publishEvery = 64

func (w *worker) publish() {
	w.received.Store(w.nrecv)
	w.bytes.Store(w.nbytes)
	w.roceRej.Store(w.nrej)
	w.hwts.Store(w.nhw)
	w.unpub = 0
	w.sink.publish()
	// The per-QP table copies every entry changed since the last time,
	// which across many QPs costs more than the frames between two
	// publishes: it publishes less often.
	if w.qpPub++; w.qpPub >= qpPublishEvery {
		w.publishQPs()
	}
}

// qpPublishEvery is how many publishes of the frame counters pass between
// two of the per-QP counters (which also publish when the queue is idle).
const qpPublishEvery = 64

func (w *worker) publishQPs() {
	w.qpPub = 0
	w.qps.publish()
}

type qpKey struct {
	dst roce.GID
	qpn uint32
}

// New checks cfg, compiles the filters and opens the port.
func New(cfg Config) (*Session, error) {
	if cfg.Queues <= 0 {
		cfg.Queues = 1
	}
	if len(cfg.Cores) > 0 && len(cfg.Cores) != cfg.Queues {
		return nil, fmt.Errorf("capture: %d cores for %d queues: one core per queue", len(cfg.Cores), cfg.Queues)
	}
	if cfg.SnapLen <= 0 || cfg.SnapLen > pcap.MaxSnapLen {
		cfg.SnapLen = pcap.MaxSnapLen
	}
	if cfg.PoolSize <= 0 {
		cfg.PoolSize = 8192
	}
	if cfg.Output.Path == "" {
		return nil, errors.New("capture: no output (-w FILE, or - for standard output)")
	}
	if cfg.Output.Path == "-" && (cfg.PerQueue || cfg.Output.FileSize > 0 || cfg.Output.FileDuration > 0) {
		return nil, errors.New("capture: standard output is one stream: no per-queue files or rotation")
	}
	cfg.Output.SnapLen = cfg.SnapLen
	s := &Session{cfg: cfg, done: make(chan struct{}), running: make(chan struct{})}
	var err error
	if s.rf, err = ParseRoCE(cfg.RoCE, cfg.RoCEPort); err != nil {
		return nil, err
	}
	roceBPF := ""
	if cfg.RoCE != "" {
		roceBPF = s.rf.BPF()
	}
	if s.prog, err = filter.And(cfg.Filter, roceBPF, filter.Options{SnapLen: cfg.SnapLen}); err != nil {
		return nil, err
	}
	cfg.Output.Filter = cfg.Filter
	if cfg.RoCE != "" {
		cfg.Output.Filter = s.prog.Expr
	}
	s.cfg.Output = cfg.Output
	ram := dpdk.DefaultDataRoom
	if cfg.SnapLen > ram-dpdk.Headroom {
		ram = min(cfg.SnapLen, 9216) + dpdk.Headroom
	}
	if s.pool, err = dpdk.NewPool("capture", cfg.PoolSize, ram); err != nil {
		return nil, err
	}
	open := cfg.OpenPort
	if open == nil {
		open = dpdk.Open
	}
	pcfg := dpdk.Config{Pool: s.pool, RxQueues: cfg.Queues, TxQueues: 1, Promiscuous: true}
	if !s.prog.All {
		pcfg.Filter = s.prog.Kernel
	}
	if s.port, err = open(cfg.Port, pcfg); err != nil {
		s.pool.Close()
		return nil, fmt.Errorf("capture: cannot open %s: %w", cfg.Port, err)
	}
	if drv, _, opts, err := dpdk.ParsePortString(cfg.Port); err == nil && drv == "afpacket" {
		tmo := afpacket.DefaultTimeout
		if v, ok := opts["timeout"]; ok {
			if d, err := time.ParseDuration(v); err == nil {
				tmo = d
			} else if ms, err := strconv.Atoi(v); err == nil {
				tmo = time.Duration(ms) * time.Millisecond
			}
		}
		s.cfg.Drain = max(s.cfg.Drain, tmo+tmo/10+10*time.Millisecond)
	}
	if s.cfg.Output.Interface == "" {
		s.cfg.Output.Interface = s.port.Info().Name
	}
	return s, nil
}

// Port is the session's port.
func (s *Session) Port() dpdk.Port { return s.port }

// Program is the compiled filter (tcpdump expression and RoCE prefilter).
func (s *Session) Program() *filter.Program { return s.prog }

// snapshot reads the counters for the statistics blocks.
func (s *Session) snapshot() statsSnapshot {
	st := s.Stats()
	return statsSnapshot{received: st.Received + st.KernelDrops + st.PortDrops, kernelDrops: st.KernelDrops,
		portDrops: st.PortDrops, filtered: st.Filtered + st.RoCERejected, delivered: st.Written}
}

// Start opens the output and starts one worker per queue.
func (s *Session) Start() error {
	s.started = time.Now()
	s.base = s.port.Stats()
	nsinks := 1
	if s.cfg.PerQueue {
		nsinks = s.cfg.Queues
	}
	for i := 0; i < nsinks; i++ {
		sk := &sink{out: &s.cfg.Output, stats: s.snapshot, shared: !s.cfg.PerQueue && s.cfg.Queues > 1}
		if s.cfg.PerQueue {
			sk.suffix = fmt.Sprintf("-q%d", i)
		}
		if err := sk.open(s.started); err != nil {
			s.closeSinks()
			return err
		}
		s.sinks = append(s.sinks, sk)
	}
	started := make(chan error, s.cfg.Queues)
	for q := 0; q < s.cfg.Queues; q++ {
		core := -1
		if len(s.cfg.Cores) > 0 {
			core = s.cfg.Cores[q]
		}
		w := &worker{s: s, queue: q, core: core, sink: s.sinks[0], fast: s.recordsPath()}
		if s.cfg.PerQueue {
			w.sink = s.sinks[q]
		}
		w.loop = &Loop{Port: s.port, Queue: q, Core: core, Burst: s.cfg.Burst, Stop: &s.stop, Filter: s.prog,
			ParkIdle: true, Stats: &w.loopStats, DrainFor: s.cfg.Drain, OnIdle: w.publishLocked}
		s.workers = append(s.workers, w)
	}
	var wg sync.WaitGroup
	for _, w := range s.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r, ok := s.epbReader(w); ok {
				w.loop.RunPoll(func(int) int { return w.epb(r) }, started)
			} else {
				w.loop.RunBlocks(w.block, w.frame, started)
			}
			w.publishLocked()
		}()
	}
	var errs []error
	for range s.workers {
		if err := <-started; err != nil {
			errs = append(errs, err)
		}
	}
	go func() {
		wg.Wait()
		close(s.done)
	}()
	if len(errs) > 0 {
		s.halt("error")
		<-s.done
		s.closeSinks()
		return fmt.Errorf("capture: %w", errors.Join(errs...))
	}
	close(s.running)
	return nil
}

// Running is closed once the session captures.
func (s *Session) Running() <-chan struct{} { return s.running }

// isRunning says whether Start has set up the workers and sinks, which
// other goroutines (a scrape, a health check) may read from then on.
func (s *Session) isRunning() bool {
	select {
	case <-s.running:
		return true
	default:
		return false
	}
}

// halt asks the workers to drain and stop, recording why (the first
// reason wins).
func (s *Session) halt(why string) {
	s.reason.CompareAndSwap(nil, &why)
	s.stop.Store(true)
	if wk, ok := s.port.(dpdk.Waker); ok {
		for q := 0; q < s.cfg.Queues; q++ {
			wk.Wake(q)
		}
	}
}

// frame is the per-frame path: the RoCE filter and counters, then the
// output.
func (w *worker) frame(f *dpdk.Frame) {
	sk := w.sink
	if sk.shared {
		sk.mu.Lock()
		w.frameLocked(f)
		w.tick()
		sk.mu.Unlock()
	} else {
		w.frameLocked(f)
		w.tick()
	}
}

// block is the per-block path of a port that hands over kernel blocks:
// the sink's lock (when queues share it) and the counters' publication
// once per block, not per frame.
func (w *worker) block(b *afpacket.Block) {
	sk := w.sink
	if sk.shared {
		sk.mu.Lock()
		defer sk.mu.Unlock()
	}
	f := &w.view
	if w.fast {
		w.records(b, f)
	} else {
		for b.Next(f) {
			w.frameLocked(f)
		}
	}
	w.publish()
}

// EPBReader is a port that writes received frames straight into pcapng
// Enhanced Packet Blocks of interface 0 (the eal driver: from the mbufs, in
// the cgo call that receives them), n frames in used bytes of buf.
type EPBReader interface {
	ReadEPB(q int, buf []byte, snap int) (n, used int)
}

// epbBurst is how many frames one ReadEPB call may take: long enough that
// the cgo call costs little per frame, and no longer than the mempool's
// per-lcore cache (128), which a longer burst bypasses for the shared ring
// (256 measured no faster).
const epbBurst = 64

// epbReader says whether w's port can write its records itself: a pcapng
// file of records no longer than epbMaxSnap, and nothing to decide per
// frame before writing it (no filter in user space, no RoCE filter, no
// count to stop at).
func (s *Session) epbReader(w *worker) (EPBReader, bool) {
	r, ok := s.port.(EPBReader)
	return r, ok && s.cfg.Output.Format == pcap.FormatPcapNG && s.cfg.SnapLen <= epbMaxSnap &&
		w.loop.userFilter() == nil && s.cfg.RoCE == "" && s.cfg.Count == 0
}

// epbMaxSnap is the longest snap length the port writes records for.
const epbMaxSnap = 16 << 10

// epb is one poll of a worker whose port writes the records: a burst
// written into the file buffer in one call, then the counters and the
// per-QP table from the records in place.
func (w *worker) epb(r EPBReader) int {
	sk := w.sink
	if sk.shared {
		sk.mu.Lock()
		defer sk.mu.Unlock()
	}
	snap := w.s.cfg.SnapLen
	rec := 32 + (snap+3)&^3
	want := min(epbBurst, max(1, (minTail)/rec)) * rec
	var buf []byte
	var err error
	if sk.errp.Load() == nil {
		if sk.cur.Packets > 0 && (sk.recBytes >= sk.rotBytes || dpdk.Nanotime()-sk.firstTS >= sk.rotAge) {
			if err := sk.rotate(time.Unix(0, dpdk.Nanotime())); err != nil {
				sk.fail(err)
			}
		}
		if sk.errp.Load() == nil {
			if buf, err = sk.w.Tail(want); err != nil {
				sk.fail(err)
			}
		}
	}
	if buf == nil {
		// The file failed: receive all the same, so the port does not
		// count the frames as its drops, and count them lost.
		if len(w.lost) < want {
			w.lost = make([]byte, want)
		}
		n, _ := r.ReadEPB(w.queue, w.lost[:want], snap)
		sk.unsaved.Add(uint64(n))
		w.nrecv += uint64(n)
		w.s.halt("error")
		return n
	}
	n, used := r.ReadEPB(w.queue, buf[:want], snap)
	if n == 0 {
		return 0
	}
	w.nbytes += w.qps.countRecords(buf[:used], w.s.rf.Port, &w.quick)
	if sk.cur.Packets == 0 {
		sk.firstTS = int64(binary.NativeEndian.Uint32(buf[12:]))<<32 | int64(binary.NativeEndian.Uint32(buf[16:]))
	}
	w.nrecv += uint64(n)
	sk.cur.Packets += uint64(n)
	sk.written += uint64(n)
	sk.recBytes += int64(used)
	if err := sk.w.Commit(used); err != nil {
		sk.fail(err)
		w.s.halt("error")
	}
	w.publish()
	return n
}

// minTail is the most buffer one burst of records asks for: half the
// writer's smallest buffer, which Tail can always give.
const minTail = 256 << 10

// frameLocked is frame under the sink's lock (when shared), without
// publishing the counters.
func (w *worker) frameLocked(f *dpdk.Frame) {
	s := w.s
	if s.cfg.Count > 0 && s.total.Load() >= s.cfg.Count {
		return
	}
	w.nrecv++
	w.nbytes += uint64(f.WireLen)
	if f.HWTimestamp {
		w.nhw++
	}
	if s.cfg.RoCE != "" && !s.rf.Match(f.Data, &w.pkt) {
		w.nrej++
		return
	}
	if quickRoCE(f.Data, s.rf.Port, &w.quick) {
		w.qps.count(&w.quick, f.WireLen)
	}
	sk := w.sink
	sk.write(f.Data, f.VLAN, f.Timestamp, f.WireLen)
	if s.cfg.Count > 0 && s.total.Add(1) >= s.cfg.Count {
		s.halt("count")
	}
	if sk.errp.Load() != nil {
		s.halt("error")
	}
}

// tick publishes the counters every publishEvery frames.
func (w *worker) tick() {
	if w.unpub++; w.unpub >= publishEvery {
		w.publish()
	}
}

// Stats reads the counters; safe while capturing.
func (s *Session) Stats() Stats {
	var st Stats
	if !s.isRunning() {
		return st
	}
	st.Elapsed = time.Since(s.started)
	for _, w := range s.workers {
		st.Received += w.received.Load()
		st.Bytes += w.bytes.Load()
		st.RoCERejected += w.roceRej.Load()
		st.HWTimestamps += w.hwts.Load()
		st.Filtered += w.loop.Filtered.Load()
	}
	for _, sk := range s.sinks {
		st.Written += sk.published.Load()
		st.WriterDrops += sk.lost()
	}
	ps := s.port.Stats().Sub(s.base)
	st.PortDrops = ps.RxNoBuf + ps.Errors
	if s.port.Info().Driver == "afpacket" {
		// An AF_PACKET port's drops are the kernel ring's (tp_drops).
		st.KernelDrops = ps.Dropped
	} else {
		st.PortDrops += ps.Dropped
	}
	return st
}

// QPs returns the per-QP counters, busiest first.
func (s *Session) QPs() []QPStats {
	merged := map[qpKey]*QPStats{}
	if !s.isRunning() {
		return nil
	}
	for _, w := range s.workers {
		w.qps.snapshot(merged)
	}
	out := make([]QPStats, 0, len(merged))
	for _, q := range merged {
		out = append(out, *q)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Packets != out[j].Packets {
			return out[i].Packets > out[j].Packets
		}
		if out[i].DstGID != out[j].DstGID {
			return out[i].DstGID < out[j].DstGID
		}
		return out[i].QPN < out[j].QPN
	})
	return out
}

// Run captures until ctx ends (a signal), Count frames are written or
// Duration passes, then drains the queues, closes the files and returns
// the result. tick, when set, is called about once a second with the
// counters so far. Without tick no timer runs: a capture that keeps few
// frames of a busy link sleeps in the kernel until a block is handed
// over, and a wakeup a second would cost more than the frames.
func (s *Session) Run(ctx context.Context, tick func(Stats)) (*Result, error) {
	if err := s.Start(); err != nil {
		return s.result(), err
	}
	var timeout <-chan time.Time
	if s.cfg.Duration > 0 {
		t := time.NewTimer(s.cfg.Duration)
		defer t.Stop()
		timeout = t.C
	}
	var ticks <-chan time.Time
	if tick != nil {
		ticker := time.NewTicker(time.Second)
		defer ticker.Stop()
		ticks = ticker.C
	}
loop:
	for {
		select {
		case <-ctx.Done():
			s.halt("signal")
		case <-timeout:
			s.halt("duration")
		case <-s.done:
			break loop
		case <-ticks:
			tick(s.Stats())
			if s.stop.Load() {
				continue
			}
		}
		if s.stop.Load() {
			<-s.done
			break
		}
	}
	return s.Close()
}

// Close stops the workers if they run, closes the files with their
// statistics, the port and the pool, and returns the result.
func (s *Session) Close() (*Result, error) {
	var err error
	s.once.Do(func() {
		s.halt("closed")
		if s.workers != nil {
			<-s.done
		}
		err = s.closeSinks()
		s.port.Close()
		if e := s.pool.Close(); e != nil && err == nil {
			err = e
		}
	})
	return s.result(), err
}

func (s *Session) closeSinks() error {
	var errs []error
	now := time.Now().UnixNano()
	for _, sk := range s.sinks {
		if err := sk.closeFile(now); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s *Session) result() *Result {
	r := &Result{Port: s.cfg.Port, Filter: s.cfg.Filter, RoCE: s.cfg.RoCE, RoCEPort: s.rf.Port, Stats: s.Stats(), QPs: s.QPs(),
		Kernel: s.port != nil && s.port.Info().Filtered}
	if p := s.reason.Load(); p != nil {
		r.Stopped = *p
	}
	for _, sk := range s.sinks {
		r.Files = append(r.Files, sk.files...)
	}
	return r
}
