//go:build linux

package capture

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkDPDK measures `appliance capture` (built with -tags dpdk) on a
// DPDK net_null port against dpdk-testpmd --forward-mode=rxonly on the same
// vdev, one polling core each, and dpdk-dumpcap attached to testpmd.
//
//   - testpmd: -l 0-1 (main lcore 0, forwarding lcore 1), rxonly on
//     net_null0, no huge pages, --no-flush-rx; its RX-packets over dpdkRun
//     from its per-second port statistics.
//   - appliance: `appliance capture -i eal:net_null0 --cores 1 -s 128 -w
//     /dev/null --duration dpdkRun`: one worker pinned to core 1 whose eal
//     driver writes the pcapng records of 128 bytes from the mbufs in the
//     cgo call that receives them (ReadEPB); frames written over dpdkRun from
//     its line per second.
//   - Both per second of wall time and per CPU-second of the process: the
//     ratio (appliance/testpmd) is per CPU-second, the work per packet of
//     two pollers that on this shared machine do not own their cores; the
//     wall-clock ratio is printed beside it.
//   - dpdk-dumpcap: the C peer. It is a DPDK secondary process, so testpmd
//     must run with huge pages and shared runtime files (the benchmark
//     reserves 512 x 2 MiB pages when none are, and gives them back after),
//     and it must load the mempool drivers testpmd links in the same order
//     (LD_PRELOAD, see mempoolPreload); testpmd's Rx-pps while dumpcap
//     captures, and what dumpcap reports.
//
// On the 2-core VMs this was written on, a second process on either core
// takes it from the poller that owns it; the figures are per core, as the
// goal is stated, on a machine with other work on it.
func BenchmarkDPDK(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("dpdk: needs root")
	}
	testpmd, err := exec.LookPath("dpdk-testpmd")
	if err != nil {
		b.Skip("dpdk: dpdk-testpmd is not installed (apt-get install dpdk-dev)")
	}
	if err := exec.Command("pkg-config", "--exists", "libdpdk").Run(); err != nil {
		b.Skip("dpdk: libdpdk-dev is not installed")
	}
	app := buildAppliance(b, b.TempDir(), "dpdk")
	const dpdkRun = 5 * time.Second
	b.ReportAllocs()
	var pmd, ours rxRate
	var dump dumpcapResult
	for i := 0; i < b.N; i++ {
		pmd, err = testpmdRxonly(testpmd, dpdkRun, false, nil)
		if err != nil {
			b.Fatal(err)
		}
		report("dpdk-testpmd rxonly on net_null0, one core: %.2f Mpps, %.2f M per CPU-second", pmd.wall/1e6, pmd.cpu/1e6)
		ours, err = applianceNull(app, dpdkRun)
		if err != nil {
			b.Fatal(err)
		}
		report("appliance capture on eal:net_null0, one pinned worker, pcapng snap 128 to /dev/null: %.2f Mpps, %.2f M per CPU-second = %.2fx testpmd per CPU-second (goal >= 0.9x; wall clock %.2fx)",
			ours.wall/1e6, ours.cpu/1e6, ours.cpu/pmd.cpu, ours.wall/pmd.wall)
		dump = runDumpcap(testpmd, dpdkRun)
		report("dpdk-dumpcap on testpmd (huge pages): %s", dump)
	}
	b.ReportMetric(pmd.wall, "testpmd-rxonly-pkts/s")
	b.ReportMetric(ours.wall, "appliance-pkts/s")
	b.ReportMetric(ours.cpu/pmd.cpu, "appliance/testpmd")
	b.ReportMetric(ours.wall/pmd.wall, "wall-appliance/testpmd")
	b.ReportMetric(dump.captured/dpdkRun.Seconds(), "dumpcap-pkts/s")
}

// rxRate is a poller's rate over a window: packets per second of wall time
// and per second of the process's CPU time (all its threads). On a machine
// with other work a poller does not own its core, and the wall-clock rates
// of two pollers say mostly which one the scheduler favoured; per CPU-second
// they compare the work each does per packet.
type rxRate struct{ wall, cpu float64 }

// rxWindow turns samples of (time, packets, process CPU) into a rate over
// the samples after the first (testpmd's first stats after start include
// its flush of the queue; the capture's first second includes its start).
type rxWindow struct {
	t0, t1     time.Time
	p0, p1     float64
	cpu0, cpu1 time.Duration
	n          int
}

func (w *rxWindow) add(now time.Time, packets float64, cpu time.Duration) {
	if w.n == 1 || w.n == 0 {
		w.t0, w.p0, w.cpu0 = now, packets, cpu
	}
	w.t1, w.p1, w.cpu1 = now, packets, cpu
	w.n++
}

func (w *rxWindow) rate() (rxRate, error) {
	dt, dcpu := w.t1.Sub(w.t0).Seconds(), (w.cpu1 - w.cpu0).Seconds()
	if w.n < 3 || dt <= 0 || dcpu <= 0 {
		return rxRate{}, fmt.Errorf("%d samples over %.2fs (%.2f CPU-s)", w.n, dt, dcpu)
	}
	return rxRate{wall: (w.p1 - w.p0) / dt, cpu: (w.p1 - w.p0) / dcpu}, nil
}

// testpmdRxonly runs testpmd's rxonly forwarding on net_null0 for d and
// returns its rate from the RX-packets of its per-second port statistics
// and its CPU time; with huge, on huge pages with shared files (for
// dpdk-dumpcap), calling during once it forwards. --no-flush-rx: at start
// testpmd would otherwise drain the queue (which net_null never empties)
// for a while before it forwards.
func testpmdRxonly(bin string, d time.Duration, huge bool, during func()) (rxRate, error) {
	args := []string{"-l", "0-1", "--no-pci", "--no-telemetry", "--vdev", "net_null0"}
	if huge {
		args = append(args, "-m", "512", "--file-prefix", "capbench")
	} else {
		args = append(args, "--no-huge", "--no-shconf", "-m", "1024")
	}
	args = append(args, "--", "--forward-mode=rxonly", "--nb-cores=1", "--total-num-mbufs=65536", "--stats-period", "1",
		"--no-flush-rx")
	if sb, err := exec.LookPath("stdbuf"); err == nil {
		args = append([]string{"-oL", bin}, args...)
		bin = sb
	}
	ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return rxRate{}, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return rxRate{}, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var win rxWindow
	sc := bufio.NewScanner(out)
	end := time.Now().Add(d + 25*time.Second) // starting takes a while on a busy machine
	started := false
	for sc.Scan() && time.Now().Before(end) {
		f := strings.Fields(sc.Text())
		// "RX-packets: N  RX-missed: M  RX-bytes: B" (port 0's, cumulative)
		if len(f) < 2 || f[0] != "RX-packets:" {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		if v == 0 && !started {
			continue
		}
		if !started {
			started = true
			end = time.Now().Add(d)
			if during != nil {
				go during()
			}
		}
		cpu, err := procCPU(cmd.Process.Pid)
		if err != nil {
			return rxRate{}, err
		}
		win.add(time.Now(), v, cpu)
	}
	r, err := win.rate()
	if err != nil {
		return rxRate{}, fmt.Errorf("testpmd: %v: %s", err, stderr.String())
	}
	return r, nil
}

// applianceNull runs `appliance capture` on net_null0 for d and returns its
// rate from the "written N" of its line per second and its CPU time.
func applianceNull(app string, d time.Duration) (rxRate, error) {
	cmd := exec.Command(app, "capture", "-i", "eal:net_null0", "--cores", "1", "-s", "128", "-w", "/dev/null",
		"--duration", d.String())
	cmd.Env = append(os.Environ(), "APPLIANCE_EAL_ARGS=-l 0-1 --no-huge --no-pci --no-shconf --no-telemetry -m 512 --vdev=net_null0 --log-level=lib.eal:error")
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		return rxRate{}, err
	}
	if err := cmd.Start(); err != nil {
		return rxRate{}, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var win rxWindow
	var lines []string
	sc := bufio.NewScanner(errPipe)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		_, rest, ok := strings.Cut(sc.Text(), " written ")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		v, _ := strconv.ParseFloat(f[0], 64)
		cpu, err := procCPU(cmd.Process.Pid)
		if err != nil {
			break // it ended
		}
		win.add(time.Now(), v, cpu)
	}
	r, err := win.rate()
	if err != nil {
		return rxRate{}, fmt.Errorf("appliance capture on eal: %v\n%s", err, strings.Join(lines, "\n"))
	}
	return r, nil
}

type dumpcapResult struct {
	err                 error
	testpmdDuring       float64 // testpmd's Rx-pps while dumpcap captured
	captured, dropped   float64
	received            float64
	output, hugepageMsg string
}

func (r dumpcapResult) String() string {
	if r.err != nil {
		return "could not run: " + r.err.Error()
	}
	return fmt.Sprintf("captured %.0f frames (%.2f Mpps), interface received %.0f, dropped %.0f; testpmd's rate meanwhile %.2f Mpps%s; dumpcap said %q",
		r.captured, r.captured/5e6, r.received, r.dropped, r.testpmdDuring/1e6, r.hugepageMsg, r.output)
}

// runDumpcap runs testpmd on huge pages and dpdk-dumpcap against it.
func runDumpcap(testpmd string, d time.Duration) (r dumpcapResult) {
	dumpcap, err := exec.LookPath("dpdk-dumpcap")
	if err != nil {
		r.err = fmt.Errorf("dpdk-dumpcap is not installed")
		return r
	}
	restore, msg, err := reserveHugepages(512)
	if err != nil {
		r.err = fmt.Errorf("dpdk-dumpcap needs huge pages shared with testpmd (a secondary process): %v", err)
		return r
	}
	defer restore()
	r.hugepageMsg = msg
	var out bytes.Buffer
	done := make(chan struct{})
	var during rxRate
	during, r.err = testpmdRxonly(testpmd, d, true, func() {
		defer close(done)
		cmd := exec.Command(dumpcap, "--file-prefix", "capbench", "-i", "net_null0", "-w", "/dev/null", "-s", "128",
			"-a", fmt.Sprintf("duration:%d", int(d.Seconds())))
		cmd.Stdout, cmd.Stderr = &out, &out
		if pre := mempoolPreload(testpmd); pre != "" {
			cmd.Env = append(os.Environ(), "LD_PRELOAD="+pre)
		}
		ctx, cancel := context.WithTimeout(context.Background(), d+10*time.Second)
		defer cancel()
		go func() { <-ctx.Done(); _ = cmd.Process.Kill() }()
		_ = cmd.Run()
	})
	select {
	case <-done:
	case <-time.After(d + 15*time.Second):
	}
	r.testpmdDuring = during.wall
	// dumpcap redraws its count in place many times a second ("Packets
	// captured: 0 \b\b32 \b\b\b64 ..."): keep the last drawing.
	var lines []string
	for _, l := range strings.Split(out.String(), "\n") {
		if i := strings.LastIndexByte(l, '\b'); i >= 0 {
			head, _, _ := strings.Cut(l, ":")
			l = head + ": " + strings.TrimSpace(l[i+1:])
		}
		lines = append(lines, l)
	}
	text := strings.Join(lines, "\n")
	for _, l := range lines {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "Packets captured:"); ok {
			r.captured, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
		if i := strings.Index(l, "received/dropped on interface"); i >= 0 {
			f := strings.Fields(l[i:])
			if len(f) >= 5 {
				a, c, _ := strings.Cut(f[4], "/")
				r.received, _ = strconv.ParseFloat(a, 64)
				r.dropped, _ = strconv.ParseFloat(c, 64)
			}
		}
	}
	var keep []string
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		if l != "" {
			keep = append(keep, strings.TrimSpace(l))
		}
	}
	r.output = strings.Join(keep, " | ")
	return r
}

// mempoolPreload lists the mempool drivers dpdk-testpmd links directly
// (Debian's links librte_mempool_dpaa), for dpdk-dumpcap's LD_PRELOAD. A
// mempool records its handlers as an index into each process's table of
// mempool drivers, filled in the order the drivers load: linked ones
// first, then the plugin directory. dumpcap links none, so without this
// its table is in another order, testpmd calls the wrong driver on the
// pool dumpcap created, every copy fails and dumpcap captures nothing
// ("Packets received/dropped on interface 'net_null0': 0/78521").
func mempoolPreload(testpmd string) string {
	out, err := exec.Command("ldd", testpmd).Output()
	if err != nil {
		return ""
	}
	var libs []string
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) >= 3 && strings.HasPrefix(f[0], "librte_mempool_") && f[1] == "=>" {
			libs = append(libs, f[2])
		}
	}
	return strings.Join(libs, ":")
}

// reserveHugepages makes sure n 2 MiB huge pages exist and hugetlbfs is
// mounted, and returns what puts the machine back.
func reserveHugepages(n int) (func(), string, error) {
	const knob = "/proc/sys/vm/nr_hugepages"
	b, err := os.ReadFile(knob)
	if err != nil {
		return nil, "", err
	}
	before, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	undo := []func(){}
	msg := ""
	if before < n {
		if err := os.WriteFile(knob, []byte(strconv.Itoa(n)), 0); err != nil {
			return nil, "", fmt.Errorf("reserving %d huge pages: %v", n, err)
		}
		undo = append(undo, func() { _ = os.WriteFile(knob, []byte(strconv.Itoa(before)), 0) })
		msg = fmt.Sprintf(" (reserved %d huge pages for the run)", n)
	}
	mounts, _ := os.ReadFile("/proc/mounts")
	if !strings.Contains(string(mounts), "hugetlbfs") {
		if err := os.MkdirAll("/dev/hugepages", 0o755); err == nil {
			if err := exec.Command("mount", "-t", "hugetlbfs", "nodev", "/dev/hugepages").Run(); err != nil {
				for _, u := range undo {
					u()
				}
				return nil, "", fmt.Errorf("mounting hugetlbfs: %v", err)
			}
			undo = append(undo, func() { _ = exec.Command("umount", "/dev/hugepages").Run() })
		}
	}
	return func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}, msg, nil
}
