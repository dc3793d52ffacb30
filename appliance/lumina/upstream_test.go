package lumina

import (
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/mirror"
)

// upstreamExample is Lumina's conf/example.yml, byte for byte.
const upstreamExampleSHA256 = "134e9be9b4f2a5b923f7cf3f9b6c380532ad14fe457b8b62c0fafeb3ac03e3e0"

func readUpstreamExample(t testing.TB) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "upstream", "example.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != upstreamExampleSHA256 {
		t.Fatalf("testdata/upstream/example.yml was edited (sha256 %x): it must stay Lumina's file", sum)
	}
	return data
}

// TestUpstreamExample: Lumina's own example runs through the parser as
// Lumina publishes it, prefixes in the ip-list and all.
func TestUpstreamExample(t *testing.T) {
	tt, err := LoadTest(filepath.Join("testdata", "upstream", "example.yml"))
	readUpstreamExample(t)
	if err != nil {
		t.Fatal(err)
	}
	s := &tt.Spec
	wantReq := []netip.Prefix{netip.MustParsePrefix("10.0.0.1/24"), netip.MustParsePrefix("10.0.0.11/24"),
		netip.MustParsePrefix("10.0.0.21/24"), netip.MustParsePrefix("10.0.0.31/24")}
	if got := s.Requester.NIC.Prefixes(); !slices.Equal(got, wantReq) {
		t.Errorf("requester prefixes %v, want %v", got, wantReq)
	}
	first, rest := addrs(s.Responder.NIC)
	if first != netip.MustParseAddr("10.0.0.2") || len(rest) != 3 || rest[2] != netip.MustParseAddr("10.0.0.32") {
		t.Errorf("responder GIDs %v %v", first, rest)
	}
	if tt.NumQPs != 4 || tt.Geometry.PacketsPerMessage() != 1000 || s.Switch.SDEPath != "/path/to/bf-sde/on/switch/" ||
		!s.Responder.RoCEParameters.DCQCNRPEnable || s.Requester.RoCEParameters.DCQCNRPEnable || !s.Requester.RoCEParameters.SlowRestart ||
		s.RequesterMirror.NIC.SwitchPort != 148 || s.Requester.NIC.PCIAddr != "03:00.0" {
		t.Errorf("parsed %+v", s)
	}
	want := []intent.Intent{{QP: 0, PSN: 4, Iter: 1, Type: mirror.EventECN}, {QP: 1, PSN: 4, Iter: 1, Type: mirror.EventECN},
		{QP: 2, PSN: 3, Iter: 1, Type: mirror.EventDrop}, {QP: 3, PSN: 5, Iter: 1, Type: mirror.EventDrop}}
	if !slices.Equal(tt.Intents, want) {
		t.Errorf("intents %v, want %v", tt.Intents, want)
	}
	// Lumina's default DSCP map: DSCP d selects priority d/8.
	m := s.Requester.NIC.DSCPToPrio()
	if len(m) != 64 || m[0] != (DSCPPrio{0, 0}) || m[63] != (DSCPPrio{63, 7}) || m[26] != (DSCPPrio{26, 3}) {
		t.Errorf("default DSCP map %v", m)
	}
}

// TestUpstreamKeys: the keys Lumina's host code reads beyond the example
// (E810's dcqcn-enable, prio-dscp-map, a mirror NIC's type) are accepted,
// and bad values are refused at their line.
func TestUpstreamKeys(t *testing.T) {
	base := string(readUpstreamExample(t))
	e810 := strings.Replace(strings.Replace(base, "    type: CX6 # The NIC type to test; we support: CX4, CX5, CX6, E810", "    type: E810", 1),
		"  roce-parameters: # RoCE parameters\n", "  roce-parameters: # RoCE parameters\n    dcqcn-enable: true\n", 1)
	e810 = strings.Replace(e810, "    switch-port: 132 # The port number of the switch port that this NIC is connected to\n",
		"    switch-port: 132\n    prio-dscp-map:\n      3: \"26,27\"\n      0: \"00\"\n", 1)
	e810 = strings.Replace(e810, "    switch-port: 148\n", "    switch-port: 148\n    type: XL710\n", 1)
	tt, err := DecodeTest("e810.yml", []byte(e810))
	if err != nil {
		t.Fatal(err)
	}
	rp := tt.Spec.Requester.RoCEParameters
	if rp.DCQCNEnable == nil || !*rp.DCQCNEnable {
		t.Fatalf("dcqcn-enable %v", rp.DCQCNEnable)
	}
	// The example's slow-restart: True is mlx5's and does not reach an
	// E810, which has no CNP pacer either (as Lumina's checks take it).
	if p := profile(tt.Spec.Requester); !p.CNPEnable || !p.DCQCNRate || p.Name != "e810" || p.NAKTriggersCNP || p.MinTimeBetweenCNPs != 0 {
		t.Errorf("E810 profile %+v", p)
	}
	// meta.json says so too, for the analyzers.
	if c := nicConfig(tt.Spec.Requester); !c.DCQCNNPEnable || !c.DCQCNRPEnable || c.SlowRestart || c.MinTimeBetweenCNPs != 0 {
		t.Errorf("E810 NIC config %+v", c)
	}
	if m := tt.Spec.Requester.NIC.DSCPToPrio(); !slices.Equal(m, []DSCPPrio{{0, 0}, {26, 3}, {27, 3}}) {
		t.Errorf("prio-dscp-map %v", m)
	}
	cases := []struct{ old, new, want string }{
		{"      - 10.0.0.11/24\n", "      - 10.0.0.11/33\n", `e810.yml:46: requester.nic.ip-list[1]: "10.0.0.11/33" is neither an IP address nor an address with a prefix`},
		{"      - 10.0.0.21/24\n", "      - host-a\n", `requester.nic.ip-list[2]: "host-a" is neither`},
		{"      - 10.0.0.31/24\n", "      - 224.0.0.1/4\n", `requester.nic.ip-list[3]: "224.0.0.1/4": not a unicast address`},
		{"      - 10.0.0.31/24\n", "      - 10.0.0.1/16\n", `requester.nic.ip-list[3]: 10.0.0.1 is entry 0 already`},
		{"      3: \"26,27\"\n", "      3: \"26,64\"\n", `requester.nic.prio-dscp-map.3: "26,64": DSCP values 0..63`},
		{"      3: \"26,27\"\n", "      9: \"26\"\n", `requester.nic.prio-dscp-map.9: priority 9: want 0..7`},
		{"    type: E810\n", "    type: CX5\n", `requester.roce-parameters.dcqcn-enable: an E810 (irdma) key`},
		{"    type: XL710\n", "    type: X540\n", `requester-mirror.nic.type: "X540"`},
		{"    if-name: ens1 # The interface name of the NIC\n", "    if-name: ../../x\n", `requester.nic.if-name: "../../x" is not an interface name`},
		{"    ib-device: mlx5_0 # The ib device name of the RNIC\n", "    ib-device: \"mlx5_0 --yes\"\n", `requester.nic.ib-device: "mlx5_0 --yes"`},
		{"    pci-addr: \"03:00.0\" # The pcie address of the NIC\n", "    pci-addr: \"03:00.0;reboot\"\n", `requester.nic.pci-addr: "03:00.0;reboot" is not a PCI address`},
	}
	for _, c := range cases {
		if !strings.Contains(e810, c.old) {
			t.Fatalf("case %q: text not in the file", c.old)
		}
		_, err := DecodeTest("e810.yml", []byte(strings.Replace(e810, c.old, c.new, 1)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.new, err, c.want)
		}
	}
}

// FuzzIPEntry: an ip-list entry either parses to a prefix whose address
// is a unicast address, or is refused with the entry named; it never
// panics.
func FuzzIPEntry(f *testing.F) {
	for _, s := range []string{"10.0.0.1/24", "10.0.0.1", "fd00::1/64", "::ffff:10.0.0.1/120", "1.2.3.4/33", "", "/", "fe80::1%eth0/64"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseIPEntry(s)
		if err != nil {
			if !strings.Contains(err.Error(), strconv.Quote(s)) || p.IsValid() {
				t.Fatalf("%q: %v with %v", s, err, p)
			}
			return
		}
		if !p.IsValid() || p.Addr().IsUnspecified() || p.Addr().IsMulticast() || p.Bits() < 0 {
			t.Fatalf("%q -> %v", s, p)
		}
		// What `ip addr replace` is given reads back the same.
		if q, err := ParseIPEntry(p.String()); err != nil || q != p {
			t.Fatalf("%q -> %v -> %v, %v", s, p, q, err)
		}
	})
}
