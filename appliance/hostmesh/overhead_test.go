package hostmesh

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/verbs/soft"
)

var overheadFor = flag.Duration("hostmesh.overhead", 3*time.Second, "how long each phase of BenchmarkAgentOverhead measures (the issue's 60 s: -hostmesh.overhead=60s)")

// statusKB is a field of /proc/self/status in kB (VmRSS, RssAnon, ...).
func statusKB(field string) int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == field+":" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb
		}
	}
	return 0
}

// hardware plays a host's RNICs and the switch between them: every soft
// RNIC's poll loop and the switch's, in turn, on one goroutine locked to
// its OS thread, busy-polling like a DPDK core, never blocking. What that
// thread costs is what the RNICs and the fabric do in silicon on a real
// host; cpuTime asks it for its CPU time so far, which it measures on
// itself. It never sleeps: a locked goroutine that blocks (time.Sleep,
// runtime.Gosched) is handed between threads by the Go scheduler on other
// threads' time, thousands of times a second, which would be counted as
// the agent's.
type hardware struct {
	cpu  chan chan time.Duration
	done chan struct{}
}

func runHardware(ctx context.Context, br *ring.Bridge, devs []*soft.Device) *hardware {
	hw := &hardware{cpu: make(chan chan time.Duration), done: make(chan struct{})}
	go func() {
		defer close(hw.done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		t0 := dpdk.ThreadCPU()
		for ctx.Err() == nil {
			br.Poll()
			for _, d := range devs {
				d.Poll()
			}
			select {
			case r := <-hw.cpu:
				r <- dpdk.ThreadCPU() - t0
			default:
			}
		}
	}()
	return hw
}

func (hw *hardware) cpuTime() time.Duration {
	r := make(chan time.Duration)
	hw.cpu <- r
	return <-r
}

// BenchmarkAgentOverhead is the overhead figure: the agent probing
// between 8 RNICs at 10 probes/s each (the paper's 100 ms interval and
// 500 ms timeout), uploading a batch every second over HTTP, with the
// garbage collector at the agent command's setting (GCPercent, unless GOGC
// is set). Each phase lasts -hostmesh.overhead (3 s by default; the issue's
// 60 s with -hostmesh.overhead=60s). It reports figures and asserts
// nothing: the machine may be busy. It needs two cores.
//
// The RNICs are 8 soft RNICs (SoftRNICConfig, sized for probing) on ring
// links to a learning switch, all of them polled by one OS thread that
// stands for the hardware (see hardware). A first phase runs them without
// the agent, a second one with it. What is measured:
//
//   - agent-cpu-%: the process's CPU time (user + system, getrusage) minus
//     the hardware thread's, with the agent, minus the same without it; as
//     a share of one core. That is the agent's sender and receiver loops,
//     expiry, batching and uploads, its verbs calls (posting sends and
//     receives, polling completions: on a real host these run on the
//     agent's threads too), and what the Go runtime does for all of it
//     (scheduler, timers, garbage collection), plus the HTTP endpoint in
//     this process that takes the uploads (conservatively, not the
//     agent's). harness-cpu-% is the part subtracted: the runtime's own
//     work for the spinning hardware thread (it is preempted every 10 ms)
//     and the idle benchmark; hw-cpu-% the hardware thread's (one core).
//   - rss-MB: the resident set (VmRSS) of the whole test process at the
//     end: the test binary's code pages (rss-file-MB), the Go runtime, the
//     agent, the 8 soft RNICs with their packet pools, the switch and the
//     HTTP endpoint. rss-before-MB is VmRSS when the agent started.
//   - alloc-KB/s: what the process allocated per second with the agent.
//   - probes/s: probes received, every RNIC together (80 wanted).
func BenchmarkAgentOverhead(b *testing.B) {
	if runtime.GOMAXPROCS(0) < 2 {
		b.Skip("needs two cores: one plays the RNICs")
	}
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(GCPercent))
	}
	d := *overheadFor
	for range b.N {
		ctx, cancel := context.WithCancel(context.Background())
		var devs []*soft.Device
		var far []dpdk.Port
		var ports []Device
		for i := range 8 {
			l := ring.NewLink(fmt.Sprintf("hmo%d", i), ring.Config{RingSize: 256})
			dev, err := soft.NewDevice(fmt.Sprintf("hmo%d", i), l.A(), SoftRNICConfig(netip.AddrFrom4([4]byte{10, 79, 0, byte(i + 1)})))
			if err != nil {
				b.Fatal(err)
			}
			devs = append(devs, dev)
			far = append(far, l.B())
			ports = append(ports, Device{Name: fmt.Sprintf("r%d", i), Dev: dev})
		}
		hw := runHardware(ctx, ring.NewBridge(far...), devs)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
		}))
		// The cost of everything but the agent, outside the hardware
		// thread.
		phase := func(f func()) (outside, inside, wall time.Duration) {
			c0, h0, t0 := dpdk.ProcessCPU(), hw.cpuTime(), time.Now()
			f()
			c1, h1, t1 := dpdk.ProcessCPU(), hw.cpuTime(), time.Now()
			return (c1 - c0) - (h1 - h0), h1 - h0, t1.Sub(t0)
		}
		base, _, baseWall := phase(func() { time.Sleep(d) })

		up := NewUploader(srv.URL, 0)
		ag, err := NewAgent(AgentConfig{Config: Config{Host: "bench", Seed: 1}}, ports, up, nil)
		if err != nil {
			b.Fatal(err)
		}
		rss0 := statusKB("VmRSS")
		actx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- ag.Run(actx) }()
		// Past the start: neighbours resolved, address handles made.
		time.Sleep(time.Second)
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		r0 := ag.Core().Counters().Received
		with, hwt, wall := phase(func() { time.Sleep(d) })
		r1 := ag.Core().Counters().Received
		runtime.ReadMemStats(&m1)
		rss, rssFile := statusKB("VmRSS"), statusKB("RssFile")
		stop()
		<-done
		ag.Close()
		cancel()
		<-hw.done
		srv.Close()
		for _, dev := range devs {
			dev.Close()
		}
		if st := up.Stats(); st.Delivered == 0 || st.Held > 0 {
			b.Fatalf("uploads: %+v", st)
		}
		share := func(t, over time.Duration) float64 { return 100 * float64(t) / float64(over) }
		b.ReportMetric(share(with, wall)-share(base, baseWall), "agent-cpu-%")
		b.ReportMetric(share(base, baseWall), "harness-cpu-%")
		b.ReportMetric(share(hwt, wall), "hw-cpu-%")
		b.ReportMetric(float64(rss)/1024, "rss-MB")
		b.ReportMetric(float64(rssFile)/1024, "rss-file-MB")
		b.ReportMetric(float64(rss0)/1024, "rss-before-MB")
		b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/1024/wall.Seconds(), "alloc-KB/s")
		b.ReportMetric(float64(r1-r0)/wall.Seconds(), "probes/s")
	}
}
