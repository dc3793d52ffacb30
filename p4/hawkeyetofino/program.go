// Package hawkeyetofino is the control plane of p4/hawkeyetofino/telemetry.p4, Hawkeye's
// telemetry and polling logic for Tofino: it validates a switch's ports and
// routes and writes the bfrt_python script that loads them (port indexes and
// pause quanta, routes and the victim route, the PFC-trace multicast group
// of every port, whose members are the switch-facing ports, the CPU's port,
// the eviction mirror session to the CPU, registers cleared); and it is the
// switch CPU's side (CPU): the poll copies and evicted flows the data plane
// sends the CPU's port, the registers read through bfrt (ReadScript,
// ParseRegisters) into the report bench/hawkeyesim's CPU pollers build, the
// re-trace and the quiet rule. bench/hawkeyesim runs the same logic in the
// fabric simulator; P4Testgen's tests of the program
// (testdata/p4testgen/telemetry) are replayed there, against
// hawkeyesim.Switch (TestSTFTelemetry), and the CPU runs there against the
// Switch's registers (TestTofinoCPU): the floors keep the harness out of
// this package's tests.
package hawkeyetofino

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/p4/internal/bfrt"
)

// DefaultName is the program's name in bfrt.
const DefaultName = "telemetry"

// Sizes of the P4 program (its constants of the same names); a test checks
// they agree.
const (
	PortSlots = 64    // PORT_SLOTS: ports with a local index
	FwdSize   = 1024  // FWD_SIZE: routes (and victim routes)
	FlowRegs  = 16384 // FLOW_REGS: 4 epochs x 4096 flow slots
	PortRegs  = 256   // PORT_REGS: 4 epochs x 64 ports
	MeterRegs = 16384 // METER_REGS: 4 epochs x 64 x 64 port pairs
	PairSlots = 4096  // PAIR_SLOTS: port pairs
	SeenSlots = 4096  // SEEN_SLOTS: polling events (event id and victim hashed), per type
	// EvictSession is the mirror session evicted flows go to the CPU by.
	EvictSession = 1
)

// ErrProgram is wrapped by every validation error.
var ErrProgram = errors.New("hawkeye: bad program")

// Port is a switch port.
type Port struct {
	Name       string     `json:"name"`
	FrontPanel string     `json:"front_panel,omitempty"`
	DevPort    int        `json:"dev_port,omitempty"`
	Speed      string     `json:"speed"`
	FEC        string     `json:"fec"`
	AutoNeg    string     `json:"autoneg,omitempty"`
	MAC        header.MAC `json:"mac"`
	// Host says the port faces a host: traces end there and it is in no
	// PFC-trace group (its own group traces a poll from a paused NIC).
	Host bool `json:"host,omitempty"`
}

// Route sends packets for Prefix out of Port to next-hop MAC.
type Route struct {
	Prefix netip.Prefix `json:"prefix"`
	Port   string       `json:"port"`
	MAC    header.MAC   `json:"mac"`
}

// Program is one switch's configuration.
type Program struct {
	// Name is the program's bfrt name (DefaultName when empty).
	Name   string  `json:"name,omitempty"`
	Ports  []Port  `json:"ports"`
	Routes []Route `json:"routes"`
	// CPUPort is the dev port of the switch CPU (192 on a Tofino 1
	// 32-port model's PCIe port): evicted flows are mirrored to it.
	CPUPort int `json:"cpu_port"`
}

// quantumShift is log2 of a PFC quantum (512 bit times) in ns at a speed,
// rounded up: the P4 turns quanta into ns with this shift.
var quantumShift = map[string]int{"1G": 9, "10G": 6, "25G": 5, "40G": 4, "50G": 4, "100G": 3}

func (p Program) bfrtPorts() []bfrt.Port {
	out := make([]bfrt.Port, len(p.Ports))
	for i, pt := range p.Ports {
		out[i] = bfrt.Port{Name: pt.Name, FrontPanel: pt.FrontPanel, DevPort: pt.DevPort, Speed: pt.Speed, FEC: pt.FEC,
			AutoNeg: pt.AutoNeg, MAC: pt.MAC}
	}
	return out
}

// Validate checks the program; errors wrap ErrProgram and name the field.
func (p Program) Validate() error {
	if p.Name != "" && !bfrt.IsIdentifier(p.Name) {
		return bfrt.Bad(ErrProgram, "name", "%q is not a P4 identifier", p.Name)
	}
	if len(p.Ports) > PortSlots {
		return bfrt.Bad(ErrProgram, "ports", "%d ports, at most %d", len(p.Ports), PortSlots)
	}
	if err := bfrt.CheckPorts(ErrProgram, p.bfrtPorts(), nil); err != nil {
		return err
	}
	if p.CPUPort < 0 || p.CPUPort >= bfrt.DevPorts {
		return bfrt.Bad(ErrProgram, "cpu_port", "%d is not a dev port", p.CPUPort)
	}
	for i, pt := range p.Ports {
		if pt.FrontPanel == "" && pt.DevPort == p.CPUPort {
			return bfrt.Bad(ErrProgram, "cpu_port", "%d is ports[%d] (%s): the CPU's port is none of the program's", p.CPUPort, i, pt.Name)
		}
	}
	if len(p.Routes) > FwdSize {
		return bfrt.Bad(ErrProgram, "routes", "%d routes, at most %d", len(p.Routes), FwdSize)
	}
	names := map[string]bool{}
	for _, pt := range p.Ports {
		names[pt.Name] = true
	}
	seen := map[netip.Prefix]bool{}
	for i, r := range p.Routes {
		f := fmt.Sprintf("routes[%d]", i)
		if !r.Prefix.IsValid() || !r.Prefix.Addr().Is4() || r.Prefix != r.Prefix.Masked() {
			return bfrt.Bad(ErrProgram, f+".prefix", "%v: an IPv4 prefix without host bits", r.Prefix)
		}
		if seen[r.Prefix] {
			return bfrt.Bad(ErrProgram, f+".prefix", "%v routed twice", r.Prefix)
		}
		seen[r.Prefix] = true
		if !names[r.Port] {
			return bfrt.Bad(ErrProgram, f+".port", "%q is no port", r.Port)
		}
	}
	return nil
}

var origin = bfrt.Origin{Program: "Hawkeye telemetry", Source: "p4/hawkeyetofino/telemetry.p4", Package: "p4/hawkeyetofino"}

// What the script clears, so a load leaves nothing of the previous one.
var clearNames = map[string][]string{
	bfrt.Ingress: {"ipv4_fwd", "victim_route", "pfc_mcast", "from_cpu", "seen_flow", "seen_pfc", "polls"},
	bfrt.Egress: {"port_info", "in_port_info", "pause_until", "flow_epoch", "flow_src", "flow_dst", "flow_ports",
		"flow_pkts", "flow_qdepth", "flow_paused", "flow_hop", "port_epoch", "port_pkts", "port_qdepth", "port_paused",
		"port_pfc_frames", "pair_bytes", "pair_epoch", "pair_seen", "port_last_pause", "polls_sent", "evictions"},
}

// Script is the bfrt_python setup script (bfshell -b).
func (p Program) Script() (string, error) {
	if err := p.Validate(); err != nil {
		return "", err
	}
	name := bfrt.ProgName(p.Name, DefaultName)
	s := bfrt.New(name)
	ports := p.bfrtPorts()
	var sw []Port
	for _, pt := range p.Ports {
		if !pt.Host {
			sw = append(sw, pt)
		}
	}
	s.SetupHeader(origin, "Program.Script")
	s.Comment("")
	s.Comment("%s (%d facing switches), %s.", bfrt.Plural(len(p.Ports), "port"), len(sw), bfrt.Plural(len(p.Routes), "route"))
	s.Blank()
	s.Prelude(ports, bfrt.PyIPHelpers, bfrt.PyFrontPanel, bfrt.PyQuietly)
	s.Comment("Clear what a previous load left: tables, registers, counters.")
	s.Clear(s.Ig, clearNames[bfrt.Ingress]...)
	s.Clear(s.Eg, clearNames[bfrt.Egress]...)
	s.Blank()
	s.PortSetup(ports)

	s.Routes(bfrtRoutes(p.Routes), func(port string) header.MAC {
		for _, pt := range p.Ports {
			if pt.Name == port {
				return pt.MAC
			}
		}
		return header.MAC{}
	})
	s.Comment("Victim routes: a flow trace leaves by the port the victim's destination is routed through.")
	for _, r := range sortedRoutes(p.Routes) {
		s.Line("%s.victim_route.add_with_victim_port(dst_addr=%s, dst_addr_p_length=%d, port=%s)",
			s.Ig, bfrt.PyIP(r.Prefix.Addr()), r.Prefix.Bits(), bfrt.PortVar(r.Port))
	}
	s.Blank()

	s.Comment("Ports: local index (per-port and port-pair registers), host-facing, pause quantum as 2^shift ns.")
	for i, pt := range p.Ports {
		host := 0
		if pt.Host {
			host = 1
		}
		v := bfrt.PortVar(pt.Name)
		s.Line("%s.port_info.add_with_set_port(egress_port=%s, idx=%d, to_host=%d, quantum_shift=%d)", s.Eg, v, i, host,
			quantumShift[strings.ToUpper(pt.Speed)])
		s.Line("%s.in_port_info.add_with_in_index(ingress_port=%s, idx=%d)", s.Eg, v, i)
	}
	s.Blank()

	s.Comment("PFC trace: per ingress port, a group of every other switch-facing port (rid 1); egress keeps the")
	s.Comment("copies on paused ports that had traffic from that ingress. Host ports have one too: a host whose NIC")
	s.Comment("this switch paused sends its polls with the PFC bit, and the trace starts here.")
	for i, in := range p.Ports {
		g := i + 1
		var devs []string
		for _, o := range sw {
			if o.Name != in.Name {
				devs = append(devs, bfrt.PortVar(o.Name))
			}
		}
		s.Line("quietly(bfrt.pre.mgid.delete, MGID=%d)", g)
		s.Line("quietly(bfrt.pre.node.delete, MULTICAST_NODE_ID=%d)", g)
		s.Line("bfrt.pre.node.add(MULTICAST_NODE_ID=%d, MULTICAST_RID=1, MULTICAST_LAG_ID=[], DEV_PORT=[%s])", g, strings.Join(devs, ", "))
		s.Line("bfrt.pre.mgid.add(MGID=%d, MULTICAST_NODE_ID=[%d], MULTICAST_NODE_L1_XID_VALID=[False], MULTICAST_NODE_L1_XID=[0])", g, g)
		s.Line("%s.pfc_mcast.add_with_pfc_group(ingress_port=%s, mgid=%d)", s.Ig, bfrt.PortVar(in.Name), g)
	}
	s.Blank()

	s.Comment("The switch CPU's port: polling copies reach it with the bridged header (ingress port, time), and what")
	s.Comment("the CPU sends in through it is its re-trace, out of the port the polling header names.")
	s.Line("%s.port_info.add_with_cpu_port(egress_port=%d)", s.Eg, p.CPUPort)
	s.Line("%s.from_cpu.add_with_cpu_send(ingress_port=%d)", s.Ig, p.CPUPort)
	s.Blank()
	s.Comment("Evicted flows: mirrored to the CPU port (their old key and counters in the mirror header).")
	s.MirrorSession(EvictSession, "EGRESS", fmt.Sprint(p.CPUPort), 64)
	s.Blank()
	s.Line("print('hawkeye: %s loaded: %s, %s')", name, bfrt.Plural(len(p.Ports), "port"), bfrt.Plural(len(p.Routes), "route"))
	return s.String(), nil
}

func bfrtRoutes(rs []Route) []bfrt.Route {
	out := make([]bfrt.Route, len(rs))
	for i, r := range rs {
		out[i] = bfrt.Route{Prefix: r.Prefix, Port: r.Port, MAC: r.MAC}
	}
	return out
}

func sortedRoutes(rs []Route) []Route {
	out := slices.Clone(rs)
	slices.SortFunc(out, func(a, b Route) int { return bfrt.ComparePrefix(a.Prefix, b.Prefix) })
	return out
}
