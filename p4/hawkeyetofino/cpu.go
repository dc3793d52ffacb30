package hawkeyetofino

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"sync/atomic"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
	"github.com/rdma-appliance/appliance/internal/service"
	"github.com/rdma-appliance/appliance/p4/internal/bfrt"
)

// CPU is the switch CPU's side of telemetry.p4 (what bench/hawkeyesim's
// CPU pollers do in the simulator): it takes the copies of new polling
// events and the evicted flows the data plane sends its port, reads the
// registers of the epochs the poll needs through bfrt (ReadScript, run by
// bfshell, and ParseRegisters), builds the report the simulator's poller
// builds (hawkeyewire.SwitchReport, priced by hawkeyewire's layout) and
// hands it on; with Retrace it then sends the PFC polling packets the data
// plane would send now back in through its port (from_cpu), and with
// QuietQdepth it keeps out of a flow trace where the victim was neither
// paused nor queued (the read decides it: the data plane cannot, the
// victim's queue being egress state).
//
// Switch time: the copies carry the low 32 bits of the switch's clock;
// the CPU extends them to 64 bits (a wrap every 4.3 s) from the first it
// sees, so epoch numbers and start times count from the switch's clock
// modulo 2^32 at that moment, and reads the registers at the copy's time
// plus the time its own clock says passed since the copy arrived.
type CPU struct {
	cfg    CPUConfig
	bufs   []*dpdk.Packet
	clock  int64 // the switch's clock, extended; valid once started
	begun  bool
	ev     []evEntry // ring of MaxEvicted
	evHead int
	evN    int
	evLost int64 // newest epoch that lost an evicted flow to the ring's bound

	lastCollect, lastEvAt int64
	lastEv                int
	routes                []Route // longest prefix first

	st cpuCounters
}

type evEntry struct {
	epoch int64
	rec   hawkeyewire.FlowRecord
}

type cpuCounters struct {
	polls, evicted, evictedLost, malformed, duplicates, rateLimited, quiet, collections, reports, readErrors,
	reportErrors, retraced, retraceDropped, reportBytes, readNs atomic.Uint64
}

// CPUConfig configures a CPU.
type CPUConfig struct {
	// Program is the switch's program as loaded (its ports' order is the
	// local index the registers and the reports use).
	Program Program
	// Switch names the switch in reports.
	Switch string
	// Port is the CPU's port (the PCIe port's netdev, say afpacket:bf_pci0)
	// and Queue its queue; Pool gives the re-trace's packets.
	Port  dpdk.Port
	Queue int
	Pool  *dpdk.Pool
	// Bfshell runs a bfrt_python script on the switch and returns what it
	// printed (bfrt.Bfshell's, or a stand-in).
	Bfshell func(ctx context.Context, script string) ([]byte, error)
	// ReadEpochs is how many of the newest epochs a collection reads
	// (1..4, default 4); CollectInterval the least switch time between
	// two collections (default 2 ms); DedupNs how long an event id that
	// was collected is not collected again for its other trace type
	// (default 100 ms).
	ReadEpochs      int
	CollectInterval int64
	DedupNs         int64
	// MTU prices the reports (default 1500); MaxEvicted bounds the
	// evicted flows held (default 4096).
	MTU        int
	MaxEvicted int
	// MinPaused paused packets in the epochs read make a port count as
	// paused when its timer has run out (default 1).
	MinPaused uint32
	// Retrace sends the PFC polling packets the data plane would send
	// now (bench/hawkeyesim's Config.Retrace).
	Retrace bool
	// QuietQdepth (bytes), when positive: a flow trace where the
	// victim's egress was neither paused nor queued (an average queue
	// below this over the epochs read) is not reported nor re-traced.
	QuietQdepth float64
	// Report receives each report; an error is counted.
	Report func(CPUReport) error
	// Now is the CPU's clock in ns (nil: dpdk.Nanotime).
	Now func() int64
}

// CPUReport is one collection: the event and victim of the poll that
// asked for it, the switch time the poll reached the CPU's copy, and the
// report.
type CPUReport struct {
	Event  uint8                    `json:"event"`
	Victim hawkeyewire.FlowKey      `json:"victim"`
	Time   int64                    `json:"time_ns"`
	Report hawkeyewire.SwitchReport `json:"report"`
}

// CPUStats are a CPU's counters.
type CPUStats struct {
	Polls          uint64 `json:"polls"`           // poll copies taken
	Evicted        uint64 `json:"evicted"`         // evicted flows taken
	EvictedLost    uint64 `json:"evicted_lost"`    // evicted flows the bound dropped
	Malformed      uint64 `json:"malformed"`       // frames that were neither, dropped
	Duplicates     uint64 `json:"duplicates"`      // polls of an event collected already
	RateLimited    uint64 `json:"rate_limited"`    // polls within CollectInterval of a collection
	Quiet          uint64 `json:"quiet"`           // flow traces not reported (QuietQdepth)
	Collections    uint64 `json:"collections"`     // register reads that succeeded
	Reports        uint64 `json:"reports"`         // reports handed on
	ReadErrors     uint64 `json:"read_errors"`     // bfshell failures and bad output
	ReportErrors   uint64 `json:"report_errors"`   // reports Report refused
	Retraced       uint64 `json:"retraced"`        // PFC polling packets sent back in
	RetraceDropped uint64 `json:"retrace_dropped"` // of them the port or pool refused
	ReportBytes    uint64 `json:"report_bytes"`    // the reports' size on the wire
	ReadNs         uint64 `json:"read_ns"`         // time spent reading registers
}

// ErrCPU is the error of a CPUConfig that cannot work.
var ErrCPU = errors.New("hawkeye switch CPU")

// NewCPU checks cfg and returns the CPU.
func NewCPU(cfg CPUConfig) (*CPU, error) {
	d := func(v *int64, def int64) {
		if *v == 0 {
			*v = def
		}
	}
	d(&cfg.CollectInterval, 2_000_000)
	d(&cfg.DedupNs, 100_000_000)
	if cfg.ReadEpochs == 0 {
		cfg.ReadEpochs = Epochs
	}
	if cfg.MTU == 0 {
		cfg.MTU = 1500
	}
	if cfg.MaxEvicted == 0 {
		cfg.MaxEvicted = 4096
	}
	if cfg.MinPaused == 0 {
		cfg.MinPaused = 1
	}
	if cfg.Now == nil {
		cfg.Now = dpdk.Nanotime
	}
	switch {
	case cfg.Port == nil:
		return nil, fmt.Errorf("%w: no port", ErrCPU)
	case cfg.Queue < 0 || cfg.Queue >= max(cfg.Port.Info().RxQueues, 1):
		return nil, fmt.Errorf("%w: queue %d: the port has %d", ErrCPU, cfg.Queue, cfg.Port.Info().RxQueues)
	case cfg.Bfshell == nil:
		return nil, fmt.Errorf("%w: nothing runs bfshell", ErrCPU)
	case cfg.Retrace && cfg.Pool == nil:
		return nil, fmt.Errorf("%w: re-tracing needs a packet pool", ErrCPU)
	case cfg.ReadEpochs < 1 || cfg.ReadEpochs > Epochs:
		return nil, fmt.Errorf("%w: read %d epochs: 1..%d", ErrCPU, cfg.ReadEpochs, Epochs)
	case cfg.MTU < 576 || cfg.MTU > 9216:
		return nil, fmt.Errorf("%w: report MTU %d: 576..9216", ErrCPU, cfg.MTU)
	case cfg.CollectInterval < 0 || cfg.DedupNs < 0 || cfg.MaxEvicted < 0 || cfg.QuietQdepth < 0:
		return nil, fmt.Errorf("%w: negative bound", ErrCPU)
	case cfg.Switch == "":
		return nil, fmt.Errorf("%w: no switch name", ErrCPU)
	}
	if err := cfg.Program.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCPU, err)
	}
	c := &CPU{cfg: cfg, bufs: make([]*dpdk.Packet, 32), ev: make([]evEntry, cfg.MaxEvicted), evLost: -1 << 62,
		lastCollect: -1 << 62, lastEv: -1, routes: slices.Clone(cfg.Program.Routes)}
	slices.SortStableFunc(c.routes, func(a, b Route) int { return b.Prefix.Bits() - a.Prefix.Bits() })
	return c, nil
}

// extend turns a 32-bit switch time into the CPU's 64-bit view of the
// switch clock (the nearest value to the last one seen).
func (c *CPU) extend(t uint32) int64 {
	if !c.begun {
		c.begun, c.clock = true, int64(t)
		return c.clock
	}
	c.clock += int64(int32(t - uint32(c.clock)))
	return c.clock
}

// Poll takes one burst from the port: evicted flows into the ring, and
// each poll copy through a collection (which runs bfshell: it blocks for
// as long as the switch takes to answer). It reports whether the port
// had anything.
func (c *CPU) Poll(ctx context.Context) bool {
	k := c.cfg.Port.RxBurst(c.cfg.Queue, c.bufs)
	for i, p := range c.bufs[:k] {
		c.bufs[i] = nil
		c.Take(ctx, p.Data(), c.cfg.Now())
		p.Free()
	}
	return k > 0
}

// Take handles one frame from the CPU's port that arrived at arrival (the
// CPU's clock).
func (c *CPU) Take(ctx context.Context, b []byte, arrival int64) {
	if e, ok := ParseEvicted(b); ok {
		c.evict(e)
		return
	}
	cp, ok := ParseCPUCopy(b)
	if !ok {
		c.st.malformed.Add(1)
		return
	}
	c.st.polls.Add(1)
	c.poll(ctx, cp, arrival)
}

func (c *CPU) evict(e Evicted) {
	c.st.evicted.Add(1)
	epoch := c.extend(e.Time) >> EpochShift
	rec := hawkeyewire.FlowRecord{Key: e.Key, In: e.In, Out: e.Out, Packets: e.Packets, QdepthSum: uint64(e.Qdepth), Paused: e.Paused}
	if len(c.ev) == 0 {
		c.st.evictedLost.Add(1)
		c.evLost = max(c.evLost, epoch)
		return
	}
	if c.evN == len(c.ev) {
		c.st.evictedLost.Add(1)
		c.evLost = max(c.evLost, c.ev[c.evHead].epoch)
		c.evHead = (c.evHead + 1) % len(c.ev)
		c.evN--
	}
	c.ev[(c.evHead+c.evN)%len(c.ev)] = evEntry{epoch: epoch, rec: rec}
	c.evN++
}

// poll is the CPU's side of a polling event: collect unless this switch
// already answered the event or was collected within the interval (the
// simulator's trigger), then re-trace.
func (c *CPU) poll(ctx context.Context, cp CPUCopy, arrival int64) {
	now := c.extend(cp.Time)
	ev := cp.Header.Event()
	if c.lastEv == int(ev) && now-c.lastEvAt < c.cfg.DedupNs {
		c.st.duplicates.Add(1)
		return
	}
	if now-c.lastCollect < c.cfg.CollectInterval {
		c.st.rateLimited.Add(1)
		return
	}
	// The registers are read now: the copy's time plus what passed since.
	readAt := now + max(c.cfg.Now()-arrival, 0)
	w := NewWindow(readAt, c.cfg.ReadEpochs)
	start := c.cfg.Now()
	regs, err := c.read(ctx, w)
	c.st.readNs.Add(uint64(max(c.cfg.Now()-start, 0)))
	if err != nil {
		c.st.readErrors.Add(1)
		return
	}
	c.st.collections.Add(1)
	t, victim := cp.Header.Type(), cp.Header.Victim()
	out := c.victimPort(victim.Dst)
	v := c.view(regs, readAt)
	if c.cfg.QuietQdepth > 0 && t&hawkeyewire.TypePFC == 0 && out >= 0 && !v.paused(out) && v.queue(out) < c.cfg.QuietQdepth {
		c.st.quiet.Add(1)
		return
	}
	c.lastCollect, c.lastEv, c.lastEvAt = now, int(ev), now
	r := c.report(v)
	c.st.reportBytes.Add(uint64(r.Bytes))
	if c.cfg.Report != nil {
		if err := c.cfg.Report(CPUReport{Event: ev, Victim: victim, Time: now, Report: r}); err != nil {
			c.st.reportErrors.Add(1)
		} else {
			c.st.reports.Add(1)
		}
	}
	// The arrival port by the dev ports the read saw (front-panel ports
	// are resolved on the switch).
	if in := slices.Index(regs.Dev, cp.Ingress); c.cfg.Retrace && in >= 0 {
		c.retrace(cp, in, t, out, v)
	}
}

func (c *CPU) read(ctx context.Context, w Window) (*Registers, error) {
	script, err := c.cfg.Program.ReadScript(w)
	if err != nil {
		return nil, err
	}
	out, err := c.cfg.Bfshell(ctx, script)
	if err != nil {
		return nil, err
	}
	return c.cfg.Program.ParseRegisters(bytesReader(out), w)
}

// victimPort is the local index of the port the victim's destination is
// routed through (victim_route: the routes' longest match), -1 none.
func (c *CPU) victimPort(dst uint32) int {
	a := netip.AddrFrom4([4]byte{byte(dst >> 24), byte(dst >> 16), byte(dst >> 8), byte(dst)})
	for _, r := range c.routes {
		if r.Prefix.Contains(a) {
			return slices.IndexFunc(c.cfg.Program.Ports, func(p Port) bool { return p.Name == r.Port })
		}
	}
	return -1
}

// view is one collection's registers, epoch by epoch.
type view struct {
	cfg   *CPUConfig
	w     Window
	now   uint32 // the read's switch time, low 32 bits
	regs  *Registers
	ports [][]PortRead // [epoch - Oldest][port], zero where the slot holds another epoch
}

func (c *CPU) view(regs *Registers, readAt int64) *view {
	v := &view{cfg: &c.cfg, w: regs.Window, now: uint32(readAt), regs: regs}
	for e := v.w.Oldest; e <= v.w.Cur; e++ {
		row := make([]PortRead, len(c.cfg.Program.Ports))
		for i, pr := range regs.Ports[e&(Epochs-1)] {
			if uint64(pr.Epoch) == epochID(e) {
				row[i] = pr
			}
		}
		v.ports = append(v.ports, row)
	}
	return v
}

// pauseLeft is how long port i's timer still runs (0: not running).
func (v *view) pauseLeft(i int) int64 {
	d := int64(int32(v.regs.PauseUntil[i] - v.now))
	if d <= 0 || d >= PauseMaxNs {
		return 0
	}
	return d
}

// paused: the timer runs, or the port received XOFF or queued packets
// paused in the epochs read (hawkeyesim's rule).
func (v *view) paused(i int) bool {
	if v.pauseLeft(i) > 0 {
		return true
	}
	var n uint32
	for _, row := range v.ports {
		if row[i].PFCFrames > 0 {
			return true
		}
		n += row[i].Paused
	}
	return n >= v.cfg.MinPaused
}

// queue is port i's average queue at enqueue over the epochs read.
func (v *view) queue(i int) float64 {
	var n, q uint64
	for _, row := range v.ports {
		n += uint64(row[i].Packets)
		q += uint64(row[i].Qdepth)
	}
	if n == 0 {
		return 0
	}
	return float64(q) / float64(n)
}

// meter is the bytes from in to out over the epochs read.
func (v *view) meter(in, out int) uint64 {
	var b uint64
	for _, m := range v.regs.Meters {
		if m.In == in && m.Out == out {
			b += uint64(m.Bytes)
		}
	}
	return b
}

// report builds the collection's report as bench/hawkeyesim's poller
// does: per epoch read, the ports with counts (and, in the newest, those
// paused now), the meters and the flows, empty epochs left out; the
// evicted flows of the epochs read.
func (c *CPU) report(v *view) hawkeyewire.SwitchReport {
	r := hawkeyewire.SwitchReport{Switch: c.cfg.Switch}
	meters := slices.Clone(v.regs.Meters)
	slices.SortFunc(meters, func(a, b MeterRead) int { return cmp.Or(cmp.Compare(a.In, b.In), cmp.Compare(a.Out, b.Out)) })
	flows := slices.Clone(v.regs.Flows)
	slices.SortFunc(flows, func(a, b FlowRead) int { return cmp.Or(cmp.Compare(a.Index, b.Index), cmp.Compare(a.Pipe, b.Pipe)) })
	for e := v.w.Oldest; e <= v.w.Cur; e++ {
		k := int(e & (Epochs - 1))
		er := hawkeyewire.EpochReport{ID: uint32(e >> 2), Start: e << EpochShift}
		newest := e == v.w.Cur
		for i, pr := range v.ports[e-v.w.Oldest] {
			left := v.pauseLeft(i)
			isPaused := newest && left > 0
			if pr.Packets == 0 && pr.Paused == 0 && pr.Qdepth == 0 && pr.PFCFrames == 0 && !isPaused {
				continue
			}
			rec := hawkeyewire.PortRecord{Port: i, Packets: pr.Packets, Paused: pr.Paused, QdepthSum: uint64(pr.Qdepth), PauseFrames: pr.PFCFrames}
			if newest {
				rec.PausedNow, rec.PauseLeftNs = isPaused, left
			}
			er.Ports = append(er.Ports, rec)
		}
		for _, m := range meters {
			if m.Slot == k {
				er.Meters = append(er.Meters, hawkeyewire.MeterRecord{In: m.In, Out: m.Out, Bytes: uint64(m.Bytes)})
			}
		}
		for _, f := range flows {
			if f.Slot == k {
				er.Flows = append(er.Flows, hawkeyewire.FlowRecord{Key: f.Key, In: f.In, Out: f.Out, Packets: f.Packets,
					QdepthSum: uint64(f.Qdepth), Paused: f.Paused})
			}
		}
		if len(er.Ports)+len(er.Meters)+len(er.Flows) > 0 {
			r.Epochs = append(r.Epochs, er)
		}
	}
	for i := range c.evN {
		e := &c.ev[(c.evHead+i)%len(c.ev)]
		if e.epoch >= v.w.Oldest && e.epoch <= v.w.Cur {
			r.Evicted = append(r.Evicted, e.rec)
		}
	}
	r.Truncated = c.evLost >= v.w.Oldest
	r.Bytes, r.Packets = hawkeyewire.ReportBytes(r, c.cfg.MTU)
	return r
}

// retrace sends a PFC polling packet out of every switch-facing port the
// data plane would trace now: for a flow trace the victim's egress, for
// a PFC trace every port the arrival port fed in the epochs read, when
// paused. The CPU does not know which of them the data plane traced
// when the poll passed: a copy it already sent reaches a switch that
// handled the event and drops it there as a duplicate.
func (c *CPU) retrace(cp CPUCopy, in int, t uint16, out int, v *view) {
	var sent []int
	try := func(o int) {
		pt := c.cfg.Program.Ports
		if o < 0 || o == in || pt[o].Host || slices.Contains(sent, o) || !v.paused(o) {
			return
		}
		sent = append(sent, o)
		p := c.cfg.Pool.Get()
		if p == nil {
			c.st.retraceDropped.Add(1)
			return
		}
		p.CopyFrom(cp.Frame)
		h := hawkeyewire.Header(p.Data()[ethLen:])
		h.SetType(hawkeyewire.TypePFC)
		h.SetPorts(uint16(cp.Ingress), uint16(v.regs.Dev[o]))
		if c.cfg.Port.TxBurst(c.cfg.Queue, []*dpdk.Packet{p}) != 1 {
			p.Free()
			c.st.retraceDropped.Add(1)
			return
		}
		c.st.retraced.Add(1)
	}
	if t&hawkeyewire.TypeFlow != 0 {
		try(out)
	}
	if t&hawkeyewire.TypePFC != 0 {
		for o := range c.cfg.Program.Ports {
			if v.meter(in, o) > 0 {
				try(o)
			}
		}
	}
}

// Run polls until ctx ends, backing off while the port is idle.
func (c *CPU) Run(ctx context.Context) {
	var bo dpdk.Backoff
	for ctx.Err() == nil {
		if c.Poll(ctx) {
			bo.Busy()
		} else {
			bo.Idle()
		}
	}
}

// Stats returns the counters; another goroutine may call it while the
// CPU runs.
func (c *CPU) Stats() CPUStats {
	s := &c.st
	return CPUStats{Polls: s.polls.Load(), Evicted: s.evicted.Load(), EvictedLost: s.evictedLost.Load(), Malformed: s.malformed.Load(),
		Duplicates: s.duplicates.Load(), RateLimited: s.rateLimited.Load(), Quiet: s.quiet.Load(), Collections: s.collections.Load(),
		Reports: s.reports.Load(), ReadErrors: s.readErrors.Load(), ReportErrors: s.reportErrors.Load(), Retraced: s.retraced.Load(),
		RetraceDropped: s.retraceDropped.Load(), ReportBytes: s.reportBytes.Load(), ReadNs: s.readNs.Load()}
}

// Register adds the CPU's status and metrics to a service:
//
//	GET /v1/status   the counters (CPUStats)
func (c *CPU) Register(s *service.Service) {
	s.HandleFunc("GET /v1/status", func(w http.ResponseWriter, _ *http.Request) {
		service.WriteJSON(w, http.StatusOK, c.Stats())
	})
	for _, m := range []struct {
		name, help string
		get        func(CPUStats) uint64
	}{
		{"polls_total", "Polling packets' copies the switch CPU took from its port.", func(s CPUStats) uint64 { return s.Polls }},
		{"evicted_total", "Evicted flows the switch CPU took from its port.", func(s CPUStats) uint64 { return s.Evicted }},
		{"evicted_lost_total", "Evicted flows dropped by the bound on those held.", func(s CPUStats) uint64 { return s.EvictedLost }},
		{"malformed_total", "Frames on the CPU port that were neither, dropped.", func(s CPUStats) uint64 { return s.Malformed }},
		{"duplicates_total", "Polls of an event this switch was collected for already.", func(s CPUStats) uint64 { return s.Duplicates }},
		{"held_off_total", "Polls within the collect interval of the last collection, not collected.", func(s CPUStats) uint64 { return s.RateLimited }},
		{"quiet_total", "Flow traces not reported: the victim was neither paused nor queued here.", func(s CPUStats) uint64 { return s.Quiet }},
		{"collections_total", "Register reads through bfrt that succeeded.", func(s CPUStats) uint64 { return s.Collections }},
		{"reports_total", "Reports handed on.", func(s CPUStats) uint64 { return s.Reports }},
		{"read_errors_total", "Register reads that failed (bfshell, or output ParseRegisters refused).", func(s CPUStats) uint64 { return s.ReadErrors }},
		{"report_errors_total", "Reports that could not be handed on.", func(s CPUStats) uint64 { return s.ReportErrors }},
		{"retraced_total", "PFC polling packets the CPU sent back into the data plane.", func(s CPUStats) uint64 { return s.Retraced }},
		{"retrace_dropped_total", "Re-trace packets the pool or the port refused.", func(s CPUStats) uint64 { return s.RetraceDropped }},
		{"report_bytes_total", "Report bytes on the wire (hawkeyewire's layout).", func(s CPUStats) uint64 { return s.ReportBytes }},
	} {
		s.Metrics.CounterFunc("appliance_hawkeye_switch_cpu_"+m.name, m.help, func() float64 { return float64(m.get(c.Stats())) })
	}
	s.Metrics.CounterFunc("appliance_hawkeye_switch_cpu_read_seconds_total", "Time spent reading registers through bfrt.",
		func() float64 { return float64(c.Stats().ReadNs) / 1e9 })
}

// DefaultBfshell runs scripts with the SDE at sde (its run_bfshell.sh).
func DefaultBfshell(sde string) func(ctx context.Context, script string) ([]byte, error) {
	return bfrt.Bfshell(sde, "hawkeye")
}
