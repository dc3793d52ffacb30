package hostmesh

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"text/tabwriter"
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
)

// FaultTypes are every fault type Eval injects, fault-free first.
var FaultTypes = []string{FaultNone, FaultLinkFlap, FaultSilent, FaultCorrupt, FaultDeadRNIC, FaultCongested, FaultCPU, FaultPFCStorm}

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

// SimCoreConfig is the agent configuration at simulator scale.
func SimCoreConfig() Config {
	return Config{Interval: 100 * time.Millisecond / Scale, Timeout: SimTimeout,
		Rotate: time.Minute / Scale, TraceEvery: 10 * time.Microsecond, PoolSize: 8, TraceHops: 4}
}

// SimAnalyzerConfig is the analyzer configuration at simulator scale.
func SimAnalyzerConfig() hostmeshanalyzer.Config {
	return hostmeshanalyzer.Config{Window: 20 * time.Second / Scale, Hold: time.Minute / Scale, ProcessingMin: 5 * time.Microsecond,
		HighLatencyMin: 2 * time.Microsecond, HighLatencyFactor: 1.5}
}

// Run is one evaluation run: the fault, where, and what the analyzer said.
type Run struct {
	Fault    string `json:"fault"`
	Seed     uint64 `json:"seed"`
	Machines int    `json:"machines"`
	Spines   int    `json:"spines"`
	Truth    string `json:"truth,omitempty"`
	// Named is the analyzer's top-ranked suspect of the truth's kind (the
	// RNIC, the link, the host); Correct when it is the truth (for
	// fault-free runs: no alert at all).
	Named   string                   `json:"named,omitempty"`
	Correct bool                     `json:"correct"`
	Alerts  []string                 `json:"alerts"`
	Report  *hostmeshanalyzer.Report `json:"-"`
	Stats   RunStats                 `json:"stats"`
}

// RunStats are a run's figures.
type RunStats struct {
	Probes, Timeouts, HighLatency int
	NetP50, NetP99, ProcP50       int64
	Events                        uint64
	WallMs                        int64
}

// Scenario describes the simulated cluster of a run.
type Scenario struct {
	Machines, RNICs, Spines int
	Bandwidth               float64 // every link, bit/s
	Delay                   int64   // every link, ns
	// Background is the load of random RDMA flows (web-search sizes) on
	// every host link.
	Background float64
}

// RunOne runs one randomized evaluation run of a fault type.
func RunOne(ctx context.Context, fault string, seed uint64) (*Run, error) {
	rng := newRand(seed)
	sc := Scenario{Machines: 4 + rng.IntN(5), RNICs: 8, Spines: []int{2, 4}[rng.IntN(2)], Bandwidth: 25e9, Delay: 1000, Background: 0.05}
	return runScenario(ctx, fault, seed, sc, rng)
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0xe7a1)) }

func runScenario(ctx context.Context, fault string, seed uint64, sc Scenario, rng *rand.Rand) (*Run, error) {
	t0 := time.Now()
	g, err := topo.RailOptimized(sc.Machines, sc.RNICs, sc.Spines, sc.Bandwidth, sc.Bandwidth, sc.Delay)
	if err != nil {
		return nil, err
	}
	acfg := SimAnalyzerConfig()
	ccfg := SimCoreConfig()
	// The agents run 60 ms (a minute at the paper's scale) before the
	// fault: long enough to have traced their 5-tuples' paths, as agents
	// that have been probing a while have. With 10 ms, tuples not yet
	// traced when a silent drop began could not vote (their traces were
	// dropped too): silent drops were found in 2 runs of 3.
	warm := int64(60 * time.Millisecond)
	window := int64(acfg.Window)
	end := warm + window
	var flows []workload.Flow
	if sc.Background > 0 {
		flows = workload.Poisson(g.Hosts(), sc.Bandwidth, sc.Background, workload.WebSearch, end, seed)
	}
	cfg := fabric.DefaultConfig()
	cfg.Seed = seed
	rail := rng.IntN(sc.RNICs)
	spine := rng.IntN(sc.Spines)
	m := rng.IntN(sc.Machines)
	nflows := 2 + rng.IntN(2)
	if fault == FaultCongested {
		// The colliding senders run without rate control, as a
		// misconfigured or non-DCQCN tenant does: only PFC holds them,
		// so the uplink's queue stands.
		cfg.Hosts = map[string]fabric.HostConfig{}
		for k := 0; k < nflows && k < sc.Machines; k++ {
			hc := cfg.Host
			hc.DCQCN = false
			cfg.Hosts[fmt.Sprintf("m%dn%d", k, rail)] = hc
		}
	}
	s, err := fabric.New(g, g.ShortestPaths(), flows, cfg)
	if err != nil {
		return nil, err
	}
	an := hostmeshanalyzer.NewAnalyzer(acfg)
	ag, err := NewSimAgent(s, SimConfig{Core: ccfg, PostDelay: [2]int64{1000, 3000}, PollDelay: [2]int64{1000, 4000},
		ICMPEvery: 2000, Seed: seed}, func(b hostmeshanalyzer.Batch) { an.Add(&b) })
	if err != nil {
		return nil, err
	}
	s.SetHooks(ag.Hooks())
	ag.Start(0, end)
	run := &Run{Fault: fault, Seed: seed, Machines: sc.Machines, Spines: sc.Spines}
	railN, spineN := fmt.Sprintf("rail%d", rail), fmt.Sprintf("spine%d", spine)
	rnic := fmt.Sprintf("m%dn%d", m, rail)
	switch fault {
	case FaultNone:
	case FaultLinkFlap:
		from := warm + rng.Int64N(window/4)
		err = s.AddLinkFault(fabric.LinkFault{A: railN, B: spineN, Start: from, End: from + window/4 + rng.Int64N(window/4)})
		run.Truth = hostmeshanalyzer.LinkName(railN, spineN)
	case FaultSilent:
		a, b := railN, spineN
		if rng.IntN(2) == 0 {
			a, b = b, a
		}
		err = s.AddLinkFault(fabric.LinkFault{A: a, B: b, OneWay: true, Start: warm, HashMask: 7, HashValue: uint32(rng.IntN(8))})
		run.Truth = hostmeshanalyzer.LinkName(railN, spineN)
	case FaultCorrupt:
		err = s.AddLinkFault(fabric.LinkFault{A: railN, B: spineN, OneWay: rng.IntN(2) == 0, Start: warm, Prob: 0.03 + 0.07*rng.Float64()})
		run.Truth = hostmeshanalyzer.LinkName(railN, spineN)
	case FaultDeadRNIC:
		err = s.KillRNIC(rnic, warm, 0)
		run.Truth = fmt.Sprintf("m%d/n%d", m, rail)
	case FaultCPU:
		d := int64(20_000 + rng.IntN(80_000))
		s.At(warm, func(s *fabric.Sim) {
			for r := range sc.RNICs {
				_ = s.SetProcessingDelay(fmt.Sprintf("m%dn%d", m, r), d)
			}
		})
		run.Truth = fmt.Sprintf("m%d", m)
	case FaultPFCStorm:
		err = s.AddFault(fabric.HostFault{Host: rnic, Prio: fabric.PrioData, Quanta: 0xffff, Interval: 500_000, From: warm, Until: end})
		run.Truth = fmt.Sprintf("m%d/n%d", m, rail)
	case FaultCongested:
		err = congest(s, g, sc, rail, spine, nflows, warm, end, rng)
		run.Truth = hostmeshanalyzer.LinkName(railN, spineN)
	default:
		return nil, fmt.Errorf("hostmesh: unknown fault type %q (want one of %v)", fault, FaultTypes)
	}
	if err != nil {
		return nil, err
	}
	if _, err := s.Run(ctx, end+int64(ccfg.Timeout)+int64(ccfg.Interval)); err != nil {
		return nil, err
	}
	ag.Flush()
	rep := an.Analyze(end)
	run.Report, run.Alerts = rep, rep.Alerts
	switch fault {
	case FaultNone:
		run.Correct = len(rep.Alerts) == 0
	case FaultDeadRNIC, FaultPFCStorm:
		run.Named = rep.SuspectRNIC()
	case FaultCPU:
		run.Named = rep.SuspectHost()
	default:
		run.Named = rep.SuspectLink()
	}
	if fault != FaultNone {
		run.Correct = run.Named == run.Truth
	}
	run.Stats = RunStats{Probes: rep.Probes, Timeouts: rep.Timeouts, HighLatency: rep.HighLatency, NetP50: rep.Network.P50,
		NetP99: rep.Network.P99, ProcP50: rep.Processing.P50, Events: s.Events, WallMs: time.Since(t0).Milliseconds()}
	return run, nil
}

// congest adds long flows from RNICs of rail to RNICs of other rails whose
// ECMP hash sends them all from rail up to spine: a hash collision on one
// uplink, two to three times its capacity.
func congest(s *fabric.Sim, g *topo.Graph, sc Scenario, rail, spine, nflows int, start, end int64, rng *rand.Rand) error {
	railNode, _ := g.Node(fmt.Sprintf("rail%d", rail))
	spineNode, _ := g.Node(fmt.Sprintf("spine%d", spine))
	up := -1
	for p := range s.NumPorts(railNode) {
		if n, _ := s.Peer(railNode, p); n == spineNode {
			up = p
		}
	}
	size := int64(sc.Bandwidth / 8 * float64(end-start) / 1e9) // each could fill the uplink alone
	id := 1 << 20
	for k := 0; k < nflows && k < sc.Machines; k++ {
		src, _ := g.Node(fmt.Sprintf("m%dn%d", k, rail))
		dr := (rail + 1 + rng.IntN(sc.RNICs-1)) % sc.RNICs
		dst, _ := g.Node(fmt.Sprintf("m%dn%d", rng.IntN(sc.Machines), dr))
		for s.NextHop(railNode, dst, fabric.FlowIDHash(id)) != up {
			id++
		}
		if _, err := s.AddFlow(workload.Flow{ID: id, Src: src, Dst: dst, Size: size, Start: start, Prio: fabric.PrioData}); err != nil {
			return err
		}
		id++
	}
	return nil
}

// EvalRow is one fault type's outcome over the runs.
type EvalRow struct {
	Fault    string  `json:"fault"`
	Runs     int     `json:"runs"`
	Correct  int     `json:"correct"`
	Accuracy float64 `json:"accuracy"`
	WallMs   int64   `json:"wall_ms"`
	// Misses lists the runs that went wrong: seed, truth, what was named.
	Misses []string `json:"misses,omitempty"`
}

// Eval runs every fault type runs times with seeds from seed on, calling
// progress after each run.
func Eval(ctx context.Context, types []string, runs int, seed uint64, progress func(r *Run)) ([]EvalRow, []*Run, error) {
	return EvalShard(ctx, types, runs, seed, 0, 1, progress)
}

// EvalShard is Eval on part i of n of the runs (run number, over every
// type in order, equal to i modulo n): shards run anywhere, as a batch
// system's array jobs, and MergeRows adds them up to the whole.
func EvalShard(ctx context.Context, types []string, runs int, seed uint64, i, n int, progress func(r *Run)) ([]EvalRow, []*Run, error) {
	if n < 1 || i < 0 || i >= n {
		return nil, nil, fmt.Errorf("hostmesh: shard %d/%d", i, n)
	}
	var rows []EvalRow
	var all []*Run
	for ti, ft := range types {
		row := EvalRow{Fault: ft}
		t0 := time.Now()
		for k := range runs {
			if (ti*runs+k)%n != i {
				continue
			}
			row.Runs++
			r, err := RunOne(ctx, ft, seed+uint64(ti*100000+k))
			if err != nil {
				return rows, all, err
			}
			all = append(all, r)
			if r.Correct {
				row.Correct++
			} else {
				row.Misses = append(row.Misses, fmt.Sprintf("seed %d: truth %q named %q alerts %q", r.Seed, r.Truth, r.Named, r.Alerts))
			}
			if progress != nil {
				progress(r)
			}
		}
		row.WallMs = time.Since(t0).Milliseconds()
		row.Accuracy = float64(row.Correct) / float64(max(row.Runs, 1))
		rows = append(rows, row)
	}
	return rows, all, nil
}

// MergeRows adds up shards' rows, fault type by fault type, in the order
// the types first appear.
func MergeRows(shards ...[]EvalRow) []EvalRow {
	var out []EvalRow
	at := map[string]int{}
	for _, sh := range shards {
		for _, r := range sh {
			i, ok := at[r.Fault]
			if !ok {
				i = len(out)
				at[r.Fault] = i
				out = append(out, EvalRow{Fault: r.Fault})
			}
			m := &out[i]
			m.Runs += r.Runs
			m.Correct += r.Correct
			m.WallMs += r.WallMs
			m.Misses = append(m.Misses, r.Misses...)
		}
	}
	for i := range out {
		out[i].Accuracy = float64(out[i].Correct) / float64(max(out[i].Runs, 1))
	}
	return out
}

// WriteEvalTable prints the evaluation table.
func WriteEvalTable(w io.Writer, rows []EvalRow) {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "fault\truns\tnamed top-ranked\taccuracy\twall\t\n")
	sort.SliceStable(rows, func(i, j int) bool { return false })
	for _, r := range rows {
		what := "named"
		if r.Fault == FaultNone {
			what = "no alert"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d (%s)\t%.1f%%\t%s\t\n", r.Fault, r.Runs, r.Correct, what, 100*r.Accuracy,
			(time.Duration(r.WallMs) * time.Millisecond).Round(10*time.Millisecond))
	}
	tw.Flush()
}
