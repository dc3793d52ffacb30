package intent_test

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/mirror"
)

var (
	ipA = netip.MustParseAddr("10.0.0.1")
	ipB = netip.MustParseAddr("10.0.0.2")
)

// TestCompileFigure2 is the paper's Figure 2: requester 10.0.0.1 QPN 0xfe
// IPSN 1001, responder 10.0.0.2 QPN 0xea IPSN 3002; "the fourth packet of
// the first QP" is src 10.0.0.1, dst 10.0.0.2, dst QPN 0xea, PSN 1004.
func TestCompileFigure2(t *testing.T) {
	conns := []intent.Conn{{RequesterIP: ipA, RequesterQPN: 0xfe, RequesterIPSN: 1001, ResponderIP: ipB, ResponderQPN: 0xea, ResponderIPSN: 3002}}
	g := intent.Geometry{Verb: intent.VerbWrite, MessageSize: 8192, MTU: 1024, NumMessages: 1}
	es, err := intent.Compile([]intent.Intent{{QP: 1, PSN: 4, Iter: 1, Type: mirror.EventECN}}, conns, g, intent.Options{OneBased: true})
	if err != nil {
		t.Fatal(err)
	}
	want := intent.Key{Src: ipA.As16(), Dst: ipB.As16(), DstQPN: 0xea, PSN: 1004, Iter: 1}
	if len(es) != 1 || es[0].Key != want || es[0].Event != mirror.EventECN {
		t.Fatalf("entries %v", es)
	}
	// READ data packets are the responses: responder to requester, on the
	// requester's QPN, in the requester's PSN space.
	g.Verb = intent.VerbRead
	es, err = intent.Compile([]intent.Intent{{QP: 0, PSN: 2, Iter: 1, Type: mirror.EventDrop}}, conns, g, intent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want = intent.Key{Src: ipB.As16(), Dst: ipA.As16(), DstQPN: 0xfe, PSN: 1003, Iter: 1}
	if len(es) != 1 || es[0].Key != want {
		t.Fatalf("read entries %v", es)
	}
}

// listing2 is the paper's Listing 2: 2 connections, 10 messages of 10240
// bytes at MTU 1024; ECN on the 4th packet of QP 1, drop the 5th packet of
// QP 2 and its retransmission.
func listing2() ([]intent.Intent, []intent.Conn, intent.Geometry) {
	intents := []intent.Intent{{QP: 1, PSN: 4, Iter: 1, Type: mirror.EventECN}, {QP: 2, PSN: 5, Iter: 1, Type: mirror.EventDrop},
		{QP: 2, PSN: 5, Iter: 2, Type: mirror.EventDrop}}
	conns := []intent.Conn{
		{RequesterIP: ipA, RequesterQPN: 0x11, RequesterIPSN: 100, ResponderIP: ipB, ResponderQPN: 0x21, ResponderIPSN: 900},
		{RequesterIP: ipA, RequesterQPN: 0x12, RequesterIPSN: 0xfffff0, ResponderIP: ipB, ResponderQPN: 0x22, ResponderIPSN: 5},
	}
	return intents, conns, intent.Geometry{Verb: intent.VerbWrite, MessageSize: 10240, MTU: 1024, NumMessages: 10}
}

// TestCompileListing2: each intent is one entry at IPSN + psn, as
// Lumina's controller keys its event table, even with ten messages per
// connection: the 5th packet of QP 2 is the first message's, wrapping at
// 2^24.
func TestCompileListing2(t *testing.T) {
	intents, conns, g := listing2()
	es, err := intent.Compile(intents, conns, g, intent.Options{OneBased: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 3 {
		t.Fatalf("%d entries, want one per intent: %v", len(es), es)
	}
	for i, want := range []intent.Key{
		{Src: ipA.As16(), Dst: ipB.As16(), DstQPN: 0x21, PSN: 100 + 3, Iter: 1},
		{Src: ipA.As16(), Dst: ipB.As16(), DstQPN: 0x22, PSN: (0xfffff0 + 4) & 0xffffff, Iter: 1},
		{Src: ipA.As16(), Dst: ipB.As16(), DstQPN: 0x22, PSN: (0xfffff0 + 4) & 0xffffff, Iter: 2},
	} {
		if es[i].Key != want || es[i].Intent != i || es[i].Event != intents[i].Type {
			t.Errorf("entry %d: %v, want %v", i, es[i], want)
		}
	}
	// The IPSN wraps: the 20th packet of QP 2 is PSN 3.
	es, err = intent.Compile([]intent.Intent{{QP: 2, PSN: 20, Iter: 1, Type: mirror.EventDrop}}, conns, g, intent.Options{OneBased: true})
	if err != nil || len(es) != 1 || es[0].Key.PSN != 3 {
		t.Fatalf("wrapped: %v %v", es, err)
	}
}

// TestCompileLaterMessage: a PSN beyond the first message selects one
// packet of a later message; the same packet named twice is refused, and
// a psn of the first message does not reach the later ones.
func TestCompileLaterMessage(t *testing.T) {
	_, conns, g := listing2()
	es, err := intent.Compile([]intent.Intent{{QP: 1, PSN: 29, Iter: 3, Type: mirror.EventDrop}}, conns, g, intent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := intent.Key{Src: ipA.As16(), Dst: ipB.As16(), DstQPN: 0x22, PSN: (0xfffff0 + 29) & 0xffffff, Iter: 3}
	if len(es) != 1 || es[0].Key != want {
		t.Fatalf("entries %v, want the 10th packet of the 3rd message only: %v", es, want)
	}
	_, err = intent.Compile([]intent.Intent{{QP: 1, PSN: 29, Iter: 3, Type: mirror.EventDrop}, {QP: 1, PSN: 29, Iter: 3, Type: mirror.EventECN}},
		conns, g, intent.Options{})
	if !errors.Is(err, intent.ErrIntent) {
		t.Fatalf("one packet named twice: %v", err)
	}
	// psn 9 (the first message's 10th packet) and psn 29 are two packets.
	es, err = intent.Compile([]intent.Intent{{QP: 1, PSN: 9, Iter: 3, Type: mirror.EventDrop}, {QP: 1, PSN: 29, Iter: 3, Type: mirror.EventECN}},
		conns, g, intent.Options{})
	if err != nil || len(es) != 2 || es[0].Key.PSN != (0xfffff0+9)&0xffffff {
		t.Fatalf("first and third message: %v %v", es, err)
	}
}

func TestCompileRejects(t *testing.T) {
	intents, conns, g := listing2()
	for _, tc := range []struct {
		in   intent.Intent
		geom intent.Geometry
	}{
		{intent.Intent{QP: 3, PSN: 1, Iter: 1, Type: mirror.EventDrop}, g},    // no third connection
		{intent.Intent{QP: 1, PSN: 101, Iter: 1, Type: mirror.EventDrop}, g},  // 10 messages have 100 packets
		{intent.Intent{QP: 1, PSN: 0, Iter: 1, Type: mirror.EventDrop}, g},    // one-based
		{intent.Intent{QP: 1, PSN: 1, Iter: 0, Type: mirror.EventDrop}, g},    // rounds count from 1
		{intent.Intent{QP: 1, PSN: 1, Iter: 1, Type: mirror.EventType(7)}, g}, // no such event
		{intents[0], intent.Geometry{Verb: "atomic", MessageSize: 8, MTU: 1024, NumMessages: 1}},
		{intents[0], intent.Geometry{Verb: intent.VerbWrite, MessageSize: 8, MTU: 1500, NumMessages: 1}},
	} {
		_, err := intent.Compile([]intent.Intent{tc.in}, conns, tc.geom, intent.Options{OneBased: true})
		if err == nil {
			t.Errorf("%v %+v accepted", tc.in, tc.geom)
		}
	}
	// Two intents selecting the same packet.
	_, err := intent.Compile([]intent.Intent{intents[1], intents[1]}, conns, g, intent.Options{OneBased: true})
	var ie *intent.IntentError
	if !errors.As(err, &ie) || ie.Index != 1 || !errors.Is(err, intent.ErrIntent) {
		t.Fatalf("duplicate: %v", err)
	}
}
