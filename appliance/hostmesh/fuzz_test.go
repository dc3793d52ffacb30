package hostmesh

import (
	"bytes"
	"os"
	"testing"
)

// FuzzProbeDecode: a probe payload off the wire decodes or is refused
// without panicking, and one that decodes encodes back to itself.
func FuzzProbeDecode(f *testing.F) {
	var b [ProbeSize]byte
	(&Probe{HostID: 7, Src: 1, Dst: 2, SPort: 49152, Seq: 99, T1: 123456789, Epoch: 3}).Encode(b[:])
	f.Add(b[:])
	f.Add(b[:ProbeSize-1])
	f.Add(make([]byte, ProbeSize))
	f.Fuzz(func(t *testing.T, data []byte) {
		var p Probe
		if p.Decode(data) != nil {
			return
		}
		var c [ProbeSize]byte
		p.Encode(c[:])
		var q Probe
		if err := q.Decode(c[:]); err != nil || q != p {
			t.Fatalf("%+v re-encoded decodes as %+v %v", p, q, err)
		}
	})
}

// FuzzParsePGDrops: whatever a switch's CLI prints (or whatever answers
// in its place), the PG drop table parses or is refused without
// panicking; every count it yields names a port and a group of the
// header, and the poller turns the counts into valid analyzer records.
func FuzzParsePGDrops(f *testing.F) {
	if b, err := os.ReadFile("testdata/show-pg-drop-sonic.txt"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("Port PG0 PG3\nEthernet0 1,024 N/A\n-----\nEthernet4 18446744073709551615 0\n"))
	f.Add([]byte("Port\nEthernet0\n"))
	f.Add([]byte("Port PG15 PG16\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		counts, bad, err := ParsePGDrops(bytes.NewReader(data))
		if err != nil {
			return
		}
		if bad < 0 {
			t.Fatalf("malformed %d", bad)
		}
		p := PGPoller{PG: 3}
		p.Changes(nil, "s", counts, 1)
		for i, c := range counts {
			if c.Port == "" || c.PG < 0 || c.PG > 15 {
				t.Fatalf("count %+v", c)
			}
			counts[i].Drops++
		}
		for _, r := range p.Changes(nil, "s", counts, 2) {
			if err := r.Valid(); err != nil {
				t.Fatalf("record %+v: %v", r, err)
			}
		}
	})
}
