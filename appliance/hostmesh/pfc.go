package hostmesh

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/collector/hostmeshanalyzer"
)

// PFCCounters are an RNIC's cumulative PFC counters of one priority: pause
// frames sent (to its switch) and received (from it), and how long they
// held the link, ns.
type PFCCounters struct {
	TxPause, RxPause     uint64
	TxPauseNs, RxPauseNs int64
}

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

// ParseEthtoolPFC reads the PFC counters of priority prio from `ethtool -S`
// output, as mlx5 names them: tx_prioN_pause and rx_prioN_pause (frames)
// and tx_prioN_pause_duration and rx_prioN_pause_duration (microseconds).
// It fails when the output has no pause counter of the priority (a driver
// that names them otherwise, or one without PFC).
func ParseEthtoolPFC(r io.Reader, prio int) (PFCCounters, error) {
	var c PFCCounters
	want := map[string]func(v uint64){
		fmt.Sprintf("tx_prio%d_pause", prio):          func(v uint64) { c.TxPause = v },
		fmt.Sprintf("rx_prio%d_pause", prio):          func(v uint64) { c.RxPause = v },
		fmt.Sprintf("tx_prio%d_pause_duration", prio): func(v uint64) { c.TxPauseNs = int64(v) * 1000 },
		fmt.Sprintf("rx_prio%d_pause_duration", prio): func(v uint64) { c.RxPauseNs = int64(v) * 1000 },
	}
	found := 0
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		set := want[strings.TrimSpace(k)]
		if set == nil {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return c, fmt.Errorf("hostmesh: ethtool counter %s: %w", strings.TrimSpace(k), err)
		}
		set(n)
		found++
	}
	if err := sc.Err(); err != nil {
		return c, err
	}
	if found == 0 {
		return c, fmt.Errorf("hostmesh: no PFC counters of priority %d (tx_prio%d_pause) in ethtool -S", prio, prio)
	}
	return c, nil
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

// EthtoolPFC reads a netdev's PFC counters of prio with `ethtool -S`. The
// pause counters are the Ethernet port's, not the verbs device's
// (hw_counters holds RoCE's, not PFC's): the NIC counts them in its MAC.
// One ethtool per RNIC per batch (a second) is a fork a second, next to
// the probes' ten sends.
func EthtoolPFC(ctx context.Context, netdev string, prio int) (PFCCounters, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ethtool", "-S", netdev).Output()
	if err != nil {
		return PFCCounters{}, fmt.Errorf("hostmesh: ethtool -S %s: %w", netdev, err)
	}
	return ParseEthtoolPFC(bytes.NewReader(out), prio)
}

// SysPFC is AgentConfig.ReadPFC on a host: the netdev of the device's GID
// from sysfs (/sys), its counters of prio from ethtool.
func SysPFC(sysfs string, prio int) func(ctx context.Context, d Device) (PFCCounters, error) {
	return func(ctx context.Context, d Device) (PFCCounters, error) {
		nd, err := NetdevOf(sysfs, d.Dev.Info().Name, d.Port, d.GIDIndex)
		if err != nil {
			return PFCCounters{}, err
		}
		return EthtoolPFC(ctx, nd, prio)
	}
}
