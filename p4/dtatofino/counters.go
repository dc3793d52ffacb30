package dtatofino

import (
	"errors"
	"fmt"
	"io"

	"github.com/rdma-appliance/appliance/internal/dtawire"
	"github.com/rdma-appliance/appliance/p4/internal/bfrt"
)

// CounterPrefix starts every line CounterScript prints; the JSON record
// follows it. ParseCounters ignores every other line of bfshell's output.
const CounterPrefix = "dta-counter "

// Indices of translator.p4's drop_reports and postcard_events counters.
// Evictions have a counter of their own (postcard_evictions), since the
// postcard that evicts a flow is counted as held too and a Tofino counter
// takes one count per packet.
var (
	// metered and to_cpu: reports over the rate meter (-DDTA_METER),
	// low priority dropped and high priority sent to the CPU's queue.
	dropReasons    = []string{"no_target", "nack", "duplicate", "unknown_opcode", "metered", "to_cpu"}
	postcardEvents = []string{"held", "complete", "bad_hop"}
	// sketch_events (builds with -DDTA_SKETCH_MERGE): a column merged and
	// waiting, a column completed and written, a column that was not the
	// reporter's expected one (a duplicate or a gap), a reporter a round
	// ahead.
	sketchEvents = []string{"held", "complete", "out_of_order", "ahead"}
)

const postcardEvicted = "evicted"

type counterRecord struct {
	bfrt.Head        // counter, register, end
	Name      string `json:"name"`
	Index     int    `json:"index"`
	Collector string `json:"collector"`
	Packets   uint64 `json:"packets"`
	Bytes     uint64 `json:"bytes"`
	// Values is a register's value per pipe.
	Values []uint64 `json:"values"`
}

const pyCounterHelpers = `
def counter(name, index, collector, table):
    d = table.get(COUNTER_INDEX=index, from_hw=True, print_ents=False).data
    emit({'kind': 'counter', 'name': name, 'index': index, 'collector': collector, 'packets': int(d.get(b'$COUNTER_SPEC_PKTS', 0)), 'bytes': int(d.get(b'$COUNTER_SPEC_BYTES', 0))})

def register(name, index, collector, table, field):
    d = table.get(REGISTER_INDEX=index, from_hw=True, print_ents=False).data
    emit({'kind': 'register', 'name': name, 'index': index, 'collector': collector, 'values': [int(v) for v in d[field]]})
`

// CounterScript renders a bfrt_python script for `bfshell -b` that reads
// the translator's counters (reports by opcode, reports not translated by
// reason, RDMA packets and PSN resynchronisations per collector, postcard
// outcomes) and each collector's PSN register, printing each as a
// CounterPrefix line of JSON for ParseCounters.
func (t Translator) CounterScript() (string, error) {
	if _, err := t.plan(true); err != nil {
		return "", err
	}
	s := bfrt.New(bfrt.ProgName(t.Name, DefaultTranslatorName))
	s.CounterHeader(translatorOrigin, "Translator.CounterScript")
	s.Blank()
	s.Helpers(bfrt.PyEmit(CounterPrefix), pyCounterHelpers)
	n := 0
	s.Comment("Reports received, by opcode.")
	for op := dtawire.OpKeyWrite; op <= dtawire.OpSketchMerge; op++ {
		s.Line("counter('report_pkts', %d, '', %s.report_pkts)", op, s.Ig)
		n++
	}
	s.Comment("Reports not translated, by reason.")
	for i, r := range dropReasons {
		if t.NoSeqnum && (r == "nack" || r == "duplicate") || t.FlowControl == nil && (r == "metered" || r == "to_cpu") {
			continue
		}
		s.Line("counter('drop_reports', %d, '', %s.drop_reports)  # %s", i, s.Ig, r)
		n++
	}
	s.Comment("Postcards, by outcome.")
	for i, e := range postcardEvents {
		s.Line("counter('postcard_events', %d, '', %s.postcard_events)  # %s", i, s.Eg, e)
		n++
	}
	s.Line("counter('postcard_evictions', 0, '', %s.postcard_evictions)  # %s", s.Eg, postcardEvicted)
	n++
	if t.SketchMerge {
		s.Comment("Sketch-Merge reports, by outcome.")
		for i, e := range sketchEvents {
			s.Line("counter('sketch_events', %d, '', %s.sketch_events)  # %s", i, s.Ig, e)
			n++
		}
	}
	s.Comment("Per collector: RDMA packets, PSN resynchronisations, the next PSN (per pipe).")
	for i, c := range t.Collectors {
		s.Line("counter('rdma_pkts', %d, '%s', %s.rdma_pkts)", i, c.Name, s.Eg)
		s.Line("counter('psn_resyncs', %d, '%s', %s.psn_resyncs)", i, c.Name, s.Eg)
		s.Line("register('psn', %d, '%s', %s.psn, b'%s.psn.f1')", i, c.Name, s.Eg, bfrt.Egress)
		n += 3
	}
	s.End(n)
	return s.String(), nil
}

// CollectorCounters are one collector's figures.
type CollectorCounters struct {
	Name        string `json:"name"`
	RDMAPackets uint64 `json:"rdma_packets"`
	RDMABytes   uint64 `json:"rdma_bytes"`
	Resyncs     uint64 `json:"resyncs"`
	// PSN is the next PSN of the pipe the collector's port is in (the
	// other pipes' registers are not used for it and stay where the
	// script set them).
	PSN     uint32   `json:"psn"`
	PipePSN []uint64 `json:"pipe_psn"`
}

// Counters is what CounterScript's output says.
type Counters struct {
	// Reports counts received reports by opcode.
	Reports map[dtawire.Opcode]uint64 `json:"reports"`
	// Dropped counts reports not translated by reason (no_target, nack,
	// duplicate, unknown_opcode; with the rate meter metered, the
	// low-priority reports it dropped, and to_cpu, the high-priority
	// ones it sent to the CPU's queue).
	Dropped map[string]uint64 `json:"dropped"`
	// Postcards counts postcards by outcome (held, complete, evicted,
	// bad_hop).
	Postcards map[string]uint64 `json:"postcards"`
	// Sketches counts Sketch-Merge reports by outcome (held, complete,
	// out_of_order, ahead) in the build with Sketch-Merge.
	Sketches   map[string]uint64   `json:"sketches,omitempty"`
	Collectors []CollectorCounters `json:"collectors"`
}

// ErrCounters is wrapped by ParseCounters' errors.
var ErrCounters = errors.New("dta: bad counter output")

// ParseCounters reads the output of CounterScript run by bfshell for the
// translator t (whose collectors name the per-collector records). It
// fails unless the script's closing record is there with the right count,
// so output cut short is never taken for zeros.
func (t Translator) ParseCounters(r io.Reader) (Counters, error) {
	out := Counters{Reports: map[dtawire.Opcode]uint64{}, Dropped: map[string]uint64{}, Postcards: map[string]uint64{}}
	coll := map[string]int{}
	for i, c := range t.Collectors {
		coll[c.Name] = i
		out.Collectors = append(out.Collectors, CollectorCounters{Name: c.Name})
	}
	err := bfrt.ReadRecords(r, CounterPrefix, ErrCounters, func(ln int, rec *counterRecord) error {
		perColl := func() (*CollectorCounters, error) {
			j, ok := coll[rec.Collector]
			if !ok {
				return nil, fmt.Errorf("%w: line %d: %s of unknown collector %q", ErrCounters, ln, rec.Name, rec.Collector)
			}
			return &out.Collectors[j], nil
		}
		inRange := func(names []string) (string, error) {
			if rec.Index < 0 || rec.Index >= len(names) {
				return "", fmt.Errorf("%w: line %d: %s index %d", ErrCounters, ln, rec.Name, rec.Index)
			}
			return names[rec.Index], nil
		}
		switch {
		case rec.Kind == "counter" && rec.Name == "report_pkts":
			out.Reports[dtawire.Opcode(rec.Index)] = rec.Packets
		case rec.Kind == "counter" && rec.Name == "drop_reports":
			k, err := inRange(dropReasons)
			if err != nil {
				return err
			}
			out.Dropped[k] = rec.Packets
		case rec.Kind == "counter" && rec.Name == "postcard_events":
			k, err := inRange(postcardEvents)
			if err != nil {
				return err
			}
			out.Postcards[k] = rec.Packets
		case rec.Kind == "counter" && rec.Name == "sketch_events" && t.SketchMerge:
			k, err := inRange(sketchEvents)
			if err != nil {
				return err
			}
			if out.Sketches == nil {
				out.Sketches = map[string]uint64{}
			}
			out.Sketches[k] = rec.Packets
		case rec.Kind == "counter" && rec.Name == "postcard_evictions":
			if _, err := inRange([]string{postcardEvicted}); err != nil {
				return err
			}
			out.Postcards[postcardEvicted] = rec.Packets
		case rec.Kind == "counter" && (rec.Name == "rdma_pkts" || rec.Name == "psn_resyncs"):
			c, err := perColl()
			if err != nil {
				return err
			}
			if rec.Name == "rdma_pkts" {
				c.RDMAPackets, c.RDMABytes = rec.Packets, rec.Bytes
			} else {
				c.Resyncs = rec.Packets
			}
		case rec.Kind == "register" && rec.Name == "psn":
			c, err := perColl()
			if err != nil {
				return err
			}
			c.PipePSN = rec.Values
			c.PSN = t.pipePSN(coll[rec.Collector], rec.Values)
		default:
			return fmt.Errorf("%w: line %d: unknown %s %q", ErrCounters, ln, rec.Kind, rec.Name)
		}
		return nil
	})
	return out, err
}

// pipePSN picks a collector's PSN out of the per-pipe values: the pipe of
// its port when the dev port is known; for a front-panel port (resolved
// on the switch only), the pipe whose value moved from the initial PSN
// (only the collector's pipe moves it), else the initial PSN.
func (t Translator) pipePSN(i int, values []uint64) uint32 {
	c := t.Collectors[i]
	for _, pt := range t.Ports {
		if pt.Name == c.Port && pt.FrontPanel == "" {
			if p := pt.DevPort >> 7; p < len(values) {
				return uint32(values[p]) & 0xffffff
			}
		}
	}
	for _, v := range values {
		if v != uint64(c.PSN) {
			return uint32(v) & 0xffffff
		}
	}
	return c.PSN
}
