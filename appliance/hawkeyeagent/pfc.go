package hawkeyeagent

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/rdma-appliance/appliance/appliance/host"
)

// PFCMonitor tells whether the host's NIC is being paused by its switch,
// from the NIC's PFC counters of the victims' priority sampled every
// Interval. A paused NIC is the first paused egress on a victim's path
// (its switch paused it): the agent then sends its polls with the PFC bit,
// as a switch does for a paused egress (the paper's Figure 6), so that
// the switch which paused the NIC traces its own PFC causality from the
// host's port. Without the bit no switch would: the victim sends nothing,
// and no switch egress on its path is paused or queued for it.
type PFCMonitor struct {
	// Read returns the NIC's cumulative counters (host.PFCStats.Read on a
	// host).
	Read func() (host.PFCCounters, error)
	// Interval between two readings; the NIC counts as paused when the
	// last interval saw a pause (time paused where the driver counts it,
	// mlx5; else a PAUSE frame received).
	Interval time.Duration

	paused atomic.Bool
	errs   atomic.Uint64
	last   host.PFCCounters
	have   bool
}

// Paused reports whether the last interval saw the NIC paused.
func (m *PFCMonitor) Paused() bool { return m != nil && m.paused.Load() }

// Errors counts failed readings (the NIC then counts as not paused).
func (m *PFCMonitor) Errors() uint64 { return m.errs.Load() }

// Sample takes one reading and updates Paused from the change since the
// previous one. The first reading is the baseline.
func (m *PFCMonitor) Sample() {
	c, err := m.Read()
	if err != nil {
		m.errs.Add(1)
		m.paused.Store(false)
		m.have = false
		return
	}
	if m.have {
		var p bool
		if c.Durations {
			p = c.RxPauseNs != m.last.RxPauseNs
		} else {
			p = c.RxPause != m.last.RxPause
		}
		m.paused.Store(p)
	}
	m.last, m.have = c, true
}

// Run samples until ctx ends.
func (m *PFCMonitor) Run(ctx context.Context) {
	t := time.NewTicker(m.Interval)
	defer t.Stop()
	m.Sample()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.Sample()
		}
	}
}
