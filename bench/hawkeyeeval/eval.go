package hawkeyeeval

import (
	"context"
	"fmt"
	"slices"

	"github.com/rdma-appliance/appliance/bench/fabric"
	"github.com/rdma-appliance/appliance/bench/hawkeyesim"
	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
)

// Method is how telemetry is collected for a diagnosis: Hawkeye, or one of
// the paper's baselines and ablations.
type Method int

const (
	// Hawkeye: the victim's path plus PFC causality tracing.
	Hawkeye Method = iota
	// VictimOnly polls the switches on the victim's path alone.
	VictimOnly
	// FullPolling collects every switch at the incident.
	FullPolling
	// PortOnly is Hawkeye's collection with flow records removed.
	PortOnly
	// FlowOnly is Hawkeye's collection with port records and meters
	// removed.
	FlowOnly
)

// Methods are every method, in table order.
var Methods = []Method{Hawkeye, VictimOnly, FullPolling, PortOnly, FlowOnly}

func (m Method) String() string {
	switch m {
	case Hawkeye:
		return "hawkeye"
	case VictimOnly:
		return "victim-only"
	case FullPolling:
		return "full-polling"
	case PortOnly:
		return "port-only"
	case FlowOnly:
		return "flow-only"
	}
	return fmt.Sprintf("method(%d)", int(m))
}

// Verdict is what a diagnosis said, in the evaluation's terms.
type Verdict struct {
	Anomaly Anomaly // -1: none recognised
	// Flows are the root-cause flows, best first; Host a root-cause host.
	Flows []hawkeyewire.FlowKey
	Host  string
}

// Diagnoser turns an incident's telemetry into a verdict (the analyzer of
// collector/hawkeyeanalyzer, adapted).
type Diagnoser func(t *hawkeyewire.Telemetry) (Verdict, error)

// Outcome is one method's result on one trace.
type Outcome struct {
	Anomaly Anomaly
	Seed    uint64
	Method  Method
	// Manifested: the fabric showed the injected anomaly (PFC for
	// incast and storms, a loop of paused ports for deadlocks, no PFC for
	// contention); traces where it did not are left out of the scores.
	Manifested bool
	Detected   bool // a poll was sent after the anomaly began
	Verdict    Verdict
	Correct    bool
	Bytes      int // telemetry collected
	Switches   int // switches that reported
	Err        string
}

// readDelay is how long after a poll the switches' CPUs read their
// registers.
const readDelay = 500_000

// Run simulates a trace with Hawkeye attached and scores every method's
// diagnosis of the first incident after the anomaly began.
func Run(ctx context.Context, tr *Trace, methods []Method, diag Diagnoser) ([]Outcome, error) {
	sim, err := tr.Sim()
	if err != nil {
		return nil, err
	}
	visits := map[uint8][]hawkeyesim.Visit{}
	cfg := hawkeyesim.DefaultConfig()
	// The switch CPUs read their registers a while after the polling
	// packet passed (the paper's pollers take tens of milliseconds): by
	// then the epochs hold the anomaly as it developed, not only its
	// first microseconds.
	cfg.ReadDelay = readDelay
	// Polls of background flows before the anomaly must not leave its
	// switches rate-limited when it comes.
	cfg.CollectInterval = 100_000
	sys, err := hawkeyesim.Attach(sim, cfg, hawkeyesim.DefaultAgentConfig())
	if err != nil {
		return nil, err
	}
	sys.Program.OnVisit = func(v hawkeyesim.Visit) { visits[v.Event] = append(visits[v.Event], v) }
	// Full polling: at the first poll after the anomaly began, every
	// switch is collected a moment later (when Hawkeye's CPU pollers
	// read theirs).
	var full *hawkeyewire.Telemetry
	var first *hawkeyesim.PollEvent
	begin := sys.Agent.OnPoll
	sys.Agent.OnPoll = func(p hawkeyesim.PollEvent) {
		if begin != nil {
			begin(p)
		}
		if first != nil || p.Time < tr.Truth.At {
			return
		}
		if len(tr.Truth.Victims) > 0 && !slices.Contains(tr.Truth.Victims, int(p.Flow)) {
			return
		}
		pc := p
		first = &pc
		sim.At(p.Time+readDelay, func(s *fabric.Sim) {
			t := &hawkeyewire.Telemetry{Event: pc.Event, Victim: pc.Victim, Time: s.Now(), Hosts: sys.Collector.Hosts, Links: sys.Collector.Links}
			for sw := range sys.Program.Switches() {
				t.Reports = append(t.Reports, sys.Program.Collect(sw))
			}
			full = t
		})
	}
	if _, err := sim.Run(ctx, tr.Duration); err != nil {
		return nil, err
	}
	manifested := tr.manifested(sim)
	var out []Outcome
	for _, m := range methods {
		o := Outcome{Anomaly: tr.Truth.Anomaly, Seed: tr.Seed, Method: m, Manifested: manifested}
		if first == nil {
			out = append(out, o)
			continue
		}
		o.Detected = true
		var t *hawkeyewire.Telemetry
		switch m {
		case FullPolling:
			t = full
		default:
			t = sys.Collector.Incident(first.Event)
		}
		if t == nil {
			o.Err = "no telemetry collected"
			out = append(out, o)
			continue
		}
		t = shape(t, m, visits[first.Event])
		for _, r := range t.Reports {
			o.Bytes += r.Bytes
		}
		o.Switches = len(t.Reports)
		v, err := diag(t)
		if err != nil {
			o.Err = err.Error()
		}
		o.Verdict = v
		o.Correct = err == nil && tr.Truth.matches(v, sim)
		out = append(out, o)
	}
	return out, nil
}

// shape trims a Hawkeye incident to what a method would have collected.
func shape(t *hawkeyewire.Telemetry, m Method, visits []hawkeyesim.Visit) *hawkeyewire.Telemetry {
	c := *t
	c.Reports = nil
	onPath := map[string]bool{}
	for _, v := range visits {
		if v.Type&hawkeyewire.TypeFlow != 0 {
			onPath[v.Switch] = true
		}
	}
	for _, r := range t.Reports {
		switch m {
		case VictimOnly:
			if !onPath[r.Switch] {
				continue
			}
		case PortOnly, FlowOnly:
			r.Epochs = slices.Clone(r.Epochs)
			for i := range r.Epochs {
				e := r.Epochs[i]
				if m == PortOnly {
					e.Flows = nil
				} else {
					e.Ports, e.Meters = nil, nil
				}
				r.Epochs[i] = e
			}
			if m == PortOnly {
				r.Evicted = nil
			}
		}
		c.Reports = append(c.Reports, r)
	}
	return &c
}

// matches scores a verdict: the right type, and the right root cause: the
// injecting host, or an injected flow among the three top-ranked
// root-cause flows (background flows that share the queue are contenders
// too, and may rank above the injected ones by a few bytes).
func (tr Truth) matches(v Verdict, sim *fabric.Sim) bool {
	if v.Anomaly != tr.Anomaly {
		return false
	}
	if tr.Host != "" {
		return v.Host == tr.Host
	}
	if len(tr.Flows) == 0 {
		return true
	}
	if len(v.Flows) == 0 {
		return false
	}
	injected := map[hawkeyewire.FlowKey]bool{}
	for _, f := range tr.Flows {
		injected[hawkeyesim.FlowKeyOf(sim, int32(f))] = true
	}
	for _, k := range v.Flows[:min(3, len(v.Flows))] {
		if injected[k] {
			return true
		}
	}
	return false
}

// manifested checks the fabric for the injected anomaly at the end of a
// run.
func (tr *Trace) manifested(sim *fabric.Sim) bool {
	st := sim.Stats()
	switch tr.Truth.Anomaly {
	case Incast, Storm:
		return st.PauseFrames > 0
	case Contention:
		return st.PauseFrames == 0
	}
	agg4, _ := tr.Graph.Node("agg4")
	core0, _ := tr.Graph.Node("core0")
	return sim.Paused(agg4, 2, fabric.PrioData) && sim.Paused(core0, 2, fabric.PrioData)
}
