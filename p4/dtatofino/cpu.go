package dtatofino

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/internal/dtawire"
	"github.com/rdma-appliance/appliance/internal/service"
)

// CPUAgent is the switch CPU's side of translator.p4's flow control
// (FlowControl): the pipeline sends a high-priority report that finds its
// collector's meter red to the CPU's port, untranslated, and the agent
// sends it back in through the same port, paced, once the meter has had
// time to refill. report_priority marks whatever comes in on the CPU's
// port as a high-priority resend, which skips the sequence check, so a
// report the agent sends back is translated once the meter lets it
// through, and comes back to the agent again while it does not: the
// software translator's queue of waiting high-priority reports, held on
// the switch CPU.
//
// The agent validates what it receives (a DTA report to the report port,
// parsed with the deployment's Format) and counts and drops anything else;
// a report its queue cannot hold is counted too, and lost: the pipeline's
// sequence check already took it, so its reporter will not resend it.
type CPUAgent struct {
	cfg    CPUAgentConfig
	bufs   []*dpdk.Packet
	fifo   []*dpdk.Packet // a ring of Depth reports, head first
	head   int
	n      int
	tokens float64
	last   int64
	rep    dtawire.Report

	received, resent, overflow, malformed, discarded atomic.Uint64
}

// CPUAgentConfig configures a CPUAgent.
type CPUAgentConfig struct {
	// Port is the switch CPU's port (the netdev of its PCIe or Ethernet
	// port, say afpacket:bf_pci0) and Queue the queue to use on it.
	Port  dpdk.Port
	Queue int
	// Rate is the reports a second the agent sends back in (at least 1):
	// at most the meter's rate, less what new reports take of it.
	Rate uint64
	// Burst is how many reports the agent sends at once at most
	// (default 32).
	Burst int
	// Depth is how many reports the agent holds (default 65536); the
	// reports beyond it are counted and dropped.
	Depth int
	// Format is the reports' format, as the reporters and the translator
	// use it.
	Format dtawire.Format
	// Now is the clock in nanoseconds (nil: dpdk.Nanotime).
	Now func() int64
}

// CPUAgentStats are a CPUAgent's counters.
type CPUAgentStats struct {
	Received  uint64 `json:"received"`  // reports taken from the port
	Resent    uint64 `json:"resent"`    // reports sent back into the pipeline
	Queued    uint64 `json:"queued"`    // reports waiting
	Overflow  uint64 `json:"overflow"`  // reports lost to a full queue
	Malformed uint64 `json:"malformed"` // frames that were not DTA reports, dropped
	Discarded uint64 `json:"discarded"` // reports still queued when the agent stopped
}

// ErrCPUAgent is the error of a CPUAgentConfig that cannot work.
var ErrCPUAgent = errors.New("dta switch CPU agent")

// NewCPUAgent checks cfg and returns the agent.
func NewCPUAgent(cfg CPUAgentConfig) (*CPUAgent, error) {
	switch {
	case cfg.Port == nil:
		return nil, fmt.Errorf("%w: no port", ErrCPUAgent)
	case cfg.Queue < 0 || cfg.Queue >= max(cfg.Port.Info().RxQueues, 1):
		return nil, fmt.Errorf("%w: queue %d: the port has %d", ErrCPUAgent, cfg.Queue, cfg.Port.Info().RxQueues)
	case cfg.Rate == 0:
		return nil, fmt.Errorf("%w: rate: at least 1 report a second", ErrCPUAgent)
	case cfg.Burst < 0 || cfg.Burst > 1024:
		return nil, fmt.Errorf("%w: burst %d: 1..1024 (0: 32)", ErrCPUAgent, cfg.Burst)
	case cfg.Depth < 0 || cfg.Depth > 1<<24:
		return nil, fmt.Errorf("%w: depth %d: 1..%d (0: 65536)", ErrCPUAgent, cfg.Depth, 1<<24)
	}
	if err := cfg.Format.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCPUAgent, err)
	}
	if cfg.Burst == 0 {
		cfg.Burst = 32
	}
	if cfg.Depth == 0 {
		cfg.Depth = 1 << 16
	}
	if cfg.Now == nil {
		cfg.Now = dpdk.Nanotime
	}
	a := &CPUAgent{cfg: cfg, bufs: make([]*dpdk.Packet, cfg.Burst), fifo: make([]*dpdk.Packet, cfg.Depth),
		tokens: float64(cfg.Burst), last: cfg.Now()}
	return a, nil
}

// Poll takes what the port received into the queue and sends back as
// much of the queue as the rate allows, one burst each way. It reports
// whether it did anything.
func (a *CPUAgent) Poll() bool {
	did := false
	if k := a.cfg.Port.RxBurst(a.cfg.Queue, a.bufs); k > 0 {
		did = true
		for i, p := range a.bufs[:k] {
			a.bufs[i] = nil
			a.take(p)
		}
	}
	now := a.cfg.Now()
	a.tokens = min(float64(a.cfg.Burst), a.tokens+float64(now-a.last)*float64(a.cfg.Rate)/1e9)
	a.last = now
	k := min(int(a.tokens), a.n, a.cfg.Burst)
	if k == 0 {
		return did
	}
	// The ring's head run, up to its end: the next poll sends the rest.
	k = min(k, len(a.fifo)-a.head)
	sent := a.cfg.Port.TxBurst(a.cfg.Queue, a.fifo[a.head:a.head+k])
	clear(a.fifo[a.head : a.head+sent])
	a.head = (a.head + sent) % len(a.fifo)
	a.n -= sent
	a.tokens -= float64(sent)
	a.resent.Add(uint64(sent))
	return did || sent > 0
}

// take queues one received frame, or counts and frees it.
func (a *CPUAgent) take(p *dpdk.Packet) {
	if !a.isReport(p.Data()) {
		a.malformed.Add(1)
		p.Free()
		return
	}
	a.received.Add(1)
	if a.n == len(a.fifo) {
		a.overflow.Add(1)
		p.Free()
		return
	}
	a.fifo[(a.head+a.n)%len(a.fifo)] = p
	a.n++
}

// isReport reports whether frame is a DTA report to the report port.
func (a *CPUAgent) isReport(frame []byte) bool {
	var h header.Parsed
	if header.Decode(frame, &h) != nil || h.L4Proto != header.IPProtoUDP ||
		header.UDP(frame[h.L4Off:]).DstPort() != dtawire.ReportPort {
		return false
	}
	return a.cfg.Format.Parse(frame[h.PayloadOff:h.PayloadOff+h.PayloadLen], &a.rep) == nil
}

// Run polls until ctx ends, backing off while the port is idle and nothing
// waits, then frees what is still queued (Stats counts it as Discarded).
func (a *CPUAgent) Run(ctx context.Context) {
	var bo dpdk.Backoff
	for ctx.Err() == nil {
		if a.Poll() || a.n > 0 {
			bo.Busy()
		} else {
			bo.Idle()
		}
	}
	a.Close()
}

// Close frees the queued reports (Stats counts them in Discarded).
func (a *CPUAgent) Close() {
	a.discarded.Add(uint64(a.n))
	for ; a.n > 0; a.n-- {
		a.fifo[a.head].Free()
		a.fifo[a.head] = nil
		a.head = (a.head + 1) % len(a.fifo)
	}
}

// Stats returns the counters; another goroutine may call it while the
// agent runs.
func (a *CPUAgent) Stats() CPUAgentStats {
	s := CPUAgentStats{Discarded: a.discarded.Load(), Resent: a.resent.Load(), Overflow: a.overflow.Load(),
		Malformed: a.malformed.Load(), Received: a.received.Load()}
	s.Queued = s.Received - s.Overflow - s.Resent - s.Discarded
	return s
}

// Register adds the agent's status and metrics to a service:
//
//	GET /v1/status   the counters (CPUAgentStats)
func (a *CPUAgent) Register(s *service.Service) {
	s.HandleFunc("GET /v1/status", func(w http.ResponseWriter, _ *http.Request) {
		service.WriteJSON(w, http.StatusOK, a.Stats())
	})
	for _, c := range []struct {
		name, help string
		get        func(CPUAgentStats) uint64
	}{
		{"received_total", "Reports the switch CPU took from the CPU port (over the meter, high priority).", func(s CPUAgentStats) uint64 { return s.Received }},
		{"resent_total", "Reports sent back into the pipeline.", func(s CPUAgentStats) uint64 { return s.Resent }},
		{"overflow_total", "Reports lost to a full queue (their reporters do not resend them).", func(s CPUAgentStats) uint64 { return s.Overflow }},
		{"malformed_total", "Frames on the CPU port that were not DTA reports, dropped.", func(s CPUAgentStats) uint64 { return s.Malformed }},
	} {
		s.Metrics.CounterFunc("appliance_dta_switch_cpu_"+c.name, c.help, func() float64 { return float64(c.get(a.Stats())) })
	}
	s.Metrics.GaugeFunc("appliance_dta_switch_cpu_queued", "Reports waiting to be sent back in.",
		func() float64 { return float64(a.Stats().Queued) })
}
