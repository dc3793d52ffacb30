package luminatofino

import (
	"bytes"
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/p4/internal/bfrt"
)

// eventAction is the event tables' action for an event type.
var eventAction = map[mirror.EventType]string{
	mirror.EventDrop:     "drop",
	mirror.EventECN:      "mark_ecn",
	mirror.EventBitError: "corrupt",
}

// origin opens both scripts.
var origin = bfrt.Origin{Program: "Lumina event injector", Source: "p4/luminatofino/injector.p4", Package: "p4/luminatofino"}

// pyKeyIP is a Python expression for an address as the 128-bit event and
// connection keys hold it (IPv4-mapped for IPv4).
func pyKeyIP(b [16]byte) string { return fmt.Sprintf("ip('%v')", netip.AddrFrom16(b)) }

// spec is the port as bfrt configures it.
func (pt *Port) spec() bfrt.Port {
	return bfrt.Port{Name: pt.Name, FrontPanel: pt.FrontPanel, DevPort: pt.DevPort, Speed: pt.Speed, FEC: pt.FEC,
		AutoNeg: pt.AutoNeg, MAC: pt.MAC}
}

func specs(ports []*Port) []bfrt.Port {
	out := make([]bfrt.Port, len(ports))
	for i, pt := range ports {
		out[i] = pt.spec()
	}
	return out
}

func (pl *plan) routes() []bfrt.Route {
	out := make([]bfrt.Route, len(pl.prog.Routes))
	for i, r := range pl.prog.Routes {
		out[i] = bfrt.Route(r)
	}
	return out
}

func (pl *plan) portMAC(port string) header.MAC { return pl.ports[port].MAC }

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
		return bfrt.ComparePrefix(a.prefix, b.prefix)
	})
	return out
}

func compareKey(a, b intent.Key) int {
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
	s := bfrt.New(name)
	ig, eg := s.Ig, s.Eg
	var withPSN, anyPSN []intent.Entry
	for _, e := range p.Entries {
		if e.Key.PSN == intent.AnyPSN {
			anyPSN = append(anyPSN, e)
		} else {
			withPSN = append(withPSN, e)
		}
	}
	slices.SortFunc(withPSN, func(a, b intent.Entry) int { return compareKey(a.Key, b.Key) })
	slices.SortFunc(anyPSN, func(a, b intent.Entry) int { return compareKey(a.Key, b.Key) })
	traffic := pl.trafficPorts()

	s.SetupHeader(origin, "Program.Script")
	s.Comment("")
	s.Comment("%s (%d traffic, %s), %s, iter mode %v, rewrite port %d,",
		bfrt.Plural(len(p.Ports), "port"), len(traffic), bfrt.Plural(len(p.Dumpers), "dumper"), bfrt.Plural(len(p.Routes), "route"),
		p.IterMode, p.rewritePort())
	s.Comment("%s, %s (%d with a PSN, %d for psn: all).",
		bfrt.Plural(len(p.Conns), "connection"), bfrt.Plural(len(p.Entries), "event entry"), len(withPSN), len(anyPSN))
	s.Blank()
	ports := specs(pl.sortedPorts())
	s.Prelude(ports, bfrt.PyIPHelpers, bfrt.PyFrontPanel, bfrt.PyQuietly)

	s.Comment("Clear what a previous test left: entries, registers, counters.")
	s.Clear(ig, "ipv4_fwd", "ipv6_fwd", "arp_proxy", "wrr_session", "connection", "event_psn", "event_any",
		"conn_psn", "conn_iter", "mirror_seq_lo", "mirror_seq_hi", "wrr_counter", "rx_pkts", "rx_roce_pkts", "event_pkts")
	s.Clear(eg, "tx_pkts", "mirrored_pkts")
	s.Blank()
	s.PortSetup(ports)

	s.Comment("Mirror sessions: one per dumper port, for ingress mirroring.")
	for i, d := range p.Dumpers {
		s.MirrorSession(i+1, "INGRESS", bfrt.PortVar(d.Port), p.MirrorSnap)
	}
	s.Blank()
	s.Routes(pl.routes(), pl.portMAC)

	s.Comment("Proxy ARP: per ingress port, the longest prefix answers (with the port's MAC) or not.")
	for _, a := range pl.arpEntries() {
		if a.reply {
			s.Line("%s.arp_proxy.add_with_arp_reply(ingress_port=%s, target_ip=%s, target_ip_p_length=%d, mac=%s)  # %s",
				ig, bfrt.PortVar(a.port.Name), bfrt.PyIP(a.prefix.Addr()), a.prefix.Bits(), bfrt.PyMAC(a.port.MAC), a.why)
		} else {
			s.Line("%s.arp_proxy.add_with_discard(ingress_port=%s, target_ip=%s, target_ip_p_length=%d)  # %s",
				ig, bfrt.PortVar(a.port.Name), bfrt.PyIP(a.prefix.Addr()), a.prefix.Bits(), a.why)
		}
	}
	s.Blank()

	slots := p.wrrSlots()
	s.Comment("Configuration: ITER mode, round-robin cycle, rewrite port.")
	s.Line("%s.iter_mode.set_default_with_iter_%v()", ig, p.IterMode)
	s.Line("%s.wrr_cfg.set_default_with_set_wrr(last=%d)", ig, max(len(slots)-1, 0))
	s.Line("%s.mirror_rewrite.set_default_with_rewrite(dst_port=%d)", eg, p.rewritePort())
	s.Blank()

	s.Comment("Weighted round-robin over the dumpers: slot -> mirror session (smooth WRR, weights %s).", weights(p.Dumpers))
	for slot, d := range slots {
		s.Line("%s.wrr_session.add_with_set_session(slot=%d, sid=%d)  # %s", ig, slot, d+1, p.Dumpers[d].Port)
	}
	s.Blank()

	s.Comment("The mirror sequence (the first RoCE packet gets 1) and the round-robin restart.")
	for _, r := range []string{"mirror_seq_lo", "mirror_seq_hi", "wrr_counter"} {
		s.Line("%s.%s.mod(REGISTER_INDEX=0, f1=0)", ig, r)
	}
	s.Blank()

	if p.IterMode == intent.IterP4 {
		s.Comment("Connections: data direction -> index; ITER = 1, expected PSN = IPSN (kept << 8).")
	} else {
		s.Comment("Connections: data direction -> index; ITER = 1, last PSN = IPSN - 1 (kept << 8).")
	}
	for i, c := range p.Conns {
		k := pl.connKey[i]
		s.Comment("conns[%d]: requester %v qpn %#x ipsn %d, responder %v qpn %#x ipsn %d",
			i, c.RequesterIP, c.RequesterQPN, c.RequesterIPSN, c.ResponderIP, c.ResponderQPN, c.ResponderIPSN)
		s.Line("%s.connection.add_with_set_conn(src_addr=%s, dst_addr=%s, dst_qpn=%#x, idx=%d)",
			ig, pyKeyIP(k.Src), pyKeyIP(k.Dst), k.DstQPN, i)
		s.Line("%s.conn_psn.mod(REGISTER_INDEX=%d, f1=%#x)", ig, i, initPSN(p.IterMode, c.RequesterIPSN))
		s.Line("%s.conn_iter.mod(REGISTER_INDEX=%d, f1=1)", ig, i)
	}
	s.Blank()

	s.Comment("Events: {src, dst, dst QPN, PSN, ITER} -> drop / mark_ecn / corrupt.")
	for _, e := range withPSN {
		s.Line("%s.event_psn.add_with_%s(src_addr=%s, dst_addr=%s, dst_qpn=%#x, psn=%d, iter=%d)  # intent %d",
			ig, eventAction[e.Event], pyKeyIP(e.Key.Src), pyKeyIP(e.Key.Dst), e.Key.DstQPN, e.Key.PSN, e.Key.Iter, e.Intent)
	}
	s.Blank()

	s.Comment("Events for psn: all: {src, dst, dst QPN, ITER} -> drop / mark_ecn / corrupt.")
	for _, e := range anyPSN {
		s.Line("%s.event_any.add_with_%s(src_addr=%s, dst_addr=%s, dst_qpn=%#x, iter=%d)  # intent %d",
			ig, eventAction[e.Event], pyKeyIP(e.Key.Src), pyKeyIP(e.Key.Dst), e.Key.DstQPN, e.Key.Iter, e.Intent)
	}
	s.Blank()

	s.Line("print('lumina: %s loaded: %s, %s, %s, %s, %s, iter mode %v')",
		name, bfrt.Plural(len(p.Ports), "port"), bfrt.Plural(len(p.Routes), "route"), bfrt.Plural(len(p.Dumpers), "dumper"),
		bfrt.Plural(len(p.Conns), "connection"), bfrt.Plural(len(p.Entries), "event entry"), p.IterMode)
	return s.String(), nil
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
