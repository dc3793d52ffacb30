package ring

import (
	"encoding/binary"
	"sync"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk"
)

func newPool(t testing.TB, n int) *dpdk.Pool {
	p, err := dpdk.NewPool(t.Name(), n, 256)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLinkOrderAndStats(t *testing.T) {
	pool := newPool(t, 4096)
	l := NewLink("t", Config{Queues: 2, RingSize: 64})
	a, b := l.A(), l.B()
	const total = 100000
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // sender on queue 1
		defer wg.Done()
		var burst [32]*dpdk.Packet
		seq := uint64(0)
		for seq < total {
			n := pool.GetBulk(burst[:min(32, total-int(seq))])
			for _, p := range burst[:n] {
				b := p.Buffer()
				binary.BigEndian.PutUint64(b, seq)
				_ = p.SetLen(8 + int(seq%50))
				seq++
			}
			sent := 0
			for sent < n {
				sent += a.TxBurst(1, burst[sent:n])
			}
		}
	}()
	var burst [32]*dpdk.Packet
	next := uint64(0)
	var bytes uint64
	for next < total {
		n := b.RxBurst(1, burst[:])
		for _, p := range burst[:n] {
			if got := binary.BigEndian.Uint64(p.Data()); got != next {
				t.Fatalf("packet %d arrived as %d", next, got)
			}
			if p.Queue != 1 {
				t.Fatalf("queue %d", p.Queue)
			}
			bytes += uint64(p.Len())
			next++
		}
		dpdk.FreeBulk(burst[:n])
	}
	wg.Wait()
	if n := b.RxBurst(0, burst[:]); n != 0 {
		t.Fatalf("queue 0 got %d packets", n)
	}
	sa, sb := a.Stats(), b.Stats()
	if sa.TxPackets != total || sb.RxPackets != total || sb.RxBytes != bytes || sa.TxBytes != bytes {
		t.Fatalf("stats a=%+v b=%+v bytes=%d", sa, sb, bytes)
	}
	if pool.Available() != pool.Size() {
		t.Fatalf("leak: %d of %d free", pool.Available(), pool.Size())
	}
}

func TestFullRingPartialTx(t *testing.T) {
	pool := newPool(t, 64)
	l := NewLink("full", Config{RingSize: 8})
	var burst [16]*dpdk.Packet
	n := pool.GetBulk(burst[:])
	if sent := l.A().TxBurst(0, burst[:n]); sent != 8 {
		t.Fatalf("TxBurst into a ring of 8 took %d", sent)
	}
	dpdk.FreeBulk(burst[8:n])
	if got := l.B().Pending(); got != 8 {
		t.Fatalf("pending %d", got)
	}
	// Closing the receiver frees what was queued for it, and the sender's
	// later bursts fail instead of filling a ring nobody reads.
	if err := l.B().Close(); err != nil {
		t.Fatal(err)
	}
	if pool.Available() != pool.Size() {
		t.Fatalf("close leaked: %d of %d", pool.Available(), pool.Size())
	}
	p := pool.Get()
	if l.A().TxBurst(0, []*dpdk.Packet{p}) != 0 {
		t.Fatal("transmit to a closed peer succeeded")
	}
	p.Free()
	if l.A().TxBurst(5, nil) != 0 || l.A().RxBurst(-1, burst[:]) != 0 {
		t.Fatal("out of range queue")
	}
}

func TestOpenByName(t *testing.T) {
	a, err := dpdk.Open("ring:named0.a", dpdk.Config{RxQueues: 2, TxQueues: 2})
	if err != nil {
		t.Fatal(err)
	}
	b, err := dpdk.Open("ring:named0.b", dpdk.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if a.(*Port).Peer() != b.(*Port) {
		t.Fatal("named ends are not peers")
	}
	if a.Info().MAC == b.Info().MAC || a.Info().Driver != "ring" || a.Info().RxQueues != 2 {
		t.Fatalf("info %+v %+v", a.Info(), b.Info())
	}
	if _, err := dpdk.Open("ring:named0.c", dpdk.Config{}); err == nil {
		t.Fatal("end c accepted")
	}
	if _, err := dpdk.Open("ring:named0.a", dpdk.Config{RxQueues: 4}); err == nil {
		t.Fatal("more queues than the link has accepted")
	}
	Forget("named0")
}

func TestBurstAllocs(t *testing.T) {
	pool := newPool(t, 256)
	l := NewLink("allocs", Config{})
	var tx, rx [32]*dpdk.Packet
	if a := testing.AllocsPerRun(1000, func() {
		n := pool.GetBulk(tx[:])
		s := l.A().TxBurst(0, tx[:n])
		dpdk.FreeBulk(tx[s:n])
		r := l.B().RxBurst(0, rx[:])
		dpdk.FreeBulk(rx[:r])
	}); a != 0 {
		t.Fatalf("burst send+receive allocates %v", a)
	}
}

// BenchmarkLinkPair moves 64-byte packets from one worker to another over one
// queue pair: the sender takes buffers from the pool and transmits bursts of
// 32, the receiver receives and frees them.
func BenchmarkLinkPair(b *testing.B) {
	pool := newPool(b, 8192)
	l := NewLink("bench", Config{RingSize: 1024})
	b.ReportAllocs()
	done := make(chan struct{})
	go func() {
		defer close(done)
		cache := pool.NewCache(512)
		defer cache.Flush()
		var burst [32]*dpdk.Packet
		got := 0
		for got < b.N {
			n := l.B().RxBurst(0, burst[:])
			got += n
			cache.PutBulk(burst[:n])
		}
	}()
	b.ResetTimer()
	cache := pool.NewCache(512)
	var burst [32]*dpdk.Packet
	for sent := 0; sent < b.N; {
		n := cache.GetBulk(burst[:min(32, b.N-sent)])
		for _, p := range burst[:n] {
			_ = p.SetLen(64)
		}
		s := 0
		for s < n {
			s += l.A().TxBurst(0, burst[s:n])
		}
		sent += n
	}
	<-done
	b.StopTimer()
	cache.Flush()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mpps")
}
