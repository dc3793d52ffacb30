package trace

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// Condition numbers the integrity conditions (see the package comment).
type Condition int

// The integrity conditions. 1 to 4 are Lumina's (§3.6).
const (
	CondConsecutive Condition = 1 // mirror sequence numbers consecutive: no gap, no duplicate
	CondTimestamps  Condition = 2 // mirror timestamps increase unless they wrap around
	CondMirrored    Condition = 3 // packets == the injector's mirrored-copy counter
	CondRxRoCE      Condition = 4 // packets == the RoCE packets the injector received
	CondDirection   Condition = 5 // timestamps increase within each direction
	CondSourceOrder Condition = 6 // each dumper file is in sequence order
	CondDumpers     Condition = 7 // every dumper's output is complete
)

// NumConditions is the number of integrity conditions.
const NumConditions = 7

var condNames = [NumConditions + 1]string{
	CondConsecutive: "mirror sequence numbers consecutive",
	CondTimestamps:  "mirror timestamps increasing",
	CondMirrored:    "packet count equals the injector's mirrored count",
	CondRxRoCE:      "packet count equals the injector's received RoCE count",
	CondDirection:   "timestamps increasing per direction",
	CondSourceOrder: "dumper files in sequence order",
	CondDumpers:     "every dumper's output complete",
}

// violatedNames say what went wrong, for error messages.
var violatedNames = [NumConditions + 1]string{
	CondConsecutive: "mirror sequence numbers not consecutive",
	CondTimestamps:  "mirror timestamp went back",
	CondMirrored:    "packet count differs from the injector's mirrored count",
	CondRxRoCE:      "packet count differs from the injector's received RoCE count",
	CondDirection:   "timestamp went back within a direction",
	CondSourceOrder: "dumper file out of sequence order",
	CondDumpers:     "dumper output incomplete",
}

func (c Condition) String() string {
	if c >= 1 && c <= NumConditions {
		return condNames[c]
	}
	return fmt.Sprintf("condition(%d)", int(c))
}

// Condition statuses in a Report.
const (
	StatusPass       = "pass"
	StatusFail       = "fail"
	StatusNotChecked = "not checked" // conditions 3 and 4 without the counter
)

// ConditionResult is the outcome of one condition.
type ConditionResult struct {
	Condition Condition `json:"condition"`
	Name      string    `json:"name"`
	Status    string    `json:"status"`
}

// SeqRange is a range of mirror sequence numbers, both ends included.
type SeqRange struct {
	First uint64 `json:"first"`
	Last  uint64 `json:"last"`
	Count uint64 `json:"count"` // Last - First + 1
}

func (r SeqRange) String() string {
	if r.First == r.Last {
		return fmt.Sprintf("%d (1)", r.First)
	}
	return fmt.Sprintf("%d-%d (%d)", r.First, r.Last, r.Count)
}

// Violation is one violated condition. Detail lists the first offending
// sequence numbers (at most Options.MaxListed of each kind) and the
// figures; Seqs holds those sequence numbers, Gaps the first missing ranges
// (condition 1) and Sources the dumpers involved.
type Violation struct {
	Condition Condition  `json:"condition"`
	Name      string     `json:"name"`
	Detail    string     `json:"detail"`
	Seqs      []uint64   `json:"seqs,omitempty"`
	Gaps      []SeqRange `json:"gaps,omitempty"`
	Sources   []string   `json:"sources,omitempty"`
}

func (v Violation) String() string {
	return fmt.Sprintf("(%d) %s: %s", int(v.Condition), v.Name, v.Detail)
}

// ErrInvalidTest is the sentinel of *InvalidTestError: test with
// errors.Is(err, ErrInvalidTest).
var ErrInvalidTest = errors.New("invalid test")

// InvalidTestError is Lumina's "invalid test": the rebuilt trace failed the
// integrity check, so no analysis may run on it. It lists every violated
// condition.
type InvalidTestError struct {
	Violations []Violation
}

func (e *InvalidTestError) Error() string {
	var b strings.Builder
	b.WriteString("invalid test: ")
	for i, v := range e.Violations {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(v.String())
	}
	return b.String()
}

// Unwrap makes errors.Is(err, ErrInvalidTest) true.
func (e *InvalidTestError) Unwrap() error { return ErrInvalidTest }

// Violated reports whether condition c is among the violations.
func (e *InvalidTestError) Violated(c Condition) bool {
	for _, v := range e.Violations {
		if v.Condition == c {
			return true
		}
	}
	return false
}

// FileStats describes one file of a dumper.
type FileStats struct {
	Path string `json:"path"`
	// Packets is the number of mirrored copies read, Malformed the records
	// skipped because they are not mirrored RoCE copies.
	Packets   uint64 `json:"packets"`
	Malformed uint64 `json:"malformed"`
	// OutOfOrder counts records with a lower sequence number than the
	// record before them in the file (condition 6).
	OutOfOrder uint64 `json:"out_of_order"`
	// FirstSeq and LastSeq are the sequence numbers of the first and the
	// last copy in the file (0 when there is none).
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
	// Error says why the file could not be read to its end: missing,
	// unreadable, not a trace, truncated or corrupt (condition 7).
	Error string `json:"error,omitempty"`
}

// SourceStats describes one dumper: all the files given under its name.
type SourceStats struct {
	Name       string      `json:"name"`
	Packets    uint64      `json:"packets"`
	Malformed  uint64      `json:"malformed"`
	OutOfOrder uint64      `json:"out_of_order"`
	Failed     bool        `json:"failed"`  // a file of the dumper is missing, unreadable or cut short
	Missing    uint64      `json:"missing"` // missing sequence numbers Options.Assign sent to this dumper
	Files      []FileStats `json:"files"`
}

// DirectionStats describes the packets from one IP address to another.
// Timestamps are the extended mirror timestamps in nanoseconds.
type DirectionStats struct {
	Src            netip.Addr `json:"src"`
	Dst            netip.Addr `json:"dst"`
	Packets        uint64     `json:"packets"`
	FirstSeq       uint64     `json:"first_seq"`
	LastSeq        uint64     `json:"last_seq"`
	FirstTimestamp int64      `json:"first_timestamp_ns"`
	LastTimestamp  int64      `json:"last_timestamp_ns"`
	// Backwards counts packets whose timestamp is below that of the
	// direction's packet before them (condition 5).
	Backwards uint64 `json:"backwards"`
}

// Report describes a merged trace and the outcome of its integrity check.
// It serialises to JSON.
type Report struct {
	// Valid is true when no condition is violated.
	Valid bool `json:"valid"`
	// Packets is the number of mirrored copies merged, duplicates included.
	Packets uint64 `json:"packets"`
	// FirstSeq and LastSeq are the lowest and highest sequence numbers.
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
	// FirstTimestamp and LastTimestamp are the extended mirror timestamps
	// (ns) of the first and last merged packets; TimestampWraps counts the
	// 48-bit wraparounds between them (net of steps back across one).
	FirstTimestamp int64 `json:"first_timestamp_ns"`
	LastTimestamp  int64 `json:"last_timestamp_ns"`
	TimestampWraps int   `json:"timestamp_wraps"`
	// TimestampsBack counts packets whose mirror timestamp is below the
	// previous packet's (condition 2).
	TimestampsBack uint64 `json:"timestamps_back"`

	// Missing is the number of sequence numbers absent from the trace, in
	// Gaps ranges; FirstGaps lists the first of them. Duplicates counts
	// copies of a sequence number already merged. Late counts copies that
	// came after higher sequence numbers and filled a gap (only possible
	// when a file is out of order).
	Missing    uint64     `json:"missing"`
	Gaps       uint64     `json:"gaps"`
	FirstGaps  []SeqRange `json:"first_gaps,omitempty"`
	Duplicates uint64     `json:"duplicates"`
	Late       uint64     `json:"late"`
	// MissingByDumper attributes the missing sequence numbers to dumpers
	// by Options.Assign ("" for those it returned no name for).
	// AttributionIncomplete is set when the gaps were too large to
	// attribute every number (more than 2^26).
	MissingByDumper       map[string]uint64 `json:"missing_by_dumper,omitempty"`
	AttributionIncomplete bool              `json:"attribution_incomplete,omitempty"`

	// Malformed counts the records skipped because they are not mirrored
	// RoCE copies, by reason in MalformedReasons.
	Malformed        uint64            `json:"malformed"`
	MalformedReasons map[string]uint64 `json:"malformed_reasons,omitempty"`
	// Restored counts copies that still carried the rewrite port and were
	// restored by Merge (mirror.Restore) before being written.
	Restored uint64 `json:"restored"`

	// Events counts the packets by injected event (the TTL of the copy):
	// none, drop, ecn, bit-error.
	Events map[string]uint64 `json:"events"`

	Sources    []SourceStats    `json:"sources"`
	Directions []DirectionStats `json:"directions"`
	// OtherDirections counts the packets of directions beyond the first
	// 65536, which are not tracked one by one.
	OtherDirections uint64 `json:"other_directions,omitempty"`

	// Mirrored and RxRoCE are the injector's counters the trace was
	// checked against (negative: unknown, conditions not checked).
	Mirrored int64 `json:"mirrored"`
	RxRoCE   int64 `json:"rx_roce"`

	Conditions []ConditionResult `json:"conditions"`
	Violations []Violation       `json:"violations,omitempty"`
}

// Source returns the stats of the dumper called name, or nil.
func (r *Report) Source(name string) *SourceStats {
	for i := range r.Sources {
		if r.Sources[i].Name == name {
			return &r.Sources[i]
		}
	}
	return nil
}

// Violation returns the violation of condition c, or nil.
func (r *Report) Violation(c Condition) *Violation {
	for i := range r.Violations {
		if r.Violations[i].Condition == c {
			return &r.Violations[i]
		}
	}
	return nil
}
