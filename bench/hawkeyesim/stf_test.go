package hawkeyesim

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"testing"

	"github.com/rdma-appliance/appliance/p4/stf"
)

// TestSTFTelemetry replays P4Testgen's tests of p4/hawkeyetofino/
// telemetry.p4 (make p4check generates them) against Switch, the program
// the fabric simulator's switches run, driven by frames. The replay lives
// here rather than beside the P4 because the floors keep the harness out
// of p4/'s tests. The adapter maps the test's entries onto the Switch's
// configuration: ipv4_fwd (or, for a polling packet, victim_route: the
// Switch routes data and victims by one table, and each packet reads only
// one of the two) onto its routes; port_info and in_port_info onto its
// ports (local index, host-facing, the pause quantum 2^shift ns as the
// speed 512 bit times take that long at); from_cpu onto the Switch's CPU
// port (SetCPUPort); port_info's cpu_port leaves the port unknown to the
// Switch (it models no copy to the CPU). pfc_mcast is not mapped:
// P4Testgen follows no multicast copy, and the Switch's PFC-trace
// candidates are its switch-facing ports. Nor are the registers PTF tests
// set: the Switch's hold epochs of its own clock, and no expected packet
// reads one (forwarding does not; a polling packet goes on only as a new
// event, which hinges on the switch clock P4Testgen taints, so its
// polling tests all expect a drop; a test that ever expected a polling
// packet would fail here and need them).
func TestSTFTelemetry(t *testing.T) {
	rep := stf.Replay(t, "../../p4/hawkeyetofino/testdata/p4testgen/telemetry", telemetryModel, stf.Known{})
	if rep.Passed == 0 || rep.Passed != rep.Tests {
		t.Errorf("%d of %d tests pass against the twin: none may be skipped", rep.Passed, rep.Tests)
	}
}

// stfNow is the time a test's packet arrives: P4Testgen does not know the
// switch's clock (it taints every value derived from it).
const stfNow = 1 << 32

func telemetryModel(tc *stf.Test) ([]stf.Output, string, error) {
	poll := len(tc.In) >= 14 && tc.In[12] == 0x68 && tc.In[13] == 0x88
	ports, err := stfPorts(tc)
	if err != nil {
		return nil, "", err
	}
	table := "Ingress.ipv4_fwd"
	if poll {
		table = "Ingress.victim_route"
	}
	routes, err := stfRoutes(tc, table)
	if err != nil {
		return nil, "", err
	}
	sw, err := NewSwitch("stf", DefaultConfig(), ports, routes)
	if err != nil {
		return nil, "", err
	}
	for _, e := range tc.Adds {
		if e.Table == "Ingress.from_cpu" && e.Action == "Ingress.cpu_send" {
			dev, err := stfExact(e, "ingress_port")
			if err != nil {
				return nil, "", err
			}
			sw.SetCPUPort(dev)
		}
	}
	outs, _ := sw.Packet(stfNow, tc.InPort, tc.In, 0)
	var res []stf.Output
	for _, o := range outs {
		res = append(res, stf.Output{Port: o.Port, Frame: o.Frame})
	}
	return res, "", nil
}

// stfPorts maps port_info (egress port -> index, host, quantum shift) and
// in_port_info (ingress port -> index) onto the Switch's ports: a dev port
// either table names is a port of the Switch, in the order the test names
// them, with port_info's settings (an ingress port alone faces a switch,
// at 100G). unknown_port and NoAction leave a port unnamed: the Switch
// does not know it. The tests' index numbers are not kept: an index only
// addresses the registers, which no expected packet shows, and P4Testgen
// gives two dev ports one index where a control plane never would.
func stfPorts(tc *stf.Test) ([]SwitchPort, error) {
	var ports []SwitchPort
	at := map[int]int{} // dev port -> position
	for _, e := range tc.Adds {
		var (
			key  = "egress_port"
			port = SwitchPort{Bandwidth: 100e9}
		)
		switch {
		case e.Table == "Egress.port_info" && e.Action == "Egress.set_port":
			shift := stfParam(e, "quantum_shift")
			// 512 bit times take 2^shift ns at this speed.
			port = SwitchPort{Host: stfParam(e, "to_host") == 1, Bandwidth: 512e9 / float64(uint64(1)<<min(shift, 40))}
		case e.Table == "Egress.in_port_info" && e.Action == "Egress.in_index":
			key = "ingress_port"
		case e.Table == "Egress.port_info", e.Table == "Egress.in_port_info", e.Table == "Ingress.pfc_mcast",
			e.Table == "Ingress.ipv4_fwd", e.Table == "Ingress.victim_route", e.Table == "Ingress.from_cpu":
			continue
		default:
			return nil, fmt.Errorf("no mapping for %s %s", e.Table, e.Action)
		}
		dev, err := stfExact(e, key)
		if err != nil {
			return nil, err
		}
		port.Dev = dev
		i, ok := at[dev]
		switch {
		case !ok:
			at[dev] = len(ports)
			ports = append(ports, port)
		case key == "egress_port":
			ports[i] = port
		}
	}
	for _, e := range tc.Defaults {
		switch e.Table + " " + e.Action {
		case "Egress.port_info Egress.unknown_port", "Egress.in_port_info NoAction", "Ingress.pfc_mcast Ingress.no_pfc_group",
			"Ingress.ipv4_fwd Ingress.discard", "Ingress.victim_route Ingress.no_victim_route", "Ingress.from_cpu NoAction":
		default:
			return nil, fmt.Errorf("no mapping for the default %s %s", e.Table, e.Action)
		}
	}
	return ports, nil
}

// stfRoutes maps an LPM table's entries (forward/victim_port, discard/
// no_victim_route) onto routes.
func stfRoutes(tc *stf.Test, table string) ([]SwitchRoute, error) {
	var out []SwitchRoute
	for _, e := range tc.Adds {
		if e.Table != table {
			continue
		}
		pfx, err := stfPrefix(e)
		if err != nil {
			return nil, err
		}
		r := SwitchRoute{Prefix: pfx}
		switch e.Action {
		case "Ingress.forward":
			r.Port = stfParam(e, "port")
			putMAC(&r.DstMAC, stfParamBig(e, "dmac"))
			putMAC(&r.SrcMAC, stfParamBig(e, "smac"))
		case "Ingress.victim_port":
			r.Port = stfParam(e, "port")
		case "Ingress.discard", "Ingress.no_victim_route":
			r.Discard = true
		default:
			return nil, fmt.Errorf("no mapping for %s %s", e.Table, e.Action)
		}
		if slices.ContainsFunc(out, func(o SwitchRoute) bool { return o.Prefix == r.Prefix }) {
			return nil, fmt.Errorf("%s: %v twice", table, r.Prefix)
		}
		out = append(out, r)
	}
	return out, nil
}

func putMAC(m *[6]byte, v uint64) {
	for i := range 6 {
		m[i] = byte(v >> (8 * (5 - i)))
	}
}

// stfPrefix reads the entry's one LPM key.
func stfPrefix(e stf.Entry) (netip.Prefix, error) {
	if len(e.Keys) != 1 {
		return netip.Prefix{}, fmt.Errorf("%s: not one LPM key: %v", e.Table, e.Keys)
	}
	pfx, err := e.Keys[0].Prefix()
	if err == nil && !pfx.Addr().Is4() {
		err = fmt.Errorf("%s: %v is not an IPv4 prefix", e.Table, pfx)
	}
	return pfx, err
}

// stfExact reads an exact key named name.
func stfExact(e stf.Entry, name string) (int, error) {
	for _, k := range e.Keys {
		if k.Name == name {
			v, err := strconv.ParseUint(k.Bits, 2, 32)
			return int(v), err
		}
	}
	return 0, fmt.Errorf("%s: no key %s", e.Table, name)
}

func stfParamBig(e stf.Entry, name string) uint64 {
	for _, p := range e.Params {
		if p.Name == name {
			return p.Value.Uint64()
		}
	}
	return 0
}

func stfParam(e stf.Entry, name string) int { return int(stfParamBig(e, name)) }
