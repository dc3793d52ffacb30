package dtatranslator

import (
	"encoding/hex"
	"fmt"
	"net/netip"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dpdk/ring"
)

// fuzzService is a translator service with one collector "up" on a ring
// port nobody reads: every input path runs, frames it sends are dropped.
func fuzzService(t testing.TB) *Service {
	l := ring.NewLink(fmt.Sprintf("fz%p", t), ring.Config{RingSize: 256})
	pool, err := dpdk.NewPool(fmt.Sprintf("fz%p", t), 1024, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.A().Close(); l.B().Close(); pool.Close() })
	s, err := DecodeSpec("f.yml", []byte("ip: 10.9.0.100\ncollectors:\n  - exchange: 127.0.0.1:1\n"))
	if err != nil {
		t.Fatal(err)
	}
	sv, err := NewService(s, l.A(), pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	sk := SketchRegion{Addr: 1 << 30, RKey: 1, Kind: SketchCountMin, Columns: 64, Rows: 4, Reporters: 2}
	sv.events <- collEvent{psn: 5, offer: &Offer{Name: "c", IP: netip.MustParseAddr("10.9.0.1"), MAC: "02:00:00:00:00:01", QPN: 9,
		MTU: 1024, MaxAtomic: 4, Regions: Regions{
			KeyWrite:     &KeyWriteRegion{Addr: 1 << 20, RKey: 1, Slots: 1024, DataWidth: 4},
			KeyIncrement: &KeyIncrementRegion{Addr: 1 << 24, RKey: 1, Slots: 1024},
			Lists:        map[uint32]ListRegion{1: {Addr: 1 << 26, RKey: 1, Entries: 64}},
			Sketches:     map[uint16]SketchRegion{3: sk},
			Postcards:    &PostcardRegion{Addr: 1 << 28, RKey: 1, Slots: 1024, Hops: 5}}}}
	sv.handleEvents()
	return sv
}

// reportFrame wraps a report payload in the frame a reporter sends.
func reportFrame(payload []byte, dscp uint8) []byte {
	buf := make([]byte, 64+len(payload))
	n, _ := WriteUDP4(buf, header.MAC{2, 0, 0, 0, 0, 2}, header.MAC{2, 0, 0, 0, 0, 1}, [4]byte{10, 9, 0, 10}, [4]byte{10, 9, 0, 100},
		GeneratorPort, ReportPort, dscp, payload)
	return buf[:n]
}

// FuzzServiceInput: whatever frame arrives, the translator's loop counts
// it and goes on; nothing panics.
func FuzzServiceInput(f *testing.F) {
	for _, g := range golden {
		b, _ := hex.DecodeString(g.hex)
		f.Add(reportFrame(b, 0))
		f.Add(reportFrame(b, 46))
	}
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 2, 0x08, 0x06})
	sv := fuzzService(f)
	f.Fuzz(func(t *testing.T, frame []byte) {
		sv.now += 1000
		sv.input(frame)
		sv.drainAtomics()
		sv.drainQueue()
		sv.flushTx()
	})
}

// FuzzSpec: no translator file makes the loader panic, and what loads
// validates to a usable spec.
func FuzzSpec(f *testing.F) {
	f.Add([]byte("ip: 10.9.0.100\ncollectors:\n  - exchange: 127.0.0.1:40050\n"))
	f.Add([]byte("name: t\nlisten: 127.0.0.1:9310\nport: ring:x.a\nip: 10.0.0.1\nflush-timeout: 2ms\ncollectors:\n  - {name: a, exchange: 'h:1'}\nflow-control: {rate: 1000, burst: 64, high-dscp: 40, queue: 8}\nreliability: {ack-every: 8, nack-interval: 1ms}\n"))
	f.Add([]byte("ip: [\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodeSpec("f.yml", data)
		if err != nil {
			return
		}
		if len(s.Collectors) == 0 || s.Burst < 1 || s.FlowControl.Queue < 1 || s.Reliability.AckEvery < 1 {
			t.Fatalf("loaded a spec that does not validate: %+v", s)
		}
	})
}

// FuzzAck: ACK/NACK parsing round-trips its meaningful bits.
func FuzzAck(f *testing.F) {
	f.Add([]byte{7, 0x80})
	f.Add([]byte{255, 0x40})
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ParseAck(b)
		if err != nil {
			return
		}
		var out [AckLen]byte
		a.Encode(out[:])
		if out[0] != b[0] || out[1] != b[1]&0xc0 {
			t.Fatalf("%x -> %+v -> %x", b[:2], a, out)
		}
	})
}

// TestServiceInputNoAlloc: the translator's receive path allocates
// nothing per report once warm.
func TestServiceInputNoAlloc(t *testing.T) {
	sv := fuzzService(t)
	var frames [][]byte
	for _, g := range golden {
		b, _ := hex.DecodeString(g.hex)
		frames = append(frames, reportFrame(b, 0))
	}
	run := func() {
		for _, fr := range frames {
			sv.now += 1000
			sv.input(fr)
		}
		sv.drainAtomics()
		sv.flushTx()
	}
	run()
	if n := testing.AllocsPerRun(100, run); n != 0 {
		t.Fatalf("%.1f allocations per run of %d reports", n, len(frames))
	}
}
