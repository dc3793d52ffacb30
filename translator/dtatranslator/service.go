package dtatranslator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/internal/dtamem"
	"github.com/rdma-appliance/appliance/internal/dtawire"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// Service is the software translator: one loop polls a packet port,
// turns the DTA reports that arrive into RDMA operations on one RC
// connection per collector, feeds the collectors' ACKs and NAKs back to
// those connections, answers ARP for its address and ACKs, NACKs and
// congestion notices to reporters. A goroutine per collector sets its
// connection up through the exchange and again whenever the collector
// goes away (a restart): reports for a collector that is down are counted
// and dropped, and each new connection reports the window it lost.
type Service struct {
	spec Spec
	port dpdk.Port
	pool *dpdk.Pool
	// cache keeps the transmit path off the pool's lock: one refill per
	// cache of frames, not one lock per frame.
	cache  *dpdk.Cache
	log    *slog.Logger
	format dtawire.Format
	ip     [4]byte
	addr   netip.Addr
	mac    header.MAC

	colls  []*collector
	events chan collEvent
	seq    *SeqTracker
	meter  Meter
	queue  reportQueue // high-priority reports waiting for the meter
	// atomics are Key-Increment reports waiting for the collector's
	// atomic window: apart from queue, so they hold up nothing else.
	atomics reportQueue
	notice  map[netip.Addr]int64 // last congestion notice per reporter

	rx, tx []*dpdk.Packet
	// stalled: the port has not taken all the last frames; busy: not
	// even room for a burst is left (see Poll).
	stalled, busy bool
	emitFn        Emit
	rp            roce.Packet // its Net holds every received frame's layers
	report        dtawire.Report
	now           int64
	ackBuf        [128]byte
	running       atomic.Bool
	// loop counts the loop's passes (its utilisation).
	loop dpdk.LoopStats

	stats   ServiceStats // the loop's; copied to shown under mu
	mu      sync.Mutex
	shown   Status
	lastPub int64
	// pubs counts the publications (under mu); wantPub asks the loop
	// to publish at its next poll (FreshStatus).
	pubs    uint64
	wantPub atomic.Bool
}

// ServiceStats are the translator loop's counters.
type ServiceStats struct {
	RxPackets  uint64 `json:"rx_packets"`
	Reports    uint64 `json:"reports"`
	Malformed  uint64 `json:"malformed"` // reports that did not parse
	NotForUs   uint64 `json:"not_for_us"`
	ARPReplies uint64 `json:"arp_replies"`
	RDMAIn     uint64 `json:"rdma_in"` // ACKs and NAKs from collectors
	RDMAOut    uint64 `json:"rdma_out"`
	TxDropped  uint64 `json:"tx_dropped"` // frames the port or pool refused
	// TxPaused counts polls that took no new work because the port had
	// not taken the last bursts (a full transmit ring: backpressure).
	TxPaused uint64 `json:"tx_paused"`
	// Backpressured counts reports refused (not acknowledged, so resent
	// by a reliable reporter) while the port was paused.
	Backpressured uint64 `json:"backpressured"`
	CollectorDown uint64 `json:"collector_down"`
	NoCollector   uint64 `json:"no_collector"` // no collector serves the primitive
	Refused       uint64 `json:"refused"`      // translation errors (geometry, order)
	MeteredDrops  uint64 `json:"metered_drops"`
	Queued        uint64 `json:"queued"`
	QueueDrops    uint64 `json:"queue_drops"`
	Notices       uint64 `json:"congestion_notices"`
	AcksSent      uint64 `json:"acks_sent"`
	// TakenHigh and TakenLow count the reports taken (translated or
	// queued) by priority; RefusedHigh the high-priority ones refused
	// (a full queue, backpressure: their reporters resend them) and
	// DroppedLow the low-priority ones (over the meter, backpressure,
	// a full queue), which are gone unless retransmittable.
	TakenHigh   uint64 `json:"taken_high"`
	TakenLow    uint64 `json:"taken_low"`
	RefusedHigh uint64 `json:"refused_high"`
	DroppedLow  uint64 `json:"dropped_low"`
}

// CollectorStatus is one collector's state in /v1/status.
type CollectorStatus struct {
	Name      string    `json:"name"`
	Exchange  string    `json:"exchange"`
	Up        bool      `json:"up"`
	LastError string    `json:"last_error,omitempty"`
	Connects  int       `json:"connects"`
	QPN       uint32    `json:"collector_qpn,omitempty"`
	LocalQPN  uint32    `json:"local_qpn"`
	Conn      ConnStats `json:"conn"`
	// Outstanding is how many RDMA packets the collector has not
	// acknowledged: at zero, everything sent is in its memory.
	Outstanding int            `json:"outstanding"`
	Translate   TranslateStats `json:"translate"`
	// LostPSNs adds up the windows lost over every connection so far:
	// resynchronisations and collectors that went away with packets
	// unacknowledged.
	LostPSNs uint64         `json:"lost_psns"`
	Regions  dtamem.Regions `json:"regions"`
}

// Status is the translator's state in /v1/status.
type Status struct {
	Name       string            `json:"name"`
	Running    bool              `json:"running"`
	Stats      ServiceStats      `json:"stats"`
	Seq        SeqStats          `json:"sequence"`
	Reporters  int               `json:"reporters"`
	QueueDepth int               `json:"queue_depth"`
	AtomicWait int               `json:"atomic_wait"` // Key-Increments waiting for the atomic window
	Collectors []CollectorStatus `json:"collectors"`
}

// collector is one collector as the loop sees it.
type collector struct {
	spec     CollectorSpec
	localQPN uint32
	conn     *Conn
	tr       *Translator
	offer    *dtamem.Offer
	connects int
	lost     uint64 // windows lost on earlier connections
	// seenPackets and quietSince tell when the connection went idle.
	seenPackets, seenACKs uint64
	quietSince            int64
	probe                 int // probeIdle or probePinged
	fillWait              int // flush timeouts before the next fill
	lastErr               atomic.Value
}

// collEvent is a connection coming up (offer set) or going down.
type collEvent struct {
	i     int
	offer *dtamem.Offer
	psn   uint32
}

// NewService builds the translator from its spec on an open port whose
// buffers come from pool.
func NewService(s Spec, port dpdk.Port, pool *dpdk.Pool, log *slog.Logger) (*Service, error) {
	addr, err := netip.ParseAddr(s.IP)
	if err != nil || !addr.Is4() {
		return nil, fmt.Errorf("dta: translator ip %q: want IPv4", s.IP)
	}
	mac := header.MAC(port.Info().MAC)
	if s.MAC != "" {
		if mac, err = header.ParseMAC(s.MAC); err != nil {
			return nil, err
		}
	}
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	sv := &Service{spec: s, port: port, pool: pool, log: log, format: dtawire.Format{NoSeqnum: s.NoSeqnum, DataWidth: s.DataWidth},
		ip: addr.As4(), addr: addr, mac: mac, events: make(chan collEvent, 2*len(s.Collectors)+4),
		seq: NewSeqTracker(), notice: map[netip.Addr]int64{},
		rx: make([]*dpdk.Packet, s.Burst), tx: make([]*dpdk.Packet, 0, 4*s.Burst)}
	if err := sv.format.Validate(); err != nil {
		return nil, err
	}
	sv.seq.AckEvery, sv.seq.NackInterval = s.Reliability.AckEvery, int64(s.Reliability.NackInterval)
	sv.emitFn = sv.emit
	sv.cache = pool.NewCache(s.Burst) // a burst: small pools (256) keep their room for receive
	sv.meter = Meter{Rate: s.FlowControl.Rate, Burst: float64(s.FlowControl.Burst)}
	sv.queue.init(s.FlowControl.Queue)
	sv.atomics.init(s.FlowControl.Queue)
	for i, c := range s.Collectors {
		sv.colls = append(sv.colls, &collector{spec: c, localQPN: 0x100 + uint32(i)})
	}
	sv.publish()
	return sv, nil
}

// Run sets the collectors' connections up and runs the loop until ctx
// ends. The calling goroutine runs the loop (pin it first).
func (s *Service) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i := range s.colls {
		wg.Add(1)
		go func() { defer wg.Done(); s.connector(ctx, i) }()
	}
	defer wg.Wait()
	s.running.Store(true)
	defer s.running.Store(false)
	back := dpdk.DefaultBackoff()
	back.Stats = &s.loop
	for ctx.Err() == nil {
		if s.Poll() {
			back.Busy()
		} else {
			back.Idle()
		}
	}
	// Whatever waits in a batch or a flow cache goes out before the end.
	for _, c := range s.colls {
		if c.tr != nil {
			_ = c.tr.Flush(0, s.emitFn)
		}
	}
	s.flushTx()
	s.cache.Flush()
	s.publish()
	return nil
}

// Poll runs one iteration of the loop: receive a burst, handle it,
// re-inject queued reports, flush timed-out batches, transmit. It reports
// whether there was work.
func (s *Service) Poll() bool {
	s.now = dpdk.Nanotime()
	work := s.handleEvents()
	// A port that did not take the last bursts is paused, as a lossless
	// fabric's PFC would pause the translator: what waits for it is not
	// dropped, and no new work is taken until there is room for a burst.
	// Reports that come meanwhile are refused before their sequence is
	// taken, as if lost on the way, and the reporters' go-back-N sends
	// them again; the collectors' ACKs are still read, so the
	// connections' timers do not take a paused port for a lost
	// collector. RDMA packets, which the translator cannot resend, are
	// not lost to a busy link.
	if len(s.tx) > 0 {
		s.flushTx()
		work = true
	}
	s.stalled = len(s.tx) > 0
	s.busy = cap(s.tx)-len(s.tx) < len(s.rx)
	if s.busy {
		s.stats.TxPaused++
	}
	n := s.port.RxBurst(0, s.rx)
	for _, p := range s.rx[:n] {
		s.stats.RxPackets++
		s.input(p.Data())
	}
	dpdk.FreeBulk(s.rx[:n])
	if !s.busy && s.atomics.n > 0 {
		s.drainAtomics()
		work = true
	}
	if !s.busy && s.queue.n > 0 {
		s.drainQueue()
		work = true
	}
	for _, c := range s.colls {
		if c.tr != nil && !s.busy {
			if err := c.tr.Flush(s.spec.FlushTimeout, s.emitFn); err != nil {
				s.stats.TxDropped++
			}
			s.ping(c)
		}
	}
	s.flushTx()
	if s.now-s.lastPub > int64(50*time.Millisecond) || s.wantPub.Load() {
		s.wantPub.Store(false)
		s.publish()
	}
	return work || n > 0
}

// input handles one received frame.
func (s *Service) input(frame []byte) {
	pp := &s.rp.Net
	if err := header.Decode(frame, pp); err != nil {
		s.stats.NotForUs++
		return
	}
	switch {
	case pp.L3Proto == header.EtherTypeARP:
		s.arp(frame)
	case pp.L3Proto == header.EtherTypeIPv4 && pp.L4Proto == 17:
		ip := pp.IPv4(frame)
		if ip.Dst() != s.ip {
			s.stats.NotForUs++
			return
		}
		switch pp.UDP(frame).DstPort() {
		case dtawire.ReportPort:
			s.stats.Reports++
			s.reportIn(frame, ip)
		case roce.UDPPort:
			s.rdmaIn(frame)
		default:
			s.stats.NotForUs++
		}
	default:
		s.stats.NotForUs++
	}
}

// arp answers requests for the translator's address.
func (s *Service) arp(frame []byte) {
	a := s.rp.Net.ARP(frame)
	if !a.IsValid() || !a.IsRequestFor(s.ip) {
		s.stats.NotForUs++
		return
	}
	n, err := header.WriteARPReplyTo(s.ackBuf[:], a, s.mac, s.ip)
	if err == nil && s.send(s.ackBuf[:n]) {
		s.stats.ARPReplies++
	}
}

// rdmaIn hands a collector's ACK or NAK to its connection.
func (s *Service) rdmaIn(frame []byte) {
	if err := roce.ParseDecoded(frame, roce.UDPPort, &s.rp); err != nil {
		s.stats.NotForUs++
		return
	}
	for _, c := range s.colls {
		if c.conn != nil && c.localQPN == s.rp.DestQP {
			if s.rp.VerifyICRC(frame) != nil {
				c.conn.Stats.Malformed++
				return
			}
			s.stats.RDMAIn++
			_, _ = c.conn.Input(&s.rp, frame)
			return
		}
	}
	s.stats.NotForUs++
}

// reportIn runs a report through sequence tracking, the meter and the
// collector's translator.
func (s *Service) reportIn(frame []byte, ip header.IPv4) {
	high := int(ip.DSCP()) >= s.spec.FlowControl.HighDSCP
	if s.busy {
		s.stats.Backpressured++
		s.notTaken(high)
		return
	}
	payload := s.rp.Net.Payload(frame)
	r := &s.report
	if err := s.format.Parse(payload, r); err != nil {
		s.stats.Malformed++
		return
	}
	src := ip.SrcAddr()
	srcMAC := header.Ethernet(frame).Src()
	tracked := r.Retransmittable && !s.spec.Reliability.Disabled && !s.format.NoSeqnum
	var ack dtawire.Ack
	var acking bool
	if tracked {
		v, a, nack, seq := s.seq.Check(src, r.Seq, s.now)
		ack, acking = dtawire.Ack{Seq: seq, NACK: nack}, a
		if v != SeqAccept {
			if acking {
				s.sendAck(srcMAC, src, ack)
			}
			return
		}
	}
	if !s.take(r, payload, src, srcMAC, high) {
		s.notTaken(high)
		if tracked {
			// Not taken after all, and not acknowledged: the
			// reporter's next report shows the gap and draws a NACK,
			// and this one is resent.
			s.seq.Unaccept(src)
		}
		return
	}
	if high {
		s.stats.TakenHigh++
	} else {
		s.stats.TakenLow++
	}
	if acking {
		s.sendAck(srcMAC, src, ack)
	}
}

// notTaken counts a report the translator had no room for, by priority:
// a retransmittable one is resent by its reporter, any other is lost
// here, and so counted, never silently.
func (s *Service) notTaken(high bool) {
	if high {
		s.stats.RefusedHigh++
	} else {
		s.stats.DroppedLow++
	}
}

// take meters, queues or translates an accepted report; false when it
// found no room (a meter over its rate for low priority, a full queue).
func (s *Service) take(r *dtawire.Report, payload []byte, src netip.Addr, srcMAC header.MAC, high bool) bool {
	if s.queue.n > 0 || !s.meter.Take(Cost(r), s.now) {
		s.congested(srcMAC, src)
		if !high {
			s.stats.MeteredDrops++
			return false
		}
		// Behind queued reports, so high-priority order is kept.
		if !s.queue.push(payload, src) {
			s.stats.QueueDrops++
			return false
		}
		s.stats.Queued++
		return true
	}
	_, taken := s.translate(r, payload, src)
	return taken
}

// translate hands a report to the collector that serves it; a
// Key-Increment that finds the atomic window full waits in the queue.
// done is false for a queued report (payload nil) that must wait longer;
// taken is false when a new report found the queue full.
func (s *Service) translate(r *dtawire.Report, payload []byte, src netip.Addr) (done, taken bool) {
	c := s.route(r)
	if c == nil {
		return true, true
	}
	err := c.tr.Translate(r, s.emitFn)
	switch {
	case err == nil:
	case errors.Is(err, ErrAtomicWindow):
		if payload == nil {
			return false, true // already queued: try again later
		}
		if !s.atomics.push(payload, src) {
			s.stats.QueueDrops++
			return true, false
		}
	case errors.Is(err, errTxFull):
		// No room to send what the report needs: a queued report waits,
		// a new one is not taken (and so resent).
		if payload == nil {
			return false, true
		}
		return true, false
	case errors.Is(err, ErrNoRegion):
		s.stats.NoCollector++
	default:
		s.stats.Refused++
	}
	return true, true
}

// route picks the collector of a report: by key hash for keyed
// primitives, the collector holding the list or sketch otherwise.
func (s *Service) route(r *dtawire.Report) *collector {
	var c *collector
	switch r.Opcode {
	case dtawire.OpKeyWrite, dtawire.OpKeyIncrement, dtawire.OpPostcarder:
		c = s.colls[dtamem.KeyChecksum(r.Key)%uint32(len(s.colls))]
	case dtawire.OpAppend:
		c = s.holder(func(rg *dtamem.Regions) bool { _, ok := rg.Lists[r.ListID]; return ok })
	case dtawire.OpSketchMerge:
		c = s.holder(func(rg *dtamem.Regions) bool { _, ok := rg.Sketches[r.SketchID]; return ok })
	}
	if c == nil {
		s.stats.NoCollector++
		return nil
	}
	if c.tr == nil {
		s.stats.CollectorDown++
		return nil
	}
	return c
}

// holder is the first connected collector whose regions satisfy has;
// a collector that is down counts when it is the only one that would.
func (s *Service) holder(has func(*dtamem.Regions) bool) *collector {
	var down *collector
	for _, c := range s.colls {
		if c.offer != nil && has(&c.offer.Regions) {
			if c.tr != nil {
				return c
			}
			down = c
		}
	}
	return down
}

// drainQueue re-injects queued reports while the meter allows. A report
// that cannot go out yet gives its tokens back: spent again on every
// poll while it waited, they would starve the meter, and the queue would
// hold every low-priority report out (they are dropped while anything
// waits) at a fraction of the metered rate. A Key-Increment that finds
// the atomic window full moves on to the atomics' queue, metered, so the
// high-priority reports behind it do not wait for the collector's
// atomic responses (Key-Increments add up in any order).
func (s *Service) drainQueue() {
	for s.queue.n > 0 {
		payload, src := s.queue.peek()
		r := &s.report
		if err := s.format.Parse(payload, r); err != nil {
			s.queue.pop()
			s.stats.Malformed++
			continue
		}
		cost := Cost(r)
		if !s.meter.Take(cost, s.now) {
			return
		}
		if done, _ := s.translate(r, nil, src); !done {
			if r.Opcode == dtawire.OpKeyIncrement && s.atomics.push(payload, src) {
				s.queue.pop()
				continue
			}
			s.meter.Refund(cost)
			return
		}
		s.queue.pop()
	}
}

// Quiet-connection recovery, per collector: a connection with packets
// unacknowledged and nothing sent or acknowledged for a flush timeout is
// pinged; still quiet a timeout later, filled (see Conn.Fill), and again
// each time it stays quiet twice as long as before, up to maxFillWait
// flush timeouts (a slow collector answers every fill, as a duplicate, so
// they are spaced out). An answer makes it ping first again: a
// fill the collector executed in place of a packet it lost leaves it
// expecting the next PSN, and the ping then draws the NAK that
// resynchronises the connection. Nothing here moves the PSN: only the
// collector's NAKs do, so a collector that is slow (its poller stalled,
// its answers held up) is never taken for a stranded one.
const (
	probeIdle = iota
	probePinged
)

// maxFillWait is the longest wait between fills, in flush timeouts.
const maxFillWait = 64

func (s *Service) ping(c *collector) {
	conn := c.conn
	if s.stalled {
		// The silence is this port's, not the collector's: the last
		// frames (perhaps the ping) have not left yet.
		c.quietSince = s.now
		return
	}
	if conn.Stats.Packets != c.seenPackets {
		c.seenPackets, c.seenACKs, c.quietSince, c.probe = conn.Stats.Packets, conn.Stats.ACKs, s.now, probeIdle
		return
	}
	if conn.Stats.ACKs != c.seenACKs {
		c.seenACKs, c.quietSince, c.probe = conn.Stats.ACKs, s.now, probeIdle
		return
	}
	if conn.Outstanding() <= 0 {
		c.probe = probeIdle
		return
	}
	wait := s.spec.FlushTimeout
	if c.probe == probePinged {
		wait *= time.Duration(c.fillWait)
	}
	if time.Duration(s.now-c.quietSince) < wait {
		return
	}
	var n int
	var err error
	ping := c.probe == probeIdle
	if ping {
		n, err = conn.Ping(s.ackBuf[:])
		c.probe, c.fillWait = probePinged, 1
	} else {
		n, err = conn.Fill(s.ackBuf[:])
		c.fillWait = min(2*c.fillWait, maxFillWait)
	}
	if err == nil {
		if s.send(s.ackBuf[:n]) {
			s.stats.RDMAOut++
		} else if ping {
			conn.Unsend()
		}
	}
	c.seenPackets, c.quietSince = conn.Stats.Packets, s.now
}

// drainAtomics retries Key-Increment reports as the atomic window opens.
func (s *Service) drainAtomics() {
	for s.atomics.n > 0 {
		payload, src := s.atomics.peek()
		r := &s.report
		if err := s.format.Parse(payload, r); err != nil {
			s.atomics.pop()
			s.stats.Malformed++
			continue
		}
		if done, _ := s.translate(r, nil, src); !done {
			return
		}
		s.atomics.pop()
	}
}

// congested tells a reporter, at most once a NACK interval, to slow down.
func (s *Service) congested(mac header.MAC, src netip.Addr) {
	if last, ok := s.notice[src]; ok && s.now-last < int64(s.spec.Reliability.NackInterval) {
		return
	}
	if len(s.notice) > 4096 {
		clear(s.notice)
	}
	s.notice[src] = s.now
	s.stats.Notices++
	s.sendAck(mac, src, dtawire.Ack{Congested: true})
}

// sendAck sends an ACK, NACK or congestion notice to a reporter.
func (s *Service) sendAck(mac header.MAC, dst netip.Addr, a dtawire.Ack) {
	if !dst.Is4() {
		return
	}
	n, err := WriteAckFrame(s.ackBuf[:], s.mac, mac, s.ip, dst.As4(), dtawire.AckPort, a)
	if err == nil && s.send(s.ackBuf[:n]) {
		s.stats.AcksSent++
	}
}

// emit queues an RDMA frame for transmission.
func (s *Service) emit(frame []byte) error {
	if !s.send(frame) {
		return errTxFull
	}
	s.stats.RDMAOut++
	return nil
}

var errTxFull = errors.New("dta: transmit buffers exhausted")

// send copies a frame into a packet buffer for the next transmit burst;
// a frame finds no room only when the port has refused a whole backlog.
func (s *Service) send(frame []byte) bool {
	if len(s.tx) == cap(s.tx) {
		s.flushTx()
		if len(s.tx) == cap(s.tx) {
			s.stats.TxDropped++
			return false
		}
	}
	p := s.cache.Get()
	if p == nil {
		s.stats.TxDropped++
		return false
	}
	if p.CopyFrom(frame) != len(frame) {
		p.Free()
		s.stats.TxDropped++
		return false
	}
	s.tx = append(s.tx, p)
	return true
}

// flushTx transmits what is queued; what the port does not take (a
// poll-mode port never blocks) waits for the next poll.
func (s *Service) flushTx() {
	for len(s.tx) > 0 {
		n := s.port.TxBurst(0, s.tx)
		if n == 0 {
			break
		}
		s.tx = s.tx[:copy(s.tx, s.tx[n:])]
	}
}

func (s *Service) clock() int64 { return s.now }

// handleEvents applies connections that came up or went down.
func (s *Service) handleEvents() bool {
	work := false
	for {
		select {
		case ev := <-s.events:
			work = true
			c := s.colls[ev.i]
			if c.conn != nil {
				// The old connection's unacknowledged packets may never
				// have reached the collector: its lost window.
				c.lost += c.conn.Stats.LostPSNs + uint64(max(c.conn.Outstanding(), 0))
			}
			c.conn, c.tr = nil, nil
			if ev.offer == nil {
				s.log.Warn("collector down", "collector", c.spec.Name)
				continue
			}
			peer, _ := ev.offer.Endpoint()
			conn := NewConn(dtamem.Endpoint{MAC: s.mac, GID: roce.GIDFromAddr(s.addr), QPN: c.localQPN}, peer, ev.psn)
			conn.AckEvery = s.spec.RDMAAckEvery
			if ev.offer.MaxAtomic > 0 {
				conn.MaxAtomic = ev.offer.MaxAtomic
			}
			tr, err := NewTranslator(conn, ev.offer.Regions)
			if err != nil {
				c.lastErr.Store(err.Error())
				continue
			}
			// The loop's clock, read once a poll: a clock read per
			// Append batch cost more than the batch's bookkeeping.
			tr.Now = s.clock
			c.conn, c.tr, c.offer = conn, tr, ev.offer
			c.connects++
			s.log.Info("collector up", "collector", c.spec.Name, "qpn", ev.offer.QPN, "psn", ev.psn)
		default:
			return work
		}
	}
}

// connector keeps collector i's connection up: the exchange, then a wait
// for the TCP connection to end (the collector went away), then again,
// with exponential backoff between failures.
func (s *Service) connector(ctx context.Context, i int) {
	c := s.colls[i]
	wait := s.spec.ReconnectMin
	for ctx.Err() == nil {
		psn := rand.Uint32() & roce.PSNMask
		h := dtamem.Hello{Name: s.spec.Name, IP: s.addr, MAC: s.mac.String(), QPN: c.localQPN, PSN: psn, Layout: s.spec.MemLayout()}
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		tcp, offer, err := dtamem.Dial(dctx, c.spec.Exchange, h, c.spec.Key)
		cancel()
		if err != nil {
			c.lastErr.Store(err.Error())
			s.log.Warn("collector unreachable", "collector", c.spec.Name, "exchange", c.spec.Exchange, "err", err, "retry", wait)
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, s.spec.ReconnectMax)
			continue
		}
		wait = s.spec.ReconnectMin
		c.lastErr.Store("")
		s.events <- collEvent{i: i, offer: offer, psn: psn}
		// The collector never writes after its offer: a read returns
		// when the connection ends, or when the service stops.
		stop := context.AfterFunc(ctx, func() { tcp.Close() })
		_, _ = io.Copy(io.Discard, tcp)
		stop()
		tcp.Close()
		if ctx.Err() != nil {
			return
		}
		c.lastErr.Store("the collector closed the exchange connection")
		s.events <- collEvent{i: i}
	}
}

// publish copies the loop's counters for Status.
func (s *Service) publish() {
	st := Status{Name: s.spec.Name, Running: s.running.Load(), Stats: s.stats, Seq: s.seq.Stats,
		Reporters: s.seq.Reporters(), QueueDepth: s.queue.n, AtomicWait: s.atomics.n}
	for _, c := range s.colls {
		cs := CollectorStatus{Name: c.spec.Name, Exchange: c.spec.Exchange, Up: c.tr != nil, Connects: c.connects,
			LocalQPN: c.localQPN, LostPSNs: c.lost}
		if e, _ := c.lastErr.Load().(string); e != "" {
			cs.LastError = e
		}
		if c.conn != nil {
			cs.Conn, cs.Translate = c.conn.Stats, c.tr.Stats
			cs.LostPSNs += c.conn.Stats.LostPSNs
			cs.Outstanding = max(c.conn.Outstanding(), 0)
		}
		if c.offer != nil {
			cs.QPN, cs.Regions = c.offer.QPN, c.offer.Regions
		}
		st.Collectors = append(st.Collectors, cs)
	}
	s.lastPub = s.now
	s.mu.Lock()
	s.shown = st
	s.pubs++
	s.mu.Unlock()
}

// Settled says the translator has nothing in flight: every collector up
// with nothing unacknowledged and nothing waiting in its queues. Compare
// two Statuses' Stats to tell that nothing arrives any more either.
func (st *Status) Settled() bool {
	if st.QueueDepth > 0 || st.AtomicWait > 0 {
		return false
	}
	for _, c := range st.Collectors {
		if !c.Up || c.Outstanding > 0 {
			return false
		}
	}
	return true
}

// Status is the translator's state as of the loop's last publication
// (every 50 ms while it runs, later on a host that keeps the loop off its
// core): it may predate what the reporters already had acknowledged.
// Whoever must see all that the loop has done, to tell that it settled,
// reads FreshStatus.
func (s *Service) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.shown
	st.Running = s.running.Load()
	return st
}

// FreshStatus is the translator's state as of a publication the loop
// made after the call: it shows everything the loop had done by then
// (every report it had acknowledged). Status could not tell that: the
// lab's DTA stage, whose reporters were all acknowledged within 50 ms of
// the publication that showed the collector up, took that stale one
// (nothing outstanding, nothing queued, counters still) for a settled
// translator and queried the collector while Key-Increments were still
// on their way. A loop that is not running publishes nothing more, and
// its Status is then as fresh as it gets.
func (s *Service) FreshStatus(ctx context.Context) (Status, error) {
	s.mu.Lock()
	from := s.pubs
	s.mu.Unlock()
	for {
		s.mu.Lock()
		n := s.pubs
		s.mu.Unlock()
		// The publication after from may have been made before the
		// call and stored after it: the one after that was made after.
		if n >= from+2 || !s.running.Load() {
			return s.Status(), nil
		}
		s.wantPub.Store(true)
		select {
		case <-ctx.Done():
			return s.Status(), ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// reportQueue is a FIFO of report payloads waiting for the meter or the
// atomic window, in preallocated fixed slots.
type reportQueue struct {
	slots      [][maxQueued]byte
	lens       []uint16
	srcs       []netip.Addr
	head, n    int
	maxReached int
}

// maxQueued is the longest report a queue slot holds: a Sketch-Merge
// report of MaxSketchCounters counters.
const maxQueued = 3 + 10 + 4*dtawire.MaxSketchCounters

func (q *reportQueue) init(n int) {
	q.slots, q.lens, q.srcs = make([][maxQueued]byte, n), make([]uint16, n), make([]netip.Addr, n)
}

func (q *reportQueue) push(b []byte, src netip.Addr) bool {
	if q.n == len(q.slots) || len(b) > maxQueued {
		return false
	}
	i := (q.head + q.n) % len(q.slots)
	q.lens[i] = uint16(copy(q.slots[i][:], b))
	q.srcs[i] = src
	q.n++
	q.maxReached = max(q.maxReached, q.n)
	return true
}

func (q *reportQueue) peek() ([]byte, netip.Addr) {
	return q.slots[q.head][:q.lens[q.head]], q.srcs[q.head]
}

func (q *reportQueue) pop() {
	q.head = (q.head + 1) % len(q.slots)
	q.n--
}
