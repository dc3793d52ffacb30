//go:build linux

package afpacket

import (
	"encoding/binary"
	"errors"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rdma-appliance/appliance/dpdk"
)

// drain reads every RX queue of p until want test frames arrived or the
// deadline passed, calling fn for each test frame (other frames are
// counted in the return value's second part) and freeing the packets.
func drain(t testing.TB, p *Port, want int, timeout time.Duration, fn func(q int, pkt *dpdk.Packet)) (got, other int) {
	t.Helper()
	var burst [64]*dpdk.Packet
	deadline := time.Now().Add(timeout)
	for got < want && time.Now().Before(deadline) {
		idle := true
		for q := 0; q < p.Info().RxQueues; q++ {
			n := p.RxBurst(q, burst[:])
			if n > 0 {
				idle = false
			}
			for _, pkt := range burst[:n] {
				if _, _, ok := parseFrame(pkt.Data()); ok {
					got++
					if fn != nil {
						fn(q, pkt)
					}
				} else {
					other++
				}
			}
			dpdk.FreeBulk(burst[:n])
		}
		if idle {
			if p.Info().RxQueues == 1 {
				if _, err := p.Wait(0, 5*time.Millisecond); err != nil {
					t.Fatalf("Wait: %v", err)
				}
			} else {
				time.Sleep(200 * time.Microsecond)
			}
		}
	}
	return got, other
}

func TestOptions(t *testing.T) {
	o, err := parseOptions(nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.fanout != FanoutHash || o.blockSize != DefaultBlockSize || o.blocks != DefaultBlocks ||
		o.timeout != DefaultTimeout || o.tx != DefaultTx || o.frameSize != DefaultFrameSize {
		t.Fatalf("defaults: %+v", o)
	}
	o, err = parseOptions(map[string]string{"fanout": "lb", "blocksize": "256K", "blocks": "8",
		"frame": "4096", "timeout": "10", "tx": "ring", "snaplen": "128", "hwtstamp": "1", "rxhash": "true"})
	if err != nil {
		t.Fatal(err)
	}
	if o.fanout != FanoutLB || o.blockSize != 256<<10 || o.blocks != 8 || o.frameSize != 4096 ||
		o.timeout != 10*time.Millisecond || o.tx != TxRing || o.snaplen != 128 || !o.hwtstamp || !o.rxhash {
		t.Fatalf("parsed: %+v", o)
	}
	for _, bad := range []map[string]string{
		{"fanout": "rss"}, {"blocksize": "1000"}, {"blocksize": "3M"}, {"blocks": "1"}, {"frame": "100"},
		{"timeout": "100us"}, {"tx": "io_uring"}, {"color": "blue"}, {"frame": "2M"},
		// 18446744073711 ms wrapped around to 1.448384ms and was taken.
		{"timeout": "18446744073711"},
	} {
		if _, err := parseOptions(bad); err == nil {
			t.Errorf("options %v accepted", bad)
		}
	}
}

func TestOpenMissingInterface(t *testing.T) {
	needNetAdmin(t)
	pool := newPool(t, 64)
	_, err := Open("nosuchif9", dpdk.Config{Pool: pool})
	if !errors.Is(err, dpdk.ErrNoDevice) || !strings.Contains(err.Error(), "nosuchif9") {
		t.Fatalf("Open(nosuchif9) = %v, want ErrNoDevice naming the interface", err)
	}
	_, err = dpdk.Open("afpacket:nosuchif9,fanout=lb", dpdk.Config{Pool: pool, RxQueues: 2})
	if !errors.Is(err, dpdk.ErrNoDevice) || !strings.Contains(err.Error(), "nosuchif9") {
		t.Fatalf("dpdk.Open = %v, want ErrNoDevice naming the interface", err)
	}
	if _, err := Open("lo", dpdk.Config{}); err == nil {
		t.Fatal("Open without a pool succeeded")
	}
}

func TestInfoAndDpdkOpen(t *testing.T) {
	v := newVethPair(t, 1500)
	pool := newPool(t, 256)
	var dp dpdk.Port
	var want *net.Interface
	err := inNetns(v.NSB, func() (err error) {
		if want, err = net.InterfaceByName(v.IfB); err != nil {
			return err
		}
		dp, err = dpdk.Open("afpacket:"+v.IfB+",fanout=lb,blocks=4,blocksize=64K,tx=mmsg",
			dpdk.Config{Pool: pool, RxQueues: 2, TxQueues: 3, Promiscuous: true})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	info := dp.Info()
	if info.Driver != "afpacket" || info.Name != "afpacket:"+v.IfB || info.RxQueues != 2 || info.TxQueues != 3 ||
		info.MTU != 1500 || info.IfIndex != want.Index || net.HardwareAddr(info.MAC[:]).String() != want.HardwareAddr.String() {
		t.Fatalf("info %+v, interface %+v", info, want)
	}
	// The veth end lives in a namespace whose devices /sys does not show.
	if info.NUMANode != -1 || info.SpeedMbps != 0 {
		t.Fatalf("numa %d speed %d from another namespace's sysfs", info.NUMANode, info.SpeedMbps)
	}
	// Packet-socket membership raises the device's promiscuity count, which
	// ip -d shows; the PROMISC flag is only for promiscuity set by hand.
	out, _ := exec.Command("ip", "-d", "-n", v.NSB, "link", "show", v.IfB).CombinedOutput()
	if !strings.Contains(string(out), "promiscuity 1") {
		t.Fatalf("promiscuous mode not on: %s", out)
	}
	if err := dp.Close(); err != nil {
		t.Fatal(err)
	}
	out, _ = exec.Command("ip", "-d", "-n", v.NSB, "link", "show", v.IfB).CombinedOutput()
	if !strings.Contains(string(out), "promiscuity 0") {
		t.Fatalf("promiscuous mode still on after Close: %s", out)
	}
}

func TestInfoLoopback(t *testing.T) {
	needNetAdmin(t)
	pool := newPool(t, 64)
	p, err := Open("lo", dpdk.Config{Pool: pool, Options: map[string]string{"blocks": "2", "blocksize": "64K"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if info := p.Info(); info.IfIndex != 1 || info.MTU <= 0 || info.NUMANode != -1 {
		t.Fatalf("lo info %+v", info)
	}
}

// TestPortToPort sends distinct frames of several flows from one namespace
// and checks that all arrive intact, in order within each flow, with sane
// timestamps and matching counters, for both TX methods.
func TestPortToPort(t *testing.T) {
	for _, tx := range []string{TxRing, TxMmsg} {
		t.Run(tx, func(t *testing.T) {
			v := newVethPair(t, 1500)
			pool := newPool(t, 4096)
			a := openIn(t, v.NSA, v.IfA, dpdk.Config{Pool: pool, Options: map[string]string{"tx": tx}})
			b := openIn(t, v.NSB, v.IfB, dpdk.Config{Pool: pool})
			const n, flows = 20000, 8
			size := func(i int) int { return 60 + (i*37)%1400 }
			start := time.Now().UnixNano()
			sent := sendAsync(a, pool, n, func(i int, buf []byte) int {
				return buildFrame(buf, uint32(i%flows), uint32(i/flows), size(i))
			})
			next := make([]uint32, flows)
			var lastTS, backwards int64
			var bytes uint64
			got, other := drain(t, b, n, 10*time.Second, func(q int, pkt *dpdk.Packet) {
				flow, seq, _ := parseFrame(pkt.Data())
				if seq != next[flow] {
					t.Fatalf("flow %d: got seq %d, want %d", flow, seq, next[flow])
				}
				next[flow]++
				if want := size(int(seq)*flows + int(flow)); pkt.Len() != want || !checkFrame(pkt.Data(), flow, seq) {
					t.Fatalf("flow %d seq %d: frame of %d bytes differs from the one sent (%d bytes)", flow, seq, pkt.Len(), want)
				}
				if pkt.Port != b.ID() || pkt.Queue != 0 || pkt.Hash != 0 {
					t.Fatalf("packet port/queue/hash %d/%d/%#x, want %d/0/0 (no rxhash asked)", pkt.Port, pkt.Queue, pkt.Hash, b.ID())
				}
				if pkt.Timestamp < start-int64(time.Second) || pkt.Timestamp > time.Now().UnixNano()+int64(time.Second) {
					t.Fatalf("timestamp %d not near now (%d)", pkt.Timestamp, time.Now().UnixNano())
				}
				if pkt.Timestamp < lastTS {
					backwards++
				}
				lastTS = pkt.Timestamp
				bytes += uint64(pkt.Len())
			})
			if err := <-sent; err != nil {
				t.Fatal(err)
			}
			if got != n {
				t.Fatalf("received %d of %d frames (%d others)", got, n, other)
			}
			if backwards > 0 {
				t.Errorf("%d timestamps went backwards", backwards)
			}
			sa, sb := a.Stats(), b.Stats()
			if sa.TxPackets != n || sa.TxErrors != 0 {
				t.Errorf("sender stats %+v", sa)
			}
			if sb.RxPackets != uint64(n+other) || sb.Dropped != 0 || sb.RxNoBuf != 0 || sb.Errors != 0 {
				t.Errorf("receiver stats %+v, %d other frames", sb, other)
			}
			if sa.TxBytes < bytes || sb.RxBytes < bytes {
				t.Errorf("bytes: tx %d rx %d, test frames %d", sa.TxBytes, sb.RxBytes, bytes)
			}
			if ks := b.KernelStats(0); ks.Packets != uint64(n+other) || ks.Drops != 0 {
				t.Errorf("kernel stats %+v", ks)
			}
			if pool.Available() != pool.Size() {
				t.Errorf("pool leak: %d of %d free", pool.Available(), pool.Size())
			}
		})
	}
}

// TestVLANReinsert sends 802.1Q and 802.1ad tagged frames. The receiving
// kernel moves the outer tag into skb metadata before packet sockets see
// the frame; RxBurst must put it back so the frame is byte-identical.
func TestVLANReinsert(t *testing.T) {
	v := newVethPair(t, 1500)
	pool := newPool(t, 256)
	a := openIn(t, v.NSA, v.IfA, dpdk.Config{Pool: pool})
	b := openIn(t, v.NSB, v.IfB, dpdk.Config{Pool: pool})
	type tag struct{ tpids []uint16 }
	cases := []tag{{[]uint16{0x8100}}, {[]uint16{0x88a8, 0x8100}}, {[]uint16{0x8100}}}
	frame := func(i int, buf []byte) int {
		var plain [1600]byte
		n := buildFrame(plain[:], 0, uint32(i), 100)
		tags := cases[i].tpids
		copy(buf, plain[:12])
		off := 12
		for j, tpid := range tags {
			binary.BigEndian.PutUint16(buf[off:], tpid)
			binary.BigEndian.PutUint16(buf[off+2:], uint16(3<<13|(100+i*10+j))) // PCP 3, VID
			off += 4
		}
		copy(buf[off:], plain[12:n])
		return n + 4*len(tags)
	}
	sendFrames(t, a, pool, len(cases), frame)
	i := 0
	got, _ := drain(t, b, len(cases), 5*time.Second, func(q int, pkt *dpdk.Packet) {
		var want [1600]byte
		n := frame(i, want[:])
		if string(pkt.Data()) != string(want[:n]) {
			t.Errorf("frame %d:\n got % x\nwant % x", i, pkt.Data(), want[:n])
		}
		i++
	})
	if got != len(cases) {
		t.Fatalf("received %d of %d tagged frames", got, len(cases))
	}
}

// TestReadSlots has the dumper's arena filled straight from the ring:
// untagged and tagged frames (their tag put back), cut at the slot size,
// with their wire lengths, and the port's counters as RxBurst keeps them.
func TestReadSlots(t *testing.T) {
	v := newVethPair(t, 1500)
	pool := newPool(t, 256)
	a := openIn(t, v.NSA, v.IfA, dpdk.Config{Pool: pool})
	b := openIn(t, v.NSB, v.IfB, dpdk.Config{Pool: pool})
	const frames, stride = 40, 96
	frame := func(i int, buf []byte) int {
		var plain [1600]byte
		n := buildFrame(plain[:], 1, uint32(i), 60+i*7)
		if i%3 != 0 {
			return copy(buf, plain[:n])
		}
		copy(buf, plain[:12])
		binary.BigEndian.PutUint16(buf[12:], 0x8100)
		binary.BigEndian.PutUint16(buf[14:], uint16(100+i))
		copy(buf[16:], plain[12:n])
		return n + 4
	}
	sendFrames(t, a, pool, frames, frame)
	arena := make([]byte, frames*stride)
	lens := make([]uint16, frames)
	wire := make([]uint32, frames)
	got, total := 0, uint64(0)
	for deadline := time.Now().Add(5 * time.Second); got < frames && time.Now().Before(deadline); {
		// Slots for at most 7 frames a call: the ring holds more.
		k := min(7, frames-got)
		n, bytes := b.ReadSlots(0, 32, arena[got*stride:(got+k)*stride], stride, lens[got:got+k], wire[got:got+k])
		if n > k {
			t.Fatalf("ReadSlots took %d frames into %d slots", n, k)
		}
		got += n
		total += bytes
		if n == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	if got != frames {
		t.Fatalf("read %d of %d frames", got, frames)
	}
	want := uint64(0)
	for i := 0; i < frames; i++ {
		var f [1600]byte
		n := frame(i, f[:])
		c := min(n, stride)
		if int(lens[i]) != c || int(wire[i]) != n || string(arena[i*stride:i*stride+c]) != string(f[:c]) {
			t.Errorf("slot %d: %d bytes of %d on the wire\n% x\nwant %d of %d\n% x", i, lens[i], wire[i],
				arena[i*stride:i*stride+int(lens[i])], c, n, f[:c])
		}
		want += uint64(n)
	}
	st := b.Stats()
	if total != want || st.RxPackets != frames || st.RxBytes != want {
		t.Errorf("bytes %d, stats %+v; want %d frames of %d bytes", total, st, frames, want)
	}
}

// TestFanout spreads many flows over two RX queues: with hash fanout each
// flow stays on one queue, both queues get some, none is lost; with lb
// fanout the queues share frames evenly.
func TestFanout(t *testing.T) {
	for _, mode := range []string{FanoutHash, FanoutLB} {
		t.Run(mode, func(t *testing.T) {
			v := newVethPair(t, 1500)
			pool := newPool(t, 4096)
			a := openIn(t, v.NSA, v.IfA, dpdk.Config{Pool: pool})
			b := openIn(t, v.NSB, v.IfB, dpdk.Config{Pool: pool, RxQueues: 2,
				Options: map[string]string{"fanout": mode, "blocksize": "256K", "blocks": "8", "rxhash": "1"}})
			const n, flows = 6400, 64
			sent := sendAsync(a, pool, n, func(i int, buf []byte) int {
				return buildFrame(buf, uint32(i%flows), uint32(i/flows), 80)
			})
			queueOf := map[uint32]int{}
			hashOf := map[uint32]uint32{}
			perQ := [2]int{}
			next := make([]uint32, flows)
			got, _ := drain(t, b, n, 10*time.Second, func(q int, pkt *dpdk.Packet) {
				flow, seq, _ := parseFrame(pkt.Data())
				perQ[q]++
				if pkt.Queue != uint16(q) {
					t.Fatalf("packet from queue %d says queue %d", q, pkt.Queue)
				}
				if h, ok := hashOf[flow]; pkt.Hash == 0 || (ok && h != pkt.Hash) {
					t.Fatalf("flow %d: hash %#x, before %#x", flow, pkt.Hash, h)
				}
				hashOf[flow] = pkt.Hash
				if mode != FanoutHash {
					return
				}
				if prev, ok := queueOf[flow]; ok && prev != q {
					t.Fatalf("flow %d on queues %d and %d", flow, prev, q)
				}
				queueOf[flow] = q
				if seq != next[flow] {
					t.Fatalf("flow %d: seq %d, want %d", flow, seq, next[flow])
				}
				next[flow]++
			})
			if err := <-sent; err != nil {
				t.Fatal(err)
			}
			if got != n {
				out, _ := exec.Command("ip", "-s", "-n", v.NSB, "link", "show", v.IfB).CombinedOutput()
				t.Fatalf("received %d of %d (per queue %v); stats %+v %+v %+v\n%s", got, n, perQ, b.Stats(), b.KernelStats(0), b.KernelStats(1), out)
			}
			if perQ[0] == 0 || perQ[1] == 0 {
				t.Fatalf("fanout %s left a queue empty: %v", mode, perQ)
			}
			if mode == FanoutLB && (perQ[0] < n/4 || perQ[1] < n/4) {
				t.Fatalf("lb fanout uneven: %v", perQ)
			}
			if s := b.Stats(); s.Dropped != 0 {
				t.Fatalf("drops: %+v", s)
			}
			flowsOn := [2]int{}
			for _, q := range queueOf {
				flowsOn[q]++
			}
			t.Logf("fanout %s: frames per queue %v, flows per queue %v", mode, perQ, flowsOn)
		})
	}
}

// TestPoolExhaustion receives into a pool too small for the traffic: frames
// without a buffer are counted as RxNoBuf and dropped, the ring keeps
// moving, and reception resumes once buffers come back.
func TestPoolExhaustion(t *testing.T) {
	v := newVethPair(t, 1500)
	txPool := newPool(t, 512)
	rxPool, err := dpdk.NewPool("rx-small", 16, 0)
	if err != nil {
		t.Fatal(err)
	}
	a := openIn(t, v.NSA, v.IfA, dpdk.Config{Pool: txPool})
	b := openIn(t, v.NSB, v.IfB, dpdk.Config{Pool: rxPool})
	defer rxPool.Close() // after b's cleanup-registered Close has no buffers out
	const n = 100
	sendFrames(t, a, txPool, n, func(i int, buf []byte) int { return buildFrame(buf, 1, uint32(i), 64) })
	held := make([]*dpdk.Packet, 0, 16)
	var burst [32]*dpdk.Packet
	deadline := time.Now().Add(5 * time.Second)
	for b.Stats().RxPackets+b.Stats().RxNoBuf < n && time.Now().Before(deadline) {
		k := b.RxBurst(0, burst[:])
		held = append(held, burst[:k]...)
		if k == 0 {
			_, _ = b.Wait(0, 5*time.Millisecond)
		}
	}
	s := b.Stats()
	if len(held) != 16 || s.RxPackets != 16 || s.RxNoBuf != n-16 {
		t.Fatalf("held %d, stats %+v; want 16 received and %d without buffer", len(held), s, n-16)
	}
	dpdk.FreeBulk(held)
	sendFrames(t, a, txPool, 10, func(i int, buf []byte) int { return buildFrame(buf, 1, uint32(n+i), 64) })
	if got, _ := drain(t, b, 10, 5*time.Second, nil); got != 10 {
		t.Fatalf("after refill received %d of 10", got)
	}
}

// TestKernelDrops overruns a tiny ring and checks that PACKET_STATISTICS
// accounts for every frame: received plus dropped equals sent.
func TestKernelDrops(t *testing.T) {
	v := newVethPair(t, 1500)
	pool := newPool(t, 1024)
	a := openIn(t, v.NSA, v.IfA, dpdk.Config{Pool: pool})
	b := openIn(t, v.NSB, v.IfB, dpdk.Config{Pool: pool,
		Options: map[string]string{"blocks": "2", "blocksize": "4K", "frame": "2048"}})
	const n = 1000
	sendFrames(t, a, pool, n, func(i int, buf []byte) int { return buildFrame(buf, 1, uint32(i), 200) })
	time.Sleep(10 * time.Millisecond) // past the retire timeout
	got, other := drain(t, b, n, 200*time.Millisecond, nil)
	s := b.Stats()
	if s.Dropped == 0 || uint64(got+other)+s.Dropped != n+uint64(other) {
		t.Fatalf("received %d (+%d other), stats %+v: want received + dropped = %d", got, other, s, n)
	}
	if ks := b.KernelStats(0); ks.Drops != s.Dropped || ks.Packets != uint64(n+other) {
		t.Fatalf("kernel stats %+v vs port stats %+v", ks, s)
	}
}

// TestTxErrors hands TxBurst frames the kernel would refuse: they are taken,
// freed and counted, and the queue keeps working.
func TestTxErrors(t *testing.T) {
	for _, tx := range []string{TxRing, TxMmsg} {
		t.Run(tx, func(t *testing.T) {
			v := newVethPair(t, 1500)
			pool := newPool(t, 64)
			a := openIn(t, v.NSA, v.IfA, dpdk.Config{Pool: pool, Options: map[string]string{"tx": tx}})
			b := openIn(t, v.NSB, v.IfB, dpdk.Config{Pool: pool})
			var pk [4]*dpdk.Packet
			if pool.GetBulk(pk[:]) != 4 {
				t.Fatal("pool")
			}
			_ = pk[0].SetLen(buildFrame(pk[0].Buffer(), 1, 0, 64))
			_ = pk[1].SetLen(10)                                     // shorter than an Ethernet header
			_ = pk[2].SetLen(buildFrame(pk[2].Buffer(), 1, 1, 1515)) // over MTU, untagged
			_ = pk[3].SetLen(buildFrame(pk[3].Buffer(), 1, 2, 1514))
			if k := a.TxBurst(0, pk[:]); k != 4 {
				t.Fatalf("TxBurst took %d of 4", k)
			}
			if s := a.Stats(); s.TxPackets != 2 || s.TxErrors != 2 {
				t.Fatalf("stats %+v", s)
			}
			if got, _ := drain(t, b, 2, 5*time.Second, nil); got != 2 {
				t.Fatalf("received %d of 2 good frames", got)
			}
			if pool.Available() != pool.Size() {
				t.Fatalf("pool leak: %d of %d", pool.Available(), pool.Size())
			}
		})
	}
}

// TestLinkDown transmits while the interface is down: the kernel refuses
// the frames, TxBurst takes and counts them as errors instead of leaving
// them queued, and once the link is back the queue sends again, without a
// stale frame.
func TestLinkDown(t *testing.T) {
	for _, tx := range []string{TxRing, TxMmsg} {
		t.Run(tx, func(t *testing.T) {
			v := newVethPair(t, 1500)
			pool := newPool(t, 256)
			a := openIn(t, v.NSA, v.IfA, dpdk.Config{Pool: pool, Options: map[string]string{"tx": tx}})
			b := openIn(t, v.NSB, v.IfB, dpdk.Config{Pool: pool})
			runIP(t, "-n", v.NSA, "link", "set", v.IfA, "down")
			sendFrames(t, a, pool, 8, func(i int, buf []byte) int { return buildFrame(buf, 1, uint32(i), 64) })
			if s := a.Stats(); s.TxPackets != 0 || s.TxErrors != 8 {
				t.Fatalf("link down: stats %+v, want 8 tx errors", s)
			}
			runIP(t, "-n", v.NSA, "link", "set", v.IfA, "up")
			runIP(t, "-n", v.NSB, "link", "set", v.IfB, "up")
			time.Sleep(50 * time.Millisecond) // carrier
			sendFrames(t, a, pool, 8, func(i int, buf []byte) int { return buildFrame(buf, 2, uint32(i), 64) })
			got, _ := drain(t, b, 8, 5*time.Second, func(q int, pkt *dpdk.Packet) {
				if flow, _, _ := parseFrame(pkt.Data()); flow != 2 {
					t.Errorf("received a frame sent while the link was down")
				}
			})
			if s := a.Stats(); got != 8 || s.TxPackets != 8 || s.TxErrors != 8 {
				t.Fatalf("link up again: received %d of 8, stats %+v", got, s)
			}
		})
	}
}

// TestIgnoreOutgoing checks that an RX port does not see frames its host
// sends out of the interface through the normal (qdisc) path, with one
// queue (socket option) and with a fanout group (fanout flag).
func TestIgnoreOutgoing(t *testing.T) {
	for _, queues := range []int{1, 2} {
		v := newVethPair(t, 1500)
		pool := newPool(t, 256)
		a := openIn(t, v.NSA, v.IfA, dpdk.Config{Pool: pool, RxQueues: queues})
		b := openIn(t, v.NSB, v.IfB, dpdk.Config{Pool: pool})
		// A plain packet socket in A, through the qdisc: what tcpdump on A
		// would see as outgoing.
		err := inNetns(v.NSA, func() error {
			fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			var f [64]byte
			buildFrame(f[:], 3, 0, 64)
			return unix.Sendto(fd, f[:], 0, &unix.SockaddrLinklayer{Ifindex: a.Info().IfIndex, Halen: 6, Addr: [8]byte{2, 0, 0, 0, 0, 0xb}})
		})
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := drain(t, b, 1, 5*time.Second, nil); got != 1 {
			t.Fatalf("%d queues: peer received %d of 1", queues, got)
		}
		if got, _ := drain(t, a, 1, 50*time.Millisecond, nil); got != 0 {
			t.Fatalf("%d queues: the sending port saw its host's outgoing frame", queues)
		}
	}
}

// TestWaitAndClose checks that Wait times out when idle, wakes for a frame
// and for Close, and that a closed port is inert.
func TestWaitAndClose(t *testing.T) {
	v := newVethPair(t, 1500)
	pool := newPool(t, 256)
	a := openIn(t, v.NSA, v.IfA, dpdk.Config{Pool: pool})
	b := openIn(t, v.NSB, v.IfB, dpdk.Config{Pool: pool, Options: map[string]string{"timeout": "1ms"}})
	t0 := time.Now()
	if ok, err := b.Wait(0, 20*time.Millisecond); ok || err != nil {
		t.Fatalf("idle Wait = %v, %v", ok, err)
	}
	if d := time.Since(t0); d < 15*time.Millisecond {
		t.Fatalf("idle Wait returned after %v", d)
	}
	sendFrames(t, a, pool, 1, func(i int, buf []byte) int { return buildFrame(buf, 1, 0, 64) })
	if ok, err := b.Wait(0, 2*time.Second); !ok || err != nil {
		t.Fatalf("Wait with a frame sent = %v, %v", ok, err)
	}
	done := make(chan error, 1)
	go func() {
		var burst [8]*dpdk.Packet
		dpdk.FreeBulk(burst[:b.RxBurst(0, burst[:])])
		_, err := b.Wait(0, 10*time.Second)
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	t0 = time.Now()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("Wait during Close = %v", err)
	}
	if d := time.Since(t0); d > time.Second {
		t.Fatalf("Close took %v to wake Wait", d)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	var burst [8]*dpdk.Packet
	if b.RxBurst(0, burst[:]) != 0 || b.TxBurst(0, burst[:0]) != 0 {
		t.Fatal("burst on a closed port")
	}
	if s := b.Stats(); s.RxPackets != 1 {
		t.Fatalf("stats after close %+v", s)
	}
}

// TestZeroAlloc asserts that the burst paths allocate nothing.
func TestZeroAlloc(t *testing.T) {
	for _, tx := range []string{TxRing, TxMmsg} {
		t.Run(tx, func(t *testing.T) {
			v := newVethPair(t, 1500)
			pool := newPool(t, 1024)
			a := openIn(t, v.NSA, v.IfA, dpdk.Config{Pool: pool, Options: map[string]string{"tx": tx}})
			b := openIn(t, v.NSB, v.IfB, dpdk.Config{Pool: pool, Options: map[string]string{"timeout": "1ms"}})
			var tx, rx [32]*dpdk.Packet
			seq := uint32(0)
			received := 0
			allocs := testing.AllocsPerRun(200, func() {
				k := pool.GetBulk(tx[:])
				for _, pkt := range tx[:k] {
					_ = pkt.SetLen(buildFrame(pkt.Buffer(), 1, seq, 64))
					seq++
				}
				sent := a.TxBurst(0, tx[:k])
				dpdk.FreeBulk(tx[sent:k])
				for i := 0; i < 4; i++ {
					n := b.RxBurst(0, rx[:])
					received += n
					dpdk.FreeBulk(rx[:n])
				}
			})
			if allocs != 0 {
				t.Fatalf("%v allocations per burst pair", allocs)
			}
			if received == 0 {
				t.Fatal("nothing received: the receive path was not exercised")
			}
			if allocs := testing.AllocsPerRun(50, func() { _, _ = b.Wait(0, 100*time.Microsecond) }); allocs != 0 {
				t.Fatalf("%v allocations per Wait", allocs)
			}
		})
	}
}
