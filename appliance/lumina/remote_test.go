package lumina

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDumpPath: a dumper's file names are its word: only plain names
// land in the results directory, none escapes it.
func TestDumpPath(t *testing.T) {
	dir := t.TempDir()
	for _, bad := range []string{"../../x", "../x.pcap", "/etc/passwd", "a/b", `a\b`, "..", ".", "", "x\n.pcap", "x\x00"} {
		if p, err := dumpPath(dir, "m0", bad); err == nil {
			t.Errorf("%q accepted as %s", bad, p)
		} else if !strings.Contains(err.Error(), "want a plain file name") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	p, err := dumpPath(dir, "m0", "dump-0.pcap")
	if err != nil || p != filepath.Join(dir, "dumps", "m0-dump-0.pcap") {
		t.Fatalf("plain name: %q %v", p, err)
	}
}

// TestSSHArgs: a control-ip or user name that could be an ssh option is
// refused, and the target always follows "--".
func TestSSHArgs(t *testing.T) {
	for _, a := range []Access{
		{ControlIP: "-oProxyCommand=touch /tmp/pwned"},
		{ControlIP: "host name"},
		{ControlIP: "10.0.0.1", Username: "-oProxyCommand=x"},
		{ControlIP: "10.0.0.1", Username: "a b"},
	} {
		if args, err := sshArgs(a, []string{"true"}); err == nil {
			t.Errorf("%+v accepted: %q", a, args)
		}
		if _, err := (SSH{}).Run(context.Background(), a, []string{"true"}); err == nil {
			t.Errorf("SSH.Run ran with %+v", a)
		}
	}
	args, err := sshArgs(Access{ControlIP: "lumina-host.example", Username: "lumina", Workspace: "/w s"}, []string{"echo", "a;b"})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.Index(args, "--")
	if i < 0 || args[i+1] != "lumina@lumina-host.example" || args[i+2] != `cd '/w s' && echo 'a;b'` || len(args) != i+3 {
		t.Fatalf("args %q", args)
	}
}

// recorder is an Executor that records what it is asked to run.
type recorder struct{ argv [][]string }

func (r *recorder) Run(_ context.Context, _ Access, argv []string) ([]byte, error) {
	r.argv = append(r.argv, argv)
	return []byte("hw_counters out_of_sequence 3\ncounters port_rcv_packets 5\nethtool NIC statistics:\nethtool      rx_discards_phy: 2\n"), nil
}

// TestCountersQuoted: the RNIC counters' script is a constant; the
// device reaches it as an argument, and only a device name.
func TestCountersQuoted(t *testing.T) {
	rec := &recorder{}
	rm := &Remote{Exec: rec}
	h := HostSpec{Access: Access{ControlIP: "10.0.0.1"}}
	h.NIC.IBDevice = "mlx5_0; touch /tmp/pwned"
	if m := rm.counters(context.Background(), h); m != nil || len(rec.argv) != 0 {
		t.Fatalf("a device name with a command ran: %v %q", m, rec.argv)
	}
	h.NIC.IBDevice, h.NIC.IfName = "mlx5_0", "ens1f0"
	hc := rm.counters(context.Background(), h)
	if hc == nil {
		t.Fatal("no counters")
	}
	if m := hc.Flat(); m["port_rcv_packets"] != 5 || m["out_of_sequence"] != 3 || len(m) != 2 {
		t.Fatalf("counters %v", m)
	}
	if len(hc.Ethtool) != 1 || hc.Ethtool[0] != (NamedCount{"rx_discards_phy", 2}) {
		t.Fatalf("ethtool %v", hc.Ethtool)
	}
	argv := rec.argv[0]
	if len(argv) != 7 || argv[0] != "sh" || argv[1] != "-c" || strings.Contains(argv[2], "mlx5_0") || argv[4] != "mlx5_0" || argv[5] != "1" || argv[6] != "ens1f0" {
		t.Fatalf("argv %q", argv)
	}
}

// TestSpecAccess: the test file's control-ip, username and ib-device are
// checked where they are written.
func TestSpecAccess(t *testing.T) {
	data, err := os.ReadFile("testdata/tests/fast-retrans-20k.yml")
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	s = strings.Replace(s, "control-ip: 192.168.1.11", `control-ip: "-oProxyCommand=x"`, 1)
	s = strings.Replace(s, "username: lumina", `username: "a;b"`, 1)
	s = strings.Replace(s, "ib-device: mlx5_0", `ib-device: "../../x"`, 1)
	_, err = DecodeTest("t.yml", []byte(s))
	for _, want := range []string{
		`t.yml:13: switch.username: "a;b"`,
		`t.yml:21: requester.control-ip: "-oProxyCommand=x"`,
		`t.yml:28: requester.nic.ib-device: "../../x"`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in %v", want, err)
		}
	}
}
