package lab

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/dumper/pcap"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

func TestDefaultSpecValid(t *testing.T) {
	s, err := LoadSpec("")
	if err != nil {
		t.Fatal(err)
	}
	if !s.Wire.Enabled || s.Wire.Rounds < 1 {
		t.Fatalf("default spec %+v", s)
	}
}

func TestWireStage(t *testing.T) {
	s, err := LoadSpec("")
	if err != nil {
		t.Fatal(err)
	}
	s.Wire.Rounds = 50
	s.Wire.Compress = true
	dir := t.TempDir()
	l := &Lab{Spec: s, OutDir: dir}
	rep, err := l.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Pass() {
		var b strings.Builder
		rep.WriteSummary(&b)
		t.Fatalf("lab failed:\n%s", b.String())
	}
	row := rep.Rows[0]
	want := 2 * 50 * len(wireOpcodes())
	if row.Figures["received"] != strconv.Itoa(want) {
		t.Fatalf("received %s, want %d", row.Figures["received"], want)
	}
	// tshark decodes opcode, destination QP and PSN of the capture as we do
	// (every opcode class, IPv4 and IPv6); only a machine without tshark skips it.
	if _, err := exec.LookPath("tshark"); err != nil {
		t.Logf("tshark not installed: the decode cross-check did not run (CI installs it)")
	} else if !strings.HasPrefix(row.Figures["tshark"], "agrees(") {
		t.Fatalf("tshark cross-check: %s", row.Figures["tshark"])
	}
	// The capture holds every packet, each a valid RoCEv2 frame; the zstd copy
	// holds the same.
	for _, name := range []string{"wire.pcap", "wire.pcap.zst"} {
		r, err := pcap.Open(l.Path(name))
		if err != nil {
			t.Fatal(err)
		}
		var p roce.Packet
		n, last := 0, int64(0)
		buf := make([]byte, 0, 8192)
		for {
			rec, data, err := r.ReadPacket(buf[:0])
			if err != nil {
				break
			}
			if err := roce.Parse(data, &p); err != nil || p.VerifyICRC(data) != nil {
				t.Fatalf("%s packet %d: %v", name, n, err)
			}
			if rec.Timestamp < last {
				t.Fatalf("%s: timestamps go back at packet %d", name, n)
			}
			last = rec.Timestamp
			n++
		}
		r.Close()
		if n != want {
			t.Fatalf("%s holds %d packets, want %d", name, n, want)
		}
	}
	var sum Report
	b, err := os.ReadFile(l.Path("summary.json"))
	if err != nil || json.Unmarshal(b, &sum) != nil || len(sum.Rows) != 1 || !sum.Rows[0].Pass {
		t.Fatalf("summary.json: %v %s", err, b)
	}
}
