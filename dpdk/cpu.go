package dpdk

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// MaxCore bounds the core numbers ParseCoreList takes: past any kernel's
// NR_CPUS (8192), so a list a typo made huge ("0-4294967295") is refused
// rather than expanded core by core.
const MaxCore = 1<<16 - 1

// ParseCoreList parses a core list in DPDK's -l syntax: "0-3,5,7-8"
// (cores 0 to MaxCore).
func ParseCoreList(s string) ([]int, error) {
	var cores []int
	seen := map[int]bool{}
	for _, part := range strings.Split(strings.TrimSpace(s), ",") {
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		if err != nil || a < 0 || a > MaxCore {
			return nil, fmt.Errorf("dpdk: core list %q: bad core %q (0 to %d)", s, lo, MaxCore)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(strings.TrimSpace(hi)); err != nil || b < a || b > MaxCore {
				return nil, fmt.Errorf("dpdk: core list %q: bad range %q (0 to %d)", s, part, MaxCore)
			}
		}
		for c := a; c <= b; c++ {
			if !seen[c] {
				seen[c] = true
				cores = append(cores, c)
			}
		}
	}
	if len(cores) == 0 {
		return nil, fmt.Errorf("dpdk: core list %q is empty", s)
	}
	sort.Ints(cores)
	return cores, nil
}

// Pin locks the calling goroutine to its OS thread and that thread to cpu,
// which is what a poll-mode worker does before it starts polling. The caller
// should defer runtime.UnlockOSThread (or let the goroutine exit).
func Pin(cpu int) error {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Zero()
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("dpdk: pin to core %d: %w", cpu, err)
	}
	return nil
}

// AllowedCores lists the cores this process may run on.
func AllowedCores() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, err
	}
	var cores []int
	for c := 0; c < 1024; c++ {
		if set.IsSet(c) {
			cores = append(cores, c)
		}
	}
	return cores, nil
}

// DefaultCoreClaimsDir is where services of one host record the cores
// their pinned pollers own.
const DefaultCoreClaimsDir = "/run/appliance/cores"

// CoreClaims records which poller owns which core, so that two pollers of one
// process never busy-poll the same core. Claims across processes go through
// lock files under a directory (default /run/appliance/cores) so two services
// on one host refuse to share a core too.
type CoreClaims struct {
	mu     sync.Mutex
	owners map[int]string
	dir    string
	files  map[int]*os.File
}

// NewCoreClaims returns a claim table; dir "" keeps claims in-process only.
func NewCoreClaims(dir string) *CoreClaims {
	return &CoreClaims{owners: map[int]string{}, dir: dir, files: map[int]*os.File{}}
}

// Claim gives cpu to owner or says who has it.
func (c *CoreClaims) Claim(cpu int, owner string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if o, ok := c.owners[cpu]; ok {
		return fmt.Errorf("dpdk: core %d is already polled by %s", cpu, o)
	}
	if c.dir != "" {
		if err := os.MkdirAll(c.dir, 0o755); err != nil {
			return fmt.Errorf("dpdk: core claims: %w", err)
		}
		path := fmt.Sprintf("%s/core%d.lock", c.dir, cpu)
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("dpdk: core claims: %w", err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			b := make([]byte, 256)
			n, _ := f.ReadAt(b, 0)
			f.Close()
			return fmt.Errorf("dpdk: core %d is already polled by another process (%s)", cpu, strings.TrimSpace(string(b[:n])))
		}
		_ = f.Truncate(0)
		_, _ = fmt.Fprintf(f, "pid %d %s\n", os.Getpid(), owner)
		c.files[cpu] = f
	}
	c.owners[cpu] = owner
	return nil
}

// Release gives cpu back.
func (c *CoreClaims) Release(cpu int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.owners, cpu)
	if f := c.files[cpu]; f != nil {
		_ = os.Remove(f.Name())
		_ = f.Close()
		delete(c.files, cpu)
	}
}

// Owner says who polls cpu, "" when nobody.
func (c *CoreClaims) Owner(cpu int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.owners[cpu]
}

// Backoff paces a poll loop that found nothing to do. A dedicated core spins
// (DPDK's way); on a shared machine, as in the lab or CI, an idle loop should
// give the core away after a while. Idle counts empty polls: below Spin it
// returns at once, up to Yield it yields the processor, beyond it sleeps for a
// time that doubles up to MaxSleep.
type Backoff struct {
	Spin     int
	Yield    int
	MaxSleep time.Duration
	// Stats, when set, counts the loop's polls and those that did work:
	// its utilisation, for the service's metrics.
	Stats *LoopStats

	idle  int
	sleep time.Duration
}

// DefaultBackoff suits pollers that share cores with other work.
func DefaultBackoff() Backoff {
	return Backoff{Spin: 64, Yield: 256, MaxSleep: 200 * time.Microsecond}
}

// LoopStats count a poll loop's passes: Busy over Polls is how much of
// its core the loop uses for work (a spinning loop uses all of it either
// way). Safe to read while the loop runs.
type LoopStats struct {
	Polls, Busy atomic.Uint64
}

// Busy resets the backoff after a poll that did work.
func (b *Backoff) Busy() {
	b.idle = 0
	b.sleep = 0
	if b.Stats != nil {
		b.Stats.Polls.Add(1)
		b.Stats.Busy.Add(1)
	}
}

// Idle waits after a poll that found nothing.
func (b *Backoff) Idle() {
	if b.Stats != nil {
		b.Stats.Polls.Add(1)
	}
	b.idle++
	switch {
	case b.idle <= b.Spin:
	case b.idle <= b.Yield:
		runtime.Gosched()
	default:
		if b.sleep == 0 {
			b.sleep = time.Microsecond
		} else if b.sleep < b.MaxSleep {
			b.sleep *= 2
			if b.sleep > b.MaxSleep {
				b.sleep = b.MaxSleep
			}
		}
		time.Sleep(b.sleep)
	}
}

// ProcessCPU is the user and system CPU time of the whole process (every
// thread, the Go runtime's included) and ThreadCPU that of the calling
// thread: what the benchmarks that compare CPU per packet with a peer
// process read. They are 0 when the kernel does not answer.
func ProcessCPU() time.Duration { return rusageCPU(unix.RUSAGE_SELF) }

// ThreadCPU: see ProcessCPU.
func ThreadCPU() time.Duration { return rusageCPU(unix.RUSAGE_THREAD) }

func rusageCPU(who int) time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(who, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
