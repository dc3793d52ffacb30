package tuning

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the dialect golden files in testdata")

func goldenIntent() Intent {
	return Intent{Switch: "leaf1", Ports: []string{"Ethernet0", "Ethernet4"}, Prio: 3, Cell: PaperCell,
		W: Watermark{Kmin: 1000, Kmax: 1500, Pmax: 10, Headroom: 500, Alpha: 8}}
}

// One intent, five vendors: each rendering is compared with its golden
// file (go test -run Dialect -update rewrites them).
func TestDialectGolden(t *testing.T) {
	in := goldenIntent()
	for _, name := range DialectNames() {
		d, _ := DialectByName(name)
		got, err := Render(d, in)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("testdata", "dialect-"+name+".txt")
		if *update {
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update to create it)", err)
		}
		if got != string(want) {
			t.Errorf("%s: rendering differs from %s:\n%s", name, path, got)
		}
		// Every rendering carries the thresholds in the dialect's unit.
		for _, must := range map[string][]string{
			"sonic":   {"256000", "384000", "128000", `"dynamic_th": "-3"`, "Ethernet4|3"},
			"eos":     {"minimum-threshold 256000 bytes", "maximum-threshold 384000 bytes", "max-mark-probability 10", "headroom 128000", "threshold 1/8"},
			"nxos":    {"minimum-threshold 256000 bytes", "drop-probability 10", "pause-threshold 128000", "queue-limit dynamic 4"},
			"vrp":     {"low-limit 1000 high-limit 1500 discard-percentage 10", "hdrm 500 cells", "xoff dynamic 8"},
			"comware": {"low-limit 1000 high-limit 1500 discard-probability 10", "dot1p 3 headroom 500", "ingress-buffer dynamic 8"},
		}[name] {
			if !strings.Contains(got, must) {
				t.Errorf("%s: no %q in\n%s", name, must, got)
			}
		}
		if len(d.Undo(in)) == 0 {
			t.Errorf("%s: no undo", name)
		}
	}
	bad := in
	bad.Ports = []string{"Ethernet0; reload"}
	for _, name := range DialectNames() {
		d, _ := DialectByName(name)
		if _, err := d.Apply(bad); err == nil {
			t.Errorf("%s rendered a port name with a command separator", name)
		}
	}
	if _, err := DialectByName("junos"); err == nil {
		t.Error("unknown dialect accepted")
	}
}
