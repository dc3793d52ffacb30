//go:build linux

// Package capture measures `appliance capture`, the product command, as a
// packet capturer against tcpdump on the same traffic, and the Lumina
// dumper (whose receive loop is the same dumper/capture.Loop) beside them.
// It holds only this benchmark; BenchmarkDPDK in dpdk_test.go measures the
// DPDK path against dpdk-testpmd and dpdk-dumpcap.
//
// Setup: two network namespaces joined by a veth pair. Two sender
// goroutines in namespace S, each with its own AF_PACKET TX queue, pinned
// to the sender core, offer 62-byte RoCEv2 frames (RC SEND Middle, 4 bytes
// of payload holding a sequence number) to 64 queue pairs in turn, at a
// paced rate. The kernel's receive work for veth (netif_rx, the BPF filter
// and the copy into each capture ring) runs in softirq on the sending
// core, so the capture core carries only the capturer's own work.
//
// The capturers are separate processes started the same way: `ip netns
// exec C taskset -c CORE ...`, optionally inside a CPU cgroup:
//
//   - appliance: `appliance capture -i afpacket:IF -w /dev/null -s 128 -q
//     --json`, built from this tree by the benchmark (or CAPTURE_APPLIANCE):
//     pcapng (its default) written straight from the kernel's ring into the
//     file buffer, the per-QP counters on, unpinned (it sleeps in the kernel
//     when the ring is empty; the ring is the command's default, 16 blocks
//     of 4 MiB with a 1 s block timeout).
//   - appliance-qp: the same with --roce 'qpn 17', which the command
//     compiles into the kernel filter, keeping one QP of the 64.
//   - tcpdump -i IF -w /dev/null -s 128 -B 65536 -p -n, and tcpdump-qp
//     with the same selection in tcpdump's syntax: udp dst port 4791 and
//     udp[12:4] & 0xffffff = 17. Same ring size (256 x 256 KiB), same snap
//     length, no promiscuous mode; not --immediate-mode (TPACKET_V2 and a
//     wakeup per packet, which only costs tcpdump CPU). tcpdump-file is
//     tcpdump writing a file in a temporary directory (-Z root, so that it
//     may), the dumper's peer: both pay for a real file.
//   - dumper: this test binary as a helper running the Lumina dumper
//     (package dumper, snap-len 128, 1 s block timeout) on an afpacket
//     port, unpinned: its capture path copies each frame's first 128 bytes
//     into a preallocated arena and writes the pcap at Stop, after the
//     measured window; the row prints what that Stop cost per million
//     frames (write-CPU), to add for the whole.
//
// Each offered rate runs for pointDur with each capturer in turn, so drift
// in machine load hits all alike; 1.1 s after the traffic stops the
// capturer's CPU time is read and it gets SIGINT and reports. Drops:
// tcpdump's "packets dropped by kernel", the appliance's kernel, port and
// writer drops from its JSON, the dumper's port drops plus arena-full. A
// point is zero-drop when the capturer wrote every frame it should have
// (all sent, or those to QP 17), and a capturer's zero-drop rate is the
// highest offered rate it reached, stepping up, before the first point
// where it lost a frame. CPU: sum_exec_runtime over the process's threads
// (schedstat), read just before the traffic starts and after the drain
// wait, the Go runtime's threads counted against us.
//
// A sender core moves about 1 Mpps through veth here, while a capturer
// needs ~0.1 us of CPU per frame: on a dedicated core none can be outrun.
// So the rates are stepped twice: with the capture core to itself (the CPU
// per packet comparison), and with each capturer held to the same small CPU
// budget by a CFS bandwidth cgroup (cpu.max, or cpu.cfs_quota_us on cgroup
// v1), where the offered rate does outrun them and the zero-drop rate
// measures how far each gets on the same CPU.
package capture

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
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
	frameLen  = 62
	snapLen   = 128
	burstSize = 32
	flows     = 64
	// keptQP is the queue pair the -qp capturers keep (of qpBase..qpBase+63).
	qpBase = 16
	keptQP = 17
	// budgetPct is the CPU share of one core each capturer gets in the
	// budget phase: a 1 ms quota per 20 ms period.
	budgetPct = 5
)

// A capturer is one side of the comparison.
type capturer struct {
	name      string
	tcpdump   bool
	appliance bool
	dumper    bool   // our helper runs the Lumina dumper on its port
	opts      string // afpacket port options for the dumper helper
	qp        bool   // keeps QP keptQP only
	file      bool   // tcpdump writes a file (in a temporary directory) instead of /dev/null
}

var (
	applianceCap   = capturer{name: "appliance", appliance: true}
	applianceQPCap = capturer{name: "appliance-qp", appliance: true, qp: true}
	tcpdumpCap     = capturer{name: "tcpdump", tcpdump: true}
	tcpdumpQPCap   = capturer{name: "tcpdump-qp", tcpdump: true, qp: true}
	// tcpdump-file is the dumper's peer: it writes its capture to a file in
	// the same kind of directory as the dumper's, paying for the page cache
	// as the dumper pays for its file.
	tcpdumpFileCap = capturer{name: "tcpdump-file", tcpdump: true, file: true}
	dumperCap      = capturer{name: "dumper", dumper: true, opts: "snaplen=128,timeout=1000ms"}
)

// phases are the offered rates in Mpps (0: as fast as the senders go),
// first with the capture core to the capturer, then under the CPU budget.
var phases = []struct {
	budget    int // percent of a core, 0: none
	rates     []float64
	capturers []capturer
}{
	{0, []float64{0.25, 0.5, 0}, []capturer{applianceCap, applianceQPCap, dumperCap, tcpdumpCap, tcpdumpQPCap, tcpdumpFileCap}},
	{budgetPct, []float64{0.2, 0.4, 0.6, 0.8, 1.0, 0}, []capturer{applianceCap, dumperCap, tcpdumpCap}},
}

type result struct {
	who      string
	budget   int
	nominal  float64
	sent     uint64 // frames the senders transmitted
	want     uint64 // of those, the frames the capturer should keep
	seen     uint64 // frames the capture socket saw (after its filter)
	captured uint64 // frames the capturer wrote
	drops    uint64 // frames it lost, wherever
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
func (r result) zeroDrop() bool        { return r.drops == 0 && r.captured == r.want }

// cpuPerM is CPU seconds per million frames kept; cpuPerOffered per
// million frames offered.
func (r result) cpuPerM() float64 {
	if r.captured == 0 {
		return 0
	}
	return r.cpu.Seconds() / (float64(r.captured) / 1e6)
}

func (r result) cpuPerOffered() float64 {
	if r.sent == 0 {
		return 0
	}
	return r.cpu.Seconds() / (float64(r.sent) / 1e6)
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
	if r.who == dumperCap.name {
		note += fmt.Sprintf("; then wrote %d in %.3fs = %.3f write-CPU-s/Mpkt", r.written, r.writeCPU.Seconds(), r.writeCPUPerM())
	}
	return fmt.Sprintf("%-12s %-13s rate %-4s offered %6.3f Mpps kept %6.3f Mpps  sent %8d want %8d seen %8d kept %8d dropped %8d  cpu %6.3fs = %.3f CPU-s/Mpkt kept, %.4f per Mpkt offered; faults %6d%s",
		r.who, budget, rate, r.offeredMpps(), r.capturedMpps(), r.sent, r.want, r.seen, r.captured, r.drops, r.cpu.Seconds(),
		r.cpuPerM(), r.cpuPerOffered(), r.faults, note)
}

type bench struct {
	l         *linkPair
	txPort    *afpacket.Port
	txPool    *dpdk.Pool
	sendCore  int
	capCore   int
	self      string // this test binary, run as the dumper helper
	appliance string // the product binary
	tcpdump   string
}

// buildAppliance builds the appliance binary from this tree (with tags)
// into dir.
func buildAppliance(tb testing.TB, dir string, tags ...string) string {
	out := filepath.Join(dir, "appliance")
	args := []string{"build", "-o", out}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cmd := exec.Command("go", append(args, "../../appliance/cmd/appliance")...)
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("go build appliance: %v\n%s", err, b)
	}
	return out
}

// applianceEnv names a prebuilt appliance binary to measure instead of one
// built into a temporary directory: a profiler (perf record -a) then finds
// its symbols after the run.
const applianceEnv = "CAPTURE_APPLIANCE"

func BenchmarkCapture(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("capture: needs root for network namespaces and AF_PACKET")
	}
	for _, tool := range []string{"ip", "taskset", "go"} {
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
	app := os.Getenv(applianceEnv)
	if app == "" {
		app = buildAppliance(b, b.TempDir())
	}
	bn := &bench{l: newLinkPair(b), sendCore: cores[0], capCore: cores[len(cores)-1], self: self, tcpdump: tcpdump,
		appliance: app}
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

	a, aq, t, tq := results[applianceCap.name], results[applianceQPCap.name], results[tcpdumpCap.name], results[tcpdumpQPCap.name]
	dm := results[dumperCap.name]
	// The CPU per packet comparison: the highest-rate point on a whole core
	// where both captured every frame (the same traffic, both healthy).
	ca, ct := cpuAtTop(a, t, result.cpuPerM), cpuAtTop(t, a, result.cpuPerM)
	cqa, cqt := cpuAtTop(aq, tq, result.cpuPerOffered), cpuAtTop(tq, aq, result.cpuPerOffered)
	cdm, ctd, wdm := cpuAtTop(dm, t, result.cpuPerM), cpuAtTop(t, dm, result.cpuPerM), cpuAtTop(dm, t, result.writeCPUPerM)
	tf := results[tcpdumpFileCap.name]
	cdf, ctf, wdf := cpuAtTop(dm, tf, result.cpuPerM), cpuAtTop(tf, dm, result.cpuPerM), cpuAtTop(dm, tf, result.writeCPUPerM)
	b.ReportMetric(zeroDropRate(a, 0), "appliance-zerodrop-Mpps")
	b.ReportMetric(zeroDropRate(aq, 0), "appliance-qp-zerodrop-Mpps")
	b.ReportMetric(zeroDropRate(t, 0), "tcpdump-zerodrop-Mpps")
	b.ReportMetric(ca, "appliance-CPUs/Mpkt")
	b.ReportMetric(ct, "tcpdump-CPUs/Mpkt")
	b.ReportMetric(cqa, "appliance-qp-CPUs/Mpkt-offered")
	b.ReportMetric(cqt, "tcpdump-qp-CPUs/Mpkt-offered")
	b.ReportMetric(cdm, "dumper-CPUs/Mpkt")
	b.ReportMetric(wdm, "dumper-write-CPUs/Mpkt")
	b.ReportMetric(ctf, "tcpdump-file-CPUs/Mpkt")
	if ctf > 0 {
		b.ReportMetric((cdf+wdf)/ctf, "dumper/tcpdump-file-CPU")
	}
	if ct > 0 {
		b.ReportMetric(ca/ct, "appliance/tcpdump-CPU")
	}
	if cqt > 0 {
		b.ReportMetric(cqa/cqt, "appliance-qp/tcpdump-qp-CPU")
	}
	b.ReportMetric(zeroDropRate(a, budgetPct), "appliance-zerodrop-5pct-Mpps")
	b.ReportMetric(zeroDropRate(dm, budgetPct), "dumper-zerodrop-5pct-Mpps")
	b.ReportMetric(zeroDropRate(t, budgetPct), "tcpdump-zerodrop-5pct-Mpps")
	report("whole core: zero-drop appliance %.3f / appliance-qp %.3f / dumper %.3f / tcpdump %.3f / tcpdump-qp %.3f Mpps (the senders' maximum is the last rate)",
		zeroDropRate(a, 0), zeroDropRate(aq, 0), zeroDropRate(dm, 0), zeroDropRate(t, 0), zeroDropRate(tq, 0))
	report("CPU-s per Mpkt at the top common zero-drop point, no filter: appliance %.4f / tcpdump %.4f = %.2fx (goal <= 0.5x)", ca, ct, ratio(ca, ct))
	report("CPU-s per Mpkt offered, keeping 1 QP of 64 (kernel filter): appliance %.4f / tcpdump %.4f = %.2fx (goal <= 0.2x)", cqa, cqt, ratio(cqa, cqt))
	report("dumper %.4f capturing + %.4f writing at Stop / tcpdump %.4f (to /dev/null) = %.2fx", cdm, wdm, ctd, ratio(cdm+wdm, ctd))
	report("dumper %.4f capturing + %.4f writing at Stop / tcpdump-file %.4f (writing its file) = %.2fx (goal <= 1.0x)", cdf, wdf, ctf, ratio(cdf+wdf, ctf))
	report("%d%% of a core: zero-drop appliance %.3f / dumper %.3f / tcpdump %.3f Mpps; max kept appliance %.3f / dumper %.3f / tcpdump %.3f Mpps",
		budgetPct, zeroDropRate(a, budgetPct), zeroDropRate(dm, budgetPct), zeroDropRate(t, budgetPct),
		maxRate(a, budgetPct), maxRate(dm, budgetPct), maxRate(t, budgetPct))
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// report prints a line of the table on stdout: the testing package cuts
// a benchmark's log to ten lines, which would hide most rows and the
// summary.
func report(format string, a ...any) { fmt.Printf("    "+format+"\n", a...) }

// cpuAtTop is a's figure (by metric) at the highest-rate whole-core point
// where both a and b kept every frame they should.
func cpuAtTop(a, b []result, metric func(result) float64) float64 {
	v := 0.0
	for i := range a {
		if i < len(b) && a[i].budget == 0 && a[i].zeroDrop() && b[i].zeroDrop() {
			v = metric(a[i])
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

// applianceJSON is the part of `appliance capture --json` the benchmark reads.
type applianceJSON struct {
	Stats struct {
		Received    uint64 `json:"received"`
		Written     uint64 `json:"written"`
		KernelDrops uint64 `json:"kernel_drops"`
		PortDrops   uint64 `json:"port_drops"`
		WriterDrops uint64 `json:"writer_drops"`
	} `json:"stats"`
}

// run measures one capturer at one offered rate.
func (bn *bench) run(c capturer, mpps float64, budget int, cg *cgroup) (result, error) {
	who := c.name
	res := result{who: who, nominal: mpps, budget: budget}
	args := []string{"ip", "netns", "exec", bn.l.NSB, "taskset", "-c", strconv.Itoa(bn.capCore)}
	ready := "listening on" // tcpdump's line on stderr once capturing
	switch {
	case c.tcpdump:
		out := "/dev/null"
		if c.file {
			dir, err := os.MkdirTemp("", "capbench-tcpdump")
			if err != nil {
				return res, err
			}
			defer os.RemoveAll(dir)
			// -Z root: tcpdump would drop to its own user before
			// opening the file, in a directory it cannot write.
			out = filepath.Join(dir, "t.pcap")
			args = append(args, bn.tcpdump, "-Z", "root")
		} else {
			args = append(args, bn.tcpdump)
		}
		args = append(args, "-i", bn.l.IfB, "-w", out, "-s", strconv.Itoa(snapLen), "-B", "65536", "-p", "-n")
		if c.qp {
			args = append(args, fmt.Sprintf("udp dst port 4791 and udp[12:4] & 0xffffff = %d", keptQP))
		}
	case c.appliance:
		args = append(args, bn.appliance, "capture", "-i", "afpacket:"+bn.l.IfB, "-w", "/dev/null",
			"-s", strconv.Itoa(snapLen), "-q", "--json")
		if c.qp {
			args = append(args, "--roce", fmt.Sprintf("qpn %d", keptQP))
		}
		ready = "msg=capturing"
	default:
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
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		return res, err
	}
	var stdout bytes.Buffer
	var mu sync.Mutex
	var lines []string
	if c.appliance {
		cmd.Stdout = &stdout // the JSON result
	} else {
		cmd.Stdout = cmd.Stderr // the helper reports on stdout; one stream for both
	}
	if err := cmd.Start(); err != nil {
		return res, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	// sh, ip netns exec and taskset all exec in place: the pid is the capturer's.
	pid := cmd.Process.Pid
	started := make(chan bool, 1)
	ended := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(errPipe)
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
	case <-time.After(30 * time.Second):
		// The dumper touches its whole arena (half a GiB) before it
		// says so, at 5% of a core in the budget phase.
		return res, fmt.Errorf("%s did not start capturing", who)
	}
	t0, err := procCPU(pid)
	if err != nil {
		return res, err
	}
	f0 := procFaults(pid)
	var kept uint64
	res.sent, kept, res.dur = bn.offer(mpps)
	res.want = res.sent
	if c.qp {
		res.want = kept
	}
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
	if c.appliance {
		_ = cmd.Wait()
		var j applianceJSON
		if err := json.Unmarshal(stdout.Bytes(), &j); err != nil {
			return res, fmt.Errorf("%s: its --json output: %v\n%s\n%q", who, err, stdout.String(), lines)
		}
		st := j.Stats
		res.seen, res.captured = st.Received+st.KernelDrops, st.Written
		res.drops = st.KernelDrops + st.PortDrops + st.WriterDrops
		return res, nil
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

// statLine matches tcpdump's closing statistics; the dumper helper prints
// the same three lines. writeLine is the dumper helper's report of its Stop.
var (
	statLine  = regexp.MustCompile(`(\d+) packets? (captured|received by filter|dropped by kernel)`)
	writeLine = regexp.MustCompile(`(\d+) packets written in ([0-9.]+) CPU-seconds`)
)

// offer sends frames for pointDur at mpps in total (0: unpaced) from two
// goroutines pinned to the sender core, each with its own TX queue. It
// returns the frames sent, how many of them went to keptQP, and the time
// it took.
func (bn *bench) offer(mpps float64) (uint64, uint64, time.Duration) {
	const senders = 2
	var sent, kept atomic.Uint64
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
			var n, k uint64
			next := start
			seq := uint32(i) << 28
			for now := dpdk.Nanotime(); now < end; now = dpdk.Nanotime() {
				if interval > 0 && now < next {
					continue // spin: the sender core is the load generator's
				}
				got := bn.txPool.GetBulk(burst[:])
				for _, pkt := range burst[:got] {
					pkt.CopyFrom(frame[:])
					d := pkt.Data()
					qp := qpBase + seq%flows
					binary.BigEndian.PutUint16(d[34:], uint16(10000+seq%flows)) // UDP source port: the flow
					binary.BigEndian.PutUint32(d[46:], qp)                      // BTH: destination QP
					binary.BigEndian.PutUint32(d[50:], seq&0xffffff)            // BTH: PSN
					binary.BigEndian.PutUint32(d[54:], seq)                     // payload
					seq++
				}
				m := bn.txPort.TxBurst(i, burst[:got])
				for _, pkt := range burst[:m] {
					if binary.BigEndian.Uint32(pkt.Data()[46:]) == keptQP {
						k++
					}
				}
				dpdk.FreeBulk(burst[m:got])
				n += uint64(m)
				if next += interval; interval > 0 && now-next > int64(10*time.Millisecond) {
					next = now // behind by more than a few bursts: do not catch up in a rush
				}
			}
			sent.Add(n)
			kept.Add(k)
		}()
	}
	wg.Wait()
	return sent.Load(), kept.Load(), time.Duration(dpdk.Nanotime() - start)
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

// buildFrame writes a 62-byte RoCEv2 frame (IPv4, UDP to 4791, BTH of an
// RC SEND Middle, 4 bytes of payload, ICRC) whose destination MAC is not
// the receiver's, so the capture namespace's IP stack drops it at once
// (PACKET_OTHERHOST) after the packet taps have seen it. The senders
// write the QP, PSN and payload of each copy; the ICRC is left as built.
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
	bth := f[42:54]
	bth[0] = 0x01 // RC SEND Middle
	binary.BigEndian.PutUint16(bth[2:], 0xffff)
}
