package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/dumper/pcap"
)

// TestPcapDamaged: `pcap info` on a truncated capture summarises what
// reads and exits 1, as capinfos; a failed `pcap convert` leaves no
// partial output; flags may follow the files.
func TestPcapDamaged(t *testing.T) {
	dir := t.TempDir()
	whole := filepath.Join(dir, "whole.pcap")
	w, err := pcap.Create(whole, pcap.WriterOptions{LinkType: pcap.LinkTypeEthernet, Nanosecond: true})
	if err != nil {
		t.Fatal(err)
	}
	frame := make([]byte, 100)
	for i := range 10 {
		if err := w.WritePacket(int64(i)*1000, frame, len(frame)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(whole)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(dir, "cut.pcap")
	if err := os.WriteFile(cut, b[:len(b)-50], 0o644); err != nil {
		t.Fatal(err)
	}

	if code, out, errOut := runCLI(t, "pcap", "info", whole, "--json"); code != 0 || !strings.Contains(out, `"packets": 10`) {
		t.Fatalf("flags after the file: %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut := runCLI(t, "pcap", "info", cut)
	if code != 1 || !strings.Contains(out, "packets 9") || !strings.Contains(out, "stopped early") || !strings.Contains(errOut, "cut.pcap") {
		t.Fatalf("truncated capture: %d\n%s\n%s", code, out, errOut)
	}

	dst := filepath.Join(dir, "out.pcapng")
	if code, _, errOut := runCLI(t, "pcap", "convert", "--format", "pcapng", cut, dst); code == 0 {
		t.Fatalf("converting a truncated capture succeeded: %s", errOut)
	}
	if _, err := os.Stat(dst); !os.IsNotExist(err) {
		t.Fatalf("a failed convert left %s: %v", dst, err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".pcap-convert-*")); len(left) != 0 {
		t.Fatalf("scratch left behind: %v", left)
	}
	if code, out, errOut := runCLI(t, "pcap", "convert", whole, dst, "--format", "pcapng"); code != 0 || !strings.Contains(out, "wrote 10 packets") {
		t.Fatalf("convert: %d %s %s", code, out, errOut)
	}
}
