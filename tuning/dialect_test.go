package tuning

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the dialect golden files in testdata")

// goldenPorts are two interfaces in each vendor's names.
var goldenPorts = map[string][]string{"sonic": {"Ethernet0", "Ethernet4"}, "eos": {"Ethernet1", "Ethernet2"},
	"nxos": {"Ethernet1/1", "Ethernet1/2"}, "vrp": {"100GE1/0/1", "100GE1/0/2"}, "comware": {"HundredGigE1/0/1", "HundredGigE1/0/2"}}

func goldenIntent(dialect string) Intent {
	return Intent{Switch: "leaf1", Ports: goldenPorts[dialect], Prio: 3, Cell: PaperCell, QueueCells: 16000,
		W: Watermark{Kmin: 1000, Kmax: 1500, Pmax: 10, Headroom: 500, Alpha: 8}}
}

// One intent, five vendors: each rendering is compared with its golden
// file (go test -run Dialect -update rewrites them).
func TestDialectGolden(t *testing.T) {
	for _, name := range DialectNames() {
		d, _ := DialectByName(name)
		got, err := Render(d, goldenIntent(name))
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
			"sonic":   {"256000", "384000", "128000", `"dynamic_th":"-3"`, "Ethernet4|3", "config apply-patch /dev/stdin"},
			"eos":     {"minimum-threshold 256000 bytes", "maximum-threshold 384000 bytes", "max-mark-probability 10", "ingress headroom bytes 128000", "threshold 1/8"},
			"nxos":    {"minimum-threshold 256000 bytes", "drop-probability 10", "pause-threshold 128000", "pause pfc-cos 3"},
			"vrp":     {"low-limit 6 high-limit 9 discard-percentage 10", "hdrm 500 cells", "xoff dynamic 8"},
			"comware": {"low-limit 1000 high-limit 1500 discard-probability 10", "dot1p 3 headroom 500", "ingress-buffer dynamic 8"},
		}[name] {
			if !strings.Contains(got, must) {
				t.Errorf("%s: no %q in\n%s", name, must, got)
			}
		}
		if strings.Contains(got, "/tmp/") {
			t.Errorf("%s: a fixed path on the switch:\n%s", name, got)
		}
	}
	if _, err := DialectByName("junos"); err == nil {
		t.Error("unknown dialect accepted")
	}
}

// Port names pass only when they are the vendor's: separators, quotes,
// newlines, another vendor's names and look-alikes all fail.
func TestDialectPortAllowList(t *testing.T) {
	common := []string{"", "Ethernet0; reload", "Ethernet0\nreload", "Ethernet0'", "Ethernet0 ", "../x", "Ethernet0|3", "$(reboot)"}
	// Other vendors' names (EthernetN is SONiC's and EOS's both) and
	// abbreviations the running config would not show.
	foreign := map[string][]string{"sonic": {"Ethernet1/1", "100GE1/0/1", "HundredGigE1/0/1"},
		"eos": {"Et1", "100GE1/0/1", "HundredGigE1/0/1"}, "nxos": {"Ethernet1", "Eth1/1", "100GE1/0/1"},
		"vrp": {"Ethernet1", "HundredGigE1/0/1", "100GE1/0/1/1"}, "comware": {"Ethernet1", "100GE1/0/1", "HGE1/0/1"}}
	for _, name := range DialectNames() {
		d, _ := DialectByName(name)
		for _, p := range goldenPorts[name] {
			if err := d.CheckPort(p); err != nil {
				t.Errorf("%s refused its own port: %v", name, err)
			}
		}
		for _, p := range append(append([]string(nil), common...), foreign[name]...) {
			in := goldenIntent(name)
			in.Ports = []string{goldenPorts[name][0], p}
			if _, err := d.Apply([]Intent{in}); err == nil || !strings.Contains(err.Error(), "leaf1") {
				t.Errorf("%s rendered port %q (%v)", name, p, err)
			}
		}
	}
}

// Per-port scopes on one switch get their own profiles, so neither
// overwrites the other's thresholds; EOS's platform-wide MMU profile
// refuses them when they disagree on headroom or alpha.
func TestDialectPerPortIntents(t *testing.T) {
	for _, name := range DialectNames() {
		d, _ := DialectByName(name)
		a, b := goldenIntent(name), goldenIntent(name)
		a.Ports, b.Ports = a.Ports[:1], b.Ports[1:]
		b.W.Kmin, b.W.Kmax = 2000, 2500
		cmds, err := d.Apply([]Intent{a, b})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		txt := strings.Join(cmds, "\n")
		for _, v := range []string{"256000", "512000"} {
			if name == "vrp" || name == "comware" {
				v = map[string]string{"256000": "1000", "512000": "2000"}[v]
				if name == "vrp" {
					v = map[string]string{"1000": "low-limit 6", "2000": "low-limit 13"}[v]
				}
			}
			if !strings.Contains(txt, v) {
				t.Errorf("%s: per-port thresholds %s lost:\n%s", name, v, txt)
			}
		}
		b.W.Alpha = 1
		if _, err := d.Apply([]Intent{a, b}); (err != nil) != (name == "eos") {
			t.Errorf("%s: different alphas per port: %v", name, err)
		}
	}
}
