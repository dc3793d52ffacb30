package lumina

import (
	"bytes"
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/rdma-appliance/appliance/translator/inject"
)

// Names in injector.p4 the scripts use (a test checks each against the
// source).
const (
	ctlIngress = "Ingress"
	ctlEgress  = "Egress"
)

// eventAction is the event tables' action for an event type.
var eventAction = map[inject.EventType]string{
	inject.EventDrop:     "drop",
	inject.EventECN:      "mark_ecn",
	inject.EventBitError: "corrupt",
}

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

// pyIP is a Python expression for an address as an integer.
func pyIP(a netip.Addr) string { return fmt.Sprintf("ip('%v')", a) }

// pyKeyIP is a Python expression for an address as the 128-bit event and
// connection keys hold it (IPv4-mapped for IPv4).
func pyKeyIP(b [16]byte) string { return fmt.Sprintf("ip('%v')", netip.AddrFrom16(b)) }

func pyMAC(m [6]byte) string {
	return fmt.Sprintf("mac('%02x:%02x:%02x:%02x:%02x:%02x')", m[0], m[1], m[2], m[3], m[4], m[5])
}

// prelude writes the helpers and the port variables both scripts use. Each
// def is followed by a blank line and has none inside, so the script also
// works fed line by line to an interactive interpreter.
func (s *script) prelude(pl *plan, helpers ...string) {
	for _, h := range helpers {
		s.line("%s", strings.TrimSpace(h))
		s.blank()
	}
	s.comment("Ports: dev port numbers (front-panel ports are looked up on the switch).")
	for _, pt := range pl.sortedPorts() {
		if pt.FrontPanel != "" {
			conn, chnl, _ := strings.Cut(pt.FrontPanel, "/")
			s.line("%s = front_panel(%s, %s)", portVar(pt.Name), conn, chnl)
		} else {
			s.line("%s = %d", portVar(pt.Name), pt.DevPort)
		}
	}
	s.blank()
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

// sortedPorts returns the ports by name.
func (pl *plan) sortedPorts() []*Port {
	out := make([]*Port, 0, len(pl.prog.Ports))
	for i := range pl.prog.Ports {
		out = append(out, &pl.prog.Ports[i])
	}
	slices.SortFunc(out, func(a, b *Port) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// trafficPorts returns the ports that are not dumpers, by name.
func (pl *plan) trafficPorts() []*Port {
	var out []*Port
	for _, pt := range pl.sortedPorts() {
		if _, d := pl.dumper[pt.Name]; !d {
			out = append(out, pt)
		}
	}
	return out
}

func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return cmp.Compare(a.Bits(), b.Bits())
}

// arpEntry is one entry of the proxy ARP table.
type arpEntry struct {
	port   *Port // ingress port
	prefix netip.Prefix
	reply  bool // arp_reply with the port's MAC, else discard
	why    string
}

// arpEntries is the proxy ARP table: per traffic port, its own addresses,
// the IPv4 routes out of other ports (answered) and out of itself
// (discarded, so a longer prefix out of the same port beats a shorter one
// out of another, as the Go injector's longest-prefix route decides).
func (pl *plan) arpEntries() []arpEntry {
	var out []arpEntry
	for _, pt := range pl.trafficPorts() {
		own := map[netip.Prefix]bool{}
		for _, a := range pt.Addrs {
			pfx := netip.PrefixFrom(a, 32)
			own[pfx] = true
			out = append(out, arpEntry{port: pt, prefix: pfx, reply: true, why: "the switch's address"})
		}
		for _, r := range pl.prog.Routes {
			if !r.Prefix.Addr().Is4() || own[r.Prefix] {
				continue
			}
			e := arpEntry{port: pt, prefix: r.Prefix, reply: r.Port != pt.Name, why: "routed out of " + r.Port}
			if !e.reply {
				e.why += ": the host answers"
			}
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b arpEntry) int {
		if c := strings.Compare(a.port.Name, b.port.Name); c != 0 {
			return c
		}
		return comparePrefix(a.prefix, b.prefix)
	})
	return out
}

func compareKey(a, b inject.Key) int {
	if c := bytes.Compare(a.Src[:], b.Src[:]); c != 0 {
		return c
	}
	if c := bytes.Compare(a.Dst[:], b.Dst[:]); c != 0 {
		return c
	}
	if c := cmp.Compare(a.DstQPN, b.DstQPN); c != 0 {
		return c
	}
	if c := cmp.Compare(a.PSN, b.PSN); c != 0 {
		return c
	}
	return cmp.Compare(a.Iter, b.Iter)
}

// Script renders the program as a bfrt_python script for `bfshell -b`: it
// clears the program's tables, registers and counters, sets the ports up,
// creates the dumpers' mirror sessions and fills the forwarding, proxy ARP,
// configuration, round-robin, connection and event tables and the ITER
// registers. The output depends only on the program, with tables in a
// fixed order and entries sorted.
func (p Program) Script() (string, error) {
	pl, err := p.plan()
	if err != nil {
		return "", err
	}
	name := p.name()
	s := newScript(name)
	ig, eg := s.ig, s.eg
	var withPSN, anyPSN []inject.Entry
	for _, e := range p.Entries {
		if e.Key.PSN == inject.AnyPSN {
			anyPSN = append(anyPSN, e)
		} else {
			withPSN = append(withPSN, e)
		}
	}
	slices.SortFunc(withPSN, func(a, b inject.Entry) int { return compareKey(a.Key, b.Key) })
	slices.SortFunc(anyPSN, func(a, b inject.Entry) int { return compareKey(a.Key, b.Key) })
	traffic := pl.trafficPorts()

	s.comment("Lumina event injector: bfrt_python setup of p4/lumina/injector.p4 (bfrt program %q).", name)
	s.comment("Generated by the Go control plane in p4/lumina (Program.Script); do not edit.")
	s.comment("Run on the switch, with the program loaded: bfshell -b <this file>")
	s.comment("")
	s.comment("%s (%d traffic, %s), %s, iter mode %v, rewrite port %d,",
		plural(len(p.Ports), "port"), len(traffic), plural(len(p.Dumpers), "dumper"), plural(len(p.Routes), "route"),
		p.IterMode, p.rewritePort())
	s.comment("%s, %s (%d with a PSN, %d for psn: all).",
		plural(len(p.Conns), "connection"), plural(len(p.Entries), "event entry"), len(withPSN), len(anyPSN))
	s.blank()
	s.prelude(pl, pyIPHelpers, pyFrontPanel, pyQuietly)

	s.comment("Clear what a previous test left: entries, registers, counters.")
	for _, t := range []string{"ipv4_fwd", "ipv6_fwd", "arp_proxy", "wrr_session", "connection", "event_psn", "event_any",
		"conn_psn", "conn_iter", "mirror_seq_lo", "mirror_seq_hi", "wrr_counter", "rx_pkts", "rx_roce_pkts", "event_pkts"} {
		s.line("%s.%s.clear()", ig, t)
	}
	for _, t := range []string{"tx_pkts", "mirrored_pkts"} {
		s.line("%s.%s.clear()", eg, t)
	}
	s.blank()

	s.comment("Port setup.")
	for _, pt := range pl.sortedPorts() {
		v := portVar(pt.Name)
		s.line("quietly(bfrt.port.port.delete, DEV_PORT=%s)", v)
		s.line("bfrt.port.port.add(DEV_PORT=%s, SPEED='%s', FEC='%s', AUTO_NEGOTIATION='%s', PORT_ENABLE=True)",
			v, speeds[strings.ToUpper(pt.Speed)], fecs[strings.ToLower(pt.FEC)], autonegs[strings.ToLower(pt.AutoNeg)])
	}
	s.blank()

	s.comment("Mirror sessions: one per dumper port, for ingress mirroring.")
	for i, d := range p.Dumpers {
		snap := ""
		if p.MirrorSnap > 0 {
			snap = fmt.Sprintf(", max_pkt_len=%d", p.MirrorSnap)
		}
		s.line("quietly(bfrt.mirror.cfg.delete, sid=%d)", i+1)
		s.line("bfrt.mirror.cfg.entry_with_normal(sid=%d, direction='INGRESS', session_enable=True, ucast_egress_port=%s, ucast_egress_port_valid=True%s).push()",
			i+1, portVar(d.Port), snap)
	}
	s.blank()

	s.comment("Routes: longest prefix -> (egress port, next-hop MAC, port MAC).")
	routes := slices.Clone(p.Routes)
	slices.SortFunc(routes, func(a, b Route) int { return comparePrefix(a.Prefix, b.Prefix) })
	for _, r := range routes {
		t := "ipv6_fwd"
		if r.Prefix.Addr().Is4() {
			t = "ipv4_fwd"
		}
		s.line("%s.%s.add_with_forward(dst_addr=%s, dst_addr_p_length=%d, port=%s, dmac=%s, smac=%s)",
			ig, t, pyIP(r.Prefix.Addr()), r.Prefix.Bits(), portVar(r.Port), pyMAC(r.MAC), pyMAC(pl.ports[r.Port].MAC))
	}
	s.blank()

	s.comment("Proxy ARP: per ingress port, the longest prefix answers (with the port's MAC) or not.")
	for _, a := range pl.arpEntries() {
		if a.reply {
			s.line("%s.arp_proxy.add_with_arp_reply(ingress_port=%s, target_ip=%s, target_ip_p_length=%d, mac=%s)  # %s",
				ig, portVar(a.port.Name), pyIP(a.prefix.Addr()), a.prefix.Bits(), pyMAC(a.port.MAC), a.why)
		} else {
			s.line("%s.arp_proxy.add_with_discard(ingress_port=%s, target_ip=%s, target_ip_p_length=%d)  # %s",
				ig, portVar(a.port.Name), pyIP(a.prefix.Addr()), a.prefix.Bits(), a.why)
		}
	}
	s.blank()

	slots := p.wrrSlots()
	s.comment("Configuration: ITER mode, round-robin cycle, rewrite port.")
	s.line("%s.iter_mode.set_default_with_iter_%v()", ig, p.IterMode)
	s.line("%s.wrr_cfg.set_default_with_set_wrr(last=%d)", ig, max(len(slots)-1, 0))
	s.line("%s.mirror_rewrite.set_default_with_rewrite(dst_port=%d)", eg, p.rewritePort())
	s.blank()

	s.comment("Weighted round-robin over the dumpers: slot -> mirror session (smooth WRR, weights %s).", weights(p.Dumpers))
	for slot, d := range slots {
		s.line("%s.wrr_session.add_with_set_session(slot=%d, sid=%d)  # %s", ig, slot, d+1, p.Dumpers[d].Port)
	}
	s.blank()

	s.comment("The mirror sequence (the first RoCE packet gets 1) and the round-robin restart.")
	for _, r := range []string{"mirror_seq_lo", "mirror_seq_hi", "wrr_counter"} {
		s.line("%s.%s.mod(REGISTER_INDEX=0, f1=0)", ig, r)
	}
	s.blank()

	if p.IterMode == inject.IterP4 {
		s.comment("Connections: data direction -> index; ITER = 1, expected PSN = IPSN (kept << 8).")
	} else {
		s.comment("Connections: data direction -> index; ITER = 1, last PSN = IPSN - 1 (kept << 8).")
	}
	for i, c := range p.Conns {
		k := pl.connKey[i]
		s.comment("conns[%d]: requester %v qpn %#x ipsn %d, responder %v qpn %#x ipsn %d",
			i, c.RequesterIP, c.RequesterQPN, c.RequesterIPSN, c.ResponderIP, c.ResponderQPN, c.ResponderIPSN)
		s.line("%s.connection.add_with_set_conn(src_addr=%s, dst_addr=%s, dst_qpn=%#x, idx=%d)",
			ig, pyKeyIP(k.Src), pyKeyIP(k.Dst), k.DstQPN, i)
		s.line("%s.conn_psn.mod(REGISTER_INDEX=%d, f1=%#x)", ig, i, initPSN(p.IterMode, c.RequesterIPSN))
		s.line("%s.conn_iter.mod(REGISTER_INDEX=%d, f1=1)", ig, i)
	}
	s.blank()

	s.comment("Events: {src, dst, dst QPN, PSN, ITER} -> drop / mark_ecn / corrupt.")
	for _, e := range withPSN {
		s.line("%s.event_psn.add_with_%s(src_addr=%s, dst_addr=%s, dst_qpn=%#x, psn=%d, iter=%d)  # intent %d",
			ig, eventAction[e.Event], pyKeyIP(e.Key.Src), pyKeyIP(e.Key.Dst), e.Key.DstQPN, e.Key.PSN, e.Key.Iter, e.Intent)
	}
	s.blank()

	s.comment("Events for psn: all: {src, dst, dst QPN, ITER} -> drop / mark_ecn / corrupt.")
	for _, e := range anyPSN {
		s.line("%s.event_any.add_with_%s(src_addr=%s, dst_addr=%s, dst_qpn=%#x, iter=%d)  # intent %d",
			ig, eventAction[e.Event], pyKeyIP(e.Key.Src), pyKeyIP(e.Key.Dst), e.Key.DstQPN, e.Key.Iter, e.Intent)
	}
	s.blank()

	s.line("print('lumina: %s loaded: %s, %s, %s, %s, %s, iter mode %v')",
		name, plural(len(p.Ports), "port"), plural(len(p.Routes), "route"), plural(len(p.Dumpers), "dumper"),
		plural(len(p.Conns), "connection"), plural(len(p.Entries), "event entry"), p.IterMode)
	return s.b.String(), nil
}

func weights(ds []Dumper) string {
	if len(ds) == 0 {
		return "none: nothing is mirrored"
	}
	w := make([]string, len(ds))
	for i, d := range ds {
		w[i] = fmt.Sprintf("%s=%d", d.Port, d.weight())
	}
	return strings.Join(w, " ")
}

// plural is "1 port", "2 ports", "1 event entry", "2 event entries".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "y") {
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(noun, "y"))
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
