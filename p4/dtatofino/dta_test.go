package dtatofino

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/internal/dtamem"
	"github.com/rdma-appliance/appliance/internal/dtawire"
	"github.com/rdma-appliance/appliance/p4/internal/p4test"
	"github.com/rdma-appliance/appliance/translator/dtatranslator"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

const (
	translatorP4 = "translator.p4"
	reporterP4   = "reporter.p4"
)

func port(t testing.TB, name string, dev int, m string) Port {
	return Port{Name: name, DevPort: dev, Speed: "100G", FEC: "rs", MAC: p4test.MAC(t, m)}
}

// twoCollectors is a translator in front of two collectors: one serving
// Key-Write (N up to 2), Key-Increment and two Append lists, one serving
// postcards and a list, with two tracked reporters (one asking for ACKs).
func twoCollectors(t testing.TB) Translator {
	return Translator{
		Ports: []Port{
			port(t, "collector-a", 0, "02:00:00:00:0a:01"),
			port(t, "collector-b", 4, "02:00:00:00:0a:02"),
			port(t, "fabric", 8, "02:00:00:00:0a:03"),
		},
		Routes: []Route{
			{Prefix: netip.MustParsePrefix("10.1.0.0/16"), Port: "fabric", MAC: p4test.MAC(t, "0c:42:a1:00:01:01")},
			{Prefix: netip.MustParsePrefix("10.9.0.1/32"), Port: "collector-a", MAC: p4test.MAC(t, "0c:42:a1:00:09:01")},
		},
		MAC:  p4test.MAC(t, "02:00:00:00:0a:ff"),
		IP:   netip.MustParseAddr("10.9.0.254"),
		QPN:  0x11,
		DSCP: 26,
		Collectors: []Collector{
			{Name: "kv", Port: "collector-a", MAC: p4test.MAC(t, "0c:42:a1:00:09:01"), IP: netip.MustParseAddr("10.9.0.1"),
				QPN: 0x2c1, PSN: 1000, Redundancy: 2,
				KeyWrite:     &dtamem.KeyWriteRegion{Addr: 0x7f00_0000_0000, RKey: 0x1234, Slots: 1 << 20},
				KeyIncrement: &dtamem.KeyIncrementRegion{Addr: 0x7f00_1000_0000, RKey: 0x1235, Slots: 1 << 16},
				Lists: map[uint32]dtamem.ListRegion{
					7: {Addr: 0x7f00_2000_0000, RKey: 0x1236, Entries: 4096},
					3: {Addr: 0x7f00_2001_0000, RKey: 0x1236, Entries: 1024},
				}},
			{Name: "paths", Port: "collector-b", MAC: p4test.MAC(t, "0c:42:a1:00:09:02"), IP: netip.MustParseAddr("10.9.0.2"),
				QPN: 0x2c2, PSN: 0xfffff0, UDPSrcPort: 50000,
				Postcards: &dtamem.PostcardRegion{Addr: 0x1_0000_0000, RKey: 0x99, Slots: 1 << 16, Hops: PostcardHops},
				Lists:     map[uint32]dtamem.ListRegion{1: {Addr: 0x2_0000_0000, RKey: 0x9a, Entries: 256}}},
		},
		Peers: []Peer{
			{Name: "leaf1", IP: netip.MustParseAddr("10.1.0.1"), AckPort: "fabric", FirstSeq: 0},
			{Name: "leaf2", IP: netip.MustParseAddr("10.1.0.2"), FirstSeq: 17},
		},
	}
}

// noSeqnum is the 2-byte build with front-panel ports and one collector.
func noSeqnum(t testing.TB) Translator {
	return Translator{
		Name:  "dta_translator",
		Ports: []Port{{Name: "coll", FrontPanel: "1/0", Speed: "100G", FEC: "rs", MAC: p4test.MAC(t, "02:00:00:00:0b:01")}},
		MAC:   p4test.MAC(t, "02:00:00:00:0b:ff"),
		IP:    netip.MustParseAddr("192.168.7.1"),
		QPN:   0x100,
		Collectors: []Collector{{Name: "c0", Port: "coll", MAC: p4test.MAC(t, "0c:42:a1:00:0b:01"), IP: netip.MustParseAddr("192.168.7.2"),
			QPN: 0x101, Redundancy: 1, KeyWrite: &dtamem.KeyWriteRegion{Addr: 0x1000, RKey: 1, Slots: 1024, DataWidth: 4}}},
		NoSeqnum: true,
	}
}

// appendBatch is twoCollectors for the build with Append batches of b.
func appendBatch(t testing.TB, b int) Translator {
	tr := twoCollectors(t)
	tr.AppendBatch = b
	return tr
}

// sketchMerge is twoCollectors for the Tofino 1 build with Sketch-Merge
// (-DDTA_SKETCH_MERGE -DDTA_NO_SEQNUM -DDTA_NO_METER: no reporter
// tracking, no rate meter) and Append
// batches of b: a Count-Min sketch of three reporters at the first
// collector, a HyperLogLog sketch of two at the second.
func sketchMerge(t testing.TB, b int) Translator {
	tr := appendBatch(t, b)
	tr.SketchMerge = true
	tr.NoSeqnum, tr.Peers = true, nil
	tr.NoMeter = true
	tr.Collectors[0].Sketches = map[uint16]dtamem.SketchRegion{
		5: {Addr: 0x7f00_3000_0000, RKey: 0x1237, Kind: dtawire.SketchCountMin, Columns: 64, Rows: SketchRows, Reporters: 3, Group: 1},
	}
	tr.Collectors[1].Sketches = map[uint16]dtamem.SketchRegion{
		9: {Addr: 0x3_0000_0000, RKey: 0x9b, Kind: dtawire.SketchHyperLogLog, Columns: 16, Rows: SketchRows, Reporters: 2, Group: 1},
	}
	return tr
}

// metered is twoCollectors with the rate meter on: 1000 reports a second per collector with a burst of 16,
// high priority from DSCP 40, the CPU's PCIe port (64 on a 2-pipe
// Tofino 1) and its queue 3.
func metered(t testing.TB) Translator {
	tr := twoCollectors(t)
	tr.FlowControl = &FlowControl{Rate: 1000, Burst: 16, HighDSCP: 40, CPUPort: 64, CPUQueue: 3}
	return tr
}

// editSketch makes p the build with Sketch-Merge, with sketchMerge's
// sketches, and edits collector 0's sketch 5.
func editSketch(t testing.TB, p *Translator, edit func(*dtamem.SketchRegion)) {
	sm := sketchMerge(t, 1)
	p.SketchMerge = true
	p.Collectors[0].Sketches, p.Collectors[1].Sketches = sm.Collectors[0].Sketches, sm.Collectors[1].Sketches
	s := p.Collectors[0].Sketches[5]
	edit(&s)
	p.Collectors[0].Sketches[5] = s
}

// leaf is a reporter with one rule per primitive.
func leaf(t testing.TB) Reporter {
	coll := netip.MustParseAddr("10.9.0.1")
	return Reporter{
		Ports: []Port{
			port(t, "uplink", 0, "02:00:00:00:0c:01"),
			port(t, "host-1", 1, "02:00:00:00:0c:02"),
		},
		Routes: []Route{
			{Prefix: netip.MustParsePrefix("10.2.0.0/24"), Port: "host-1", MAC: p4test.MAC(t, "0c:42:a1:00:02:01")},
			{Prefix: netip.MustParsePrefix("0.0.0.0/0"), Port: "uplink", MAC: p4test.MAC(t, "0c:42:a1:00:00:fe")},
		},
		Addrs:      []netip.Addr{netip.MustParseAddr("10.1.0.1")},
		ReportPort: "uplink",
		NextHopMAC: p4test.MAC(t, "0c:42:a1:00:00:fe"),
		Hop:        2,
		FirstSeq:   0,
		Rules: []Rule{
			{Prefix: netip.MustParsePrefix("10.2.0.7/32"), Protocol: 6, Primitive: dtawire.OpAppend, ListID: 7, Collector: coll},
			{Prefix: netip.MustParsePrefix("10.2.0.0/24"), Protocol: 6, Primitive: dtawire.OpKeyWrite, Redundancy: 2,
				Retransmittable: true, Collector: coll},
			{Prefix: netip.MustParsePrefix("10.2.0.0/24"), Protocol: 17, Primitive: dtawire.OpKeyIncrement, Redundancy: 1, Collector: coll},
			{Prefix: netip.MustParsePrefix("0.0.0.0/0"), Primitive: dtawire.OpPostcarder, Immediate: true,
				Collector: netip.MustParseAddr("10.9.0.2")},
		},
	}
}

type example struct {
	name   string
	p4     string
	script func(testing.TB) (string, error)
	// flags are the build of p4 the script loads.
	flags []string
}

var examples = []example{
	{"two_collectors", translatorP4, func(t testing.TB) (string, error) { return twoCollectors(t).Script() }, nil},
	{"two_collectors_counters", translatorP4, func(t testing.TB) (string, error) { return twoCollectors(t).CounterScript() }, nil},
	{"no_seqnum", translatorP4, func(t testing.TB) (string, error) { return noSeqnum(t).Script() }, []string{"-DDTA_NO_SEQNUM"}},
	{"append_batch1", translatorP4, func(t testing.TB) (string, error) { return appendBatch(t, 1).Script() }, []string{"-DDTA_APPEND_BATCH=1"}},
	{"append_batch2", translatorP4, func(t testing.TB) (string, error) { return appendBatch(t, 2).Script() }, []string{"-DDTA_APPEND_BATCH=2"}},
	{"sketch_merge", translatorP4, func(t testing.TB) (string, error) { return sketchMerge(t, DefaultAppendBatch).Script() },
		[]string{"-DDTA_SKETCH_MERGE", "-DDTA_NO_SEQNUM", "-DDTA_NO_METER"}},
	{"metered", translatorP4, func(t testing.TB) (string, error) { return metered(t).Script() }, nil},
	{"metered_counters", translatorP4, func(t testing.TB) (string, error) { return metered(t).CounterScript() }, nil},
	{"leaf_reporter", reporterP4, func(t testing.TB) (string, error) { return leaf(t).ReporterScript() }, nil},
}

func TestGolden(t *testing.T) {
	for _, ex := range examples {
		t.Run(ex.name, func(t *testing.T) {
			s, err := ex.script(t)
			if err != nil {
				t.Fatal(err)
			}
			p4test.Golden(t, ex.name+".py", s)
		})
	}
}

// TestDeterministic: the scripts do not depend on the order of ports,
// routes or map iteration.
func TestDeterministic(t *testing.T) {
	a, _ := twoCollectors(t).Script()
	for range 5 {
		tr := twoCollectors(t)
		slices.Reverse(tr.Ports)
		slices.Reverse(tr.Routes)
		if b, _ := tr.Script(); b != a {
			t.Fatal("the translator script changes with the order of ports or routes")
		}
	}
}

func TestTranslatorEntries(t *testing.T) {
	s, err := twoCollectors(t).Script()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		// Key-Write: 2^20 slots at 0x7f00_0000_0000, split in halves.
		"key_write_region.add_with_set_region(collector=0, base_hi=0x7f00, base_lo=0x0, rkey=0x1234, slot_mask=0xfffff)",
		// N=2 for the first collector: two nodes, replication ids 0 and 1.
		"bfrt.pre.node.add(MULTICAST_NODE_ID=5, MULTICAST_RID=0, MULTICAST_LAG_ID=[], DEV_PORT=[port_collector_a])",
		"bfrt.pre.node.add(MULTICAST_NODE_ID=6, MULTICAST_RID=1, MULTICAST_LAG_ID=[], DEV_PORT=[port_collector_a])",
		"redundancy_group.add_with_set_group(collector=0, redundancy=2, mgid=2)",
		// Lists by (collector, id), ids sorted: 3 then 7.
		"append_list.add_with_set_list(collector=0, list_id=3, idx=0)",
		"append_list.add_with_set_list(collector=0, list_id=7, idx=1)",
		"append_list.add_with_set_list(collector=1, list_id=1, idx=2)",
		"postcard_region.add_with_set_region(collector=1, base_hi=0x1, base_lo=0x0, rkey=0x99, slot_mask=0xffff)",
		"psn.mod(REGISTER_INDEX=1, f1=16777200)",
		"reporter.add_with_set_reporter(src_addr=ip('10.1.0.1'), idx=0, ack_session=1)",
		"reporter.add_with_set_reporter(src_addr=ip('10.1.0.2'), idx=1, ack_session=0)",
		"expected_seq.mod(REGISTER_INDEX=1, f1=17)",
		"collector_qp.add_with_set_collector(src_addr=ip('10.9.0.1'), dst_qpn=0x11, idx=0, port=port_collector_a)",
		"udp_src_port=50000",
		"direction='INGRESS'",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("the script lacks %q", want)
		}
	}
	// The second collector serves no Key-Write or Key-Increment: no groups.
	if strings.Contains(s, "collector=1, redundancy=") {
		t.Error("groups for a collector without Key-Write or Key-Increment")
	}
	if n := strings.Count(s, "redundancy_group.add_with_set_group"); n != 2 {
		t.Errorf("%d groups, want 2 (N = 1, 2)", n)
	}
	// The software translator's source port when none is given.
	want := fmt.Sprintf("udp_src_port=%d", roce.FlowLabelToUDPSrcPort(roce.FlowLabelFromQPNs(0x11, 0x2c1)))
	if !strings.Contains(s, want) {
		t.Errorf("the first collector's RoCE source port is not %s", want)
	}
}

func TestReporterEntries(t *testing.T) {
	s, err := leaf(t).ReporterScript()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"report_rule.add_with_report_append(dst_addr=ip('10.2.0.7'), dst_addr_mask=0xffffffff, protocol=6, protocol_mask=0xff, MATCH_PRIORITY=0, list_id=7, immediate=0, retransmittable=0, collector=ip('10.9.0.1'))",
		"report_rule.add_with_report_key_write(dst_addr=ip('10.2.0.0'), dst_addr_mask=0xffffff00, protocol=6, protocol_mask=0xff, MATCH_PRIORITY=1, redundancy=2, immediate=0, retransmittable=1",
		"report_rule.add_with_report_postcard(dst_addr=ip('0.0.0.0'), dst_addr_mask=0x0, protocol=0, protocol_mask=0x0, MATCH_PRIORITY=3, immediate=1",
		"reporter_cfg.set_default_with_set_reporter(session=1, smac=mac('02:00:00:00:0c:01'), dmac=mac('0c:42:a1:00:00:fe'), src_addr=ip('10.1.0.1'), hop=2)",
		"direction='EGRESS'",
		"report_seq.mod(REGISTER_INDEX=0, f1=0)",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("the script lacks %q", want)
		}
	}
}

// TestNamesExistInP4 checks every table, action, key, action parameter,
// register and counter the generated scripts name against the P4 source
// they load, and that the scripts fill or clear every table, register
// and counter the program has.
func TestNamesExistInP4(t *testing.T) {
	srcs := map[string]*p4test.Source{translatorP4: p4test.Parse(t, translatorP4), reporterP4: p4test.Parse(t, reporterP4)}
	used := map[string]map[string]bool{translatorP4: {}, reporterP4: {}}
	for _, ex := range examples {
		s, err := ex.script(t)
		if err != nil {
			t.Fatal(err)
		}
		p4test.CheckScript(t, srcs[ex.p4], "", ex.name+".py", s, used[ex.p4])
	}
	for file, ps := range srcs {
		p4test.CheckCovered(t, ps, used[file])
	}
}

// TestNamesInCompiledProgram checks the scripts' names against what
// bf-p4c compiled each program into (its bfrt.json, of the build the
// script loads): the names the switch's bfrt_python will know.
func TestNamesInCompiledProgram(t *testing.T) {
	for _, ex := range examples {
		t.Run(ex.name, func(t *testing.T) {
			ps := p4test.Compiled(t, ex.p4, ex.flags...)
			s, err := ex.script(t)
			if err != nil {
				t.Fatal(err)
			}
			p4test.CheckScript(t, ps, "", ex.name+".py", s, map[string]bool{})
		})
	}
}

// TestSizesMatchP4: the Go limits and wire numbers are the programs'.
func TestSizesMatchP4(t *testing.T) {
	tr := p4test.Parse(t, translatorP4)
	rp := p4test.Parse(t, reporterP4)
	check := func(ps *p4test.Source, file string, want map[string]uint64) {
		t.Helper()
		for name, w := range want {
			if got, ok := ps.Consts[name]; !ok || got != w {
				t.Errorf("%s %s = %d (declared %v), want %d", file, name, got, ok, w)
			}
		}
	}
	check(tr, translatorP4, map[string]uint64{
		"COLLECTOR_SLOTS": CollectorSlots, "MAX_REDUNDANCY": MaxRedundancy, "GROUP_SLOTS": GroupSlots,
		"LIST_SLOTS": ListSlots, "REPORTER_SLOTS": ReporterSlots, "POSTCARD_HOPS": PostcardHops,
		"POSTCARD_CACHE": PostcardCache, "FWD_SIZE": FwdSize, "RECORD_LEN": RecordLen,
		"POSTCARD_FULL": 1<<PostcardHops - 1,
		"ROCE_UDP_PORT": roce.UDPPort, "DTA_PORT": dtawire.ReportPort, "DTA_ACK_PORT": dtawire.AckPort,
		"OP_KEY_WRITE": uint64(dtawire.OpKeyWrite), "OP_APPEND": uint64(dtawire.OpAppend),
		"OP_KEY_INCREMENT": uint64(dtawire.OpKeyIncrement), "OP_POSTCARDER": uint64(dtawire.OpPostcarder),
		"RC_WRITE_ONLY": uint64(roce.RCWriteOnly), "RC_FETCH_ADD": uint64(roce.RCFetchAdd),
		"RC_ACK": uint64(roce.RCAck), "RC_ATOMIC_ACK": uint64(roce.RCAtomicAck),
		"AETH_NAK_PSN_SEQ": uint64(roce.AckTypeNAK)<<5 | uint64(roce.NAKPSNSequenceError),
		"DROP_SLOTS":       8, "POSTCARD_EVENTS": uint64(len(postcardEvents)),
		"SKETCH_SLOTS": SketchSlots, "SKETCH_REPORTER_SLOTS": SketchReporterSlots, "SKETCH_CELLS": SketchCells,
		"SKETCH_ROWS": SketchRows, "OP_SKETCH_MERGE": uint64(dtawire.OpSketchMerge),
		"SKETCH_COUNT_MIN": dtawire.SketchCountMin, "SKETCH_HYPERLOGLOG": dtawire.SketchHyperLogLog,
		"SKETCH_EVENTS": uint64(len(sketchEvents)),
	})
	check(rp, reporterP4, map[string]uint64{
		"FWD_SIZE": FwdSize, "RULE_SIZE": RuleSize, "ADDR_SIZE": AddrSize,
		"DTA_PORT": dtawire.ReportPort, "DTA_SRC_PORT": dtawire.GeneratorPort, "DTA_ACK_PORT": dtawire.AckPort,
		"OP_KEY_WRITE": uint64(dtawire.OpKeyWrite), "OP_APPEND": uint64(dtawire.OpAppend),
		"OP_KEY_INCREMENT": uint64(dtawire.OpKeyIncrement), "OP_POSTCARDER": uint64(dtawire.OpPostcarder),
	})
	// The primitives' lengths after the base header, as translator/dtatranslator
	// encodes them with 4-byte data.
	var f dtawire.Format
	for name, op := range map[string]dtawire.Opcode{"KEY_WRITE_LEN": dtawire.OpKeyWrite, "APPEND_LEN": dtawire.OpAppend,
		"KEY_INCREMENT_LEN": dtawire.OpKeyIncrement, "POSTCARD_LEN": dtawire.OpPostcarder} {
		n, err := f.Len(op)
		if err != nil {
			t.Fatal(err)
		}
		check(rp, reporterP4, map[string]uint64{name: uint64(n)})
	}
	for tab, want := range map[string]uint64{"Ingress.collector": CollectorSlots, "Ingress.collector_qp": CollectorSlots,
		"Ingress.redundancy_group": GroupSlots, "Ingress.append_list": ListSlots, "Ingress.reporter": ReporterSlots,
		"Ingress.ipv4_fwd": FwdSize, "Egress.rdma_conn": CollectorSlots, "Egress.key_write_region": CollectorSlots,
		"Egress.key_increment_region": CollectorSlots, "Egress.postcard_region": CollectorSlots,
		"Egress.list_region": ListSlots, "Egress.hop_bits": PostcardHops, "Ingress.sketch": SketchSlots,
		"Ingress.sketch_reporter": SketchReporterSlots, "Egress.sketch_region": SketchSlots} {
		if got := tr.Tables[tab]; got == nil || got.Size != want {
			t.Errorf("%s table %s: size %v, want %d", translatorP4, tab, got, want)
		}
	}
	for reg, want := range map[string]uint64{"Egress.psn": CollectorSlots, "Egress.list_head": ListSlots,
		"Egress.list_seq": ListSlots, "Ingress.expected_seq": ReporterSlots, "Egress.pc_key": PostcardCache,
		"Egress.pc_mask": PostcardCache, "Egress.pc_hop0": PostcardCache, "Egress.pc_hop4": PostcardCache,
		"Ingress.sketch_next": SketchReporterSlots, "Ingress.sketch_mask": SketchCells, "Ingress.sketch_c0": SketchCells,
		"Ingress.sketch_c1": SketchCells} {
		if got := tr.Registers[reg]; got != want {
			t.Errorf("%s register %s: size %d, want %d", translatorP4, reg, got, want)
		}
	}
	for tab, want := range map[string]uint64{"Ingress.ipv4_fwd": FwdSize, "Ingress.report_rule": RuleSize,
		"Ingress.own_addr": AddrSize} {
		if got := rp.Tables[tab]; got == nil || got.Size != want {
			t.Errorf("%s table %s: size %v, want %d", reporterP4, tab, got, want)
		}
	}
	// hop_bits: hop h -> bit h and every other hop's bits.
	full := uint64(1<<PostcardHops - 1)
	if es := tr.Entries["Egress.hop_bits"]; len(es) != PostcardHops {
		t.Errorf("hop_bits has %d entries, want %d", len(es), PostcardHops)
	}
	src, _ := os.ReadFile(translatorP4)
	for h := range PostcardHops {
		want := fmt.Sprintf("%d : hop(0x%02x, 0x%02x);", h, 1<<h, full&^(1<<h))
		if !strings.Contains(string(src), want) {
			t.Errorf("hop_bits lacks %q", want)
		}
	}
}

// TestSlotPolynomials: the CRCPolynomials translator.p4 declares, over
// the hash inputs it gives them ({key, n}, {key}), address the slots and
// make the checksums that internal/dtamem's Slot and KeyChecksum do.
func TestSlotPolynomials(t *testing.T) {
	ps := p4test.Parse(t, translatorP4)
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range MaxRedundancy {
		name := fmt.Sprintf("poly_slot%d", n)
		p, ok := ps.Polys[name]
		if !ok {
			t.Fatalf("%s declares no %s", translatorP4, name)
		}
		if p.MSB || p.Extended {
			t.Errorf("%s: msb/extended forms are not what the model computes", name)
		}
		for i := range 2000 {
			key := rng.Uint32()
			if i == 0 {
				key = 0
			}
			in := []byte{byte(key >> 24), byte(key >> 16), byte(key >> 8), byte(key), byte(n)}
			const slots = 1 << 24
			if got, want := uint64(p.Sum(in))&(slots-1), dtamem.Slot(key, n, slots); got != want {
				t.Fatalf("%s: key %#x: slot %#x, translator/dtatranslator says %#x", name, key, got, want)
			}
		}
	}
	p, ok := ps.Polys["poly_checksum"]
	if !ok {
		t.Fatal("no poly_checksum")
	}
	for range 2000 {
		key := rng.Uint32()
		in := []byte{byte(key >> 24), byte(key >> 16), byte(key >> 8), byte(key)}
		if got, want := p.Sum(in), dtamem.KeyChecksum(key); got != want {
			t.Fatalf("checksum of %#x: %#x, translator/dtatranslator says %#x", key, got, want)
		}
	}
	// And the inputs are what the model hashes.
	src, _ := os.ReadFile(translatorP4)
	for n := range MaxRedundancy {
		want := fmt.Sprintf("slot%d.get({md.key, 8w%d})", n, n)
		if !strings.Contains(string(src), want) {
			t.Errorf("%s does not compute %s", translatorP4, want)
		}
	}
	if !strings.Contains(string(src), "key_checksum.get({md.key})") {
		t.Errorf("%s does not hash the key alone for the checksum", translatorP4)
	}
}

// TestFrameLengths: the IPv4 and UDP lengths translator.p4 writes are
// those of the frames the software translator builds for the same
// operations (the public translator got the atomics' wrong).
func TestFrameLengths(t *testing.T) {
	ps := p4test.Parse(t, translatorP4)
	local := dtamem.Endpoint{MAC: p4test.MAC(t, "02:00:00:00:00:01"), GID: roce.GIDFromIPv4([4]byte{10, 0, 0, 1}), QPN: 0x11}
	coll := dtamem.Endpoint{MAC: p4test.MAC(t, "02:00:00:00:00:02"), GID: roce.GIDFromIPv4([4]byte{10, 0, 0, 2}), QPN: 0x22}
	c := dtatranslator.NewConn(local, coll, 0)
	buf := make([]byte, 512)
	lengths := func(n int) (ip, udp uint64) {
		return uint64(buf[16])<<8 | uint64(buf[17]), uint64(buf[38])<<8 | uint64(buf[39])
	}
	for _, tc := range []struct {
		shape string
		build func() (int, error)
	}{
		{"WRITE8", func() (int, error) { return c.Write(buf, 0x1000, 1, make([]byte, EntryLen), nil) }},
		{"RECORD", func() (int, error) { return c.Write(buf, 0x1000, 1, make([]byte, RecordLen), nil) }},
		{"ATOMIC", func() (int, error) { return c.FetchAdd(buf, 0x1000, 1, 5) }},
	} {
		n, err := tc.build()
		if err != nil {
			t.Fatal(err)
		}
		ip, udp := lengths(n)
		if ip != uint64(n-14) {
			t.Fatalf("%s: the software frame is %d bytes with IP length %d", tc.shape, n, ip)
		}
		if got := ps.Consts["IP_LEN_"+tc.shape]; got != ip {
			t.Errorf("IP_LEN_%s = %d, the software translator sends %d", tc.shape, got, ip)
		}
		if got := ps.Consts["UDP_LEN_"+tc.shape]; got != udp {
			t.Errorf("UDP_LEN_%s = %d, the software translator sends %d", tc.shape, got, udp)
		}
	}
	// An Append batch of b entries: IP_LEN_BATCH = 60 + 8 * b and
	// UDP_LEN_BATCH = 40 + 8 * b (TestICRCFieldLists holds the source to
	// these expressions of DTA_APPEND_BATCH).
	for _, b := range []int{2, 4} {
		n, err := c.Write(buf, 0x1000, 1, make([]byte, b*dtamem.AppendEntryLen), nil)
		if err != nil {
			t.Fatal(err)
		}
		if ip, udp := lengths(n); ip != uint64(60+8*b) || udp != uint64(40+8*b) {
			t.Errorf("batch %d: the software translator sends IP length %d, UDP %d; translator.p4 %d, %d", b, ip, udp, 60+8*b, 40+8*b)
		}
	}
	if ps.Consts["IP_LEN_ACK"] != 20+8+dtawire.AckLen || ps.Consts["UDP_LEN_ACK"] != 8+dtawire.AckLen {
		t.Error("the ACK lengths are not those of a 2-byte DTA ACK")
	}
}

func TestValidate(t *testing.T) {
	if err := twoCollectors(t).Validate(); err != nil {
		t.Fatal(err)
	}
	if err := noSeqnum(t).Validate(); err != nil {
		t.Fatal(err)
	}
	if err := leaf(t).Validate(); err != nil {
		t.Fatal(err)
	}
	tcases := []struct {
		field string
		edit  func(p *Translator)
	}{
		{"name", func(p *Translator) { p.Name = "dta-translator" }},
		{"ports:", func(p *Translator) { p.Ports = nil }},
		{"ports[0].dev_port", func(p *Translator) { p.Ports[0].DevPort = 80 }},
		{"ports[1].name", func(p *Translator) { p.Ports[1].Name = p.Ports[0].Name }},
		{"ports[2].mac", func(p *Translator) { p.Ports[2].MAC = header.MAC{} }},
		{"routes[0].prefix", func(p *Translator) { p.Routes[0].Prefix = netip.MustParsePrefix("2001:db8::/32") }},
		{"routes[1].port", func(p *Translator) { p.Routes[1].Port = "nowhere" }},
		{"mac", func(p *Translator) { p.MAC = header.BroadcastMAC }},
		{"ip", func(p *Translator) { p.IP = netip.MustParseAddr("2001:db8::1") }},
		{"qpn", func(p *Translator) { p.QPN = 1 << 24 }},
		{"dscp", func(p *Translator) { p.DSCP = 64 }},
		{"collectors:", func(p *Translator) { p.Collectors = nil }},
		{"collectors[1].name", func(p *Translator) { p.Collectors[1].Name = "kv" }},
		{"collectors[0].port", func(p *Translator) { p.Collectors[0].Port = "fabric0" }},
		{"collectors[1].ip", func(p *Translator) { p.Collectors[1].IP = p.Collectors[0].IP }},
		{"collectors[0].ip", func(p *Translator) { p.Collectors[0].IP = p.IP }},
		{"collectors[0].psn", func(p *Translator) { p.Collectors[0].PSN = 1 << 24 }},
		{"collectors[0].redundancy", func(p *Translator) { p.Collectors[0].Redundancy = MaxRedundancy + 1 }},
		{"collectors[0].key_write.data_width", func(p *Translator) { p.Collectors[0].KeyWrite.DataWidth = 8 }},
		{"collectors[0].key_write.slots", func(p *Translator) { p.Collectors[0].KeyWrite.Slots = 1000 }},
		{"collectors[0].key_write.slots", func(p *Translator) { p.Collectors[0].KeyWrite.Addr = 0x7f00_ffff_0000 }},
		{"collectors[0].key_increment.addr", func(p *Translator) { p.Collectors[0].KeyIncrement.Addr += 4 }},
		{"collectors[1].postcards.hops", func(p *Translator) { p.Collectors[1].Postcards.Hops = 4 }},
		{"collectors[1].postcards.cache", func(p *Translator) { p.Collectors[1].Postcards.Cache = 1024 }},
		{"collectors[1].postcards:", func(p *Translator) { p.Collectors[1].Postcards.Slots = 3 }},
		{"collectors[0].lists[7].entries", func(p *Translator) {
			p.Collectors[0].Lists[7] = dtamem.ListRegion{Addr: 0x10, Entries: 100}
		}},
		{"collectors[1]:", func(p *Translator) { p.Collectors[1].Postcards, p.Collectors[1].Lists = nil, nil }},
		{"peers:", func(p *Translator) { p.NoSeqnum = true }},
		{"peers[1].ip", func(p *Translator) { p.Peers[1].IP = p.Peers[0].IP }},
		{"peers[0].ack_port", func(p *Translator) { p.Peers[0].AckPort = "back" }},
		{"ack_snap", func(p *Translator) { p.AckSnap = 20 }},
		{"append_batch", func(p *Translator) { p.AppendBatch = 3 }},
		{"append_batch", func(p *Translator) { p.AppendBatch = 8 }},
		{"collectors[1].lists[1].entries", func(p *Translator) {
			p.AppendBatch = 4
			p.Collectors[1].Lists[1] = dtamem.ListRegion{Addr: 0x2_0000_0000, RKey: 0x9a, Entries: 2}
		}},
		{"collectors[0].mac", func(p *Translator) { p.Collectors[0].MAC = header.MAC{} }},
		{"collectors[1].qpn", func(p *Translator) { p.Collectors[1].QPN = 1 }},
		{"collectors[0].key_increment.slots", func(p *Translator) { p.Collectors[0].KeyIncrement.Slots = 3 }},
		{"collectors[1].postcards.slots", func(p *Translator) { p.Collectors[1].Postcards.Addr = 0x7f00_ffff_0000 }},
		{"peers[0].ip", func(p *Translator) { p.Peers[0].IP = netip.MustParseAddr("2001:db8::9") }},
		{"collectors[0].sketches:", func(p *Translator) { p.Collectors[0].Sketches = sketchMerge(t, 1).Collectors[0].Sketches }},
		{"collectors[0].sketches[5].rows", func(p *Translator) { editSketch(t, p, func(s *dtamem.SketchRegion) { s.Rows = 4 }) }},
		{"collectors[0].sketches[5].reporters", func(p *Translator) { editSketch(t, p, func(s *dtamem.SketchRegion) { s.Reporters = 17 }) }},
		{"collectors[0].sketches[5].group", func(p *Translator) { editSketch(t, p, func(s *dtamem.SketchRegion) { s.Group = 0 }) }},
		{"collectors[0].sketches[5]:", func(p *Translator) { editSketch(t, p, func(s *dtamem.SketchRegion) { s.Columns = 48 }) }},
		{"collectors[0].sketches[5].columns", func(p *Translator) { editSketch(t, p, func(s *dtamem.SketchRegion) { s.Columns = 8192 }) }},
		{"collectors[0].sketches[5].columns", func(p *Translator) {
			editSketch(t, p, func(s *dtamem.SketchRegion) { s.Addr = 0x7f00_ffff_ff00 })
		}},
		{"flow_control.rate", func(p *Translator) { p.FlowControl = &FlowControl{CPUPort: 64} }},
		{"flow_control.high_dscp", func(p *Translator) { p.FlowControl = &FlowControl{Rate: 1, HighDSCP: 64, CPUPort: 64} }},
		{"flow_control.cpu_port", func(p *Translator) { p.FlowControl = &FlowControl{Rate: 1, CPUPort: 512} }},
		{"flow_control.cpu_port", func(p *Translator) { p.FlowControl = &FlowControl{Rate: 1, CPUPort: 100} }},
		{"flow_control.cpu_port", func(p *Translator) { p.FlowControl = &FlowControl{Rate: 1, CPUPort: -1} }},
		{"flow_control.cpu_queue", func(p *Translator) { p.FlowControl = &FlowControl{Rate: 1, CPUPort: 64, CPUQueue: 32} }},
		{"flow_control:", func(p *Translator) { p.NoMeter, p.FlowControl = true, &FlowControl{Rate: 1, CPUPort: 64} }},
		{"collectors:", func(p *Translator) {
			editSketch(t, p, func(s *dtamem.SketchRegion) { s.Columns = 4096 })
			p.Collectors[1].Sketches[9] = dtamem.SketchRegion{Addr: 0x3_0000_0000, RKey: 1, Kind: dtawire.SketchCountMin, Columns: 64,
				Rows: SketchRows, Reporters: 1, Group: 1}
		}},
	}
	var errs strings.Builder
	for _, c := range tcases {
		p := twoCollectors(t)
		c.edit(&p)
		err := p.Validate()
		p4test.ExpectBad(t, ErrProgram, c.field, err)
		if err != nil {
			fmt.Fprintln(&errs, err)
		}
		if _, err := p.Script(); err == nil {
			t.Errorf("%s: Script accepts what Validate rejects", c.field)
		}
		if _, err := p.CounterScript(); err == nil {
			t.Errorf("%s: CounterScript accepts what Validate rejects", c.field)
		}
	}
	p := twoCollectors(t)
	for i := range CollectorSlots {
		p.Collectors = append(p.Collectors, Collector{Name: fmt.Sprintf("c%d", i), Port: "fabric", MAC: p.Collectors[0].MAC,
			IP: netip.AddrFrom4([4]byte{10, 10, byte(i), 1}), QPN: 2, KeyWrite: &dtamem.KeyWriteRegion{Slots: 1}})
	}
	p4test.ExpectBad(t, ErrProgram, "collectors:", p.Validate())
	fmt.Fprintln(&errs, p.Validate())
	// The limits of the list registers and the reporters' registers.
	p = twoCollectors(t)
	p.Collectors[0].Lists = map[uint32]dtamem.ListRegion{}
	for i := range ListSlots + 1 {
		p.Collectors[0].Lists[uint32(i)] = dtamem.ListRegion{Addr: uint64(i) << 20, Entries: 16}
	}
	fmt.Fprintln(&errs, p.Validate())
	p = twoCollectors(t)
	for i := range ReporterSlots + 1 {
		p.Peers = append(p.Peers, Peer{IP: netip.AddrFrom4([4]byte{10, 20, byte(i >> 8), byte(i)})})
	}
	fmt.Fprintln(&errs, p.Validate())

	rcases := []struct {
		field string
		edit  func(r *Reporter)
	}{
		{"name", func(r *Reporter) { r.Name = "9lives" }},
		{"addrs:", func(r *Reporter) { r.Addrs = nil }},
		{"addrs[1]", func(r *Reporter) { r.Addrs = append(r.Addrs, r.Addrs[0]) }},
		{"report_port", func(r *Reporter) { r.ReportPort = "down" }},
		{"next_hop_mac", func(r *Reporter) { r.NextHopMAC = header.MAC{} }},
		{"hop", func(r *Reporter) { r.Hop = PostcardHops }},
		{"snap", func(r *Reporter) { r.Snap = 1 << 20 }},
		{"rules[0].prefix", func(r *Reporter) { r.Rules[0].Prefix = netip.MustParsePrefix("10.2.0.7/24") }},
		{"rules[1].prefix", func(r *Reporter) { r.Rules[1].Prefix, r.Rules[1].Protocol = r.Rules[0].Prefix, 6 }},
		{"rules[1].redundancy", func(r *Reporter) { r.Rules[1].Redundancy = 0 }},
		{"rules[2].redundancy", func(r *Reporter) { r.Rules[2].Redundancy = MaxRedundancy + 1 }},
		{"rules[3].redundancy", func(r *Reporter) { r.Rules[3].Redundancy = 1 }},
		{"rules[3].primitive", func(r *Reporter) { r.Rules[3].Primitive = dtawire.OpSketchMerge }},
		{"rules[1].list_id", func(r *Reporter) { r.Rules[1].ListID = 4 }},
		{"rules[0].collector", func(r *Reporter) { r.Rules[0].Collector = netip.Addr{} }},
		{"rules[1].retransmittable", func(r *Reporter) { r.NoSeqnum = true }},
	}
	for _, c := range rcases {
		r := leaf(t)
		c.edit(&r)
		err := r.Validate()
		p4test.ExpectBad(t, ErrProgram, c.field, err)
		if _, err := r.ReporterScript(); err == nil {
			t.Errorf("%s: ReporterScript accepts what Validate rejects", c.field)
		}
		if err != nil {
			fmt.Fprintln(&errs, err)
		}
	}
	// Each error in full, so that a change of wording or of the order
	// the fields are checked in shows.
	p4test.Golden(t, "validate_errors.txt", errs.String())
}

func TestParseCountersErrors(t *testing.T) {
	tr := twoCollectors(t)
	for _, tc := range []struct{ name, out string }{
		{"empty", "bfshell> nothing\n"},
		{"cut short", CounterPrefix + `{"kind":"counter","name":"report_pkts","index":1,"collector":"","packets":3,"bytes":0}` + "\n"},
		{"wrong count", CounterPrefix + `{"kind":"end","records":2}` + "\n"},
		{"unknown collector", CounterPrefix + `{"kind":"counter","name":"rdma_pkts","index":0,"collector":"x","packets":3,"bytes":0}` + "\n"},
		{"bad index", CounterPrefix + `{"kind":"counter","name":"drop_reports","index":9,"collector":"","packets":3,"bytes":0}` + "\n"},
		{"unknown field", CounterPrefix + `{"kind":"end","records":0,"extra":1}` + "\n"},
	} {
		if _, err := tr.ParseCounters(strings.NewReader(tc.out)); !errors.Is(err, ErrCounters) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
