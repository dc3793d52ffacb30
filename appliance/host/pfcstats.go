package host

import (
	"fmt"
	"math"
)

// PFCCounters are a NIC port's cumulative PFC counters of one priority:
// pause frames sent (to its switch) and received (from it), and, where the
// driver counts it, how long they held the link, ns (Durations says
// whether it does).
type PFCCounters struct {
	TxPause, RxPause     uint64
	TxPauseNs, RxPauseNs int64
	Durations            bool
}

// pfcNames are the ethtool names of a priority's PFC counters, per driver:
// each slot lists the names tried in order.
var pfcNames = [4][]string{
	// received pause frames
	{"rx_prio%d_pause", "rx_priority_%d_xoff.nic", "rx_priority_%d_xoff", "port.rx_priority_%d_xoff_rx"},
	// sent pause frames
	{"tx_prio%d_pause", "tx_priority_%d_xoff.nic", "tx_priority_%d_xoff", "port.tx_priority_%d_xoff_tx"},
	// received pause duration, microseconds (mlx5)
	{"rx_prio%d_pause_duration"},
	// sent pause duration, microseconds (mlx5)
	{"tx_prio%d_pause_duration"},
}

// PFCStats reads one priority's PFC counters of a netdev from its ethtool
// statistics: mlx5's tx/rx_prioN_pause and their _duration (ConnectX), the
// ice and i40e drivers' XOFF counts (E810, X710: no durations).
type PFCStats struct {
	e    *EthtoolStats
	prio int
	idx  [4]int // into the values, -1 when the driver has no such counter
	vals []uint64
}

// OpenPFCStats opens netdev's PFC counters of priority prio. It fails when
// the driver exports no pause counter of the priority.
func OpenPFCStats(netdev string, prio int) (*PFCStats, error) {
	if prio < 0 || prio > 7 {
		return nil, fmt.Errorf("host: PFC priority %d: 0-7", prio)
	}
	e, err := OpenEthtoolStats(netdev)
	if err != nil {
		return nil, err
	}
	p := &PFCStats{e: e, prio: prio}
	if err := p.lookup(); err != nil {
		e.Close()
		return nil, err
	}
	return p, nil
}

// Close releases the ethtool socket.
func (p *PFCStats) Close() error { return p.e.Close() }

func (p *PFCStats) lookup() error {
	for k, names := range pfcNames {
		p.idx[k] = -1
		for _, f := range names {
			if i, ok := p.e.Index(fmt.Sprintf(f, p.prio)); ok {
				p.idx[k] = i
				break
			}
		}
	}
	if p.idx[0] < 0 {
		return fmt.Errorf("host: %s has no PFC pause counters of priority %d (tried %s and the like; `ethtool -S %s` lists its counters)",
			p.e.Netdev(), p.prio, fmt.Sprintf(pfcNames[0][0], p.prio), p.e.Netdev())
	}
	return nil
}

// Read returns the counters now.
func (p *PFCStats) Read() (PFCCounters, error) {
	vals, changed, err := p.e.Read(p.vals)
	p.vals = vals
	if err != nil {
		return PFCCounters{}, err
	}
	// After a reload that lost the counters, every read fails until a
	// reload brings them back.
	if changed || p.idx[0] < 0 {
		if err := p.lookup(); err != nil {
			return PFCCounters{}, err
		}
	}
	return pfcFrom(p.idx, vals), nil
}

// pfcFrom picks the counters out of values at the indexes idx.
func pfcFrom(idx [4]int, vals []uint64) PFCCounters {
	get := func(k int) uint64 {
		if i := idx[k]; i >= 0 && i < len(vals) {
			return vals[i]
		}
		return 0
	}
	// µs to ns, saturating: a counter past 292 years (a driver's garbage)
	// must not wrap to a negative duration.
	ns := func(us uint64) int64 {
		if us > math.MaxInt64/1000 {
			return math.MaxInt64
		}
		return int64(us) * 1000
	}
	return PFCCounters{RxPause: get(0), TxPause: get(1), RxPauseNs: ns(get(2)), TxPauseNs: ns(get(3)),
		Durations: idx[2] >= 0}
}
