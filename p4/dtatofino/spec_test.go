package dtatofino

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// exampleSpec copies testdata/translator.yml into a directory of its own
// with the key file it names (git does not keep a key's 0600).
func exampleSpec(t *testing.T) (dir, file string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "translator.yml"))
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	file = filepath.Join(dir, "translator.yml")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "dta.key"), []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, file
}

// TestSpecExample: the example file loads into the translator it
// describes, and is ready for its collectors' offers.
func TestSpecExample(t *testing.T) {
	_, file := exampleSpec(t)
	s, err := LoadSpec(file)
	if err != nil {
		t.Fatal(err)
	}
	tr := s.Setup()
	if s.Name != "tofino0" || s.Interval != 10*time.Second || s.Listen != "127.0.0.1:9320" || len(s.Collectors) != 2 ||
		string(s.Collectors[0].Key) != "0123456789abcdef0123456789abcdef" {
		t.Fatalf("spec %+v", s)
	}
	if tr.Name != "translator" || tr.QPN != 0x100 || tr.DSCP != 26 || tr.IP != netip.MustParseAddr("10.9.0.100") ||
		len(tr.Ports) != 2 || tr.Ports[1].FrontPanel != "2/0" || tr.Routes[0].Prefix.String() != "10.9.1.0/24" ||
		tr.Collectors[0].Redundancy != 2 || tr.Collectors[1].Port != "collectors" || len(tr.Peers) != 2 ||
		tr.FlowControl == nil || tr.FlowControl.CPUPort != 64 || tr.FlowControl.Rate != 2000000 {
		t.Fatalf("translator %+v", tr)
	}
	if err := tr.ValidateSetup(); err != nil {
		t.Fatal(err)
	}
	// Without the collectors' offers the translator is not complete.
	if err := tr.Validate(); err == nil || !strings.Contains(err.Error(), "collectors[0].mac") {
		t.Fatalf("a translator without its collectors' endpoints: %v", err)
	}
	// Setup is a copy: filling its collectors leaves the spec's alone.
	tr.Collectors[0].QPN = 7
	if s.Setup().Collectors[0].QPN != 0 {
		t.Fatal("Setup shares its collectors with the spec")
	}
}

// TestSpecErrors: each problem of a file is named with its file, line and
// key, whether the file's own checks find it or translator.p4's
// (Translator.ValidateSetup, its field put at the file's key).
func TestSpecErrors(t *testing.T) {
	const good = `ip: 10.9.0.100
mac: "02:00:00:00:00:64"
qpn: 0x100
ports:
  - {name: p1, dev-port: 0, speed: 100G, fec: rs, mac: "02:00:00:00:00:01"}
routes:
  - {prefix: 10.9.1.0/24, port: p1, mac: "02:00:00:00:01:fe"}
collectors:
  - {name: c0, exchange: 127.0.0.1:40050, port: p1}
`
	if _, err := DecodeSpec("good.yml", []byte(good)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, edit, with string
		want             []string
	}{
		{"typo", "qpn: 0x100\n", "qpn: 0x100\ncolectors: []\n", []string{`bad.yml:4: colectors: unknown key (did you mean "collectors"?)`}},
		{"wrong type", "qpn: 0x100\n", "qpn: 0x100\ndscp: 300\n", []string{"bad.yml:4: dscp: cannot unmarshal !!int `300` into uint8"}},
		{"mac", `mac: "02:00:00:00:01:fe"`, `mac: "02:00:00:00:01"`, []string{`bad.yml:7: routes[0].mac: "02:00:00:00:01" is not a MAC address`}},
		{"prefix and ip", "prefix: 10.9.1.0/24", "prefix: 10.9.1.0", []string{`bad.yml:7: routes[0].prefix: "10.9.1.0": want an IPv4 prefix`}},
		{"addresses", "ip: 10.9.0.100\n", "ip: tofino\npeers: [{name: r, ip: 10.9.1.300}]\n",
			[]string{`bad.yml:1: ip: "tofino": want the translator's IPv4 address`, `bad.yml:2: peers[0].ip: "10.9.1.300"`}},
		// translator.p4's own checks, at the file's keys.
		{"route port", "port: p1, mac: \"02:00:00:00:01:fe\"", "port: p2, mac: \"02:00:00:00:01:fe\"",
			[]string{`bad.yml:7: routes[0].port: "p2" is not in ports`}},
		{"front panel", "dev-port: 0,", "front-panel: 1-0,", []string{`bad.yml:5: ports[0].front-panel: "1-0": want conn/chnl`}},
		{"redundancy", "port: p1}", "port: p1, redundancy: 5}", []string{`bad.yml:9: collectors[0].redundancy: 5: 1..4`}},
		{"collector port", "127.0.0.1:40050, port: p1}", "127.0.0.1:40050, port: p9}", []string{`bad.yml:9: collectors[0].port: "p9" is not in ports`}},
		{"flow control", "qpn: 0x100\n", "qpn: 0x100\nflow-control: {rate: 1000, cpu-port: 100}\n",
			[]string{"bad.yml:4: flow-control.cpu-port: 100 is not a Tofino dev port"}},
		{"no meter", "qpn: 0x100\n", "qpn: 0x100\nno-meter: true\nflow-control: {rate: 1000}\n",
			[]string{"bad.yml:5: flow-control: the build without the meter (no-meter) has no flow control"}},
		{"batch", "qpn: 0x100\n", "qpn: 0x100\nappend-batch: 3\n", []string{"bad.yml:4: append-batch: 3: translator.p4 is built with a batch of 1, 2 or 4"}},
		{"program", "qpn: 0x100\n", "qpn: 0x100\nprogram: dta-translator\n", []string{`bad.yml:4: program: "dta-translator" is not a P4 identifier`}},
		{"peers without seqnum", "qpn: 0x100\n", "qpn: 0x100\nno-seqnum: true\npeers: [{name: r, ip: 10.9.1.3}]\n",
			[]string{"bad.yml:5: peers: the 2-byte base header (no-seqnum) has no sequence numbers to track"}},
		// The service's keys and the exchanges: every problem at once.
		{"service", "qpn: 0x100\n", "qpn: 0x100\nname: 'tofino 0'\nlisten: nowhere\ninterval: 1ms\n", []string{
			`bad.yml:4: name: "tofino 0"`, `bad.yml:5: listen: "nowhere": want host:port`, "bad.yml:6: interval: 1ms: at least 100ms"}},
		{"exchange", "exchange: 127.0.0.1:40050", "exchange: c0", []string{`bad.yml:9: collectors[0].exchange: "c0": want host:port`}},
		{"off loopback", "exchange: 127.0.0.1:40050", "exchange: 10.9.0.1:40050",
			[]string{"bad.yml:9: collectors[0].key-file: the exchange 10.9.0.1:40050 is off loopback: name the key"}},
		{"key file", "exchange: 127.0.0.1:40050", "exchange: 10.9.0.1:40050, key-file: none.key",
			[]string{"bad.yml:9: collectors[0].key-file: stat none.key: no such file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(good, tc.edit) {
				t.Fatalf("%q is not in the file", tc.edit)
			}
			_, err := DecodeSpec("bad.yml", []byte(strings.Replace(good, tc.edit, tc.with, 1)))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%v\nwant %q", err, w)
				}
			}
		})
	}
}
