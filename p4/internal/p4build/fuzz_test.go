package p4build

import (
	"strings"
	"testing"
)

// FuzzParseSummary: check.sh's summary line (the compiler's word) gives
// resources or an error naming p4build, never a panic; no count is
// negative.
func FuzzParseSummary(f *testing.F) {
	f.Add("check.sh: OK injector.p4 (tofino/tna, 6s): stages 8/12 (ingress 8, egress 2), tables 42, PHV normal 70/224 " +
		"(8b 21/64, 16b 24/96, 32b 25/64), T-PHV 33/112 (8b 9/32, 16b 12/48, 32b 12/32), SRAM 95/960, TCAM 12/288, 2 warnings")
	f.Add("check.sh: REJECTED x.p4 (tofino/tna, p4c-barefoot exit 3)")
	f.Add("stages 99999999999999999999/20")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseSummary(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "p4build: ") {
				t.Fatalf("error names not p4build: %v", err)
			}
			return
		}
		if r.Stages < 0 || r.MaxStages < 0 || r.Ingress < 0 || r.Egress < 0 || r.Tables < 0 || r.SRAM < 0 || r.TCAM < 0 {
			t.Fatalf("a negative count: %+v", r)
		}
		for _, p := range r.PHV {
			if p.Used < 0 || p.Total < 0 {
				t.Fatalf("PHV %+v", p)
			}
		}
	})
}
