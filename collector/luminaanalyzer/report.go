package luminaanalyzer

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/mirror"
)

// Report is what the analyzers found in one run. It is meant to be
// written as JSON (analysis.json) and read back by the report and plot
// packages, so every figure is an integer (nanoseconds, counts) and every
// per-event list is plot-ready: one element per dropped PSN, timeout,
// CNP, in trace order. A figure that could not be measured is -1.
//
// When the run's trace failed its integrity check (Meta.Valid false),
// Valid is false, Invalid says why and every section's Valid is false too:
// the figures are still computed, as a debugging aid, but must not be
// presented as results.
type Report struct {
	Test   string `json:"test,omitempty"`
	Repeat int    `json:"repeat"`
	// Trace is the path of the trace analysed.
	Trace   string `json:"trace"`
	Valid   bool   `json:"valid"`
	Invalid string `json:"invalid,omitempty"`

	Summary     TraceSummary `json:"summary"`
	Connections []ConnReport `json:"connections"`

	GBN            GBNReport     `json:"gbn"`
	Retransmission RetransReport `json:"retransmission"`
	Timeouts       TimeoutReport `json:"timeouts"`
	CNP            CNPReport     `json:"cnp"`
	Counters       CounterReport `json:"counters"`
	MCT            MCTReport     `json:"mct"`
	// LuminaCNP is Lumina's own CNP check (test_cnp's expected counts per
	// pacing mode) when the caller asked for it (Options.LuminaCNP), or why it
	// could not run.
	LuminaCNP      *LuminaCNP     `json:"lumina_cnp,omitempty"`
	LuminaCNPError string         `json:"lumina_cnp_error,omitempty"`
	Options        ReportSettings `json:"settings"`
	Notes          []string       `json:"notes,omitempty"`
}

// ReportSettings records the parameters the analysis ran with.
type ReportSettings struct {
	SlackNs        int64 `json:"slack_ns"`
	CNPToleranceNs int64 `json:"cnp_tolerance_ns"`
	CNPWindowNs    int64 `json:"cnp_window_ns"`
	MaxRecords     int   `json:"max_records"`
}

// TraceSummary counts what the trace held.
type TraceSummary struct {
	Packets int64 `json:"packets"`
	// RoCE packets parsed; Malformed by reason (not RoCE, truncated,
	// bad opcode...).
	RoCE      int64            `json:"roce"`
	Malformed map[string]int64 `json:"malformed,omitempty"`
	// Unmatched RoCE packets belong to no connection of the metadata.
	Unmatched int64 `json:"unmatched"`
	// Events counts the packets carrying each injected event (none, drop,
	// ecn, bit-error; unknown codes as "event(N)").
	Events map[string]int64 `json:"events"`
	CNPs   int64            `json:"cnps"`
	// FirstSeq/LastSeq and FirstNs/LastNs bound the trace; DurationNs is
	// LastNs - FirstNs.
	FirstSeq   uint64 `json:"first_seq"`
	LastSeq    uint64 `json:"last_seq"`
	FirstNs    int64  `json:"first_ns"`
	LastNs     int64  `json:"last_ns"`
	DurationNs int64  `json:"duration_ns"`
	// Backwards counts packets whose timestamp is earlier than the
	// previous packet's: the analyzers assume time order.
	Backwards int64 `json:"timestamps_backwards"`
}

// PacketRef names one packet of the trace.
type PacketRef struct {
	Seq         uint64           `json:"seq"` // mirror sequence number
	TimestampNs int64            `json:"timestamp_ns"`
	PSN         uint32           `json:"psn"`
	Opcode      string           `json:"opcode"`
	Event       mirror.EventType `json:"event"`
}

func (p PacketRef) String() string {
	s := fmt.Sprintf("seq %d t=%.3fms psn %d %s", p.Seq, float64(p.TimestampNs)/1e6, p.PSN, p.Opcode)
	if p.Event != mirror.EventNone {
		s += " [" + p.Event.String() + "]"
	}
	return s
}

// ConnReport is one connection's traffic as the trace shows it.
type ConnReport struct {
	Index int         `json:"index"`
	Conn  intent.Conn `json:"conn"`
	// Verbs lists the request kinds seen: write, send, read, atomic.
	Verbs []string `json:"verbs"`
	// ToResponder and ToRequester count the packets in each direction
	// (CNPs included).
	ToResponder int64 `json:"to_responder"`
	ToRequester int64 `json:"to_requester"`
	// DataPackets are the packets carrying the connection's data (WRITE
	// and SEND requests, READ responses); Retransmitted the transmissions
	// of a PSN sent before.
	DataPackets   int64 `json:"data_packets"`
	Retransmitted int64 `json:"retransmitted"`
	Lost          int64 `json:"lost"` // data transmissions dropped or corrupted by the injector
	OutOfOrder    int64 `json:"out_of_order"`
	Duplicates    int64 `json:"duplicates"`
	Gaps          int64 `json:"gaps"`
	NAKs          int64 `json:"naks"`      // NAK sequence errors sent by the responder
	RNRNAKs       int64 `json:"rnr_naks"`  // RNR NAKs sent by the responder
	ReadGaps      int64 `json:"read_gaps"` // READs re-issued after a response gap
	Timeouts      int64 `json:"timeouts"`
	CEMarked      int64 `json:"ce_marked"`
	CNPs          int64 `json:"cnps"`
	// Compliant says the connection broke no Go-back-N rule.
	Compliant bool `json:"compliant"`
	// Terminated says why the connection stopped early: a fatal NAK, or
	// the requester giving up after its retries.
	Terminated string `json:"terminated,omitempty"`
}

// GBNReport is the Go-back-N logic check.
type GBNReport struct {
	Valid bool `json:"valid"`
	// Compliant: no connection broke a rule.
	Compliant bool `json:"compliant"`
	// Violations holds the first violation of each state machine of each
	// connection (request sender, request receiver, response sender,
	// response receiver), in trace order; Count is every violation found.
	Violations []Violation `json:"violations"`
	Count      int64       `json:"count"`
	Notes      []string    `json:"notes,omitempty"`
}

// Violation is a packet that a Go-back-N state machine did not allow.
type Violation struct {
	Conn int `json:"conn"`
	// Machine is "request sender" (the requester sending WRITE, SEND and
	// READ requests), "request receiver" (the responder), "response
	// sender" (the responder sending READ responses) or "response
	// receiver" (the requester receiving them).
	Machine string    `json:"machine"`
	Node    string    `json:"node"` // requester or responder
	Packet  PacketRef `json:"packet"`
	Reason  string    `json:"reason"`
	// Count is how many violations this machine had in all.
	Count int64 `json:"count"`
}

// Stats summarises a set of nanosecond figures.
type Stats struct {
	Count    int   `json:"count"`
	MinNs    int64 `json:"min_ns"`
	MedianNs int64 `json:"median_ns"`
	P99Ns    int64 `json:"p99_ns"`
	MaxNs    int64 `json:"max_ns"`
	MeanNs   int64 `json:"mean_ns"`
}

// RetransReport is the retransmission performance breakdown.
type RetransReport struct {
	Valid bool `json:"valid"`
	// NACK has one entry per gap the receiver NAKed (the dropped PSN at
	// the head of the gap): Lumina's Figures 8 and 9 plot Generation and
	// Reaction against RelPSN.
	NACK []NACKLatency `json:"nack"`
	// Losses has one entry per data transmission the injector dropped or
	// corrupted, with how it was recovered.
	Losses     []Loss   `json:"losses"`
	Generation Stats    `json:"generation"`
	Reaction   Stats    `json:"reaction"`
	Total      Stats    `json:"total"`
	Truncated  bool     `json:"truncated,omitempty"`
	Notes      []string `json:"notes,omitempty"`
}

// NACKLatency breaks down one NAK-triggered retransmission (Lumina §4,
// Figure 5). All three figures come from mirror timestamps, taken at the
// middlebox, one way only:
//
//	GenerationNs = NAK - FirstOOO   (receiver: out-of-order packet seen -> NAK sent)
//	ReactionNs   = Retx - NAK       (sender: NAK received -> dropped PSN sent again)
//	TotalNs      = Retx - FirstOOO  (= GenerationNs + ReactionNs)
//
// Each includes the half round trip between the middlebox and the RNIC
// concerned, the same for every sample. For READ the receiver is the
// requester, its NAK the READ request it re-issues from the missing PSN,
// and the sender the responder.
type NACKLatency struct {
	Conn int `json:"conn"`
	// Stream is "request" (WRITE/SEND data) or "response" (READ data).
	Stream string `json:"stream"`
	PSN    uint32 `json:"psn"`
	// Message is the message index and RelPSN the PSN within the
	// message (-1 when the geometry is unknown).
	Message int              `json:"message"`
	RelPSN  int              `json:"rel_psn"`
	Event   mirror.EventType `json:"event"` // what happened to the missing PSN
	// FirstOOO is the first packet after the hole, NAK the NAK, Retx the
	// first retransmission of PSN (Retx.Seq 0 if there was none).
	FirstOOO     PacketRef `json:"first_ooo"`
	NAK          PacketRef `json:"nak"`
	Retx         PacketRef `json:"retx"`
	GenerationNs int64     `json:"generation_ns"`
	ReactionNs   int64     `json:"reaction_ns"`
	TotalNs      int64     `json:"total_ns"`
	// RetxLost: the retransmission was dropped or corrupted too.
	RetxLost bool `json:"retx_lost,omitempty"`
}

// Loss is one dropped or corrupted data transmission and its recovery.
type Loss struct {
	Conn    int       `json:"conn"`
	Stream  string    `json:"stream"`
	Message int       `json:"message"`
	RelPSN  int       `json:"rel_psn"`
	Packet  PacketRef `json:"packet"`
	// RecoveredBy is how the PSN was sent again: "nak", "read-gap",
	// "rnr", "timeout", or "" when it never was; From is the PSN the
	// go-back-N run that resent it started at.
	RecoveredBy string    `json:"recovered_by"`
	From        uint32    `json:"from"`
	Retx        PacketRef `json:"retx"`
	// LatencyNs is Retx - Packet, -1 if not resent.
	LatencyNs int64 `json:"latency_ns"`
}

// TimeoutReport is the timeout retransmission analysis (Lumina §6.3).
type TimeoutReport struct {
	Valid bool `json:"valid"`
	// MinTimeoutNs is 4.096 us x 2^timeout; RetryCnt is retry_cnt.
	Timeout      uint8 `json:"timeout"`
	MinTimeoutNs int64 `json:"min_timeout_ns"`
	RetryCnt     uint8 `json:"retry_cnt"`
	// Retransmissions has one entry per retransmission that no NAK
	// asked for: Lumina's Figure 12 plots IntervalNs against Retry.
	Retransmissions []TimeoutRetx `json:"retransmissions"`
	Intervals       Stats         `json:"intervals"`
	// BelowMinimum counts intervals shorter than MinTimeoutNs by more
	// than ToleranceNs (see Options.TimerTolerance).
	BelowMinimum int   `json:"below_minimum"`
	ToleranceNs  int64 `json:"tolerance_ns"`
	// Messages has one entry per message that timed out (Table 2).
	Messages []MessageRetries `json:"messages"`
	// GiveUps counts messages whose every transmission was lost and
	// whose requester stopped retrying; RetryVerdict sums them up:
	// "exact" (each retried exactly retry_cnt times), "more", "fewer",
	// "mixed", or "" with no give-up.
	GiveUps      int      `json:"give_ups"`
	RetryVerdict string   `json:"retry_verdict,omitempty"`
	Truncated    bool     `json:"truncated,omitempty"`
	Notes        []string `json:"notes,omitempty"`
}

// TimeoutRetx is one timeout retransmission.
type TimeoutRetx struct {
	Conn    int       `json:"conn"`
	Message int       `json:"message"`
	RelPSN  int       `json:"rel_psn"`
	Packet  PacketRef `json:"packet"`
	// IntervalNs is how long the requester's timer ran: from its latest
	// transmission covering the PSN (the data packet, or for READ the READ
	// request) or its latest progress (the oldest unacknowledged PSN
	// advancing), whichever came last, to the retransmission; -1 if that
	// is too far back to be known. Between retries of a lost PSN it is the
	// interval between successive transmissions.
	IntervalNs int64 `json:"interval_ns"`
	// Retry is the retry's number since the connection last made
	// progress (timeouts and NAK retries count alike, as retry_cnt does).
	Retry        int  `json:"retry"`
	BelowMinimum bool `json:"below_minimum,omitempty"`
}

// MessageRetries is one message's timeout history.
type MessageRetries struct {
	Conn    int `json:"conn"`
	Message int `json:"message"`
	// Timeouts and NAKRetries count the message's retransmissions by
	// cause; MaxRetries is the most consecutive retries without progress.
	Timeouts   int `json:"timeouts"`
	NAKRetries int `json:"nak_retries"`
	MaxRetries int `json:"max_retries"`
	// GaveUp: the trace ends with the message's PSN lost and unanswered.
	GaveUp  bool   `json:"gave_up"`
	PSN     uint32 `json:"psn"`
	Verdict string `json:"verdict,omitempty"` // for a give-up: exact, more, fewer
}

// CNPReport is the CNP analysis (Lumina §4 and §6.4).
type CNPReport struct {
	Valid bool  `json:"valid"`
	CNPs  int64 `json:"cnps"`
	// ByIPPair and ByQP count the CNPs (Table 4).
	ByIPPair []CNPPair  `json:"by_ip_pair"`
	ByQP     []CNPQueue `json:"by_qp"`
	// CEMarked counts the CE-marked packets delivered (each may draw a
	// CNP), CEAnswered those that drew one.
	CEMarked   int64 `json:"ce_marked"`
	CEAnswered int64 `json:"ce_answered"`
	// Gaps counts the out-of-order arrivals that made a receiver NAK;
	// NAKCNPs the CNPs that only such an arrival explains, so
	// NAKTriggersCNP is "yes", "no" or "unknown" (no gap in the trace).
	Gaps           int64  `json:"gaps"`
	NAKCNPs        int64  `json:"nak_cnps"`
	NAKTriggersCNP string `json:"nak_triggers_cnp"`
	// Unexplained CNPs follow no CE mark or gap of their connection.
	Unexplained int64 `json:"unexplained"`
	// MinTimeBetweenCNPsNs is the notification point's configured
	// interval (0 when the metadata does not say).
	MinTimeBetweenCNPsNs int64 `json:"min_time_between_cnps_ns"`
	// Turnaround is the NP's delay from trigger to CNP as the middlebox
	// saw it; ToleranceNs the timing tolerance of the scope tests (see
	// Options.CNPTolerance).
	Turnaround  Stats `json:"turnaround"`
	ToleranceNs int64 `json:"tolerance_ns"`
	// Scopes tests each pacing scope against the trace; Consistent lists
	// those that explain it, Scope the verdict.
	Scopes     []ScopeResult `json:"scopes"`
	Consistent []string      `json:"consistent"`
	Scope      string        `json:"scope"`
	// Events is the plot series: every CE mark, gap trigger and CNP.
	Events    []CNPEvent `json:"events"`
	Truncated bool       `json:"truncated,omitempty"`
	Notes     []string   `json:"notes,omitempty"`
}

// CNPPair counts CNPs from Src (notification point) to Dst.
type CNPPair struct {
	Src   string `json:"src"`
	Dst   string `json:"dst"`
	Count int64  `json:"count"`
}

// CNPQueue is one notification point QP: CE marks it received, CNPs it
// sent.
type CNPQueue struct {
	Conn int `json:"conn"`
	// Node is the notification point: responder (WRITE and SEND data)
	// or requester (READ responses); QPN its QP.
	Node       string `json:"node"`
	QPN        uint32 `json:"qpn"`
	CEMarked   int64  `json:"ce_marked"`
	CNPs       int64  `json:"cnps"`
	Suppressed int64  `json:"suppressed"`
}

// Pacing scopes of a CNP pacer.
const (
	ScopePort   = "per-port"
	ScopeDestIP = "per-dest-ip"
	ScopeIPPair = "per-ip-pair"
	ScopeQP     = "per-qp"
)

// ScopeResult says whether one pacing scope explains the trace. Triggers
// (CE marks, and gaps when NAKs draw CNPs) are grouped by the scope's key.
// In each group a trigger that drew a CNP bounds the pacing interval from
// above (by the time from the previous CNP-drawing trigger to its CNP),
// and a suppressed trigger bounds it from below (by the time from the
// previous CNP to the trigger): bounds that hold whatever the delays
// between the middlebox and the notification point. The scope is
// consistent when no suppressed trigger lacks a previous CNP in its group
// and LowerNs < UpperNs (within the tolerance), and the configured
// interval, if any, lies between them.
type ScopeResult struct {
	Scope string `json:"scope"`
	Keys  int    `json:"keys"`
	// ObservedMinIntervalNs is the smallest gap between two CNPs of one
	// group, from their own timestamps (-1 with fewer than two).
	ObservedMinIntervalNs int64 `json:"observed_min_interval_ns"`
	// LowerNs and UpperNs bound the pacing interval (-1: unbounded).
	LowerNs   int64 `json:"lower_ns"`
	UpperNs   int64 `json:"upper_ns"`
	Conflicts int   `json:"conflicts"`
	// FirstConflict describes the first trigger the scope cannot explain.
	FirstConflict string `json:"first_conflict,omitempty"`
	Consistent    bool   `json:"consistent"`
	// SameGrouping lists the scopes that group this trace's triggers
	// identically, so the trace cannot tell them apart.
	SameGrouping []string `json:"same_grouping,omitempty"`
}

// CNPEvent is a point of the CNP plot series.
type CNPEvent struct {
	Kind   string `json:"kind"` // ce, gap, cnp
	Conn   int    `json:"conn"`
	Node   string `json:"node"` // the notification point
	Seq    uint64 `json:"seq"`
	TimeNs int64  `json:"timestamp_ns"`
	// CNP: for a trigger, the Seq of the CNP it drew (0 if none); for a
	// CNP, the Seq of its trigger (0 if unexplained).
	Peer uint64 `json:"peer"`
}

// CounterReport compares the RNICs' counters with the trace.
type CounterReport struct {
	Valid      bool           `json:"valid"`
	Checks     []CounterCheck `json:"checks"`
	Mismatches int            `json:"mismatches"`
	Notes      []string       `json:"notes,omitempty"`
}

// CounterCheck is one counter of one RNIC.
type CounterCheck struct {
	Node    string `json:"node"` // requester or responder
	Counter string `json:"counter"`
	// Expected is what the trace implies, Observed the counter (absent
	// when the RNIC did not report it).
	Expected uint64 `json:"expected"`
	Observed uint64 `json:"observed"`
	Present  bool   `json:"present"`
	Match    bool   `json:"match"`
	Basis    string `json:"basis"` // what Expected counts
}

// MCTReport summarises the message completion times of Meta.MCT.
type MCTReport struct {
	Valid   bool      `json:"valid"`
	PerQP   []QPStats `json:"per_qp"`
	Overall Stats     `json:"overall"`
	Notes   []string  `json:"notes,omitempty"`
}

// QPStats is one QP's MCT statistics.
type QPStats struct {
	QP    int   `json:"qp"`
	Stats Stats `json:"stats"`
}

// statsOf computes Stats over v (reordered in place). Percentiles are
// nearest-rank: the p-th percentile is the smallest value with at least
// p% of the samples at or below it.
func statsOf(v []int64) Stats {
	if len(v) == 0 {
		return Stats{MinNs: -1, MedianNs: -1, P99Ns: -1, MaxNs: -1, MeanNs: -1}
	}
	slices.Sort(v)
	var sum float64
	for _, x := range v {
		sum += float64(x)
	}
	return Stats{Count: len(v), MinNs: v[0], MedianNs: rank(v, 50), P99Ns: rank(v, 99), MaxNs: v[len(v)-1],
		MeanNs: int64(sum / float64(len(v)))}
}

// rank is the nearest-rank p-th percentile of sorted v.
func rank(v []int64, p int) int64 {
	i := (p*len(v) + 99) / 100 // ceil(p/100 * n)
	return v[max(i, 1)-1]
}

// MarshalIndent encodes the report as indented JSON.
func (r *Report) MarshalIndent() ([]byte, error) {
	return json.MarshalIndent(r, "", "  ")
}

// ReadReport reads an analysis.json.
func ReadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

// WriteFiles writes the report into a run directory: analysis.json and
// summary.txt.
func (r *Report) WriteFiles(dir string) error {
	b, err := r.MarshalIndent()
	if err != nil {
		return fmt.Errorf("lumina: encoding the report: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, AnalysisFile), append(b, '\n'), 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, SummaryFile))
	if err != nil {
		return err
	}
	if err := r.WriteText(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
