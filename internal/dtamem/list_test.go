package dtamem

import (
	"encoding/binary"
	"testing"
)

// BenchmarkPoll is a poller reading a full ring of new entries.
func BenchmarkPoll(b *testing.B) {
	const entries = 1 << 16
	mem := make([]byte, entries*AppendEntryLen)
	for i := uint64(0); i < entries; i++ {
		binary.BigEndian.PutUint32(mem[i*AppendEntryLen+4:], uint32(i)+1)
	}
	var sum uint32
	b.ReportAllocs()
	read := 0
	for read < b.N {
		p := NewPoller(mem, entries, 0, 1)
		read += p.Poll(min(entries, b.N-read), func(v uint32) { sum += v })
	}
	b.ReportMetric(float64(read)/b.Elapsed().Seconds()/1e6, "Mentries/s")
}
