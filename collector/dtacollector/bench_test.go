package dtacollector

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/internal/dtamem"
	"github.com/rdma-appliance/appliance/verbs/soft"
)

// benchCollector is a collector with a Key-Write table of 2^20 slots
// holding keys 0..keys-1 with N = 2, written as the RNIC would.
func benchCollector(b *testing.B, keys uint32) *Collector {
	b.Helper()
	s, err := DecodeSpec("bench.yml", []byte("exchange: 127.0.0.1:0\nredundancy: 2\nkey-write: {slots: 1048576}\n"))
	if err != nil {
		b.Fatal(err)
	}
	id := beds.Add(1)
	l := ring.NewLink(fmt.Sprintf("dtab%d", id), ring.Config{})
	dev, err := soft.NewDevice(fmt.Sprintf("dtabench%d", id), l.B(), soft.Config{GIDs: []netip.Addr{collIP}})
	if err != nil {
		b.Fatal(err)
	}
	c, err := New(s, dev, Options{Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close(); dev.Close(); l.A().Close(); l.B().Close() })
	kw := c.regions.KeyWrite
	for k := range keys {
		for n := range 2 {
			off := dtamem.Slot(k, n, kw.Slots) * 8
			binary.BigEndian.PutUint32(c.kwMem[off:], dtamem.KeyChecksum(k))
			binary.BigEndian.PutUint32(c.kwMem[off+4:], k)
		}
	}
	return c
}

// BenchmarkKeyWriteQuery is the collector's Key-Write query rate with
// N = 2 over a table of 2^20 slots, without and with consensus.
func BenchmarkKeyWriteQuery(b *testing.B) {
	const keys = 1 << 18
	c := benchCollector(b, keys)
	for _, consensus := range []int{0, 2} {
		b.Run(fmt.Sprintf("consensus=%d", consensus), func(b *testing.B) {
			found := 0
			k := uint32(0)
			b.ReportAllocs()
			for b.Loop() {
				// A stride through the keys, so queries miss the cache as
				// real ones do.
				k = (k + 40503) % keys
				if _, err := c.KeyWrite(k, consensus); err == nil {
					found++
				}
			}
			if found == 0 {
				b.Fatal("no key found")
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mqueries/s")
		})
	}
}

// BenchmarkPoller is one poller's rate through the service's poll path
// (the loop a poller goroutine runs, without the backoff) over a ring of
// new entries.
func BenchmarkPoller(b *testing.B) {
	const entries = 1 << 16
	mem := make([]byte, entries*dtamem.AppendEntryLen)
	for i := uint64(0); i < entries; i++ {
		binary.BigEndian.PutUint32(mem[i*dtamem.AppendEntryLen:], uint32(i))
		binary.BigEndian.PutUint32(mem[i*dtamem.AppendEntryLen+4:], uint32(i)+1)
	}
	for _, withCallback := range []bool{false, true} {
		b.Run(fmt.Sprintf("callback=%v", withCallback), func(b *testing.B) {
			var sum uint64
			var cb func(uint32, uint64, uint32)
			if withCallback {
				cb = func(_ uint32, _ uint64, d uint32) { sum += uint64(d) }
			}
			read := 0
			b.ReportAllocs()
			for read < b.N {
				l := newList(1, ListSpec{ID: 1, Pollers: 1, Recent: DefaultRecent}, mem, dtamem.LayoutPerSlot)
				p := l.pollers[0]
				p.setCallback(cb)
				for read < b.N {
					n := p.poll(min(pollBurst, b.N-read))
					if n == 0 {
						break
					}
					read += n
				}
			}
			b.ReportMetric(float64(read)/b.Elapsed().Seconds()/1e6, "Mentries/s")
		})
	}
}
