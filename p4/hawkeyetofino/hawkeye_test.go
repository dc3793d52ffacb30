package hawkeyetofino

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/p4/internal/p4test"
)

const prog = "telemetry.p4"

// leaf is a leaf switch: two hosts, two spines.
func leaf(t testing.TB) Program {
	return Program{
		Ports: []Port{
			{Name: "h0", DevPort: 0, Speed: "100G", FEC: "rs", MAC: p4test.MAC(t, "02:00:00:00:01:00"), Host: true},
			{Name: "h1", DevPort: 4, Speed: "100G", FEC: "rs", MAC: p4test.MAC(t, "02:00:00:00:01:01"), Host: true},
			{Name: "spine0", DevPort: 8, Speed: "100G", FEC: "rs", MAC: p4test.MAC(t, "02:00:00:00:01:02")},
			{Name: "spine1", FrontPanel: "3/0", Speed: "25G", FEC: "none", MAC: p4test.MAC(t, "02:00:00:00:01:03")},
		},
		Routes: []Route{
			{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Port: "spine0", MAC: p4test.MAC(t, "0c:42:a1:00:00:01")},
			{Prefix: netip.MustParsePrefix("10.1.0.1/32"), Port: "h0", MAC: p4test.MAC(t, "0c:42:a1:00:01:01")},
			{Prefix: netip.MustParsePrefix("10.1.0.2/32"), Port: "h1", MAC: p4test.MAC(t, "0c:42:a1:00:01:02")},
		},
		CPUPort: 192,
	}
}

func TestP4FrontEnd(t *testing.T) { p4test.FrontEnd(t, prog) }

// TestNames: every table, action, key, parameter and register the script
// names is declared in telemetry.p4 and every one is named; sizes agree.
func TestNames(t *testing.T) {
	ps := p4test.Parse(t, prog)
	s, err := leaf(t).Script()
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	p4test.CheckScript(t, ps, DefaultName, "leaf.py", s, used)
	p4test.CheckCovered(t, ps, used)
	for name, want := range map[string]uint64{"PORT_SLOTS": PortSlots, "FWD_SIZE": FwdSize, "FLOW_REGS": FlowRegs,
		"PORT_REGS": PortRegs, "METER_REGS": MeterRegs, "PAIR_SLOTS": PairSlots, "SEEN_SLOTS": SeenSlots} {
		if ps.Consts[name] != want {
			t.Errorf("%s = %d in the P4, %d in Go", name, ps.Consts[name], want)
		}
	}
	if ps.Registers["Egress.flow_pkts"] != FlowRegs || ps.Registers["Egress.pair_bytes"] != MeterRegs {
		t.Errorf("register sizes %v", ps.Registers)
	}
}

// TestNamesInCompiledProgram checks the script's names against what
// bf-p4c compiled telemetry.p4 into (its bfrt.json): the names the
// switch's bfrt_python will know.
func TestNamesInCompiledProgram(t *testing.T) {
	ps := p4test.Compiled(t, prog)
	s, err := leaf(t).Script()
	if err != nil {
		t.Fatal(err)
	}
	p4test.CheckScript(t, ps, DefaultName, "leaf.py", s, map[string]bool{})
}

// TestScriptRuns: the script runs against a mock bfrt_python whole and
// line by line, with a PFC-trace group for each port holding the
// switch-facing others.
func TestScriptRuns(t *testing.T) {
	s, err := leaf(t).Script()
	if err != nil {
		t.Fatal(err)
	}
	p4test.Golden(t, "leaf.py", s)
	for _, mode := range []string{"file", "interactive"} {
		out := p4test.RunBfrt(t, "def counter_data(t, i):\n    return {}\n\ndef register_values(r, i):\n    return [0]", mode, s)
		if !strings.Contains(out, "hawkeye: telemetry loaded: 4 ports, 3 routes") {
			t.Fatalf("%s: not finished:\n%s", mode, out)
		}
		// One per port: the hosts' hold both spines (a poll from a
		// paused NIC), a spine's the other spine.
		if n := strings.Count(out, "CALL bfrt.pre.mgid.add"); n != 4 {
			t.Errorf("%s: %d groups, want 4 (one per port)", mode, n)
		}
		if n := strings.Count(out, "victim_route.add_with_victim_port"); n != 3 {
			t.Errorf("%s: %d victim routes", mode, n)
		}
	}
}

func TestValidate(t *testing.T) {
	for field, mut := range map[string]func(*Program){
		"name":             func(p *Program) { p.Name = "1bad" },
		"ports":            func(p *Program) { p.Ports = nil },
		"ports[1].name":    func(p *Program) { p.Ports[1].Name = "h0" },
		"cpu_port":         func(p *Program) { p.CPUPort = 9999 },
		"cpu_port:":        func(p *Program) { p.CPUPort = 8 }, // spine0's
		"routes[0].prefix": func(p *Program) { p.Routes[0].Prefix = netip.MustParsePrefix("10.0.0.1/8") },
		"routes[2].prefix": func(p *Program) { p.Routes[2].Prefix = p.Routes[1].Prefix },
		"routes[1].port":   func(p *Program) { p.Routes[1].Port = "nope" },
	} {
		p := leaf(t)
		mut(&p)
		_, err := p.Script()
		p4test.ExpectBad(t, ErrProgram, field, err)
	}
}
