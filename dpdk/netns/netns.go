//go:build linux

// Package netns builds the isolated test hosts the appliance's packet paths
// run across: network namespaces joined by veth pairs, created with iproute2
// and removed again, and a way to run code (open a socket, start a port)
// inside a namespace from one locked OS thread. Tests, benchmarks and
// `appliance lab --netns` use it; nothing here touches the host's own
// interfaces.
package netns

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"unicode"

	"golang.org/x/sys/unix"

	"github.com/rdma-appliance/appliance/dpdk"
)

// Available says why namespaces cannot be built here, or nil.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("netns: needs root (CAP_NET_ADMIN for netns/veth, CAP_NET_RAW for AF_PACKET)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("netns: needs the ip command (iproute2)")
	}
	return nil
}

// Do runs f on an OS thread that has entered network namespace ns (a name
// under /run/netns); sockets f creates stay in ns. If the thread cannot be
// put back into the original namespace it stays locked, so the runtime
// discards it with its goroutine instead of reusing it.
func Do(ns string, f func() error) error {
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

// IP runs the ip command.
func IP(args ...string) error {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Pair is a veth link between two fresh namespaces: IfA lives in NSA, IfB
// in NSB.
type Pair struct {
	NSA, NSB string
	IfA, IfB string
}

var seq atomic.Uint32

// NewPair creates two namespaces and a veth pair with names made of prefix
// (up to 3 letters), this process's pid and a sequence, so concurrent runs
// never clash; ReapStale removes what killed runs left. IPv6 is switched
// off in both namespaces so router solicitations and DAD probes do not add
// frames that tests would count. mtu 0 keeps the kernel default.
func NewPair(prefix string, mtu int) (*Pair, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if len(prefix) > 3 {
		return nil, fmt.Errorf("netns: prefix %q longer than 3 letters (interface names are at most 15 bytes)", prefix)
	}
	n := seq.Add(1)
	tag := fmt.Sprintf("%d%c%c", os.Getpid(), 'a'+rune(n/26%26), 'a'+rune(n%26))
	p := &Pair{NSA: prefix + "A" + tag, NSB: prefix + "B" + tag, IfA: prefix + "a" + tag, IfB: prefix + "b" + tag}
	fail := func(err error) (*Pair, error) {
		p.Close()
		return nil, err
	}
	for _, ns := range []string{p.NSA, p.NSB} {
		if err := IP("netns", "add", ns); err != nil {
			return fail(err)
		}
		for _, k := range []string{"all", "default"} {
			err := Do(ns, func() error {
				return os.WriteFile("/proc/sys/net/ipv6/conf/"+k+"/disable_ipv6", []byte("1"), 0)
			})
			if err != nil && !os.IsNotExist(err) {
				return fail(fmt.Errorf("netns: disabling IPv6 in %s: %w", ns, err))
			}
		}
	}
	args := []string{"link", "add", p.IfA, "netns", p.NSA}
	if mtu > 0 {
		args = append(args, "mtu", strconv.Itoa(mtu))
	}
	args = append(args, "type", "veth", "peer", "name", p.IfB, "netns", p.NSB)
	if mtu > 0 {
		args = append(args, "mtu", strconv.Itoa(mtu))
	}
	if err := IP(args...); err != nil {
		return fail(err)
	}
	if err := IP("-n", p.NSA, "link", "set", p.IfA, "up"); err != nil {
		return fail(err)
	}
	if err := IP("-n", p.NSB, "link", "set", p.IfB, "up"); err != nil {
		return fail(err)
	}
	return p, nil
}

// Close deletes the link and both namespaces.
func (p *Pair) Close() error {
	_ = exec.Command("ip", "-n", p.NSA, "link", "del", p.IfA).Run()
	var errs []error
	for _, ns := range []string{p.NSA, p.NSB} {
		if _, err := os.Stat("/run/netns/" + ns); err == nil {
			if err := IP("netns", "del", ns); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// ReapStale deletes namespaces named prefix+"A"/"B"+pid+letters whose
// creating process is gone (a test run killed before its cleanups).
func ReapStale(prefix string) {
	names, _ := os.ReadDir("/run/netns")
	for _, e := range names {
		n := e.Name()
		if !strings.HasPrefix(n, prefix+"A") && !strings.HasPrefix(n, prefix+"B") {
			continue
		}
		digits := strings.TrimRightFunc(n[len(prefix)+1:], unicode.IsLetter)
		pid, err := strconv.Atoi(digits)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat("/proc/" + digits); os.IsNotExist(err) {
			_ = exec.Command("ip", "netns", "del", n).Run()
		}
	}
}

// TestPair is NewPair for tests and benchmarks: it skips when namespaces
// cannot be built here, reaps stale ones first, and removes the pair with
// tb.Cleanup.
func TestPair(tb testing.TB, prefix string, mtu int) *Pair {
	tb.Helper()
	if err := Available(); err != nil {
		tb.Skip(err.Error())
	}
	ReapStale(prefix)
	p, err := NewPair(prefix, mtu)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = p.Close() })
	return p
}

// OpenPort opens the port named by spec (e.g. "afpacket:veth0,timeout=1")
// from inside namespace ns, so its sockets live there, and names the
// namespace in the error.
func OpenPort(ns, spec string, cfg dpdk.Config) (dpdk.Port, error) {
	var p dpdk.Port
	err := Do(ns, func() (err error) {
		p, err = dpdk.Open(spec, cfg)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("netns %s: %w", ns, err)
	}
	return p, nil
}
