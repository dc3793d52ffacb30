package cli

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dumper/capture"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// TestCaptureBadInput: what the user gets for a filter that does not
// compile, an unknown RoCE field, a port that does not open and
// contradictory flags.
func TestCaptureBadInput(t *testing.T) {
	out := filepath.Join(t.TempDir(), "x.pcapng")
	cases := []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"capture", "-i", "ring:cbad.b", "-w", out, "udp", "prot", "4791"}, 1,
			[]string{"the filter does not compile", "udp prot 4791", "    ^ "}},
		{[]string{"capture", "-i", "ring:cbad.b", "-w", out, "--roce", "qp 17"}, 1,
			[]string{"unknown RoCE field \"qp\"; known fields: qpn, opcode, psn, ecn, cnp, nak, icrc-bad, src-gid, dst-gid, gid"}},
		{[]string{"capture", "-i", "nosuch:x", "-w", out}, 1, []string{"cannot open nosuch:x", "no such driver"}},
		{[]string{"capture", "-i", "afpacket:nosuchif0", "-w", out}, 1, []string{"cannot open afpacket:nosuchif0"}},
		{[]string{"capture", "-w", out}, 2, []string{"want -i PORT and -w FILE"}},
		{[]string{"capture", "-i", "ring:cbad.b", "-w", out, "-b", "files:3"}, 2, []string{"needs -b filesize or -b duration"}},
		{[]string{"capture", "-i", "ring:cbad.b", "-w", out, "-b", "size:3"}, 2, []string{"unknown -b key"}},
		{[]string{"capture", "-i", "ring:cbad.b", "-w", "-", "-b", "filesize:10"}, 1, []string{"standard output is one stream"}},
		{[]string{"capture", "-i", "ring:cbad.b", "-w", out, "-F", "erf"}, 2, []string{"want pcapng or pcap"}},
		{[]string{"capture", "-i", "ring:cbad.b", "-w", "/nonexistent/dir/x.pcapng"}, 1, []string{"no such file or directory"}},
	}
	for _, c := range cases {
		code, _, errOut := runCLI(t, c.args...)
		if code != c.code {
			t.Errorf("%v: exit %d, want %d\n%s", c.args, code, c.code, errOut)
		}
		for _, w := range c.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%v: stderr lacks %q:\n%s", c.args, w, errOut)
			}
		}
	}
}

// sendRing queues n RoCE frames (QP 17 and 18 in turn, payload = index)
// on ring link name's end a, for a capture on end b.
func sendRing(t *testing.T, name string, n int) {
	t.Helper()
	pool, err := dpdk.NewPool(name+"-tx", n+16, 0)
	if err != nil {
		t.Fatal(err)
	}
	port, err := dpdk.Open("ring:"+name+".a", dpdk.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		b := roce.Builder{SrcGID: roce.GIDFromAddr(netip.MustParseAddr("10.1.0.1")), DstGID: roce.GIDFromAddr(netip.MustParseAddr("10.1.0.2")),
			HopLimit: 64, Opcode: roce.RCWriteOnly, DestQP: uint32(17 + i%2), PSN: uint32(i)}
		payload := binary.BigEndian.AppendUint32(nil, uint32(i))
		p := pool.Get()
		l, err := b.Build(p.Buffer(), payload)
		if err != nil {
			t.Fatal(err)
		}
		_ = p.SetLen(l)
		p.Timestamp = 1_700_000_000_000_000_000 + int64(i)*1000
		if port.TxBurst(0, []*dpdk.Packet{p}) != 1 {
			t.Fatal("ring full")
		}
	}
}

// TestCaptureStdoutTshark: -w - writes one pcapng stream that tshark reads
// from standard input without a warning, decoding every frame as RoCE.
func TestCaptureStdoutTshark(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark not installed")
	}
	sendRing(t, "cstdout", 100)
	code, out, errOut := runCLI(t, "capture", "-i", "ring:cstdout.b", "-w", "-", "-c", "50", "-q", "--roce", "qpn 17")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, "stopped by count") || !strings.Contains(errOut, "0x000011") {
		t.Errorf("the summary goes to stderr with -w -:\n%s", errOut)
	}
	cmd := exec.Command(tshark, "-r", "-", "-T", "fields", "-e", "infiniband.bth.destqp", "-e", "infiniband.bth.psn")
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(out), &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("tshark -r -: %v\n%s", err, stderr.String())
	}
	if w := tsharkWarnings(stderr.String()); w != "" {
		t.Errorf("tshark warned: %s", w)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 50 {
		t.Fatalf("tshark read %d frames, want the 50 of QP 17:\n%s", len(lines), stdout.String())
	}
	for i, l := range lines {
		if want := fmt.Sprintf("0x000011\t%d", 2*i); l != want {
			t.Fatalf("frame %d: tshark says %q, want %q", i, l, want)
		}
	}
}

// TestCaptureJSON: --json carries the counters, the per-QP table and the
// files.
func TestCaptureJSON(t *testing.T) {
	sendRing(t, "cjson", 40)
	path := filepath.Join(t.TempDir(), "c.pcap")
	code, out, errOut := runCLI(t, "capture", "-i", "ring:cjson.b", "-w", path, "-F", "pcap", "-c", "40", "-q", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res capture.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if res.Stats.Written != 40 || len(res.QPs) != 2 || res.QPs[0].Packets != 20 || len(res.Files) != 1 || res.Files[0].Packets != 40 {
		t.Errorf("result %+v", res)
	}
}

// tsharkWarnings drops tshark's notice about running as root.
func tsharkWarnings(stderr string) string {
	var keep []string
	for _, l := range strings.Split(stderr, "\n") {
		if l != "" && !strings.HasPrefix(l, "Running as user \"root\"") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
