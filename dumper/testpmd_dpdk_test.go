//go:build dpdk

package dumper

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/eal"
)

// The side-by-side run with dpdk-testpmd: how long each side's rate is
// measured in one round, the rounds (the sides alternate, so load from
// other work falls on both alike), and how long a side runs before its
// window opens.
const (
	vsWindow = 250 * time.Millisecond
	vsRounds = 5
	vsWarm   = 20 * time.Millisecond
)

// vsArena is the dumper's arena in the comparison: large enough that a
// window never fills it (the window closes early at half full), since a
// full arena only counts copies, which is cheaper than keeping them. 64-byte
// slots hold net_null's 64-byte frames whole.
const (
	vsArena = 1 << 23
	vsSnap  = 64
)

// vsSide is one side's measurement in one window: packets received, the
// wall time (the side's own clock) and the CPU time its process used.
type vsSide struct {
	pkts      uint64
	wall, cpu time.Duration
}

func (s vsSide) rate() float64    { return float64(s.pkts) / s.wall.Seconds() }
func (s vsSide) cpuRate() float64 { return float64(s.pkts) / s.cpu.Seconds() }

var vsTestpmd struct {
	sync.Once
	dumper, testpmd []vsSide
	err             error
}

// BenchmarkVsTestpmd is the dumper on a DPDK PMD against the C peer that
// does the least a receiver can: dpdk-testpmd --forward-mode=rxonly, which
// receives bursts and frees the mbufs. Both run on a net_null vdev with the
// same EAL flags (eal.DefaultArgs: no huge pages, no PCI, the same two
// lcores) and poll on the same core with bursts of 32, one after the other
// in rounds. testpmd's window is between two `show port stats 0` through
// its interactive stdin (packets from RX-packets, time from testpmd's own
// clock as in its Rx-pps); the dumper's is between two reads of its status
// (the copies it put into its arena). Each side's CPU time over its window
// is its process's CPU clock.
//
// x-vs-testpmd is the median over the rounds of the dumper's packets per
// CPU-second over testpmd's in the same round: the rate each would have on
// a core of its own, which on a machine shared with other work the wall
// clock does not show (a poller preempted for half its window halves its
// wall rate). wall-x-vs-testpmd is the same with wall-clock rates; on an
// idle machine the two agree. The benchmark skips when dpdk-testpmd is not
// installed.
func BenchmarkVsTestpmd(b *testing.B) {
	b.ReportAllocs()
	vsTestpmd.Do(func() {
		vsTestpmd.dumper, vsTestpmd.testpmd, vsTestpmd.err = runVsTestpmd(b)
	})
	if errors.Is(vsTestpmd.err, exec.ErrNotFound) {
		b.Skip("dpdk-testpmd not installed (Debian: apt-get install dpdk-dev)")
	}
	if vsTestpmd.err != nil {
		b.Fatal(vsTestpmd.err)
	}
	var d, t, dc, tc, wall, cpu []float64
	for i := range vsTestpmd.dumper {
		ds, ts := vsTestpmd.dumper[i], vsTestpmd.testpmd[i]
		d, t = append(d, ds.rate()), append(t, ts.rate())
		dc, tc = append(dc, ds.cpuRate()), append(tc, ts.cpuRate())
		wall, cpu = append(wall, ds.rate()/ts.rate()), append(cpu, ds.cpuRate()/ts.cpuRate())
	}
	b.ReportMetric(medianOf(d), "pkts/s")
	b.ReportMetric(medianOf(dc), "pkts/cpu-s")
	b.ReportMetric(medianOf(t), "testpmd-pkts/s")
	b.ReportMetric(medianOf(tc), "testpmd-pkts/cpu-s")
	b.ReportMetric(medianOf(cpu), "x-vs-testpmd")
	b.ReportMetric(medianOf(wall), "wall-x-vs-testpmd")
	b.Logf("net_null, one polling core, burst 32, %d rounds of %v", vsRounds, vsWindow)
	b.Logf("Mpps per CPU-second: dumper %s, testpmd rxonly %s; ratio %s", list(dc, 1e6), list(tc, 1e6), list(cpu, 1))
	b.Logf("Mpps wall clock:     dumper %s, testpmd rxonly %s; ratio %s", list(d, 1e6), list(t, 1e6), list(wall, 1))
}

func medianOf(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// list prints v divided by unit, two decimals each.
func list(v []float64, unit float64) string {
	var sb strings.Builder
	for i, x := range v {
		if i > 0 {
			sb.WriteByte(' ')
		}
		fmt.Fprintf(&sb, "%.2f", x/unit)
	}
	return sb.String()
}

// runVsTestpmd runs the rounds and returns each side's windows.
func runVsTestpmd(b *testing.B) (dump, peer []vsSide, err error) {
	bin, err := exec.LookPath("dpdk-testpmd")
	if err != nil {
		return nil, nil, err
	}
	cores, err := dpdk.AllowedCores()
	if err != nil {
		return nil, nil, err
	}
	if len(cores) < 2 {
		b.Skip("needs two cores: testpmd's main lcore and its forwarding lcore")
	}
	if err := ealInit(); err != nil {
		return nil, nil, err
	}
	tp, err := startTestpmd(bin, ealArgs())
	if err != nil {
		return nil, nil, err
	}
	defer tp.close()

	pool, err := dpdk.NewPool("vs-testpmd", 4096, 0)
	if err != nil {
		return nil, nil, err
	}
	defer pool.Close()
	port, err := dpdk.Open("eal:net_null0", dpdk.Config{Pool: pool})
	if err != nil {
		return nil, nil, err
	}
	defer port.Close()
	// The worker polls on the second lcore of the EAL flags, where testpmd
	// runs its forwarding lcore.
	d, err := New(Config{Name: "vs-testpmd", Port: port, Cores: []int{cores[1]}, SnapLen: vsSnap,
		NumPkts: vsArena, Dir: b.TempDir()})
	if err != nil {
		return nil, nil, err
	}
	defer d.Close()

	// One round more than counted: the first touches what is cold on both
	// sides (testpmd's mbufs, the dumper's first pages of arena).
	for i := range vsRounds + 1 {
		t, err := tp.window()
		if err != nil {
			return nil, nil, err
		}
		r, err := dumperWindow(d)
		if err != nil {
			return nil, nil, err
		}
		if i > 0 {
			peer, dump = append(peer, t), append(dump, r)
		}
	}
	return dump, peer, nil
}

// ealArgs are the EAL flags of both sides, taken once: DefaultArgs names the
// cores the calling thread may use, and after the EAL is up some threads of
// the process are pinned to one lcore.
var ealArgs = sync.OnceValue(func() []string { return append(eal.DefaultArgs(), "--vdev=net_null0") })

// ealInit initialises this test binary's EAL once, for every test and
// benchmark in it (the EAL cannot be initialised twice); ports other than
// net_null0 are hot-plugged.
func ealInit() error { return eal.Init(ealArgs()) }

// cpuTime is the CPU time used so far by process pid (0: this one), all
// threads, from its CPU-time clock (clock_getcpuclockid), to the
// nanosecond.
func cpuTime(pid int) (time.Duration, error) {
	id := int32(unix.CLOCK_PROCESS_CPUTIME_ID)
	if pid != 0 {
		id = int32(^pid)<<3 | 2 // CPUCLOCK_SCHED of the process, as glibc's clock_getcpuclockid
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(id, &ts); err != nil {
		return 0, fmt.Errorf("CPU clock of process %d: %w", pid, err)
	}
	return time.Duration(ts.Nano()), nil
}

// dumperWindow captures for vsWarm, then measures over vsWindow (or until
// the arena is half full), and stops.
func dumperWindow(d *Dumper) (vsSide, error) {
	if err := d.Start(); err != nil {
		return vsSide{}, err
	}
	time.Sleep(vsWarm)
	c0, err := cpuTime(0)
	if err != nil {
		return vsSide{}, err
	}
	st0, t0 := d.Status(), time.Now()
	st, t1, c1 := st0, t0, c0
	for t1.Sub(t0) < vsWindow && st.Captured < vsArena/2 {
		time.Sleep(5 * time.Millisecond)
		st, t1 = d.Status(), time.Now()
		if c1, err = cpuTime(0); err != nil {
			return vsSide{}, err
		}
	}
	// Stop drains the queue for up to capture.MaxDrain (net_null never runs
	// dry) and may fill the arena then; the window must not have.
	res, err := d.Stop(context.Background())
	if err != nil {
		return vsSide{}, err
	}
	switch {
	case st.ArenaFull > 0:
		return vsSide{}, fmt.Errorf("the arena of %d copies filled: the window measured the cheaper counting path", vsArena)
	case res.Captured < st.Captured || st.Captured == st0.Captured:
		return vsSide{}, fmt.Errorf("captured %d, %d in the window", res.Captured, st.Captured-st0.Captured)
	}
	return vsSide{pkts: st.Captured - st0.Captured, wall: t1.Sub(t0), cpu: c1 - c0}, nil
}

// testpmd is dpdk-testpmd in interactive mode, driven through its stdin.
type testpmd struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	lines  chan string
	stderr bytes.Buffer
	tail   []string // the last lines read, for errors
}

// startTestpmd starts testpmd with the EAL flags args, receive-only
// forwarding on one core, and waits for its prompt. stdbuf makes its stdout
// line-buffered so that replies arrive as they are printed.
func startTestpmd(bin string, args []string) (*testpmd, error) {
	// --no-flush-rx: at each start testpmd would otherwise drain the queues
	// from its main lcore until they run dry or a second passes, twice,
	// which net_null never does; the dumper starts polling at once too.
	argv := append(slices.Clone(args), "--", "-i", "--forward-mode=rxonly", "--nb-cores=1",
		"--total-num-mbufs=16384", "--no-flush-rx")
	if sb, err := exec.LookPath("stdbuf"); err == nil {
		argv = append([]string{"-oL", bin}, argv...)
		bin = sb
	}
	t := &testpmd{cmd: exec.Command(bin, argv...), lines: make(chan string, 256)}
	t.cmd.Stderr = &t.stderr
	var err error
	if t.in, err = t.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		defer close(t.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			t.lines <- sc.Text()
		}
	}()
	// The prompt has no newline: ask for something that prints a line once
	// the command line is up.
	if err := t.send("show port info 0"); err != nil {
		t.close()
		return nil, err
	}
	if _, err := t.expect("Infos for port 0", 30*time.Second); err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

func (t *testpmd) send(cmd string) error {
	_, err := io.WriteString(t.in, cmd+"\n")
	return err
}

// expect reads lines until one contains s and returns it.
func (t *testpmd) expect(s string, timeout time.Duration) (string, error) {
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-t.lines:
			if !ok {
				return "", fmt.Errorf("testpmd exited waiting for %q: %s\n%s", s, t.stderr.String(), strings.Join(t.tail, "\n"))
			}
			t.tail = append(t.tail[max(0, len(t.tail)-30):], l)
			if strings.Contains(l, s) {
				return l, nil
			}
		case <-deadline:
			return "", fmt.Errorf("testpmd: no %q after %v:\n%s", s, timeout, strings.Join(t.tail, "\n"))
		}
	}
}

// portStats asks for port 0's statistics and returns its RX-packets and
// Rx-pps (the packets received since the previous `show port stats` over
// the time between the two, as testpmd's clock measured it).
func (t *testpmd) portStats() (rx uint64, pps float64, err error) {
	if err := t.send("show port stats 0"); err != nil {
		return 0, 0, err
	}
	if rx, err = t.value("RX-packets:"); err != nil {
		return 0, 0, err
	}
	v, err := t.value("Rx-pps:")
	return rx, float64(v), err
}

// value reads lines until one has the field key and returns the number
// after it.
func (t *testpmd) value(key string) (uint64, error) {
	l, err := t.expect(key, 10*time.Second)
	if err != nil {
		return 0, err
	}
	f := strings.Fields(l[strings.Index(l, key):])
	if len(f) < 2 {
		return 0, fmt.Errorf("testpmd: no number in %q", l)
	}
	return strconv.ParseUint(f[1], 10, 64)
}

// window starts forwarding, measures over vsWindow after vsWarm and stops
// forwarding again.
func (t *testpmd) window() (vsSide, error) {
	if err := t.send("start"); err != nil {
		return vsSide{}, err
	}
	// Printed as the forwarding lcore is launched.
	if _, err := t.expect("packets/burst=", 10*time.Second); err != nil {
		return vsSide{}, err
	}
	time.Sleep(vsWarm)
	c0, err := cpuTime(t.cmd.Process.Pid)
	if err != nil {
		return vsSide{}, err
	}
	rx0, _, err := t.portStats()
	if err != nil {
		return vsSide{}, err
	}
	time.Sleep(vsWindow)
	c1, err := cpuTime(t.cmd.Process.Pid)
	if err != nil {
		return vsSide{}, err
	}
	rx1, pps, err := t.portStats()
	if err != nil {
		return vsSide{}, err
	}
	if err := t.send("stop"); err != nil {
		return vsSide{}, err
	}
	// "Done." ends the stop once the forwarding lcore is back: the dumper's
	// window must not overlap testpmd's polling.
	if _, err := t.expect("Done.", 10*time.Second); err != nil {
		return vsSide{}, err
	}
	if rx1 <= rx0 || pps == 0 {
		return vsSide{}, errors.New("testpmd received nothing in the window")
	}
	n := rx1 - rx0
	return vsSide{pkts: n, wall: time.Duration(float64(n) / pps * 1e9), cpu: c1 - c0}, nil
}

func (t *testpmd) close() {
	_ = t.send("quit")
	_ = t.in.Close()
	done := make(chan struct{})
	go func() {
		for range t.lines {
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = t.cmd.Process.Kill()
	}
	_ = t.cmd.Wait()
}
