package luminatofino

import (
	"errors"
	"strings"
	"testing"
)

// bfshellOutput is what bfshell -b prints around the script's lines.
const bfshellOutput = `Using SDE /opt/bf-sde-9.13.0
bfrt_python /tmp/counters.py
cwd : /root

We've found 1 p4 programs for device 0:
injector
bfrt> lumina-counter {"bytes": 6400, "dev_port": 128, "kind": "counter", "name": "rx", "packets": 100, "port": "requester", "role": "traffic"}
lumina-counter {"bytes": 6400, "dev_port": 128, "kind": "counter", "name": "rx_roce", "packets": 90, "port": "requester", "role": "traffic"}
lumina-counter {"bytes": 100, "dev_port": 128, "kind": "counter", "name": "tx", "packets": 80, "port": "requester", "role": "traffic"}
lumina-counter {"bytes": 0, "dev_port": 128, "kind": "counter", "name": "mirrored", "packets": 0, "port": "requester", "role": "traffic"}
lumina-counter {"bytes": 0, "dev_port": 128, "kind": "counter", "name": "drop", "packets": 2, "port": "requester", "role": "traffic"}
lumina-counter {"bytes": 0, "dev_port": 128, "kind": "counter", "name": "ecn", "packets": 10, "port": "requester", "role": "traffic"}
lumina-counter {"bytes": 0, "dev_port": 128, "kind": "counter", "name": "bit-error", "packets": 0, "port": "requester", "role": "traffic"}
lumina-counter {"bytes": 0, "dev_port": 136, "kind": "counter", "name": "mirrored", "packets": 150, "port": "dumper0", "role": "mirror"}
lumina-counter {"bytes": 0, "dev_port": 132, "kind": "counter", "name": "rx_roce", "packets": 60, "port": "responder", "role": "traffic"}
lumina-counter {"kind": "register", "name": "mirror_seq_lo", "values": [0, 150, 0, 0]}
lumina-counter {"kind": "register", "name": "mirror_seq_hi", "values": [0, 0, 0, 0]}
lumina-counter {"kind": "end", "records": 11}
bfrt> exit
`

func TestParseCounters(t *testing.T) {
	c, err := ParseCounters(strings.NewReader(bfshellOutput))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Ports) != 3 || c.Ports[0].Name != "requester" || c.Ports[1].Name != "dumper0" {
		t.Fatalf("ports %+v", c.Ports)
	}
	r := c.Ports[0]
	if r.RxPackets != 100 || r.RxBytes != 6400 || r.RxRoCE != 90 || r.TxPackets != 80 || r.TxBytes != 100 ||
		r.Dropped != 2 || r.ECNMarked != 10 || r.DevPort != 128 || r.Role != "traffic" {
		t.Errorf("requester %+v", r)
	}
	if c.MirrorSeq != 150 || len(c.PipeSeq) != 4 || c.PipeSeq[1] != 150 {
		t.Errorf("mirror sequence %d, per pipe %v", c.MirrorSeq, c.PipeSeq)
	}
	s := c.Stats()
	if s.RxRoCE != 150 || s.Mirrored != 150 || len(s.Ports) != 3 || s.Ports[1].Role != "mirror" || s.Ports[1].Mirrored != 150 {
		t.Errorf("stats %+v", s)
	}
}

func TestParseCountersSequenceCarry(t *testing.T) {
	in := `lumina-counter {"kind": "register", "name": "mirror_seq_lo", "values": [4294967295, 3]}
lumina-counter {"kind": "register", "name": "mirror_seq_hi", "values": [0, 2]}
lumina-counter {"kind": "end", "records": 2}
`
	c, err := ParseCounters(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if c.MirrorSeq != 2<<32|3 || c.PipeSeq[0] != 1<<32-1 {
		t.Errorf("sequence %d per pipe %v", c.MirrorSeq, c.PipeSeq)
	}
}

func TestParseCountersErrors(t *testing.T) {
	lines := strings.Split(strings.TrimSpace(bfshellOutput), "\n")
	for _, c := range []struct{ name, in, want string }{
		{"empty", "", "did the script run"},
		{"no records", "bfrt> Error: program injector not found\n", "did the script run"},
		{"cut short", strings.Join(lines[:9], "\n"), "cut short"},
		{"count", strings.Replace(bfshellOutput, `"records": 11`, `"records": 12`, 1), "printed 12 records, 11 arrived"},
		{"json", strings.Replace(bfshellOutput, `"packets": 90`, `"packets": -90`, 1), "line 8"},
		{"unknown field", strings.Replace(bfshellOutput, `"packets": 90`, `"pkts": 90`, 1), "line 8"},
		{"counter", strings.Replace(bfshellOutput, `"name": "ecn"`, `"name": "pfc"`, 1), `unknown counter "pfc"`},
		{"register", strings.Replace(bfshellOutput, `"mirror_seq_hi"`, `"seq"`, 1), `unknown register "seq"`},
		{"kind", strings.Replace(bfshellOutput, `"kind": "register"`, `"kind": "table"`, 1), `unknown record kind "table"`},
		{"no port", strings.Replace(bfshellOutput, `"port": "requester", "role": "traffic"}`, `"port": "", "role": "traffic"}`, 1), "names no port"},
		{"after end", bfshellOutput + lines[6] + "\n", "after the end record"},
		{"pipes", strings.Replace(bfshellOutput, `"values": [0, 0, 0, 0]`, `"values": [0, 0]`, 1), "pipes"},
	} {
		_, err := ParseCounters(strings.NewReader(c.in))
		if err == nil || !errors.Is(err, ErrCounters) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.want)
		}
	}
}
