//go:build dpdk

package eal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dumper/pcap"
)

// testArgs start the EAL the way a service would: explicitly, with one vdev of
// each kind given on the command line; the other vdevs the tests open are
// hot-plugged.
var testArgs = append(DefaultArgs(), "--vdev=net_ring0", "--vdev=net_null0,size=64")

func TestMain(m *testing.M) {
	if err := Init(testArgs); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func newPool(t testing.TB, n, room int) *dpdk.Pool {
	t.Helper()
	p, err := dpdk.NewPool(t.Name(), n, room)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("pool: %v", err)
		}
	})
	return p
}

func open(t testing.TB, s string, cfg dpdk.Config) *Port {
	t.Helper()
	p, err := dpdk.Open(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Cleanups run last-in first-out: the port closes before its pool.
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return p.(*Port)
}

// frame writes test frame seq: an Ethernet header with a local experimental
// EtherType, the sequence number, and a payload that depends on it, of a
// length between 60 and 1500 bytes.
func frame(b []byte, seq int) int {
	n := 60 + (seq*37)%1441
	copy(b, []byte{0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x88, 0xb5})
	binary.BigEndian.PutUint32(b[14:], uint32(seq))
	for i := 18; i < n; i++ {
		b[i] = byte(seq*7 + i)
	}
	return n
}

// txFrames sends frames first..first+n-1 and returns how many the port took.
func txFrames(t testing.TB, pool *dpdk.Pool, port dpdk.Port, q, first, n int) int {
	var burst [32]*dpdk.Packet
	k := pool.GetBulk(burst[:min(n, len(burst))])
	for i, p := range burst[:k] {
		if err := p.SetLen(frame(p.Buffer(), first+i)); err != nil {
			t.Fatal(err)
		}
	}
	sent := port.TxBurst(q, burst[:k])
	dpdk.FreeBulk(burst[sent:k])
	return sent
}

func checkFrame(t testing.TB, p *dpdk.Packet, seq int) {
	t.Helper()
	var want [1500]byte
	n := frame(want[:], seq)
	if !bytes.Equal(p.Data(), want[:n]) {
		got := -1
		if p.Len() >= 18 {
			got = int(binary.BigEndian.Uint32(p.Data()[14:]))
		}
		t.Fatalf("frame %d: got %d bytes (seq %d), want %d bytes", seq, p.Len(), got, n)
	}
}

// TestRingLoopback sends frames through net_ring0, whose queue 0 transmits
// into the ring its queue 0 receives from, and checks that they come back in
// order with identical bytes and that our counters match rte_eth_stats.
func TestRingLoopback(t *testing.T) {
	pool := newPool(t, 1024, 0)
	port := open(t, "eal:net_ring0", dpdk.Config{Pool: pool})
	if info := port.Info(); info.Name != "eal:net_ring0" || info.Driver != "eal" || port.PMD() != "net_ring" {
		t.Fatalf("info %+v pmd %s", info, port.PMD())
	}
	const total = 5000
	var burst [32]*dpdk.Packet
	var bytesSent uint64
	sent, recv := 0, 0
	deadline := time.Now().Add(10 * time.Second)
	before := dpdk.Nanotime()
	for recv < total {
		if sent < total {
			sent += txFrames(t, pool, port, 0, sent, total-sent)
		}
		n := port.RxBurst(0, burst[:])
		for _, p := range burst[:n] {
			checkFrame(t, p, recv)
			if p.Port != port.PortID() || p.Queue != 0 || p.Timestamp < before {
				t.Fatalf("metadata: port %d queue %d ts %d", p.Port, p.Queue, p.Timestamp)
			}
			bytesSent += uint64(p.Len())
			recv++
		}
		dpdk.FreeBulk(burst[:n])
		if time.Now().After(deadline) {
			t.Fatalf("sent %d, received %d before the deadline", sent, recv)
		}
	}
	if n := port.RxBurst(0, burst[:]); n != 0 {
		t.Fatalf("%d extra packets", n)
	}
	s := port.Stats()
	d, err := port.DeviceStats()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stats %+v device %+v", s, d)
	if s.TxPackets != total || s.RxPackets != total || s.TxBytes != bytesSent || s.RxBytes != bytesSent {
		t.Fatalf("stats %+v, want %d packets and %d bytes each way", s, total, bytesSent)
	}
	if d.OPackets != s.TxPackets || d.IPackets != s.RxPackets {
		t.Fatalf("rte_eth_stats %+v disagree with %+v", d, s)
	}
	if s.Dropped != 0 || s.Errors != 0 || s.TxErrors != 0 {
		t.Fatalf("losses: %+v", s)
	}
}

// TestRingQueues checks that queues stay apart: net_ring's queue i loops back
// to queue i only.
func TestRingQueues(t *testing.T) {
	pool := newPool(t, 512, 0)
	port := open(t, "eal:net_ring1", dpdk.Config{Pool: pool, RxQueues: 2, TxQueues: 2, RingSize: 256})
	if got := txFrames(t, pool, port, 1, 0, 10); got != 10 {
		t.Fatalf("sent %d of 10", got)
	}
	var burst [32]*dpdk.Packet
	if n := port.RxBurst(0, burst[:]); n != 0 {
		t.Fatalf("queue 0 received %d packets sent on queue 1", n)
	}
	n := port.RxBurst(1, burst[:])
	if n != 10 {
		t.Fatalf("queue 1 received %d of 10", n)
	}
	for i, p := range burst[:n] {
		checkFrame(t, p, i)
		if p.Queue != 1 {
			t.Fatalf("queue %d", p.Queue)
		}
	}
	dpdk.FreeBulk(burst[:n])
	if port.RxBurst(2, burst[:]) != 0 || port.TxBurst(-1, burst[:1]) != 0 {
		t.Fatal("a queue out of range moved packets")
	}
}

// TestQueuesConcurrent runs one goroutine per queue of a net_ring port, each
// sending frames through its queue and checking what comes back, as pinned
// workers of one port would.
func TestQueuesConcurrent(t *testing.T) {
	const queues, total = 2, 20000
	pool := newPool(t, 2048, 0)
	port := open(t, "eal:net_ring4", dpdk.Config{Pool: pool, RxQueues: queues, TxQueues: queues})
	errs := make(chan error, queues)
	for q := range queues {
		go func() {
			var burst [32]*dpdk.Packet
			sent, recv := 0, 0
			deadline := time.Now().Add(20 * time.Second)
			for recv < total {
				if sent < total {
					sent += txFrames(t, pool, port, q, sent, total-sent)
				}
				n := port.RxBurst(q, burst[:])
				for _, p := range burst[:n] {
					var want [1500]byte
					if l := frame(want[:], recv); !bytes.Equal(p.Data(), want[:l]) || p.Queue != uint16(q) {
						errs <- fmt.Errorf("queue %d: frame %d differs", q, recv)
						return
					}
					recv++
				}
				dpdk.FreeBulk(burst[:n])
				if time.Now().After(deadline) {
					errs <- fmt.Errorf("queue %d: %d of %d received", q, recv, total)
					return
				}
			}
			errs <- nil
		}()
	}
	for range queues {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if s := port.Stats(); s.RxPackets != queues*total || s.TxPackets != queues*total {
		t.Fatalf("stats %+v", s)
	}
}

// TestNull receives from and transmits to net_null, hot-plugged with device
// arguments from the port string.
func TestNull(t *testing.T) {
	pool := newPool(t, 512, 0)
	port := open(t, "eal:net_null1,size=128", dpdk.Config{Pool: pool})
	var burst [64]*dpdk.Packet
	var rx int
	for range 100 {
		n := port.RxBurst(0, burst[:])
		if n == 0 {
			t.Fatal("net_null received nothing")
		}
		for _, p := range burst[:n] {
			if p.Len() != 128 {
				t.Fatalf("length %d, want 128", p.Len())
			}
		}
		rx += n
		sent := port.TxBurst(0, burst[:n])
		if sent != n {
			t.Fatalf("net_null took %d of %d", sent, n)
		}
	}
	s := port.Stats()
	d, err := port.DeviceStats()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stats %+v device %+v", s, d)
	if s.RxPackets != uint64(rx) || s.TxPackets != uint64(rx) || s.RxBytes != 128*uint64(rx) || s.TxBytes != s.RxBytes {
		t.Fatalf("stats %+v after %d packets each way", s, rx)
	}
	// net_null 22.11 counts packets but no bytes.
	if d.IPackets != s.RxPackets || d.OPackets != s.TxPackets ||
		(d.IBytes != 0 && d.IBytes != s.RxBytes) || (d.OBytes != 0 && d.OBytes != s.TxBytes) {
		t.Fatalf("rte_eth_stats %+v disagree with %+v", d, s)
	}
}

// TestReadEPB has net_null's packets written as pcapng records through a
// pcap.Writer's buffer: the file reads back with every packet, cut at the
// snap length with its original length, and the counters agree.
func TestReadEPB(t *testing.T) {
	pool := newPool(t, 512, 0)
	port := open(t, "eal:net_null2,size=100", dpdk.Config{Pool: pool})
	var file bytes.Buffer
	const snap = 66
	w, err := pcap.NewWriter(&file, pcap.WriterOptions{Format: pcap.FormatPcapNG, LinkType: pcap.LinkTypeEthernet,
		SnapLen: snap, Nanosecond: true, FlushSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for range 50 {
		buf, err := w.Tail(64 * 100)
		if err != nil {
			t.Fatal(err)
		}
		// Room for 37 blocks of 32 + 68 bytes: the call takes no more.
		n, used := port.ReadEPB(0, buf[:37*100], snap)
		if n != 37 || used != 37*100 {
			t.Fatalf("ReadEPB wrote %d packets in %d bytes, want 37 in %d", n, used, 37*100)
		}
		if err := w.Commit(used); err != nil {
			t.Fatal(err)
		}
		total += n
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := pcap.NewReader(&file)
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	var rec pcap.Record
	for {
		err := r.Next(&rec)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("record %d: %v", got, err)
		}
		if len(rec.Data) != snap || rec.OrigLen != 100 {
			t.Fatalf("record %d: %d bytes of %d, want %d of 100", got, len(rec.Data), rec.OrigLen, snap)
		}
		got++
	}
	if got != total {
		t.Fatalf("read %d records, wrote %d", got, total)
	}
	if s := port.Stats(); s.RxPackets != uint64(total) || s.RxBytes != 100*uint64(total) {
		t.Fatalf("stats %+v after %d packets", s, total)
	}
}

// TestReadSlots sends frames through net_ring and reads them back into the
// slots of an arena: each slot holds the frame's first stride bytes, lens
// and wire its cut and whole lengths, a call stops at the slots it has or
// at the first short burst, and the counters match. Strides of 128 (aligned:
// non-temporal stores, rounded up to 16 bytes) and 100 (plain copies).
func TestReadSlots(t *testing.T) {
	for i, stride := range []int{128, 100} {
		t.Run(fmt.Sprint(stride), func(t *testing.T) {
			pool := newPool(t, 1024, 0)
			port := open(t, fmt.Sprintf("eal:net_ring%d", 5+i), dpdk.Config{Pool: pool})
			const total = 100
			for sent := 0; sent < total; {
				sent += txFrames(t, pool, port, 0, sent, total-sent)
			}
			arena := make([]byte, total*stride)
			lens, wire := make([]uint16, total), make([]uint32, total)
			for i := range arena {
				arena[i] = 0xee
			}
			// 40 slots in bursts of 16: three bursts, the last one short.
			n, got := port.ReadSlots(0, 16, arena[:40*stride], stride, lens[:40], wire[:40])
			if n != 40 {
				t.Fatalf("took %d packets into 40 slots", n)
			}
			// The remaining 60 in bursts of 32: the second burst comes back
			// with 28, and the call stops there.
			k, b := port.ReadSlots(0, 32, arena[40*stride:], stride, lens[40:], wire[40:])
			if k != 60 {
				t.Fatalf("took %d of the last 60", k)
			}
			n, got = n+k, got+b
			var want [1500]byte
			var sum uint64
			for i := range n {
				l := frame(want[:], i)
				c := min(l, stride)
				slot := arena[i*stride : (i+1)*stride]
				if int(lens[i]) != c || int(wire[i]) != l || !bytes.Equal(slot[:c], want[:c]) {
					t.Fatalf("slot %d: %d of %d bytes, want %d of %d; equal %v", i, lens[i], wire[i], c, l,
						bytes.Equal(slot[:c], want[:c]))
				}
				if stride%16 != 0 && c < stride && slot[c] != 0xee {
					t.Fatalf("slot %d: written past the copy", i)
				}
				sum += uint64(l)
			}
			if got != sum {
				t.Fatalf("bytes %d, frames %d", got, sum)
			}
			if k, _ := port.ReadSlots(0, 32, arena, stride, lens, wire); k != 0 {
				t.Fatalf("%d packets from an empty ring", k)
			}
			if s := port.Stats(); s.RxPackets != total || s.RxBytes != sum {
				t.Fatalf("stats %+v, want %d packets and %d bytes", s, total, sum)
			}
			for _, bad := range []func() int{
				func() int { k, _ := port.ReadSlots(1, 32, arena, stride, lens, wire); return k },
				func() int { k, _ := port.ReadSlots(0, 0, arena, stride, lens, wire); return k },
				func() int { k, _ := port.ReadSlots(0, 32, arena, 0, lens, wire); return k },
				func() int { k, _ := port.ReadSlots(0, 32, arena[:stride-1], stride, lens, wire); return k },
				func() int { k, _ := port.ReadSlots(0, 32, arena, 1<<16, lens, wire); return k },
			} {
				if txFrames(t, pool, port, 0, 0, 1) != 1 {
					t.Fatal("send")
				}
				if bad() != 0 {
					t.Fatal("a call with a bad queue, burst, stride or arena took packets")
				}
				var one [1]*dpdk.Packet
				dpdk.FreeBulk(one[:port.RxBurst(0, one[:])])
			}
		})
	}
}

// TestNullQueues opens several queues with RSS where net_null offers it.
func TestNullQueues(t *testing.T) {
	pool := newPool(t, 512, 0)
	port := open(t, "eal:net_null2", dpdk.Config{Pool: pool, RxQueues: 2, TxQueues: 2})
	t.Logf("%v rss_hf %#x", port, port.RSSHashFunctions())
	var burst [32]*dpdk.Packet
	for q := range 2 {
		n := port.RxBurst(q, burst[:])
		if n == 0 {
			t.Fatalf("queue %d received nothing", q)
		}
		for _, p := range burst[:n] {
			if p.Queue != uint16(q) {
				t.Fatalf("packet of queue %d says %d", q, p.Queue)
			}
		}
		if sent := port.TxBurst(q, burst[:n]); sent != n {
			t.Fatalf("tx queue %d took %d of %d", q, sent, n)
		}
	}
}

// TestOversize receives packets larger than the pool's buffers: they are
// dropped and counted, never copied past a buffer.
func TestOversize(t *testing.T) {
	pool := newPool(t, 64, 256) // 128 bytes of room after the headroom
	port := open(t, "eal:net_null3,size=512", dpdk.Config{Pool: pool})
	var burst [32]*dpdk.Packet
	if n := port.RxBurst(0, burst[:]); n != 0 {
		t.Fatalf("received %d packets of 512 bytes into 128-byte buffers", n)
	}
	if s := port.Stats(); s.Dropped != 32 || s.RxPackets != 0 {
		t.Fatalf("stats %+v, want 32 dropped", s)
	}
}

// TestRxNoBuf holds on to every buffer of a small pool: the queue stops
// polling and counts it instead of failing.
func TestRxNoBuf(t *testing.T) {
	pool := newPool(t, 40, 0)
	port := open(t, "eal:net_null4", dpdk.Config{Pool: pool})
	var held []*dpdk.Packet
	var burst [32]*dpdk.Packet
	for range 5 {
		n := port.RxBurst(0, burst[:])
		held = append(held, burst[:n]...)
	}
	if len(held) != 40 {
		t.Fatalf("received %d packets with a pool of 40", len(held))
	}
	if s := port.Stats(); s.RxNoBuf == 0 {
		t.Fatalf("no RxNoBuf: %+v", s)
	}
	dpdk.FreeBulk(held)
	if n := port.RxBurst(0, burst[:]); n != 32 {
		t.Fatalf("after freeing, received %d", n)
	}
	dpdk.FreeBulk(burst[:32])
}

// TestTxUnsendable transmits a packet larger than the port's mbufs and an
// empty one: each is taken, freed and counted, and the packets around them go
// out.
func TestTxUnsendable(t *testing.T) {
	small := newPool(t, 256, 0)
	big := newPool(t, 4, 9000+dpdk.Headroom)
	port := open(t, "eal:net_null9", dpdk.Config{Pool: small})
	pkts := []*dpdk.Packet{small.Get(), small.Get(), big.Get(), small.Get(), small.Get()}
	for i, p := range pkts {
		_ = p.SetLen(100)
		if i == 3 {
			_ = p.SetLen(0)
		}
	}
	_ = pkts[2].SetLen(9000)
	var took []int
	for rest := pkts; len(rest) > 0; {
		n := port.TxBurst(0, rest)
		if n == 0 {
			t.Fatal("TxBurst stalled")
		}
		took = append(took, n)
		rest = rest[n:]
	}
	s := port.Stats()
	if fmt.Sprint(took) != "[2 1 1 1]" || s.TxPackets != 3 || s.TxErrors != 2 {
		t.Fatalf("bursts took %v; stats %+v", took, s)
	}
	if small.Available() != small.Size() || big.Available() != big.Size() {
		t.Fatal("a packet was not freed")
	}
}

func TestMissingDevice(t *testing.T) {
	pool := newPool(t, 16, 0)
	for _, dev := range []string{"0000:99:00.0", "net_bogus0", "nosuch"} {
		_, err := dpdk.Open("eal:"+dev, dpdk.Config{Pool: pool})
		if !errors.Is(err, dpdk.ErrNoDevice) {
			t.Fatalf("%s: %v, want ErrNoDevice", dev, err)
		}
		if msg := err.Error(); !strings.Contains(msg, "eal: no DPDK port named "+dev+" (have: ") {
			t.Fatalf("%s: %v", dev, err)
		}
		t.Log(err)
	}
	if _, err := Open("net_null5", dpdk.Config{}); err == nil || !strings.Contains(err.Error(), "Pool is required") {
		t.Fatalf("no pool: %v", err)
	}
}

// TestReopen closes a hot-plugged port and opens it again: Close unplugs the
// vdev so the name can be probed afresh, and counters start from zero.
func TestReopen(t *testing.T) {
	pool := newPool(t, 256, 0)
	for i := range 3 {
		p, err := Open("net_null6", dpdk.Config{Pool: pool})
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		if _, err := Open("net_null6", dpdk.Config{Pool: pool}); err == nil || !strings.Contains(err.Error(), "already open") {
			t.Fatalf("second open: %v", err)
		}
		var burst [8]*dpdk.Packet
		n := p.RxBurst(0, burst[:])
		dpdk.FreeBulk(burst[:n])
		if s := p.Stats(); s.RxPackets != uint64(n) {
			t.Fatalf("round %d: %+v after %d packets", i, s, n)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if p.RxBurst(0, burst[:]) != 0 || p.Stats().RxPackets != uint64(n) || p.Close() != nil {
			t.Fatal("a closed port misbehaves")
		}
	}
	// A vdev given at initialisation comes back with its arguments.
	p, err := Open("net_null0", dpdk.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	var burst [8]*dpdk.Packet
	n := p.RxBurst(0, burst[:])
	if n == 0 || burst[0].Len() != 64 {
		t.Fatalf("net_null0: %d packets", n)
	}
	dpdk.FreeBulk(burst[:n])
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if pool.Available() != pool.Size() {
		t.Fatalf("closed ports hold %d buffers", pool.Size()-pool.Available())
	}
}

// TestRingCloseDrains closes a net_ring port with packets in flight: net_ring
// keeps its rings across an unplug, so Close must take them back before the
// port's mbuf pool goes, or the next port of that name would receive mbufs of
// a freed pool.
func TestRingCloseDrains(t *testing.T) {
	pool := newPool(t, 256, 0)
	for round := range 3 {
		p, err := Open("net_ring3", dpdk.Config{Pool: pool})
		if err != nil {
			t.Fatal(err)
		}
		var burst [32]*dpdk.Packet
		if n := p.RxBurst(0, burst[:]); n != 0 {
			t.Fatalf("round %d: %d stale packets", round, n)
		}
		if sent := txFrames(t, pool, p, 0, 0, 20); sent != 20 {
			t.Fatalf("sent %d", sent)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestInitOnce(t *testing.T) {
	if err := Init(testArgs); err != nil {
		t.Fatalf("same args again: %v", err)
	}
	if err := Init(DefaultArgs()); err == nil || !strings.Contains(err.Error(), "already initialised") {
		t.Fatalf("other args: %v", err)
	}
	if !Initialized() || !sameArgs(Args(), testArgs) {
		t.Fatalf("Args() = %q", Args())
	}
}

// TestAllocs asserts that bursts allocate nothing on the Go heap.
func TestAllocs(t *testing.T) {
	pool := newPool(t, 1024, 0)
	null := open(t, "eal:net_null7", dpdk.Config{Pool: pool})
	ring := open(t, "eal:net_ring2", dpdk.Config{Pool: pool})
	var burst [32]*dpdk.Packet
	if a := testing.AllocsPerRun(1000, func() {
		n := null.RxBurst(0, burst[:])
		dpdk.FreeBulk(burst[:n])
	}); a != 0 {
		t.Fatalf("RxBurst allocates %v per burst", a)
	}
	if a := testing.AllocsPerRun(1000, func() {
		n := pool.GetBulk(burst[:])
		for _, p := range burst[:n] {
			_ = p.SetLen(64)
		}
		sent := null.TxBurst(0, burst[:n])
		dpdk.FreeBulk(burst[sent:n])
	}); a != 0 {
		t.Fatalf("TxBurst allocates %v per burst", a)
	}
	if a := testing.AllocsPerRun(1000, func() {
		n := pool.GetBulk(burst[:])
		for _, p := range burst[:n] {
			_ = p.SetLen(100)
		}
		sent := ring.TxBurst(0, burst[:n])
		dpdk.FreeBulk(burst[sent:n])
		n = ring.RxBurst(0, burst[:])
		dpdk.FreeBulk(burst[:n])
	}); a != 0 {
		t.Fatalf("ring TxBurst+RxBurst allocate %v per burst", a)
	}
	buf := make([]byte, 64<<10)
	if a := testing.AllocsPerRun(1000, func() { null.ReadEPB(0, buf, 128) }); a != 0 {
		t.Fatalf("ReadEPB allocates %v per burst", a)
	}
	lens, wire := make([]uint16, 256), make([]uint32, 256)
	if a := testing.AllocsPerRun(1000, func() { null.ReadSlots(0, 32, buf, 128, lens, wire) }); a != 0 {
		t.Fatalf("ReadSlots allocates %v per call", a)
	}
}

// TestThreadLcore checks that a poller thread becomes a DPDK lcore on its
// first burst, so mempool caches serve it, and gives the lcore back when the
// thread exits.
func TestThreadLcore(t *testing.T) {
	pool := newPool(t, 256, 0)
	port := open(t, "eal:net_null8", dpdk.Config{Pool: pool})
	done := make(chan int)
	const onMain = -2
	lc := onMain
	for try := 0; lc == onMain && try < 100; try++ {
		go func() {
			// Exiting while locked makes the runtime end the thread, except
			// the process's main thread, which it parks forever instead: a
			// goroutine that lands there lets go and the test tries again.
			runtime.LockOSThread()
			if unix.Gettid() == unix.Getpid() {
				runtime.UnlockOSThread()
				done <- onMain
				return
			}
			var burst [32]*dpdk.Packet
			n := port.RxBurst(0, burst[:])
			port.TxBurst(0, burst[:n])
			done <- threadLcore()
		}()
		lc = <-done
	}
	if lc == onMain {
		t.Skip("every try ran on the main thread")
	}
	if lc < 0 {
		t.Skip("no lcore id left for the thread")
	}
	deadline := time.Now().Add(5 * time.Second)
	for lcoreInUse(lc) {
		if time.Now().After(deadline) {
			t.Fatalf("lcore %d still registered after its thread exited", lc)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestAFPacketVeth moves frames between the two ends of a veth pair through
// net_af_packet, the kernel path a DPDK appliance uses for NICs without a
// DPDK driver. It needs root and iproute2.
func TestAFPacketVeth(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a veth pair")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2")
	}
	a, b := fmt.Sprintf("apl%da", os.Getpid()%1000000), fmt.Sprintf("apl%db", os.Getpid()%1000000)
	ip := func(args ...string) {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	ip("link", "add", a, "type", "veth", "peer", "name", b)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", a).Run() })
	for _, dev := range []string{a, b} {
		// No IPv6 on the test links: router and neighbour solicitations would
		// mix with the test frames.
		_ = os.WriteFile("/proc/sys/net/ipv6/conf/"+dev+"/disable_ipv6", []byte("1"), 0o644)
		ip("link", "set", dev, "up")
	}
	pool := newPool(t, 1024, 0)
	pa := open(t, "eal:net_af_packet1,iface="+a, dpdk.Config{Pool: pool})
	pb := open(t, "eal:net_af_packet2,iface="+b, dpdk.Config{Pool: pool})
	if ifc, err := net.InterfaceByName(a); err == nil && pa.Info().IfIndex != 0 && pa.Info().IfIndex != ifc.Index {
		t.Fatalf("ifindex %d, want %d", pa.Info().IfIndex, ifc.Index)
	}
	const total = 200
	var burst [32]*dpdk.Packet
	sent, recv := 0, 0
	deadline := time.Now().Add(5 * time.Second)
	for recv < total {
		if sent < total {
			sent += txFrames(t, pool, pa, 0, sent, min(16, total-sent))
		}
		n := pb.RxBurst(0, burst[:])
		for _, p := range burst[:n] {
			if p.Len() >= 14 && binary.BigEndian.Uint16(p.Data()[12:]) == 0x88b5 {
				checkFrame(t, p, recv)
				recv++
			}
		}
		dpdk.FreeBulk(burst[:n])
		if time.Now().After(deadline) {
			t.Fatalf("sent %d, received %d", sent, recv)
		}
	}
	t.Logf("a %+v b %+v", pa.Stats(), pb.Stats())
}
