package dta

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	tdta "github.com/rdma-appliance/appliance/translator/dta"
)

// Control names in the P4 programs.
const (
	ctlIngress = "Ingress"
	ctlEgress  = "Egress"
)

// The tables, registers and counters each script clears, so that a load
// leaves nothing of the previous one. A test checks the lists cover every
// table, register and counter the sources declare (but const tables).
var (
	translatorClear = map[string][]string{
		ctlIngress: {"ipv4_fwd", "collector", "collector_qp", "redundancy_group", "append_list", "report_pkts", "drop_reports"},
		ctlEgress: {"rdma_conn", "key_write_region", "key_increment_region", "postcard_region", "list_region",
			"psn", "list_head", "list_seq", "pc_key", "pc_mask", "pc_hop0", "pc_hop1", "pc_hop2", "pc_hop3", "pc_hop4",
			"rdma_pkts", "psn_resyncs", "postcard_events"},
	}
	// Only in the build with sequence numbers.
	translatorSeqClear = []string{"reporter", "expected_seq"}
	reporterClear      = map[string][]string{
		ctlIngress: {"ipv4_fwd", "own_addr", "report_rule", "dta_acks"},
		ctlEgress:  {"reports_sent"},
	}
	reporterSeqClear = []string{"report_seq"}
)

// script accumulates a bfrt_python script.
type script struct {
	b  strings.Builder
	ig string // bfrt.<name>.pipe.Ingress
	eg string // bfrt.<name>.pipe.Egress
}

func newScript(name string) *script {
	return &script{ig: "bfrt." + name + ".pipe." + ctlIngress, eg: "bfrt." + name + ".pipe." + ctlEgress}
}

func (s *script) line(format string, a ...any) {
	fmt.Fprintf(&s.b, format, a...)
	s.b.WriteByte('\n')
}

func (s *script) blank() { s.b.WriteByte('\n') }

func (s *script) comment(format string, a ...any) {
	if format == "" {
		s.line("#")
		return
	}
	s.line("# "+format, a...)
}

func pyIP(a netip.Addr) string { return fmt.Sprintf("ip('%v')", a) }

func pyMAC(m [6]byte) string {
	return fmt.Sprintf("mac('%02x:%02x:%02x:%02x:%02x:%02x')", m[0], m[1], m[2], m[3], m[4], m[5])
}

func pyBool(b bool) int {
	if b {
		return 1
	}
	return 0
}

const pyIPHelpers = `
import ipaddress

def ip(s):
    return int(ipaddress.ip_address(s))

def mac(s):
    return int(s.replace(':', ''), 16)
`

const pyFrontPanel = `
def front_panel(conn, chnl):
    return bfrt.port.port_hdl_info.get(CONN_ID=conn, CHNL_ID=chnl, print_ents=False).data[b'$DEV_PORT']
`

const pyQuietly = `
def quietly(f, **kw):
    try:
        f(**kw)
    except Exception:
        pass
`

// prelude writes the helpers and the port variables. Each def is followed
// by a blank line and has none inside, so the script also works fed line
// by line to an interactive interpreter.
func (s *script) prelude(ports []*Port, helpers ...string) {
	for _, h := range helpers {
		s.line("%s", strings.TrimSpace(h))
		s.blank()
	}
	s.comment("Ports: dev port numbers (front-panel ports are looked up on the switch).")
	for _, pt := range ports {
		if pt.FrontPanel != "" {
			conn, chnl, _ := strings.Cut(pt.FrontPanel, "/")
			s.line("%s = front_panel(%s, %s)", portVar(pt.Name), conn, chnl)
		} else {
			s.line("%s = %d", portVar(pt.Name), pt.DevPort)
		}
	}
	s.blank()
}

func (s *script) clear(tables map[string][]string, seq []string, withSeq bool) {
	s.comment("Clear what a previous load left: entries, registers, counters.")
	for _, t := range tables[ctlIngress] {
		s.line("%s.%s.clear()", s.ig, t)
	}
	for _, t := range tables[ctlEgress] {
		s.line("%s.%s.clear()", s.eg, t)
	}
	if withSeq {
		for _, t := range seq {
			ctl := s.ig
			if slices.Contains(reporterSeqClear, t) {
				ctl = s.eg
			}
			s.line("%s.%s.clear()", ctl, t)
		}
	}
	s.blank()
}

func (s *script) ports(ports []*Port) {
	s.comment("Port setup.")
	for _, pt := range ports {
		v := portVar(pt.Name)
		s.line("quietly(bfrt.port.port.delete, DEV_PORT=%s)", v)
		s.line("bfrt.port.port.add(DEV_PORT=%s, SPEED='%s', FEC='%s', AUTO_NEGOTIATION='%s', PORT_ENABLE=True)",
			v, speeds[strings.ToUpper(pt.Speed)], fecs[strings.ToLower(pt.FEC)], autonegs[strings.ToLower(pt.AutoNeg)])
	}
	s.blank()
}

func (s *script) routes(routes []Route, ports map[string]*Port) {
	s.comment("Routes: longest prefix -> (egress port, next-hop MAC, port MAC).")
	rs := slices.Clone(routes)
	slices.SortFunc(rs, func(a, b Route) int { return comparePrefix(a.Prefix, b.Prefix) })
	for _, r := range rs {
		s.line("%s.ipv4_fwd.add_with_forward(dst_addr=%s, dst_addr_p_length=%d, port=%s, dmac=%s, smac=%s)",
			s.ig, pyIP(r.Prefix.Addr()), r.Prefix.Bits(), portVar(r.Port), pyMAC(r.MAC), pyMAC(ports[r.Port].MAC))
	}
	s.blank()
}

func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return cmp.Compare(a.Bits(), b.Bits())
}

// Script renders the translator as a bfrt_python script for `bfshell -b`:
// it clears the program's tables, registers and counters, sets the ports
// up, creates the ACK mirror sessions and the redundancy multicast groups,
// and fills the forwarding, collector, connection, region, list and
// reporter tables and the PSN and sequence registers. The output depends
// only on the translator, with entries in a fixed order.
func (t Translator) Script() (string, error) {
	pl, err := t.plan()
	if err != nil {
		return "", err
	}
	name := progName(t.Name, DefaultTranslatorName)
	s := newScript(name)
	ig, eg := s.ig, s.eg
	ports := pl.sortedPorts()

	s.comment("DTA translator: bfrt_python setup of p4/dta/translator.p4 (bfrt program %q).", name)
	s.comment("Generated by the Go control plane in p4/dta (Translator.Script); do not edit.")
	s.comment("Run on the switch, with the program loaded: bfshell -b <this file>")
	s.comment("")
	s.comment("%s, %s, %s, %s, %s.", plural(len(t.Ports), "port"), plural(len(t.Routes), "route"),
		plural(len(t.Collectors), "collector"), plural(len(pl.lists), "Append list"), plural(len(t.Peers), "tracked reporter"))
	if t.NoSeqnum {
		s.comment("Built with -DDTA_NO_SEQNUM: 2-byte base header, no reporter tracking.")
	}
	s.blank()
	s.prelude(ports, pyIPHelpers, pyFrontPanel, pyQuietly)
	s.clear(translatorClear, translatorSeqClear, !t.NoSeqnum)
	s.ports(ports)

	s.comment("ACK mirror sessions: in-order reports are mirrored back to their reporter as ACKs.")
	for _, p := range pl.acks {
		sid := pl.ackSID[p]
		s.line("quietly(bfrt.mirror.cfg.delete, sid=%d)", sid)
		s.line("bfrt.mirror.cfg.entry_with_normal(sid=%d, direction='INGRESS', session_enable=True, ucast_egress_port=%s, ucast_egress_port_valid=True, max_pkt_len=%d).push()",
			sid, portVar(p), t.ackSnap())
	}
	s.blank()

	s.comment("Redundancy: per collector and N, a group of N copies on the collector's port, replication ids 0..N-1.")
	for i := range t.Collectors {
		c := &t.Collectors[i]
		if c.KeyWrite == nil && c.KeyIncrement == nil {
			continue
		}
		for n := 1; n <= c.redundancy(); n++ {
			g := groupID(i, n)
			var nodes, valid, xid []string
			s.line("quietly(bfrt.pre.mgid.delete, MGID=%d)", g)
			for k := range n {
				id := nodeID(g, k)
				s.line("quietly(bfrt.pre.node.delete, MULTICAST_NODE_ID=%d)", id)
				s.line("bfrt.pre.node.add(MULTICAST_NODE_ID=%d, MULTICAST_RID=%d, MULTICAST_LAG_ID=[], DEV_PORT=[%s])",
					id, k, portVar(c.Port))
				nodes = append(nodes, fmt.Sprint(id))
				valid = append(valid, "False")
				xid = append(xid, "0")
			}
			s.line("bfrt.pre.mgid.add(MGID=%d, MULTICAST_NODE_ID=[%s], MULTICAST_NODE_L1_XID_VALID=[%s], MULTICAST_NODE_L1_XID=[%s])",
				g, strings.Join(nodes, ", "), strings.Join(valid, ", "), strings.Join(xid, ", "))
			s.line("%s.redundancy_group.add_with_set_group(collector=%d, redundancy=%d, mgid=%d)  # %s, N=%d", ig, i, n, g, c.Name, n)
		}
	}
	s.blank()

	s.comment("The translator's MAC: the source of ACKs and NACKs.")
	s.line("%s.translator_cfg.set_default_with_set_translator(mac=%s)", ig, pyMAC(t.MAC))
	s.blank()
	s.routes(t.Routes, pl.ports)

	s.comment("Collectors: reports to its address, its RNIC's answers, the connection, the regions, the first PSN.")
	for i := range t.Collectors {
		c := &t.Collectors[i]
		s.comment("collectors[%d] %s: %v qpn %#x on %s, psn %d", i, c.Name, c.IP, c.QPN, c.Port, c.PSN)
		s.line("%s.collector.add_with_set_collector(dst_addr=%s, idx=%d, port=%s)", ig, pyIP(c.IP), i, portVar(c.Port))
		s.line("%s.collector_qp.add_with_set_collector(src_addr=%s, dst_qpn=%#x, idx=%d, port=%s)",
			ig, pyIP(c.IP), t.QPN, i, portVar(c.Port))
		s.line("%s.rdma_conn.add_with_set_conn(collector=%d, dmac=%s, smac=%s, src_addr=%s, dst_addr=%s, dscp=%d, udp_src_port=%d, dst_qpn=%#x)",
			eg, i, pyMAC(c.MAC), pyMAC(pl.ports[c.Port].MAC), pyIP(t.IP), pyIP(c.IP), t.DSCP, t.udpSrcPort(c), c.QPN)
		if kw := c.KeyWrite; kw != nil {
			s.regionEntry("key_write_region", "collector", i, region{kw.Addr, kw.RKey, kw.Slots, EntryLen})
		}
		if ki := c.KeyIncrement; ki != nil {
			s.regionEntry("key_increment_region", "collector", i, region{ki.Addr, ki.RKey, ki.Slots, EntryLen})
		}
		if pc := c.Postcards; pc != nil {
			s.regionEntry("postcard_region", "collector", i, region{pc.Addr, pc.RKey, pc.Slots, RecordLen})
		}
		s.line("%s.psn.mod(REGISTER_INDEX=%d, f1=%d)", eg, i, c.PSN)
	}
	s.blank()

	s.comment("Append lists: (collector, list id) -> list index; head and sequence start at 0.")
	for idx, l := range pl.lists {
		s.line("%s.append_list.add_with_set_list(collector=%d, list_id=%d, idx=%d)  # %s", ig, l.coll, l.id, idx, t.Collectors[l.coll].Name)
		s.regionEntry("list_region", "list", idx, region{l.reg.Addr, l.reg.RKey, l.reg.Entries, tdta.AppendEntryLen})
		s.line("%s.list_head.mod(REGISTER_INDEX=%d, f1=0)", eg, idx)
		s.line("%s.list_seq.mod(REGISTER_INDEX=%d, f1=0)", eg, idx)
	}
	s.blank()

	if !t.NoSeqnum {
		s.comment("Reporters: source address -> index and ACK session (0: NACKs only); the first expected sequence.")
		for i, p := range t.Peers {
			s.line("%s.reporter.add_with_set_reporter(src_addr=%s, idx=%d, ack_session=%d)  # %s",
				ig, pyIP(p.IP), i, pl.ackSID[p.AckPort], p.Name)
			s.line("%s.expected_seq.mod(REGISTER_INDEX=%d, f1=%d)", ig, i, p.FirstSeq)
		}
		s.blank()
	}

	s.line("print('dta: %s loaded: %s, %s, %s, %s')", name, plural(len(t.Ports), "port"),
		plural(len(t.Collectors), "collector"), plural(len(pl.lists), "list"), plural(len(t.Peers), "reporter"))
	return s.b.String(), nil
}

func (s *script) regionEntry(table, key string, idx int, r region) {
	s.line("%s.%s.add_with_set_region(%s=%d, base_hi=%#x, base_lo=%#x, rkey=%#x, slot_mask=%#x)  # %d x %d B",
		s.eg, table, key, idx, r.hi(), r.lo(), r.rkey, r.mask(), r.slots, r.entryLen)
}

// ruleAction is report_rule's action for a primitive.
var ruleAction = map[tdta.Opcode]string{
	tdta.OpKeyWrite:     "report_key_write",
	tdta.OpKeyIncrement: "report_key_increment",
	tdta.OpPostcarder:   "report_postcard",
	tdta.OpAppend:       "report_append",
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
	name := progName(r.Name, DefaultReporterName)
	s := newScript(name)
	ig, eg := s.ig, s.eg
	ports := sortedPorts(r.Ports)

	s.comment("DTA reporter: bfrt_python setup of p4/dta/reporter.p4 (bfrt program %q).", name)
	s.comment("Generated by the Go control plane in p4/dta (Reporter.ReporterScript); do not edit.")
	s.comment("Run on the switch, with the program loaded: bfshell -b <this file>")
	s.comment("")
	s.comment("%s, %s, %s, reports from %v out of %s, hop %d.", plural(len(r.Ports), "port"), plural(len(r.Routes), "route"),
		plural(len(r.Rules), "report rule"), r.Addrs[0], r.ReportPort, r.Hop)
	if r.NoSeqnum {
		s.comment("Built with -DDTA_NO_SEQNUM: 2-byte base header.")
	}
	s.blank()
	s.prelude(ports, pyIPHelpers, pyFrontPanel, pyQuietly)
	s.clear(reporterClear, reporterSeqClear, !r.NoSeqnum)
	s.ports(ports)

	s.comment("The report session: egress-to-egress copies out of the report port, truncated.")
	s.line("quietly(bfrt.mirror.cfg.delete, sid=1)")
	s.line("bfrt.mirror.cfg.entry_with_normal(sid=1, direction='EGRESS', session_enable=True, ucast_egress_port=%s, ucast_egress_port_valid=True, max_pkt_len=%d).push()",
		portVar(r.ReportPort), r.snap())
	s.blank()

	s.comment("This reporter: report session, source MAC and address, next hop towards the translator, hop index.")
	s.line("%s.reporter_cfg.set_default_with_set_reporter(session=1, smac=%s, dmac=%s, src_addr=%s, hop=%d)",
		eg, pyMAC(pl.ports[r.ReportPort].MAC), pyMAC(r.NextHopMAC), pyIP(r.Addrs[0]), r.Hop)
	s.blank()
	s.routes(r.Routes, pl.ports)

	s.comment("Own addresses: ACKs and NACKs to them are counted and dropped.")
	for _, a := range r.Addrs {
		s.line("%s.own_addr.add_with_to_me(dst_addr=%s)", ig, pyIP(a))
	}
	s.blank()

	s.comment("Report rules, first match wins.")
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
			pyIP(ru.Prefix.Addr()), mask, ru.Protocol, protoMask, i)
		flags := fmt.Sprintf("immediate=%d, retransmittable=%d, collector=%s", pyBool(ru.Immediate), pyBool(ru.Retransmittable), pyIP(ru.Collector))
		var params string
		switch ru.Primitive {
		case tdta.OpKeyWrite, tdta.OpKeyIncrement:
			params = fmt.Sprintf("redundancy=%d, ", ru.Redundancy)
		case tdta.OpAppend:
			params = fmt.Sprintf("list_id=%d, ", ru.ListID)
		}
		s.line("%s.report_rule.add_with_%s(%s, %s%s)  # %v", ig, ruleAction[ru.Primitive], match, params, flags, ru.Primitive)
	}
	s.blank()

	if !r.NoSeqnum {
		s.comment("The first retransmittable report's sequence number.")
		s.line("%s.report_seq.mod(REGISTER_INDEX=0, f1=%d)", eg, r.FirstSeq)
		s.blank()
	}
	s.line("print('dta: %s loaded: %s, %s, %s')", name, plural(len(r.Ports), "port"), plural(len(r.Routes), "route"),
		plural(len(r.Rules), "report rule"))
	return s.b.String(), nil
}

// plural is "1 port", "2 ports", "1 entry", "2 entries".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "y") {
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(noun, "y"))
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
