package tuning

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/internal/spec"
)

// RunSpec is a tuning run as written in YAML (`appliance tune run -f`):
//
//	target: {kind: simulator, scenario: incast-2, duration: 2ms}
//	space: {preset: paper, scopes: [leaf]}
//	algorithm: {method: anneal}
//	objective: {beta: 0.5, norm: history}
//	budget: 330
//	patience: 100
//	seed: 1
//	state: tune-state.json
//	dialect: comware
type RunSpec struct {
	Target    TargetSpec    `yaml:"target"`
	Space     SpaceSpec     `yaml:"space"`
	Algorithm AlgorithmSpec `yaml:"algorithm"`
	Objective ObjectiveSpec `yaml:"objective"`
	Budget    int           `yaml:"budget"`
	Patience  int           `yaml:"patience"`
	Seed      uint64        `yaml:"seed"`
	// Timeout bounds each evaluation (apply and measure): telemetry that
	// does not come in time stops the run.
	Timeout string `yaml:"timeout"`
	// State is the file saved after every evaluation and resumed from.
	State string `yaml:"state"`
	// Dialect renders the final report's watermarks (default: each
	// switch's own, comware without switches).
	Dialect string `yaml:"dialect"`

	sim Simulator
}

// TargetSpec picks and sets up the target.
type TargetSpec struct {
	// Kind is simulator, fluid or switches.
	Kind string `yaml:"kind"`
	// Scenario (simulator): one of SimScenarioNames.
	Scenario string `yaml:"scenario"`
	// Duration per evaluation: simulated for the simulator and the fluid
	// model, wall-clock for switches.
	Duration string `yaml:"duration"`
	// Flows (fluid): flows at the bottleneck.
	Flows int `yaml:"flows"`
	// INTSampleRate (simulator): report INT counts only (Eq. 16).
	INTSampleRate float64 `yaml:"int-sample-rate"`
	// Online (simulator): the scenario is an online one whose fabric runs
	// on from one evaluation to the next while its workload changes; each
	// evaluation changes the running switches' watermarks and is judged on
	// the next telemetry window (Duration, default the scenario's).
	Online bool `yaml:"online"`
	// Switches, KnownHosts and Telemetry (switches).
	Switches   []Switch `yaml:"switches"`
	KnownHosts string   `yaml:"known-hosts"`
	Telemetry  string   `yaml:"telemetry"`
	// DTA reads INT report counts from a DTA collector instead of
	// Telemetry's JSON: the collector's address and, per Append list,
	// the port its reports are about (Eq. 16).
	DTA *DTASpec `yaml:"dta"`
}

// DTASpec is a DTA collector as the tuner's telemetry source.
type DTASpec struct {
	Collector string        `yaml:"collector"`
	Lists     []DTAListSpec `yaml:"lists"`
}

// DTAListSpec ties an Append list to a switch port.
type DTAListSpec struct {
	List       uint32  `yaml:"list"`
	Switch     string  `yaml:"switch"`
	Layer      string  `yaml:"layer"`
	Port       int     `yaml:"port"`
	Capacity   float64 `yaml:"capacity-bps"`
	SampleRate float64 `yaml:"sample-rate"`
	AvgPacket  float64 `yaml:"avg-packet-bytes"`
}

// RangeSpec is a parameter's values: a range or a list.
type RangeSpec struct {
	Min    *float64  `yaml:"min"`
	Max    *float64  `yaml:"max"`
	Step   float64   `yaml:"step"`
	Values []float64 `yaml:"values"`
}

// SpaceSpec is the search space.
type SpaceSpec struct {
	// Preset "paper" is the 3300-point traversal space; keys below
	// override its parameters.
	Preset     string     `yaml:"preset"`
	Scopes     []string   `yaml:"scopes"`
	Cell       string     `yaml:"cell"`
	Kmin       *RangeSpec `yaml:"kmin"`
	Kmax       *RangeSpec `yaml:"kmax"`
	KmaxOffset *int64     `yaml:"kmax-offset"`
	Pmax       *RangeSpec `yaml:"pmax"`
	Headroom   *RangeSpec `yaml:"headroom"`
	Alpha      *RangeSpec `yaml:"alpha"`
	// MaxThresholdCells is the switch's limit the bounds must respect.
	MaxThresholdCells int64 `yaml:"max-threshold-cells"`
}

// AlgorithmSpec is the method and Algorithm 1's inputs.
type AlgorithmSpec struct {
	Method    string   `yaml:"method"`
	I         int      `yaml:"I"`
	Tem       *float64 `yaml:"tem"`
	TemGoal   *float64 `yaml:"tem-goal"`
	C         *float64 `yaml:"C"`
	S         *float64 `yaml:"s"`
	Scale     *float64 `yaml:"scale"`
	Remeasure *bool    `yaml:"remeasure"`
	// CoolToBudget fits C so the schedule ends with the budget.
	CoolToBudget *bool `yaml:"cool-to-budget"`
	// Reheat (online) restarts the schedule when a re-measurement of x
	// moved by more than this fraction; CoolWithin (online) fits C so
	// each schedule cools within that many evaluations.
	Reheat     *float64 `yaml:"reheat"`
	CoolWithin int      `yaml:"cool-within"`
	// ReheatSigma and ReheatAfter (online) are the drift test: a reheat
	// needs reheat-after re-measurements in a row beyond reheat-sigma
	// standard deviations of the measured noise (and beyond reheat, now a
	// floor). Samples is the windows per judgement, Aggregate how they
	// combine (mean or median).
	ReheatSigma *float64 `yaml:"reheat-sigma"`
	ReheatAfter *int     `yaml:"reheat-after"`
	Samples     *int     `yaml:"samples"`
	Aggregate   string   `yaml:"aggregate"`
	// Hold, PhaseHistory, ReheatTem, Recall and Lean (online) are
	// AnnealParams' settings of the same names, not Algorithm 1's: off
	// unless the file says.
	Hold         bool    `yaml:"hold"`
	PhaseHistory bool    `yaml:"phase-history"`
	ReheatTem    float64 `yaml:"reheat-tem"`
	Recall       bool    `yaml:"recall"`
	Lean         bool    `yaml:"lean"`
	// Start is a baseline name to start from (random when empty).
	Start string `yaml:"start"`
}

// ObjectiveSpec is the objective.
type ObjectiveSpec struct {
	Beta       *float64 `yaml:"beta"`
	Fairness   *bool    `yaml:"fairness"`
	Gamma      *float64 `yaml:"gamma"`
	Norm       string   `yaml:"norm"`
	Throughput string   `yaml:"throughput"`
	Queue      string   `yaml:"queue"`
	QueueStat  string   `yaml:"queue-stat"`
	QueueRef   string   `yaml:"queue-ref"`
}

// Simulator is the "simulator" target kind. The fabric simulator sits above
// this package (bench/tunesim), so whoever loads a run file supplies it;
// without one, the kind is refused.
type Simulator interface {
	// Scenarios are the scenario names, for messages: the online ones
	// (a fabric that runs on while the tuner changes it) or the others.
	Scenarios(online bool) []string
	// Defaults are a scenario's tuned scopes and objective; false when
	// there is no such scenario of that kind.
	Defaults(scenario string, online bool) (scopes []string, obj Objective, ok bool)
	// Open makes the target of a run file's target section, with its
	// bottleneck capacity (bit/s) and base RTT (ns) for the baselines.
	Open(t TargetSpec) (tg Target, capacity float64, rtt int64, err error)
}

// LoadRunSpec reads and checks a run file; problems name line and key.
// sim serves the simulator target kind (nil: refused).
func LoadRunSpec(path string, sim Simulator) (RunSpec, error) {
	s := RunSpec{sim: sim}
	if err := spec.LoadValid(path, &s); err != nil {
		return RunSpec{}, err
	}
	return s, nil
}

// DecodeRunSpec is LoadRunSpec for YAML in memory.
func DecodeRunSpec(name string, data []byte, sim Simulator) (RunSpec, error) {
	s := RunSpec{sim: sim}
	if err := spec.DecodeValid(name, data, &s); err != nil {
		return RunSpec{}, err
	}
	return s, nil
}

func durationOf(s string, def time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("duration %q: like 2ms or 30s", s)
	}
	return d, nil
}

// Validate records every problem in doc.
func (s *RunSpec) Validate(doc *spec.Doc) {
	switch s.Target.Kind {
	case "simulator":
		if s.sim == nil {
			doc.Errorf("target.kind", "simulator: not available here (the caller has no fabric simulator)")
		} else if _, _, ok := s.sim.Defaults(s.Target.Scenario, s.Target.Online); !ok {
			kind := ""
			if s.Target.Online {
				kind = "online "
			}
			doc.Errorf("target.scenario", "%q: one of the %sscenarios %s", s.Target.Scenario, kind, strings.Join(s.sim.Scenarios(s.Target.Online), ", "))
		}
	case "fluid":
		if s.Target.Flows < 0 {
			doc.Errorf("target.flows", "%d: at least 1", s.Target.Flows)
		}
	case "switches":
		if len(s.Target.Switches) == 0 {
			doc.Errorf("target.switches", "no switches")
		}
		for i, sw := range s.Target.Switches {
			key := fmt.Sprintf("target.switches[%d]", i)
			if sw.Name == "" || sw.Address == "" || sw.User == "" {
				doc.Errorf(key, "name, address and user are required")
			}
			d, err := DialectByName(sw.Dialect)
			if err != nil {
				doc.Errorf(key+".dialect", "%v", err)
			}
			if len(sw.Ports) == 0 {
				doc.Errorf(key+".ports", "no ports")
			}
			// Every name is checked here, before any switch is contacted.
			for j, p := range sw.Ports {
				if d != nil {
					if err := d.CheckPort(p); err != nil {
						doc.Errorf(fmt.Sprintf("%s.ports[%d]", key, j), "switch %s: %v", sw.Name, err)
					}
				}
			}
			if sw.Dialect == "vrp" && sw.QueueCells <= 0 {
				doc.Errorf(key+".queue-cells", "switch %s: vrp's WRED limits are percentages of the queue length: give it in cells", sw.Name)
			}
		}
		if s.Target.KnownHosts == "" {
			doc.Errorf("target.known-hosts", "a known_hosts file (or \"insecure\" for a lab)")
		}
	default:
		doc.Errorf("target.kind", "%q: simulator, fluid or switches", s.Target.Kind)
	}
	if s.Target.Online && s.Target.Kind != "simulator" {
		doc.Errorf("target.online", "online is a simulator mode (switches are always online)")
	}
	if _, err := durationOf(s.Target.Duration, 0); err != nil {
		doc.Errorf("target.duration", "%v", err)
	}
	if s.Algorithm.CoolWithin < 0 {
		doc.Errorf("algorithm.cool-within", "%d: not negative", s.Algorithm.CoolWithin)
	}
	s.checkJudging(doc)
	if _, err := durationOf(s.Timeout, 0); err != nil {
		doc.Errorf("timeout", "%v", err)
	}
	if s.Budget < 0 || s.Patience < 0 {
		doc.Errorf("budget", "budget and patience are not negative")
	}
	if sp, err := s.BuildSpace(); err != nil {
		doc.Errorf("space", "%v", err)
	} else if err := sp.Validate(); err != nil {
		doc.Errorf("space", "%v", strings.TrimPrefix(err.Error(), "space: "))
	}
	if _, err := s.BuildObjective(); err != nil {
		doc.Errorf("objective", "%v", err)
	}
	if _, err := s.AnnealParams(); err != nil {
		doc.Errorf("algorithm", "%v", err)
	}
	if m := s.Algorithm.Method; m != "" && !slices.Contains([]string{"anneal", "grid", "random", "hillclimb"}, m) {
		doc.Errorf("algorithm.method", "%q: anneal, grid, random or hillclimb", m)
	}
	if st := s.Algorithm.Start; st != "" && !slices.Contains(BaselineNames(), st) {
		doc.Errorf("algorithm.start", "%q: one of %v", st, BaselineNames())
	}
	if s.Dialect != "" {
		if _, err := DialectByName(s.Dialect); err != nil {
			doc.Errorf("dialect", "%v", err)
		}
	}
}

func (r *RangeSpec) param(name string) (Param, error) {
	if len(r.Values) > 0 {
		if r.Min != nil || r.Max != nil {
			return Param{}, fmt.Errorf("%s: values or min/max/step, not both", name)
		}
		return Param{Name: name, Values: slices.Clone(r.Values)}, nil
	}
	if r.Min == nil || r.Max == nil {
		return Param{}, fmt.Errorf("%s: min and max (and step), or values", name)
	}
	step := r.Step
	if step == 0 && *r.Min == *r.Max {
		step = 1
	}
	return Range(name, *r.Min, *r.Max, step)
}

// BuildSpace is the space the file describes (not yet validated).
func (s *RunSpec) BuildSpace() (Space, error) {
	scopes := s.Space.Scopes
	if len(scopes) == 0 {
		switch s.Target.Kind {
		case "simulator":
			if s.sim != nil {
				scopes, _, _ = s.sim.Defaults(s.Target.Scenario, s.Target.Online)
			}
		case "fluid":
			scopes = []string{"bottleneck"}
		}
	}
	var sp Space
	switch s.Space.Preset {
	case "paper", "":
		sp = PaperSpace(scopes...)
	default:
		return sp, fmt.Errorf("preset %q: paper (and override its parameters)", s.Space.Preset)
	}
	if s.Space.Cell != "" {
		c, err := spec.ParseSize(s.Space.Cell)
		if err != nil {
			return sp, err
		}
		sp.Cell = c
	}
	set := func(name string, r *RangeSpec) error {
		if r == nil {
			return nil
		}
		p, err := r.param(name)
		if err != nil {
			return err
		}
		if q := sp.Param(name); q != nil {
			*q = p
		} else {
			sp.Params = append(sp.Params, p)
		}
		return nil
	}
	if s.Space.Kmax != nil {
		sp.KmaxOffset = 0
	}
	if s.Space.KmaxOffset != nil {
		sp.KmaxOffset = *s.Space.KmaxOffset
	}
	for _, x := range []struct {
		n string
		r *RangeSpec
	}{{ParamKmin, s.Space.Kmin}, {ParamKmax, s.Space.Kmax}, {ParamPmax, s.Space.Pmax}, {ParamHeadroom, s.Space.Headroom}, {ParamAlpha, s.Space.Alpha}} {
		if err := set(x.n, x.r); err != nil {
			return sp, err
		}
	}
	sp.MaxThresholdCells = s.Space.MaxThresholdCells
	return sp, nil
}

// BuildObjective is the objective the file describes, over the target's
// default.
func (s *RunSpec) BuildObjective() (Objective, error) {
	o := DefaultObjective()
	if s.sim != nil && s.Target.Kind == "simulator" {
		if _, so, ok := s.sim.Defaults(s.Target.Scenario, s.Target.Online); ok {
			o = so
		}
	}
	os := s.Objective
	if os.Beta != nil {
		o.Beta = *os.Beta
	}
	if os.Fairness != nil {
		o.Fairness = *os.Fairness
	}
	if os.Gamma != nil {
		o.Gamma = *os.Gamma
	}
	if os.Norm != "" {
		o.Norm = Normalisation(os.Norm)
	}
	if os.Throughput != "" {
		o.Throughput = Agg(os.Throughput)
	}
	if os.Queue != "" {
		o.Queue = Agg(os.Queue)
	}
	if os.QueueStat != "" {
		o.QueueStat = os.QueueStat
	}
	if os.QueueRef != "" {
		v, err := spec.ParseSize(os.QueueRef)
		if err != nil {
			return o, err
		}
		o.QueueRef = float64(v)
	}
	return o, o.Validate()
}

// checkJudging names the key of a bad online judging setting.
func (s *RunSpec) checkJudging(doc *spec.Doc) {
	a := s.Algorithm
	if v := a.ReheatSigma; v != nil && (*v < 0 || math.IsNaN(*v)) {
		doc.Errorf("algorithm.reheat-sigma", "%g: not negative", *v)
	}
	if v := a.ReheatAfter; v != nil && (*v < 1 || *v > noisePairs) {
		doc.Errorf("algorithm.reheat-after", "%d: 1 to %d", *v, noisePairs)
	}
	if v := a.Samples; v != nil && (*v < 1 || *v > 100) {
		doc.Errorf("algorithm.samples", "%d: 1 to 100 windows per judgement", *v)
	}
	if a.Aggregate != "" && a.Aggregate != "mean" && a.Aggregate != "median" {
		doc.Errorf("algorithm.aggregate", "%q: mean or median", a.Aggregate)
	}
	if (a.ReheatSigma != nil || a.ReheatAfter != nil) && !s.Target.Online && s.Target.Kind != "switches" {
		doc.Errorf("algorithm.reheat-sigma", "the drift test is for online runs (target.online)")
	}
	if a.ReheatTem < 0 || math.IsNaN(a.ReheatTem) {
		doc.Errorf("algorithm.reheat-tem", "%g: not negative", a.ReheatTem)
	}
	for _, k := range []struct {
		key string
		on  bool
	}{{"hold", a.Hold}, {"phase-history", a.PhaseHistory}, {"reheat-tem", a.ReheatTem > 0}, {"recall", a.Recall}, {"lean", a.Lean}} {
		if k.on && !s.Target.Online && s.Target.Kind != "switches" {
			doc.Errorf("algorithm."+k.key, "an online setting (target.online, or switches)")
		}
	}
}

// AnnealParams are Algorithm 1's inputs from the file (the paper's by
// default, cooled within the budget unless cool-to-budget is false).
func (s *RunSpec) AnnealParams() (AnnealParams, error) {
	p := PaperAnneal()
	a := s.Algorithm
	if a.I != 0 {
		p.I = a.I
	}
	for _, f := range []struct {
		dst *float64
		v   *float64
	}{{&p.Tem, a.Tem}, {&p.TemGoal, a.TemGoal}, {&p.C, a.C}, {&p.S, a.S}, {&p.Scale, a.Scale}} {
		if f.v != nil {
			*f.dst = *f.v
		}
	}
	if a.Remeasure != nil {
		p.Remeasure = *a.Remeasure
	} else if s.Target.Kind != "switches" && !s.Target.Online {
		// The simulator and the fluid model are deterministic: a second
		// look at x (line 7) returns the same f(x).
		p.Remeasure = false
	}
	if s.Target.Online {
		// A live network: the workload changes under the tuner, so the
		// schedule restarts when the drift test says f(x) moved
		// (OnlineTuning's unless the file says).
		o := OnlineTuning()
		p.Reheat, p.ReheatSigma, p.ReheatAfter, p.Samples, p.Median = o.Reheat, o.ReheatSigma, o.ReheatAfter, o.Samples, o.Median
	}
	if a.Reheat != nil {
		p.Reheat = *a.Reheat
	}
	if a.ReheatSigma != nil {
		p.ReheatSigma = *a.ReheatSigma
	}
	if a.ReheatAfter != nil {
		p.ReheatAfter = *a.ReheatAfter
	}
	if a.Samples != nil {
		p.Samples = *a.Samples
	}
	if a.Aggregate != "" {
		p.Median = a.Aggregate == "median"
	}
	p.Hold, p.PhaseHistory, p.ReheatTem, p.Recall, p.Lean = a.Hold, a.PhaseHistory, a.ReheatTem, a.Recall, a.Lean
	switch {
	case a.CoolWithin > 0:
		p = p.ForBudget(a.CoolWithin)
	case p.online() && (a.CoolToBudget == nil || *a.CoolToBudget):
		// Online a schedule cools within 60 evaluations (30 steps of
		// line 7 and a proposal): the budget is the run's length, not
		// one schedule's.
		p = p.ForBudget(60)
	case s.Budget > 0 && (a.CoolToBudget == nil || *a.CoolToBudget):
		p = p.ForBudget(s.Budget)
	}
	return p, p.Validate()
}

// Session is a run ready to go.
type Session struct {
	Spec   RunSpec
	Space  Space
	Tuner  *Tuner
	Target Target
}

// Build turns the spec into a tuner; dir resolves relative paths (the
// state file) and is where outputs go.
func (s *RunSpec) Build(dir string) (*Session, error) {
	sp, err := s.BuildSpace()
	if err != nil {
		return nil, err
	}
	if err := sp.Validate(); err != nil {
		return nil, err
	}
	obj, err := s.BuildObjective()
	if err != nil {
		return nil, err
	}
	ap, err := s.AnnealParams()
	if err != nil {
		return nil, err
	}
	dur, _ := durationOf(s.Target.Duration, 0)
	timeout, _ := durationOf(s.Timeout, 0)
	se := &Session{Spec: *s, Space: sp}
	capacity, rtt := 25e9, int64(8000)
	switch s.Target.Kind {
	case "simulator":
		if s.sim == nil {
			return nil, fmt.Errorf("target kind simulator: not available here")
		}
		se.Target, capacity, rtt, err = s.sim.Open(s.Target)
		if err != nil {
			return nil, err
		}
	case "fluid":
		p := Table4(max(s.Target.Flows, 1))
		if s.Target.Flows == 0 {
			p = Table4(8)
		}
		if dur > 0 {
			p.Duration = dur.Seconds()
		}
		se.Target = NewFluidTarget(p)
		capacity, rtt = p.C, int64((p.TauStar-p.Tau)*1e9)
	case "switches":
		pu, err := NewSSHPusher(s.Target.KnownHosts)
		if err != nil {
			return nil, err
		}
		var src TelemetrySource = StubSource{}
		switch {
		case s.Target.DTA != nil:
			d := &DTASource{Collector: s.Target.DTA.Collector, Lists: map[uint32]DTAPort{}}
			for _, l := range s.Target.DTA.Lists {
				if l.SampleRate <= 0 || l.AvgPacket <= 0 {
					return nil, fmt.Errorf("dta list %d: sample-rate and avg-packet-bytes must be positive (Eq. 16)", l.List)
				}
				d.Lists[l.List] = DTAPort{Switch: l.Switch, Layer: l.Layer, Port: l.Port, Capacity: l.Capacity,
					SampleRate: l.SampleRate, AvgPacket: l.AvgPacket}
			}
			src = d
		case s.Target.Telemetry != "":
			src = HTTPSource{URL: s.Target.Telemetry}
		}
		se.Target = &SwitchTarget{Switches: s.Target.Switches, Pusher: pu, Source: src}
		if dur == 0 {
			dur = time.Second // the paper's telemetry period
		}
	default:
		return nil, fmt.Errorf("target kind %q", s.Target.Kind)
	}
	var start Point
	if s.Algorithm.Start != "" {
		c, err := BaselineConfig(s.Algorithm.Start, sp.Cell, capacity, rtt, sp.Scopes...)
		if err != nil {
			return nil, err
		}
		start = sp.Nearest(c)
	}
	opt, err := NewOptimizer(s.Algorithm.Method, &sp, s.Seed, ap, start)
	if err != nil {
		return nil, err
	}
	state := s.State
	if state != "" && !filepath.IsAbs(state) {
		state = filepath.Join(dir, state)
	}
	se.Tuner = &Tuner{Space: &se.Space, Objective: obj, Target: se.Target, Optimizer: opt, Budget: s.Budget,
		Patience: s.Patience, Interval: dur, Timeout: timeout, StateFile: state}
	if s.Budget == 0 && s.Algorithm.Method != "grid" {
		se.Tuner.Budget = 330
	}
	return se, nil
}

// ensureDir makes dir.
func ensureDir(dir string) error { return os.MkdirAll(dir, 0o755) }
