//go:build linux

package afpacket

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unicode"

	"golang.org/x/sys/unix"

	"github.com/rdma-appliance/appliance/dpdk"
)

// needNetAdmin skips tests that build namespaces and veth pairs.
func needNetAdmin(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("afpacket: needs root (CAP_NET_ADMIN for netns/veth, CAP_NET_RAW for AF_PACKET)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("afpacket: needs the ip command (iproute2) to build netns/veth pairs")
	}
}

var (
	pairSeq  atomic.Uint32
	reapOnce sync.Once
)

// reapStale deletes namespaces an earlier test run left behind when it was
// killed before its cleanups ran (a go test -timeout, say): ours are named
// afpA/afpB + creator pid + letters, and the creator is gone.
func reapStale() {
	names, _ := os.ReadDir("/run/netns")
	for _, e := range names {
		n := e.Name()
		if !strings.HasPrefix(n, "afpA") && !strings.HasPrefix(n, "afpB") {
			continue
		}
		digits := strings.TrimRightFunc(n[4:], unicode.IsLetter)
		pid, err := strconv.Atoi(digits)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat("/proc/" + digits); os.IsNotExist(err) {
			_ = exec.Command("ip", "netns", "del", n).Run()
		}
	}
}

// vethPair is a veth link between two fresh network namespaces, so tests
// see only their own traffic and never touch the host's interfaces.
type vethPair struct {
	nsA, nsB string
	ifA, ifB string
}

func runIP(t testing.TB, args ...string) {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// newVethPair creates namespaces and a veth pair named uniquely for this
// process and call, removed again by t.Cleanup. IPv6 is off in both
// namespaces so that router solicitations and DAD probes do not add frames
// to the tests' counts.
func newVethPair(t testing.TB, mtu int) *vethPair {
	t.Helper()
	needNetAdmin(t)
	reapOnce.Do(reapStale)
	seq := pairSeq.Add(1) // two letters: 676 pairs before a name repeats
	tag := fmt.Sprintf("%d%c%c", os.Getpid(), 'a'+rune(seq/26%26), 'a'+rune(seq%26))
	v := &vethPair{nsA: "afpA" + tag, nsB: "afpB" + tag, ifA: "afa" + tag, ifB: "afb" + tag}
	for _, ns := range []string{v.nsA, v.nsB} {
		runIP(t, "netns", "add", ns)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
		for _, k := range []string{"all", "default"} {
			err := inNetns(ns, func() error {
				return os.WriteFile("/proc/sys/net/ipv6/conf/"+k+"/disable_ipv6", []byte("1"), 0)
			})
			if err != nil && !os.IsNotExist(err) {
				t.Fatalf("disable ipv6 in %s: %v", ns, err)
			}
		}
	}
	runIP(t, "link", "add", v.ifA, "netns", v.nsA, "mtu", fmt.Sprint(mtu), "type", "veth",
		"peer", "name", v.ifB, "netns", v.nsB, "mtu", fmt.Sprint(mtu))
	t.Cleanup(func() { _ = exec.Command("ip", "-n", v.nsA, "link", "del", v.ifA).Run() })
	runIP(t, "-n", v.nsA, "link", "set", v.ifA, "up")
	runIP(t, "-n", v.nsB, "link", "set", v.ifB, "up")
	return v
}

// inNetns runs f on an OS thread that has entered network namespace ns
// (a name under /run/netns). Sockets f creates stay in ns. f runs on its
// own goroutine and thread; if the thread cannot be put back into the
// original namespace it is left locked and so discarded when the goroutine
// ends, never reused by other goroutines.
func inNetns(ns string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer unix.Close(orig)
		target, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netns %s: %w", ns, err)
			return
		}
		defer unix.Close(target)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		err = f()
		if unix.Setns(orig, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
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
