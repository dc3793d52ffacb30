package p4test

import (
	"strings"
	"testing"
)

// TestFromBfrt: a few tables of telemetry.p4's bfrt.json (testdata, as
// bf-p4c wrote them) read as a Source, and scripts checked against it.
func TestFromBfrt(t *testing.T) {
	ps, err := FromBfrt("testdata/bfrt_small.json")
	if err != nil {
		t.Fatal(err)
	}
	if tab := ps.Tables["Ingress.ipv4_fwd"]; tab == nil || len(tab.Keys) != 1 || tab.Keys[0] != (Key{"dst_addr", "lpm"}) ||
		tab.Size != 1024 || strings.Join(tab.Actions, ",") != "forward,discard" {
		t.Errorf("ipv4_fwd: %+v", tab)
	}
	if p := ps.Actions["Egress.set_port"]; strings.Join(p, ",") != "idx,to_host,quantum_shift" {
		t.Errorf("set_port parameters %v", p)
	}
	if _, ok := ps.Registers["Egress.pause_until"]; !ok {
		t.Error("no register pause_until")
	}
	if _, ok := ps.Counters["Ingress.polls"]; !ok {
		t.Error("no counter polls")
	}
	if _, ok := ps.Tables["snapshot.cfg"]; ok {
		t.Error("a non-pipe table read as the program's")
	}
	for script, want := range map[string]string{
		"bfrt.t.pipe.Ingress.victim_route.add_with_victim_port(dst_addr=1, dst_addr_p_length=8, port=p)\n" +
			"bfrt.t.pipe.Egress.pause_until.mod(REGISTER_INDEX=0, f1=0)\nbfrt.t.pipe.Ingress.polls.clear()": "",
		"bfrt.t.pipe.Ingress.victim_route.add_with_victim_port(dst_addr=1, dst_addr_p_length=8, egress_port=p)": "takes",
		"bfrt.t.pipe.Egress.port_info.add_with_set_port(egress_port=1, idx=0, to_host=0, shift=3)":              "takes",
		"bfrt.t.pipe.Egress.flow_src.clear()": "no table, register, counter or meter",
	} {
		r := &recorder{TB: t}
		CheckScript(r, ps, "t", "s.py", script, map[string]bool{})
		got := strings.Join(r.errs, "\n")
		if want == "" && got != "" || !strings.Contains(got, want) {
			t.Errorf("%s:\n%s\nwant %q", script, got, want)
		}
	}
}
