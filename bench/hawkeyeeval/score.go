package hawkeyeeval

import (
	"maps"
	"slices"

	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
)

// Outcome is how one diagnosis of one detection scores (the paper's §4.2:
// a true positive identifies both the exact anomaly type and its root
// causes; anything else reported is a false positive).
type Outcome int

const (
	TruePositive Outcome = iota
	// NonVictim: the detection was of a flow the anomaly did not hurt
	// (background congestion, or before the anomaly began): whatever
	// the diagnosis said, it is a false alarm.
	NonVictim
	// WrongType: a victim, diagnosed as another type (or as none).
	WrongType
	// WrongRoot: the right type, but the top-ranked root cause is not an
	// injected one.
	WrongRoot
)

func (o Outcome) String() string {
	switch o {
	case TruePositive:
		return "true positive"
	case NonVictim:
		return "non-victim"
	case WrongType:
		return "wrong type"
	case WrongRoot:
		return "wrong root cause"
	}
	return "outcome?"
}

// Causes are the injected root causes.
type Causes struct {
	Host  string
	Flows map[hawkeyewire.FlowKey]bool
}

// CausesOf are a trace's root causes.
func CausesOf(tr *TraceResult) Causes {
	c := Causes{Host: tr.Truth.Host, Flows: map[hawkeyewire.FlowKey]bool{}}
	for _, k := range tr.Keys {
		c.Flows[k] = true
	}
	return c
}

// Judge scores a diagnosis v of a detection: top1 and top3 say whether
// an injected root cause is ranked first, or among the first three, in a
// diagnosis of a victim with the right type. A true positive needs it
// ranked first: the diagnosis names the root cause, not a list it is in.
func Judge(victim bool, expect []Anomaly, c Causes, v Verdict) (o Outcome, top1, top3 bool) {
	if !victim {
		return NonVictim, false, false
	}
	if !slices.Contains(expect, v.Anomaly) {
		return WrongType, false, false
	}
	rank := 0
	hit := func(ok bool) {
		if ok && rank < 3 {
			top3 = true
			top1 = top1 || rank == 0
		}
		rank++
	}
	if v.Host != "" {
		hit(v.Host == c.Host)
	}
	for _, f := range v.Flows {
		if rank >= 3 {
			break
		}
		hit(c.Flows[f])
	}
	if !top1 {
		return WrongRoot, false, top3
	}
	return TruePositive, true, true
}

// Key names a score: one method on one anomaly type on one topology,
// with one set of parameters.
type Key struct {
	Params   Params
	Topology Topology
	Anomaly  Anomaly
	Method   Method
}

// Score is one method's figures on one anomaly type and topology.
type Score struct {
	Params   Params   `json:"params"`
	Topology Topology `json:"topology"`
	Anomaly  Anomaly  `json:"anomaly"`
	Method   Method   `json:"method"`
	Traces   int      `json:"traces"`
	// Manifested traces are scored; the others are counted by reason
	// and left out of precision and recall alike.
	Manifested    int            `json:"manifested"`
	NotManifested map[string]int `json:"not_manifested,omitempty"`
	// Detections are every detection raised in the manifested traces,
	// Victims those of the anomaly's victims.
	Detections int `json:"detections"`
	Victims    int `json:"victims"`
	TP         int `json:"tp"`
	// FP = NonVictim + WrongType + WrongRoot.
	FP        int `json:"fp"`
	NonVictim int `json:"fp_non_victim"`
	WrongType int `json:"fp_wrong_type"`
	WrongRoot int `json:"fp_wrong_root"`
	// Found: manifested traces with at least one true positive.
	Found int `json:"found"`
	// Top1 and Top3: victims' detections diagnosed with the right type
	// and an injected root cause ranked first, or among the first three.
	Top1 int `json:"top1"`
	Top3 int `json:"top3"`
	// Bytes, Collected and Switches: telemetry diagnosed, telemetry
	// collected (without what the interval between two collections of a
	// switch let serve again) and switches polled, summed over the
	// detections.
	Bytes     int64 `json:"bytes"`
	Collected int64 `json:"collected"`
	Switches  int   `json:"switches"`
	// Causal: causal switches of the victims' detections, summed;
	// Covered: of them polled.
	Causal  int `json:"causal"`
	Covered int `json:"covered"`
}

// Precision is true positives over every detection diagnosed.
func (s *Score) Precision() float64 { return ratio(s.TP, s.TP+s.FP) }

// Recall is the manifested anomalies found (a true positive among their
// detections) over the manifested anomalies.
func (s *Score) Recall() float64 { return ratio(s.Found, s.Manifested) }

// Top1Rate and Top3Rate are over the victims' detections.
func (s *Score) Top1Rate() float64 { return ratio(s.Top1, s.Victims) }
func (s *Score) Top3Rate() float64 { return ratio(s.Top3, s.Victims) }

// BytesPerIncident, CollectedPerIncident and SwitchesPolled are per
// detection.
func (s *Score) BytesPerIncident() float64     { return ratio64(s.Bytes, int64(s.Detections)) }
func (s *Score) CollectedPerIncident() float64 { return ratio64(s.Collected, int64(s.Detections)) }
func (s *Score) SwitchesPolled() float64       { return ratio(s.Switches, s.Detections) }

// Coverage is the causal switches polled over the causal switches.
func (s *Score) Coverage() float64 { return ratio(s.Covered, s.Causal) }

func ratio(a, b int) float64 { return ratio64(int64(a), int64(b)) }

func ratio64(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func (s *Score) add(o *Score) {
	s.Traces += o.Traces
	s.Manifested += o.Manifested
	for r, n := range o.NotManifested {
		if s.NotManifested == nil {
			s.NotManifested = map[string]int{}
		}
		s.NotManifested[r] += n
	}
	s.Detections += o.Detections
	s.Victims += o.Victims
	s.TP += o.TP
	s.FP += o.FP
	s.NonVictim += o.NonVictim
	s.WrongType += o.WrongType
	s.WrongRoot += o.WrongRoot
	s.Found += o.Found
	s.Top1 += o.Top1
	s.Top3 += o.Top3
	s.Bytes += o.Bytes
	s.Collected += o.Collected
	s.Switches += o.Switches
	s.Causal += o.Causal
	s.Covered += o.Covered
}

// Scores are an evaluation's figures.
type Scores map[Key]*Score

// Get is the score of a key, a zero one when it has none.
func (sc Scores) Get(p Params, tp Topology, a Anomaly, m Method) *Score {
	if s := sc[Key{p, tp, a, m}]; s != nil {
		return s
	}
	return &Score{Params: p, Topology: tp, Anomaly: a, Method: m}
}

func (sc Scores) at(p Params, tp Topology, a Anomaly, m Method) *Score {
	k := Key{p, tp, a, m}
	s := sc[k]
	if s == nil {
		s = &Score{Params: p, Topology: tp, Anomaly: a, Method: m}
		sc[k] = s
	}
	return s
}

// Params are the parameter sets scored, in order.
func (sc Scores) Params() []Params {
	var out []Params
	for k := range sc {
		if !slices.Contains(out, k.Params) {
			out = append(out, k.Params)
		}
	}
	slices.SortFunc(out, func(a, b Params) int {
		if a.EpochShift != b.EpochShift {
			return int(a.EpochShift) - int(b.EpochShift)
		}
		return a.Threshold - b.Threshold
	})
	return out
}

// Only are the scores of one parameter set.
func (sc Scores) Only(p Params) Scores {
	out := Scores{}
	for k, s := range sc {
		if k.Params == p {
			out[k] = s
		}
	}
	return out
}

// Tally adds a trace's result, run with parameters p, for the given
// methods.
func (sc Scores) Tally(p Params, tr *TraceResult, methods []Method) {
	c := CausesOf(tr)
	for _, m := range methods {
		s := sc.at(p, tr.Topology, tr.Anomaly, m)
		s.Traces++
		if !tr.Manifested {
			if s.NotManifested == nil {
				s.NotManifested = map[string]int{}
			}
			s.NotManifested[tr.Reason]++
			continue
		}
		s.Manifested++
		found := false
		for _, inc := range tr.Incidents {
			i := slices.IndexFunc(inc.Results, func(r Result) bool { return r.Method == m })
			if i < 0 {
				continue
			}
			r := &inc.Results[i]
			s.Detections++
			s.Bytes += int64(r.Bytes)
			s.Collected += int64(r.Collected)
			s.Switches += len(r.Switches)
			if inc.Victim {
				s.Victims++
				s.Causal += len(inc.Causal)
				for _, sw := range inc.Causal {
					if slices.Contains(r.Switches, sw) {
						s.Covered++
					}
				}
			}
			o, t1, t3 := Judge(inc.Victim, inc.Expect, c, r.Verdict)
			if t1 {
				s.Top1++
			}
			if t3 {
				s.Top3++
			}
			switch o {
			case TruePositive:
				s.TP++
				found = true
			case NonVictim:
				s.FP++
				s.NonVictim++
			case WrongType:
				s.FP++
				s.WrongType++
			case WrongRoot:
				s.FP++
				s.WrongRoot++
			}
		}
		if found {
			s.Found++
		}
	}
}

// Flatten lists the scores in table order, for a shard's file.
func (sc Scores) Flatten() []Score {
	keys := slices.SortedFunc(maps.Keys(sc), func(a, b Key) int {
		if a.Params != b.Params {
			if a.Params.EpochShift != b.Params.EpochShift {
				return int(a.Params.EpochShift) - int(b.Params.EpochShift)
			}
			return a.Params.Threshold - b.Params.Threshold
		}
		if a.Topology.K != b.Topology.K {
			return a.Topology.K - b.Topology.K
		}
		if a.Anomaly != b.Anomaly {
			return int(a.Anomaly - b.Anomaly)
		}
		return int(a.Method - b.Method)
	})
	out := make([]Score, 0, len(keys))
	for _, k := range keys {
		out = append(out, *sc[k])
	}
	return out
}

// Merge adds up shards' scores.
func Merge(shards ...[]Score) Scores {
	out := Scores{}
	for _, sh := range shards {
		for i := range sh {
			s := &sh[i]
			out.at(s.Params, s.Topology, s.Anomaly, s.Method).add(s)
		}
	}
	return out
}
