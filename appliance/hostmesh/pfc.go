package hostmesh

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/rdma-appliance/appliance/appliance/host"
	"github.com/rdma-appliance/appliance/collector/hostmeshanalyzer"
)

// PFCCounters are an RNIC's cumulative PFC counters of one priority: pause
// frames sent (to its switch) and received (from it), and how long they
// held the link, ns, where the driver counts it.
type PFCCounters = host.PFCCounters

// pfcLast is the last reading of an RNIC's counters, and when.
type pfcLast struct {
	at  int64
	c   PFCCounters
	set bool
}

// PFC takes a reading of RNIC i's cumulative PFC counters at now (host
// clock): the change since the last reading goes to the analyzer with the
// next batch. The first reading is the baseline. A counter that went
// backwards was reset (driver reload, port reset): the reading counts
// from zero.
func (c *Core) PFC(i int, now int64, cur PFCCounters) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i < 0 || i >= len(c.rnics) {
		return
	}
	if c.pfcLast == nil {
		c.pfcLast = make([]pfcLast, len(c.rnics))
	}
	last := &c.pfcLast[i]
	if last.set && now > last.at {
		du := func(a, b uint64) uint64 {
			if a < b {
				return a
			}
			return a - b
		}
		dn := func(a, b int64) int64 {
			if a < b {
				return a
			}
			return a - b
		}
		d := PFCCounters{TxPause: du(cur.TxPause, last.c.TxPause), RxPause: du(cur.RxPause, last.c.RxPause),
			TxPauseNs: dn(cur.TxPauseNs, last.c.TxPauseNs), RxPauseNs: dn(cur.RxPauseNs, last.c.RxPauseNs)}
		if d == (PFCCounters{}) {
			// Nothing paused: nothing to upload, the interval starts
			// again from here.
			*last = pfcLast{at: now, c: cur, set: true}
			return
		}
		// Held like results while the analyzer is down, the oldest
		// dropped first.
		if len(c.pfc) >= c.cfg.MaxBuffered {
			c.pfc = c.pfc[1:]
			c.cnt.Dropped++
		}
		c.pfc = append(c.pfc, hostmeshanalyzer.PFC{RNIC: c.rnics[i].Name, From: last.at, To: now,
			TxPause: d.TxPause, RxPause: d.RxPause, TxPauseNs: d.TxPauseNs, RxPauseNs: d.RxPauseNs})
	}
	*last = pfcLast{at: now, c: cur, set: true}
}

// NetdevOf is the Ethernet interface behind a RoCE device's GID: the
// kernel names it in <sysfs>/class/infiniband/DEV/ports/PORT/gid_attrs/ndevs/GID
// (sysfs is /sys on a host).
func NetdevOf(sysfs, dev string, port, gid int) (string, error) {
	p := filepath.Join(sysfs, "class", "infiniband", dev, "ports", strconv.Itoa(port), "gid_attrs", "ndevs", strconv.Itoa(gid))
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("hostmesh: netdev of %s port %d GID %d: %w", dev, port, gid, err)
	}
	n := strings.TrimSpace(string(b))
	if n == "" {
		return "", fmt.Errorf("hostmesh: netdev of %s port %d GID %d: none", dev, port, gid)
	}
	return n, nil
}

// SysPFC reads the RNICs' PFC counters on a host (its Read is
// AgentConfig.ReadPFC): the netdev of the device's GID from sysfs (/sys),
// its counters of prio from the driver's ethtool statistics
// (host.PFCStats: the ioctl `ethtool -S` uses, without a fork per RNIC per
// batch). The pause counters are the Ethernet port's, not the verbs
// device's (hw_counters holds RoCE's, not PFC's): the NIC counts them in
// its MAC. A netdev's reader is opened on its first read and kept until
// Close.
type SysPFC struct {
	sysfs string
	prio  int
	mu    sync.Mutex
	open  map[string]*host.PFCStats
}

// NewSysPFC returns a reader of priority prio's counters under sysfs.
func NewSysPFC(sysfs string, prio int) *SysPFC {
	return &SysPFC{sysfs: sysfs, prio: prio, open: map[string]*host.PFCStats{}}
}

// Read returns d's counters now.
func (s *SysPFC) Read(ctx context.Context, d Device) (PFCCounters, error) {
	nd, err := NetdevOf(s.sysfs, d.Dev.Info().Name, d.Port, d.GIDIndex)
	if err != nil {
		return PFCCounters{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open == nil {
		return PFCCounters{}, errors.New("hostmesh: PFC counters read after Close")
	}
	st := s.open[nd]
	if st == nil {
		if st, err = host.OpenPFCStats(nd, s.prio); err != nil {
			return PFCCounters{}, fmt.Errorf("hostmesh: %w", err)
		}
		s.open[nd] = st
	}
	return st.Read()
}

// Close releases every netdev's ethtool socket; reads after it fail.
func (s *SysPFC) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, st := range s.open {
		errs = append(errs, st.Close())
	}
	s.open = nil
	return errors.Join(errs...)
}
