package hostmesh

import (
	"context"
	"flag"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

var overheadFor = flag.Duration("hostmesh.overhead", 3*time.Second, "how long BenchmarkAgentOverhead measures (the issue's 60 s: -hostmesh.overhead=60s)")

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rssBytes is the process's resident set (VmRSS).
func rssBytes() int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// BenchmarkAgentOverhead: the agent on 8 soft RNICs at 10 probes/s each,
// for -hostmesh.overhead. The soft RNICs' poll loops and the switch burn
// CPU of their own (hardware does that work on a real host), so they run
// alone first and the agent's share is the difference; RSS is the whole
// test process's.
func BenchmarkAgentOverhead(b *testing.B) {
	d := *overheadFor
	for range b.N {
		h := newSoftHost(b, 8)
		c0, t0 := cpuNow(), time.Now()
		time.Sleep(d)
		base := float64(cpuNow()-c0) / float64(time.Since(t0))
		ag, err := NewAgent(AgentConfig{Config: Config{Host: "bench", Seed: 1}}, h.devices(), nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- ag.Run(ctx) }()
		c1, t1 := cpuNow(), time.Now()
		time.Sleep(d)
		with := float64(cpuNow()-c1) / float64(time.Since(t1))
		rss := rssBytes()
		cancel()
		<-done
		c, _ := ag.Status()
		ag.Close()
		b.ReportMetric(100*(with-base), "agent-cpu-%")
		b.ReportMetric(100*base, "rnics-cpu-%")
		b.ReportMetric(float64(rss)/(1<<20), "rss-MB")
		b.ReportMetric(float64(c.Received)/d.Seconds(), "probes/s")
	}
}
