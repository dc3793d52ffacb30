package luminatofino

import (
	"math/rand/v2"
	"testing"

	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/p4/internal/p4test"
	"github.com/rdma-appliance/appliance/translator/inject"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// p4Model runs injector.p4's ingress ITER and event logic for data
// packets as the stateful ALUs would: roce_opcode from the program's const
// entries, connection table, conn_psn in its shifted form (psn_paper or
// psn_expected), conn_iter (iter_next, iter_restart or iter_read), then
// event_psn and event_any, loaded the way Script loads them (initPSN,
// ITER 1). TestModelMatchesSoftware runs it side by side with the
// software injector's Table.
type p4Model struct {
	mode   intent.IterMode
	opcode map[uint64]string
	conn   map[connKey]int
	psn    []uint32
	iter   []uint16
	events map[intent.Key]mirror.EventType
}

func newModel(t *testing.T, ps *p4test.Source, p Program) *p4Model {
	pl, err := p.plan()
	if err != nil {
		t.Fatal(err)
	}
	m := &p4Model{mode: p.IterMode, opcode: map[uint64]string{}, conn: pl.conns, events: map[intent.Key]mirror.EventType{}}
	for _, e := range ps.Entries["Ingress.roce_opcode"] {
		m.opcode[e.Key] = e.Action
	}
	for _, c := range p.Conns {
		m.psn = append(m.psn, initPSN(p.IterMode, c.RequesterIPSN))
		m.iter = append(m.iter, 1)
	}
	for _, e := range p.Entries {
		m.events[e.Key] = e.Event
	}
	return m
}

func (m *p4Model) packet(k connKey, op roce.Opcode, psn uint32) (mirror.EventType, uint16) {
	act := m.opcode[uint64(op)]
	if act != "data_first" && act != "data_rest" {
		return mirror.EventNone, 0
	}
	i, ok := m.conn[k]
	if !ok {
		return mirror.EventNone, 0
	}
	psn8 := psn << 8
	var newRound bool
	if m.mode == intent.IterPaper {
		newRound = int32(psn8-m.psn[i]) <= 0
		m.psn[i] = psn8
	} else {
		newRound = m.psn[i] != psn8
		m.psn[i] = psn8 + 0x100
	}
	switch {
	case newRound:
		m.iter[i]++
	case m.mode == intent.IterP4 && act == "data_first":
		m.iter[i] = 1
	}
	key := intent.Key{Src: k.Src, Dst: k.Dst, DstQPN: k.DstQPN, PSN: psn, Iter: m.iter[i]}
	if ev, ok := m.events[key]; ok {
		return ev, m.iter[i]
	}
	key.PSN = intent.AnyPSN
	return m.events[key], m.iter[i]
}

// TestModelMatchesSoftware sends random go-back-N-like packet sequences
// (in order, retransmissions from an earlier PSN, skips, PSN wrap, non-data
// packets) of every connection through the model and through
// inject.Table, in both ITER modes, and requires the same event and round
// for every packet.
func TestModelMatchesSoftware(t *testing.T) {
	ps := p4test.Parse(t, p4Path)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, ex := range examples {
		for _, mode := range []intent.IterMode{intent.IterPaper, intent.IterP4} {
			p := ex.prog(t)
			p.IterMode = mode
			model := newModel(t, ps, p)
			tab := inject.NewTable(mode)
			if err := tab.Load(p.Entries, p.Conns, p.Geometry, p.Options); err != nil {
				t.Fatal(err)
			}
			ppm := p.Geometry.PacketsPerMessage()
			total := ppm * p.Geometry.NumMessages
			hits := 0
			for ci, c := range p.Conns {
				k := dataKey(ci, c, p.Geometry, p.Options)
				read := p.Geometry.Verb == intent.VerbRead
				b := roce.Builder{SrcGID: roce.GID(k.Src), DstGID: roce.GID(k.Dst), DestQP: k.DstQPN, HopLimit: 64}
				buf := make([]byte, 2048)
				var pkt roce.Packet
				rel := 0
				for range 400 {
					op := dataOpcode(read, rel%ppm, ppm)
					if rng.IntN(20) == 0 {
						op = roce.Opcode(0x11) // an ACK on the same key: not data
					}
					b.Opcode = op
					b.PSN = (c.RequesterIPSN + uint32(rel)) & roce.PSNMask
					n, err := b.Build(buf, make([]byte, 64*boolInt(op.HasPayload())))
					if err != nil {
						t.Fatal(err)
					}
					if err := roce.Parse(buf[:n], &pkt); err != nil {
						t.Fatal(err)
					}
					tab.Lock()
					wantEv, wantIter := tab.Lookup(&pkt, buf[:n])
					tab.Unlock()
					gotEv, gotIter := model.packet(k, op, b.PSN)
					if gotEv != wantEv || gotIter != wantIter {
						t.Fatalf("%s %v conn %d opcode %#x psn %d: P4 model (%v, iter %d), software (%v, iter %d)",
							ex.name, mode, ci, uint8(op), b.PSN, gotEv, gotIter, wantEv, wantIter)
					}
					if wantEv != mirror.EventNone {
						hits++
					}
					switch r := rng.IntN(10); {
					case r == 0 && rel > 0: // go back N
						rel -= 1 + rng.IntN(min(rel, 2*ppm))
					case r == 1: // a loss upstream
						rel += 2
					default:
						rel++
					}
					rel %= total
				}
			}
			if hits == 0 {
				t.Errorf("%s %v: no packet hit an event: the test proves little", ex.name, mode)
			}
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// dataOpcode is the opcode of packet pos of a message of ppm packets.
func dataOpcode(read bool, pos, ppm int) roce.Opcode {
	first, middle, last, only := roce.RCWriteFirst, roce.RCWriteMiddle, roce.RCWriteLast, roce.RCWriteOnly
	if read {
		first, middle, last, only = roce.RCReadResponseFirst, roce.RCReadResponseMiddle, roce.RCReadResponseLast, roce.RCReadResponseOnly
	}
	switch {
	case ppm == 1:
		return only
	case pos == 0:
		return first
	case pos == ppm-1:
		return last
	}
	return middle
}
