package hostmesh

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/rdma-appliance/appliance/bench/fabric"
	"github.com/rdma-appliance/appliance/bench/fabric/workload"
	"github.com/rdma-appliance/appliance/collector/hostmeshanalyzer"
	"github.com/rdma-appliance/appliance/internal/topo"
)

// Fault types of the evaluation.
const (
	FaultNone      = "none"
	FaultLinkFlap  = "link-flap"
	FaultSilent    = "silent-drop"
	FaultCorrupt   = "corrupt-link"
	FaultDeadRNIC  = "dead-rnic"
	FaultCongested = "congested-uplink"
	FaultCPU       = "cpu-overload"
	FaultPFCStorm  = "pfc-storm"
	FaultACL       = "acl-deny"
	FaultHeadroom  = "pfc-headroom"
)

// FaultTypes are every fault type Eval injects, fault-free first.
var FaultTypes = []string{FaultNone, FaultLinkFlap, FaultSilent, FaultCorrupt, FaultDeadRNIC, FaultCongested, FaultCPU, FaultPFCStorm,
	FaultACL, FaultHeadroom}

// ClusterSizes are the evaluation's clusters: hosts of 8 RNICs.
var ClusterSizes = []int{4, 16}

// Scale is how much faster than real time the simulated agents run: the
// paper's 100 ms interval, 20 s window and one-minute hold become 100 us,
// 20 ms and 60 ms, so a window holds as many probes as the paper's and
// simulates in a fraction of a second. Host delays and the injected
// processing delays are scaled alike. The network is not: its links, queues
// and PFC pauses run in real time. The probe timeout is therefore not
// scaled alike (see SimTimeout).
const Scale = 1000

// SimTimeout is the probe timeout at simulator scale: 5 ms, not the 500 us
// that scaling the paper's 500 ms would give. A timeout stands for a drop
// (section 3.3.1: a probe not received in a certain period "may be dropped
// on this one-way path"), and the paper's 500 ms is orders of magnitude
// above any queueing delay of a lossless fabric. Scaled to 500 us it is
// not: when a link drops the frames of RDMA flows (a flap, a silent drop),
// their go-back-N retransmissions congest the spine and PFC spreads the
// queue, and probes were measured arriving up to about 2 ms late. Counted
// as drops, those late probes blamed the congested links and RNICs of the
// senders instead of the faulty link. At 5 ms none arrived late in the
// evaluation's runs, and a timeout still ends well inside a 20 ms window.
const SimTimeout = 5 * time.Millisecond

// PGPollEvery is how often the simulated switch poller reads the switches'
// PG drop counters: every second at the paper's scale, as a gNMI sample
// subscription or SONiC's `counterpoll pg-drop interval 1000` reads them
// (SONiC's default is every 10 s).
const PGPollEvery = time.Second / Scale

// SimCoreConfig is the agent configuration at simulator scale.
func SimCoreConfig() Config {
	return Config{Interval: 100 * time.Millisecond / Scale, Timeout: SimTimeout,
		Rotate: time.Minute / Scale, TraceEvery: 10 * time.Microsecond, PoolSize: 8, TraceHops: 4}
}

// SimAnalyzerConfig is the analyzer configuration at simulator scale.
func SimAnalyzerConfig() hostmeshanalyzer.Config {
	return hostmeshanalyzer.Config{Window: 20 * time.Second / Scale, Hold: time.Minute / Scale, ProcessingMin: 5 * time.Microsecond,
		HighLatencyMin: 2 * time.Microsecond, HighLatencyFactor: 1.5, LosslessPG: fabric.PrioData}
}

// The timeline of a run, in windows of the analyzer: the agents probe from
// the start and the analyzer judges every window, the first three
// fault-free (a minute at the paper's scale, long enough for the agents to
// have traced their 5-tuples' paths, as agents that have been probing a
// while have: with 10 ms, tuples not yet traced when a silent drop began
// could not vote, their traces being dropped too). The fault starts at a
// random time of the fourth window and lasts to the end of the sixth
// unless its type ends it sooner.
const (
	warmWindows = 3
	runWindows  = 6
)

// Scenario describes the simulated cluster of a run.
type Scenario struct {
	Machines, RNICs, Spines int
	Bandwidth               float64 // every link, bit/s
	Delay                   int64   // every link, ns
	// Background is the load of random RDMA flows (web-search sizes) on
	// every host link.
	Background float64
}

// ClusterScenario is the evaluation's rail-optimized cluster of hosts
// machines of 8 RNICs: 8 rail switches, as many spines as hosts up to 8
// (full bisection at 4 hosts, 2:1 at 16), 25G links of 1 us, web-search
// background traffic at 5% load.
func ClusterScenario(hosts int) Scenario {
	return Scenario{Machines: hosts, RNICs: 8, Spines: min(hosts, 8), Bandwidth: 25e9, Delay: 1000, Background: 0.05}
}

// Run is one evaluation run: the fault, where, and what the analyzer said
// window by window.
type Run struct {
	Fault    string `json:"fault"`
	Seed     uint64 `json:"seed"`
	Machines int    `json:"machines"`
	Spines   int    `json:"spines"`
	// Truth is the faulty element (none for fault-free runs), FaultAt when
	// the fault began (simulated ns), and Detail how it was made.
	Truth   Element `json:"truth"`
	FaultAt int64   `json:"fault_at_ns"`
	Detail  string  `json:"detail,omitempty"`
	Outcome
	Windows []WindowAlerts             `json:"windows"`
	Reports []*hostmeshanalyzer.Report `json:"-"`
	Stats   RunStats                   `json:"stats"`
}

// WindowAlerts are one analyzed window's end (simulated ns) and alerts.
type WindowAlerts struct {
	End    int64    `json:"end_ns"`
	Alerts []string `json:"alerts,omitempty"`
}

// RunStats are a run's figures over its windows.
type RunStats struct {
	Probes, Timeouts, HighLatency int
	NetP50, NetP99, ProcP50       int64 // of the window the fault began in
	Events                        uint64
	Faults                        fabric.FaultStats
	Drops                         uint64 // frames switches dropped at admission
	WallMs                        int64
}

// RunOne runs one randomized evaluation run of a fault type on the
// cluster of hosts machines.
func RunOne(ctx context.Context, hosts int, fault string, seed uint64) (*Run, error) {
	return runScenario(ctx, fault, seed, ClusterScenario(hosts), newRand(seed))
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0xe7a1)) }

// placement is where a run's fault goes, drawn at random.
type placement struct {
	rail, spine, machine int
	at                   int64 // when it starts
}

func (p placement) rnic() string { return fmt.Sprintf("m%dn%d", p.machine, p.rail) }

func runScenario(ctx context.Context, fault string, seed uint64, sc Scenario, rng *rand.Rand) (*Run, error) {
	t0 := time.Now()
	g, err := topo.RailOptimized(sc.Machines, sc.RNICs, sc.Spines, sc.Bandwidth, sc.Bandwidth, sc.Delay)
	if err != nil {
		return nil, err
	}
	acfg := SimAnalyzerConfig()
	ccfg := SimCoreConfig()
	window := int64(acfg.Window)
	end := runWindows * window
	var flows []workload.Flow
	if sc.Background > 0 {
		flows = workload.Poisson(g.Hosts(), sc.Bandwidth, sc.Background, workload.WebSearch, end, seed)
	}
	cfg := fabric.DefaultConfig()
	cfg.Seed = seed
	// RC QPs give up after retry_cnt timeouts, which the paper's services
	// set to the maximum, 7: a flow to a dead or unreachable RNIC stops,
	// where retrying forever it would blast at line rate (no CNP comes
	// back through a dead link) and congest the spines for the rest of
	// the run.
	cfg.Host.RetryLimit = 7
	pl := placement{rail: rng.IntN(sc.RNICs), spine: rng.IntN(sc.Spines), machine: rng.IntN(sc.Machines),
		at: warmWindows*window + rng.Int64N(window)}
	run := &Run{Fault: fault, Seed: seed, Machines: sc.Machines, Spines: sc.Spines}
	if fault != FaultNone {
		run.FaultAt = pl.at
	}
	// Faults that change the configuration the simulation is built with
	// are placed first; the rest once it exists.
	var setup func(*fabric.Sim) error
	switch fault {
	case FaultNone, FaultLinkFlap, FaultSilent, FaultCorrupt, FaultDeadRNIC, FaultCPU, FaultPFCStorm, FaultACL:
		setup = placeFault(fault, sc, pl, rng, end, run)
	case FaultCongested:
		setup = congestUplink(g, sc, pl, &cfg, rng, end, run)
	case FaultHeadroom:
		setup = misconfigureHeadroom(g, sc, &cfg, rng, pl.at, end, run)
	default:
		return nil, fmt.Errorf("hostmesh: unknown fault type %q (want one of %v)", fault, FaultTypes)
	}
	s, err := fabric.New(g, g.ShortestPaths(), flows, cfg)
	if err != nil {
		return nil, err
	}
	an := hostmeshanalyzer.NewAnalyzer(acfg)
	ag, err := NewSimAgent(s, SimConfig{Core: ccfg, PostDelay: [2]int64{1000, 3000}, PollDelay: [2]int64{1000, 4000},
		ICMPEvery: 2000, PGPollEvery: int64(PGPollEvery), Seed: seed}, func(b hostmeshanalyzer.Batch) { an.Add(&b) })
	if err != nil {
		return nil, err
	}
	s.SetHooks(ag.Hooks())
	ag.Start(0, end)
	if err := setup(s); err != nil {
		return nil, err
	}
	// A window is judged once its last probes have timed out and their
	// agents have uploaded, as the paper's analyzer judges the last 20 s
	// of what it has.
	settle := int64(ccfg.Timeout) + 2*10*int64(ccfg.Interval)
	for k := int64(1); k <= runWindows; k++ {
		wend := k * window
		s.At(wend+settle, func(*fabric.Sim) {
			ag.Flush()
			rep := an.Analyze(wend)
			run.Reports = append(run.Reports, rep)
			run.Windows = append(run.Windows, WindowAlerts{End: wend, Alerts: rep.Alerts})
		})
	}
	if _, err := s.Run(ctx, end+settle+1); err != nil {
		return nil, err
	}
	run.Outcome = Score(run.Truth, run.FaultAt, run.Reports)
	run.Stats = runStats(s, run, t0)
	return run, nil
}

func runStats(s *fabric.Sim, run *Run, t0 time.Time) RunStats {
	st := RunStats{Events: s.Events, Faults: s.FaultStats(), Drops: s.Stats().Drops}
	for _, r := range run.Reports {
		st.Probes += r.Probes
		st.Timeouts += r.Timeouts
		st.HighLatency += r.HighLatency
	}
	if fw := faultWindow(run); fw != nil {
		st.NetP50, st.NetP99, st.ProcP50 = fw.Network.P50, fw.Network.P99, fw.Processing.P50
	}
	st.WallMs = time.Since(t0).Milliseconds()
	return st
}

// faultWindow is the report of the window the fault began in (for a
// fault-free run, the first window after the warm-up), nil before any.
func faultWindow(run *Run) *hostmeshanalyzer.Report {
	for _, r := range run.Reports {
		if r.End > max(run.FaultAt, warmWindows*(r.End-r.Start)) {
			return r
		}
	}
	return nil
}

// placeFault places the faults that need nothing but the running
// simulation: on a random spine link, RNIC or host, from pl.at.
func placeFault(fault string, sc Scenario, pl placement, rng *rand.Rand, end int64, run *Run) func(*fabric.Sim) error {
	railN, spineN := fmt.Sprintf("rail%d", pl.rail), fmt.Sprintf("spine%d", pl.spine)
	link := Element{Kind: hostmeshanalyzer.KindLink, Name: hostmeshanalyzer.LinkName(railN, spineN)}
	rnic := Element{Kind: hostmeshanalyzer.KindRNIC, Name: fmt.Sprintf("m%d/n%d", pl.machine, pl.rail)}
	window := int64(SimAnalyzerConfig().Window)
	switch fault {
	case FaultNone:
		return func(*fabric.Sim) error { return nil }
	case FaultLinkFlap:
		until := pl.at + window/4 + rng.Int64N(window/4)
		run.Truth, run.Detail = link, fmt.Sprintf("down for %v", time.Duration(until-pl.at))
		return func(s *fabric.Sim) error {
			return s.AddLinkFault(fabric.LinkFault{A: railN, B: spineN, Start: pl.at, End: until})
		}
	case FaultSilent:
		a, b := railN, spineN
		if rng.IntN(2) == 0 {
			a, b = b, a
		}
		v := uint32(rng.IntN(8))
		run.Truth, run.Detail = link, fmt.Sprintf("%s to %s drops the 5-tuples of hash %d mod 8", a, b, v)
		return func(s *fabric.Sim) error {
			return s.AddLinkFault(fabric.LinkFault{A: a, B: b, OneWay: true, Start: pl.at, HashMask: 7, HashValue: v})
		}
	case FaultCorrupt:
		oneWay, prob := rng.IntN(2) == 0, 0.03+0.07*rng.Float64()
		run.Truth, run.Detail = link, fmt.Sprintf("%.1f%% of frames corrupted, one way %v", 100*prob, oneWay)
		return func(s *fabric.Sim) error {
			return s.AddLinkFault(fabric.LinkFault{A: railN, B: spineN, OneWay: oneWay, Start: pl.at, Prob: prob})
		}
	case FaultDeadRNIC:
		run.Truth = rnic
		return func(s *fabric.Sim) error { return s.KillRNIC(pl.rnic(), pl.at, 0) }
	case FaultCPU:
		d := int64(20_000 + rng.IntN(80_000))
		host := fmt.Sprintf("m%d", pl.machine)
		run.Truth, run.Detail = Element{Kind: hostmeshanalyzer.KindHost, Name: host}, fmt.Sprintf("processing delay %v", time.Duration(d))
		return func(s *fabric.Sim) error {
			s.At(pl.at, func(s *fabric.Sim) {
				for r := range sc.RNICs {
					_ = s.SetProcessingDelay(fmt.Sprintf("%sn%d", host, r), d)
				}
			})
			return nil
		}
	case FaultPFCStorm:
		run.Truth = rnic
		return func(s *fabric.Sim) error {
			return s.AddFault(fabric.HostFault{Host: pl.rnic(), Prio: fabric.PrioData, Quanta: 0xffff, Interval: 500_000, From: pl.at, Until: end})
		}
	case FaultACL:
		return denyACL(pl, rng, run)
	}
	panic("hostmesh: placeFault: " + fault)
}

// denyACL pushes, at pl.at, an ACL to the port of the RNIC's rail switch
// that faces the RNIC, with a deny rule for the RNIC's address in the RDMA
// class: the paper's RNICs made "RDMA unreachable" by an improper switch
// ACL (problem #4). The rule catches the RNIC as destination (bound to the
// port's egress), as source (its ingress), or both, at random. By the
// paper's footnote 3 a fault of the switch port facing an RNIC is an RNIC
// problem to probing: the truth is the RNIC.
func denyACL(pl placement, rng *rand.Rand, run *Run) func(*fabric.Sim) error {
	sw, rn := fmt.Sprintf("rail%d", pl.rail), pl.rnic()
	dirs := [][]bool{{true}, {false}, {true, false}}[rng.IntN(3)]
	run.Truth = Element{Kind: hostmeshanalyzer.KindRNIC, Name: fmt.Sprintf("m%d/n%d", pl.machine, pl.rail)}
	run.Detail = fmt.Sprintf("deny on %s port to %s, egress/ingress %v", sw, rn, dirs)
	return func(s *fabric.Sim) error {
		node, _ := s.Graph().Node(rn)
		addr := netip.PrefixFrom(fabric.HostAddr(node), 32)
		for _, egress := range dirs {
			r := fabric.ACLRule{Classes: 1 << fabric.PrioData, Deny: true}
			if egress {
				r.Dst = addr
			} else {
				r.Src = addr
			}
			if err := s.AddACL(fabric.ACL{Switch: sw, Port: rn, Egress: egress, Start: pl.at, Rules: []fabric.ACLRule{r}}); err != nil {
				return err
			}
		}
		return nil
	}
}

// congestUplink adds, from pl.at, long flows from RNICs of the rail to
// RNICs of other rails whose ECMP hash sends them all from the rail up to
// the spine: a hash collision on one uplink, two to three times its
// capacity. The colliding senders run without rate control, as a
// misconfigured or non-DCQCN tenant does: only PFC holds them, so the
// uplink's queue stands.
func congestUplink(g *topo.Graph, sc Scenario, pl placement, cfg *fabric.Config, rng *rand.Rand, end int64, run *Run) func(*fabric.Sim) error {
	railN, spineN := fmt.Sprintf("rail%d", pl.rail), fmt.Sprintf("spine%d", pl.spine)
	run.Truth = Element{Kind: hostmeshanalyzer.KindLink, Name: hostmeshanalyzer.LinkName(railN, spineN)}
	var senders []string
	for _, m := range rng.Perm(sc.Machines)[:min(2+rng.IntN(2), sc.Machines)] {
		senders = append(senders, fmt.Sprintf("m%dn%d", m, pl.rail))
	}
	noDCQCN(cfg, senders)
	run.Detail = fmt.Sprintf("%d colliding flows", len(senders))
	return func(s *fabric.Sim) error {
		railNode, _ := g.Node(railN)
		spineNode, _ := g.Node(spineN)
		up := portTo(s, railNode, spineNode)
		var fl []pinnedFlow
		for _, src := range senders {
			dr := (pl.rail + 1 + rng.IntN(sc.RNICs-1)) % sc.RNICs
			fl = append(fl, pinnedFlow{src: src, dst: fmt.Sprintf("m%dn%d", rng.IntN(sc.Machines), dr), at: railNode, port: up})
		}
		return addPinned(s, fl, sc, pl.at, end)
	}
}

// misconfigureHeadroom configures one switch, drawn among all, with too
// little PFC headroom for its cables (0 to 2 KB where the in-flight bytes
// of a 1 us 25G cable and a frame being sent take several) or without PFC
// on the RDMA class: the paper's switches that dropped packets under
// congestion for want of PFC or of proper headroom (problem #5). The
// misconfiguration is there from the start, as a configuration is, and
// lies dormant under the DCQCN background, whose queues stay far below
// the PFC threshold; at pl.at an incast exposes it: two to four long
// flows without rate control (only PFC holds them, as behind a tenant
// without DCQCN) converge on the switch through as many of its ports and
// leave by one. Into a rail switch they come down from distinct spines to
// one of its RNICs; into a spine they come up from distinct rails to one
// RNIC of another rail. The truth is the switch.
func misconfigureHeadroom(g *topo.Graph, sc Scenario, cfg *fabric.Config, rng *rand.Rand, at, end int64, run *Run) func(*fabric.Sim) error {
	nsw := sc.RNICs + sc.Spines
	k := rng.IntN(nsw)
	sw := fmt.Sprintf("rail%d", k)
	if k >= sc.RNICs {
		sw = fmt.Sprintf("spine%d", k-sc.RNICs)
	}
	bad := cfg.Switch
	if rng.IntN(2) == 0 {
		bad.Headroom = int64(rng.IntN(2049))
		run.Detail = fmt.Sprintf("%s: PFC headroom %d bytes", sw, bad.Headroom)
	} else {
		bad.Lossless &^= 1 << fabric.PrioData
		run.Detail = fmt.Sprintf("%s: PFC off on the RDMA class", sw)
	}
	cfg.Switches = map[string]fabric.SwitchConfig{sw: bad}
	run.Truth = Element{Kind: hostmeshanalyzer.KindSwitch, Name: sw}
	fan := 2 + rng.IntN(3)
	var fl []pinnedFlow
	if k < sc.RNICs {
		// Down from distinct spines, each flow pinned at its sender's
		// rail switch to its spine.
		dst := fmt.Sprintf("m%dn%d", rng.IntN(sc.Machines), k)
		rails := rng.Perm(sc.RNICs - 1)
		for i, sp := range rng.Perm(sc.Spines)[:min(fan, sc.Spines)] {
			r := (k + 1 + rails[i]) % sc.RNICs
			fl = append(fl, pinnedFlow{src: fmt.Sprintf("m%dn%d", rng.IntN(sc.Machines), r), dst: dst,
				via: fmt.Sprintf("rail%d", r), to: fmt.Sprintf("spine%d", sp)})
		}
	} else {
		// Up from distinct rails, each pinned to this spine.
		rails := rng.Perm(sc.RNICs)
		dst := fmt.Sprintf("m%dn%d", rng.IntN(sc.Machines), rails[0])
		for _, r := range rails[1 : 1+fan] {
			fl = append(fl, pinnedFlow{src: fmt.Sprintf("m%dn%d", rng.IntN(sc.Machines), r), dst: dst,
				via: fmt.Sprintf("rail%d", r), to: sw})
		}
	}
	var senders []string
	for _, f := range fl {
		senders = append(senders, f.src)
	}
	noDCQCN(cfg, senders)
	run.Detail += fmt.Sprintf("; incast of %d flows", len(fl))
	return func(s *fabric.Sim) error {
		for i := range fl {
			a, _ := g.Node(fl[i].via)
			b, _ := g.Node(fl[i].to)
			fl[i].at, fl[i].port = a, portTo(s, a, b)
		}
		return addPinned(s, fl, sc, at, end)
	}
}

func noDCQCN(cfg *fabric.Config, hosts []string) {
	if cfg.Hosts == nil {
		cfg.Hosts = map[string]fabric.HostConfig{}
	}
	for _, h := range hosts {
		hc := cfg.Host
		hc.DCQCN = false
		cfg.Hosts[h] = hc
	}
}

// pinnedFlow is a long flow whose ECMP hash sends it out of port of
// switch node at (named via and to until resolved).
type pinnedFlow struct {
	src, dst string
	via, to  string
	at, port int
}

func portTo(s *fabric.Sim, node, peer int) int {
	for p := range s.NumPorts(node) {
		if n, _ := s.Peer(node, p); n == peer {
			return p
		}
	}
	return -1
}

// addPinned adds the flows from start, each sized to fill its link alone
// until end, with flow IDs searched until the hash takes the pinned port.
func addPinned(s *fabric.Sim, fl []pinnedFlow, sc Scenario, start, end int64) error {
	g := s.Graph()
	size := int64(sc.Bandwidth / 8 * float64(end-start) / 1e9)
	id := 1 << 20
	for _, f := range fl {
		src, _ := g.Node(f.src)
		dst, _ := g.Node(f.dst)
		if src == dst || f.port < 0 {
			continue
		}
		for s.NextHop(f.at, dst, fabric.FlowIDHash(id)) != f.port {
			id++
		}
		if _, err := s.AddFlow(workload.Flow{ID: id, Src: src, Dst: dst, Size: size, Start: start, Prio: fabric.PrioData}); err != nil {
			return err
		}
		id++
	}
	return nil
}
