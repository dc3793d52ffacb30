package hostmesh

import (
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
