package dtatofino

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/internal/dtamem"
	"github.com/rdma-appliance/appliance/internal/dtawire"
	"github.com/rdma-appliance/appliance/p4/internal/bfrt"
)

// The tables, registers and counters each script clears, so that a load
// leaves nothing of the previous one. A test checks the lists cover every
// table, register and counter the sources declare (but const tables).
var (
	translatorClear = map[string][]string{
		bfrt.Ingress: {"ipv4_fwd", "collector", "collector_qp", "redundancy_group", "append_list", "report_pkts", "drop_reports"},
		bfrt.Egress: {"rdma_conn", "key_write_region", "key_increment_region", "postcard_region", "list_region",
			"psn", "ack_phase", "list_head", "list_seq", "pc_key", "pc_mask", "pc_hop0", "pc_hop1", "pc_hop2", "pc_hop3", "pc_hop4",
			"rdma_pkts", "psn_resyncs", "postcard_events", "postcard_evictions"},
	}
	// Only in the build with sequence numbers.
	translatorSeqClear = []string{"reporter", "expected_seq"}
	// Only in the builds with an Append batch B > 1: batchClear[B].
	batchClear = map[int]map[string][]string{
		2: {bfrt.Ingress: {"batch_fill", "batch_data0", "append_gathered"}, bfrt.Egress: {"list_seq1", "batch_icrc"}},
		4: {bfrt.Ingress: {"batch_fill", "batch_data0", "batch_data1", "batch_data2", "append_gathered"},
			bfrt.Egress: {"list_seq1", "list_seq2", "list_seq3", "batch_icrc"}},
	}
	// Only in the build with Sketch-Merge (-DDTA_SKETCH_MERGE).
	sketchClear = map[string][]string{
		bfrt.Ingress: {"sketch", "sketch_reporter", "sketch_next", "sketch_mask", "sketch_c0", "sketch_c1",
			"sketch_events"},
		bfrt.Egress: {"sketch_region"},
	}
	// Not in the build without the rate meter (-DDTA_NO_METER);
	// notice_tick only with sequence numbers.
	meterClear       = []string{"report_priority", "rdma_meter"}
	meterNoticeClear = []string{"notice_tick"}
	reporterClear    = map[string][]string{
		bfrt.Ingress: {"ipv4_fwd", "own_addr", "report_rule", "dta_acks"},
		bfrt.Egress:  {"reports_sent"},
	}
	reporterSeqClear = []string{"report_seq"}
)

// script is a bfrt_python script with the parts both DTA programs write.
type script struct{ *bfrt.Script }

func newScript(name string) *script { return &script{bfrt.New(name)} }

// The scripts' opening comments.
var (
	translatorOrigin = bfrt.Origin{Program: "DTA translator", Source: "p4/dtatofino/translator.p4", Package: "p4/dtatofino"}
	reporterOrigin   = bfrt.Origin{Program: "DTA reporter", Source: "p4/dtatofino/reporter.p4", Package: "p4/dtatofino"}
)

// clearFor is what a load of the build with Append batch b (and
// Sketch-Merge when sketch) clears: translatorClear, the batch's
// registers, table and counter, and the sketches'.
func clearFor(b int, sketch bool) map[string][]string {
	out := map[string][]string{}
	for ctl, names := range translatorClear {
		out[ctl] = append(slices.Clone(names), batchClear[b][ctl]...)
		if sketch {
			out[ctl] = append(out[ctl], sketchClear[ctl]...)
		}
	}
	return out
}

func pyBool(b bool) int {
	if b {
		return 1
	}
	return 0
}

func specs(ports []*Port) []bfrt.Port {
	out := make([]bfrt.Port, len(ports))
	for i, pt := range ports {
		out[i] = bfrt.Port(*pt)
	}
	return out
}

// setup writes what opens both programs' scripts after their header: the
// helpers and port variables, the clearing of the tables, registers and
// counters (seq only in the build with sequence numbers), the ports.
func (s *script) setup(ports []bfrt.Port, tables map[string][]string, seq []string, withSeq bool) {
	s.Prelude(ports, bfrt.PyIPHelpers, bfrt.PyFrontPanel, bfrt.PyQuietly)
	s.Comment("Clear what a previous load left: entries, registers, counters.")
	s.Clear(s.Ig, tables[bfrt.Ingress]...)
	s.Clear(s.Eg, tables[bfrt.Egress]...)
	if withSeq {
		for _, t := range seq {
			ctl := s.Ig
			if slices.Contains(reporterSeqClear, t) {
				ctl = s.Eg
			}
			s.Clear(ctl, t)
		}
	}
	s.Blank()
	s.PortSetup(ports)
}

func routes(rs []Route) []bfrt.Route {
	out := make([]bfrt.Route, len(rs))
	for i, r := range rs {
		out[i] = bfrt.Route(r)
	}
	return out
}

func portMAC(ports map[string]*Port) func(string) header.MAC {
	return func(p string) header.MAC { return ports[p].MAC }
}

// Script renders the translator as a bfrt_python script for `bfshell -b`:
// it clears the program's tables, registers and counters, sets the ports
// up, creates the ACK mirror sessions and the redundancy multicast groups,
// and fills the forwarding, collector, connection, region, list and
// reporter tables and the PSN and sequence registers. The output depends
// only on the translator, with entries in a fixed order.
func (t Translator) Script() (string, error) {
	pl, err := t.plan(true)
	if err != nil {
		return "", err
	}
	name := bfrt.ProgName(t.Name, DefaultTranslatorName)
	s := newScript(name)
	ig, eg := s.Ig, s.Eg
	ports := specs(pl.sortedPorts())

	s.SetupHeader(translatorOrigin, "Translator.Script")
	s.Comment("")
	s.Comment("%s, %s, %s, %s, %s.", bfrt.Plural(len(t.Ports), "port"), bfrt.Plural(len(t.Routes), "route"),
		bfrt.Plural(len(t.Collectors), "collector"), bfrt.Plural(len(pl.lists), "Append list"), bfrt.Plural(len(t.Peers), "tracked reporter"))
	if t.NoSeqnum {
		s.Comment("Built with -DDTA_NO_SEQNUM: 2-byte base header, no reporter tracking.")
	}
	batch := t.appendBatch()
	if batch == DefaultAppendBatch {
		s.Comment("Append writes %d entries per WRITE (-DDTA_APPEND_BATCH=%d, the default build).", batch, batch)
	} else {
		s.Comment("Built with -DDTA_APPEND_BATCH=%d: Append writes %d entries per WRITE.", batch, batch)
	}
	if t.SketchMerge {
		s.Comment("Built with -DDTA_SKETCH_MERGE: a WRITE per merged sketch column (sketches: %d).", len(pl.sketches))
	}
	switch {
	case t.NoMeter:
		s.Comment("Built with -DDTA_NO_METER: no rate meter.")
	case t.FlowControl == nil:
		s.Comment("The rate meter is off: every report is translated as it comes.")
	default:
		s.Comment("Flow control: a rate meter per collector, high-priority reports over it to the CPU's queue.")
	}
	s.Blank()
	cl := clearFor(batch, t.SketchMerge)
	if !t.NoMeter {
		cl[bfrt.Ingress] = append(cl[bfrt.Ingress], meterClear...)
		if !t.NoSeqnum {
			cl[bfrt.Ingress] = append(cl[bfrt.Ingress], meterNoticeClear...)
		}
	}
	s.setup(ports, cl, translatorSeqClear, !t.NoSeqnum)

	s.Comment("ACK mirror sessions: in-order reports are mirrored back to their reporter as ACKs.")
	for _, p := range pl.acks {
		s.MirrorSession(pl.ackSID[p], "INGRESS", bfrt.PortVar(p), t.ackSnap())
	}
	s.Blank()

	s.Comment("Redundancy: per collector and N, a group of N copies on the collector's port, replication ids 0..N-1.")
	for i := range t.Collectors {
		c := &t.Collectors[i]
		if c.KeyWrite == nil && c.KeyIncrement == nil {
			continue
		}
		for n := 1; n <= c.redundancy(); n++ {
			g := groupID(i, n)
			var nodes, valid, xid []string
			s.Line("quietly(bfrt.pre.mgid.delete, MGID=%d)", g)
			for k := range n {
				id := nodeID(g, k)
				s.Line("quietly(bfrt.pre.node.delete, MULTICAST_NODE_ID=%d)", id)
				s.Line("bfrt.pre.node.add(MULTICAST_NODE_ID=%d, MULTICAST_RID=%d, MULTICAST_LAG_ID=[], DEV_PORT=[%s])",
					id, k, bfrt.PortVar(c.Port))
				nodes = append(nodes, fmt.Sprint(id))
				valid = append(valid, "False")
				xid = append(xid, "0")
			}
			s.Line("bfrt.pre.mgid.add(MGID=%d, MULTICAST_NODE_ID=[%s], MULTICAST_NODE_L1_XID_VALID=[%s], MULTICAST_NODE_L1_XID=[%s])",
				g, strings.Join(nodes, ", "), strings.Join(valid, ", "), strings.Join(xid, ", "))
			s.Line("%s.redundancy_group.add_with_set_group(collector=%d, redundancy=%d, mgid=%d)  # %s, N=%d", ig, i, n, g, c.Name, n)
		}
	}
	s.Blank()

	s.Comment("The translator's MAC: the source of ACKs and NACKs.")
	s.Line("%s.translator_cfg.set_default_with_set_translator(mac=%s)", ig, bfrt.PyMAC(t.MAC))
	s.Blank()
	s.Routes(routes(t.Routes), portMAC(pl.ports))

	s.Comment("Collectors: reports to its address, its RNIC's answers, the connection, the regions, the first PSN.")
	for i := range t.Collectors {
		c := &t.Collectors[i]
		s.Comment("collectors[%d] %s: %v qpn %#x on %s, psn %d", i, c.Name, c.IP, c.QPN, c.Port, c.PSN)
		s.Line("%s.collector.add_with_set_collector(dst_addr=%s, idx=%d, port=%s)", ig, bfrt.PyIP(c.IP), i, bfrt.PortVar(c.Port))
		s.Line("%s.collector_qp.add_with_set_collector(src_addr=%s, dst_qpn=%#x, idx=%d, port=%s)",
			ig, bfrt.PyIP(c.IP), t.QPN, i, bfrt.PortVar(c.Port))
		icrc := t.icrcPrefixes(c)
		s.Line("%s.rdma_conn.add_with_set_conn(collector=%d, dmac=%s, smac=%s, src_addr=%s, dst_addr=%s, dscp=%d, udp_src_port=%d, dst_qpn=%#x, "+
			"icrc_write8=%#x, icrc_atomic=%#x, icrc_record=%#x)",
			eg, i, bfrt.PyMAC(c.MAC), bfrt.PyMAC(pl.ports[c.Port].MAC), bfrt.PyIP(t.IP), bfrt.PyIP(c.IP), t.DSCP, t.udpSrcPort(c), c.QPN,
			icrc[0], icrc[1], icrc[2])
		if kw := c.KeyWrite; kw != nil {
			s.regionEntry("key_write_region", "collector", i, region{kw.Addr, kw.RKey, kw.Slots, EntryLen})
		}
		if ki := c.KeyIncrement; ki != nil {
			s.regionEntry("key_increment_region", "collector", i, region{ki.Addr, ki.RKey, ki.Slots, EntryLen})
		}
		if pc := c.Postcards; pc != nil {
			s.regionEntry("postcard_region", "collector", i, region{pc.Addr, pc.RKey, pc.Slots, RecordLen})
		}
		if batch > 1 && len(c.Lists) > 0 {
			s.Line("%s.batch_icrc.add_with_set_batch_icrc(collector=%d, icrc_batch=%#x)", eg, i, t.icrcPrefix(c, batchShape(batch)))
		}
		s.Line("%s.psn.mod(REGISTER_INDEX=%d, f1=%d)", eg, i, c.PSN)
		s.Line("%s.ack_phase.mod(REGISTER_INDEX=%d, f1=%d)", eg, i, ackPhase(c.PSN))
	}
	s.Blank()

	if batch > 1 {
		s.Comment("Append lists: (collector, list id) -> list index; head at 0; the sequences of the batch before the first")
		s.Comment("(the first batch's entries are numbered from 1); gathering from the batch's first entry.")
	} else {
		s.Comment("Append lists: (collector, list id) -> list index; head and sequence start at 0.")
	}
	for idx, l := range pl.lists {
		s.Line("%s.append_list.add_with_set_list(collector=%d, list_id=%d, idx=%d)  # %s", ig, l.coll, l.id, idx, t.Collectors[l.coll].Name)
		s.regionEntry("list_region", "list", idx, region{l.reg.Addr, l.reg.RKey, l.reg.Entries, dtamem.AppendEntryLen})
		s.Line("%s.list_head.mod(REGISTER_INDEX=%d, f1=0)", eg, idx)
		if batch == 1 {
			s.Line("%s.list_seq.mod(REGISTER_INDEX=%d, f1=0)", eg, idx)
			continue
		}
		for i := range batch {
			s.Line("%s.%s.mod(REGISTER_INDEX=%d, f1=%d)", eg, seqRegister(i), idx, batchSeqStart(batch, i))
		}
		s.Line("%s.batch_fill.mod(REGISTER_INDEX=%d, f1=0)", ig, idx)
	}
	s.Blank()

	if len(pl.sketches) > 0 {
		s.sketches(&t, pl)
	}
	if !t.NoMeter {
		s.flowControl(t.FlowControl, len(t.Collectors))
	}

	if !t.NoSeqnum {
		s.Comment("Reporters: source address -> index and ACK session (0: NACKs only); the first expected sequence.")
		for i, p := range t.Peers {
			s.Line("%s.reporter.add_with_set_reporter(src_addr=%s, idx=%d, ack_session=%d)  # %s",
				ig, bfrt.PyIP(p.IP), i, pl.ackSID[p.AckPort], p.Name)
			s.Line("%s.expected_seq.mod(REGISTER_INDEX=%d, f1=%d)", ig, i, p.FirstSeq)
		}
		s.Blank()
	}

	s.Line("print('dta: %s loaded: %s, %s, %s, %s')", name, bfrt.Plural(len(t.Ports), "port"),
		bfrt.Plural(len(t.Collectors), "collector"), bfrt.Plural(len(pl.lists), "list"), bfrt.Plural(len(t.Peers), "reporter"))
	return s.String(), nil
}

// sketches writes the Sketch-Merge entries: per sketch, its lookup (the
// column ternary: its bits above the sketch's columns zero), its region
// and ICRC prefix state, and per reporter its slot, bit and the others'
// bits, with its expected column 0. The column registers start empty
// (cleared above).
func (s *script) sketches(t *Translator, pl *tplan) {
	s.Comment("Sketch-Merge: (collector, sketch id, kind, column below the sketch's) -> first column cell and last column;")
	s.Comment("the region (a column is an 8-byte entry); per reporter its slot in sketch_next (from column 0) and its bit in a column's mask.")
	for _, k := range pl.sketches {
		c := &t.Collectors[k.coll]
		r := k.reg
		s.Line("%s.sketch.add_with_set_sketch(collector=%d, sketch_id=%d, kind=%d, column=0, column_mask=%#x, MATCH_PRIORITY=0, base=%d, last=%d)  # %s, %d x %d",
			s.Ig, k.coll, k.id, r.Kind, ^(r.Columns - 1), k.cell, r.Columns-1, c.Name, r.Columns, r.Rows)
		reg := region{r.Addr, r.RKey, uint64(r.Columns), SketchColumnLen}
		s.Line("%s.sketch_region.add_with_set_region(collector=%d, sketch_id=%d, base_hi=%#x, base_lo=%#x, rkey=%#x, slot_mask=%#x)",
			s.Eg, k.coll, k.id, reg.hi(), reg.lo(), reg.rkey, reg.mask())
		all := uint32(1<<r.Reporters - 1)
		for rep := range r.Reporters {
			bit := uint32(1) << rep
			s.Line("%s.sketch_reporter.add_with_set_sketch_reporter(collector=%d, sketch_id=%d, reporter_id=%d, slot=%d, bit_of=%#x, rest=%#x)",
				s.Ig, k.coll, k.id, rep, k.slot+rep, bit, all&^bit)
			s.Line("%s.sketch_next.mod(REGISTER_INDEX=%d, f1=0)", s.Ig, k.slot+rep)
		}
	}
	s.Blank()
}

// flowControl writes the meter's entries: off without f; with it on, the
// CPU's port and queue, the priorities (the CPU's resends first, then
// every DSCP from high_dscp) and each collector's meter, one token bucket
// of rate and burst in reports (both rates and both bursts of the
// two-rate meter equal, so that a report is green or red, never yellow).
func (s *script) flowControl(f *FlowControl, collectors int) {
	if f == nil {
		s.Comment("Flow control off: no report is metered.")
		s.Line("%s.flow_cfg.set_default_with_set_flow(metered=0, cpu_port=0, cpu_qid=0)", s.Ig)
		s.Blank()
		return
	}
	s.Comment("Flow control: over the meter, high-priority reports wait in the CPU's queue, low-priority ones are dropped.")
	s.Line("%s.flow_cfg.set_default_with_set_flow(metered=1, cpu_port=%d, cpu_qid=%d)", s.Ig, f.CPUPort, f.CPUQueue)
	s.Line("%s.report_priority.add_with_set_priority(ingress_port=%d, ingress_port_mask=0x1ff, dscp=0, dscp_mask=0x0, MATCH_PRIORITY=0, high=1, resent=1)  # the CPU's resends",
		s.Ig, f.CPUPort)
	for d := f.highDSCP(); d < 64; d++ {
		s.Line("%s.report_priority.add_with_set_priority(ingress_port=0, ingress_port_mask=0x0, dscp=%d, dscp_mask=0x3f, MATCH_PRIORITY=1, high=1, resent=0)",
			s.Ig, d)
	}
	for i := range collectors {
		s.Line("%s.rdma_meter.mod(METER_INDEX=%d, METER_SPEC_CIR_PPS=%d, METER_SPEC_PIR_PPS=%d, METER_SPEC_CBS_PKTS=%d, METER_SPEC_PBS_PKTS=%d)",
			s.Ig, i, f.Rate, f.Rate, f.burst(), f.burst())
	}
	s.Blank()
}

// seqRegister is the register of the sequence of a batch's entry i.
func seqRegister(i int) string {
	if i == 0 {
		return "list_seq"
	}
	return fmt.Sprintf("list_seq%d", i)
}

// batchSeqStart is the initial value of the sequence register of entry i
// of batches of b (b > 1): the sequence of entry i of the batch before
// the first, position i - b, which is (i - b) mod (2^32 - 1) + 1, or
// 2^32 - b + i. A batch moves it on to the sequence of its own entry i,
// dtamem.EntrySeq(i) = i + 1 for the first.
func batchSeqStart(b, i int) uint32 { return uint32(1<<32 - b + i) }

func (s *script) regionEntry(table, key string, idx int, r region) {
	s.Line("%s.%s.add_with_set_region(%s=%d, base_hi=%#x, base_lo=%#x, rkey=%#x, slot_mask=%#x)  # %d x %d B",
		s.Eg, table, key, idx, r.hi(), r.lo(), r.rkey, r.mask(), r.slots, r.entryLen)
}

// ruleAction is report_rule's action for a primitive.
var ruleAction = map[dtawire.Opcode]string{
	dtawire.OpKeyWrite:     "report_key_write",
	dtawire.OpKeyIncrement: "report_key_increment",
	dtawire.OpPostcarder:   "report_postcard",
	dtawire.OpAppend:       "report_append",
}

// ReporterScript renders the reporter as a bfrt_python script for
// `bfshell -b`: it clears the program's state, sets the ports up, creates
// the egress mirror session to the report port, and fills the forwarding,
// own-address, configuration and report rule tables. Rules match in the
// order given: the first rule has the highest priority (bfrt's lowest
// MATCH_PRIORITY).
func (r Reporter) ReporterScript() (string, error) {
	pl, err := r.plan()
	if err != nil {
		return "", err
	}
	name := bfrt.ProgName(r.Name, DefaultReporterName)
	s := newScript(name)
	ig, eg := s.Ig, s.Eg
	ports := specs(sortedPorts(r.Ports))

	s.SetupHeader(reporterOrigin, "Reporter.ReporterScript")
	s.Comment("")
	s.Comment("%s, %s, %s, reports from %v out of %s, hop %d.", bfrt.Plural(len(r.Ports), "port"), bfrt.Plural(len(r.Routes), "route"),
		bfrt.Plural(len(r.Rules), "report rule"), r.Addrs[0], r.ReportPort, r.Hop)
	if r.NoSeqnum {
		s.Comment("Built with -DDTA_NO_SEQNUM: 2-byte base header.")
	}
	s.Blank()
	s.setup(ports, reporterClear, reporterSeqClear, !r.NoSeqnum)

	s.Comment("The report session: egress-to-egress copies out of the report port, truncated.")
	s.MirrorSession(1, "EGRESS", bfrt.PortVar(r.ReportPort), r.snap())
	s.Blank()

	s.Comment("This reporter: report session, source MAC and address, next hop towards the translator, hop index.")
	s.Line("%s.reporter_cfg.set_default_with_set_reporter(session=1, smac=%s, dmac=%s, src_addr=%s, hop=%d)",
		eg, bfrt.PyMAC(pl.ports[r.ReportPort].MAC), bfrt.PyMAC(r.NextHopMAC), bfrt.PyIP(r.Addrs[0]), r.Hop)
	s.Blank()
	s.Routes(routes(r.Routes), portMAC(pl.ports))

	s.Comment("Own addresses: ACKs and NACKs to them are counted and dropped.")
	for _, a := range r.Addrs {
		s.Line("%s.own_addr.add_with_to_me(dst_addr=%s)", ig, bfrt.PyIP(a))
	}
	s.Blank()

	s.Comment("Report rules, first match wins.")
	for i, ru := range r.Rules {
		mask := ^uint32(0) << (32 - ru.Prefix.Bits())
		if ru.Prefix.Bits() == 0 {
			mask = 0
		}
		protoMask := 0xff
		if ru.Protocol == 0 {
			protoMask = 0
		}
		match := fmt.Sprintf("dst_addr=%s, dst_addr_mask=%#x, protocol=%d, protocol_mask=%#x, MATCH_PRIORITY=%d",
			bfrt.PyIP(ru.Prefix.Addr()), mask, ru.Protocol, protoMask, i)
		flags := fmt.Sprintf("immediate=%d, retransmittable=%d, collector=%s", pyBool(ru.Immediate), pyBool(ru.Retransmittable), bfrt.PyIP(ru.Collector))
		var params string
		switch ru.Primitive {
		case dtawire.OpKeyWrite, dtawire.OpKeyIncrement:
			params = fmt.Sprintf("redundancy=%d, ", ru.Redundancy)
		case dtawire.OpAppend:
			params = fmt.Sprintf("list_id=%d, ", ru.ListID)
		}
		s.Line("%s.report_rule.add_with_%s(%s, %s%s)  # %v", ig, ruleAction[ru.Primitive], match, params, flags, ru.Primitive)
	}
	s.Blank()

	if !r.NoSeqnum {
		s.Comment("The first retransmittable report's sequence number.")
		s.Line("%s.report_seq.mod(REGISTER_INDEX=0, f1=%d)", eg, r.FirstSeq)
		s.Blank()
	}
	s.Line("print('dta: %s loaded: %s, %s, %s')", name, bfrt.Plural(len(r.Ports), "port"), bfrt.Plural(len(r.Routes), "route"),
		bfrt.Plural(len(r.Rules), "report rule"))
	return s.String(), nil
}
