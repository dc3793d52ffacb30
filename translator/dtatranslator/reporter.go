package dtatranslator

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/internal/dtamem"
	"github.com/rdma-appliance/appliance/internal/dtawire"
)

// ReporterConfig configures the reporter emulator: a switch's stream of
// DTA reports at a rate, over a key distribution, in a mix of
// primitives, with priorities and deliberate loss.
type ReporterConfig struct {
	// ID numbers the reporter (its Sketch-Merge reporter id).
	ID uint16
	// Src and Dst: the reporter's and the translator's MAC and IPv4
	// addresses.
	SrcMAC, DstMAC header.MAC
	SrcIP, DstIP   netip.Addr
	Format         dtawire.Format

	// Mix weighs the primitives: how many of each in every sum(Mix)
	// reports. Sketch-Merge reports carry the reporter's sketch a
	// column at a time, SketchEvery reports of other kinds apart.
	Mix struct {
		KeyWrite, Append, KeyIncrement, Postcarder int
	}
	// Keys is the key space; Zipf > 1 draws keys with that skew
	// (uniform otherwise).
	Keys uint32
	Zipf float64
	// Redundancy is N of Key-Write and Key-Increment.
	Redundancy uint8
	// Lists are the Append list ids, drawn uniformly.
	Lists []uint32
	// Hops is the Postcarder path length: a flow's postcards come as
	// Hops reports in a row.
	Hops int
	// Sketch, when set, is a sketch region's geometry this reporter
	// keeps over the keys it reports (Key-Write keys counted for
	// Count-Min, Key-Increment keys for HyperLogLog) and sends as
	// SketchID at the end of every epoch of SketchEpoch reports, a column
	// a report, and at the end of the run.
	Sketch      *dtamem.SketchRegion
	SketchID    uint16
	SketchEpoch int

	// Retransmittable numbers reports and keeps the last Window for
	// NACKs; Immediate sets the immediate flag on Key-Writes.
	Retransmittable bool
	Immediate       bool
	// HighShare of reports are sent with DSCP 46 (high priority).
	HighShare float64
	// HighOnly numbers (makes retransmittable) only the high-priority
	// reports, as the DTA paper has it: reporters keep the critical
	// reports for resending, and the rest may be dropped under
	// congestion. Needs Retransmittable. A full window then holds back
	// the high-priority reports alone (up to Window of them wait, in
	// order, for room); the low-priority ones go on at the rate, as a
	// switch's telemetry does not stop for its retransmission buffer.
	HighOnly bool
	// Loss drops this share of reports before they leave (the first
	// transmission only), to exercise the translator's NACKs.
	Loss float64

	// Rate is reports a second (0: as fast as the port takes them);
	// Count stops after that many reports (0: until the context ends).
	Rate  float64
	Count uint64
	Seed  uint64
	Burst int
	// CatchUp is how far behind its schedule a paced reporter may fall
	// and still make up for it with a burst (default 10 ms, the Go
	// scheduler's preemption quantum: a goroutine woken from its sleep
	// on a host whose cores are all busy may wait that long for one). A
	// longer stall (a full window, a paused port) is not made up for.
	CatchUp time.Duration
}

// Window is how many reports a reporter keeps for resending: half the
// 8-bit sequence space, so a NACK's number is never ambiguous.
const Window = 128

// ReporterStats are the emulator's counters.
type ReporterStats struct {
	Sent         uint64    `json:"sent"`
	ByOpcode     [6]uint64 `json:"by_opcode"`
	Lost         uint64    `json:"lost"` // dropped on purpose (Loss)
	Resent       uint64    `json:"resent"`
	ACKs         uint64    `json:"acks"`
	NACKs        uint64    `json:"nacks"`
	Congestion   uint64    `json:"congestion_notices"`
	Unresendable uint64    `json:"unresendable"` // NACKs for reports no longer kept
	// NACKsInFlight counts NACKs not acted on: a resend from the number
	// they name had gone out less than RetransmitTimeout before.
	NACKsInFlight uint64 `json:"nacks_in_flight"`
	// Timeouts counts the window's resends for want of an ACK.
	Timeouts uint64 `json:"timeouts"`
	// SentHigh counts the reports sent at high priority (first
	// transmissions); SentSlowed those sent while a congestion notice
	// had the rate halved.
	SentHigh   uint64 `json:"sent_high"`
	SentSlowed uint64 `json:"sent_slowed"`
	// Held counts the high-priority reports (HighOnly) that waited for
	// room in the window while low-priority ones went on; WindowWaitNs
	// is how long the whole reporter waited for a full window (every
	// report, or with HighOnly a full hold as well).
	Held         uint64 `json:"held"`
	WindowWaitNs int64  `json:"window_wait_ns"`
	// SendingNs is how long the reports took to go out, first
	// transmissions only: ElapsedNs less the lingering for the last
	// ACKs and NACKs.
	SendingNs int64  `json:"sending_ns"`
	TxDropped uint64 `json:"tx_dropped"`
	// Unacknowledged is how many reports the translator had not
	// acknowledged when Run returned (with those still held, never
	// sent): if it did not take them, they are lost.
	Unacknowledged uint64 `json:"unacknowledged"`
	ElapsedNs      int64  `json:"elapsed_ns"`
}

// Truth is what the reports said: what a collector should answer.
type Truth struct {
	KeyWrite map[uint32]uint32 // last data per key
	// KeyWriteAll is every value each key was reported with, in order:
	// where the translator lost the newest one's RDMA packets (it keeps
	// none to resend), a query finds an older value, which is stale,
	// not wrong.
	KeyWriteAll  map[uint32][]uint32
	KeyIncrement map[uint32]uint64   // sum per key
	Append       map[uint32][]uint32 // entries per list, in order
	Postcards    map[uint32][]uint32 // paths per flow key
	// AppendHigh and KeyIncrementHigh are the Append entries and
	// Key-Increment sums of the high-priority reports alone: what no
	// congestion may take away.
	AppendHigh       map[uint32][]uint32
	KeyIncrementHigh map[uint32]uint64
	Sketch           *dtamem.Sketch // the reporter's sketch of the last epoch sent
}

// Reporter is the emulator. One goroutine runs it.
type Reporter struct {
	cfg   ReporterConfig
	port  dpdk.Port
	pool  *dpdk.Pool
	cache *dpdk.Cache // Run's, in front of pool
	rng   *rand.Rand
	zipf  *rand.Zipf
	total int
	Stats ReporterStats
	// Truth is what was reported; read it after Run.
	Truth Truth

	seq     uint8
	kept    [256][maxQueued]byte // by sequence
	keptLen [256]uint16
	// keptDSCP is each kept report's priority.
	keptDSCP [256]uint8
	oldest   uint8 // oldest sequence not yet ACKed
	// held are the high-priority reports waiting for room in the window
	// (HighOnly), encoded without their sequence number, oldest first.
	held     [Window][maxQueued]byte
	heldLen  [Window]uint16
	heldHead int
	heldN    int
	parsedRp dtawire.Report // a held report, parsed back to be numbered
	frame    [2048]byte
	tx       []*dpdk.Packet
	rx       []*dpdk.Packet
	parsed   header.Parsed
	slow     int64 // until when the rate is halved (congestion notice), ns since start
	start    time.Time
	now      int64 // ns since start, read once a report
	// lastAck is when the window last moved, lastResend when it was last
	// resent (on a timeout or a NACK), and resentFrom the number that
	// resend started from.
	lastAck, lastResend time.Time
	resentFrom          uint8
	// rto is the retransmission timeout: from the round trips measured
	// (srtt, rttvar), doubled by every timeout that goes unanswered up
	// to MaxRetransmitTimeout. sentAt is when each kept report first went
	// out, resent whether it was sent again since (its ACK then times
	// no round trip: Karn's rule).
	rto, srtt, rttvar time.Duration
	sentAt            [256]time.Time
	resent            [256]bool

	flow     uint32 // Postcarder: the flow being reported and its next hop
	hop      int
	sketch   *dtamem.Sketch // the epoch's sketch
	inEpoch  int            // reports in the epoch so far
	counters [4 * dtawire.MaxSketchCounters]byte
}

// NewReporter makes the emulator on an open port.
func NewReporter(cfg ReporterConfig, port dpdk.Port, pool *dpdk.Pool) (*Reporter, error) {
	if err := cfg.Format.Validate(); err != nil {
		return nil, err
	}
	if !cfg.SrcIP.Is4() || !cfg.DstIP.Is4() {
		return nil, errors.New("dta: reporter: IPv4 addresses for the reporter and the translator")
	}
	m := cfg.Mix
	if m.KeyWrite < 0 || m.Append < 0 || m.KeyIncrement < 0 || m.Postcarder < 0 {
		return nil, errors.New("dta: reporter: negative mix weight")
	}
	if cfg.Keys == 0 {
		cfg.Keys = 1 << 16
	}
	if cfg.Redundancy == 0 {
		cfg.Redundancy = 2
	}
	if cfg.Redundancy > dtawire.MaxRedundancy {
		return nil, fmt.Errorf("dta: reporter: redundancy %d: 1..%d", cfg.Redundancy, dtawire.MaxRedundancy)
	}
	if m.Append > 0 && len(cfg.Lists) == 0 {
		return nil, errors.New("dta: reporter: Append in the mix but no lists")
	}
	if cfg.Hops == 0 {
		cfg.Hops = 5
	}
	if m.Postcarder > 0 && (cfg.Hops < 1 || cfg.Hops > dtamem.MaxHops) {
		return nil, fmt.Errorf("dta: reporter: hops %d: 1..%d", cfg.Hops, dtamem.MaxHops)
	}
	if cfg.Sketch != nil {
		if err := cfg.Sketch.Validate(); err != nil {
			return nil, fmt.Errorf("dta: reporter: sketch: %w", err)
		}
		if cfg.SketchEpoch < 0 {
			return nil, errors.New("dta: reporter: negative sketch epoch")
		}
	}
	if cfg.Loss < 0 || cfg.Loss >= 1 || cfg.HighShare < 0 || cfg.HighShare > 1 {
		return nil, errors.New("dta: reporter: loss in [0,1) and high share in [0,1]")
	}
	if cfg.HighOnly && !cfg.Retransmittable {
		return nil, errors.New("dta: reporter: high-only retransmission without retransmittable reports")
	}
	if cfg.Burst <= 0 {
		cfg.Burst = 32
	}
	if cfg.CatchUp <= 0 {
		// With 1 ms, reporters on a loaded two-core machine sent a
		// sixth under their rate (the lab's dta-flow row).
		cfg.CatchUp = 10 * time.Millisecond
	}
	r := &Reporter{cfg: cfg, port: port, pool: pool, rng: rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.ID))),
		total: m.KeyWrite + m.Append + m.KeyIncrement + m.Postcarder,
		tx:    make([]*dpdk.Packet, 0, cfg.Burst), rx: make([]*dpdk.Packet, cfg.Burst),
		Truth: Truth{KeyWrite: map[uint32]uint32{}, KeyWriteAll: map[uint32][]uint32{}, KeyIncrement: map[uint32]uint64{}, Append: map[uint32][]uint32{},
			Postcards: map[uint32][]uint32{}, AppendHigh: map[uint32][]uint32{}, KeyIncrementHigh: map[uint32]uint64{}}}
	if r.total == 0 {
		return nil, errors.New("dta: reporter: an empty mix")
	}
	if cfg.Zipf > 1 {
		r.zipf = rand.NewZipf(r.rng, cfg.Zipf, 1, uint64(cfg.Keys-1))
	}
	if cfg.Sketch != nil {
		r.sketch = dtamem.NewSketch(cfg.Sketch)
	}
	r.oldest = r.seq
	r.lastAck = time.Now()
	r.rto = RetransmitTimeout
	return r, nil
}

// Run sends reports until Count is reached or ctx ends, handling the
// translator's ACKs, NACKs and congestion notices as it goes, and waits
// up to linger after the last report for NACKs to answer: a reporter of
// retransmittable reports stops waiting once every report is
// acknowledged (Stats.Unacknowledged counts those that were not).
func (r *Reporter) Run(ctx context.Context, linger time.Duration) error {
	start := time.Now()
	r.start = start
	r.cache = r.pool.NewCache(r.cfg.Burst)
	defer func() { r.flush(); r.cache.Flush(); r.cache = nil }()
	defer func() { r.Stats.ElapsedNs = time.Since(start).Nanoseconds() }()
	var next float64 // when the next report is due, ns since start
	// A flow's postcards go out together: the last flow is finished.
	for ctx.Err() == nil && (r.cfg.Count == 0 || r.Stats.Sent < r.cfg.Count || r.hop > 0) {
		r.receive()
		if err := r.release(); err != nil {
			return err
		}
		r.now = time.Since(start).Nanoseconds()
		now := float64(r.now)
		if r.cfg.Rate > 0 {
			if now < next {
				r.flush()
				if d := time.Duration(next - now); d > 50*time.Microsecond {
					time.Sleep(d)
				}
				continue
			}
			gap := 1e9 / r.cfg.Rate
			if int64(now) < r.slow {
				gap *= 2
			}
			next = max(next+gap, now-float64(r.cfg.CatchUp))
		}
		if err := r.one(); err != nil {
			return err
		}
	}
	if r.sketch != nil && (r.inEpoch > 0 || r.Truth.Sketch == nil) && ctx.Err() == nil {
		if err := r.sendSketch(); err != nil {
			return err
		}
	}
	r.flush()
	r.Stats.SendingNs = time.Since(start).Nanoseconds()
	// Linger for NACKs, and resend a tail no ACK has covered: lost last
	// reports leave the translator no gap to see. Held reports go out as
	// the window opens.
	defer func() {
		if r.cfg.Retransmittable {
			r.Stats.Unacknowledged = uint64(uint8(r.seq-r.oldest)) + uint64(r.heldN)
		}
	}()
	for deadline := time.Now().Add(linger); time.Now().Before(deadline) && ctx.Err() == nil; {
		if r.cfg.Retransmittable && r.seq == r.oldest && r.heldN == 0 {
			break // the translator took every report
		}
		if r.receive() == 0 {
			time.Sleep(100 * time.Microsecond)
		}
		if err := r.release(); err != nil {
			return err
		}
		if r.cfg.Retransmittable && r.seq != r.oldest && r.timedOut() {
			r.resendOnTimeout()
		}
		r.flush()
	}
	return nil
}

// key draws a key.
func (r *Reporter) key() uint32 {
	if r.zipf != nil {
		return uint32(r.zipf.Uint64()) + 1
	}
	return 1 + r.rng.Uint32N(r.cfg.Keys)
}

// one builds and sends the next report.
func (r *Reporter) one() error {
	if r.hop > 0 {
		rep := r.postcard()
		return r.send(&rep)
	}
	var rep dtawire.Report
	var data [4]byte
	k := r.sketch
	m := r.cfg.Mix
	switch w := r.rng.IntN(r.total); {
	case w < m.KeyWrite:
		key := r.key()
		v := r.rng.Uint32()
		binary.BigEndian.PutUint32(data[:], v)
		rep = dtawire.Report{Opcode: dtawire.OpKeyWrite, Redundancy: r.cfg.Redundancy, Key: key, Data: data[:], Immediate: r.cfg.Immediate}
		r.Truth.KeyWrite[key] = v
		r.Truth.KeyWriteAll[key] = append(r.Truth.KeyWriteAll[key], v)
		if k != nil && k.Kind == dtawire.SketchCountMin {
			k.Add(key, 1)
		}
	case w < m.KeyWrite+m.Append:
		list := r.cfg.Lists[r.rng.IntN(len(r.cfg.Lists))]
		v := r.rng.Uint32()
		binary.BigEndian.PutUint32(data[:], v)
		rep = dtawire.Report{Opcode: dtawire.OpAppend, ListID: list, Data: data[:]}
		r.Truth.Append[list] = append(r.Truth.Append[list], v)
	case w < m.KeyWrite+m.Append+m.KeyIncrement:
		key := r.key()
		n := uint64(1 + r.rng.IntN(1500))
		rep = dtawire.Report{Opcode: dtawire.OpKeyIncrement, Redundancy: r.cfg.Redundancy, Key: key, Counter: n}
		r.Truth.KeyIncrement[key] += n
		if k != nil && k.Kind == dtawire.SketchHyperLogLog {
			k.Add(key, 0)
		}
	default:
		r.flow = r.key()
		rep = r.postcard()
	}
	if err := r.send(&rep); err != nil {
		return err
	}
	if k != nil {
		r.inEpoch++
		if r.cfg.SketchEpoch > 0 && r.inEpoch >= r.cfg.SketchEpoch && r.hop == 0 {
			return r.sendSketch()
		}
	}
	return nil
}

// sendSketch ends an epoch: the sketch goes out a column a report and
// starts again empty.
func (r *Reporter) sendSketch() error {
	k := r.sketch
	for c := uint32(0); c < k.Columns; c++ {
		var rep dtawire.Report
		k.Report(&rep, r.cfg.SketchID, r.cfg.ID, c, r.counters[:])
		if err := r.send(&rep); err != nil {
			return err
		}
	}
	sent := &dtamem.Sketch{Kind: k.Kind, Columns: k.Columns, Rows: k.Rows, C: append([]uint32(nil), k.C...)}
	r.Truth.Sketch = sent
	k.Reset()
	r.inEpoch = 0
	return nil
}

// postcard is the current flow's next hop.
func (r *Reporter) postcard() dtawire.Report {
	var d [4]byte
	v := r.flow*1000 + uint32(r.hop)
	binary.BigEndian.PutUint32(d[:], v)
	path := r.Truth.Postcards[r.flow]
	if r.hop == 0 || len(path) != r.cfg.Hops {
		path = make([]uint32, r.cfg.Hops)
	}
	path[r.hop] = v
	r.Truth.Postcards[r.flow] = path
	rep := dtawire.Report{Opcode: dtawire.OpPostcarder, Key: r.flow, Hop: uint8(r.hop), Data: d[:]}
	r.hop = (r.hop + 1) % r.cfg.Hops
	return rep
}

// send encodes a report, keeps it when retransmittable, and transmits it
// unless Loss drops it; with HighOnly, a high-priority report that finds
// the window full (or others held before it) is held until there is room.
func (r *Reporter) send(rep *dtawire.Report) error {
	var dscp uint8
	if r.cfg.HighShare > 0 && r.rng.Float64() < r.cfg.HighShare {
		dscp = HighDSCP
	}
	// With HighOnly, a low-priority report goes unnumbered: the
	// translator may drop it under congestion (counted there) and
	// nobody asks for it again.
	numbered := r.cfg.Retransmittable && (!r.cfg.HighOnly || dscp == HighDSCP)
	rep.Retransmittable = numbered
	var err error
	switch {
	case numbered && r.cfg.HighOnly && (r.heldN > 0 || uint8(r.seq-r.oldest) >= Window):
		err = r.hold(rep)
	case numbered:
		r.waitWindow()
		err = r.emit(rep, dscp)
	default:
		err = r.emit(rep, dscp)
	}
	if err != nil {
		return err
	}
	r.Stats.Sent++
	r.Stats.ByOpcode[rep.Opcode]++
	if dscp == HighDSCP {
		r.Stats.SentHigh++
		switch rep.Opcode {
		case dtawire.OpAppend:
			r.Truth.AppendHigh[rep.ListID] = append(r.Truth.AppendHigh[rep.ListID], binary.BigEndian.Uint32(rep.Data))
		case dtawire.OpKeyIncrement:
			r.Truth.KeyIncrementHigh[rep.Key] += rep.Counter
		}
	}
	if r.now < r.slow {
		r.Stats.SentSlowed++
	}
	return nil
}

// emit encodes a report (numbered with the next sequence when it is
// retransmittable), keeps it, and transmits it unless Loss drops it.
func (r *Reporter) emit(rep *dtawire.Report, dscp uint8) error {
	if rep.Retransmittable {
		rep.Seq = r.seq
	}
	n, err := r.cfg.Format.Encode(r.kept[r.seq][:], rep)
	if err != nil {
		return err
	}
	r.keptLen[r.seq] = uint16(n)
	r.keptDSCP[r.seq] = dscp
	payload := r.kept[r.seq][:n]
	if rep.Retransmittable {
		r.sentAt[r.seq], r.resent[r.seq] = time.Now(), false
		r.seq++
	}
	if r.cfg.Loss > 0 && r.rng.Float64() < r.cfg.Loss {
		r.Stats.Lost++
		return nil
	}
	r.transmit(payload, dscp)
	return nil
}

// hold keeps a high-priority report until the window has room for it,
// behind those already held; with Window of them held, it waits for
// room (the reporter's buffer is full: everything waits).
func (r *Reporter) hold(rep *dtawire.Report) error {
	if r.heldN == Window {
		r.waitWindow()
		if err := r.release(); err != nil {
			return err
		}
	}
	i := (r.heldHead + r.heldN) % Window
	n, err := r.cfg.Format.Encode(r.held[i][:], rep)
	if err != nil {
		return err
	}
	r.heldLen[i] = uint16(n)
	r.heldN++
	r.Stats.Held++
	return nil
}

// release numbers and sends the held reports, oldest first, while the
// window has room.
func (r *Reporter) release() error {
	for r.heldN > 0 && uint8(r.seq-r.oldest) < Window {
		h := r.held[r.heldHead][:r.heldLen[r.heldHead]]
		if err := r.cfg.Format.Parse(h, &r.parsedRp); err != nil {
			return err
		}
		r.parsedRp.Retransmittable = true
		// Encoded into the kept slot, which does not overlap the held
		// bytes the parsed report points into.
		if err := r.emit(&r.parsedRp, HighDSCP); err != nil {
			return err
		}
		r.heldHead = (r.heldHead + 1) % Window
		r.heldN--
	}
	return nil
}

// HighDSCP is the DSCP of the reporter's high-priority reports (EF, the
// translator's default threshold).
const HighDSCP = 46

// RetransmitTimeout is how long a reporter waits at least for an ACK
// before it resends its unacknowledged reports. Longer round trips
// lengthen the wait, as TCP's (RFC 6298: the smoothed round trip plus
// four times its variation, from ACKs of reports sent once), each resend
// that goes unanswered doubles it up to MaxRetransmitTimeout, and an ACK
// or a NACK brings it back. With a fixed 5 ms a translator behind its
// reports (a busy host, a paused port) got a window of resends every
// 5 ms, queued in front of what it had to answer: under the race
// detector on a loaded machine TestServiceBackpressure's reporter resent
// 1.4 million reports for 8000, waited more than a second for an ACK,
// gave up its oldest reports, and never had the rest acknowledged.
const (
	RetransmitTimeout    = 5 * time.Millisecond
	MaxRetransmitTimeout = 500 * time.Millisecond
)

// baseRTO is the retransmission timeout the round trips measured call
// for, without backoff.
func (r *Reporter) baseRTO() time.Duration {
	return min(max(RetransmitTimeout, r.srtt+4*r.rttvar), MaxRetransmitTimeout)
}

// sampleRTT takes the round trip of the report an ACK names, unless it
// was resent.
func (r *Reporter) sampleRTT(seq uint8) {
	if r.resent[seq] || r.sentAt[seq].IsZero() {
		return
	}
	rtt := time.Since(r.sentAt[seq])
	if r.srtt == 0 {
		r.srtt, r.rttvar = rtt, rtt/2
		return
	}
	d := r.srtt - rtt
	if d < 0 {
		d = -d
	}
	r.rttvar = (3*r.rttvar + d) / 4
	r.srtt = (7*r.srtt + rtt) / 8
}

// timedOut: nothing acknowledged and nothing resent for the current
// retransmission timeout.
func (r *Reporter) timedOut() bool {
	return time.Since(r.lastAck) > r.rto && time.Since(r.lastResend) > r.rto
}

// resendOnTimeout resends the window and backs the timeout off.
func (r *Reporter) resendOnTimeout() {
	r.resend(r.oldest)
	r.Stats.Timeouts++
	r.rto = min(2*r.rto, MaxRetransmitTimeout)
}

// giveUpAfter is how long a full window waits for an ACK before its
// oldest report is given up: four of the longest retransmission timeouts.
const giveUpAfter = 4 * MaxRetransmitTimeout

// waitWindow holds the next report while Window reports await their ACK,
// resending them on timeout; after giveUpAfter without an ACK, the oldest
// is given up (counted when a NACK asks for it).
func (r *Reporter) waitWindow() {
	if uint8(r.seq-r.oldest) < Window {
		return
	}
	r.flush()
	start := time.Now()
	defer func() { r.Stats.WindowWaitNs += time.Since(start).Nanoseconds() }()
	for uint8(r.seq-r.oldest) >= Window {
		if r.receive() == 0 {
			time.Sleep(20 * time.Microsecond)
		}
		switch waited := time.Since(start); {
		case waited > giveUpAfter:
			r.oldest = r.seq - Window + 1
		case r.timedOut():
			r.resendOnTimeout()
		}
	}
}

// resend transmits every kept report from seq on (go-back-N).
func (r *Reporter) resend(seq uint8) {
	for s := seq; s != r.seq; s++ {
		// At the priority it was first sent with: a high-priority
		// report resent as low would be dropped under the congestion
		// that may have lost it.
		r.transmit(r.kept[s][:r.keptLen[s]], r.keptDSCP[s])
		r.resent[s] = true
		r.Stats.Resent++
	}
	r.flush()
	r.lastResend, r.resentFrom = time.Now(), seq
}

// transmit queues one report datagram.
func (r *Reporter) transmit(payload []byte, dscp uint8) {
	n, err := WriteUDP4(r.frame[:], r.cfg.SrcMAC, r.cfg.DstMAC, r.cfg.SrcIP.As4(), r.cfg.DstIP.As4(),
		dtawire.GeneratorPort, dtawire.ReportPort, dscp, payload)
	if err != nil {
		r.Stats.TxDropped++
		return
	}
	p := r.get()
	for tries := 0; p == nil && tries < 1000; tries++ {
		r.flush()
		time.Sleep(10 * time.Microsecond)
		p = r.get()
	}
	if p == nil {
		r.Stats.TxDropped++
		return
	}
	p.CopyFrom(r.frame[:n])
	r.tx = append(r.tx, p)
	if len(r.tx) == cap(r.tx) {
		r.flush()
	}
}

// get takes a packet buffer from Run's cache, or from the pool outside Run.
func (r *Reporter) get() *dpdk.Packet {
	if r.cache == nil {
		return r.pool.Get()
	}
	return r.cache.Get()
}

// flush transmits queued datagrams, waiting a little for a full port.
func (r *Reporter) flush() {
	for tries := 0; len(r.tx) > 0; tries++ {
		n := r.port.TxBurst(0, r.tx)
		r.tx = r.tx[:copy(r.tx, r.tx[n:])]
		if n == 0 {
			if tries > 10000 {
				r.Stats.TxDropped += uint64(len(r.tx))
				dpdk.FreeBulk(r.tx)
				r.tx = r.tx[:0]
				return
			}
			time.Sleep(5 * time.Microsecond)
		}
	}
}

// receive handles the translator's answers; it returns how many frames
// it read.
func (r *Reporter) receive() int {
	n := r.port.RxBurst(0, r.rx)
	for _, p := range r.rx[:n] {
		frame := p.Data()
		if header.Decode(frame, &r.parsed) != nil || r.parsed.L4Proto != 17 ||
			r.parsed.UDP(frame).DstPort() != dtawire.AckPort {
			continue
		}
		a, err := dtawire.ParseAck(r.parsed.Payload(frame))
		if err != nil {
			continue
		}
		r.answer(a)
	}
	dpdk.FreeBulk(r.rx[:n])
	return n
}

// answer applies an ACK, a NACK (resend from its number, go-back-N) or a
// congestion notice (halve the rate for 10 ms).
func (r *Reporter) answer(a dtawire.Ack) {
	switch {
	case a.Congested:
		r.Stats.Congestion++
		r.slow = time.Since(r.start).Nanoseconds() + int64(10*time.Millisecond)
	case a.NACK:
		r.Stats.NACKs++
		if !r.cfg.Retransmittable {
			return
		}
		// Only numbers within the kept window can be resent.
		if uint8(a.Seq-r.oldest) >= uint8(r.seq-r.oldest) {
			r.Stats.Unresendable++
			return
		}
		// The translator repeats its NACK every NACK interval (1 ms)
		// while the gap stands, which on a loaded host is shorter than
		// the way there and back: a resend from that number that went
		// out less than RetransmitTimeout ago is on its way, and another
		// would add a window of duplicates (and as many ACKs) to a
		// translator already behind. Should that resend be lost, the
		// NACK after RetransmitTimeout asks again.
		if a.Seq == r.resentFrom && time.Since(r.lastResend) < RetransmitTimeout {
			r.Stats.NACKsInFlight++
			return
		}
		r.oldest = a.Seq
		r.lastAck, r.rto = time.Now(), r.baseRTO()
		r.resend(a.Seq)
	default:
		r.Stats.ACKs++
		if r.cfg.Retransmittable && uint8(a.Seq-r.oldest) < uint8(r.seq-r.oldest) {
			r.sampleRTT(a.Seq)
			r.oldest = a.Seq + 1
			r.lastAck, r.rto = time.Now(), r.baseRTO()
		}
	}
}

// Rate is the reports a second the reporter was configured to send (0:
// as fast as it can).
func (r *Reporter) Rate() float64 { return r.cfg.Rate }

// RateOf is reports a second over the run.
func (s *ReporterStats) RateOf() float64 {
	if s.ElapsedNs == 0 {
		return math.NaN()
	}
	return float64(s.Sent) / (float64(s.ElapsedNs) / 1e9)
}

// Resolve finds the translator's MAC with ARP when DstMAC is unset,
// asking every 100 ms until ctx ends.
func (r *Reporter) Resolve(ctx context.Context) error {
	if r.cfg.DstMAC != (header.MAC{}) {
		return nil
	}
	var a header.Parsed
	for tick := time.NewTicker(100 * time.Millisecond); ; {
		n, err := header.WriteARPRequest(r.frame[:], r.cfg.SrcMAC, r.cfg.SrcIP.As4(), r.cfg.DstIP.As4())
		if err != nil {
			return err
		}
		if p := r.pool.Get(); p != nil {
			p.CopyFrom(r.frame[:n])
			r.tx = append(r.tx, p)
			r.flush()
		}
		deadline := time.Now().Add(100 * time.Millisecond)
		for time.Now().Before(deadline) {
			m := r.port.RxBurst(0, r.rx)
			for _, p := range r.rx[:m] {
				f := p.Data()
				if header.Decode(f, &a) == nil && a.L3Proto == header.EtherTypeARP {
					arp := a.ARP(f)
					if arp.IsValid() && arp.Op() == 2 && arp.SenderIP() == r.cfg.DstIP.As4() {
						r.cfg.DstMAC = arp.SenderMAC()
					}
				}
			}
			dpdk.FreeBulk(r.rx[:m])
			if r.cfg.DstMAC != (header.MAC{}) {
				tick.Stop()
				return nil
			}
			time.Sleep(time.Millisecond)
		}
		select {
		case <-ctx.Done():
			tick.Stop()
			return fmt.Errorf("dta: reporter: no ARP answer for the translator %v: %w", r.cfg.DstIP, ctx.Err())
		case <-tick.C:
		}
	}
}
