//go:build linux

// Package capture compares the afpacket port as a packet capturer, and
// the Lumina dumper on it, with tcpdump on the same traffic. It holds only
// this benchmark.
//
// Setup: two network namespaces joined by a veth pair. Two sender
// goroutines in namespace S, each with its own AF_PACKET TX ring (one
// afpacket TX queue each), pinned to the sender core, offer 64-byte UDP
// frames of 64 flows at a paced rate. The kernel's receive work for veth
// (netif_rx, and the packet taps that copy each frame into the capture
// rings) runs in softirq on the sending core, so the capture core carries
// only the capturer's own work, and the same work for every capturer.
//
// The capturers are all separate processes started the same way: `ip
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
//   - dumper: the same helper with the same port (snaplen=128, 1 s block
//     timeout) running the Lumina dumper (package dumper, snap-len 128) in
//     place of the pcap loop. Its one worker is not pinned through the
//     dumper's Cores (taskset already holds the process to the capture
//     core): a pinned worker spins on its core for ever, which would make
//     its CPU time the length of the point whatever the traffic. Unpinned,
//     it polls with the dumper's backoff (64 spins, yields to 256 empty
//     polls, then sleeps doubling to 200 us) and never parks in Wait as
//     ours does, so its figure includes those idle wakeups, some 5000 a
//     second between blocks and in the drain wait. Idle on lo they cost
//     about 4% of a core on the 2-core VM this was written on: most of its
//     figure at the rates reached there, and most of the 5% budget. Its
//     capture path only copies each frame's first 128 bytes into a
//     preallocated arena (num-pkts dumperArena, touched page by page: the
//     page faults are in its CPU too; the rows print every capturer's
//     minor faults); the pcap is sorted, restored and written at Stop,
//     after the measured window. So its CPU per packet is Lumina's capture
//     path plus its idle polling, not the same work as ours and tcpdump's,
//     which write pcap records as they capture; the row prints what its
//     Stop then cost per million frames (write-CPU), to add for the whole.
//     Its drops are the port's (tp_drops and RxNoBuf, read as ours reads
//     them) plus copies the arena had no slot for.
//   - tcpdump -i IF -w /dev/null -s 128 -B 65536 -p -n. Same snap length,
//     same ring (libpcap 1.10 also makes 256 KiB TPACKET_V3 blocks, so both
//     rings are 256 x 256 KiB), no promiscuous mode on either side, no
//     filter. Not --immediate-mode: that switches libpcap to TPACKET_V2 and
//     a wakeup per packet, which only costs tcpdump CPU; its default is its
//     most efficient mode.
//
// Each offered rate runs for pointDur with ours, then the same with the
// dumper and with tcpdump, so drift in machine load hits all alike; 1.1 s
// after the traffic stops (past tcpdump's 1 s block timeout, so the last
// partial block has reached any capturer) the capturer's CPU time is read
// and it gets SIGINT and reports. Drops: ours from PACKET_STATISTICS
// (tp_drops) plus RxNoBuf, the dumper's the same plus arena-full,
// tcpdump's "packets dropped by kernel"; a point is zero-drop
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
	dumper  bool   // our helper runs the Lumina dumper on its port
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
	// dumperCap has ours's ring and block timeout, so the three differ
	// only in what reads the ring.
	dumperCap = capturer{name: "dumper", dumper: true, opts: "snaplen=128,timeout=1000ms"}
)

// phases are the offered rates in Mpps (0: as fast as the senders go),
// first with the capture core to the capturer, then under the CPU budget.
var phases = []struct {
	budget    int // percent of a core, 0: none
	rates     []float64
	capturers []capturer
}{
	{0, []float64{0.25, 0.5, 0}, []capturer{ours, oursDefault, dumperCap, tcpdumpCap}},
	{budgetPct, []float64{0.2, 0.4, 0.5, 0.6, 0.65, 0.7, 0.75, 0.8, 0}, []capturer{ours, dumperCap, tcpdumpCap}},
}

type result struct {
	who      string
	budget   int
	nominal  float64
	sent     uint64 // frames the senders transmitted
	seen     uint64 // frames the capture socket saw (kernel tp_packets)
	captured uint64 // frames the capturer processed
	drops    uint64 // kernel drops (+ RxNoBuf for ours, + arena full for the dumper)
	cpu      time.Duration
	faults   uint64 // minor page faults in the same window as cpu
	dur      time.Duration
	// The dumper's Stop, after the window: frames written to its pcap
	// and the CPU that took.
	written  uint64
	writeCPU time.Duration
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

// writeCPUPerM is the dumper's Stop CPU seconds per million captured frames.
func (r result) writeCPUPerM() float64 {
	if r.captured == 0 {
		return 0
	}
	return r.writeCPU.Seconds() / (float64(r.captured) / 1e6)
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
	if r.who == dumperCap.name {
		note += fmt.Sprintf("; then wrote %d in %.3fs = %.3f write-CPU-s/Mpkt", r.written, r.writeCPU.Seconds(), r.writeCPUPerM())
	}
	return fmt.Sprintf("%-8s %-13s rate %-4s offered %6.3f Mpps captured %6.3f Mpps  sent %8d seen %8d captured %8d dropped %8d  cpu %6.3fs = %.3f CPU-s/Mpkt faults %6d%s",
		r.who, budget, rate, r.offeredMpps(), r.capturedMpps(), r.sent, r.seen, r.captured, r.drops, r.cpu.Seconds(), r.cpuPerM(), r.faults, note)
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
					report("%v", r)
					results[c.name] = append(results[c.name], r)
				}
			}
			cg.remove()
		}
	}
	b.StopTimer()

	o, d, t := results[ours.name], results[oursDefault.name], results[tcpdumpCap.name]
	dm := results[dumperCap.name]
	// The CPU per packet comparison: the highest-rate point on a whole core
	// where both captured every frame (the same traffic, both healthy).
	// tcpdump's figure is taken at the point it shares with each.
	co, cd, ct := cpuAtTop(o, t), cpuAtTop(d, t), cpuAtTop(t, o)
	cdm, ctd, wdm := cpuAtTop(dm, t), cpuAtTop(t, dm), writeAtTop(dm, t)
	b.ReportMetric(zeroDropRate(o, 0), "ours-zerodrop-Mpps")
	b.ReportMetric(zeroDropRate(dm, 0), "dumper-zerodrop-Mpps")
	b.ReportMetric(zeroDropRate(t, 0), "tcpdump-zerodrop-Mpps")
	b.ReportMetric(co, "ours-CPUs/Mpkt")
	b.ReportMetric(cd, "ours2ms-CPUs/Mpkt")
	b.ReportMetric(cdm, "dumper-CPUs/Mpkt")
	b.ReportMetric(wdm, "dumper-write-CPUs/Mpkt")
	b.ReportMetric(ct, "tcpdump-CPUs/Mpkt")
	if co > 0 {
		b.ReportMetric(ct/co, "tcpdump/ours-CPU")
	}
	if cdm > 0 {
		b.ReportMetric(ctd/cdm, "tcpdump/dumper-CPU")
	}
	b.ReportMetric(zeroDropRate(o, budgetPct), "ours-zerodrop-5pct-Mpps")
	b.ReportMetric(zeroDropRate(dm, budgetPct), "dumper-zerodrop-5pct-Mpps")
	b.ReportMetric(zeroDropRate(t, budgetPct), "tcpdump-zerodrop-5pct-Mpps")
	b.ReportMetric(maxRate(o, budgetPct), "ours-max-5pct-Mpps")
	b.ReportMetric(maxRate(dm, budgetPct), "dumper-max-5pct-Mpps")
	b.ReportMetric(maxRate(t, budgetPct), "tcpdump-max-5pct-Mpps")
	report("whole core: zero-drop ours %.3f / dumper %.3f / tcpdump %.3f Mpps (sender-bound); CPU-s per Mpkt at the top common zero-drop point: ours %.3f (2 ms default %.3f) / tcpdump %.3f; dumper %.3f capturing + %.3f writing at Stop / tcpdump %.3f",
		zeroDropRate(o, 0), zeroDropRate(dm, 0), zeroDropRate(t, 0), co, cd, ct, cdm, wdm, ctd)
	report("%d%% of a core: zero-drop ours %.3f / dumper %.3f / tcpdump %.3f Mpps; max capture ours %.3f / dumper %.3f / tcpdump %.3f Mpps",
		budgetPct, zeroDropRate(o, budgetPct), zeroDropRate(dm, budgetPct), zeroDropRate(t, budgetPct),
		maxRate(o, budgetPct), maxRate(dm, budgetPct), maxRate(t, budgetPct))
}

// report prints a line of the table on stdout: the testing package cuts
// a benchmark's log to ten lines, which would hide most rows and the
// summary.
func report(format string, a ...any) { fmt.Printf("    "+format+"\n", a...) }

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

// writeAtTop is like cpuAtTop for the dumper's Stop CPU.
func writeAtTop(a, b []result) float64 {
	v := 0.0
	for i := range a {
		if i < len(b) && a[i].budget == 0 && a[i].zeroDrop() && b[i].zeroDrop() {
			v = a[i].writeCPUPerM()
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
	if c.dumper {
		cmd.Env = append(cmd.Env, helperModeEnv+"="+helperModeDumper)
	}
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
	f0 := procFaults(pid)
	res.sent, res.dur = bn.offer(mpps)
	time.Sleep(drainWait)
	t1, err := procCPU(pid)
	if err != nil {
		return res, err
	}
	res.cpu = t1 - t0
	res.faults = procFaults(pid) - f0
	_ = cmd.Process.Signal(syscall.SIGINT)
	// The dumper writes its pcap before it reports.
	stopWait := 5 * time.Second
	if c.dumper {
		stopWait = time.Minute
	}
	select {
	case <-ended:
	case <-time.After(stopWait):
		return res, fmt.Errorf("%s did not stop on SIGINT", who)
	}
	mu.Lock()
	defer mu.Unlock()
	found := 0
	for _, line := range lines {
		if m := writeLine.FindStringSubmatch(line); m != nil {
			res.written, _ = strconv.ParseUint(m[1], 10, 64)
			sec, _ := strconv.ParseFloat(m[2], 64)
			res.writeCPU = time.Duration(sec * 1e9)
		}
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
	if c.dumper && res.written != res.captured {
		return res, fmt.Errorf("%s captured %d frames but wrote %d: %q", who, res.captured, res.written, lines)
	}
	return res, nil
}

// statLine matches tcpdump's closing statistics; the helper prints the
// same three lines. writeLine is the dumper helper's report of its Stop.
var (
	statLine  = regexp.MustCompile(`(\d+) packets? (captured|received by filter|dropped by kernel)`)
	writeLine = regexp.MustCompile(`(\d+) packets written in ([0-9.]+) CPU-seconds`)
)

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

// procFaults is a process's minor page faults so far (/proc/PID/stat
// field 10, which counts every thread, ended ones too).
func procFaults(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name, field 2, may hold spaces; count from its ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 8 {
		return 0
	}
	v, _ := strconv.ParseUint(f[7], 10, 64)
	return v
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
