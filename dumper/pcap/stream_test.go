package pcap

import (
	"fmt"
	"io"
	"runtime"
	"testing"
)

type countingWriter struct{ n int64 }

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}

// heapWatch samples HeapInuse and remembers the peak. Sampling (rather than
// one reading at the end) catches a buffer that grows and is later freed.
type heapWatch struct{ peak uint64 }

func (h *heapWatch) sample() {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	h.peak = max(h.peak, m.HeapInuse)
}

// TestStreamingMemory pushes 200 MB of packets through a writer and,
// through a pipe, a reader, and checks the heap never holds more than a small
// multiple of the buffers: a 10 GB trace must not need 10 GB.
func TestStreamingMemory(t *testing.T) {
	total := int64(200 << 20)
	if raceEnabled || testing.Short() {
		total = 20 << 20
	}
	const limit = 48 << 20
	for _, format := range []Format{FormatPcap, FormatPcapNG} {
		for _, comp := range []Compression{CompressNone, CompressZstd} {
			t.Run(fmt.Sprintf("%v/zstd=%v", format, comp == CompressZstd), func(t *testing.T) {
				runtime.GC()
				var hw heapWatch
				hw.sample()
				base := hw.peak
				hw.peak = 0

				pr, pw := io.Pipe()
				opts := WriterOptions{Format: format, LinkType: LinkTypeEthernet, Compress: comp}
				done := make(chan error, 1)
				var written, packets, fed int64
				go func() {
					cw := &countingWriter{}
					w, err := NewWriter(io.MultiWriter(pw, cw), opts)
					if err != nil {
						done <- err
						return
					}
					gen := newRoceGen(128)
					for i := 0; fed < total; i++ {
						ts, d, orig := gen.next()
						if err := w.WritePacket(ts, d, orig); err != nil {
							done <- err
							return
						}
						packets++
						fed += int64(len(d))
						if i%100_000 == 0 {
							hw.sample()
						}
					}
					err = w.Close()
					written = cw.n
					pw.CloseWithError(err)
					done <- err
				}()

				r, err := NewReader(pr)
				if err != nil {
					t.Fatal(err)
				}
				var rec Record
				var read, bytesIn int64
				for {
					err := r.Next(&rec)
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					read++
					bytesIn += int64(rec.CapLen)
					if read%100_000 == 0 {
						hw.sample()
					}
				}
				r.Close()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				hw.sample()
				if read != packets {
					t.Fatalf("read %d of %d packets", read, packets)
				}
				grown := int64(hw.peak) - int64(base)
				t.Logf("%d packets, %d MB packet data, %d MB written; peak heap in use %.1f MiB (+%.1f MiB)",
					packets, bytesIn>>20, written>>20, float64(hw.peak)/(1<<20), float64(grown)/(1<<20))
				if hw.peak > limit {
					t.Errorf("peak HeapInuse %d MiB exceeds %d MiB", hw.peak>>20, limit>>20)
				}
			})
		}
	}
}
