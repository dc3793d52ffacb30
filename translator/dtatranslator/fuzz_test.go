package dtatranslator

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/internal/dtamem"
	"github.com/rdma-appliance/appliance/internal/dtawire"
	"github.com/rdma-appliance/appliance/internal/spec"
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
	sk := dtamem.SketchRegion{Addr: 1 << 30, RKey: 1, Kind: dtawire.SketchCountMin, Columns: 64, Rows: 4, Reporters: 2}
	sv.events <- collEvent{psn: 5, offer: &dtamem.Offer{Name: "c", IP: netip.MustParseAddr("10.9.0.1"), MAC: "02:00:00:00:00:01", QPN: 9,
		MTU: 1024, MaxAtomic: 4, Regions: dtamem.Regions{
			KeyWrite:     &dtamem.KeyWriteRegion{Addr: 1 << 20, RKey: 1, Slots: 1024, DataWidth: 4},
			KeyIncrement: &dtamem.KeyIncrementRegion{Addr: 1 << 24, RKey: 1, Slots: 1024},
			Lists:        map[uint32]dtamem.ListRegion{1: {Addr: 1 << 26, RKey: 1, Entries: 64}},
			Sketches:     map[uint16]dtamem.SketchRegion{3: sk},
			Postcards:    &dtamem.PostcardRegion{Addr: 1 << 28, RKey: 1, Slots: 1024, Hops: 5}}}}
	sv.handleEvents()
	return sv
}

// reportFrame wraps a report payload in the frame a reporter sends.
func reportFrame(payload []byte, dscp uint8) []byte {
	buf := make([]byte, 64+len(payload))
	n, _ := WriteUDP4(buf, header.MAC{2, 0, 0, 0, 0, 2}, header.MAC{2, 0, 0, 0, 0, 1}, [4]byte{10, 9, 0, 10}, [4]byte{10, 9, 0, 100},
		dtawire.GeneratorPort, dtawire.ReportPort, dscp, payload)
	return buf[:n]
}

// seedReports are one report of every primitive, encoded.
func seedReports(t testing.TB) [][]byte {
	var out [][]byte
	for _, r := range []dtawire.Report{
		{Opcode: dtawire.OpKeyWrite, Seq: 7, Retransmittable: true, Redundancy: 2, Key: 42, Data: []byte{0xde, 0xad, 0xbe, 0xef}},
		{Opcode: dtawire.OpAppend, Immediate: true, ListID: 3, Data: []byte{0, 0, 0, 100}},
		{Opcode: dtawire.OpKeyIncrement, Seq: 255, Redundancy: 4, Key: 1, Counter: 5},
		{Opcode: dtawire.OpPostcarder, Seq: 1, Key: 0x0badcafe, Hop: 3, Data: []byte{0, 0, 0, 16}},
		{Opcode: dtawire.OpSketchMerge, Seq: 2, Retransmittable: true, SketchID: 1, ReporterID: 9, Column: 12,
			Counters: []byte{0, 0, 0, 1, 0, 0, 0, 2}},
	} {
		b := make([]byte, 256)
		n, err := dtawire.Format{}.Encode(b, &r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b[:n])
	}
	return out
}

// FuzzServiceInput: whatever frame arrives, the translator's loop counts
// it and goes on; nothing panics.
func FuzzServiceInput(f *testing.F) {
	for _, b := range seedReports(f) {
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
			if err := spec.CheckRefusal(err, "f.yml"); err != nil {
				t.Fatal(err)
			}
			return
		}
		if len(s.Collectors) == 0 || s.Burst < 1 || s.FlowControl.Queue < 1 || s.Reliability.AckEvery < 1 {
			t.Fatalf("loaded a spec that does not validate: %+v", s)
		}
	})
}

// TestServiceInputNoAlloc: the translator's receive path allocates
// nothing per report once warm.
func TestServiceInputNoAlloc(t *testing.T) {
	sv := fuzzService(t)
	var frames [][]byte
	for _, b := range seedReports(t) {
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
