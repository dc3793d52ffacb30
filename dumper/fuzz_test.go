package dumper

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/rdma-appliance/appliance/dumper/pcap"
	"github.com/rdma-appliance/appliance/internal/mirror"
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

// FuzzRestoreFast holds Stop's fast path for the common copy equal to its
// general path: where restoreFast takes a frame, restore must take it too,
// leave the same bytes and return the same timestamp and length.
func FuzzRestoreFast(f *testing.F) {
	buf := make([]byte, 2048)
	for seq := uint64(1); seq <= 6; seq++ {
		n := mirrored(buf, seq, 1e9)
		f.Add(append([]byte(nil), buf[:min(n, 128)]...), n)
		f.Add(append([]byte(nil), buf[:n]...), n)
	}
	f.Add([]byte{1, 2, 3}, 3)
	f.Fuzz(func(t *testing.T, frame []byte, arrived int) {
		fast := append([]byte(nil), frame...)
		ts, orig, ok := restoreFast(fast, mirror.DefaultRewritePort, arrived)
		if !ok {
			if !bytes.Equal(fast, frame) {
				t.Fatal("the fast path changed a frame it did not take")
			}
			return
		}
		gen := append([]byte(nil), frame...)
		gts, gorig, bad := restore(gen, mirror.DefaultRewritePort, arrived)
		if bad >= 0 {
			t.Fatalf("the fast path took a frame the general path counts %s", malNames[bad])
		}
		if ts != gts || orig != gorig || !bytes.Equal(fast, gen) {
			t.Fatalf("fast ts %d len %d %x\ngeneral ts %d len %d %x", ts, orig, fast, gts, gorig, gen)
		}
	})
}

// TestRestoreFastTakes checks that the fast path is the one IPv4 copies
// take (FuzzRestoreFast would pass on a path that takes nothing), IPv4 and
// IPv6, whole or cut by the snap length, and that it leaves tagged copies
// to the general path.
func TestRestoreFastTakes(t *testing.T) {
	buf := make([]byte, 2048)
	for seq := uint64(1); seq <= 4; seq++ {
		n := mirrored(buf, seq, 1e9)
		for _, l := range []int{n, 128} {
			_, orig, ok := restoreFast(append([]byte(nil), buf[:l]...), mirror.DefaultRewritePort, l)
			if !ok || orig != n {
				t.Fatalf("seq %d, %d of %d bytes: taken %v, original length %d", seq, l, n, ok, orig)
			}
		}
	}
	n := mirrored(buf, 1, 1e9)
	tagged := append(append(append([]byte(nil), buf[:12]...), 0x81, 0, 0, 5), buf[12:n]...)
	if _, _, ok := restoreFast(tagged, mirror.DefaultRewritePort, len(tagged)); ok {
		t.Fatal("the fast path took a VLAN-tagged copy")
	}
	if _, _, bad := restore(tagged, mirror.DefaultRewritePort, len(tagged)); bad >= 0 {
		t.Fatalf("the general path refused a VLAN-tagged copy: %s", malNames[bad])
	}
}
