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
	vsWarm   = 50 * time.Millisecond
)

// vsArena is the dumper's arena in the comparison: large enough that a
// window never fills it (the window closes early at three quarters full),
// since a full arena only counts copies, which is cheaper than keeping them.
// 64-byte slots hold net_null's 64-byte frames whole.
const (
	vsArena = 1 << 23
	vsSnap  = 64
)

var vsTestpmd struct {
	sync.Once
	dumper, testpmd, ratio []float64
	err                    error
}

// BenchmarkVsTestpmd is the dumper on a DPDK PMD against the C peer that
// does the least a receiver can: dpdk-testpmd --forward-mode=rxonly, which
// receives bursts and frees the mbufs. Both run on a net_null vdev with the
// same EAL flags (eal.DefaultArgs: no huge pages, no PCI, the same two
// lcores) and poll on the same core with bursts of 32, one after the other
// in rounds. testpmd's rate is its port 0 Rx-pps over a window (two `show
// port stats 0` through its interactive stdin, timed by testpmd); the
// dumper's is the copies it put into its arena over a window of the same
// length (two reads of its status). x-vs-testpmd is the median over the
// rounds of the dumper's rate over testpmd's in the same round. The
// benchmark skips when dpdk-testpmd is not installed.
func BenchmarkVsTestpmd(b *testing.B) {
	b.ReportAllocs()
	vsTestpmd.Do(func() {
		vsTestpmd.dumper, vsTestpmd.testpmd, vsTestpmd.ratio, vsTestpmd.err = runVsTestpmd(b)
	})
	if errors.Is(vsTestpmd.err, exec.ErrNotFound) {
		b.Skip("dpdk-testpmd not installed (Debian: apt-get install dpdk-dev)")
	}
	if vsTestpmd.err != nil {
		b.Fatal(vsTestpmd.err)
	}
	d, t, r := vsTestpmd.dumper, vsTestpmd.testpmd, vsTestpmd.ratio
	b.ReportMetric(medianOf(d), "pkts/s")
	b.ReportMetric(medianOf(t), "testpmd-pkts/s")
	b.ReportMetric(medianOf(r), "x-vs-testpmd")
	b.Logf("net_null, one polling core, burst 32, %d rounds of %v: dumper %s Mpps, testpmd rxonly %s Mpps, ratio %s",
		vsRounds, vsWindow, list(d, 1e6), list(t, 1e6), list(r, 1))
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

// runVsTestpmd runs the rounds and returns each side's rate and their ratio
// per round.
func runVsTestpmd(b *testing.B) (dump, peer, ratio []float64, err error) {
	bin, err := exec.LookPath("dpdk-testpmd")
	if err != nil {
		return nil, nil, nil, err
	}
	cores, err := dpdk.AllowedCores()
	if err != nil {
		return nil, nil, nil, err
	}
	if len(cores) < 2 {
		b.Skip("needs two cores: testpmd's main lcore and its forwarding lcore")
	}
	args := append(eal.DefaultArgs(), "--vdev=net_null0")
	if err := eal.Init(args); err != nil {
		return nil, nil, nil, err
	}
	tp, err := startTestpmd(bin, args)
	if err != nil {
		return nil, nil, nil, err
	}
	defer tp.close()

	pool, err := dpdk.NewPool("vs-testpmd", 4096, 0)
	if err != nil {
		return nil, nil, nil, err
	}
	defer pool.Close()
	port, err := dpdk.Open("eal:net_null0", dpdk.Config{Pool: pool})
	if err != nil {
		return nil, nil, nil, err
	}
	defer port.Close()
	// The worker polls on the second lcore of the EAL flags, where testpmd
	// runs its forwarding lcore.
	d, err := New(Config{Name: "vs-testpmd", Port: port, Cores: []int{cores[1]}, SnapLen: vsSnap,
		NumPkts: vsArena, Dir: b.TempDir()})
	if err != nil {
		return nil, nil, nil, err
	}
	defer d.Close()

	for range vsRounds {
		t, err := tp.window()
		if err != nil {
			return nil, nil, nil, err
		}
		r, err := dumperWindow(d)
		if err != nil {
			return nil, nil, nil, err
		}
		peer, dump, ratio = append(peer, t), append(dump, r), append(ratio, r/t)
	}
	return dump, peer, ratio, nil
}

// dumperWindow captures for vsWarm, then measures the capture rate over
// vsWindow (or until the arena is three quarters full), and stops.
func dumperWindow(d *Dumper) (float64, error) {
	if err := d.Start(); err != nil {
		return 0, err
	}
	time.Sleep(vsWarm)
	c0, t0 := d.Status().Captured, time.Now()
	st, t1 := d.Status(), t0
	for t1.Sub(t0) < vsWindow && st.Captured-c0 < vsArena*3/4 {
		time.Sleep(5 * time.Millisecond)
		st, t1 = d.Status(), time.Now()
	}
	// Stop drains the queue for up to capture.MaxDrain (net_null never runs
	// dry) and may fill the arena then; the window must not have.
	res, err := d.Stop(context.Background())
	if err != nil {
		return 0, err
	}
	switch {
	case st.ArenaFull > 0:
		return 0, fmt.Errorf("the arena of %d copies filled: the window measured the cheaper counting path", vsArena)
	case res.Captured < st.Captured || st.Captured == c0:
		return 0, fmt.Errorf("captured %d, %d in the window", res.Captured, st.Captured-c0)
	}
	return float64(st.Captured-c0) / t1.Sub(t0).Seconds(), nil
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
	argv := append(slices.Clone(args), "--", "-i", "--forward-mode=rxonly", "--nb-cores=1",
		"--total-num-mbufs=16384")
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

// rxPPS asks for port 0's statistics and returns its Rx-pps: the packets
// received since the previous `show port stats` over the time between the
// two, as testpmd's clock measured it.
func (t *testpmd) rxPPS() (float64, error) {
	if err := t.send("show port stats 0"); err != nil {
		return 0, err
	}
	l, err := t.expect("Rx-pps:", 10*time.Second)
	if err != nil {
		return 0, err
	}
	f := strings.Fields(l[strings.Index(l, "Rx-pps:"):])
	if len(f) < 2 {
		return 0, fmt.Errorf("testpmd: no rate in %q", l)
	}
	return strconv.ParseFloat(f[1], 64)
}

// window starts forwarding, measures the receive rate over vsWindow after
// vsWarm and stops forwarding again.
func (t *testpmd) window() (float64, error) {
	if err := t.send("start"); err != nil {
		return 0, err
	}
	time.Sleep(vsWarm)
	if _, err := t.rxPPS(); err != nil {
		return 0, err
	}
	time.Sleep(vsWindow)
	pps, err := t.rxPPS()
	if err != nil {
		return 0, err
	}
	if err := t.send("stop"); err != nil {
		return 0, err
	}
	// "Done." ends the stop once the forwarding lcore is back: the dumper's
	// window must not overlap testpmd's polling.
	if _, err := t.expect("Done.", 10*time.Second); err != nil {
		return 0, err
	}
	if pps == 0 {
		return 0, errors.New("testpmd received nothing in the window")
	}
	return pps, nil
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
