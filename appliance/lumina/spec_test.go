package lumina

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/mirror"
)

// TestReadyMadeTests: every ready-made test is a valid Lumina file.
func TestReadyMadeTests(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "tests", "*.yml"))
	if len(files) < 4 {
		t.Fatalf("%d ready-made tests", len(files))
	}
	for _, f := range files {
		tt, err := LoadTest(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if len(tt.Intents) == 0 || tt.NumQPs == 0 {
			t.Errorf("%s: %d intents, %d QPs", f, len(tt.Intents), tt.NumQPs)
		}
	}
	tt, err := LoadTest(filepath.Join("testdata", "tests", "fast-retrans-20k.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if tt.NumQPs != 20 || len(tt.Intents) != 20 || tt.Intents[19] != (intent.Intent{QP: 19, PSN: 19, Iter: 1, Type: mirror.EventDrop}) ||
		tt.Geometry.PacketsPerMessage() != 20 || tt.Spec.RequesterMirror.PktDumpConf.NumPkts != 65535 ||
		tt.Spec.Switch.SDEPath == "" || tt.Spec.Requester.NIC.IBDevice != "mlx5_0" || tt.Spec.Requester.Username != "lumina" {
		t.Fatalf("parsed %+v", tt)
	}
}

// TestTestErrors: what Lumina refuses is refused, each at its line.
func TestTestErrors(t *testing.T) {
	base, err := os.ReadFile(filepath.Join("testdata", "tests", "fast-retrans-20k.yml"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		old, new, want string
	}{
		{"tx-depth: 1", "tx-depth: 4", "traffic.data-pkt-events[0].type: drop events need traffic.tx-depth 1"},
		{"dump-filename: requester.pcap, snap-len: 128, num-pkts: 65535", "dump-filename: requester.pcap, snap-len: 128, num-pkts: 65536", "requester-mirror.pkt-dump-conf.num-pkts: 65536: must be 2^n - 1"},
		{"- {qpn: 19, psn: 19,", "- {qpn: 20, psn: 19,", "traffic.data-pkt-events[19].qpn: 20: the test has QPs 0..19"},
		{"- {qpn: 18, psn: 18,", "- {qpn: 18, psn: 20,", "traffic.data-pkt-events[18].psn: 20: 1 message(s) of 20480 bytes at MTU 1024 have packets 0..19"},
		{"- {qpn: 17, psn: 17, type: drop", "- {qpn: 17, psn: 17, type: flip", `traffic.data-pkt-events[17].type: "flip"`},
		{"rdma-verb: write", "rdma-verb: writ", `traffic.rdma-verb: "writ"`},
		{"    type: CX5\n    if-name: ens1f0\n    pci-addr: \"0000:3b:00.0\"\n    ib-device: mlx5_0\n    ib-port: 1\n    switch-port: 1", "    type: CX9\n    if-name: ens1f0\n    pci-addr: \"0000:3b:00.0\"\n    ib-device: mlx5_0\n    ib-port: 1\n    switch-port: 1", `requester.nic.type: "CX9"`},
		{"num-repeats: 1", "num-repeat: 1", `num-repeat: unknown key (did you mean "num-repeats"?)`},
		{"mtu: 1024", "mtu: 1000", "traffic.mtu: 1000"},
	}
	for _, c := range cases {
		if !strings.Contains(string(base), c.old) {
			t.Fatalf("case %q: text not in the file", c.old)
		}
		data := strings.Replace(string(base), c.old, c.new, 1)
		_, err := DecodeTest("t.yml", []byte(data))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.new, err, c.want)
			continue
		}
		// Every problem names the file and a line.
		if !strings.HasPrefix(err.Error(), "t.yml:") {
			t.Errorf("%q: %v", c.new, err)
		}
	}
	// send_read counts.
	data := strings.Replace(strings.Replace(string(base), "rdma-verb: write", "rdma-verb: send_read", 1), "num-qps: 20", `num-qps: "12,8"`, 1)
	tt, err := DecodeTest("sr.yml", []byte(data))
	if err != nil || tt.NumQPs != 20 || tt.SendQPs != 12 {
		t.Fatalf("send_read: %v %+v", err, tt)
	}
}
