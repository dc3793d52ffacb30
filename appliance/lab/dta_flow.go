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
	"github.com/rdma-appliance/appliance/internal/dtawire"
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

// offerTap is the switch's port toward the translator: it counts the
// reports the switch hands the translator's link, each in the RDMA
// packets it may cost (dtatranslator.Cost, the meter's unit), and when
// the first and the last new one passed, so the row shows the load the
// translator was really offered (not the reporters' configured rate)
// next to its meter. It counts on the wire, as a NIC's counters would,
// not when the translator's loop gets to a frame: the lab's goroutines
// share a few cores, and a translator kept off its core would otherwise
// seem to be offered less. A resend is told from a new report by its
// sequence number (under flow control only the high-priority reports are
// numbered): a numbered report behind the newest one seen from its
// reporter is a resend, counted apart. The bridge's goroutine calls
// TxBurst; the lab reads the counts under mu.
type offerTap struct {
	dpdk.Port
	mu          sync.Mutex
	counting    bool      // from when the reporters start
	first, last time.Time // the first and the last new report handed on
	// newCost and resentCost are the RDMA cost of the new reports and of
	// the resends handed on.
	newCost, resentCost uint64
	newReports, resent  uint64
	next                map[[4]byte]uint8 // per reporter: the sequence after the newest seen
	// seen are the burst's frames as read before they are handed on
	// (the translator may free a frame once the link took it).
	seen      []tapFrame
	parsed    header.Parsed
	rep       dtawire.Report
	format    dtawire.Format
	malformed uint64
}

// tapFrame is what the tap read of a frame: a report's cost, its
// sender and sequence when it is numbered.
type tapFrame struct {
	report, numbered bool
	cost             uint64
	src              [4]byte
	seq              uint8
}

// begin starts counting, when the reporters start.
func (t *offerTap) begin() {
	t.mu.Lock()
	t.counting, t.next = true, map[[4]byte]uint8{}
	t.mu.Unlock()
}

// TxBurst implements dpdk.Port: the frames go on to the translator's
// link as they came, and those the link took are counted.
func (t *offerTap) TxBurst(q int, pkts []*dpdk.Packet) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.counting {
		return t.Port.TxBurst(q, pkts)
	}
	t.seen = t.seen[:0]
	for _, p := range pkts {
		t.seen = append(t.seen, t.read(p.Data()))
	}
	n := t.Port.TxBurst(q, pkts)
	now := time.Now()
	for _, f := range t.seen[:n] {
		t.count(f, now)
	}
	return n
}

// read looks at one frame: anything but a report (ARP, the collector's
// ACKs) is not counted.
func (t *offerTap) read(f []byte) tapFrame {
	pp := &t.parsed
	if header.Decode(f, pp) != nil || pp.L3Proto != header.EtherTypeIPv4 || pp.L4Proto != 17 ||
		pp.UDP(f).DstPort() != dtawire.ReportPort {
		return tapFrame{}
	}
	if t.format.Parse(pp.Payload(f), &t.rep) != nil {
		t.malformed++
		return tapFrame{}
	}
	return tapFrame{report: true, numbered: t.rep.Retransmittable, cost: uint64(dtatranslator.Cost(&t.rep)),
		src: pp.IPv4(f).Src(), seq: t.rep.Seq}
}

// count adds a frame handed on at now.
func (t *offerTap) count(f tapFrame, now time.Time) {
	if !f.report {
		return
	}
	if f.numbered {
		if next, ok := t.next[f.src]; ok && int8(f.seq-next) < 0 {
			t.resent++
			t.resentCost += f.cost
			return
		}
		t.next[f.src] = f.seq + 1
	}
	if t.newReports == 0 {
		t.first = now
	}
	t.last = now
	t.newCost += f.cost
	t.newReports++
}

// tapCounts is what the tap counted, read at once.
type tapCounts struct {
	// Offered is the RDMA cost a second of the new reports handed to the
	// translator, from the first to the last (Over).
	Offered                            float64
	Over                               time.Duration
	New, Resent, ResentCost, Malformed uint64
}

func (t *offerTap) counts() tapCounts {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.last.Sub(t.first)
	return tapCounts{Offered: float64(t.newCost) / max(d.Seconds(), 1e-3), Over: d, New: t.newReports,
		Resent: t.resent, ResentCost: t.resentCost, Malformed: t.malformed}
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
// the reporters slowed down by the congestion notices, and the load the
// translator received at least 90% of the overload configured.
func (s *dtaStage) flowFigures(row *Row, st dtatranslator.Status, took time.Duration, chk dtaCheck, err error) error {
	f := s.flow
	var sent, high, slowed, notices, resent, held uint64
	var sending, windowWait int64
	for _, r := range s.reps {
		sending = max(sending, r.Stats.SendingNs)
		windowWait += r.Stats.WindowWaitNs
		sent += r.Stats.Sent
		high += r.Stats.SentHigh
		slowed += r.Stats.SentSlowed
		notices += r.Stats.Congestion
		resent += r.Stats.Resent
		held += r.Stats.Held
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
	// The load offered is what reached the translator's link in new
	// reports, from the first to the last, not what the reporters were
	// set to send.
	tc := s.tap.counts()
	offered := tc.Offered
	row.Ran = fmt.Sprintf("%d reporters x %d reports, %.0f%% high priority (retransmittable), over links losing %.1f%% of frames both ways, "+
		"into a translator metering its RDMA generation at %.0f packets/s; the RDMA side lossless. "+
		"The translator must receive at least 90%% of %gx its meter in new reports (the reporters are set to twice that: "+
		"a congestion notice halves their rate). High priority must all arrive; low priority be taken or dropped at the translator "+
		"(counted there) or lost on a link (counted at the link: the translator never sees it); reporters slow down on congestion notices",
		s.v.Reporters, f.Reports, 100*f.HighShare, 100*f.LinkLoss, f.Meter, f.Overload)
	row.Figure("reports", "%d", sent)
	row.Figure("meter", "%.0f RDMA packets/s", f.Meter)
	row.Figure("offered", "%.0f RDMA packets/s (%.2fx the meter) in %d new reports over %.2fs; %d resends (%d packets) apart; %d malformed",
		offered, offered/f.Meter, tc.New, tc.Over.Seconds(), tc.Resent, tc.ResentCost, tc.Malformed)
	row.Figure("report_rate", "%.0f/s configured unslowed, %.0f/s sent", s.reps[0].Rate()*float64(len(s.reps)),
		float64(sent)/max(time.Duration(sending).Seconds(), 1e-3))
	row.Figure("rdma_pkts", "%d in %.2fs", c.Conn.Packets, took.Seconds())
	row.Figure("high", "%d sent, %d taken, %d lost on links and resent, %d held for the window", high, tx.TakenHigh, lostHigh, held)
	row.Figure("low", "%d sent, %d taken, %d dropped at the translator, %d lost on links (counted at the link)",
		low, tx.TakenLow, tx.DroppedLow, lostLow)
	row.Figure("resent", "%d", resent)
	row.Figure("window_wait", "%.0fms", float64(windowWait)/1e6)
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
	if tc.Malformed > 0 {
		// The reporters send well-formed reports and the links lose
		// frames, never alter them.
		errs = append(errs, fmt.Errorf("%d frames to the translator's report port did not parse as reports", tc.Malformed))
	}
	if offered < 0.9*f.Overload*f.Meter {
		errs = append(errs, fmt.Errorf("the translator received %.0f RDMA packets/s in new reports, %.2fx its meter: below 90%% of the %gx overload",
			offered, offered/f.Meter, f.Overload))
	}
	if f.Overload > 1 && (tx.DroppedLow == 0 || notices == 0 || slowed == 0) {
		errs = append(errs, fmt.Errorf("overload without flow control: %d dropped, %d notices received, %d sent slowed",
			tx.DroppedLow, notices, slowed))
	}
	return errors.Join(errs...)
}
