package lab

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk/netns"
)

// TestNetnsStages: with Netns the lumina, dta and dta-flow stages run their packet
// paths over veth pairs between network namespaces and check the same
// figures as in-process; the namespaces are gone afterwards. Needs root.
func TestNetnsStages(t *testing.T) {
	if err := netns.Available(); err != nil {
		t.Skip(err)
	}
	s, err := LoadSpec("")
	if err != nil {
		t.Fatal(err)
	}
	s.Wire.Enabled, s.Verbs.Enabled, s.LuminaTests.Enabled, s.Fabric.Enabled, s.Hawkeye.Enabled, s.Tuning.Enabled, s.Hostmesh.Enabled = false, false, false, false, false, false, false
	s.Lumina.BalanceRounds = 0
	s.DTA.Reports = 3000
	l := &Lab{Spec: s, OutDir: t.TempDir(), Netns: true}
	rep, err := l.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	rep.WriteSummary(&b)
	if !rep.Pass() || len(rep.Rows) != 3 {
		t.Fatalf("lab --netns:\n%s", b.String())
	}
	for _, r := range rep.Rows {
		if !strings.Contains(r.Ran, "network namespace") {
			t.Errorf("%s does not say it ran across namespaces: %s", r.System, r.Ran)
		}
	}
	lum, dta := rep.Rows[0].Figures, rep.Rows[1].Figures
	if lum["integrity"] != "ok" || lum["events"] != "drop:1,ecn:2,bit-error:1" || dta["append"] == "" || dta["append"] == "0" {
		t.Fatalf("figures:\n%s", b.String())
	}
	names, _ := os.ReadDir("/run/netns")
	for _, e := range names {
		for _, pre := range []string{"labA", "labB"} {
			if strings.HasPrefix(e.Name(), pre+strconv.Itoa(os.Getpid())) {
				t.Errorf("namespace %s left behind", e.Name())
			}
		}
	}
}
