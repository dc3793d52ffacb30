// Package luminatofino is the control plane of injector.p4, Lumina's event
// injector for Tofino: the same behaviour as the software injector in
// translator/inject, as a TNA program plus the bfrt_python scripts that load
// it.
//
// A Program is pure data: the switch ports (speed, FEC, auto-negotiation,
// MAC and own addresses), the static routes, the dumpers' mirror ports with
// their weights, the rewrite port, the ITER mode and the compiled event
// entries with the connection metadata they came from (inject.Compile).
// Script renders it as a bfrt_python script for `bfshell -b` that clears the
// program's state, sets the ports up, creates one ingress mirror session per
// dumper and fills every table and register; CounterScript renders the
// script that reads the counters back as JSON lines, which ParseCounters
// reads from bfshell's output.
package luminatofino

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/p4/internal/bfrt"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// DefaultName is the program's name in bfrt (bfrt.<name>.pipe...), the name
// bf-p4c gives injector.p4 unless told otherwise.
const DefaultName = "injector"

// Sizes of injector.p4's tables and registers (its constants of the same
// names); a test checks the two agree.
const (
	ConnSlots    = 4096  // CONN_SLOTS: connections (connection table, ITER registers)
	PortSlots    = 512   // PORT_SLOTS: per-port counters, indexed by dev port
	EventPSNSize = 16384 // EVENT_PSN_SIZE: event entries with a PSN
	EventAnySize = 1024  // EVENT_ANY_SIZE: event entries for psn: all
	FwdSize      = 1024  // FWD_SIZE: routes per address family
	ARPSize      = 1024  // ARP_SIZE: proxy ARP entries
	WRRSlots     = 256   // WRR_SLOTS: the total weight of the dumpers
	// MaxMirrorLen is a mirror session's largest max_pkt_len.
	MaxMirrorLen = 16384
	// MinMirrorLen keeps the headers the dumpers restore (Ethernet, IPv6,
	// UDP) in a truncated copy.
	MinMirrorLen = 64
)

// Port is a switch port the program uses: towards a test host (a traffic
// port) or towards a dumper (a port a Dumper names).
type Port struct {
	// Name names the port in routes, dumpers and the counters read back:
	// letters, digits, '_' and '-', starting with a letter.
	Name string `json:"name"`
	// FrontPanel is the port's cage and lane, "conn/chnl" such as "1/0";
	// the script resolves it to a dev port on the switch. When empty,
	// DevPort is the dev port.
	FrontPanel string `json:"front_panel,omitempty"`
	DevPort    int    `json:"dev_port,omitempty"`
	// Speed is 1G, 10G, 25G, 40G, 50G or 100G.
	Speed string `json:"speed"`
	// FEC is none, fc (Firecode) or rs (Reed-Solomon).
	FEC string `json:"fec"`
	// AutoNeg is default (the SDE's choice), on or off; empty means
	// default.
	AutoNeg string `json:"autoneg,omitempty"`
	// MAC is the switch's address on a traffic port: the source of the
	// packets routed out of it and the answer to ARP requests on it.
	MAC header.MAC `json:"mac"`
	// Addrs are the switch's own IPv4 addresses on a traffic port (the
	// hosts' gateway), answered by proxy ARP.
	Addrs []netip.Addr `json:"addrs,omitempty"`
}

// Route sends the packets for Prefix out of traffic port Port to the next
// hop MAC (the host).
type Route struct {
	Prefix netip.Prefix `json:"prefix"`
	Port   string       `json:"port"`
	MAC    header.MAC   `json:"mac"`
}

// Dumper is a dumper's port with its share of the mirrored copies (its
// capacity); weight 0 counts as 1, as in inject.MirrorPort.
type Dumper struct {
	Port   string `json:"port"`
	Weight int    `json:"weight"`
}

// Program is what the injector runs for one test.
type Program struct {
	// Name is the P4 program's name in bfrt (DefaultName when empty).
	Name    string   `json:"name,omitempty"`
	Ports   []Port   `json:"ports"`
	Routes  []Route  `json:"routes"`
	Dumpers []Dumper `json:"dumpers"`
	// RewritePort is the mirrored copies' UDP destination port
	// (inject.DefaultRewritePort when 0).
	RewritePort uint16 `json:"rewrite_port,omitempty"`
	// MirrorSnap truncates mirrored copies to this many bytes (the mirror
	// sessions' max_pkt_len); 0 mirrors whole packets.
	MirrorSnap int             `json:"mirror_snap,omitempty"`
	IterMode   intent.IterMode `json:"iter_mode"`
	// Geometry and Options are those the entries were compiled with; they
	// give each connection's data direction.
	Geometry intent.Geometry `json:"geometry"`
	Options  intent.Options  `json:"options"`
	// Conns is the runtime metadata of the test's connections, in the
	// order the intents count them; Entries what inject.Compile made of
	// the intents for them.
	Conns   []intent.Conn  `json:"conns"`
	Entries []intent.Entry `json:"entries"`
}

// ErrProgram is wrapped by every validation error; the message names the
// field at fault, as in "ports[1].speed".
var ErrProgram = errors.New("lumina: bad program")

func bad(field, format string, a ...any) error { return bfrt.Bad(ErrProgram, field, format, a...) }

// connKey is the data direction of a connection: what the connection
// table and the event keys match.
type connKey struct {
	Src, Dst [16]byte
	DstQPN   uint32
}

// dataKey is a connection's data direction: requester to responder, except
// READ (and the READ connections of send_read), whose data packets are the
// responses. It is inject's rule; a test checks it against Compile.
func dataKey(i int, c intent.Conn, g intent.Geometry, opt intent.Options) connKey {
	if g.Verb == intent.VerbRead || g.Verb == intent.VerbSendRead && i >= opt.SendConns {
		return connKey{Src: c.ResponderIP.As16(), Dst: c.RequesterIP.As16(), DstQPN: c.RequesterQPN}
	}
	return connKey{Src: c.RequesterIP.As16(), Dst: c.ResponderIP.As16(), DstQPN: c.ResponderQPN}
}

// name returns the program's bfrt name.
func (p *Program) name() string { return bfrt.ProgName(p.Name, DefaultName) }

func (p *Program) rewritePort() uint16 {
	if p.RewritePort == 0 {
		return mirror.DefaultRewritePort
	}
	return p.RewritePort
}

func (d Dumper) weight() int { return max(d.Weight, 1) }

// Validate checks the program; the error names the first bad field.
func (p Program) Validate() error {
	_, err := p.plan()
	return err
}

// plan is a validated program, ready to render.
type plan struct {
	prog    *Program
	ports   map[string]*Port
	dumper  map[string]int // port name -> index in Dumpers
	conns   map[connKey]int
	connKey []connKey // per connection
}

// plan validates the program in the order its parts depend on each other
// (ports before the dumpers, routes and connections that name them,
// connections before the entries that match them), so that the error
// names the first bad field.
func (p *Program) plan() (*plan, error) {
	pl := &plan{prog: p, ports: map[string]*Port{}, dumper: map[string]int{}, conns: map[connKey]int{}}
	if !bfrt.IsIdentifier(p.name()) {
		return nil, bad("name", "%q is not a P4 identifier", p.Name)
	}
	for _, check := range []func() error{pl.checkPorts, pl.checkDumpers, pl.checkTrafficPorts, pl.checkRoutes,
		pl.checkMirror, pl.checkConns, pl.checkEntries} {
		if err := check(); err != nil {
			return nil, err
		}
	}
	return pl, nil
}

// checkPorts checks the ports as every switch program does and indexes
// them by name.
func (pl *plan) checkPorts() error {
	p := pl.prog
	ports := make([]bfrt.Port, len(p.Ports))
	for i := range p.Ports {
		ports[i] = p.Ports[i].spec()
	}
	if err := bfrt.CheckPorts(ErrProgram, ports, nil); err != nil {
		return err
	}
	for i := range p.Ports {
		pl.ports[p.Ports[i].Name] = &p.Ports[i]
	}
	return nil
}

// checkDumpers checks the dumper pool: one entry per port, weights that
// fit the round-robin table.
func (pl *plan) checkDumpers() error {
	total := 0
	for i, d := range pl.prog.Dumpers {
		f := fmt.Sprintf("dumpers[%d]", i)
		if _, ok := pl.ports[d.Port]; !ok {
			return bad(f+".port", "%q is not in ports", d.Port)
		}
		if _, dup := pl.dumper[d.Port]; dup {
			return bad(f+".port", "%q is a dumper twice", d.Port)
		}
		if d.Weight < 0 {
			return bad(f+".weight", "%d: weights are positive", d.Weight)
		}
		pl.dumper[d.Port] = i
		total += d.weight()
	}
	if total > WRRSlots {
		return bad("dumpers", "total weight %d: the round-robin table has %d slots", total, WRRSlots)
	}
	return nil
}

// checkTrafficPorts checks every port that is not a dumper: a unicast MAC,
// IPv4 addresses for proxy ARP, and all in one pipe.
func (pl *plan) checkTrafficPorts() error {
	p := pl.prog
	pipe, pipeOf := -1, ""
	for i := range p.Ports {
		pt := &p.Ports[i]
		if _, d := pl.dumper[pt.Name]; d {
			if len(pt.Addrs) > 0 {
				return bad(fmt.Sprintf("ports[%d].addrs", i), "%q is a dumper port", pt.Name)
			}
			continue
		}
		f := fmt.Sprintf("ports[%d]", i)
		if pt.MAC.IsZero() || pt.MAC.IsMulticast() {
			return bad(f+".mac", "%v: a traffic port needs a unicast MAC", pt.MAC)
		}
		seen := map[netip.Addr]bool{}
		for j, a := range pt.Addrs {
			if !a.Is4() {
				return bad(fmt.Sprintf("%s.addrs[%d]", f, j), "%v: only IPv4 addresses are answered (ARP)", a)
			}
			if seen[a] {
				return bad(fmt.Sprintf("%s.addrs[%d]", f, j), "%v listed twice", a)
			}
			seen[a] = true
		}
		// Registers are per pipe: one mirror sequence needs the traffic
		// in one pipe. Front-panel ports are resolved on the switch only.
		if pt.FrontPanel == "" {
			if pipe >= 0 && pt.DevPort>>7 != pipe {
				return bad(f+".dev_port", "%d is in pipe %d but traffic port %q is in pipe %d: the mirror sequence and ITER registers are per pipe",
					pt.DevPort, pt.DevPort>>7, pipeOf, pipe)
			}
			pipe, pipeOf = pt.DevPort>>7, pt.Name
		}
	}
	return nil
}

// checkRoutes checks the routes (one per prefix, to a traffic port and a
// unicast next hop) and that they and the proxy ARP entries they make fit
// the tables.
func (pl *plan) checkRoutes() error {
	n4, n6 := 0, 0
	prefixes := map[netip.Prefix]int{}
	for i, r := range pl.prog.Routes {
		f := fmt.Sprintf("routes[%d]", i)
		if !r.Prefix.IsValid() || r.Prefix.Addr().Is4In6() || r.Prefix.Addr().Zone() != "" {
			return bad(f+".prefix", "%v is not an IPv4 or IPv6 prefix", r.Prefix)
		}
		if r.Prefix != r.Prefix.Masked() {
			return bad(f+".prefix", "%v has host bits set (%v)", r.Prefix, r.Prefix.Masked())
		}
		if j, dup := prefixes[r.Prefix]; dup {
			return bad(f+".prefix", "%v is routed by routes[%d] too", r.Prefix, j)
		}
		prefixes[r.Prefix] = i
		if _, ok := pl.ports[r.Port]; !ok {
			return bad(f+".port", "%q is not in ports", r.Port)
		}
		if _, d := pl.dumper[r.Port]; d {
			return bad(f+".port", "%q is a dumper port", r.Port)
		}
		if r.MAC.IsZero() || r.MAC.IsMulticast() {
			return bad(f+".mac", "%v: the next hop needs a unicast MAC", r.MAC)
		}
		if r.Prefix.Addr().Is4() {
			n4++
		} else {
			n6++
		}
	}
	if n4 > FwdSize || n6 > FwdSize {
		return bad("routes", "%d IPv4 and %d IPv6 routes: the tables hold %d each", n4, n6, FwdSize)
	}
	if n := len(pl.arpEntries()); n > ARPSize {
		return bad("routes", "%d proxy ARP entries (traffic ports x IPv4 routes + addresses): the table holds %d", n, ARPSize)
	}
	return nil
}

// checkMirror checks how copies are mirrored (their UDP port and snap
// length) and the ITER register's mode.
func (pl *plan) checkMirror() error {
	p := pl.prog
	if p.RewritePort == roce.UDPPort {
		return bad("rewrite_port", "%d is RoCEv2's own port", p.RewritePort)
	}
	if p.MirrorSnap != 0 && (p.MirrorSnap < MinMirrorLen || p.MirrorSnap > MaxMirrorLen) {
		return bad("mirror_snap", "%d: 0 (whole packets) or %d to %d bytes", p.MirrorSnap, MinMirrorLen, MaxMirrorLen)
	}
	if p.IterMode != intent.IterPaper && p.IterMode != intent.IterP4 {
		return bad("iter_mode", "%d: paper or p4", p.IterMode)
	}
	return nil
}

// checkConns checks the connections' metadata and that no two share a
// data direction, which the connection table matches on.
func (pl *plan) checkConns() error {
	p := pl.prog
	if len(p.Conns) > 0 || len(p.Entries) > 0 {
		if err := p.Geometry.Validate(); err != nil {
			return bad("geometry", "%v", err)
		}
		if p.Options.SendConns < 0 || p.Options.SendConns > len(p.Conns) {
			return bad("options.send_conns", "%d of %d connections", p.Options.SendConns, len(p.Conns))
		}
	}
	if len(p.Conns) > ConnSlots {
		return bad("conns", "%d connections: the registers hold %d", len(p.Conns), ConnSlots)
	}
	for i, c := range p.Conns {
		f := fmt.Sprintf("conns[%d]", i)
		if err := checkConn(f, c); err != nil {
			return err
		}
		k := dataKey(i, c, p.Geometry, p.Options)
		if j, dup := pl.conns[k]; dup {
			return bad(f, "its data direction %v -> %v qpn %#x is that of conns[%d] too",
				addr(k.Src), addr(k.Dst), k.DstQPN, j)
		}
		pl.conns[k] = i
		pl.connKey = append(pl.connKey, k)
	}
	return nil
}

// checkConn checks one connection's addresses, QPNs and initial PSNs.
func checkConn(f string, c intent.Conn) error {
	switch {
	case !c.RequesterIP.IsValid() || c.RequesterIP.Zone() != "":
		return bad(f+".requester_ip", "%v is not an address", c.RequesterIP)
	case !c.ResponderIP.IsValid() || c.ResponderIP.Zone() != "":
		return bad(f+".responder_ip", "%v is not an address", c.ResponderIP)
	case c.RequesterIP.Unmap().Is4() != c.ResponderIP.Unmap().Is4():
		return bad(f+".responder_ip", "%v and requester %v are of different families", c.ResponderIP, c.RequesterIP)
	case c.RequesterQPN > roce.QPNMask:
		return bad(f+".requester_qpn", "%#x is not a 24-bit QPN", c.RequesterQPN)
	case c.ResponderQPN > roce.QPNMask:
		return bad(f+".responder_qpn", "%#x is not a 24-bit QPN", c.ResponderQPN)
	case c.RequesterIPSN > roce.PSNMask:
		return bad(f+".requester_ipsn", "%#x is not a 24-bit PSN", c.RequesterIPSN)
	case c.ResponderIPSN > roce.PSNMask:
		return bad(f+".responder_ipsn", "%#x is not a 24-bit PSN", c.ResponderIPSN)
	}
	return nil
}

// checkEntries checks the compiled event entries: an event the injector
// makes, a round from 1, the data direction of a connection, one entry per
// key, and as many as event_psn and event_any hold.
func (pl *plan) checkEntries() error {
	withPSN, anyPSN := 0, 0
	keys := map[intent.Key]int{}
	for i, e := range pl.prog.Entries {
		f := fmt.Sprintf("entries[%d]", i)
		switch e.Event {
		case mirror.EventDrop, mirror.EventECN, mirror.EventBitError:
		default:
			return bad(f+".event", "%v: drop, ecn or bit-error", e.Event)
		}
		if e.Key.Iter < 1 {
			return bad(f+".key.iter", "%d: rounds count from 1", e.Key.Iter)
		}
		if e.Key.PSN == intent.AnyPSN {
			anyPSN++
		} else if e.Key.PSN > roce.PSNMask {
			return bad(f+".key.psn", "%#x is not a 24-bit PSN", e.Key.PSN)
		} else {
			withPSN++
		}
		if _, ok := pl.conns[connKey{Src: e.Key.Src, Dst: e.Key.Dst, DstQPN: e.Key.DstQPN}]; !ok {
			return bad(f+".key", "%v -> %v qpn %#x is the data direction of no connection in conns",
				addr(e.Key.Src), addr(e.Key.Dst), e.Key.DstQPN)
		}
		if j, dup := keys[e.Key]; dup {
			return bad(f+".key", "the same key as entries[%d]", j)
		}
		keys[e.Key] = i
	}
	if withPSN > EventPSNSize {
		return bad("entries", "%d entries with a PSN: event_psn holds %d", withPSN, EventPSNSize)
	}
	if anyPSN > EventAnySize {
		return bad("entries", "%d psn: all entries: event_any holds %d", anyPSN, EventAnySize)
	}
	return nil
}

func addr(b [16]byte) netip.Addr { return netip.AddrFrom16(b).Unmap() }

// initPSN is the conn_psn register's initial value for a connection whose
// PSNs start at ipsn: the paper's last PSN = IPSN - 1, or the public P4's
// expected PSN = IPSN, shifted left by 8 as injector.p4 keeps them.
func initPSN(mode intent.IterMode, ipsn uint32) uint32 {
	if mode == intent.IterP4 {
		return (ipsn & roce.PSNMask) << 8
	}
	return ((ipsn - 1) & roce.PSNMask) << 8
}

// wrrSlots is the round-robin cycle: slot -> dumper index, the sequence
// inject.WRR produces over one cycle of the total weight.
func (p *Program) wrrSlots() []int {
	if len(p.Dumpers) == 0 {
		return nil
	}
	w := make([]int, len(p.Dumpers))
	total := 0
	for i, d := range p.Dumpers {
		w[i] = d.weight()
		total += w[i]
	}
	rr, err := mirror.NewWRR(w)
	if err != nil {
		panic(err) // weights are positive after validation
	}
	slots := make([]int, total)
	for i := range slots {
		slots[i] = rr.Next()
	}
	return slots
}
