package dumper

import (
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

var (
	reqIP  = netip.MustParseAddr("10.0.0.1")
	respIP = netip.MustParseAddr("10.0.0.2")
	reqV6  = netip.MustParseAddr("fd00::1")
	respV6 = netip.MustParseAddr("fd00::2")
)

// origSport is the UDP source port of the test's RoCE packets, the value
// the copies carry in their UDP checksum.
const origSport = 49200

// eventOf is the event the test marks copy seq with.
func eventOf(seq uint64) mirror.EventType {
	switch seq % 17 {
	case 3:
		return mirror.EventDrop
	case 7:
		return mirror.EventECN
	case 11:
		return mirror.EventBitError
	}
	return mirror.EventNone
}

// tsOf is copy seq's 48-bit mirror timestamp: 1 us apart, from base.
func tsOf(base int64, seq uint64) int64 { return (base + int64(seq)*1000) & mirror.Mask48 }

// mirrored builds copy seq into buf as the injector sends it (a WRITE
// Middle of 256 bytes, IPv4 for odd seq and IPv6 for even) and returns its
// length.
func mirrored(buf []byte, seq uint64, base int64) int {
	b := roce.Builder{Opcode: roce.RCWriteMiddle, DestQP: 0x11, PSN: uint32(seq), SrcPort: origSport,
		HopLimit: roce.DefaultHopLimit, SrcMAC: header.MAC{2, 0, 0, 0, 0, 1}, DstMAC: header.MAC{2, 0, 0, 0, 0, 2}}
	if seq%2 == 1 {
		b.SrcGID, b.DstGID = roce.GIDFromAddr(reqIP), roce.GIDFromAddr(respIP)
	} else {
		b.SrcGID, b.DstGID = roce.GIDFromAddr(reqV6), roce.GIDFromAddr(respV6)
	}
	n, err := b.BuildInPlace(buf, 256)
	if err != nil {
		panic(err)
	}
	var p header.Parsed
	if err := header.Decode(buf[:n], &p); err != nil {
		panic(err)
	}
	mirror.Write(buf[:n], &p, mirror.Meta{Seq: seq, Timestamp: tsOf(base, seq), Event: eventOf(seq),
		OrigSrcPort: origSport}, uint16(seq*7919), mirror.DefaultRewritePort)
	return n
}

// feeder sends frames into one end of a ring link.
type feeder struct {
	t    testing.TB
	pool *dpdk.Pool
	port dpdk.Port
}

func newFeeder(t testing.TB, queues, ringSize int) (*feeder, dpdk.Port) {
	t.Helper()
	l := ring.NewLink(t.Name(), ring.Config{Queues: queues, RingSize: ringSize})
	pool, err := dpdk.NewPool(t.Name(), 8192, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.A().Close(); l.B().Close(); pool.Close() })
	return &feeder{t: t, pool: pool, port: l.A()}, l.B()
}

// send transmits frame on queue q, waiting while the ring is full.
func (f *feeder) send(q int, frame []byte) {
	f.t.Helper()
	p := f.pool.Get()
	if p == nil {
		f.t.Fatal("pool empty")
	}
	p.Reset()
	if p.CopyFrom(frame) != len(frame) {
		f.t.Fatal("frame does not fit")
	}
	one := []*dpdk.Packet{p}
	for deadline := time.Now().Add(5 * time.Second); f.port.TxBurst(q, one) == 0; {
		if time.Now().After(deadline) {
			f.t.Fatal("ring stayed full")
		}
		time.Sleep(10 * time.Microsecond)
	}
}

// waitCaptured waits until the dumper has received n frames.
func waitReceived(t testing.TB, d *Dumper, n uint64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		var got uint64
		for _, w := range d.Status().Workers {
			got += w.Received
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("dumper received %d of %d frames", got, n)
		}
	}
}

// slotPort is a ring port that fills arena slots itself (a SlotReader, as
// the eal driver is), so the dumper's path for such ports runs in the tests
// without DPDK. It takes at most one burst of up to burst frames a call.
type slotPort struct {
	dpdk.Port
	bufs  [][]*dpdk.Packet // per queue: workers read their queues concurrently
	calls atomic.Int64
}

func newSlotPort(p dpdk.Port) *slotPort {
	s := &slotPort{Port: p}
	for range max(p.Info().RxQueues, 1) {
		s.bufs = append(s.bufs, make([]*dpdk.Packet, 512))
	}
	return s
}

// StreamsSlots says the slots go past the cache, as eal's do, so the
// tests that run on this port cover the dumper's scan of the arena at Stop.
func (s *slotPort) StreamsSlots(int) bool { return true }

func (s *slotPort) ReadSlots(q, burst int, arena []byte, stride int, lens []uint16, wire []uint32) (int, uint64) {
	s.calls.Add(1)
	bufs := s.bufs[q][:min(burst, len(arena)/stride, len(lens), len(wire), len(s.bufs[q]))]
	n := s.Port.RxBurst(q, bufs)
	var bytes uint64
	for i, p := range bufs[:n] {
		lens[i] = uint16(copy(arena[i*stride:(i+1)*stride], p.Data()))
		wire[i] = uint32(p.OrigLen())
		bytes += uint64(wire[i])
	}
	dpdk.FreeBulk(bufs[:n])
	return n, bytes
}
