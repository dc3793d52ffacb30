// Package perftest runs the bandwidth and latency tests of the RDMA perftest
// suite (ib_write_bw, ib_write_lat, ib_read_bw, ib_read_lat, ib_send_bw,
// ib_send_lat, ib_atomic_bw, ib_atomic_lat) over the verbs API, so a soft
// RNIC and a libibverbs device are measured the way RDMA engineers measure
// NICs: the same parameters (message size or -a, iterations, TX depth, CQ
// moderation, MTU, QPs, inline size), the same traffic pattern and the same
// report columns.
//
// A test has two sides, as perftest's: the server waits for a client on an
// out-of-band stream (TCP, or an in-process pipe), adopts the client's
// parameters, and both exchange their QP numbers, PSNs, rkeys, buffer
// addresses and GIDs in perftest's key-message layout before they connect RC
// QPs and run. The exchange protocol is the appliance's own (a line of JSON
// parameters, then perftest-style key lines); it does not interoperate with
// perftest's binaries.
//
// What is measured follows perftest:
//   - BW tests post at most TX depth work requests per QP, signal every
//     CQMod-th one, and report the average bandwidth from the first post to
//     the last completion, the peak bandwidth (the best average over any run
//     of consecutive messages, perftest's definition) and the message rate.
//     MB/sec means 2^20 bytes per second, Gb/sec 10^9 bits per second.
//   - Latency tests of WRITE and SEND are ping-pongs: each side answers the
//     other's message (WRITE: by polling the last byte of its buffer, as
//     ib_write_lat does; SEND and WRITE with immediate: by a receive
//     completion); a sample is half the round trip. READ and atomic latency
//     is the time from posting one request to its completion.
//
// A side whose device has no engine of its own (a soft RNIC the test drives
// itself instead of starting its poll loop) passes Config.Poll, and every
// wait of the test drives the device through it: one thread per side does
// what an RNIC and its poller would do, as DPDK user-space stacks run.
package perftest

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Verb is the RDMA operation a test measures.
type Verb uint8

// The verbs of perftest's tests.
const (
	Write Verb = iota
	Read
	Send
	Atomic
)

var verbNames = [...]string{"write", "read", "send", "atomic"}

func (v Verb) String() string {
	if int(v) < len(verbNames) {
		return verbNames[v]
	}
	return fmt.Sprintf("verb(%d)", uint8(v))
}

// ParseVerb parses write, read, send or atomic.
func ParseVerb(s string) (Verb, error) {
	for i, n := range verbNames {
		if strings.EqualFold(s, n) {
			return Verb(i), nil
		}
	}
	return 0, fmt.Errorf("perftest: unknown verb %q (write, read, send, atomic)", s)
}

// MarshalText implements encoding.TextMarshaler.
func (v Verb) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (v *Verb) UnmarshalText(b []byte) error {
	x, err := ParseVerb(string(b))
	*v = x
	return err
}

// AtomicOp is the operation of atomic tests.
type AtomicOp uint8

// Atomic operations (perftest -A).
const (
	FetchAdd AtomicOp = iota
	CmpSwap
)

func (a AtomicOp) String() string {
	if a == CmpSwap {
		return "CMP_AND_SWAP"
	}
	return "FETCH_AND_ADD"
}

// ParseAtomicOp parses FETCH_AND_ADD or CMP_AND_SWAP (perftest's -A values).
func ParseAtomicOp(s string) (AtomicOp, error) {
	switch strings.ToUpper(s) {
	case "FETCH_AND_ADD", "FETCH_ADD", "FAA", "":
		return FetchAdd, nil
	case "CMP_AND_SWAP", "CMP_SWAP", "CAS":
		return CmpSwap, nil
	}
	return 0, fmt.Errorf("perftest: unknown atomic operation %q (FETCH_AND_ADD, CMP_AND_SWAP)", s)
}

// MarshalText implements encoding.TextMarshaler.
func (a AtomicOp) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (a *AtomicOp) UnmarshalText(b []byte) error {
	x, err := ParseAtomicOp(string(b))
	*a = x
	return err
}

// Params are a test's parameters. The client's travel to the server, which
// runs with them. Zero values take perftest's defaults (Defaults).
type Params struct {
	Verb    Verb `json:"verb"`
	Latency bool `json:"latency"`
	// Size is the message size in bytes (atomics: always 8).
	Size int `json:"size"`
	// All runs every power of two from 2 to 2^23 bytes (perftest -a).
	All   bool `json:"all"`
	Iters int  `json:"iters"`
	// TxDepth is the most outstanding send work requests per QP.
	TxDepth int `json:"tx_depth"`
	// RxDepth is the receives kept posted per QP for SEND tests.
	RxDepth int `json:"rx_depth"`
	// CQMod signals every CQMod-th send work request (BW tests).
	CQMod int `json:"cq_mod"`
	// MTU is the path MTU in bytes; 0 takes the port's active MTU.
	MTU int `json:"mtu"`
	QPs int `json:"qps"`
	// Inline is the largest message sent inline; -1 takes perftest's
	// default (220 bytes for WRITE and SEND latency, 0 otherwise), capped by
	// the device.
	Inline int      `json:"inline"`
	Atomic AtomicOp `json:"atomic_type"`
	// WriteImm makes WRITE tests use RDMA WRITE with immediate, so the
	// responder learns of each message from a receive completion instead of
	// polling memory (perftest --write_with_imm).
	WriteImm bool `json:"write_with_imm"`
	// Gbits reports bandwidth in Gb/sec instead of MB/sec.
	Gbits bool `json:"report_gbits"`
}

// Default sizes and counts, as perftest's.
const (
	DefaultBWSize   = 65536
	DefaultLatSize  = 2
	DefaultBWIters  = 5000
	DefaultLatIters = 1000
	DefaultTxDepth  = 128
	DefaultRxDepth  = 512
	DefaultCQMod    = 100
	DefaultLatInl   = 220
	MaxAllSize      = 1 << 23
)

// Defaults fills the zero values with perftest's defaults.
func (p Params) Defaults() Params {
	if p.Verb == Atomic {
		p.Size = 8
	}
	if p.Size == 0 {
		p.Size = DefaultBWSize
		if p.Latency {
			p.Size = DefaultLatSize
		}
	}
	if p.Iters == 0 {
		p.Iters = DefaultBWIters
		if p.Latency {
			p.Iters = DefaultLatIters
		}
	}
	if p.TxDepth == 0 {
		p.TxDepth = DefaultTxDepth
		if p.Latency {
			p.TxDepth = 1
		}
	}
	if p.RxDepth == 0 {
		p.RxDepth = min(DefaultRxDepth, p.Iters)
	}
	if p.CQMod == 0 {
		p.CQMod = min(DefaultCQMod, p.TxDepth)
		if p.Latency {
			p.CQMod = 1
		}
	}
	if p.QPs == 0 {
		p.QPs = 1
	}
	if p.Inline < 0 {
		p.Inline = 0
		if p.Latency && (p.Verb == Write || p.Verb == Send) {
			p.Inline = DefaultLatInl
		}
	}
	return p
}

// Validate checks parameters after Defaults.
func (p Params) Validate() error {
	bad := func(format string, a ...any) error { return fmt.Errorf("perftest: "+format, a...) }
	switch {
	case p.Verb > Atomic:
		return bad("verb %v", p.Verb)
	case p.Verb == Atomic && p.Size != 8:
		return bad("atomic messages are 8 bytes, not %d", p.Size)
	case p.Size < 1 || p.Size > 1<<30:
		return bad("size %d: 1 byte to 1 GiB", p.Size)
	case p.Iters < 5 || p.Iters > 100_000_000:
		return bad("iterations %d: 5 to 100000000 (perftest's minimum is 5)", p.Iters)
	case p.TxDepth < 1 || p.TxDepth > 16384:
		return bad("tx depth %d: 1 to 16384", p.TxDepth)
	case p.RxDepth < 1 || p.RxDepth > 16384:
		return bad("rx depth %d: 1 to 16384", p.RxDepth)
	case p.CQMod < 1 || p.CQMod > p.TxDepth:
		return bad("cq moderation %d: 1 to the tx depth (%d)", p.CQMod, p.TxDepth)
	case p.MTU != 0 && p.MTU != 256 && p.MTU != 512 && p.MTU != 1024 && p.MTU != 2048 && p.MTU != 4096:
		return bad("mtu %d: 256, 512, 1024, 2048 or 4096", p.MTU)
	case p.QPs < 1 || p.QPs > 256:
		return bad("qps %d: 1 to 256", p.QPs)
	case p.Inline < 0 || p.Inline > 4096:
		return bad("inline size %d: 0 to 4096", p.Inline)
	case p.WriteImm && p.Verb != Write:
		return bad("write_with_imm applies to WRITE tests")
	case p.Latency && p.QPs > 1:
		return bad("latency tests run one QP")
	}
	return nil
}

// Sizes are the message sizes the test runs, in order.
func (p Params) Sizes() []int {
	if !p.All || p.Verb == Atomic {
		return []int{p.Size}
	}
	var s []int
	for n := 2; n <= MaxAllSize; n *= 2 {
		s = append(s, n)
	}
	return s
}

// MaxSize is the largest message of the test.
func (p Params) MaxSize() int {
	s := p.Sizes()
	return s[len(s)-1]
}

// usesRecv says whether the responder consumes receive work requests.
func (p Params) usesRecv() bool { return p.Verb == Send || p.Verb == Write && p.WriteImm }

// pingPong says whether both sides transmit (latency of WRITE and SEND).
func (p Params) pingPong() bool { return p.Latency && (p.Verb == Write || p.Verb == Send) }

// Title is perftest's banner, e.g. "RDMA_Write BW Test".
func (p Params) Title() string {
	var v string
	switch p.Verb {
	case Write:
		v = "RDMA_Write"
		if p.WriteImm {
			v = "RDMA_Write_with_imm"
		}
	case Read:
		v = "RDMA_Read"
	case Send:
		v = "Send"
	case Atomic:
		v = "Atomic " + p.Atomic.String()
	}
	if p.Latency {
		return v + " Latency Test"
	}
	return v + " BW Test"
}

func (p Params) encode() ([]byte, error) { return json.Marshal(p) }
