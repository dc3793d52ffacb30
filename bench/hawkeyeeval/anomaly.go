// Package hawkeyeeval is Hawkeye's evaluation harness (the paper's §5): it
// generates fabric traces with one injected performance anomaly each, on a
// k=4 fat-tree of 100 Gbps links with 2 us delay and the paper's long-tailed
// workload at a random load, runs detection, collection and diagnosis on
// them, and scores the diagnoses against the injected ground truth, for
// Hawkeye and for the baselines.
package hawkeyeeval

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/rdma-appliance/appliance/bench/fabric"
	"github.com/rdma-appliance/appliance/bench/fabric/workload"
	"github.com/rdma-appliance/appliance/internal/topo"
)

// Anomaly is an injected performance anomaly: the six cases of the
// paper's Table 2.
type Anomaly int

const (
	// Incast: a synchronized micro-burst from many senders into one
	// receiver; PFC backpressure spreads upstream from its ToR.
	Incast Anomaly = iota
	// Storm: a host keeps sending PAUSE frames (a NIC that cannot
	// drain): its ToR's port to it stops, and the pause spreads.
	Storm
	// InLoopDeadlock: routes misconfigured into a loop, and a burst whose
	// own packets circle it fills the loop's buffers: every loop port
	// pauses the next.
	InLoopDeadlock
	// OutLoopContention: the same loop with light traffic in it, and an
	// incast outside it whose backpressure reaches the loop and closes
	// it.
	OutLoopContention
	// OutLoopInjection: the loop closed by a storm from a host outside it.
	OutLoopInjection
	// Contention: flows contend for one port without any PFC (the
	// buffer absorbs them): plain queueing.
	Contention
)

// Anomalies are every type, in table order.
var Anomalies = []Anomaly{Incast, Storm, InLoopDeadlock, OutLoopContention, OutLoopInjection, Contention}

func (a Anomaly) String() string {
	switch a {
	case Incast:
		return "incast-backpressure"
	case Storm:
		return "pfc-storm"
	case InLoopDeadlock:
		return "in-loop-deadlock"
	case OutLoopContention:
		return "out-of-loop-deadlock-contention"
	case OutLoopInjection:
		return "out-of-loop-deadlock-injection"
	case Contention:
		return "flow-contention"
	}
	return fmt.Sprintf("anomaly(%d)", int(a))
}

// Truth is what was injected.
type Truth struct {
	Anomaly Anomaly
	// Flows are the root-cause flows (IDs in Trace.Flows), Host the
	// injecting host, Loop the switches of a routing loop.
	Flows []int
	Host  string
	Loop  []string
	// At is when the anomaly starts (ns).
	At int64
	// Victims are the flows whose incidents count (IDs in Trace.Flows):
	// flows the anomaly hits (the burst's, those to a storming host,
	// those caught in a loop), so a background flow's unrelated incident
	// is not scored against it; empty: any flow.
	Victims []int
}

// Trace is one generated case: a fabric, its traffic, the anomaly.
type Trace struct {
	Seed     uint64
	Load     float64
	Graph    *topo.Graph
	Routes   *topo.Routes
	Flows    []workload.Flow
	Faults   []fabric.HostFault
	Config   fabric.Config
	Duration int64
	Truth    Truth
}

// Fat-tree k=4: hosts h0..h15 (two per ToR), tor0..7, agg0..7, core0..3.
// On a ToR, ports 0-1 face its hosts and 2-3 its pod's aggs; on an agg
// 0-1 its pod's ToRs and 2-3 its cores; core c's port p faces pod p.
const (
	evalBW    = 100e9
	evalDelay = 2000
	// contWindow (ns) is how long after its start a contention burst
	// still queues at its destination: six 512 KB flows into one 100G
	// port drain in 250 us, and the switches' pollers read half a
	// millisecond after the poll.
	contWindow = 750_000
	// outLoopHost is the host outside the loop whose congestion or
	// storm closes it in the out-of-loop deadlocks.
	outLoopHost = 10
)

// hawkeyeCut is the paper's distribution cut at 4 MB.
var hawkeyeCut = func() *workload.CDF {
	sizes, probs := workload.Hawkeye.Points()
	var b strings.Builder
	for i, sz := range sizes {
		if sz >= 4<<20 {
			fmt.Fprintf(&b, "%d 1\n", 4<<20)
			break
		}
		fmt.Fprintf(&b, "%.0f %g\n", sz, probs[i])
	}
	c, err := workload.ParseCDF(strings.NewReader(b.String()))
	if err != nil {
		panic("hawkeye: cutting the workload: " + err.Error())
	}
	return c
}()

// Generate builds trace number seed of anomaly a: background flows from
// the paper's distribution at a load drawn from [0.2, 0.5], and the
// anomaly at 200 us, placed at random where the topology allows.
func Generate(a Anomaly, seed uint64) (*Trace, error) {
	g, err := topo.FatTree(4, evalBW, evalDelay)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, uint64(a)+1))
	t := &Trace{Seed: seed, Load: 0.2 + 0.3*rng.Float64(), Graph: g, Routes: g.ShortestPaths(),
		Config: fabric.DefaultConfig(), Duration: 3_000_000}
	t.Config.Seed = seed
	// Background: Poisson arrivals of the long-tailed distribution, cut
	// at 4 MB (a 3 ms trace sees no more of a larger flow) before the
	// arrival rate is set, so the load is what was drawn.
	// The loop cases run on small buffers, where a full background load
	// would drop (and close or open loops by chance); plain contention
	// needs its burst to be what the victim meets, not a background hot
	// spot elsewhere on its path: half the load for both.
	load := t.Load
	if a == OutLoopContention || a == OutLoopInjection || a == Contention {
		load /= 2
	}
	bg := workload.Poisson(g.Hosts(), evalBW, load, hawkeyeCut, t.Duration, seed)
	const at = 200_000
	t.Truth = Truth{Anomaly: a, At: at}
	node := func(name string) int { i, _ := g.Node(name); return i }
	host := func(i int) int { return node(fmt.Sprintf("h%d", i)) }
	add := func(f workload.Flow) int {
		f.ID = len(t.Flows)
		t.Flows = append(t.Flows, f)
		return f.ID
	}
	burst := func(dst int, senders []int, size int64) {
		for _, s := range senders {
			t.Truth.Flows = append(t.Truth.Flows, add(workload.Flow{Src: host(s), Dst: host(dst), Size: size, Start: at, Prio: fabric.PrioData}))
		}
	}
	// others picks n distinct hosts outside the pod of dst.
	others := func(dst, n int) []int {
		var out []int
		for _, h := range rng.Perm(16) {
			if h/4 != dst/4 && len(out) < n {
				out = append(out, h)
			}
		}
		slices.Sort(out)
		return out
	}
	// loop misconfigures the routes to host dst so that traffic from
	// pod 2's first ToR circles between agg4 and core0.
	loopDst, contDst := -1, -1
	loop := func(dst int) {
		loopDst = host(dst)
		tor4, agg4, core0 := node("tor4"), node("agg4"), node("core0")
		t.Routes.Override(tor4, host(dst), []int{2})  // to agg4
		t.Routes.Override(agg4, host(dst), []int{2})  // to core0
		t.Routes.Override(core0, host(dst), []int{2}) // back to agg4 (pod 2)
		t.Truth.Loop = []string{"agg4", "core0"}
	}
	switch a {
	case Incast:
		dst := rng.IntN(16)
		burst(dst, others(dst, 8), 1<<20)
		t.Truth.Victims = slices.Clone(t.Truth.Flows)
	case Storm:
		h := rng.IntN(16)
		t.Truth.Host = fmt.Sprintf("h%d", h)
		t.Faults = append(t.Faults, fabric.HostFault{Host: t.Truth.Host, Prio: fabric.PrioData, Quanta: 0xffff,
			Interval: 100_000, From: at, Until: at + 1_500_000})
		// Traffic to the storming host, so its ToR's port has something
		// to hold.
		burst(h, others(h, 3), 512<<10)
		t.Truth.Victims, t.Truth.Flows = t.Truth.Flows, nil
	case InLoopDeadlock:
		dst := rng.IntN(4) // pod 0
		loop(dst)
		burst(dst, []int{8, 9}, 4<<20) // tor4's hosts: their packets circle the loop
		t.Truth.Victims = slices.Clone(t.Truth.Flows)
	case OutLoopContention, OutLoopInjection:
		// The loop alone carries a trickle that cannot fill it; what
		// closes it comes from outside: backpressure from tor5's first
		// host (h10), congested by an incast from the other pods or
		// pausing its ToR itself, reaches agg4 (through its port to
		// tor5) and core0 while the trickle's packets circle (a TTL of
		// 64 lets them go round some thirty times; its sender resends
		// them every timeout). The victim enters the loop from tor4:
		// its path never crosses tor5, so polling the victim's path
		// alone cannot see the root cause.
		t.Config.Switch.Buffer = 2 << 20
		dst := rng.IntN(4)
		loop(dst)
		// 128 KB: less than the loop's two ingress groups hold (a
		// dynamic threshold of about 180 KB each), so it circles without
		// closing the loop, until a paused loop port makes one overflow.
		t.Truth.Victims = []int{add(workload.Flow{Src: host(9), Dst: host(dst), Size: 128 << 10, Start: at + 50_000, Prio: fabric.PrioData})}
		if a == OutLoopContention {
			// The burst's senders do not back off (no DCQCN): congestion
			// that lasts long enough to reach the loop.
			senders := []int{0, 1, 2, 3, 12, 13, 14, 15}
			t.Config.Hosts = map[string]fabric.HostConfig{}
			for _, h := range senders {
				hc := t.Config.Host
				hc.DCQCN = false
				t.Config.Hosts[fmt.Sprintf("h%d", h)] = hc
			}
			burst(outLoopHost, senders, 1<<20)
		} else {
			t.Truth.Host = fmt.Sprintf("h%d", outLoopHost)
			t.Faults = append(t.Faults, fabric.HostFault{Host: t.Truth.Host, Prio: fabric.PrioData, Quanta: 0xffff,
				Interval: 100_000, From: at, Until: at + 1_500_000})
			burst(outLoopHost, []int{0, 1, 12}, 1<<20)
			t.Truth.Flows = nil
		}
	case Contention:
		// No PFC: the ports' queues absorb the contention.
		t.Config.Switch.Lossless = 0
		t.Config.Switch.Buffer = 64 << 20
		t.Config.Switch.Alpha = 8
		dst := rng.IntN(16)
		burst(dst, others(dst, 6), 512<<10)
		t.Truth.Victims = slices.Clone(t.Truth.Flows)
		contDst = host(dst)
	}
	for _, f := range bg {
		// Background traffic stays off a loop's links: what crosses them
		// is the anomaly's own.
		// Pod 2 (h8-h11) is the loop's: agg4 serves only it; and core0
		// sends everything for the loop's destination into the loop.
		if t.Truth.Loop != nil && (f.Src/4 == 2 || f.Dst/4 == 2 || f.Dst == loopDst) {
			continue
		}
		id := add(f)
		// A background flow into the contended host while the burst
		// queues there is one more contender of the same queue: the
		// ground truth cannot tell it from the injected ones, so it
		// counts as a root cause too.
		if f.Dst == contDst && f.Start < at+contWindow && f.Start+f.Size*8*1e9/evalBW > at {
			t.Truth.Flows = append(t.Truth.Flows, id)
		}
	}
	return t, nil
}

// Sim builds the trace's simulation.
func (t *Trace) Sim() (*fabric.Sim, error) {
	s, err := fabric.New(t.Graph, t.Routes, t.Flows, t.Config)
	if err != nil {
		return nil, err
	}
	for _, f := range t.Faults {
		if err := s.AddFault(f); err != nil {
			return nil, err
		}
	}
	return s, nil
}
