package p4build

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestParseSummary(t *testing.T) {
	ok := "check.sh: OK injector.p4 (tofino/tna, 6s): stages 8/12 (ingress 8, egress 2), tables 42, PHV normal 70/224 " +
		"(8b 21/64, 16b 24/96, 32b 25/64), T-PHV 33/112 (8b 9/32, 16b 12/48, 32b 12/32), SRAM 95/960, TCAM 12/288, 2 warnings"
	r, err := ParseSummary(ok)
	if err != nil {
		t.Fatal(err)
	}
	want := Resources{Stages: 8, MaxStages: 12, Ingress: 8, Egress: 2, Tables: 42,
		PHV: []PHVUse{{"normal", 70, 224}, {"T-PHV", 33, 112}}, SRAM: 95, SRAM2: 960, TCAM: 12, TCAM2: 288}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("%+v\nwant %+v", r, want)
	}
	t2 := "check.sh: OK injector.p4 (tofino2/tna, 7s): stages 8/20 (ingress 8, egress 3), tables 42, PHV normal 21/168 " +
		"(8b 5/48, 16b 4/72, 32b 12/48), mocha 47/56 (8b 15/16, 16b 16/24, 32b 16/16), dark 4/56 (8b 1/16, 16b 1/24, 32b 2/16), SRAM 95/1600, TCAM 12/480"
	if r, _ := ParseSummary(t2); len(r.PHV) != 3 || r.PHV[2] != (PHVUse{"dark", 4, 56}) || r.MaxStages != 20 {
		t.Errorf("tofino 2: %+v", r)
	}
	nofit := "check.sh: REJECTED translator.p4 (tofino/tna): does not fit: table placement needs 18 MAU stages, tofino has 12; " +
		"stages 18/12 (ingress 11, egress 18), tables 100"
	if r, _ := ParseSummary(nofit); r.Stages != 18 || r.Tables != 100 || r.SRAM2 != 0 {
		t.Errorf("does not fit: %+v", r)
	}
	if _, err := ParseSummary("check.sh: REJECTED x.p4 (tofino/tna, p4c-barefoot exit 3)"); err == nil {
		t.Error("a compile error read as a summary")
	}
}

func TestPrograms(t *testing.T) {
	root := t.TempDir()
	write := func(rel, s string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("p4/b/b.p4", "/*\n * p4check: build -DX tofino2 nofit=tofino1\n * p4check: build -DY -DZ\n * p4check: tests STF 300\n * p4check: tests PTF 200\n"+
		" * p4check: ports STF 100:101\n * p4check: ports PTF 0:99,102:511\n */\nSwitch(pipe) main;\n")
	write("p4/a/a.p4", "Pipeline(IngressParser()) pipe;\n")
	write("p4/a/lib.p4", "header h_t { bit<8> x; }\n")
	write("p4/a/testdata/x.p4", "Switch(pipe) main;\n")
	progs, err := Programs(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []Program{
		{Path: "p4/a/a.p4", Variants: []Variant{{Targets: Targets}}},
		{Path: "p4/b/b.p4", Variants: []Variant{{Targets: Targets}, {Flags: []string{"-DX"}, Targets: []int{1, 2}, NoFit: []int{1}},
			{Flags: []string{"-DY", "-DZ"}, Targets: []int{1}}}, Tests: map[string]int{"STF": 300, "PTF": 200}, Ports: map[string]string{"STF": "100:101", "PTF": "0:99,102:511"}},
	}
	if !reflect.DeepEqual(progs, want) {
		t.Errorf("%+v\nwant %+v", progs, want)
	}
	for _, bad := range []string{"// p4check: build -DX fast", "// p4check: tests 0", "// p4check: tests 10\n// p4check: tests STF 20", "// p4check: tests STP 2",
		"// p4check: ports XYZ 1:2", "// p4check: ports STF 1-2", "// p4check: ports STF 1:2\n// p4check: ports STF 3:4"} {
		write("p4/c/c.p4", bad+"\nSwitch(pipe) main;\n")
		if _, err := Programs(root); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestCleanSummary(t *testing.T) {
	got := cleanSummary("check.sh: OK x.p4 (tofino/tna, 21s): stages 8/12 (ingress 8, egress 2), TCAM 12/288, 2 warnings; output in /tmp/o1")
	if want := "check.sh: OK x.p4 (tofino/tna): stages 8/12 (ingress 8, egress 2), TCAM 12/288, 2 warnings"; got != want {
		t.Errorf("%q\nwant %q", got, want)
	}
}
