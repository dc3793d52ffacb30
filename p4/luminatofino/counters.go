package luminatofino

import (
	"errors"
	"fmt"
	"io"

	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/p4/internal/bfrt"
)

// CounterPrefix starts every line CounterScript prints; the JSON record
// follows it. ParseCounters ignores every other line of bfshell's output.
const CounterPrefix = "lumina-counter "

// counterRecord is one line CounterScript prints.
type counterRecord struct {
	bfrt.Head          // counter, register, end
	Name      string   `json:"name"`
	Port      string   `json:"port"`
	Role      string   `json:"role"`
	DevPort   int      `json:"dev_port"`
	Packets   uint64   `json:"packets"`
	Bytes     uint64   `json:"bytes"`
	Values    []uint64 `json:"values"`
}

// The per-port counters the script reads: name -> (control, counter,
// event index or 0 for a counter indexed by the port itself).
var portCounters = []struct {
	name, control, counter string
	event                  mirror.EventType
}{
	{"rx", bfrt.Ingress, "rx_pkts", 0},
	{"rx_roce", bfrt.Ingress, "rx_roce_pkts", 0},
	{"tx", bfrt.Egress, "tx_pkts", 0},
	{"mirrored", bfrt.Egress, "mirrored_pkts", 0},
	{"drop", bfrt.Ingress, "event_pkts", mirror.EventDrop},
	{"ecn", bfrt.Ingress, "event_pkts", mirror.EventECN},
	{"bit-error", bfrt.Ingress, "event_pkts", mirror.EventBitError},
}

const pyCounterHelpers = `
def counter(name, port, role, dev_port, table, index):
    d = table.get(COUNTER_INDEX=index, from_hw=True, print_ents=False).data
    emit({'kind': 'counter', 'name': name, 'port': port, 'role': role, 'dev_port': int(dev_port), 'packets': int(d.get(b'$COUNTER_SPEC_PKTS', 0)), 'bytes': int(d.get(b'$COUNTER_SPEC_BYTES', 0))})

def register(name, table, field):
    d = table.get(REGISTER_INDEX=0, from_hw=True, print_ents=False).data
    emit({'kind': 'register', 'name': name, 'values': [int(v) for v in d[field]]})
`

// countedPorts is the order the counter script reads the ports in: the
// traffic ports by name, then the dumpers' ports in session order.
func (pl *plan) countedPorts() []*Port {
	out := pl.trafficPorts()
	for _, d := range pl.prog.Dumpers {
		out = append(out, pl.ports[d.Port])
	}
	return out
}

// CounterScript renders a bfrt_python script for `bfshell -b` that reads
// the injector's counters (per port: received, received RoCE, transmitted,
// mirrored copies sent, and the drop, ECN and bit-error events injected
// into packets received on it) and the mirror sequence registers (one value
// per pipe), printing each as a CounterPrefix line of JSON for
// ParseCounters.
func (p Program) CounterScript() (string, error) {
	pl, err := p.plan()
	if err != nil {
		return "", err
	}
	name := p.name()
	s := bfrt.New(name)
	s.CounterHeader(origin, "Program.CounterScript")
	s.Blank()
	s.Prelude(specs(pl.sortedPorts()), bfrt.PyFrontPanel, bfrt.PyEmit(CounterPrefix), pyCounterHelpers)

	n := 0
	for _, pt := range pl.countedPorts() {
		role := "traffic"
		if _, d := pl.dumper[pt.Name]; d {
			role = "mirror"
		}
		v := bfrt.PortVar(pt.Name)
		s.Comment("%s (%s)", pt.Name, role)
		for _, c := range portCounters {
			idx := v
			if c.event != 0 {
				idx = fmt.Sprintf("%s * 4 + %d", v, c.event)
			}
			s.Line("counter('%s', '%s', '%s', %s, bfrt.%s.pipe.%s.%s, %s)", c.name, pt.Name, role, v, name, c.control, c.counter, idx)
			n++
		}
	}
	s.Blank()
	s.Comment("The mirror sequence: the last number given out, per pipe.")
	for _, r := range []string{"mirror_seq_lo", "mirror_seq_hi"} {
		s.Line("register('%s', %s.%s, b'%s.%s.f1')", r, s.Ig, r, bfrt.Ingress, r)
		n++
	}
	s.End(n)
	return s.String(), nil
}

// PortCounters are one port's counters as the switch counted them.
type PortCounters struct {
	Name      string `json:"name"`
	Role      string `json:"role"` // traffic or mirror
	DevPort   int    `json:"dev_port"`
	RxPackets uint64 `json:"rx_packets"`
	RxBytes   uint64 `json:"rx_bytes"`
	RxRoCE    uint64 `json:"rx_roce"`
	TxPackets uint64 `json:"tx_packets"`
	TxBytes   uint64 `json:"tx_bytes"`
	Mirrored  uint64 `json:"mirrored"`
	Dropped   uint64 `json:"event_drop"`
	ECNMarked uint64 `json:"event_ecn"`
	Corrupted uint64 `json:"event_corrupt"`
}

// Counters is what CounterScript's output says.
type Counters struct {
	Ports []PortCounters `json:"ports"`
	// PipeSeq is the mirror sequence register of each pipe: the number of
	// RoCE packets that pipe mirrored.
	PipeSeq []uint64 `json:"pipe_seq"`
	// MirrorSeq is the largest of them: the test's traffic ports share
	// one pipe, the others stay at 0.
	MirrorSeq uint64 `json:"mirror_seq"`
}

// ErrCounters is wrapped by ParseCounters' errors.
var ErrCounters = errors.New("lumina: bad counter output")

// ParseCounters reads the output of CounterScript run by bfshell: the
// CounterPrefix lines, wherever they start in a line; everything else
// bfshell prints is skipped. It fails unless the script's closing record
// is there with the right count, so cut-short output is never taken for
// zeros.
func ParseCounters(r io.Reader) (Counters, error) {
	var out Counters
	var lo, hi []uint64
	haveLo, haveHi := false, false
	ports := map[string]int{}
	err := bfrt.ReadRecords(r, CounterPrefix, ErrCounters, func(ln int, rec *counterRecord) error {
		switch rec.Kind {
		case "register":
			switch rec.Name {
			case "mirror_seq_lo":
				lo, haveLo = rec.Values, true
			case "mirror_seq_hi":
				hi, haveHi = rec.Values, true
			default:
				return fmt.Errorf("%w: line %d: unknown register %q", ErrCounters, ln, rec.Name)
			}
		case "counter":
			if rec.Port == "" {
				return fmt.Errorf("%w: line %d: counter %q names no port", ErrCounters, ln, rec.Name)
			}
			j, ok := ports[rec.Port]
			if !ok {
				j = len(out.Ports)
				ports[rec.Port] = j
				out.Ports = append(out.Ports, PortCounters{Name: rec.Port, Role: rec.Role, DevPort: rec.DevPort})
			}
			pc := &out.Ports[j]
			switch rec.Name {
			case "rx":
				pc.RxPackets, pc.RxBytes = rec.Packets, rec.Bytes
			case "rx_roce":
				pc.RxRoCE = rec.Packets
			case "tx":
				pc.TxPackets, pc.TxBytes = rec.Packets, rec.Bytes
			case "mirrored":
				pc.Mirrored = rec.Packets
			case "drop":
				pc.Dropped = rec.Packets
			case "ecn":
				pc.ECNMarked = rec.Packets
			case "bit-error":
				pc.Corrupted = rec.Packets
			default:
				return fmt.Errorf("%w: line %d: unknown counter %q", ErrCounters, ln, rec.Name)
			}
		default:
			return fmt.Errorf("%w: line %d: unknown record kind %q", ErrCounters, ln, rec.Kind)
		}
		return nil
	})
	if err != nil {
		return out, err
	}
	if haveLo != haveHi || len(lo) != len(hi) {
		return out, fmt.Errorf("%w: mirror_seq_lo has %d pipes, mirror_seq_hi %d", ErrCounters, len(lo), len(hi))
	}
	for i := range lo {
		seq := (hi[i]&0xffff)<<32 | lo[i]&0xffffffff
		out.PipeSeq = append(out.PipeSeq, seq)
		out.MirrorSeq = max(out.MirrorSeq, seq)
	}
	return out, nil
}

// Stats converts the counters to the software injector's form, which the
// trace integrity check compares the trace with: RxRoCE sums the RoCE
// packets received on the traffic ports, Mirrored is the mirror sequence.
func (c Counters) Stats() mirror.InjectorStats {
	s := mirror.InjectorStats{Mirrored: c.MirrorSeq}
	for _, pc := range c.Ports {
		if pc.Role == "traffic" {
			s.RxRoCE += pc.RxRoCE
		}
		s.Ports = append(s.Ports, mirror.PortStats{Name: pc.Name, Role: pc.Role, RxPackets: pc.RxPackets,
			RxRoCE: pc.RxRoCE, TxPackets: pc.TxPackets, Mirrored: pc.Mirrored, Dropped: pc.Dropped,
			ECNMarked: pc.ECNMarked, Corrupted: pc.Corrupted})
	}
	return s
}
