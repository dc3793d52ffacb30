package dumper

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
)

// BenchmarkCapture is the worker's per-packet path alone: bursts of 32
// copies of a 314-byte mirrored WRITE into the arena (snap 128).
func BenchmarkCapture(b *testing.B) {
	w, pkts := captureBurst(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += len(pkts) {
		if w.n+len(pkts) > len(w.lens) {
			w.n = 0
		}
		w.capture(pkts)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mpps")
}

// BenchmarkRingCapture runs a dumper worker on one ring queue against a
// sender on another goroutine (on a machine with two cores, each has
// one), sending b.N copies with retries when the ring is full; the rate
// is the dumper's zero-drop capture rate when it keeps up.
func BenchmarkRingCapture(b *testing.B) {
	f, port := newFeeder(b, 1, 4096)
	d, err := New(Config{Port: port, NumPkts: 1 << 20, Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	buf := make([]byte, 2048)
	n := mirrored(buf, 1, 0)
	frame := buf[:n]
	burst := make([]*dpdk.Packet, 32)
	if err := d.Start(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	sent := 0
	for sent < b.N {
		k := min(len(burst), b.N-sent)
		got := f.pool.GetBulk(burst[:k])
		for _, p := range burst[:got] {
			p.CopyFrom(frame)
		}
		off := 0
		for off < got {
			off += f.port.TxBurst(0, burst[off:got])
		}
		sent += got
	}
	for deadline := time.Now().Add(10 * time.Second); d.Status().Workers[0].Received < uint64(b.N); {
		if time.Now().After(deadline) {
			b.Fatal("dumper did not receive everything")
		}
	}
	b.StopTimer()
	st := d.Status()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mpps")
	// What the arena could not hold is counted, not lost silently.
	if st.Captured+st.ArenaFull != uint64(b.N) {
		b.Fatalf("captured %d + arena full %d != %d", st.Captured, st.ArenaFull, b.N)
	}
}

// BenchmarkWrite is Stop's per-copy path: a worker's arena of mirrored
// copies (snap 128, in sequence order, 64 MiB: more than the last-level
// cache, as after a real capture) restored and written to a pcap in the
// test's temporary directory. Besides the wall rate it reports the CPU
// (user and system, the page cache's copy included) per copy, which is
// what the capture benchmark's dumper row adds for Stop.
func BenchmarkWrite(b *testing.B) {
	_, port := newFeeder(b, 1, 64)
	const copies = 1 << 19
	d, err := New(Config{Port: port, NumPkts: copies, Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	w := d.workers[0]
	buf := make([]byte, 2048)
	snap := d.cfg.SnapLen
	// The arena as the capture leaves it; write restores the copies in
	// place, so each round starts from this image.
	image := make([]byte, copies*snap)
	for i := 0; i < copies; i++ {
		n := mirrored(buf, uint64(i+1), 0)
		c := copy(image[i*snap:(i+1)*snap], buf[:n])
		w.lens[i], w.wire[i] = uint16(c), uint32(n)
		w.noteSeq(w.seqOf(i))
	}
	path := filepath.Join(b.TempDir(), "w.pcap")
	b.ReportAllocs()
	b.ResetTimer()
	written := 0
	var cpu time.Duration
	for written < b.N {
		b.StopTimer()
		copy(w.arena, image)
		w.n = copies
		os.Remove(path)
		b.StartTimer()
		c0 := dpdk.ProcessCPU()
		var mal malformed
		file, err := w.write(context.Background(), path, &mal)
		if err != nil || file.Packets != copies {
			b.Fatalf("wrote %d of %d: %v (malformed %v)", file.Packets, copies, err, mal)
		}
		cpu += dpdk.ProcessCPU() - c0
		written += copies
	}
	b.ReportMetric(float64(written)/b.Elapsed().Seconds()/1e6, "Mpps")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(written), "CPU-ns/pkt")
}
