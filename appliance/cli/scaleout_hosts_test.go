package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/appliance/lumina"
	"github.com/rdma-appliance/appliance/dpdk/netns"
)

// scaleNet is a small data centre for the scale-out tests: every host is
// a network namespace, and a switch namespace holds two Linux bridges,
// the control network (every host and this test's own namespace on one
// /24, reached over a veth each) and a shared data network for hosts
// that need one. Services run on the hosts as separate processes (this
// test binary re-executed as the appliance, see TestMain) under `ip
// netns exec`, so every socket they open, packet ports included, is in
// their host. Everything is removed with t.Cleanup, processes first, and
// namespaces a killed run left are reaped by the next one (their names
// carry the pid, netns.ReapStale's way).
type scaleNet struct {
	t      *testing.T
	prefix string // namespace names: soA<pid><tag><host>
	sw     string // the switch namespace
	net    string // the control /24's first three octets: "198.18.N"
	bin    string // this test binary, the appliance when re-executed
	hosts  []*scaleHost
	nData  int    // ports on the data bridge so far
	token  string // the control token file every service and client uses
}

// scaleHost is one machine: a namespace with a control address.
type scaleHost struct {
	Name string
	NS   string
	IP   string // control address, on interface ctl
}

// scaleReap prefixes every name the scale nets give namespaces and
// this namespace's veth ends (netns.ReapStale(scaleReap) finds them).
// Control addresses come from 198.18.0.0/15, the range RFC 2544 sets aside
// for benchmarking networks, one free /24 per net; the test's own end of
// the control network is .1, hosts .10 on.
const scaleReap = "so"

// newScaleNet builds the switch namespace and the test's veth to its
// control bridge. tag (letters) tells apart two nets of one process. It
// skips the test where namespaces cannot be built.
func newScaleNet(t *testing.T, tag string) *scaleNet {
	t.Helper()
	if err := netns.Available(); err != nil {
		t.Skip(err.Error())
	}
	netns.ReapStale(scaleReap)
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pid := os.Getpid()
	n := &scaleNet{t: t, prefix: fmt.Sprintf("%sA%d%s", scaleReap, pid, tag), bin: bin}
	// The services listen on the control network, off loopback: they
	// take changes only with the token, which every process shares.
	n.token = filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(n.token, []byte("scale-out-control-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n.net, err = freeControlNet(pid*2 + int(tag[0]))
	if err != nil {
		t.Skip(err.Error())
	}
	n.sw = n.addNS("sw")
	for _, br := range []string{"cbr", "dbr"} {
		if err := netns.IP("-n", n.sw, "link", "add", br, "type", "bridge"); err != nil {
			t.Skip("needs the kernel's bridge driver: ", err)
		}
		n.ip("-n", n.sw, "link", "set", br, "up")
	}
	// This test's end of the control network; it goes when the switch
	// namespace does (deleting one end of a veth deletes both).
	root := fmt.Sprintf("%s%d%s", scaleReap, pid, tag)
	n.ip("link", "add", root, "type", "veth", "peer", "name", "test", "netns", n.sw)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", root).Run() })
	n.ip("-n", n.sw, "link", "set", "test", "master", "cbr", "up")
	n.ip("addr", "add", n.net+".1/24", "dev", root)
	n.ip("link", "set", root, "up")
	return n
}

// freeControlNet picks a /24 of 198.18.0.0/15 that no address or route
// of this namespace overlaps, starting from a place seed chooses so that
// concurrent runs rarely meet.
func freeControlNet(seed int) (string, error) {
	var used []netip.Prefix
	for _, args := range [][]string{{"-4", "-o", "addr"}, {"-4", "route", "show", "table", "all"}} {
		out, err := exec.Command("ip", args...).Output()
		if err != nil {
			return "", fmt.Errorf("ip %s: %w", strings.Join(args, " "), err)
		}
		for _, f := range strings.Fields(string(out)) {
			if p, err := netip.ParsePrefix(f); err == nil && p.Bits() > 0 {
				used = append(used, p)
			} else if a, err := netip.ParseAddr(f); err == nil {
				used = append(used, netip.PrefixFrom(a, 32))
			}
		}
	}
next:
	for i := range 512 {
		k := (seed + i) % 512
		cand := netip.PrefixFrom(netip.AddrFrom4([4]byte{198, byte(18 + k/256), byte(k % 256), 0}), 24)
		for _, u := range used {
			if u.Overlaps(cand) {
				continue next
			}
		}
		return fmt.Sprintf("198.%d.%d", 18+k/256, k%256), nil
	}
	return "", fmt.Errorf("no free /24 in 198.18.0.0/15 for the control network")
}

func (n *scaleNet) ip(args ...string) {
	n.t.Helper()
	if err := netns.IP(args...); err != nil {
		n.t.Fatal(err)
	}
}

// addNS creates namespace prefix+name with IPv6 off (no router
// solicitations or DAD probes on the links) and loopback up.
func (n *scaleNet) addNS(name string) string {
	n.t.Helper()
	ns := n.prefix + name
	n.ip("netns", "add", ns)
	n.t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	for _, k := range []string{"all", "default"} {
		err := netns.Do(ns, func() error {
			return os.WriteFile("/proc/sys/net/ipv6/conf/"+k+"/disable_ipv6", []byte("1"), 0)
		})
		if err != nil && !os.IsNotExist(err) {
			n.t.Fatalf("disabling IPv6 in %s: %v", ns, err)
		}
	}
	n.ip("-n", ns, "link", "set", "lo", "up")
	return ns
}

// host adds a machine (name: letters) on the control network.
func (n *scaleNet) host(name string) *scaleHost {
	n.t.Helper()
	h := &scaleHost{Name: name, NS: n.addNS(name), IP: fmt.Sprintf("%s.%d", n.net, 10+len(n.hosts))}
	port := fmt.Sprintf("c%d", len(n.hosts))
	n.hosts = append(n.hosts, h)
	n.ip("-n", n.sw, "link", "add", port, "type", "veth", "peer", "name", "ctl", "netns", h.NS)
	n.ip("-n", n.sw, "link", "set", port, "master", "cbr", "up")
	n.ip("-n", h.NS, "addr", "add", h.IP+"/24", "dev", "ctl")
	n.ip("-n", h.NS, "link", "set", "ctl", "up")
	return h
}

// link joins two hosts with a veth pair: ifa (MAC maca) in a, ifb (MAC
// macb) in b. Nothing but the packet ports uses it: no addresses.
func (n *scaleNet) link(a *scaleHost, ifa, maca string, b *scaleHost, ifb, macb string) {
	n.t.Helper()
	n.ip("-n", a.NS, "link", "add", ifa, "address", maca, "type", "veth", "peer", "name", ifb, "address", macb, "netns", b.NS)
	n.ip("-n", a.NS, "link", "set", ifa, "up")
	n.ip("-n", b.NS, "link", "set", ifb, "up")
}

// dataPort puts interface ifname (MAC mac) of h on the shared data
// bridge.
func (n *scaleNet) dataPort(h *scaleHost, ifname, mac string) {
	n.t.Helper()
	port := fmt.Sprintf("d%d", n.nData)
	n.nData++
	n.ip("-n", n.sw, "link", "add", port, "type", "veth", "peer", "name", ifname, "address", mac, "netns", h.NS)
	n.ip("-n", n.sw, "link", "set", port, "master", "dbr", "up")
	n.ip("-n", h.NS, "link", "set", ifname, "up")
}

// command is the appliance command line args run on h.
func (n *scaleNet) command(ctx context.Context, h *scaleHost, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.NS, n.bin}, args...)...)
	cmd.Env = append(os.Environ(), "APPLIANCE_CLI_EXEC=1", "APPLIANCE_TOKEN_FILE="+n.token)
	// Services die with this process, even when it is killed before its
	// cleanups run (ip netns exec execs them, keeping the signal).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// scaleProc is a service running on a host.
type scaleProc struct {
	name string
	cmd  *exec.Cmd
	out  lockedBuffer // standard output and error
	done chan struct{}
	err  error
}

// lockedBuffer is a bytes.Buffer that a process's (or a service's)
// writers and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// start runs a service on h until stop or the end of the test; a test
// that fails shows what it printed.
func (n *scaleNet) start(h *scaleHost, name string, args ...string) *scaleProc {
	n.t.Helper()
	p := &scaleProc{name: name + " on " + h.Name, done: make(chan struct{})}
	p.cmd = n.command(context.Background(), h, args...)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	n.t.Cleanup(func() {
		if p.stop(10*time.Second) != nil || n.t.Failed() {
			n.t.Logf("%s (%v):\n%s", p.name, p.err, lastLines(p.out.String(), 30))
		}
	})
	return p
}

// stop sends SIGTERM and waits for the exit (SIGKILL after within); nil
// for a clean exit.
func (p *scaleProc) stop(within time.Duration) error {
	select {
	case <-p.done:
		return p.err
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(within):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s: no exit %v after SIGTERM", p.name, within)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitHealthy polls a service's /healthz until it answers 200; the
// service exiting first, or within passing, fails the test.
func waitHealthy(t *testing.T, p *scaleProc, addr string, within time.Duration) {
	t.Helper()
	c := &http.Client{Timeout: time.Second}
	var last string
	for deadline := time.Now().Add(within); ; {
		resp, err := c.Get("http://" + addr + "/healthz")
		if err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = resp.Status + ": " + strings.TrimSpace(string(b))
		} else {
			last = err.Error()
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited (%v) before it was healthy:\n%s", p.name, p.err, lastLines(p.out.String(), 30))
		case <-time.After(25 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s at %s not healthy within %v: %s\n%s", p.name, addr, within, last, lastLines(p.out.String(), 30))
		}
	}
}

// getJSON GETs a service's path into out and returns the HTTP status
// (0 with the error when there was no answer).
func getJSON(c *http.Client, addr, path string, out any) (int, error) {
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode == http.StatusOK && out != nil {
		return resp.StatusCode, json.Unmarshal(b, out)
	}
	return resp.StatusCode, nil
}

// netnsExec is lumina.Executor on the scale net: the appliance command
// runs in the namespace of the host whose control address it names, as
// SSH would run it on that machine.
type netnsExec struct {
	n     *scaleNet
	hosts map[string]*scaleHost // by control address
}

func (e netnsExec) Run(ctx context.Context, a lumina.Access, argv []string) ([]byte, error) {
	h := e.hosts[a.ControlIP]
	if h == nil {
		return nil, fmt.Errorf("no host at %s", a.ControlIP)
	}
	if argv[0] != "appliance" {
		return nil, fmt.Errorf("%s: not found on %s", argv[0], h.Name)
	}
	cmd := e.n.command(ctx, h, argv[1:]...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s on %s: %w: %s", strings.Join(argv[:min(4, len(argv))], " "), h.Name, err, lastLines(stderr.String(), 10))
	}
	return out, nil
}
