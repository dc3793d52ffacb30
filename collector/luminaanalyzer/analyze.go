package luminaanalyzer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/rdma-appliance/appliance/dumper/pcap"
	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// Options tune the analyzers. The zero value selects the defaults.
type Options struct {
	// Slack is how long a packet may be on its way between the middlebox
	// and an RNIC. Mirror timestamps are taken at the middlebox, so an
	// RNIC acts on what it received up to Slack before the packets it
	// sends are mirrored: a timeout retransmission of a PSN whose ACK was
	// mirrored less than Slack earlier is not a violation (the ACK was
	// still on its way). Default 5 ms, for a hardware middlebox; a
	// software one on a loaded machine can hold packets far longer.
	Slack time.Duration
	// CNPTolerance widens the bounds of the CNP pacing inference. The
	// bounds hold whatever the delays between the middlebox and the
	// notification point (see cnp.go); the tolerance covers timestamp
	// and pacer granularity. Default 5 us, or a hundredth of the
	// configured pacing interval when that is larger.
	CNPTolerance time.Duration
	// TimerTolerance is how much shorter than 4.096 us x 2^timeout an
	// interval between transmissions may look before it counts as below
	// the minimum: the two transmissions' delays to the middlebox differ
	// by jitter. Default a twentieth of the minimum timeout.
	TimerTolerance time.Duration
	// CNPWindow is the longest a CNP may follow the CE mark or gap that
	// drew it. Default 100 ms.
	CNPWindow time.Duration
	// LuminaCNP runs Lumina's own CNP check (LuminaCNPCheck) in the same
	// pass, into Report.LuminaCNP (or LuminaCNPError when it cannot run).
	LuminaCNP bool
	// MaxRecords caps each per-event list of the Report (NAK latencies,
	// losses, timeouts, CNP events), so that memory stays bounded for
	// any trace; the figures count every event. Default 1<<20.
	MaxRecords int
}

func (o Options) withDefaults() Options {
	if o.Slack <= 0 {
		o.Slack = 5 * time.Millisecond
	}
	if o.CNPTolerance <= 0 {
		o.CNPTolerance = 5 * time.Microsecond
	}
	if o.CNPWindow <= 0 {
		o.CNPWindow = 100 * time.Millisecond
	}
	if o.MaxRecords <= 0 {
		o.MaxRecords = 1 << 20
	}
	return o
}

// Analyze reads the merged trace at tracePath once, from start to end,
// feeding every packet to every analyzer, and returns their Report. The
// trace is read as a stream: memory grows with the connections and their
// outstanding state, not with the trace. Errors are for traces that
// cannot be read; a trace whose packets break the rules is reported on.
func Analyze(ctx context.Context, tracePath string, m *Meta) (*Report, error) {
	return AnalyzeOptions(ctx, tracePath, m, Options{})
}

// AnalyzeOptions is Analyze with options.
func AnalyzeOptions(ctx context.Context, tracePath string, m *Meta, opt Options) (*Report, error) {
	a, err := NewAnalyzer(m, opt)
	if err != nil {
		return nil, err
	}
	var lc *luminaCNPCheck
	var lcErr error
	if opt.LuminaCNP {
		lc, lcErr = newLuminaCNPCheck(m)
	}
	fn := a.Packet
	if lc != nil {
		fn = func(ts int64, data []byte) {
			a.Packet(ts, data)
			lc.packet(data)
		}
	}
	if err := eachRecord(ctx, tracePath, fn); err != nil {
		return nil, err
	}
	rep := a.Report()
	switch {
	case lc != nil:
		rep.LuminaCNP = lc.result()
	case lcErr != nil:
		rep.LuminaCNPError = lcErr.Error()
	}
	rep.Trace = tracePath
	return rep, nil
}

// eachRecord feeds every record of the merged trace at tracePath to fn, in
// order, checking ctx every 65536 records.
func eachRecord(ctx context.Context, tracePath string, fn func(ts int64, data []byte)) error {
	r, err := pcap.Open(tracePath)
	if err != nil {
		return fmt.Errorf("lumina: %w", err)
	}
	defer r.Close()
	if lt := r.LinkType(); lt != pcap.LinkTypeEthernet {
		return fmt.Errorf("lumina: %s: link type %d, want Ethernet", tracePath, lt)
	}
	var rec pcap.Record
	for n := 0; ; n++ {
		if n&0xffff == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("lumina: analysing %s: %w", tracePath, err)
			}
		}
		if err := r.Next(&rec); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("lumina: reading %s: %w", tracePath, err)
		}
		fn(rec.Timestamp, rec.Data)
	}
}

// tracePath is the path of the trace m names, in the run directory dir.
func (m *Meta) tracePath(dir string) string {
	if filepath.IsAbs(m.Trace) {
		return m.Trace
	}
	return filepath.Join(dir, m.Trace)
}

// AnalyzeDir analyses a run directory: its meta.json and the trace it
// names. It does not write anything; see Report.WriteFiles.
func AnalyzeDir(ctx context.Context, dir string) (*Report, error) {
	return AnalyzeDirOptions(ctx, dir, Options{})
}

// AnalyzeDirOptions is AnalyzeDir with options.
func AnalyzeDirOptions(ctx context.Context, dir string, opt Options) (*Report, error) {
	m, err := ReadMeta(dir)
	if err != nil {
		return nil, fmt.Errorf("lumina: %w", err)
	}
	return AnalyzeOptions(ctx, m.tracePath(dir), m, opt)
}

// Nodes: the two RNICs of a test.
const (
	nodeRequester = 0
	nodeResponder = 1
)

var nodeNames = [2]string{"requester", "responder"}

// Directions of a connection's packets, named by their destination.
const (
	toRequester = nodeRequester
	toResponder = nodeResponder
)

// Streams: the PSN-sequenced flows of a connection. The request stream is
// the requester's requests (WRITE and SEND data, READ requests, atomics),
// the response stream the responder's READ responses.
const (
	streamReq = 0
	streamRsp = 1
)

var streamNames = [2]string{"request", "response"}

// State machines, the index of a connection's first violations.
const (
	machReqSender = iota
	machReqReceiver
	machRspSender
	machRspReceiver
	numMachines
)

var machNames = [numMachines]string{"request sender", "request receiver", "response sender", "response receiver"}
var machNodes = [numMachines]int{nodeRequester, nodeResponder, nodeResponder, nodeRequester}

// Causes of a go-back-N retransmission run.
const (
	causeNone    = ""
	causeNAK     = "nak"
	causeReadGap = "read-gap"
	causeRNR     = "rnr"
	causeTimeout = "timeout"
)

// Opcode classes, precomputed so the per-packet path does no table copies.
const (
	clsOther = iota
	clsSend
	clsWrite
	clsReadReq
	clsAtomic
	clsAck
	clsAtomicAck
	clsReadResp
	clsCNP
)

var opClass [256]uint8

func init() {
	for op := range 256 {
		o := roce.Opcode(op)
		info := roce.OpcodeInfo(o)
		if o == roce.OpCNP {
			opClass[op] = clsCNP
			continue
		}
		if !info.Valid || info.Transport != roce.TransportRC {
			continue
		}
		switch info.Kind {
		case roce.KindSend:
			opClass[op] = clsSend
		case roce.KindWrite:
			opClass[op] = clsWrite
		case roce.KindReadRequest:
			opClass[op] = clsReadReq
		case roce.KindCompareSwap, roce.KindFetchAdd:
			opClass[op] = clsAtomic
		case roce.KindAck:
			opClass[op] = clsAck
		case roce.KindAtomicAck:
			opClass[op] = clsAtomicAck
		case roce.KindReadResponse:
			opClass[op] = clsReadResp
		}
	}
}

// Verb bits of a connection.
const (
	verbWrite = 1 << iota
	verbSend
	verbRead
	verbAtomic
)

// pref is a packet reference as the state machines keep it.
type pref struct {
	seq uint64
	ts  int64
	psn uint32
	op  roce.Opcode
	ev  mirror.EventType
}

func (p pref) ref() PacketRef {
	return PacketRef{Seq: p.seq, TimestampNs: p.ts, PSN: p.psn, Opcode: p.op.String(), Event: p.ev}
}

// lost says whether the packet never reached its receiver's transport: it
// was dropped, or corrupted and so discarded for its ICRC.
func (p pref) lost() bool { return p.ev == mirror.EventDrop || p.ev == mirror.EventBitError }

// connKey finds a connection from a packet: destination address and QP.
type connKey struct {
	dst roce.GID
	qpn uint32
}

type connDir struct {
	conn int32
	dir  uint8
}

// Analyzer runs every analyzer over packets fed one at a time. Analyze
// drives one over a trace file; use it directly to analyse packets from
// elsewhere. Packet allocates nothing for ordinary packets; events (a
// loss, a timeout, a CNP) add a record each, up to Options.MaxRecords.
type Analyzer struct {
	m   *Meta
	opt Options
	ppm int
	mtu int
	// baseTimeout is 4.096 us x 2^timeout (0: no timer); timeoutFloor
	// the shortest gap taken for a timer expiry when a NAK could also
	// explain a retransmission (adaptive retransmission starts at a
	// sixteenth of the base; half of that again leaves a margin).
	baseTimeout  int64
	timeoutFloor int64
	timerTol     int64

	conns []conn
	index map[connKey]connDir

	pkt roce.Packet
	sum sumCounts

	nack      []NACKLatency
	losses    []Loss
	touts     []TimeoutRetx
	viol      []Violation
	violCount int64
	msgs      []MessageRetries
	msgIndex  map[[2]int]int
	truncated struct{ retrans, timeouts bool }
	node      [2]nodeCounts
	cnp       cnpState
	notes     []string
	mtuNote   bool
}

// sumCounts are the TraceSummary figures.
type sumCounts struct {
	packets, roce, unmatched, cnps, backwards int64
	malformed                                 [numMalformed]int64
	events                                    [256]int64
	firstSeq, lastSeq                         uint64
	firstTs, lastTs                           int64
	started                                   bool
}

// nodeCounts are what the trace says each RNIC's counters should show.
type nodeCounts struct {
	cnpSent, cnpRx, ceRx, icrc int64
	ooo, dup, nakTx            int64 // as responder
	nakRx, timeouts, readGaps  int64 // as requester
	terminated                 int64
}

// NewAnalyzer prepares the analyzers for a run's metadata.
func NewAnalyzer(m *Meta, opt Options) (*Analyzer, error) {
	if m == nil {
		return nil, errors.New("lumina: no run metadata")
	}
	opt = opt.withDefaults()
	a := &Analyzer{m: m, opt: opt, ppm: m.Geometry.PacketsPerMessage(), mtu: m.Geometry.MTU,
		index: make(map[connKey]connDir, 2*len(m.Conns)), msgIndex: map[[2]int]int{}}
	if m.Timeout > 0 && m.Timeout < 32 {
		a.baseTimeout = 4096 << m.Timeout
		a.timeoutFloor = a.baseTimeout / 32
		a.timerTol = int64(opt.TimerTolerance)
		if a.timerTol <= 0 {
			a.timerTol = a.baseTimeout / 20
		}
	} else {
		a.timeoutFloor = 1<<63 - 1
	}
	a.conns = make([]conn, len(m.Conns))
	for i, mc := range m.Conns {
		if !mc.RequesterIP.IsValid() || !mc.ResponderIP.IsValid() {
			return nil, fmt.Errorf("lumina: connection %d has no addresses in the metadata", i)
		}
		c := &a.conns[i]
		c.init(i, mc)
		for dir := range 2 {
			k := connKey{dst: c.gid[dir], qpn: c.qpn[dir]}
			if j, dup := a.index[k]; dup {
				return nil, fmt.Errorf("lumina: connections %d and %d share destination %v QP %#x", j.conn, i,
					c.gid[dir], c.qpn[dir])
			}
			a.index[k] = connDir{conn: int32(i), dir: uint8(dir)}
		}
	}
	a.cnp.init(a)
	return a, nil
}

// Packet feeds one record of the merged trace: ts is its timestamp (the
// extended mirror timestamp), frame the captured bytes. Any frame is
// accepted; those that are not mirrored RoCE packets are counted and
// skipped.
func (a *Analyzer) Packet(ts int64, frame []byte) {
	a.sum.packets++
	p := &a.pkt
	if err := roce.ParseTruncated(frame, roce.UDPPort, p); err != nil {
		a.sum.malformed[malformedReason(err)]++
		return
	}
	mm, err := mirror.Read(frame, &p.Net)
	if err != nil {
		a.sum.malformed[malNotMirrored]++
		return
	}
	a.sum.roce++
	s := &a.sum
	if !s.started {
		s.started, s.firstSeq, s.firstTs = true, mm.Seq, ts
	} else if ts < s.lastTs {
		s.backwards++
	}
	s.lastSeq, s.lastTs = mm.Seq, ts
	s.events[mm.Event]++
	cls := opClass[p.Opcode]
	if cls == clsCNP {
		s.cnps++
	}
	cd, ok := a.index[connKey{dst: p.DstGID(frame), qpn: p.DestQP}]
	if !ok {
		s.unmatched++
		return
	}
	c := &a.conns[cd.conn]
	if p.SrcGID(frame) != c.gid[1-cd.dir] {
		s.unmatched++
		return
	}
	r := pref{seq: mm.Seq, ts: ts, psn: p.PSN, op: p.Opcode, ev: mm.Event}
	dir := int(cd.dir)
	c.packets[dir]++
	if a.mtu <= 0 {
		a.learnMTU(p)
	}
	if r.ev == mirror.EventBitError {
		a.node[dir].icrc++
	}
	if cls == clsCNP {
		a.cnpPacket(c, dir, r)
		return
	}
	if !r.lost() && p.ECN == 3 {
		a.ceMark(c, dir, r)
	}
	if c.terminated != "" {
		return
	}
	if dir == toResponder {
		switch cls {
		case clsSend:
			c.verbs |= verbSend
			a.request(c, r, 1, false)
		case clsWrite:
			c.verbs |= verbWrite
			a.request(c, r, 1, false)
		case clsReadReq:
			c.verbs |= verbRead
			n := uint32(1)
			if rh := p.RETH(frame); rh != nil && a.mtu > 0 {
				n = max(1, (rh.DMALen()+uint32(a.mtu)-1)/uint32(a.mtu))
			}
			a.request(c, r, n, true)
		case clsAtomic:
			c.verbs |= verbAtomic
			a.request(c, r, 1, false)
		default:
			c.other++
		}
		return
	}
	switch cls {
	case clsAck:
		ae := p.AETH(frame)
		if ae == nil {
			c.other++
			return
		}
		a.ack(c, r, ae.Syndrome())
	case clsAtomicAck:
		a.ack(c, r, roce.ACKSyndrome(roce.CreditsInvalid))
	case clsReadResp:
		a.response(c, r)
	default:
		c.other++
	}
}

// learnMTU takes the path MTU from a full-sized First or Middle packet when
// the metadata does not give it (READ requests need it to know how many
// PSNs they consume).
func (a *Analyzer) learnMTU(p *roce.Packet) {
	switch p.Opcode {
	case roce.RCWriteFirst, roce.RCWriteMiddle, roce.RCSendFirst, roce.RCSendMiddle,
		roce.RCReadResponseFirst, roce.RCReadResponseMiddle:
		if p.PayloadLen >= 256 {
			a.mtu = p.PayloadLen
		}
	case roce.RCReadRequest:
		if !a.mtuNote {
			a.mtuNote = true
			a.notes = append(a.notes, "the metadata has no MTU and no full-sized packet came before a READ request: "+
				"READ requests before one did are taken to span one PSN")
		}
	}
}

// Malformed record reasons.
const (
	malNotRoCE = iota
	malTruncated
	malMalformed
	malBadOpcode
	malBadVersion
	malBadPad
	malBadLength
	malNotMirrored
	malOther
	numMalformed
)

var malNames = [numMalformed]string{"not-roce", "truncated", "malformed", "bad-opcode", "bad-version", "bad-pad",
	"bad-length", "not-mirrored", "other"}

func malformedReason(err error) int {
	switch {
	case errors.Is(err, roce.ErrNotRoCE):
		return malNotRoCE
	case errors.Is(err, roce.ErrTruncated):
		return malTruncated
	case errors.Is(err, roce.ErrBadOpcode):
		return malBadOpcode
	case errors.Is(err, roce.ErrBadVersion):
		return malBadVersion
	case errors.Is(err, roce.ErrBadPad):
		return malBadPad
	case errors.Is(err, roce.ErrBadLength):
		return malBadLength
	case errors.Is(err, roce.ErrMalformed):
		return malMalformed
	}
	return malOther
}

// msgOf returns the message index and relative PSN of a PSN of connection
// c (READ data PSNs count from the requester's initial PSN too), or -1s
// when the geometry is unknown.
func (a *Analyzer) msgOf(c *conn, psn uint32) (int, int) {
	if a.ppm <= 0 {
		return -1, -1
	}
	off := int((psn - c.base) & roce.PSNMask)
	return off / a.ppm, off % a.ppm
}

// first counts a violation of machine m of c and reports whether it is the
// machine's first, which alone is recorded (so a broken machine costs no
// formatting per packet).
func (a *Analyzer) first(c *conn, m int) bool {
	a.violCount++
	c.violN[m]++
	return c.violN[m] == 1
}

func (a *Analyzer) violate(c *conn, m int, r pref, reason string) {
	c.violIdx[m] = len(a.viol)
	a.viol = append(a.viol, Violation{Conn: c.idx, Machine: machNames[m], Node: nodeNames[machNodes[m]],
		Packet: r.ref(), Reason: reason})
}
