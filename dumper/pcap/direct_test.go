package pcap

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestDirectIO writes the same packets with and without DirectIO, in both
// formats, with a Flush in the middle or none, and through Tail/Commit as a
// capture loop does: the files must be identical byte for byte. Where the
// test's filesystem takes O_DIRECT (Linux, not tmpfs), the writer must
// have used it.
func TestDirectIO(t *testing.T) {
	dir := t.TempDir()
	for _, format := range []Format{FormatPcap, FormatPcapNG} {
		for _, flushAt := range []int{-1, 7777} {
			for _, tail := range []bool{false, true} {
				name := fmt.Sprintf("f%d-flush%d-tail%v", format, flushAt, tail)
				t.Run(name, func(t *testing.T) {
					var files [2][]byte
					for i, direct := range []bool{false, true} {
						path := filepath.Join(dir, fmt.Sprintf("%s-%v.pcap", name, direct))
						w, err := Create(path, WriterOptions{Format: format, LinkType: LinkTypeEthernet,
							SnapLen: 128, DirectIO: direct, BufferSize: 512 << 10})
						if err != nil {
							t.Fatal(err)
						}
						if direct && runtime.GOOS == "linux" && w.align == 0 && !noDirectIO(t, dir) {
							t.Fatal("the filesystem takes O_DIRECT but the writer did not use it")
						}
						gen := newRoceGen(200)
						for k := range 30000 {
							if k == flushAt {
								if err := w.Flush(); err != nil {
									t.Fatal(err)
								}
								if w.align != 0 {
									t.Fatal("Flush left direct I/O on with a partial block written")
								}
							}
							ts, d, orig := gen.next()
							if tail && format == FormatPcapNG {
								caplen := min(len(d), 128)
								b, err := w.Tail(EPBLen(caplen))
								if err != nil {
									t.Fatal(err)
								}
								PutEPB(b[:EPBLen(caplen)], uint64(ts), d[:caplen], orig)
								if err := w.Commit(EPBLen(caplen)); err != nil {
									t.Fatal(err)
								}
								continue
							}
							if err := w.WritePacket(ts, d, orig); err != nil {
								t.Fatal(err)
							}
						}
						if err := w.Close(); err != nil {
							t.Fatal(err)
						}
						if files[i], err = os.ReadFile(path); err != nil {
							t.Fatal(err)
						}
					}
					if !bytes.Equal(files[0], files[1]) {
						t.Fatalf("direct file (%d bytes) differs from the buffered one (%d bytes)",
							len(files[1]), len(files[0]))
					}
					if recs, _ := readAll(t, files[1]); len(recs) != 30000 {
						t.Fatalf("read %d of 30000 records", len(recs))
					}
				})
			}
		}
	}
}

// noDirectIO reports whether dir's filesystem refuses O_DIRECT.
func noDirectIO(t *testing.T, dir string) bool {
	f, direct, err := createDirect(filepath.Join(dir, "probe"))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	return !direct
}
