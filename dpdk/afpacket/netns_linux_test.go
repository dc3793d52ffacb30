//go:build linux

package afpacket

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/netns"
)

// needNetAdmin skips tests that build namespaces and veth pairs.
func needNetAdmin(t testing.TB) {
	t.Helper()
	if err := netns.Available(); err != nil {
		t.Skip(err.Error())
	}
}

// vethPair is a veth link between two fresh network namespaces, so tests
// see only their own traffic and never touch the host's interfaces.
type vethPair = netns.Pair

func newVethPair(t testing.TB, mtu int) *vethPair { return netns.TestPair(t, "afp", mtu) }

func inNetns(ns string, f func() error) error { return netns.Do(ns, f) }

func runIP(t testing.TB, args ...string) {
	t.Helper()
	if err := netns.IP(args...); err != nil {
		t.Fatal(err)
	}
}

// open opens ifname in namespace ns.
func openIn(t testing.TB, ns, ifname string, cfg dpdk.Config) *Port {
	t.Helper()
	var p *Port
	err := inNetns(ns, func() (err error) {
		p, err = Open(ifname, cfg)
		return err
	})
	if err != nil {
		t.Fatalf("open %s in %s: %v", ifname, ns, err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func newPool(t testing.TB, n int) *dpdk.Pool {
	t.Helper()
	pool, err := dpdk.NewPool(t.Name(), n, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pool.Close() })
	return pool
}

// Test frames are IPv4/UDP from 10.0.0.1 to 10.0.0.2 with a flow number
// as UDP source port and a payload of magic, flow, sequence number and a
// pattern derived from both, so a receiver can check every byte. The
// destination MAC is not the receiver's, so the receiving host's IP stack
// drops the frame at once (PACKET_OTHERHOST) and sends nothing back.
const testMagic = 0xafa0cafe

var (
	testDst = [6]byte{0x02, 0, 0, 0, 0, 0xb}
	testSrc = [6]byte{0x02, 0, 0, 0, 0, 0xa}
)

// buildFrame writes the frame of (flow, seq) of size bytes into b and
// returns its length. size is at least 60.
func buildFrame(b []byte, flow, seq uint32, size int) int {
	f := b[:size]
	copy(f[0:], testDst[:])
	copy(f[6:], testSrc[:])
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:34]
	ip[0], ip[1] = 0x45, 0
	binary.BigEndian.PutUint16(ip[2:], uint16(size-14))
	binary.BigEndian.PutUint16(ip[4:], uint16(seq))
	ip[6], ip[7], ip[8], ip[9] = 0x40, 0, 64, 17
	ip[10], ip[11] = 0, 0
	copy(ip[12:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	udp := f[34:42]
	binary.BigEndian.PutUint16(udp[0:], uint16(10000+flow))
	binary.BigEndian.PutUint16(udp[2:], 4791)
	binary.BigEndian.PutUint16(udp[4:], uint16(size-34))
	binary.BigEndian.PutUint16(udp[6:], 0)
	pl := f[42:]
	binary.BigEndian.PutUint32(pl[0:], testMagic)
	binary.BigEndian.PutUint32(pl[4:], flow)
	binary.BigEndian.PutUint32(pl[8:], seq)
	for i := 12; i < len(pl); i++ {
		pl[i] = byte(uint32(i) + flow*7 + seq*13)
	}
	return size
}

// parseFrame returns the flow and sequence number of a test frame (one
// with an 802.1Q/802.1ad tag or two too) and whether it is one.
func parseFrame(f []byte) (flow, seq uint32, ok bool) {
	off := 12
	for off+4 <= len(f) {
		t := binary.BigEndian.Uint16(f[off:])
		if t != 0x8100 && t != 0x88a8 {
			break
		}
		off += 4
	}
	if off+2+28+12 > len(f) || binary.BigEndian.Uint16(f[off:]) != 0x0800 {
		return 0, 0, false
	}
	pl := f[off+2+28:]
	if binary.BigEndian.Uint32(pl) != testMagic {
		return 0, 0, false
	}
	return binary.BigEndian.Uint32(pl[4:]), binary.BigEndian.Uint32(pl[8:]), true
}

// checkFrame says whether f is exactly the frame buildFrame made for
// (flow, seq).
func checkFrame(f []byte, flow, seq uint32) bool {
	var want [9216]byte
	n := buildFrame(want[:], flow, seq, len(f))
	return bytes.Equal(f, want[:n])
}

// sendFrames transmits frames built by mk on port q 0, retrying what the
// ring leaves, in bursts of 32.
func sendFrames(t testing.TB, p *Port, pool *dpdk.Pool, n int, mk func(i int, b []byte) int) {
	t.Helper()
	if err := send(p, pool, n, mk); err != nil {
		t.Fatal(err)
	}
}

// sendAsync is sendFrames on another goroutine, for tests that must read
// while sending: a ring fills within a few retire timeouts if nobody reads
// it, and a sender slowed down (by -race, say) stretches the send over
// many. The returned channel yields the error when sending is done.
func sendAsync(p *Port, pool *dpdk.Pool, n int, mk func(i int, b []byte) int) <-chan error {
	c := make(chan error, 1)
	go func() { c <- send(p, pool, n, mk) }()
	return c
}

func send(p *Port, pool *dpdk.Pool, n int, mk func(i int, b []byte) int) error {
	var burst [32]*dpdk.Packet
	for i := 0; i < n; {
		k := min(len(burst), n-i)
		got := pool.GetBulk(burst[:k])
		if got == 0 {
			return fmt.Errorf("tx pool empty after %d frames", i)
		}
		for j := 0; j < got; j++ {
			if err := burst[j].SetLen(mk(i+j, burst[j].Buffer())); err != nil {
				dpdk.FreeBulk(burst[:got])
				return err
			}
		}
		sent := 0
		for tries := 0; sent < got; tries++ {
			sent += p.TxBurst(0, burst[sent:got])
			if tries > 1e6 {
				dpdk.FreeBulk(burst[sent:got])
				return fmt.Errorf("TxBurst stuck after %d frames", i+sent)
			}
			if sent < got {
				runtime.Gosched()
			}
		}
		i += got
	}
	return nil
}
