package p4test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testP4 = `
const bit<32> SIZE = 64;
control Ingress(inout headers_t hdr) {
    action set(bit<9> port) { }
    table fwd {
        key = { hdr.ipv4.dst_addr : lpm; hdr.ipv4.protocol : ternary @name("proto"); }
        actions = { set; NoAction; }
        size = SIZE;
    }
    Register<bit<32>, bit<8>>(SIZE, 0) seq;
    Meter<bit<8>>(SIZE, MeterType_t.PACKETS) rate;
    apply { }
}
`

// recorder keeps the errors a check reports instead of failing the test.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, a ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, a...))
}

// TestCheckScript: a script's calls are checked against the source by
// table, action, key (with the lpm and ternary extras) and parameter,
// and a meter's entry by its type's data fields.
func TestCheckScript(t *testing.T) {
	path := filepath.Join(t.TempDir(), "test.p4")
	if err := os.WriteFile(path, []byte(testP4), 0o644); err != nil {
		t.Fatal(err)
	}
	ps := Parse(t, path)
	if tab := ps.Tables["Ingress.fwd"]; tab == nil || tab.Size != 64 || len(tab.Keys) != 2 || tab.Keys[1].Name != "proto" {
		t.Fatalf("fwd: %+v", tab)
	}
	for script, want := range map[string]string{
		"bfrt.p.pipe.Ingress.fwd.add_with_set(dst_addr=1, dst_addr_p_length=8, proto=6, proto_mask=0xff, MATCH_PRIORITY=0, port=p)\n" +
			"bfrt.p.pipe.Ingress.seq.mod(REGISTER_INDEX=0, f1=0)\n" +
			"bfrt.p.pipe.Ingress.rate.mod(METER_INDEX=0, METER_SPEC_CIR_PPS=1, METER_SPEC_PIR_PPS=1, METER_SPEC_CBS_PKTS=1, METER_SPEC_PBS_PKTS=1)": "",
		// A packet meter's rates are in packets, not kilobits.
		"bfrt.p.pipe.Ingress.rate.mod(METER_INDEX=0, METER_SPEC_CIR_KBPS=1, METER_SPEC_PIR_KBPS=1, METER_SPEC_CBS_KBITS=1, METER_SPEC_PBS_KBITS=1)": "takes",
		"bfrt.p.pipe.Ingress.seq.mod(REGISTER_INDEX=0, f1=0)":                                                     "meter Ingress.rate is named by no script",
		"bfrt.p.pipe.Ingress.fwd.add_with_set(dst_addr=1, dst_addr_p_length=8, proto=6, proto_mask=0xff, port=p)": "takes",
		"bfrt.p.pipe.Ingress.fwd.add_with_drop(dst_addr=1)":                                                       "has no action drop",
		"bfrt.p.pipe.Ingress.nope.clear()":                                                                        "no table, register, counter or meter",
		"bfrt.q.pipe.Ingress.seq.clear()":                                                                         `program "q"`,
		"bfrt.p.pipe.Ingress.seq.mod(0, f1=0)":                                                                    "positional",
	} {
		r := &recorder{TB: t}
		used := map[string]bool{}
		CheckScript(r, ps, "p", "s.py", script, used)
		CheckCovered(r, ps, used)
		got := strings.Join(r.errs, "\n")
		if want == "" && got != "" || !strings.Contains(got, want) {
			t.Errorf("%s:\n%s\nwant %q", script, got, want)
		}
	}
}
