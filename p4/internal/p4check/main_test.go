package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/p4/internal/p4build"
)

func TestReplaceBlock(t *testing.T) {
	src := "# t\n\n" + BeginMark + "\nold\n" + EndMark + "\ntail\n"
	got, err := ReplaceBlock([]byte(src), "new\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := "# t\n\n" + BeginMark + "\nnew\n" + EndMark + "\ntail\n"; string(got) != want {
		t.Errorf("%q\nwant %q", got, want)
	}
	if _, err := ReplaceBlock([]byte("no markers"), "x"); err == nil {
		t.Error("no error without markers")
	}
}

func TestTable(t *testing.T) {
	progs := []p4build.Program{{Path: "p4/x/x.p4", Variants: []p4build.Variant{{Targets: []int{1}}, {Flags: []string{"-DI"}, Targets: []int{1}, NoFit: []int{1}}}}}
	res := map[BuildKey]p4build.Result{
		{"p4/x/x.p4", "default", 1}: {Fits: true, Summary: "check.sh: OK x.p4 (tofino/tna, 6s): stages 8/12 (ingress 8, egress 2), tables 42, " +
			"PHV normal 70/224 (8b 21/64), T-PHV 33/112 (8b 9/32), SRAM 95/960, TCAM 12/288"},
		{"p4/x/x.p4", "-DI", 1}: {Summary: "check.sh: REJECTED x.p4 (tofino/tna): does not fit: table placement needs 18 MAU stages, " +
			"tofino has 12; stages 18/12 (ingress 11, egress 18), tables 100"},
	}
	set := TestSet{Parts: map[string]*SetPart{"STF": {Tests: 10, Outputs: 4, Coverage: 0.6}, "PTF": {Tests: 12, Outputs: 5, Coverage: 0.8}},
		StatementsLo: 100, StatementsHi: 100, Neither: make([]string, 9)}
	all := TestSet{Parts: map[string]*SetPart{"STF": {Tests: 10, Outputs: 4, Coverage: 1}, "PTF": {Tests: 12, Outputs: 5, Coverage: 1}},
		StatementsHi: math.MaxInt}
	progs = append(progs, p4build.Program{Path: "p4/y/y.p4", Variants: []p4build.Variant{{Targets: []int{1}}}})
	res[BuildKey{"p4/y/y.p4", "default", 1}] = res[BuildKey{"p4/x/x.p4", "default", 1}]
	got := Table(progs, res, map[string]TestSet{"p4/x/x.p4": set, "p4/y/y.p4": all})
	for _, want := range []string{
		"| `x/x.p4` | default | Tofino 1 | 8/12 (8, 2) | 4 | 42 | normal 70/224, T-PHV 33/112 | 95/960 | 12/288 |",
		"| `x/x.p4` | -DI | Tofino 1 | does not fit: 18/12 (11, 18) | none | 100 | | | |",
		"| `x/x.p4` | 10 (4) | 12 (5) | 100 | 60% | 80% | 91% |",
		"| `y/y.p4` | 10 (4) | 12 (5) | not counted | 100% | 100% | 100% |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in\n%s", want, got)
		}
	}
}

// TestREADME renders README.md's table again from the committed compiler
// verdicts and test sets, so a stale table fails here too, where the
// tools are not (p4check compares the verdicts with the compiler's where
// they are).
func TestREADME(t *testing.T) {
	if err := os.Chdir("../../.."); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir("p4/internal/p4check")
	progs, err := p4build.Programs(".")
	if err != nil {
		t.Fatal(err)
	}
	results, err := LoadResults(ResultsFile)
	if err != nil {
		t.Fatal(err)
	}
	sets := map[string]TestSet{}
	for _, p := range progs {
		s, err := ReadSet(SetDir(p), p.Name())
		if err != nil {
			t.Fatal(err)
		}
		sets[p.Path] = s
		want, err := stamp(p)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(filepath.Join(SetDir(p), "STAMP")); string(got) != want {
			t.Errorf("%s: its p4testgen tests are stale: run make p4check", p.Path)
		}
	}
	src, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReplaceBlock(src, Table(progs, results, sets))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, src) {
		t.Error("README.md's resource table is stale: run make p4check")
	}
}
