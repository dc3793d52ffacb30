package perftest

import (
	"context"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// sportPort records the UDP source port of the RoCEv2 frames sent through
// it.
type sportPort struct {
	dpdk.Port
	sport *atomic.Uint32
}

func (s sportPort) TxBurst(q int, pkts []*dpdk.Packet) int {
	var p roce.Packet
	for _, pk := range pkts {
		if roce.Parse(pk.Data(), &p) == nil {
			s.sport.Store(uint32(p.SrcPort))
		}
	}
	return s.Port.TxBurst(q, pkts)
}

// TestPing: every READ gives a positive round trip, and the sample names
// the 5-tuple the client's packets really carry.
func TestPing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var sport atomic.Uint32
	var got []PingSample
	n, err := PingLoopback(ctx, PingParams{Interval: time.Millisecond, Count: 20}, LoopbackOptions{
		Capture: func(side int, p dpdk.Port) dpdk.Port {
			if side == 1 {
				return sportPort{Port: p, sport: &sport}
			}
			return p
		}}, func(s PingSample) { got = append(got, s) })
	if err != nil {
		t.Fatal(err)
	}
	if n != 20 || len(got) != 20 {
		t.Fatalf("%d samples (%d seen), want 20", n, len(got))
	}
	for i, s := range got {
		if s.Seq != uint64(i) || s.RTT <= 0 {
			t.Fatalf("sample %d: %+v", i, s)
		}
		if i > 0 && s.At-got[i-1].At < int64(time.Millisecond)*9/10 {
			t.Fatalf("sample %d posted %v after the previous, interval 1ms", i, time.Duration(s.At-got[i-1].At))
		}
	}
	s := got[0]
	if s.Src.Addr() != netip.MustParseAddr("192.168.77.2") || s.Dst.Addr() != netip.MustParseAddr("192.168.77.1") {
		t.Fatalf("5-tuple %v -> %v", s.Src, s.Dst)
	}
	if uint32(s.SrcPort) != sport.Load() || s.SrcPort < roce.UDPSrcPortMin {
		t.Fatalf("sample source port %d, the wire's %d", s.SrcPort, sport.Load())
	}
}

// TestPingStops: the end of the context stops an endless ping cleanly and
// the server is told (the loopback returns no error from either side).
func TestPingStops(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	n, err := PingLoopback(ctx, PingParams{Interval: time.Millisecond}, LoopbackOptions{}, func(PingSample) {})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 || time.Since(start) > 10*time.Second {
		t.Fatalf("%d samples in %v", n, time.Since(start))
	}
}
