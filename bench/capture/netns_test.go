//go:build linux

package capture

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// linkPair is a veth link between two fresh network namespaces: the sender
// side S and the capture side C. Traffic never leaves them.
type linkPair struct {
	nsS, nsC string
	ifS, ifC string
}

func runIP(tb testing.TB, args ...string) {
	tb.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		tb.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// newLinkPair builds the namespaces and the veth pair with names unique to
// this process; tb.Cleanup removes them. IPv6 is off so that only the
// benchmark's frames cross the link.
func newLinkPair(tb testing.TB) *linkPair {
	tb.Helper()
	reapStale()
	tag := fmt.Sprint(os.Getpid())
	l := &linkPair{nsS: "capS" + tag, nsC: "capC" + tag, ifS: "cps" + tag, ifC: "cpc" + tag}
	for _, ns := range []string{l.nsS, l.nsC} {
		runIP(tb, "netns", "add", ns)
		tb.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
		for _, k := range []string{"all", "default"} {
			_ = inNetns(ns, func() error {
				return os.WriteFile("/proc/sys/net/ipv6/conf/"+k+"/disable_ipv6", []byte("1"), 0)
			})
		}
	}
	runIP(tb, "link", "add", l.ifS, "netns", l.nsS, "type", "veth", "peer", "name", l.ifC, "netns", l.nsC)
	tb.Cleanup(func() { _ = exec.Command("ip", "-n", l.nsS, "link", "del", l.ifS).Run() })
	runIP(tb, "-n", l.nsS, "link", "set", l.ifS, "up")
	runIP(tb, "-n", l.nsC, "link", "set", l.ifC, "up")
	return l
}

// reapStale deletes namespaces and CPU cgroups a killed earlier run left
// behind: capS/capC/capbench + the pid of a process that is gone.
func reapStale() {
	for _, dir := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/cpu"} {
		cgs, _ := filepath.Glob(dir + "/capbench*")
		for _, cg := range cgs {
			pid := strings.TrimPrefix(filepath.Base(cg), "capbench")
			if _, err := os.Stat("/proc/" + pid); os.IsNotExist(err) {
				_ = os.Remove(cg)
			}
		}
	}
	names, _ := os.ReadDir("/run/netns")
	for _, e := range names {
		n := e.Name()
		if !strings.HasPrefix(n, "capS") && !strings.HasPrefix(n, "capC") {
			continue
		}
		pid, err := strconv.Atoi(n[4:])
		if err != nil || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat("/proc/" + n[4:]); os.IsNotExist(err) {
			_ = exec.Command("ip", "netns", "del", n).Run()
		}
	}
}

// inNetns runs f on a thread inside network namespace ns. A thread that
// cannot be put back is left locked, so it dies with its goroutine.
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
			errc <- err
			return
		}
		defer unix.Close(target)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- err
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
