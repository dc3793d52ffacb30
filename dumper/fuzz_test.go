package dumper

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/rdma-appliance/appliance/dumper/pcap"
)

// FuzzWrite puts arbitrary frames into a worker's arena, as a mirror port
// could deliver them, and writes the capture: no input may crash the
// dumper, every frame is either written or counted as malformed, and the
// file reads back.
func FuzzWrite(f *testing.F) {
	buf := make([]byte, 2048)
	f.Add(buf[:mirrored(buf, 1, 0)], []byte{})
	f.Add(buf[:mirrored(buf, 2, 0)], buf[:60])
	f.Add([]byte{1, 2, 3}, []byte{})
	_, port := newFeeder(f, 1, 64)
	d, err := New(Config{Port: port, NumPkts: 2, SnapLen: 128, Dir: f.TempDir()})
	if err != nil {
		f.Fatal(err)
	}
	w := d.workers[0]
	f.Fuzz(func(t *testing.T, a, b []byte) {
		w.reset(0)
		for _, fr := range [][]byte{a, b} {
			i := w.n
			w.lens[i] = uint16(copy(w.arena[i*128:(i+1)*128], fr))
			w.wire[i] = uint32(len(fr))
			w.noteSeq(i)
			w.n++
		}
		var mal malformed
		path := filepath.Join(t.TempDir(), "f.pcap")
		fl, err := w.write(context.Background(), path, &mal)
		if err != nil {
			t.Fatal(err)
		}
		var bad uint64
		for _, v := range mal {
			bad += v
		}
		if fl.Packets+bad != 2 {
			t.Fatalf("%d written, %d malformed of 2", fl.Packets, bad)
		}
		r, err := pcap.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		var rec pcap.Record
		n := uint64(0)
		for r.Next(&rec) == nil {
			n++
		}
		if n != fl.Packets {
			t.Fatalf("read %d of %d", n, fl.Packets)
		}
	})
}
