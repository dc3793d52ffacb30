package lumina

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/p4/luminatofino"
	"github.com/rdma-appliance/appliance/translator/inject"
)

var updateSetup = flag.Bool("update-setup", false, "rewrite testdata/setup/*.golden")

// e810Example is Lumina's example with E810 RNICs (dcqcn-enable, as
// Lumina's host code reads it for Intel NICs), a DSCP map of its own on
// the requester, and E810 NICs on the mirror servers too.
func e810Example(t *testing.T) []byte {
	s := string(readUpstreamExample(t))
	s = strings.ReplaceAll(s, "type: CX6", "type: E810")
	s = strings.Replace(s, "ib-device: mlx5_0 # The ib device name of the RNIC", "ib-device: irdma0", 1)
	s = strings.Replace(s, "    switch-port: 132 # The port number of the switch port that this NIC is connected to\n",
		"    switch-port: 132\n    prio-dscp-map: {3: \"26,27\", 5: \"46,40\"}\n", 1)
	s = strings.ReplaceAll(s, "    dcqcn-rp-enable: True\n", "    dcqcn-enable: true\n")
	s = strings.ReplaceAll(s, "    dcqcn-rp-enable: False\n", "    dcqcn-enable: false\n")
	s = strings.ReplaceAll(s, "    if-name: ens1\n    pci-addr: \"03:00.0\"\n    switch-port: 1",
		"    type: E810\n    if-name: ens1\n    pci-addr: \"03:00.0\"\n    switch-port: 1")
	return []byte(s)
}

// TestSetupPlanGolden holds the exact commands the hardware mode runs for
// Lumina's example (ConnectX-6, dumpers on AF_PACKET) and its E810
// variant (dumpers on DPDK, the mirror NICs bound to vfio-pci).
func TestSetupPlanGolden(t *testing.T) {
	for _, c := range []struct {
		name string
		data []byte
		o    SetupOptions
	}{{"example-cx6", readUpstreamExample(t), SetupOptions{RemoteTokenFile: "/etc/appliance/token"}},
		{"example-e810", e810Example(t), SetupOptions{RemoteTokenFile: "/etc/appliance/token", DumperDPDK: true}}} {
		tt, err := DecodeTest(c.name+".yml", c.data)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := BuildPlan(tt, c.o).WriteDry(&b); err != nil {
			t.Fatal(err)
		}
		golden := filepath.Join("testdata", "setup", c.name+".golden")
		if *updateSetup {
			if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b.Bytes(), want) {
			t.Errorf("%s: the plan changed (go test -run TestSetupPlanGolden -update-setup to accept):\n%s", c.name, b.String())
		}
	}
}

// TestSetupPlanContent: the commands Lumina's host and switch code run
// are in the plan, values from the file passed as arguments only.
func TestSetupPlanContent(t *testing.T) {
	tt, err := LoadTest(filepath.Join("testdata", "upstream", "example.yml"))
	if err != nil {
		t.Fatal(err)
	}
	pl := BuildPlan(tt, SetupOptions{})
	var lines []string
	for _, st := range pl.Steps {
		lines = append(lines, st.Host+": "+shellJoin(st.Argv))
	}
	all := strings.Join(lines, "\n")
	for _, w := range []string{
		"requester: sudo ip addr replace 10.0.0.21/24 dev ens1",
		"responder: sudo ip addr replace 10.0.0.32/24 dev ens1",
		"requester: sudo mlnx_qos -i ens1 --trust=dscp",
		"requester: sudo mlnx_qos -i ens1 --dscp2prio=set,26,3",
		"requester: sudo sh -c 'v=$1; shift; for f do printf '\\''%s\\n'\\'' \"$v\" > \"$f\" || exit 1; done' lumina-write 0 /sys/class/net/ens1/ecn/roce_rp/enable/0",
		"responder: sudo sh -c 'v=$1; shift; for f do printf '\\''%s\\n'\\'' \"$v\" > \"$f\" || exit 1; done' lumina-write 1 /sys/class/net/ens1/ecn/roce_rp/enable/0",
		"/sys/class/net/ens1/ecn/roce_np/min_time_between_cnps",
		"requester: sudo mlxreg -d 03:00.0 --reg_name ROCE_ACCL --set roce_slow_restart_en=1 --yes",
		"requester: sudo mlxreg -d 03:00.0 --reg_name ROCE_ACCL --set roce_adp_retrans_en=0 --yes",
		"requester-mirror: sh -c",
		"appliance dump --port afpacket:ens1 --name requester-mirror --dir /path/to/lumina/code/on/mirror-server/pcap-result --file requester.pcap --snap-len 128 --num-pkts 16383 --rewrite-port 9741",
		"env SDE=/path/to/bf-sde/on/switch SDE_INSTALL=/path/to/bf-sde/on/switch/install /path/to/bf-sde/on/switch/run_switchd.sh -p injector",
		"appliance inject tofino -f /path/to/lumina/code/on/switch/injector.yml --sde /path/to/bf-sde/on/switch --listen 192.168.1.11:12345",
		"--rewrite-port 9741 --listen 192.168.1.14:9200",
	} {
		if !strings.Contains(all, w) {
			t.Errorf("plan lacks %q", w)
		}
	}
	// Lumina's default map, DSCP by DSCP, on each host.
	if n := strings.Count(all, "--dscp2prio=set,"); n != 2*64 {
		t.Errorf("%d dscp2prio commands on the two hosts, want 64 each", n)
	}
}

// fakeHost records commands and answers the reads with canned state.
type fakeHost struct {
	ran    []string
	failOn string
	answer map[string]string
}

func (f *fakeHost) Run(_ context.Context, h Access, argv []string) ([]byte, error) {
	cmd := h.ControlIP + ": " + shellJoin(argv)
	f.ran = append(f.ran, cmd)
	if f.failOn != "" && strings.Contains(cmd, f.failOn) {
		return nil, errors.New("exit status 1")
	}
	for k, v := range f.answer {
		if strings.Contains(cmd, k) {
			return []byte(v), nil
		}
	}
	return nil, nil
}

// TestSetupRestoresOnFailure: a remote command that fails stops the plan
// and what was changed is put back, in reverse order, from what was read
// before: the addresses, the trust state and DSCP map, sysfs values.
func TestSetupRestoresOnFailure(t *testing.T) {
	tt, err := LoadTest(filepath.Join("testdata", "upstream", "example.yml"))
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeHost{failOn: "192.168.1.12: sudo mlxreg -d 03:00.0 --reg_name ROCE_ACCL --set roce_adp_retrans_en=0", answer: map[string]string{
		"ip -o addr show dev ens1": "2: ens1    inet 192.168.9.5/16 brd 192.168.255.255 scope global ens1\\       valid_lft forever\n" +
			"2: ens1    inet6 fe80::1/64 scope link \\       valid_lft forever\n",
		"mlnx_qos -i ens1": mlnxQosVendor,
		"cat /sys/class/net/ens1/ecn/roce_np/min_time_between_cnps": "4\n",
		"cat /sys/class/net/ens1/ecn/roce_rp/enable/0":              "1\n1\n1\n1\n1\n1\n1\n1\n",
		"cat /sys/class/net/ens1/ecn/roce_np/enable/0":              "0\n0\n0\n0\n0\n0\n0\n0\n",
		"mlxreg -d 03:00.0 --reg_name ROCE_ACCL --get":              "Field Name | Data\n====\nroce_adp_retrans_en | 0x00000001\n",
	}}
	a, err := BuildPlan(tt, SetupOptions{}).Execute(context.Background(), f)
	if err == nil || !strings.Contains(err.Error(), "requester: adaptive-retrans (ROCE_ACCL.roce_adp_retrans_en): exit status 1") {
		t.Fatalf("err %v", err)
	}
	i := slices.IndexFunc(f.ran, func(s string) bool { return strings.Contains(s, f.failOn) })
	undo := strings.Join(f.ran[i+1:], "\n")
	for _, w := range []string{
		"lumina-write 0 /sys/class/net/ens1/ecn/roce_np/enable/0", // dcqcn-np-enable back to what cat said
		"lumina-write 1 /sys/class/net/ens1/ecn/roce_rp/enable/7",
		"lumina-write 4 /sys/class/net/ens1/ecn/roce_np/min_time_between_cnps",
		"sudo mlnx_qos -i ens1 --trust=pcp",
		"sudo mlnx_qos -i ens1 --dscp2prio=set,9,1",
		"sudo mlnx_qos -i ens1 -p 1,0,2,3,4,5,6,7 -s vendor,vendor,vendor,vendor,vendor,vendor,vendor,vendor",
		"sudo ip addr add 192.168.9.5/16 dev ens1",
	} {
		if !strings.Contains(undo, w) {
			t.Errorf("undo lacks %q:\n%s", w, undo)
		}
	}
	if strings.Contains(undo, "fe80::1") || strings.Contains(undo, "192.168.1.13") || strings.Contains(undo, "roce_slow_restart_en") {
		t.Errorf("undo touches what was not changed:\n%s", undo)
	}
	// In reverse: the sysfs values before ETS before the trust state
	// before the addresses.
	if strings.Index(undo, "min_time_between_cnps") > strings.Index(undo, "-s vendor") || strings.Index(undo, "-s vendor") > strings.Index(undo, "--trust=pcp") ||
		strings.Index(undo, "--trust=pcp") > strings.Index(undo, "ip addr add") {
		t.Errorf("undo out of order:\n%s", undo)
	}
	if a.Teardown(context.Background(), f) != nil || len(a.steps) != 0 {
		t.Fatal("teardown after the failure had something left")
	}
}

// mlnxQosVendor is mlnx_qos -i on a ConnectX left at the driver's
// defaults: trust pcp, vendor TSA, priority 1 in tc 0 and 0 in tc 1.
const mlnxQosVendor = "DCBX mode: OS controlled\nPriority trust state: pcp\ndscp2prio mapping:\n" +
	"\tprio:0 dscp:07,06,05,04,03,02,01,00,\n\tprio:1 dscp:15,14,13,12,11,10,09,08,\n" +
	"Receive buffer size (bytes): 130944,130944,0,0,0,0,0,0,\nCable len: 7\nPFC configuration:\n" +
	"\tpriority    0   1   2   3   4   5   6   7\n\tenabled     0   0   0   0   0   0   0   0\n" +
	"tc: 0 ratelimit: unlimited, tsa: vendor\n\t priority:  1\ntc: 1 ratelimit: unlimited, tsa: vendor\n\t priority:  0\n" +
	"tc: 2 ratelimit: unlimited, tsa: vendor\n\t priority:  2\ntc: 3 ratelimit: unlimited, tsa: vendor\n\t priority:  3\n" +
	"tc: 4 ratelimit: unlimited, tsa: vendor\n\t priority:  4\ntc: 5 ratelimit: unlimited, tsa: vendor\n\t priority:  5\n" +
	"tc: 6 ratelimit: unlimited, tsa: vendor\n\t priority:  6\ntc: 7 ratelimit: unlimited, tsa: vendor\n\t priority:  7\n"

// TestSetupETSRestore: the ETS configuration Lumina's setup overwrites is
// read first and put back, with mlnx_qos (ConnectX) and lldptool (E810);
// when it cannot be read whole, the step is refused before it changes
// anything and what ran before it is undone.
func TestSetupETSRestore(t *testing.T) {
	e, err := parseMlnxETS([]byte("tc: 0 ratelimit: unlimited, tsa: strict\n priority:  7\n" +
		"tc: 1 ratelimit: unlimited, tsa: ets, bw: 40%\n priority:  0  1\n priority:  2\n" +
		"tc: 2 ratelimit: unlimited, tsa: ets, bw: 60%\n priority:  3\n priority:  4\n priority:  5\n priority:  6\n" +
		"tc: 3 ratelimit: 10 Gbps, tsa: vendor\ntc: 4 ratelimit: unlimited, tsa: vendor\ntc: 5 ratelimit: unlimited, tsa: vendor\n" +
		"tc: 6 ratelimit: unlimited, tsa: vendor\ntc: 7 ratelimit: unlimited, tsa: vendor\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := shellJoin(e.mlnxQosArgv("ens1")); got != "sudo mlnx_qos -i ens1 -p 1,1,1,2,2,2,2,0 -s strict,ets,ets,vendor,vendor,vendor,vendor,vendor -t 0,40,60,0,0,0,0,0" {
		t.Errorf("mlnx_qos restore %s", got)
	}
	l, err := parseLldpETS([]byte("willing=yes\nup2tc=0:0,1:0,2:0,3:0,4:0,5:0,6:0,7:0\ntsa=0:ets,1:strict,2:strict,3:strict,4:strict,5:strict,6:strict,7:strict\ntcbw=100,0,0,0,0,0,0,0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := shellJoin(l.lldptoolArgv("ens2")); got != "sudo lldptool -Ti ens2 -V ETS-CFG willing=yes up2tc=0:0,1:0,2:0,3:0,4:0,5:0,6:0,7:0 tsa=0:ets,1:strict,2:strict,3:strict,4:strict,5:strict,6:strict,7:strict tcbw=100,0,0,0,0,0,0,0" {
		t.Errorf("lldptool restore %s", got)
	}
	for _, bad := range []string{
		"tc: 0 ratelimit: unlimited, tsa: ets, bw: 50%\n priority:  0 1 2 3 4 5 6 7\n",                                                                        // seven classes missing
		"willing=yes\nup2tc=0:0,1:0,2:0,3:0,4:0,5:0,6:0,7:0\ntsa=0:ets,1:ets,2:strict,3:strict,4:strict,5:strict,6:strict,7:strict\ntcbw=50,40,0,0,0,0,0,0\n", // 90%
		"willing=yes\nup2tc=0:0,1:0,2:0,3:0,4:0,5:0,6:0,7:0\ntcbw=100,0,0,0,0,0,0,0\n",                                                                        // no tsa
	} {
		_, err1 := parseMlnxETS([]byte(bad))
		_, err2 := parseLldpETS([]byte(bad))
		if err1 == nil || err2 == nil {
			t.Errorf("%q read as restorable", bad)
		}
	}

	// The E810 variant: the ETS restore runs when a later step fails.
	tt, err := DecodeTest("e810.yml", e810Example(t))
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeHost{failOn: "192.168.1.12: sudo mkdir -p /sys/kernel/config/irdma/irdma0", answer: map[string]string{
		"ETS-CFG -c": "willing=yes\nup2tc=0:0,1:0,2:0,3:0,4:0,5:0,6:0,7:0\ntsa=0:ets,1:strict,2:strict,3:strict,4:strict,5:strict,6:strict,7:strict\ntcbw=100,0,0,0,0,0,0,0\n",
	}}
	if _, err := BuildPlan(tt, SetupOptions{}).Execute(context.Background(), f); err == nil {
		t.Fatal("the failing step did not stop the plan")
	}
	if undo := strings.Join(f.ran, "\n"); !strings.Contains(undo, "sudo lldptool -Ti ens1 -V ETS-CFG willing=yes up2tc=0:0,1:0,2:0,3:0,4:0,5:0,6:0,7:0 tsa=0:ets,1:strict") {
		t.Errorf("ETS not restored:\n%s", undo)
	}

	// Unreadable ETS state on a ConnectX: the ETS step never runs, the
	// DSCP map set before it is put back.
	ex, err := LoadTest(filepath.Join("testdata", "upstream", "example.yml"))
	if err != nil {
		t.Fatal(err)
	}
	f = &fakeHost{answer: map[string]string{"mlnx_qos -i ens1": "Priority trust state: pcp\n"}}
	_, err = BuildPlan(ex, SetupOptions{}).Execute(context.Background(), f)
	if err == nil || !strings.Contains(err.Error(), "requester: reading the state before: ETS across the eight traffic classes: mlnx_qos shows no tc 0") {
		t.Fatalf("err %v", err)
	}
	ran := strings.Join(f.ran, "\n")
	if strings.Contains(ran, "-s ets,ets") || !strings.Contains(ran, "sudo mlnx_qos -i ens1 --trust=pcp") {
		t.Errorf("ETS applied, or the trust state not restored:\n%s", ran)
	}
}

// FuzzHostState: the readers of what the hosts print before a change
// (ip -o addr, mlnx_qos, mlxreg --get, lldptool APP) never panic, and
// what they return is only ever values the restore commands can take:
// prefixes ParseIPEntry accepts, DSCP 0..63 with priority 0..7, decimal
// register values.
func FuzzHostState(f *testing.F) {
	f.Add([]byte("2: ens1    inet 10.0.0.1/24 brd 10.0.0.255 scope global ens1\\       valid_lft forever\n"))
	f.Add([]byte("Priority trust state: dscp\ndscp2prio mapping:\n\tprio:0 dscp:07,06,05,04,03,02,01,00,\n"))
	f.Add([]byte("Field Name | Data\n=====\nroce_adp_retrans_en | 0x00000001\nroce_slow_restart_en | 0x0\n"))
	f.Add([]byte("APP DSCP: \n0:(1,5,9) local  hw (set)\n1:(3,5,26) local hw (set)\n"))
	f.Add([]byte(mlnxQosVendor))
	f.Add([]byte("willing=no\nup2tc=0:0,1:1,2:2,3:3,4:0,5:1,6:2,7:3\ntsa=0:ets,1:ets,2:ets,3:ets,4:strict,5:strict,6:strict,7:strict\ntcbw=25,25,25,25,0,0,0,0\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, p := range parseIPAddrShow(b) {
			if _, err := ParseIPEntry(p); err != nil {
				t.Fatalf("address %q: %v", p, err)
			}
		}
		q := parseMlnxQos(b)
		if q.trust != "" && q.trust != "pcp" && q.trust != "dscp" {
			t.Fatalf("trust %q", q.trust)
		}
		for _, m := range append(q.dscp2prio, parseLldpApp(b)...) {
			if m.DSCP < 0 || m.DSCP > 63 || m.Prio < 0 || m.Prio > 7 {
				t.Fatalf("mapping %+v", m)
			}
		}
		for _, parse := range []func([]byte) (etsConf, error){parseMlnxETS, parseLldpETS} {
			if e, err := parse(b); err == nil {
				if e.valid() != nil {
					t.Fatalf("invalid ETS %+v read", e)
				}
				for tc, p := range e.up2tc {
					if p < 0 || p > 7 || tc > 7 {
						t.Fatalf("up2tc %v", e.up2tc)
					}
				}
			}
		}
		for k, v := range parseMlxreg(b) {
			if _, err := strconv.ParseUint(v, 10, 32); err != nil || k == "" {
				t.Fatalf("register %q = %q", k, v)
			}
		}
	})
}

// TestInjectorFileGenerated: without an injector file of the user's, the
// plan reads the hosts' MACs and writes the injector file from the test,
// one the Tofino control plane takes (ports at their dev port, a route
// per ip-list address to its host's MAC), and removes it after the run;
// a MAC that does not parse stops the plan before the switch is touched.
func TestInjectorFileGenerated(t *testing.T) {
	tt, err := LoadTest(filepath.Join("testdata", "upstream", "example.yml"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := InjectorFile(tt, intent.IterPaper, map[string]string{"requester": "0c:42:a1:00:00:01", "responder": "0c:42:a1:00:00:02"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := inject.DecodeSpec("injector.yml", b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := luminatofino.FromSpec(s, inject.LoadRequest{Geometry: tt.Geometry}); err != nil {
		t.Fatalf("the Tofino control plane refuses the file: %v\n%s", err, b)
	}
	if len(s.Ports) != 4 || s.Ports[0].DevPort != tt.Spec.Requester.NIC.SwitchPort || s.Ports[3].DevPort != tt.Spec.ResponderMirror.NIC.SwitchPort ||
		s.Ports[2].Role != "mirror" || s.Ports[0].Speed != tt.Spec.Switch.PortSpeed || s.Ports[0].FEC != tt.Spec.Switch.FECType {
		t.Errorf("ports %+v", s.Ports)
	}
	if s.IterMode != "paper" || s.Balance != "wrr" || s.RewriteUDPDstPort != tt.Spec.RewriteUDPDstPort {
		t.Errorf("iter-mode %q, balance %q, rewrite port %d", s.IterMode, s.Balance, s.RewriteUDPDstPort)
	}
	if b4, err := InjectorFile(tt, intent.IterP4, map[string]string{"requester": "0c:42:a1:00:00:01", "responder": "0c:42:a1:00:00:02"}); err != nil ||
		!strings.Contains(string(b4), "iter-mode: p4\n") {
		t.Errorf("--iter-mode p4 not in the file: %v\n%s", err, b4)
	}
	if n := len(tt.Spec.Requester.NIC.IPList) + len(tt.Spec.Responder.NIC.IPList); len(s.Routes) != n {
		t.Errorf("%d routes, want one per ip-list address (%d)", len(s.Routes), n)
	}
	if r := s.Routes[0]; r.Prefix != "10.0.0.1/32" || r.Port != "requester" || r.MAC != "0c:42:a1:00:00:01" {
		t.Errorf("route %+v", r)
	}
	for _, bad := range []map[string]string{
		{"requester": "0c:42:a1:00:00:01", "responder": "0c:42:a1:00:00:02\n$(reboot)"},
		{"requester": "", "responder": "0c:42:a1:00:00:02"},
	} {
		if _, err := InjectorFile(tt, intent.IterPaper, bad); err == nil {
			t.Errorf("MACs %q accepted", bad)
		}
	}
	dup := *tt
	dup.Spec.ResponderMirror.NIC.SwitchPort = dup.Spec.Requester.NIC.SwitchPort
	if _, err := InjectorFile(&dup, intent.IterPaper, map[string]string{"requester": "0c:42:a1:00:00:01", "responder": "0c:42:a1:00:00:02"}); err == nil ||
		!strings.Contains(err.Error(), "both on switch-port") {
		t.Errorf("a switch-port used twice: %v", err)
	}

	// The plan: the file written from the MACs read, removed after.
	f := &fakeHost{answer: map[string]string{
		"192.168.1.12: cat /sys/class/net/ens1/address": "0c:42:a1:00:00:01\n",
		"192.168.1.13: cat /sys/class/net/ens1/address": "0c:42:a1:00:00:02\n",
		"lumina-save":                "absent\n",
		"mlnx_qos -i ens1":           mlnxQosVendor,
		"--reg_name ROCE_ACCL --get": "Field Name | Data\n====\nroce_adp_retrans_en | 0x00000001\nroce_slow_restart_en | 0x0\n",
		"run_switchd.sh":             "4242\n",
		"inject tofino":              "4343\n",
		"appliance dump":             "4444\n",
	}}
	a, err := BuildPlan(tt, SetupOptions{}).Execute(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	want := shellJoin([]string{"sh", "-c", writeFile, "lumina-write", "/path/to/lumina/code/on/switch/injector.yml", string(b)})
	if !slices.Contains(f.ran, "192.168.1.11: "+want) {
		t.Errorf("the injector file written is not the one from the MACs read:\n%s", strings.Join(f.ran, "\n"))
	}
	f.ran = nil
	if err := a.Teardown(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(f.ran, "192.168.1.11: rm -f -- /path/to/lumina/code/on/switch/injector.yml") {
		t.Errorf("the generated file is not removed:\n%s", strings.Join(f.ran, "\n"))
	}

	// A file that was there comes back; an unreadable MAC stops the
	// plan with the switch untouched and the hosts restored.
	f.answer["lumina-save"] = "present\nold: file\n"
	if a, err = BuildPlan(tt, SetupOptions{}).Execute(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	f.ran = nil
	a.Teardown(context.Background(), f)
	if !slices.Contains(f.ran, "192.168.1.11: "+shellJoin([]string{"sh", "-c", writeFile, "lumina-write", "/path/to/lumina/code/on/switch/injector.yml", "old: file\n"})) {
		t.Errorf("the file that was there is not put back:\n%s", strings.Join(f.ran, "\n"))
	}
	f.answer["192.168.1.13: cat /sys/class/net/ens1/address"] = "cat: /sys/class/net/ens1/address: No such file\n"
	f.ran = nil
	_, err = BuildPlan(tt, SetupOptions{}).Execute(context.Background(), f)
	if err == nil || !strings.Contains(err.Error(), "switch: write the injector file") || !strings.Contains(err.Error(), "the responder's NIC MAC") {
		t.Fatalf("err %v", err)
	}
	for _, c := range f.ran {
		if strings.HasPrefix(c, "192.168.1.11: ") {
			t.Errorf("the switch was touched: %s", c)
		}
	}

	// A file of the user's is used as it is: no MAC read, nothing written.
	pl := BuildPlan(tt, SetupOptions{InjectorFile: "/etc/lumina/injector.yml"})
	for _, st := range pl.Steps {
		if st.ID != "" || st.Fill != nil {
			t.Errorf("step %q with a file of the user's", st.Why)
		}
	}
}
