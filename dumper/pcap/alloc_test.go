package pcap

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"testing"
)

// mallocs returns the exact number of heap allocations made by n calls of f
// (after one warm-up call). testing.AllocsPerRun rounds the average down, so
// an allocation every few hundred packets (say, one per zstd block) would
// hide behind a 0; the exact count cannot.
func mallocs(n int, f func()) uint64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	f()
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	for range n {
		f()
	}
	runtime.ReadMemStats(&b)
	return b.Mallocs - a.Mallocs
}

func TestWritePacketZeroAlloc(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, format := range []Format{FormatPcap, FormatPcapNG} {
		for _, comp := range []Compression{CompressNone, CompressZstd} {
			t.Run(fmt.Sprintf("%v/zstd=%v", format, comp == CompressZstd), func(t *testing.T) {
				w, err := NewWriter(io.Discard, WriterOptions{Format: format, LinkType: LinkTypeEthernet, Compress: comp})
				if err != nil {
					t.Fatal(err)
				}
				defer w.Close()
				gen := newRoceGen(128)
				write := func() {
					ts, d, orig := gen.next()
					if err := w.WritePacket(ts, d, orig); err != nil {
						t.Fatal(err)
					}
				}
				// Warm up past the first buffer flushes and zstd blocks so
				// that lazily sized encoder tables exist.
				for range 100_000 {
					write()
				}
				if a := testing.AllocsPerRun(10_000, write); a != 0 {
					t.Errorf("AllocsPerRun = %v", a)
				}
				// 200k packets of ~144 bytes: ~28 MiB, i.e. ~28 buffer
				// flushes and ~440 zstd blocks.
				if n := mallocs(200_000, write); n != 0 {
					t.Errorf("%d allocations in 200000 WritePacket calls", n)
				}
				if format == FormatPcapNG {
					opts := PacketOptions{Flags: 1, Comment: "mirror"}
					withOpts := func() {
						ts, d, orig := gen.next()
						if err := w.WritePacketOpts(ts, d, orig, opts); err != nil {
							t.Fatal(err)
						}
					}
					if n := mallocs(100_000, withOpts); n != 0 {
						t.Errorf("%d allocations in 100000 WritePacketOpts calls", n)
					}
				}
			})
		}
	}
}

func TestReadZeroAlloc(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, format := range []Format{FormatPcap, FormatPcapNG} {
		for _, comp := range []Compression{CompressNone, CompressZstd} {
			t.Run(fmt.Sprintf("%v/zstd=%v", format, comp == CompressZstd), func(t *testing.T) {
				const n = 500_000
				var buf bytes.Buffer
				buf.Grow(n * 160)
				w, _ := NewWriter(&buf, WriterOptions{Format: format, LinkType: LinkTypeEthernet, Compress: comp})
				gen := newRoceGen(128)
				for range n {
					ts, d, orig := gen.next()
					w.WritePacket(ts, d, orig)
				}
				w.Close()
				r, err := NewReader(bytes.NewReader(buf.Bytes()))
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				var rec Record
				next := func() {
					if err := r.Next(&rec); err != nil {
						t.Fatal(err)
					}
				}
				// The zstd decoder sizes its buffers lazily, to their
				// maximum, the first time it meets each kind of block
				// (RLE literals, a long sequence section...). Warm up well
				// past the window so those one-time allocations are done.
				for range 200_000 {
					next()
				}
				if a := testing.AllocsPerRun(10_000, next); a != 0 {
					t.Errorf("Next: AllocsPerRun = %v", a)
				}
				if m := mallocs(100_000, next); m != 0 {
					t.Errorf("%d allocations in 100000 Next calls", m)
				}
				own := make([]byte, 0, 256)
				readPacket := func() {
					var err error
					if _, own, err = r.ReadPacket(own); err != nil {
						t.Fatal(err)
					}
				}
				if m := mallocs(100_000, readPacket); m != 0 {
					t.Errorf("%d allocations in 100000 ReadPacket calls", m)
				}
			})
		}
	}
}
