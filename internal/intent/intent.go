// Package intent is the contract of a Lumina test between the orchestrator,
// the event injector (in Go, translator/inject, and on Tofino,
// p4/luminatofino) and the analyzers: a test's intents (relative QP index,
// relative PSN, iteration, event type), the runtime metadata the traffic
// generator pushes per connection (requester and responder IP, QPN and
// initial PSN), the traffic's geometry, and Compile, which turns them into
// the exact-match entries {src IP, dst IP, dst QPN, PSN, ITER} -> event that
// both injectors take. The analyzers read the same types back from a run's
// metadata, so no side owns them.
package intent

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/rdma-appliance/appliance/internal/mirror"
)

// AllPSNs in Intent.PSN selects every data packet of the connection
// (Lumina's `psn: all`).
const AllPSNs = -1

// Intent is one entry of Lumina's data-pkt-events: inject Type into the data
// packet at relative PSN PSN (from 0, counted from the connection's first
// packet) of the connection with relative index QP (from 0), in
// transmission round Iter (from 1). An intent names one packet, as
// Lumina's switch controller keys each event: one entry at initial PSN +
// psn, so a psn within the first message hits that message only, and
// message k's packet j is psn k x packets-per-message + j.
type Intent struct {
	QP   int              `json:"qpn"`
	PSN  int              `json:"psn"` // AllPSNs for every packet
	Iter int              `json:"iter"`
	Type mirror.EventType `json:"type"`
}

func (in Intent) String() string {
	psn := fmt.Sprint(in.PSN)
	if in.PSN == AllPSNs {
		psn = "all"
	}
	return fmt.Sprintf("{qpn %d psn %s iter %d %v}", in.QP, psn, in.Iter, in.Type)
}

// Conn is the runtime metadata of one QP connection, as the traffic
// generator pushes it once the QPs are connected.
type Conn struct {
	RequesterIP   netip.Addr `json:"requester_ip"`
	RequesterQPN  uint32     `json:"requester_qpn"`
	RequesterIPSN uint32     `json:"requester_ipsn"`
	ResponderIP   netip.Addr `json:"responder_ip"`
	ResponderQPN  uint32     `json:"responder_qpn"`
	ResponderIPSN uint32     `json:"responder_ipsn"`
}

// Verb is the RDMA operation of a test's traffic.
type Verb string

// Verbs Lumina's traffic generator runs.
const (
	VerbWrite    Verb = "write"
	VerbRead     Verb = "read"
	VerbSend     Verb = "send"
	VerbSendRead Verb = "send_read"
)

// Geometry is the shape of the traffic the intents refer to.
type Geometry struct {
	Verb        Verb `json:"verb"`
	MessageSize int  `json:"message_size"`
	MTU         int  `json:"mtu"`
	NumMessages int  `json:"num_msgs_per_qp"`
}

// PacketsPerMessage is the data packets of one message.
func (g Geometry) PacketsPerMessage() int {
	if g.MTU <= 0 {
		return 0
	}
	return max(1, (g.MessageSize+g.MTU-1)/g.MTU)
}

// Validate checks the geometry.
func (g Geometry) Validate() error {
	switch g.Verb {
	case VerbWrite, VerbRead, VerbSend, VerbSendRead:
	default:
		return fmt.Errorf("intent: verb %q (write, read, send, send_read)", g.Verb)
	}
	switch g.MTU {
	case 256, 512, 1024, 2048, 4096:
	default:
		return fmt.Errorf("intent: mtu %d (256, 512, 1024, 2048 or 4096)", g.MTU)
	}
	if g.MessageSize < 0 || g.NumMessages < 1 {
		return fmt.Errorf("intent: message size %d and messages per QP %d", g.MessageSize, g.NumMessages)
	}
	return nil
}

// IterMode selects how the injector counts transmission rounds.
type IterMode uint8

const (
	// IterPaper is the paper's rule: per connection, a packet whose PSN
	// is not larger than the previous packet's starts a new round; the
	// round count never resets. An intent with iter 1 therefore hits
	// only the messages sent before the first retransmission.
	IterPaper IterMode = iota
	// IterP4 is the public P4 program's rule: a register pair {expected
	// PSN, iter}; a packet whose PSN is not the expected one increments
	// iter, and the first packet of a message that arrives in order
	// resets iter to 1. Rounds are thus counted per message: an intent
	// on a later message's packet matches in that message's own rounds.
	IterP4
)

func (m IterMode) String() string {
	if m == IterP4 {
		return "p4"
	}
	return "paper"
}

// ParseIterMode parses "paper" or "p4".
func ParseIterMode(s string) (IterMode, error) {
	switch s {
	case "paper", "":
		return IterPaper, nil
	case "p4":
		return IterP4, nil
	}
	return 0, fmt.Errorf("intent: iter mode %q (paper or p4)", s)
}

// Key is the match key of an event entry. For IPv4 the addresses are
// IPv4-mapped. AnyPSN in PSN makes the entry match every PSN (psn: all).
type Key struct {
	Src, Dst [16]byte
	DstQPN   uint32
	PSN      uint32
	Iter     uint16
}

// AnyPSN marks a Key that ignores the PSN.
const AnyPSN = 1 << 24

// Entry is one match-action entry.
type Entry struct {
	Key   Key
	Event mirror.EventType
	// Intent is the index of the intent the entry came from.
	Intent int
}

func (e Entry) String() string {
	psn := fmt.Sprint(e.Key.PSN)
	if e.Key.PSN == AnyPSN {
		psn = "*"
	}
	return fmt.Sprintf("%v -> %v qpn %#x psn %s iter %d: %v", addr(e.Key.Src), addr(e.Key.Dst), e.Key.DstQPN,
		psn, e.Key.Iter, e.Event)
}

func addr(b [16]byte) netip.Addr { return netip.AddrFrom16(b).Unmap() }

// ErrIntent is wrapped by every error Compile returns about an intent.
var ErrIntent = errors.New("intent: bad intent")

// IntentError names the intent at fault.
type IntentError struct {
	Index  int
	Intent Intent
	Reason string
}

func (e *IntentError) Error() string {
	return fmt.Sprintf("intent: intent %d %v: %s", e.Index, e.Intent, e.Reason)
}

func (e *IntentError) Unwrap() error { return ErrIntent }

// Options adjust Compile.
type Options struct {
	// SendConns is, for send_read, how many of the first connections
	// carry SEND (the rest carry READ).
	SendConns int
	// OneBased reads QP and PSN as counted from 1, as the paper's
	// listings count them ("qpn: 1, psn: 4" is the fourth packet of the
	// first connection). Lumina's YAML counts both from 0.
	OneBased bool
}

// Compile turns intents into entries for the connections' runtime metadata.
// The data packets of a connection go from the requester to the responder,
// except for READ, whose data packets (the responses) come from the
// responder; their PSNs count from the requester's initial PSN either way.
// Each intent is one entry at IPSN + PSN, modulo 2^24 (psn: all, one entry
// that matches any PSN), as Lumina's controller writes its event table: it
// adds the relative PSN to the sender's initial PSN once, so an intent
// never repeats on later messages. Intents naming a connection or PSN that
// does not exist, or two intents selecting the same packet, are rejected.
func Compile(intents []Intent, conns []Conn, g Geometry, opt Options) ([]Entry, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	ppm := g.PacketsPerMessage()
	var out []Entry
	seen := map[Key]int{}
	base := 0
	if opt.OneBased {
		base = 1
	}
	for i, orig := range intents {
		bad := func(format string, a ...any) error {
			return &IntentError{Index: i, Intent: orig, Reason: fmt.Sprintf(format, a...)}
		}
		in := orig
		all := orig.PSN == AllPSNs
		in.QP -= base
		if !all {
			in.PSN -= base
		}
		switch in.Type {
		case mirror.EventDrop, mirror.EventECN, mirror.EventBitError:
		default:
			return nil, bad("event type %v", in.Type)
		}
		if in.QP < 0 || in.QP >= len(conns) {
			return nil, bad("qpn %d: the test has %d connections (qpn counts from %d)", orig.QP, len(conns), base)
		}
		if !all && (in.PSN < 0 || in.PSN >= ppm*g.NumMessages) {
			return nil, bad("psn %d: %d messages of %d bytes at MTU %d have %d data packets (psn counts from %d)",
				orig.PSN, g.NumMessages, g.MessageSize, g.MTU, ppm*g.NumMessages, base)
		}
		if in.Iter < 1 || in.Iter > 0xffff {
			return nil, bad("iter %d: rounds count from 1", in.Iter)
		}
		c := conns[in.QP]
		if !c.RequesterIP.IsValid() || !c.ResponderIP.IsValid() {
			return nil, bad("connection %d has no addresses in the metadata", in.QP)
		}
		src, dst, qpn := DataDirection(in.QP, c, g, opt)
		k := Key{Src: src, Dst: dst, DstQPN: qpn, Iter: uint16(in.Iter)}
		if all {
			k.PSN = AnyPSN
		} else {
			k.PSN = (c.RequesterIPSN + uint32(in.PSN)) & 0xffffff
		}
		if j, dup := seen[k]; dup {
			return nil, bad("selects the same packet as intent %d", out[j].Intent)
		}
		seen[k] = len(out)
		out = append(out, Entry{Key: k, Event: in.Type, Intent: i})
	}
	return out, nil
}

// DataDirection is the direction of connection i's data packets, as the
// match key names it: requester to responder, except READ, whose data (the
// responses) flows back.
func DataDirection(i int, c Conn, g Geometry, opt Options) (src, dst [16]byte, dstQPN uint32) {
	if g.Verb == VerbRead || g.Verb == VerbSendRead && i >= opt.SendConns {
		return c.ResponderIP.As16(), c.RequesterIP.As16(), c.RequesterQPN
	}
	return c.RequesterIP.As16(), c.ResponderIP.As16(), c.ResponderQPN
}
