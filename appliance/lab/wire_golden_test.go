package lab

import (
	"bytes"
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rdma-appliance/appliance/dumper/pcap"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/golden/* from the current stages")

// TestWireGolden pins what the wire stage leaves that does not depend on
// timing: its row (without the rate and the tshark verdict, which depend
// on the machine) and the frames of both captures as a sorted list of
// digests (the queues' receivers interleave differently on every run),
// with the pcap's size, at a snap length that cuts the larger frames.
func TestWireGolden(t *testing.T) {
	s, err := LoadSpec("")
	if err != nil {
		t.Fatal(err)
	}
	s.Wire.Rounds, s.Wire.Compress, s.Wire.Queues, s.Wire.SnapLen, s.Wire.Payload = 3, true, 3, 200, 300
	l := &Lab{Spec: s, OutDir: t.TempDir(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	var row Row
	if err := runWire(context.Background(), l, &row); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	fmt.Fprintf(&out, "ran: %s\npass: %v\n", row.Ran, row.Pass)
	for _, name := range row.Order {
		v := row.Figures[name]
		if name == "rx+capture" || name == "tshark" {
			v = "(varies)"
		}
		fmt.Fprintf(&out, "figure %s: %s\n", name, v)
	}
	for _, name := range []string{"wire.pcap", "wire.pcap.zst"} {
		r, err := pcap.Open(l.Path(name))
		if err != nil {
			t.Fatal(err)
		}
		var digests []string
		for {
			rec, data, err := r.ReadPacket(nil)
			if err != nil {
				break
			}
			digests = append(digests, fmt.Sprintf("%x %d/%d", sha256.Sum256(data), len(data), rec.OrigLen))
		}
		r.Close()
		slices.Sort(digests)
		fmt.Fprintf(&out, "%s: %d frames\n", name, len(digests))
		for _, d := range digests {
			fmt.Fprintln(&out, d)
		}
	}
	path := filepath.Join("testdata", "golden", "wire.txt")
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update-golden to write it)", err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("the wire stage's output differs from %s (%d bytes, want %d)", path, out.Len(), len(want))
	}
}
