package hostmesh

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/collector/hostmeshanalyzer"
	"github.com/rdma-appliance/appliance/dpdk"
	_ "github.com/rdma-appliance/appliance/dpdk/afpacket" // the driver
	"github.com/rdma-appliance/appliance/dpdk/netns"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/verbs/soft"
)

var netnsPhase = flag.Duration("hostmesh.phase", 2*time.Second, "length of each phase of TestNetnsTwoHosts (the issue's 30 s: -hostmesh.phase=30s)")

// lockedBuffer collects the batches an uploader writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// take returns the results written since the last take.
func (l *lockedBuffer) take(t *testing.T) []hostmeshanalyzer.Result {
	l.mu.Lock()
	defer l.mu.Unlock()
	bs, err := hostmeshanalyzer.ReadBatches(&l.b)
	if err != nil {
		t.Fatal(err)
	}
	l.b.Reset()
	var out []hostmeshanalyzer.Result
	for _, b := range bs {
		out = append(out, b.Results...)
	}
	return out
}

// TestNetnsTwoHosts: two hosts of four soft RNICs each, every RNIC on an
// AF_PACKET port at the end of a veth pair, a software switch (ring.Bridge
// on AF_PACKET ports) between all eight. Three phases: healthy (positive
// latencies and processing delays, no alert), 5 ms of netem delay on the
// switch's link to one RNIC (its one-way latencies rise by it, the others'
// do not), and that link's twin on the other host cut (the analyzer names
// the RNIC of the cut link). Needs root.
func TestNetnsTwoHosts(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	if err := netns.Available(); err != nil {
		t.Skip(err)
	}
	pool, err := dpdk.NewPool(fmt.Sprintf("hmns%p", t), 16384, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	open := func(ns, ifc string) dpdk.Port {
		p, err := netns.OpenPort(ns, "afpacket:"+ifc+",timeout=1", dpdk.Config{Pool: pool, RxQueues: 1, TxQueues: 1, Promiscuous: true})
		if err != nil {
			t.Fatalf("open %s in %s: %v", ifc, ns, err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var far []dpdk.Port
	var pairs []*netns.Pair
	var devs [2][]Device
	for i := range 8 {
		v := netns.TestPair(t, "hm", 0)
		pairs = append(pairs, v)
		d, err := soft.NewDevice(fmt.Sprintf("hmns%d", i), open(v.NSA, v.IfA), soft.Config{Pool: pool,
			GIDs: []netip.Addr{netip.AddrFrom4([4]byte{10, 78, byte(i / 4), byte(i%4 + 1)})}})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		devs[i/4] = append(devs[i/4], Device{Name: fmt.Sprintf("r%d", i%4), Dev: d})
		far = append(far, open(v.NSB, v.IfB))
	}
	// The switch's port towards host 0's r2 can hold frames back (netem
	// is not in every kernel).
	delayed := &delayPort{Port: far[2]}
	far[2] = delayed
	go delayed.pump(ctx)
	br := ring.NewBridge(far...)
	brDone := make(chan struct{})
	go func() { br.Run(ctx); close(brDone) }()
	sink := &lockedBuffer{}
	var wg sync.WaitGroup
	// Stop the agents and the switch before anything else is torn down.
	defer func() { cancel(); wg.Wait(); <-brDone }()
	for h := range 2 {
		up := NewUploader("", 0)
		up.File = sink
		ag, err := NewAgent(AgentConfig{Config: Config{Host: fmt.Sprintf("h%d", h), Interval: 20 * time.Millisecond,
			Timeout: 300 * time.Millisecond, Seed: uint64(h + 1)}, BatchEvery: 200 * time.Millisecond}, devs[h], up, nil)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); ag.Run(ctx); ag.Close() }()
	}
	phase := func(name string) *hostmeshanalyzer.Report {
		sink.take(t)
		time.Sleep(*netnsPhase)
		rs := sink.take(t)
		a := hostmeshanalyzer.NewAnalyzer(hostmeshanalyzer.Config{Window: time.Hour})
		a.Add(&hostmeshanalyzer.Batch{Results: rs})
		rep := a.Analyze(dpdk.Nanotime())
		var buf bytes.Buffer
		rep.WriteText(&buf)
		t.Logf("%s:\n%s", name, buf.String())
		return rep
	}
	rep := phase("healthy")
	if rep.Probes < 50 || rep.Network.P50 <= 0 || rep.Processing.P50 <= 0 || len(rep.Alerts) != 0 {
		t.Fatalf("healthy: %d probes, net %+v, proc %+v, alerts %v", rep.Probes, rep.Network, rep.Processing, rep.Alerts)
	}
	base := rep.Network.P50

	// 5 ms in the switch on its link to host 0's r2: probes to r2 wait.
	delayed.set(5 * time.Millisecond)
	sink.take(t)
	var to, other []int64
	// A loaded machine probes less: up to three phases for ten probes.
	for i := 0; i < 3 && len(to) < 10; i++ {
		time.Sleep(*netnsPhase)
		for _, r := range sink.take(t) {
			if r.Timeout {
				continue
			}
			if r.Host == "h0" && r.Dst == "r2" {
				to = append(to, r.NetworkNs)
			} else if r.Host == "h1" || (r.Dst != "r2" && r.Src != "r2") {
				other = append(other, r.NetworkNs)
			}
		}
	}
	mto, mother := med(to), med(other)
	t.Logf("delay phase: to h0/r2 median %v over %d probes, elsewhere %v over %d (healthy %v)", time.Duration(mto), len(to),
		time.Duration(mother), len(other), time.Duration(base))
	// The delay shows on r2's link and is confined to it: elsewhere
	// gains less than half of what r2 gains (scheduling delays on a
	// loaded machine reach every link alike).
	if len(to) < 10 || mto < mother+4_000_000 || mother-base > (mto-base)/2 {
		t.Fatalf("the 5 ms do not show: to r2 %v, elsewhere %v", time.Duration(mto), time.Duration(mother))
	}
	delayed.set(0)

	// Cut host 1's r1 link at the switch.
	c := pairs[5]
	if out, err := exec.Command("ip", "netns", "exec", c.NSB, "ip", "link", "set", c.IfB, "down").CombinedOutput(); err != nil {
		t.Fatalf("link down: %v %s", err, out)
	}
	rep = phase("link cut")
	// A loaded machine probes less, and a probe counts as lost only
	// after its timeout: give the cut up to two more phases to show.
	for i := 0; i < 2 && rep.First(hostmeshanalyzer.KindRNIC) == ""; i++ {
		rep = phase("link cut, again")
	}
	if rep.First(hostmeshanalyzer.KindRNIC) != "h1/r1" {
		t.Fatalf("the cut link of h1/r1 was not localized: %v", rep.Alerts)
	}
	for _, s := range rep.RNICs[1:] {
		if s.Anomalous {
			t.Fatalf("also anomalous: %+v", s)
		}
	}
}

func med(v []int64) int64 {
	if len(v) == 0 {
		return 0
	}
	c := slices.Clone(v)
	slices.Sort(c)
	return c[len(c)/2]
}

// delayPort holds the frames a switch transmits for a while before they
// go out: a link with added delay.
type delayPort struct {
	dpdk.Port
	mu    sync.Mutex
	delay time.Duration
	q     []delayed
}

type delayed struct {
	at  int64
	pkt *dpdk.Packet
}

func (d *delayPort) set(v time.Duration) {
	d.mu.Lock()
	d.delay = v
	d.mu.Unlock()
}

func (d *delayPort) TxBurst(q int, pkts []*dpdk.Packet) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.delay == 0 && len(d.q) == 0 {
		return d.Port.TxBurst(q, pkts)
	}
	now := dpdk.Nanotime()
	for _, p := range pkts {
		d.q = append(d.q, delayed{now + int64(d.delay), p})
	}
	return len(pkts)
}

func (d *delayPort) pump(ctx context.Context) {
	one := make([]*dpdk.Packet, 1)
	for ctx.Err() == nil {
		time.Sleep(100 * time.Microsecond)
		d.mu.Lock()
		now := dpdk.Nanotime()
		for len(d.q) > 0 && d.q[0].at <= now {
			one[0] = d.q[0].pkt
			if d.Port.TxBurst(0, one) == 0 {
				one[0].Free()
			}
			d.q = d.q[1:]
		}
		d.mu.Unlock()
	}
}
