//go:build linux

// Package capture compares the afpacket port as a packet capturer with
// tcpdump on the same traffic. It holds only this benchmark.
//
// Setup: two network namespaces joined by a veth pair. Two sender
// goroutines in namespace S, each with its own AF_PACKET TX ring (one
// afpacket TX queue each), pinned to the sender core, offer 64-byte UDP
// frames of 64 flows at a paced rate. The kernel's receive work for veth
// (netif_rx, and the packet taps that copy each frame into the capture
// rings) runs in softirq on the sending core, so the capture core carries
// only the capturer's own work, and the same work for both capturers.
//
// The capturers are both separate processes started the same way: `ip
// netns exec C taskset -c CORE ...`, optionally inside a CPU cgroup:
//
//   - ours: this test binary re-executed as a helper (TestMain) that opens an
//     afpacket port (snaplen=128, default ring: 256 blocks x 256 KiB = 64 MiB)
//     and loops RxBurst(64), writing each frame as a nanosecond pcap record
//     into a 64 KiB buffer flushed to /dev/null (the output work tcpdump -w
//     does), freeing the burst and sleeping in Wait when the ring is empty,
//     as a capture service would: no busy polling, so CPU time is work done.
//     Its block timeout is libpcap's (1 s, tcpdump's read timeout); a second
//     row, afp-2ms, keeps the driver's latency-minded 2 ms default.
//   - tcpdump -i IF -w /dev/null -s 128 -B 65536 -p -n. Same snap length,
//     same ring (libpcap 1.10 also makes 256 KiB TPACKET_V3 blocks, so both
//     rings are 256 x 256 KiB), no promiscuous mode on either side, no
//     filter. Not --immediate-mode: that switches libpcap to TPACKET_V2 and
//     a wakeup per packet, which only costs tcpdump CPU; its default is its
//     most efficient mode.
//
// Each offered rate runs for pointDur with ours, then the same with
// tcpdump, so drift in machine load hits both alike; 1.1 s after the
// traffic stops (past tcpdump's 1 s block timeout, so the last partial
// block has reached either capturer) the capturer's CPU time is read and
// it gets SIGINT and reports. Drops: ours from PACKET_STATISTICS (tp_drops)
// plus RxNoBuf, tcpdump's "packets dropped by kernel"; a point is zero-drop
// when the capturer processed every frame sent, and a capturer's zero-drop
// rate is the highest offered rate it reached, stepping up, before the
// first point where it lost a frame. CPU: the sum of
// sum_exec_runtime (schedstat) over the process's threads, read just
// before the traffic starts and after the drain wait: what getrusage and
// /proc/PID/stat report in ticks, at nanosecond resolution, and the Go
// runtime's threads counted against us.
//
// A sender core moves about 1 Mpps through veth here, while either
// capturer needs only ~0.1 us of CPU per frame: on a dedicated core
// neither can be outrun. So the rates are stepped twice: with the capture
// core to itself (the CPU per packet comparison), and with each capturer
// held to the same small CPU budget by a CFS bandwidth cgroup (cpu.max, or
// cpu.cfs_quota_us on cgroup v1), where the offered rate does outrun them
// and the zero-drop rate measures how far each gets on the same CPU.
package capture

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/afpacket"
)

const (
	pointDur  = 1200 * time.Millisecond
	drainWait = 1100 * time.Millisecond
	frameLen  = 64
	snapLen   = 128
	burstSize = 32
	flows     = 64
	// budgetPct is the CPU share of one core each capturer gets in the
	// budget phase: a 1 ms quota per 20 ms period.
	budgetPct = 5
)

// A capturer is one side of the comparison.
type capturer struct {
	name    string
	tcpdump bool
	opts    string // afpacket port options for our helper
}

var (
	// ours uses the block timeout libpcap gives tcpdump (its 1 s read
	// timeout), so both rings hand over blocks alike.
	ours = capturer{name: "afpacket", opts: "snaplen=128,timeout=1000ms"}
	// oursDefault keeps the driver's 2 ms default, tuned for latency: at
	// moderate rates it hands over part-filled blocks and wakes 5x as often.
	oursDefault = capturer{name: "afp-2ms", opts: "snaplen=128"}
	tcpdumpCap  = capturer{name: "tcpdump", tcpdump: true}
)

// phases are the offered rates in Mpps (0: as fast as the senders go),
// first with the capture core to the capturer, then under the CPU budget.
var phases = []struct {
	budget    int // percent of a core, 0: none
	rates     []float64
	capturers []capturer
}{
	{0, []float64{0.25, 0.5, 0}, []capturer{ours, oursDefault, tcpdumpCap}},
	{budgetPct, []float64{0.2, 0.4, 0.5, 0.6, 0.65, 0.7, 0.75, 0.8, 0}, []capturer{ours, tcpdumpCap}},
}

type result struct {
	who      string
	budget   int
	nominal  float64
	sent     uint64 // frames the senders transmitted
	seen     uint64 // frames the capture socket saw (kernel tp_packets)
	captured uint64 // frames the capturer processed
	drops    uint64 // kernel drops (+ RxNoBuf for ours)
	cpu      time.Duration
	dur      time.Duration
}

func (r result) offeredMpps() float64  { return float64(r.sent) / r.dur.Seconds() / 1e6 }
func (r result) capturedMpps() float64 { return float64(r.captured) / r.dur.Seconds() / 1e6 }
func (r result) zeroDrop() bool        { return r.drops == 0 && r.captured == r.sent }

// cpuPerM is CPU seconds per million captured frames.
func (r result) cpuPerM() float64 {
	if r.captured == 0 {
		return 0
	}
	return r.cpu.Seconds() / (float64(r.captured) / 1e6)
}

func (r result) String() string {
	rate := "max"
	if r.nominal > 0 {
		rate = fmt.Sprintf("%.2f", r.nominal)
	}
	budget := "whole core"
	if r.budget > 0 {
		budget = fmt.Sprintf("%d%% of a core", r.budget)
	}
	note := ""
	if r.seen < r.sent {
		note = fmt.Sprintf(" (%d never reached the socket)", r.sent-r.seen)
	}
	return fmt.Sprintf("%-8s %-13s rate %-4s offered %6.3f Mpps captured %6.3f Mpps  sent %8d seen %8d captured %8d dropped %8d  cpu %6.3fs = %.3f CPU-s/Mpkt%s",
		r.who, budget, rate, r.offeredMpps(), r.capturedMpps(), r.sent, r.seen, r.captured, r.drops, r.cpu.Seconds(), r.cpuPerM(), note)
}

type bench struct {
	l        *linkPair
	txPort   *afpacket.Port
	txPool   *dpdk.Pool
	sendCore int
	capCore  int
	self     string // this test binary, run as our capturer
	tcpdump  string
}

func BenchmarkCapture(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("capture: needs root for network namespaces and AF_PACKET")
	}
	for _, tool := range []string{"ip", "taskset"} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Skipf("capture: needs %s", tool)
		}
	}
	tcpdump, err := exec.LookPath("tcpdump")
	if err != nil {
		b.Skip("capture: tcpdump is not installed (apt-get install tcpdump; make bench installs it)")
	}
	cores, err := dpdk.AllowedCores()
	if err != nil || len(cores) < 2 {
		b.Skipf("capture: needs 2 cores to keep sender and capturer apart (have %v)", cores)
	}
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	bn := &bench{l: newLinkPair(b), sendCore: cores[0], capCore: cores[len(cores)-1], self: self, tcpdump: tcpdump}
	if bn.txPool, err = dpdk.NewPool("capture-tx", 4096, 0); err != nil {
		b.Fatal(err)
	}
	err = inNetns(bn.l.NSA, func() (err error) {
		bn.txPort, err = afpacket.Open(bn.l.IfA, dpdk.Config{Pool: bn.txPool, TxQueues: 2})
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		bn.txPort.Close()
		bn.txPool.Close()
	}()

	b.ReportAllocs()
	results := map[string][]result{}
	for i := 0; i < b.N; i++ {
		clear(results)
		for _, ph := range phases {
			var cg *cgroup
			if ph.budget > 0 {
				if cg, err = newCgroup(ph.budget); err != nil {
					b.Logf("no CPU budget phase: %v", err)
					continue
				}
			}
			for _, rate := range ph.rates {
				for _, c := range ph.capturers {
					r, err := bn.run(c, rate, ph.budget, cg)
					if err != nil {
						cg.remove()
						b.Fatal(err)
					}
					b.Log(r)
					results[c.name] = append(results[c.name], r)
				}
			}
			cg.remove()
		}
	}
	b.StopTimer()

	o, d, t := results[ours.name], results[oursDefault.name], results[tcpdumpCap.name]
	// The CPU per packet comparison: the highest-rate point on a whole core
	// where both captured every frame (the same traffic, both healthy).
	co, cd, ct := cpuAtTop(o, t), cpuAtTop(d, t), cpuAtTop(t, o)
	b.ReportMetric(zeroDropRate(o, 0), "ours-zerodrop-Mpps")
	b.ReportMetric(zeroDropRate(t, 0), "tcpdump-zerodrop-Mpps")
	b.ReportMetric(co, "ours-CPUs/Mpkt")
	b.ReportMetric(cd, "ours2ms-CPUs/Mpkt")
	b.ReportMetric(ct, "tcpdump-CPUs/Mpkt")
	if co > 0 {
		b.ReportMetric(ct/co, "tcpdump/ours-CPU")
	}
	b.ReportMetric(zeroDropRate(o, budgetPct), "ours-zerodrop-5pct-Mpps")
	b.ReportMetric(zeroDropRate(t, budgetPct), "tcpdump-zerodrop-5pct-Mpps")
	b.ReportMetric(maxRate(o, budgetPct), "ours-max-5pct-Mpps")
	b.ReportMetric(maxRate(t, budgetPct), "tcpdump-max-5pct-Mpps")
	b.Logf("whole core: zero-drop ours %.3f / tcpdump %.3f Mpps (sender-bound); CPU-s per Mpkt at the top common zero-drop point: ours %.3f (2 ms default %.3f) / tcpdump %.3f",
		zeroDropRate(o, 0), zeroDropRate(t, 0), co, cd, ct)
	b.Logf("%d%% of a core: zero-drop ours %.3f / tcpdump %.3f Mpps; max capture ours %.3f / tcpdump %.3f Mpps",
		budgetPct, zeroDropRate(o, budgetPct), zeroDropRate(t, budgetPct), maxRate(o, budgetPct), maxRate(t, budgetPct))
}

// cpuAtTop is a's CPU seconds per million frames at the highest-rate
// whole-core point where both a and b captured every frame.
func cpuAtTop(a, b []result) float64 {
	v := 0.0
	for i := range a {
		if i < len(b) && a[i].budget == 0 && a[i].zeroDrop() && b[i].zeroDrop() {
			v = a[i].cpuPerM()
		}
	}
	return v
}

// zeroDropRate steps up the offered rates under the given budget and
// returns the highest reached before the first point that lost a frame.
func zeroDropRate(rs []result, budget int) float64 {
	best := 0.0
	for _, r := range rs {
		if r.budget != budget {
			continue
		}
		if !r.zeroDrop() {
			break
		}
		best = max(best, r.offeredMpps())
	}
	return best
}

func maxRate(rs []result, budget int) float64 {
	best := 0.0
	for _, r := range rs {
		if r.budget == budget {
			best = max(best, r.capturedMpps())
		}
	}
	return best
}

// run measures one capturer at one offered rate.
func (bn *bench) run(c capturer, mpps float64, budget int, cg *cgroup) (result, error) {
	who := c.name
	res := result{who: who, nominal: mpps, budget: budget}
	args := []string{"ip", "netns", "exec", bn.l.NSB, "taskset", "-c", strconv.Itoa(bn.capCore)}
	ready := "listening on" // tcpdump's line on stderr once capturing
	if c.tcpdump {
		args = append(args, bn.tcpdump, "-i", bn.l.IfB, "-w", "/dev/null", "-s", strconv.Itoa(snapLen), "-B", "65536", "-p", "-n")
	} else {
		args = append(args, bn.self)
		ready = helperReady
	}
	if cg != nil {
		// Join the cgroup first, then exec the rest: every thread of the
		// capturer starts inside it.
		args = append([]string{"sh", "-c", `echo $$ > "$0" && exec "$@"`, cg.procs}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), helperEnv+"="+bn.l.IfB, helperOptsEnv+"="+c.opts)
	out, err := cmd.StderrPipe()
	if err != nil {
		return res, err
	}
	cmd.Stdout = cmd.Stderr // the helper reports on stdout; one stream for both
	if err := cmd.Start(); err != nil {
		return res, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	// sh, ip netns exec and taskset all exec in place: the pid is the capturer's.
	pid := cmd.Process.Pid
	var mu sync.Mutex
	var lines []string
	started := make(chan bool, 1)
	ended := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		seen := false
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			mu.Unlock()
			if !seen && strings.Contains(sc.Text(), ready) {
				seen = true
				started <- true
			}
		}
		if !seen {
			started <- false
		}
		close(ended)
	}()
	select {
	case ok := <-started:
		if !ok {
			return res, fmt.Errorf("%s ended before capturing: %q", who, lines)
		}
	case <-time.After(10 * time.Second):
		return res, fmt.Errorf("%s did not start capturing", who)
	}
	t0, err := procCPU(pid)
	if err != nil {
		return res, err
	}
	res.sent, res.dur = bn.offer(mpps)
	time.Sleep(drainWait)
	t1, err := procCPU(pid)
	if err != nil {
		return res, err
	}
	res.cpu = t1 - t0
	_ = cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		return res, fmt.Errorf("%s did not stop on SIGINT", who)
	}
	mu.Lock()
	defer mu.Unlock()
	found := 0
	for _, line := range lines {
		for _, m := range statLine.FindAllStringSubmatch(line, -1) {
			v, _ := strconv.ParseUint(m[1], 10, 64)
			switch m[2] {
			case "captured":
				res.captured = v
			case "received by filter":
				res.seen = v
			case "dropped by kernel":
				res.drops = v
			}
			found++
		}
	}
	if found < 3 {
		return res, fmt.Errorf("%s statistics missing from its output: %q", who, lines)
	}
	return res, nil
}

// statLine matches tcpdump's closing statistics; the helper prints the
// same three lines.
var statLine = regexp.MustCompile(`(\d+) packets? (captured|received by filter|dropped by kernel)`)

// offer sends frames for pointDur at mpps in total (0: unpaced) from two
// goroutines pinned to the sender core, each with its own TX queue. It
// returns the frames sent and the time it took.
func (bn *bench) offer(mpps float64) (uint64, time.Duration) {
	const senders = 2
	var sent atomic.Uint64
	var wg sync.WaitGroup
	start := dpdk.Nanotime()
	end := start + int64(pointDur)
	for i := 0; i < senders; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := dpdk.Pin(bn.sendCore); err == nil {
				defer runtime.UnlockOSThread()
			}
			var interval int64 // ns between bursts of this sender
			if mpps > 0 {
				interval = int64(float64(burstSize*senders) / (mpps * 1e6) * 1e9)
			}
			var frame [frameLen]byte
			buildFrame(frame[:])
			var burst [burstSize]*dpdk.Packet
			var n uint64
			next := start
			seq := uint32(i) << 28
			for now := dpdk.Nanotime(); now < end; now = dpdk.Nanotime() {
				if interval > 0 && now < next {
					continue // spin: the sender core is the load generator's
				}
				k := bn.txPool.GetBulk(burst[:])
				for _, pkt := range burst[:k] {
					pkt.CopyFrom(frame[:])
					d := pkt.Data()
					binary.BigEndian.PutUint16(d[34:], uint16(10000+seq%flows)) // UDP source port: the flow
					binary.BigEndian.PutUint32(d[46:], seq)
					seq++
				}
				m := bn.txPort.TxBurst(i, burst[:k])
				dpdk.FreeBulk(burst[m:k])
				n += uint64(m)
				if next += interval; interval > 0 && now-next > int64(10*time.Millisecond) {
					next = now // behind by more than a few bursts: do not catch up in a rush
				}
			}
			sent.Add(n)
		}()
	}
	wg.Wait()
	return sent.Load(), time.Duration(dpdk.Nanotime() - start)
}

// procCPU is a process's CPU time: sum_exec_runtime over its threads.
func procCPU(pid int) (time.Duration, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("no schedstat for pid %d", pid)
	}
	var total time.Duration
	for _, path := range tasks {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // a thread that just ended
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			total += time.Duration(ns)
		}
	}
	return total, nil
}

// cgroup is a CPU bandwidth cgroup holding a capturer to a share of a core.
type cgroup struct {
	dir   string
	procs string
}

func newCgroup(pct int) (*cgroup, error) {
	const period = 20000 // us; the kernel wants a quota of at least 1 ms
	quota := period * pct / 100
	name := fmt.Sprintf("capbench%d", os.Getpid())
	if b, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil && strings.Contains(string(b), "cpu") {
		dir := "/sys/fs/cgroup/" + name
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, err
		}
		cg := &cgroup{dir: dir, procs: dir + "/cgroup.procs"}
		if err := os.WriteFile(dir+"/cpu.max", []byte(fmt.Sprintf("%d %d", quota, period)), 0); err != nil {
			cg.remove()
			return nil, err
		}
		return cg, nil
	}
	v1 := "/sys/fs/cgroup/cpu"
	if _, err := os.Stat(v1 + "/cpu.cfs_quota_us"); err != nil {
		return nil, fmt.Errorf("no cgroup cpu controller")
	}
	dir := v1 + "/" + name
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	cg := &cgroup{dir: dir, procs: dir + "/cgroup.procs"}
	if err := os.WriteFile(dir+"/cpu.cfs_period_us", []byte(strconv.Itoa(period)), 0); err != nil {
		cg.remove()
		return nil, err
	}
	if err := os.WriteFile(dir+"/cpu.cfs_quota_us", []byte(strconv.Itoa(quota)), 0); err != nil {
		cg.remove()
		return nil, err
	}
	return cg, nil
}

func (cg *cgroup) remove() {
	if cg != nil {
		_ = os.Remove(cg.dir)
	}
}

// buildFrame writes a 64-byte IPv4/UDP frame whose destination MAC is not
// the receiver's, so the capture namespace's IP stack drops it at once
// (PACKET_OTHERHOST) after the packet taps have seen it.
func buildFrame(f []byte) {
	copy(f[0:], []byte{0x02, 0, 0, 0, 0, 0xc})
	copy(f[6:], []byte{0x02, 0, 0, 0, 0, 0x5})
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:34]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(len(f)-14))
	ip[8], ip[9] = 64, 17
	copy(ip[12:], []byte{10, 9, 0, 1, 10, 9, 0, 2})
	binary.BigEndian.PutUint16(f[36:], 4791)
	binary.BigEndian.PutUint16(f[38:], uint16(len(f)-34))
}
