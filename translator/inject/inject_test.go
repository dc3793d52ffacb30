package inject

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

var (
	ipA = netip.MustParseAddr("10.0.0.1")
	ipB = netip.MustParseAddr("10.0.0.2")
)

// TestCompileFigure2 is the paper's Figure 2: requester 10.0.0.1 QPN 0xfe
// IPSN 1001, responder 10.0.0.2 QPN 0xea IPSN 3002; "the fourth packet of
// the first QP" is src 10.0.0.1, dst 10.0.0.2, dst QPN 0xea, PSN 1004.
func TestCompileFigure2(t *testing.T) {
	conns := []Conn{{RequesterIP: ipA, RequesterQPN: 0xfe, RequesterIPSN: 1001, ResponderIP: ipB, ResponderQPN: 0xea, ResponderIPSN: 3002}}
	g := Geometry{Verb: VerbWrite, MessageSize: 8192, MTU: 1024, NumMessages: 1}
	es, err := Compile([]Intent{{QP: 1, PSN: 4, Iter: 1, Type: EventECN}}, conns, g, Options{OneBased: true})
	if err != nil {
		t.Fatal(err)
	}
	want := Key{Src: ipA.As16(), Dst: ipB.As16(), DstQPN: 0xea, PSN: 1004, Iter: 1}
	if len(es) != 1 || es[0].Key != want || es[0].Event != EventECN {
		t.Fatalf("entries %v", es)
	}
	// READ data packets are the responses: responder to requester, on the
	// requester's QPN, in the requester's PSN space.
	g.Verb = VerbRead
	es, err = Compile([]Intent{{QP: 0, PSN: 2, Iter: 1, Type: EventDrop}}, conns, g, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want = Key{Src: ipB.As16(), Dst: ipA.As16(), DstQPN: 0xfe, PSN: 1003, Iter: 1}
	if len(es) != 1 || es[0].Key != want {
		t.Fatalf("read entries %v", es)
	}
}

// listing2 is the paper's Listing 2: 2 connections, 10 messages of 10240
// bytes at MTU 1024; ECN on the 4th packet of QP 1, drop the 5th packet of
// QP 2 and its retransmission.
func listing2() ([]Intent, []Conn, Geometry) {
	intents := []Intent{{QP: 1, PSN: 4, Iter: 1, Type: EventECN}, {QP: 2, PSN: 5, Iter: 1, Type: EventDrop},
		{QP: 2, PSN: 5, Iter: 2, Type: EventDrop}}
	conns := []Conn{
		{RequesterIP: ipA, RequesterQPN: 0x11, RequesterIPSN: 100, ResponderIP: ipB, ResponderQPN: 0x21, ResponderIPSN: 900},
		{RequesterIP: ipA, RequesterQPN: 0x12, RequesterIPSN: 0xfffff0, ResponderIP: ipB, ResponderQPN: 0x22, ResponderIPSN: 5},
	}
	return intents, conns, Geometry{Verb: VerbWrite, MessageSize: 10240, MTU: 1024, NumMessages: 10}
}

func TestCompileListing2(t *testing.T) {
	intents, conns, g := listing2()
	es, err := Compile(intents, conns, g, Options{OneBased: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 30 {
		t.Fatalf("%d entries, want 3 intents x 10 messages", len(es))
	}
	// Message i of QP 2 has its 5th packet at IPSN + 10i + 4, wrapping at 2^24.
	for m := 0; m < 10; m++ {
		e := es[10+m]
		if want := (0xfffff0 + uint32(10*m+4)) & 0xffffff; e.Key.PSN != want || e.Key.DstQPN != 0x22 || e.Event != EventDrop || e.Key.Iter != 1 {
			t.Fatalf("entry %d: %v, want psn %#x", 10+m, e, want)
		}
	}
}

func TestCompileRejects(t *testing.T) {
	intents, conns, g := listing2()
	for _, tc := range []struct {
		in   Intent
		geom Geometry
	}{
		{Intent{QP: 3, PSN: 1, Iter: 1, Type: EventDrop}, g},    // no third connection
		{Intent{QP: 1, PSN: 11, Iter: 1, Type: EventDrop}, g},   // a message has 10 packets
		{Intent{QP: 1, PSN: 0, Iter: 1, Type: EventDrop}, g},    // one-based
		{Intent{QP: 1, PSN: 1, Iter: 0, Type: EventDrop}, g},    // rounds count from 1
		{Intent{QP: 1, PSN: 1, Iter: 1, Type: EventType(7)}, g}, // no such event
		{intents[0], Geometry{Verb: "atomic", MessageSize: 8, MTU: 1024, NumMessages: 1}},
		{intents[0], Geometry{Verb: VerbWrite, MessageSize: 8, MTU: 1500, NumMessages: 1}},
	} {
		_, err := Compile([]Intent{tc.in}, conns, tc.geom, Options{OneBased: true})
		if err == nil {
			t.Errorf("%v %+v accepted", tc.in, tc.geom)
		}
	}
	// Two intents selecting the same packet.
	_, err := Compile([]Intent{intents[1], intents[1]}, conns, g, Options{OneBased: true})
	var ie *IntentError
	if !errors.As(err, &ie) || ie.Index != 1 || !errors.Is(err, ErrIntent) {
		t.Fatalf("duplicate: %v", err)
	}
}

// sender emits frames of one connection's data packets.
type sender struct {
	b     roce.Builder
	buf   []byte
	ppm   int // packets per message
	table *Table
	p     roce.Packet
}

func newSender(t *testing.T, tab *Table, c Conn, ppm int) *sender {
	return &sender{table: tab, ppm: ppm, buf: make([]byte, 2048), b: roce.Builder{
		SrcGID: roce.GIDFromAddr(c.RequesterIP), DstGID: roce.GIDFromAddr(c.ResponderIP), DestQP: c.ResponderQPN,
		HopLimit: 64}}
}

// send pushes the packet with relative index rel (from 0, counting every
// packet of every message) through the table.
func (s *sender) send(t *testing.T, ipsn uint32, rel int) (EventType, uint16) {
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
			if ev == EventDrop {
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
	c := Conn{RequesterIP: ipA, RequesterQPN: 1, RequesterIPSN: 1, ResponderIP: ipB, ResponderQPN: 2, ResponderIPSN: 50}
	g := Geometry{Verb: VerbWrite, MessageSize: 4 * 256, MTU: 256, NumMessages: 1}
	intents := []Intent{{QP: 1, PSN: 2, Iter: 1, Type: EventDrop}, {QP: 1, PSN: 3, Iter: 2, Type: EventDrop}}
	for _, mode := range []IterMode{IterPaper, IterP4} {
		es, err := Compile(intents, []Conn{c}, g, Options{OneBased: true})
		if err != nil {
			t.Fatal(err)
		}
		tab := NewTable(mode)
		if err := tab.Load(es, []Conn{c}, g, Options{}); err != nil {
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
// message (an in-order first packet resets ITER to 1). A drop-in-round-1
// intent on every message therefore hits every message in P4 mode but only
// the messages before the first retransmission in paper mode.
func TestIterModesDiffer(t *testing.T) {
	c := Conn{RequesterIP: ipA, RequesterQPN: 1, RequesterIPSN: 0xfffffe, ResponderIP: ipB, ResponderQPN: 2}
	g := Geometry{Verb: VerbWrite, MessageSize: 512, MTU: 256, NumMessages: 3}
	intents := []Intent{{QP: 0, PSN: 0, Iter: 1, Type: EventDrop}}
	want := map[IterMode]int{IterPaper: 1, IterP4: 3}
	for mode, n := range want {
		es, _ := Compile(intents, []Conn{c}, g, Options{})
		tab := NewTable(mode)
		if err := tab.Load(es, []Conn{c}, g, Options{}); err != nil {
			t.Fatal(err)
		}
		// Messages go one at a time (tx-depth 1), each retried until done.
		s := newSender(t, tab, c, 2)
		dropped := 0
		for m := 0; m < 3; m++ {
			for try := 0; ; try++ {
				lost := false
				for i := 0; i < 2; i++ {
					if ev, _ := s.send(t, 0xfffffe, 2*m+i); ev == EventDrop {
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
	c := Conn{RequesterIP: ipA, RequesterQPN: 1, RequesterIPSN: 10, ResponderIP: ipB, ResponderQPN: 2}
	g := Geometry{Verb: VerbWrite, MessageSize: 1024, MTU: 256, NumMessages: 2}
	es, err := Compile([]Intent{{QP: 0, PSN: AllPSNs, Iter: 1, Type: EventECN}}, []Conn{c}, g, Options{})
	if err != nil || len(es) != 1 || es[0].Key.PSN != AnyPSN {
		t.Fatalf("%v %v", es, err)
	}
	tab := NewTable(IterPaper)
	if err := tab.Load(es, []Conn{c}, g, Options{}); err != nil {
		t.Fatal(err)
	}
	s := newSender(t, tab, c, 4)
	for i := 0; i < 8; i++ {
		if ev, _ := s.send(t, 10, i); ev != EventECN {
			t.Fatalf("packet %d: %v", i, ev)
		}
	}
	// Other connections are untouched.
	other := newSender(t, tab, Conn{RequesterIP: ipA, ResponderIP: ipB, ResponderQPN: 3}, 4)
	if ev, iter := other.send(t, 10, 0); ev != EventNone || iter != 0 {
		t.Fatalf("unknown connection: %v %d", ev, iter)
	}
}

func TestMirrorMetadata(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		b := roce.Builder{SrcMAC: header.MAC{2, 0, 0, 0, 0, 1}, DstMAC: header.MAC{2, 0, 0, 0, 0, 2},
			SrcGID: roce.GIDFromAddr(ipA), DstGID: roce.GIDFromAddr(ipB), HopLimit: 64, TrafficClass: 0x6a,
			SrcPort: 0xc001, Opcode: roce.RCSendOnly, DestQP: 0x123, PSN: 77}
		if v6 {
			b.SrcGID = roce.GIDFromAddr(netip.MustParseAddr("fd00::1"))
			b.DstGID = roce.GIDFromAddr(netip.MustParseAddr("fd00::2"))
		}
		frame := make([]byte, 512)
		n, err := b.Build(frame, []byte("payload!"))
		if err != nil {
			t.Fatal(err)
		}
		frame = frame[:n]
		var p header.Parsed
		if err := header.Decode(frame, &p); err != nil {
			t.Fatal(err)
		}
		m := MirrorMeta{Seq: 0x0102030405060708, Timestamp: 0x7fff_1234_5678_9abc, Event: EventECN, OrigSrcPort: 0xc001}
		WriteMirror(frame, &p, m, 0x5555, DefaultRewritePort)
		// Golden bytes: the 48 low bits of the sequence in the source MAC,
		// of the timestamp in the destination MAC.
		if got := frame[6:12]; string(got) != "\x03\x04\x05\x06\x07\x08" {
			t.Fatalf("src MAC % x", got)
		}
		if got := frame[0:6]; string(got) != "\x12\x34\x56\x78\x9a\xbc" {
			t.Fatalf("dst MAC % x", got)
		}
		u := p.UDP(frame)
		if u.SrcPort() != 0x5555 || u.DstPort() != DefaultRewritePort || u.Checksum() != 0xc001 {
			t.Fatalf("udp %d %d %#x", u.SrcPort(), u.DstPort(), u.Checksum())
		}
		if !v6 && (!p.IPv4(frame).ChecksumValid() || p.IPv4(frame).TTL() != uint8(EventECN)) {
			t.Fatal("ipv4 header after WriteMirror")
		}
		got, err := ReadMirror(frame, &p)
		want := MirrorMeta{Seq: m.Seq & Mask48, Timestamp: m.Timestamp & Mask48, Event: EventECN, OrigSrcPort: 0xc001}
		if err != nil || got != want {
			t.Fatalf("read %v %v, want %v", got, err, want)
		}
		// A mirrored copy is not RoCE to anyone until restored.
		var rp roce.Packet
		if roce.Parse(frame, &rp) == nil {
			t.Fatal("mirrored copy parses as RoCEv2")
		}
		if _, err := RestoreMirror(frame, &p); err != nil {
			t.Fatal(err)
		}
		if err := roce.Parse(frame, &rp); err != nil || rp.VerifyICRC(frame) != nil {
			t.Fatalf("restored copy: %v / icrc %v", err, rp.VerifyICRC(frame))
		}
		if rp.SrcPort != 0xc001 || rp.ECN != header.ECNCE || rp.DestQP != 0x123 || rp.PSN != 77 {
			t.Fatalf("restored %+v", rp)
		}
		if !v6 && !p.IPv4(frame).ChecksumValid() {
			t.Fatal("restored ipv4 checksum")
		}
	}
	var p header.Parsed
	arp := make([]byte, 60)
	arp[12], arp[13] = 0x08, 0x06
	_ = header.Decode(arp, &p)
	if _, err := ReadMirror(arp, &p); !errors.Is(err, ErrNotMirrored) {
		t.Fatalf("arp: %v", err)
	}
}
