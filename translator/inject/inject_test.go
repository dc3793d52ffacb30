package inject

import (
	"net/netip"
	"testing"

	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

var (
	ipA = netip.MustParseAddr("10.0.0.1")
	ipB = netip.MustParseAddr("10.0.0.2")
)

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

// sender emits frames of one connection's data packets.
type sender struct {
	b     roce.Builder
	buf   []byte
	ppm   int // packets per message
	table *Table
	p     roce.Packet
}

func newSender(t *testing.T, tab *Table, c intent.Conn, ppm int) *sender {
	return &sender{table: tab, ppm: ppm, buf: make([]byte, 2048), b: roce.Builder{
		SrcGID: roce.GIDFromAddr(c.RequesterIP), DstGID: roce.GIDFromAddr(c.ResponderIP), DestQP: c.ResponderQPN,
		HopLimit: 64}}
}

// send pushes the packet with relative index rel (from 0, counting every
// packet of every message) through the table.
func (s *sender) send(t *testing.T, ipsn uint32, rel int) (mirror.EventType, uint16) {
	t.Helper()
	pos := rel % s.ppm
	switch {
	case s.ppm == 1:
		s.b.Opcode = roce.RCWriteOnly
	case pos == 0:
		s.b.Opcode = roce.RCWriteFirst
	case pos == s.ppm-1:
		s.b.Opcode = roce.RCWriteLast
	default:
		s.b.Opcode = roce.RCWriteMiddle
	}
	s.b.PSN = (ipsn + uint32(rel)) & roce.PSNMask
	n, err := s.b.Build(s.buf, make([]byte, 256))
	if err != nil {
		t.Fatal(err)
	}
	if err := roce.Parse(s.buf[:n], &s.p); err != nil {
		t.Fatal(err)
	}
	s.table.Lock()
	defer s.table.Unlock()
	return s.table.Lookup(&s.p, s.buf[:n])
}

// goBackN replays a go-back-N sender over the table: packets are sent in
// order; a dropped packet is resent, with everything after it, once the
// round ends. It returns the (relative index, iter) of every drop and the
// round of the first packet of every go.
func goBackN(t *testing.T, s *sender, ipsn uint32, total int) (drops [][2]int, rounds []int) {
	next := 0
	for next < total {
		if len(rounds) > 50 {
			t.Fatal("go-back-N does not converge")
		}
		lost := -1
		for i := next; i < total; i++ {
			ev, iter := s.send(t, ipsn, i)
			if i == next {
				rounds = append(rounds, int(iter))
			}
			if ev == mirror.EventDrop {
				drops = append(drops, [2]int{i, int(iter)})
				if lost < 0 {
					lost = i
				}
			}
		}
		if lost < 0 {
			break
		}
		next = lost
	}
	return drops, rounds
}

// TestFigure3 is the paper's Figure 3: one connection, IPSN 1, four
// packets; drop PSN 2 in round 1 and PSN 3 in round 2. The drops happen
// exactly there, and the retransmission of PSN 3 starts round 3. Both ITER
// modes agree on one message.
func TestFigure3(t *testing.T) {
	c := intent.Conn{RequesterIP: ipA, RequesterQPN: 1, RequesterIPSN: 1, ResponderIP: ipB, ResponderQPN: 2, ResponderIPSN: 50}
	g := intent.Geometry{Verb: intent.VerbWrite, MessageSize: 4 * 256, MTU: 256, NumMessages: 1}
	intents := []intent.Intent{{QP: 1, PSN: 2, Iter: 1, Type: mirror.EventDrop}, {QP: 1, PSN: 3, Iter: 2, Type: mirror.EventDrop}}
	for _, mode := range []intent.IterMode{intent.IterPaper, intent.IterP4} {
		es, err := intent.Compile(intents, []intent.Conn{c}, g, intent.Options{OneBased: true})
		if err != nil {
			t.Fatal(err)
		}
		tab := NewTable(mode)
		if err := tab.Load(es, []intent.Conn{c}, g, intent.Options{}); err != nil {
			t.Fatal(err)
		}
		s := newSender(t, tab, c, 4)
		drops, rounds := goBackN(t, s, 1, 4)
		// Relative index 1 is PSN 2, index 2 is PSN 3.
		if len(drops) != 2 || drops[0] != [2]int{1, 1} || drops[1] != [2]int{2, 2} {
			t.Fatalf("%v: drops %v, want PSN 2 in round 1 and PSN 3 in round 2", mode, drops)
		}
		_, hits := tab.Entries()
		if hits[0] != 1 || hits[1] != 1 {
			t.Fatalf("%v: hits %v", mode, hits)
		}
		// Three goes: PSN 1-4 in round 1, 2-4 in round 2, 3-4 in round 3.
		if len(rounds) != 3 || rounds[0] != 1 || rounds[1] != 2 || rounds[2] != 3 {
			t.Fatalf("%v: rounds %v, want [1 2 3]", mode, rounds)
		}
	}
}

// TestIterModesDiffer shows the documented difference: the paper counts
// rounds per connection for the whole test, the public P4 program per
// message (an in-order first packet resets ITER to 1). Round-1 drops of the
// first packet of each of three messages (one intent per message, as
// Lumina keys events at initial PSN + psn) therefore all hit in P4 mode,
// but in paper mode only the first: its retransmission moves the
// connection to round 2 for good.
func TestIterModesDiffer(t *testing.T) {
	c := intent.Conn{RequesterIP: ipA, RequesterQPN: 1, RequesterIPSN: 0xfffffe, ResponderIP: ipB, ResponderQPN: 2}
	g := intent.Geometry{Verb: intent.VerbWrite, MessageSize: 512, MTU: 256, NumMessages: 3}
	intents := []intent.Intent{{QP: 0, PSN: 0, Iter: 1, Type: mirror.EventDrop}, {QP: 0, PSN: 2, Iter: 1, Type: mirror.EventDrop},
		{QP: 0, PSN: 4, Iter: 1, Type: mirror.EventDrop}}
	want := map[intent.IterMode]int{intent.IterPaper: 1, intent.IterP4: 3}
	for mode, n := range want {
		es, _ := intent.Compile(intents, []intent.Conn{c}, g, intent.Options{})
		tab := NewTable(mode)
		if err := tab.Load(es, []intent.Conn{c}, g, intent.Options{}); err != nil {
			t.Fatal(err)
		}
		// Messages go one at a time (tx-depth 1), each retried until done.
		s := newSender(t, tab, c, 2)
		dropped := 0
		for m := 0; m < 3; m++ {
			for try := 0; ; try++ {
				lost := false
				for i := 0; i < 2; i++ {
					if ev, _ := s.send(t, 0xfffffe, 2*m+i); ev == mirror.EventDrop {
						dropped++
						lost = true
					}
				}
				if !lost {
					break
				}
			}
		}
		if dropped != n {
			t.Errorf("%v mode dropped %d first packets, want %d", mode, dropped, n)
		}
	}
}

func TestAllPSNs(t *testing.T) {
	c := intent.Conn{RequesterIP: ipA, RequesterQPN: 1, RequesterIPSN: 10, ResponderIP: ipB, ResponderQPN: 2}
	g := intent.Geometry{Verb: intent.VerbWrite, MessageSize: 1024, MTU: 256, NumMessages: 2}
	es, err := intent.Compile([]intent.Intent{{QP: 0, PSN: intent.AllPSNs, Iter: 1, Type: mirror.EventECN}}, []intent.Conn{c}, g, intent.Options{})
	if err != nil || len(es) != 1 || es[0].Key.PSN != intent.AnyPSN {
		t.Fatalf("%v %v", es, err)
	}
	tab := NewTable(intent.IterPaper)
	if err := tab.Load(es, []intent.Conn{c}, g, intent.Options{}); err != nil {
		t.Fatal(err)
	}
	s := newSender(t, tab, c, 4)
	for i := 0; i < 8; i++ {
		if ev, _ := s.send(t, 10, i); ev != mirror.EventECN {
			t.Fatalf("packet %d: %v", i, ev)
		}
	}
	// Other connections are untouched.
	other := newSender(t, tab, intent.Conn{RequesterIP: ipA, ResponderIP: ipB, ResponderQPN: 3}, 4)
	if ev, iter := other.send(t, 10, 0); ev != mirror.EventNone || iter != 0 {
		t.Fatalf("unknown connection: %v %d", ev, iter)
	}
}
