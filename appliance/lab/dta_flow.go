package lab

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdma-appliance/appliance/collector/dtacollector"
	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/translator/dtatranslator"
)

// lossyPort is a lossy link at the switch's end of a reporter's port: it
// drops that share of the IPv4 frames in both directions (reports on
// their way in, ACKs, NACKs and congestion notices on their way out;
// never ARP), and counts what it dropped: reports by priority, so every
// low-priority report the translator never saw is accounted for. The
// bridge's goroutine uses it; the counters are read while it runs.
type lossyPort struct {
	dpdk.Port
	loss float64
	mu   sync.Mutex // the rng: Rx and Tx run on the bridge's goroutine, the lock keeps the race detector's view simple
	rng  *rand.Rand
	// LostHigh and LostLow are reports lost on the way in, LostAcks
	// the translator's answers lost on the way out.
	LostHigh, LostLow, LostAcks atomic.Uint64
}

// drop decides a frame's fate and counts it; in is a report's
// direction.
func (p *lossyPort) drop(f []byte, in bool) bool {
	if len(f) < header.EthernetHeaderLen+header.IPv4MinHeaderLen || header.Ethernet(f).EtherType() != header.EtherTypeIPv4 {
		return false
	}
	p.mu.Lock()
	lose := p.rng.Float64() < p.loss
	p.mu.Unlock()
	if !lose {
		return false
	}
	switch {
	case !in:
		p.LostAcks.Add(1)
	case int(header.IPv4(f[header.EthernetHeaderLen:]).DSCP()) >= dtatranslator.HighDSCP:
		p.LostHigh.Add(1)
	default:
		p.LostLow.Add(1)
	}
	return true
}

// RxBurst implements dpdk.Port: the reporter's frames, some lost.
func (p *lossyPort) RxBurst(q int, pkts []*dpdk.Packet) int {
	n := p.Port.RxBurst(q, pkts)
	k := 0
	for _, pkt := range pkts[:n] {
		if p.drop(pkt.Data(), true) {
			pkt.Free()
			continue
		}
		pkts[k] = pkt
		k++
	}
	return k
}

// TxBurst implements dpdk.Port: frames to the reporter, some lost (a
// lost frame counts as taken).
func (p *lossyPort) TxBurst(q int, pkts []*dpdk.Packet) int {
	for i, pkt := range pkts {
		if p.drop(pkt.Data(), false) {
			pkt.Free()
			continue
		}
		if p.Port.TxBurst(q, pkts[i:i+1]) == 0 {
			return i
		}
	}
	return len(pkts)
}

// checkHigh: nothing of the high-priority reports is missing at the
// collector: each list holds every high-priority entry in the order
// sent, and each Key-Increment count is at least its high-priority sum.
func checkHigh(coll *dtacollector.Collector, reps []*dtatranslator.Reporter, entries *listEntries) error {
	for i, r := range reps {
		id := uint32(i + 1)
		entries.mu.Lock()
		got := slices.Clone(entries.m[id])
		entries.mu.Unlock()
		if want := r.Truth.AppendHigh[id]; !subsequence(want, got) {
			return fmt.Errorf("list %d: %d entries read lack some of its %d high-priority ones", id, len(got), len(want))
		}
	}
	high := map[uint32]uint64{}
	for _, r := range reps {
		for k, n := range r.Truth.KeyIncrementHigh {
			high[k] += n
		}
	}
	for k, n := range high {
		res, err := coll.KeyIncrement(k)
		if err != nil {
			return err
		}
		if res.Count < n {
			return fmt.Errorf("key-increment %d: %d, below its high-priority reports' %d", k, res.Count, n)
		}
	}
	return nil
}

// flowFigures fills the dta-flow row and checks the accounting: every
// high-priority report taken by the translator (none lost), every
// low-priority one taken, dropped at the translator or lost on a link,
// and the reporters slowed down by the congestion notices.
func (s *dtaStage) flowFigures(row *Row, st dtatranslator.Status, took time.Duration, chk dtaCheck, err error) error {
	f := s.flow
	var sent, high, slowed, notices, resent uint64
	var elapsed int64
	for _, r := range s.reps {
		elapsed = max(elapsed, r.Stats.ElapsedNs)
		sent += r.Stats.Sent
		high += r.Stats.SentHigh
		slowed += r.Stats.SentSlowed
		notices += r.Stats.Congestion
		resent += r.Stats.Resent
	}
	var lostHigh, lostLow, lostAcks uint64
	for _, p := range s.lossy {
		lostHigh += p.LostHigh.Load()
		lostLow += p.LostLow.Load()
		lostAcks += p.LostAcks.Load()
	}
	low := sent - high
	tx := st.Stats
	c := st.Collectors[0]
	offered := f.Overload * f.Meter
	row.Ran = fmt.Sprintf("%d reporters x %d reports offering %.0fx the translator's RDMA meter of %.0f packets/s, "+
		"%.0f%% high priority (retransmittable), over links losing %.1f%% of frames both ways; the RDMA side lossless. "+
		"High priority must all arrive, low priority be taken, dropped at the translator or lost on a link (each counted), "+
		"reporters slow down on congestion notices", s.v.Reporters, f.Reports, f.Overload, f.Meter, 100*f.HighShare, 100*f.LinkLoss)
	row.Figure("reports", "%d", sent)
	row.Figure("offered_rdma", "%.0f/s", offered)
	// What the reporters managed: their window of unacknowledged
	// high-priority reports and the notices hold them back.
	row.Figure("report_rate", "%.0f/s configured, %.0f/s sent", s.reps[0].Rate()*float64(len(s.reps)),
		float64(sent)/(float64(max(elapsed, 1))/1e9))
	row.Figure("rdma_pkts", "%d in %.2fs", c.Conn.Packets, took.Seconds())
	row.Figure("high", "%d sent, %d taken, %d lost on links and resent", high, tx.TakenHigh, lostHigh)
	row.Figure("low", "%d sent, %d taken, %d dropped at the translator, %d lost on links", low, tx.TakenLow, tx.DroppedLow, lostLow)
	row.Figure("resent", "%d", resent)
	row.Figure("queued_high", "%d", tx.Queued)
	row.Figure("notices", "%d sent, %d received", tx.Notices, notices)
	row.Figure("slowed", "%.0f%% of reports sent at half rate", 100*float64(slowed)/float64(max(sent, 1)))
	row.Figure("acks_lost", "%d", lostAcks)
	row.Figure("key_write", "%d/%d", chk.kwFound, chk.kwKeys)
	row.Figure("append", "%d", chk.appended)
	row.Figure("short", "key_incr:%d,list_entries:%d,sketch:%d", chk.kiShort, chk.listShort, chk.skShort)
	row.Figure("rdma_lost", "%d", c.LostPSNs)
	if s.l.Netns {
		row.Ran += "; each on an AF_PACKET port in its own network namespace, switched over veth pairs " +
			"(the kernel drops frames under load: high-priority answers may fall short only by the RDMA packets the translator lost, rdma_lost)"
	}
	var errs []error
	// Over veth the kernel may drop RDMA frames too (its backlog is not
	// PFC): there, and only with RDMA packets lost, a high-priority
	// answer may fall short.
	if err != nil && !(s.l.Netns && c.LostPSNs > 0) {
		errs = append(errs, err)
	}
	if tx.TakenHigh != high {
		errs = append(errs, fmt.Errorf("%d high-priority reports taken, %d sent", tx.TakenHigh, high))
	}
	if tx.TakenLow+tx.DroppedLow+lostLow != low {
		errs = append(errs, fmt.Errorf("low priority unaccounted: %d taken + %d dropped + %d lost on links != %d sent",
			tx.TakenLow, tx.DroppedLow, lostLow, low))
	}
	if c.LostPSNs != 0 && !s.l.Netns {
		errs = append(errs, fmt.Errorf("%d RDMA packets lost on the lossless side", c.LostPSNs))
	}
	if f.Overload > 1 && (tx.DroppedLow == 0 || notices == 0 || slowed == 0) {
		errs = append(errs, fmt.Errorf("overload without flow control: %d dropped, %d notices received, %d sent slowed",
			tx.DroppedLow, notices, slowed))
	}
	return errors.Join(errs...)
}
