package trace

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/rdma-appliance/appliance/dumper/pcap"
	"github.com/rdma-appliance/appliance/internal/mirror"
)

// writeSplit streams copies 1..n straight into one file per dumper (equal
// weights), never holding the trace in memory.
func writeSplit(t testing.TB, dir string, dumpers, n int) []Source {
	t.Helper()
	weights := make([]int, dumpers)
	for i := range weights {
		weights[i] = 1
	}
	w, err := mirror.NewWRR(weights)
	if err != nil {
		t.Fatal(err)
	}
	var srcs []Source
	var ws []*pcap.Writer
	for i := range dumpers {
		p := filepath.Join(dir, fmt.Sprintf("d%d.pcap", i))
		pw, err := pcap.Create(p, pcap.WriterOptions{LinkType: pcap.LinkTypeEthernet, SnapLen: snapLen})
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, pw)
		srcs = append(srcs, Source{Name: fmt.Sprintf("d%d", i), Path: p})
	}
	g := newGen()
	for seq := uint64(1); seq <= uint64(n); seq++ {
		p := g.make(seq)
		if err := ws[w.Next()].WritePacket(p.ts, p.data, p.orig); err != nil {
			t.Fatal(err)
		}
	}
	for _, pw := range ws {
		if err := pw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return srcs
}

// The benchmark trace: 4 dumpers x 250k copies, written once.
const (
	benchDumpers = 4
	benchPackets = 4 * 250_000
)

var (
	benchOnce sync.Once
	benchDir  string
	benchSrcs []Source
)

func TestMain(m *testing.M) {
	code := m.Run()
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}

func benchSources(b *testing.B) []Source {
	benchOnce.Do(func() {
		dir, err := os.MkdirTemp("", "trace-bench")
		if err != nil {
			b.Fatal(err)
		}
		benchDir = dir
		benchSrcs = writeSplit(b, dir, benchDumpers, benchPackets)
	})
	if benchSrcs == nil {
		b.Fatal("no benchmark trace")
	}
	return benchSrcs
}

// BenchmarkMerge merges and checks 4 dumper files of 250k copies each,
// without output (check) and writing a nanosecond pcap (write).
func BenchmarkMerge(b *testing.B) {
	srcs := benchSources(b)
	opts := Options{Mirrored: benchPackets, RxRoCE: benchPackets, FirstSeq: 1}
	opts.Assign, _ = ScheduleAssign(names(benchDumpers), []int{1, 1, 1, 1}, 1)
	for _, write := range []bool{false, true} {
		name := "check"
		if write {
			name = "write"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var out *pcap.Writer
				if write {
					var err error
					if out, err = pcap.NewWriter(io.Discard, pcap.WriterOptions{LinkType: pcap.LinkTypeEthernet}); err != nil {
						b.Fatal(err)
					}
				}
				rep, err := Merge(context.Background(), srcs, out, opts)
				if err != nil || rep.Packets != benchPackets {
					b.Fatalf("%v %d", err, rep.Packets)
				}
				if out != nil {
					out.Close()
				}
			}
			b.ReportMetric(float64(benchPackets)*float64(b.N)/b.Elapsed().Seconds(), "packets/s")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchPackets, "ns/packet")
		})
	}
}

// mallocs counts the heap allocations of f.
func mallocs(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.Mallocs - a.Mallocs
}

// TestMergeAllocs: merging allocates per call, not per packet: 50 times
// more packets cost (almost) no more allocations.
func TestMergeAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	small := writeSplit(t, t.TempDir(), 3, 2_000)
	large := writeSplit(t, t.TempDir(), 3, 100_000)
	run := func(srcs []Source, n int) uint64 {
		out, err := pcap.NewWriter(io.Discard, pcap.WriterOptions{LinkType: pcap.LinkTypeEthernet})
		if err != nil {
			t.Fatal(err)
		}
		return mallocs(func() {
			rep, err := Merge(context.Background(), srcs, out, counted(n))
			if err != nil || rep.Packets != uint64(n) {
				t.Fatal(err)
			}
		})
	}
	run(small, 2_000) // warm up
	a, b := run(small, 2_000), run(large, 100_000)
	t.Logf("allocations: %d for 2k packets, %d for 100k", a, b)
	// The writer's buffer grows by doubling up to 512 KiB: a handful more.
	if b > a+16 {
		t.Fatalf("%d allocations for 2k packets, %d for 100k: allocating per packet", a, b)
	}
}
