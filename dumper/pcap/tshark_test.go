package pcap

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestTsharkCompat checks that Wireshark's own parser decodes our files
// with the exact nanosecond timestamps: the whole point of writing
// standard formats is that the standard tools agree with us.
func TestTsharkCompat(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark not installed (apt-get install tshark); skipping Wireshark compatibility check")
	}
	type pkt struct {
		ts    int64
		dport uint16
	}
	pkts := []pkt{
		{1_700_000_000_000_000_001, 4791},
		{1_700_000_000_123_456_789, 53},
		{1_700_000_001_999_999_999, 65535},
		{1_000_000_000, 1}, // 1 s after the epoch: exercises zero padding of the seconds
	}
	cases := []struct {
		name string
		opts WriterOptions
		ext  string
	}{
		{"pcap-ns", WriterOptions{Format: FormatPcap}, "pcap"},
		{"pcap-us", WriterOptions{Format: FormatPcap, Microsecond: true}, "pcap"},
		{"pcapng", WriterOptions{Format: FormatPcapNG, InterfaceName: "mlx5_0", Application: "pcap test"}, "pcapng"},
		{"pcap-ns-zstd", WriterOptions{Format: FormatPcap, Compress: CompressZstd}, "pcap.zst"},
		{"pcapng-zstd", WriterOptions{Format: FormatPcapNG, Compress: CompressZstd}, "pcapng.zst"},
	}
	dir := t.TempDir()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, c.name+"."+c.ext)
			c.opts.LinkType = LinkTypeEthernet
			w, err := Create(path, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			for i, p := range pkts {
				frame := udpFrame(uint16(40000+i), p.dport, []byte(fmt.Sprintf("packet %d", i)))
				if c.opts.Format == FormatPcapNG && i == 1 {
					err = w.WritePacketOpts(p.ts, frame, 0, PacketOptions{Flags: 1, Comment: "inbound"})
				} else {
					err = w.WritePacket(p.ts, frame, 0)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(tshark, "-r", path, "-T", "fields", "-e", "frame.time_epoch", "-e", "udp.dstport")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				if c.opts.Compress == CompressZstd && strings.Contains(stderr.String(), "format TShark understands") {
					t.Skip("this tshark was built without zstd support")
				}
				t.Fatalf("tshark: %v\n%s", err, stderr.String())
			}
			lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
			if len(lines) != len(pkts) {
				t.Fatalf("tshark printed %d lines, want %d:\n%s\n%s", len(lines), len(pkts), stdout.String(), stderr.String())
			}
			for i, line := range lines {
				f := strings.Split(line, "\t")
				if len(f) != 2 {
					t.Fatalf("line %q", line)
				}
				ts, err := parseEpoch(f[0])
				if err != nil {
					t.Fatal(err)
				}
				want := pkts[i].ts
				if c.opts.Microsecond {
					want -= want % 1000
				}
				if ts != want {
					t.Errorf("packet %d: tshark time %s = %d ns, want %d", i, f[0], ts, want)
				}
				if f[1] != strconv.Itoa(int(pkts[i].dport)) {
					t.Errorf("packet %d: tshark udp.dstport %q, want %d", i, f[1], pkts[i].dport)
				}
			}
		})
	}
}

// parseEpoch parses tshark's "seconds.fraction" without going through a
// float64, which cannot hold nanoseconds at today's epoch.
func parseEpoch(s string) (int64, error) {
	secStr, frac, _ := strings.Cut(s, ".")
	sec, err := strconv.ParseInt(secStr, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("time %q: %v", s, err)
	}
	if len(frac) > 9 {
		return 0, fmt.Errorf("time %q: more than 9 fractional digits", s)
	}
	frac += strings.Repeat("0", 9-len(frac))
	ns, err := strconv.ParseInt(frac, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("time %q: %v", s, err)
	}
	return sec*1e9 + ns, nil
}
