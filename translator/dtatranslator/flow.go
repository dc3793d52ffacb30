package dtatranslator

import (
	"net/netip"

	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/internal/dtawire"
)

// Reliability and flow control at the translator (the DTA paper's §4.4):
//
//   - A reporter numbers its retransmittable reports (the base header's
//     8-bit seqnum) and keeps the recent ones. The translator tracks the
//     sequence it expects from each reporter: a report with that number is
//     taken, one ahead of it means reports were lost, and the translator
//     drops it and NACKs the expected number so the reporter resends from
//     there (go-back-N, like RC itself); one behind is a duplicate from a
//     resend and is dropped, with a cumulative ACK. Cumulative ACKs every
//     AckEvery reports let the reporter free its buffer; a reporter whose
//     window of unacknowledged reports is full waits, and resends from
//     its oldest after a timeout (the loss of a run's last reports shows
//     no gap to the translator).
//   - The RDMA operations the translator generates are metered: beyond the
//     configured rate, low-priority reports are dropped, high-priority ones
//     wait in a bounded queue (the switch CPU's, on a Tofino) and are
//     re-injected as tokens return, and reporters are told of the
//     congestion so they slow down.

// SeqVerdict is what the tracker says of a report.
type SeqVerdict uint8

const (
	SeqAccept    SeqVerdict = iota // the expected report: translate it
	SeqDuplicate                   // already taken: drop it
	SeqGap                         // reports before it were lost: drop it, NACK
)

// reporterSeq is one reporter's sequence state.
type reporterSeq struct {
	expected uint8
	since    int // reports taken since the last ACK
	// nacked is the number last NACKed and when, so a resend already
	// under way is not asked for again by every later report.
	nacked   uint8
	nackedAt int64
	nacking  bool
}

// SeqTracker follows the sequence numbers of every reporter's
// retransmittable reports. One goroutine uses it.
type SeqTracker struct {
	reporters map[netip.Addr]*reporterSeq
	// AckEvery sends a cumulative ACK after this many reports (default 16).
	AckEvery int
	// NackInterval is how long a NACK stands before a later report may
	// repeat it (its resend may have been lost too); default 1 ms.
	NackInterval int64
	// MaxReporters bounds the table; reports from further reporters are
	// accepted untracked (default 4096).
	MaxReporters int
	Stats        SeqStats
}

// SeqStats are the tracker's counters.
type SeqStats struct {
	Accepted   uint64 `json:"accepted"`
	Duplicates uint64 `json:"duplicates"`
	Gaps       uint64 `json:"gaps"` // reports dropped for a gap before them
	NACKs      uint64 `json:"nacks"`
	ACKs       uint64 `json:"acks"`
	Untracked  uint64 `json:"untracked"`
}

// NewSeqTracker makes a tracker with the defaults.
func NewSeqTracker() *SeqTracker {
	return &SeqTracker{reporters: map[netip.Addr]*reporterSeq{}, AckEvery: 16, NackInterval: 1e6, MaxReporters: 4096}
}

// Reporters is how many reporters the tracker knows.
func (s *SeqTracker) Reporters() int { return len(s.reporters) }

// Check judges a retransmittable report with sequence seq from reporter
// at time now (ns). When ack is set, the caller sends a (or, with nack,
// a NACK) to the reporter; ackSeq is the sequence it names: for a NACK
// the first one to resend, for an ACK the last one taken.
func (s *SeqTracker) Check(reporter netip.Addr, seq uint8, now int64) (v SeqVerdict, ack, nack bool, ackSeq uint8) {
	r := s.reporters[reporter]
	if r == nil {
		if len(s.reporters) >= s.MaxReporters {
			s.Stats.Untracked++
			return SeqAccept, false, false, 0
		}
		// The first report heard from a reporter starts its sequence:
		// whatever came before is not the translator's to ask for.
		r = &reporterSeq{expected: seq}
		s.reporters[reporter] = r
	}
	switch d := int8(seq - r.expected); {
	case d == 0:
		r.expected++
		r.nacking = false
		r.since++
		s.Stats.Accepted++
		if r.since >= s.AckEvery {
			r.since = 0
			s.Stats.ACKs++
			return SeqAccept, true, false, seq
		}
		return SeqAccept, false, false, 0
	case d < 0:
		// A resend of what was taken: the reporter missed an ACK (or
		// resent on its own timeout), so tell it where the translator is.
		s.Stats.Duplicates++
		s.Stats.ACKs++
		return SeqDuplicate, true, false, r.expected - 1
	default:
		s.Stats.Gaps++
		if r.nacking && r.nacked == r.expected && now-r.nackedAt < s.NackInterval {
			return SeqGap, false, false, 0
		}
		r.nacking, r.nacked, r.nackedAt = true, r.expected, now
		s.Stats.NACKs++
		return SeqGap, true, true, r.expected
	}
}

// Expect sets the sequence number the tracker expects next from
// reporter, as the Tofino translator's control plane sets a reporter's
// first number; without it the first report heard starts the sequence.
func (s *SeqTracker) Expect(reporter netip.Addr, seq uint8) {
	s.reporters[reporter] = &reporterSeq{expected: seq}
}

// Unaccept takes back the last report Check accepted from reporter (the
// translator could not translate it after all): the reporter's next
// report then shows a gap and draws a NACK, and the report is resent.
func (s *SeqTracker) Unaccept(reporter netip.Addr) {
	if r := s.reporters[reporter]; r != nil {
		r.expected--
		r.since = max(r.since-1, 0)
		s.Stats.Accepted--
	}
}

// Meter is a token bucket over RDMA packets: Rate packets a second with
// a burst of Burst. A zero Rate lets everything through.
type Meter struct {
	Rate   float64
	Burst  float64
	tokens float64
	last   int64
}

// Take spends n tokens at time now (ns) if there are that many.
func (m *Meter) Take(n int, now int64) bool {
	if m.Rate <= 0 {
		return true
	}
	if m.last == 0 {
		m.tokens, m.last = m.Burst, now
	}
	m.tokens = min(m.Burst, m.tokens+float64(now-m.last)*m.Rate/1e9)
	m.last = now
	if m.tokens < float64(n) {
		return false
	}
	m.tokens -= float64(n)
	return true
}

// Refund gives back n tokens Take spent on a report that could not be
// sent after all.
func (m *Meter) Refund(n int) {
	if m.Rate > 0 {
		m.tokens = min(m.Burst, m.tokens+float64(n))
	}
}

// Cost is how many RDMA packets a report may produce at most: what the
// meter is asked for before translating it.
func Cost(r *dtawire.Report) int {
	switch r.Opcode {
	case dtawire.OpKeyWrite, dtawire.OpKeyIncrement:
		return int(r.Redundancy)
	}
	return 1
}

// WriteAckFrame builds the UDP datagram of an ACK/NACK (or congestion
// notice) from the translator at src to a reporter, into frame; it
// returns the frame's length.
func WriteAckFrame(frame []byte, src, dst header.MAC, srcIP, dstIP [4]byte, dport uint16, a dtawire.Ack) (int, error) {
	var payload [dtawire.AckLen]byte
	a.Encode(payload[:])
	return WriteUDP4(frame, src, dst, srcIP, dstIP, dtawire.AckPort, dport, 0, payload[:])
}

// WriteUDP4 builds an Ethernet/IPv4/UDP frame carrying payload, with the
// UDP checksum, and returns its length.
func WriteUDP4(frame []byte, src, dst header.MAC, srcIP, dstIP [4]byte, sport, dport uint16, dscp uint8, payload []byte) (int, error) {
	n := header.EthernetHeaderLen + header.IPv4MinHeaderLen + header.UDPHeaderLen + len(payload)
	if len(frame) < n {
		return 0, header.ErrShortBuffer
	}
	header.Ethernet(frame).Encode(dst, src, header.EtherTypeIPv4)
	ip := header.IPv4(frame[header.EthernetHeaderLen:n])
	ip.Encode(dscp<<2, uint16(len(ip)), 0, 0x2, 64, 17, srcIP, dstIP)
	u := header.UDP(ip[header.IPv4MinHeaderLen:])
	u.Encode(sport, dport, uint16(len(u)), 0)
	copy(u[header.UDPHeaderLen:], payload)
	u.SetChecksum(u.CalculateChecksumIPv4(srcIP, dstIP))
	// Ethernet's minimum frame: pad with zeros (the IP length excludes it).
	for n < 60 && n < len(frame) {
		frame[n] = 0
		n++
	}
	return n, nil
}
