package tuning

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Target is what the tuner tunes: something that takes a configuration
// and then reports telemetry over an interval. For the simulator and the
// fluid model d is simulated time; for switches it is wall-clock time.
type Target interface {
	Apply(ctx context.Context, c Config) error
	Measure(ctx context.Context, d time.Duration) (Telemetry, error)
}

// HistoryRestarter is an optimizer that can ask for the history
// normalisation to start again (an online Anneal with PhaseHistory, on a
// changed workload): HistoryRestart reports it once, after the Tell that
// decided it.
type HistoryRestarter interface {
	HistoryRestart() bool
}

// ErrNoTelemetry is what a target returns when telemetry stopped
// arriving; the tuner stops on it (as on a timeout of Measure).
var ErrNoTelemetry = errors.New("telemetry stopped arriving")

// ErrUnreachable wraps a target's failure to reach a switch.
var ErrUnreachable = errors.New("switch unreachable")

// Record is one evaluation.
type Record struct {
	Eval  int     `json:"eval"`
	Point Point   `json:"point"`
	Score float64 `json:"score"`
	// Fixed is the same telemetry under the fixed normalisation, so
	// runs with different histories compare.
	Fixed float64 `json:"fixed"`
	// Best and BestFixed are the optimizer's best so far after this
	// evaluation, and that point's fixed score.
	Best      float64 `json:"best"`
	BestFixed float64 `json:"best_fixed"`
	// Throughput (bits/s, summed over watched switches) and Queue (bytes,
	// deepest mean) summarise the telemetry.
	Throughput float64 `json:"throughput_bps"`
	Queue      float64 `json:"queue_bytes"`
	Drops      uint64  `json:"drops"`
}

// State is everything a run needs to resume, saved after every
// evaluation.
type State struct {
	Method    string          `json:"method"`
	Space     Space           `json:"space"`
	Optimizer json.RawMessage `json:"optimizer"`
	History   HistoryBest     `json:"history"`
	Records   []Record        `json:"records"`
	// FixedOf remembers each evaluated point's fixed score (the best
	// point's fixed score is looked up here).
	FixedOf map[string]float64 `json:"fixed_of"`
	// Stopped says why the run ended ("" while it runs).
	Stopped string `json:"stopped,omitempty"`
}

// Tuner runs an optimizer against a target.
type Tuner struct {
	Space     *Space
	Objective Objective
	Target    Target
	Optimizer Optimizer
	// Budget is the most evaluations (0: until the optimizer finishes).
	Budget int
	// Patience stops early once the best has not improved for this many
	// evaluations (0: never).
	Patience int
	// Interval is what each Measure is asked for; Timeout bounds each
	// Apply+Measure (0: none): telemetry that does not come in time ends
	// the run.
	Interval time.Duration
	Timeout  time.Duration
	// StateFile, when set, receives the State after every evaluation
	// and, when it exists at the start, is resumed from.
	StateFile string
	// Progress sees each record.
	Progress func(Record)

	st State
}

// Result is a finished (or stopped) run.
type Result struct {
	Method      string   `json:"method"`
	Best        Config   `json:"best"`
	BestPoint   Point    `json:"best_point"`
	BestScore   float64  `json:"best_score"`
	BestFixed   float64  `json:"best_fixed"`
	Evaluations int      `json:"evaluations"`
	Stopped     string   `json:"stopped"`
	Records     []Record `json:"records"`
}

// Stop reasons.
const (
	StopBudget   = "budget spent"
	StopFinished = "search finished"
	StopEarly    = "early stop"
)

func (t *Tuner) fixedObjective() Objective {
	o := t.Objective
	o.Norm = Fixed
	if !(o.QueueRef > 0) {
		o.QueueRef = DefaultObjective().QueueRef
	}
	return o
}

// Run tunes until the budget, the optimizer's end, early stopping, the
// context or an error. On an error the returned Result still holds the
// best configuration found so far (and the state file has it), with the
// reason in Stopped.
func (t *Tuner) Run(ctx context.Context) (Result, error) {
	if err := t.Space.Validate(); err != nil {
		return Result{Stopped: err.Error()}, err
	}
	if err := t.Objective.Validate(); err != nil {
		return Result{Stopped: err.Error()}, err
	}
	t.st = State{Method: t.Optimizer.Name(), Space: *t.Space, FixedOf: map[string]float64{}}
	if t.StateFile != "" {
		if err := t.resume(); err != nil {
			return Result{Stopped: err.Error()}, err
		}
	}
	fixedObj := t.fixedObjective()
	bestAt, bestSeen := 0, 0.0
	for i, r := range t.st.Records {
		if i == 0 || r.Best > bestSeen {
			bestAt, bestSeen = r.Eval, r.Best
		}
	}
	stop := func(reason string, err error) (Result, error) {
		t.st.Stopped = reason
		if serr := t.save(); serr != nil && err == nil {
			err = serr
		}
		return t.result(), err
	}
	for {
		n := len(t.st.Records)
		if t.Budget > 0 && n >= t.Budget {
			return stop(StopBudget, nil)
		}
		if t.Patience > 0 && n > 0 && n-bestAt >= t.Patience {
			return stop(fmt.Sprintf("%s: no improvement in %d evaluations", StopEarly, t.Patience), nil)
		}
		if err := ctx.Err(); err != nil {
			return stop("canceled", err)
		}
		p, ok := t.Optimizer.Next()
		if !ok {
			return stop(StopFinished, nil)
		}
		cfg, err := t.Space.Config(p)
		if err == nil {
			// The guard: nothing outside the declared bounds reaches a
			// target, whatever an optimizer proposes.
			err = t.Space.Check(cfg)
		}
		if err != nil {
			return stop("refused an out-of-bounds configuration: "+err.Error(), fmt.Errorf("tuning: %w", err))
		}
		tel, err := t.evaluate(ctx, cfg)
		if err != nil {
			reason := err.Error()
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrNoTelemetry) {
				reason = "telemetry stopped arriving: " + reason
			}
			return stop(reason, fmt.Errorf("tuning: evaluation %d: %w", n+1, err))
		}
		f, err := t.Objective.Score(tel, &t.st.History)
		if err != nil {
			return stop(err.Error(), fmt.Errorf("tuning: evaluation %d: %w", n+1, err))
		}
		fx, _ := fixedObj.Score(tel, nil)
		t.st.FixedOf[p.Key()] = fx
		t.Optimizer.Tell(f)
		if hr, ok := t.Optimizer.(HistoryRestarter); ok && hr.HistoryRestart() {
			t.st.History = HistoryBest{}
		}
		bp, bf, _ := t.Optimizer.Best()
		rec := Record{Eval: n + 1, Point: p, Score: f, Fixed: fx, Best: bf, BestFixed: t.st.FixedOf[bp.Key()], Drops: tel.Drops}
		rec.Throughput, rec.Queue = summarise(tel)
		if n == 0 || bf > bestSeen {
			bestAt, bestSeen = rec.Eval, bf
		}
		t.st.Records = append(t.st.Records, rec)
		if err := t.save(); err != nil {
			return t.result(), err
		}
		if t.Progress != nil {
			t.Progress(rec)
		}
	}
}

func (t *Tuner) evaluate(ctx context.Context, cfg Config) (Telemetry, error) {
	if t.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.Timeout)
		defer cancel()
	}
	if err := t.Target.Apply(ctx, cfg); err != nil {
		return Telemetry{}, fmt.Errorf("apply: %w", err)
	}
	tel, err := t.Target.Measure(ctx, t.Interval)
	if err != nil {
		return Telemetry{}, fmt.Errorf("measure: %w", err)
	}
	if len(tel.Switches) == 0 && len(tel.Flows) == 0 {
		return Telemetry{}, fmt.Errorf("measure: %w (empty report)", ErrNoTelemetry)
	}
	return tel, nil
}

// summarise is total throughput and the deepest mean queue.
func summarise(tel Telemetry) (tput, queue float64) {
	for _, sw := range tel.Switches {
		for _, p := range sw.Ports {
			tput += p.PortThroughput(tel.Duration)
			queue = max(queue, p.QueueMean)
		}
	}
	return tput, queue
}

func (t *Tuner) result() Result {
	r := Result{Method: t.st.Method, Evaluations: len(t.st.Records), Stopped: t.st.Stopped, Records: t.st.Records}
	if p, f, ok := t.Optimizer.Best(); ok {
		r.BestPoint, r.BestScore, r.BestFixed = p, f, t.st.FixedOf[p.Key()]
		r.Best, _ = t.Space.Config(p)
	}
	return r
}

func (t *Tuner) save() error {
	if t.StateFile == "" {
		return nil
	}
	raw, err := t.Optimizer.State()
	if err != nil {
		return fmt.Errorf("tuning: state: %w", err)
	}
	t.st.Optimizer = raw
	b, err := json.MarshalIndent(&t.st, "", " ")
	if err != nil {
		return fmt.Errorf("tuning: state: %w", err)
	}
	// Write then rename, so a crash leaves the previous state whole.
	tmp := t.StateFile + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("tuning: state: %w", err)
	}
	if err := os.Rename(tmp, t.StateFile); err != nil {
		return fmt.Errorf("tuning: state: %w", err)
	}
	return nil
}

func (t *Tuner) resume() error {
	b, err := os.ReadFile(t.StateFile)
	if errors.Is(err, os.ErrNotExist) {
		return os.MkdirAll(filepath.Dir(t.StateFile), 0o755)
	}
	if err != nil {
		return fmt.Errorf("tuning: resume: %w", err)
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("tuning: resume %s: %w", t.StateFile, err)
	}
	if st.Method != t.Optimizer.Name() {
		return fmt.Errorf("tuning: resume %s: saved by %s, not %s", t.StateFile, st.Method, t.Optimizer.Name())
	}
	sb, _ := json.Marshal(st.Space)
	tb, _ := json.Marshal(*t.Space)
	if string(sb) != string(tb) {
		return fmt.Errorf("tuning: resume %s: saved for another search space", t.StateFile)
	}
	if err := t.Optimizer.Restore(st.Optimizer); err != nil {
		return fmt.Errorf("tuning: resume %s: %w", t.StateFile, err)
	}
	if st.FixedOf == nil {
		st.FixedOf = map[string]float64{}
	}
	st.Stopped = ""
	t.st = st
	return nil
}

// MemoCache remembers the telemetry of configurations of a deterministic
// target (the simulator with a fixed seed, the fluid model): the same
// configuration gives the same telemetry, so measuring it again would only
// cost time. One cache may serve several tuners at once, each through its
// own Wrap.
type MemoCache struct {
	mu    sync.Mutex
	cache map[string]Telemetry
	hits  int
	miss  int
}

// NewMemoCache is an empty cache.
func NewMemoCache() *MemoCache { return &MemoCache{cache: map[string]Telemetry{}} }

// Stats are the cache's hits and misses so far.
func (m *MemoCache) Stats() (hits, misses int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.hits, m.miss
}

// Wrap is t answered from the cache where it can be; t itself is used by
// one goroutine at a time.
func (m *MemoCache) Wrap(t Target) Target { return &memoTarget{m: m, t: t} }

// Put records t's telemetry for configuration c measured for d, as if a
// wrapped target had measured it (a grid measured elsewhere).
func (m *MemoCache) Put(c Config, d time.Duration, t Telemetry) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cache[memoKey(d, string(b))] = t
	return nil
}

func memoKey(d time.Duration, config string) string { return fmt.Sprintf("%d|%s", d, config) }

type memoTarget struct {
	m   *MemoCache
	t   Target
	cur Config
	key string
}

func (mt *memoTarget) Apply(_ context.Context, c Config) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	mt.cur, mt.key = c, string(b)
	return nil
}

func (mt *memoTarget) Measure(ctx context.Context, d time.Duration) (Telemetry, error) {
	key := memoKey(d, mt.key)
	m := mt.m
	m.mu.Lock()
	if tel, ok := m.cache[key]; ok {
		m.hits++
		m.mu.Unlock()
		return tel, nil
	}
	m.miss++
	m.mu.Unlock()
	if err := mt.t.Apply(ctx, mt.cur); err != nil {
		return Telemetry{}, err
	}
	tel, err := mt.t.Measure(ctx, d)
	if err != nil {
		return Telemetry{}, err
	}
	m.mu.Lock()
	m.cache[key] = tel
	m.mu.Unlock()
	return tel, nil
}

// LoadState reads a saved run.
func LoadState(path string) (State, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return State{}, fmt.Errorf("tuning: %w", err)
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return State{}, fmt.Errorf("tuning: %s: %w", path, err)
	}
	return st, nil
}
