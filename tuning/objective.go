package tuning

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// Telemetry is what a target measured over one evaluation: per switch and
// port, and per flow when the target can tell flows apart.
type Telemetry struct {
	// Duration is the measured interval in nanoseconds.
	Duration int64         `json:"duration_ns"`
	Switches []SwitchStats `json:"switches"`
	Flows    []FlowStats   `json:"flows,omitempty"`
	// Drops and Pauses are fabric-wide counts (reports, not scored).
	Drops  uint64 `json:"drops"`
	Pauses uint64 `json:"pauses"`
	// Source says where the numbers came from (simulator, fluid model,
	// a stub, a collector).
	Source string `json:"source,omitempty"`
}

// SwitchStats is one switch's telemetry.
type SwitchStats struct {
	Name  string      `json:"name"`
	Layer string      `json:"layer,omitempty"`
	Ports []PortStats `json:"ports"`
}

// PortStats is one egress port's telemetry. Throughput may be absent when
// only INT report counts are known: Reports, SampleRate and AvgPacket then
// give it by Eq. 16.
type PortStats struct {
	Port int `json:"port"`
	// Capacity is the port's line rate, bits/s (fixed normalisation).
	Capacity   float64 `json:"capacity_bps"`
	Throughput float64 `json:"throughput_bps"`
	// Queue statistics of the egress queue, bytes.
	QueueMean float64 `json:"queue_mean_bytes"`
	QueueP99  float64 `json:"queue_p99_bytes"`
	QueueMax  float64 `json:"queue_max_bytes"`
	// INT: reports received about this port, the sampling rate (reports
	// per packet) and the mean packet size in bytes.
	Reports    uint64  `json:"int_reports,omitempty"`
	SampleRate float64 `json:"int_sample_rate,omitempty"`
	AvgPacket  float64 `json:"int_avg_packet_bytes,omitempty"`
	Drops      uint64  `json:"drops,omitempty"`
	PausedNs   int64   `json:"paused_ns,omitempty"`
}

// Check refuses telemetry no measurement gives: a negative duration, and
// a rate, queue, sampling rate or packet size that is negative, NaN or
// infinite (a collector's bug or a truncated counter would otherwise steer
// the search: a negative queue scores above a perfect one).
func (t Telemetry) Check() error {
	bad := func(v float64) bool { return !(v >= 0) || math.IsInf(v, 0) }
	if t.Duration < 0 {
		return fmt.Errorf("telemetry: duration %d ns", t.Duration)
	}
	for _, sw := range t.Switches {
		for _, p := range sw.Ports {
			for _, v := range []float64{p.Capacity, p.Throughput, p.QueueMean, p.QueueP99, p.QueueMax, p.SampleRate, p.AvgPacket} {
				if bad(v) {
					return fmt.Errorf("telemetry: switch %s port %d: %+v: a figure that is no measurement", sw.Name, p.Port, p)
				}
			}
			if p.PausedNs < 0 {
				return fmt.Errorf("telemetry: switch %s port %d: paused %d ns", sw.Name, p.Port, p.PausedNs)
			}
		}
	}
	for _, f := range t.Flows {
		if bad(f.Throughput) || bad(f.Queue) {
			return fmt.Errorf("telemetry: flow %d: %+v: a figure that is no measurement", f.ID, f)
		}
	}
	return nil
}

// FlowStats is one flow's telemetry.
type FlowStats struct {
	ID         int     `json:"id"`
	Throughput float64 `json:"throughput_bps"`
	// Queue is the queue on the flow's receiver-side egress, bytes.
	Queue float64 `json:"queue_bytes"`
}

// INTThroughput is Eq. 16: throughput inferred from the number of
// telemetry reports in an interval, the average packet size S and the
// sampling rate (reports per packet): reports x S / rate, per second.
func INTThroughput(reports uint64, avgPacketBytes, sampleRate float64, durationNs int64) float64 {
	if !(sampleRate > 0) || durationNs <= 0 {
		return 0
	}
	return float64(reports) * avgPacketBytes * 8 / sampleRate / (float64(durationNs) / 1e9)
}

// PortThroughput is the port's throughput, from INT reports (Eq. 16) when
// no direct figure is given.
func (p PortStats) PortThroughput(durationNs int64) float64 {
	if p.Throughput == 0 && p.Reports > 0 {
		return INTThroughput(p.Reports, p.AvgPacket, p.SampleRate, durationNs)
	}
	return p.Throughput
}

// Agg aggregates telemetry over ports or switches (the paper's data
// aggregation before feedback).
type Agg string

// Aggregations.
const (
	AggMin Agg = "min"
	AggMax Agg = "max"
	AggSum Agg = "sum"
	AggP99 Agg = "p99"
	// AggMean is the mean (not in the paper's list; useful for queues).
	AggMean Agg = "mean"
)

// Apply aggregates vs (0 for none).
func (a Agg) Apply(vs []float64) (float64, error) {
	if len(vs) == 0 {
		return 0, nil
	}
	switch a {
	case AggMin:
		return slices.Min(vs), nil
	case AggMax:
		return slices.Max(vs), nil
	case AggSum, "":
		s := 0.0
		for _, v := range vs {
			s += v
		}
		return s, nil
	case AggMean:
		s := 0.0
		for _, v := range vs {
			s += v
		}
		return s / float64(len(vs)), nil
	case AggP99:
		return Percentile(vs, 99), nil
	}
	return 0, fmt.Errorf("aggregation %q: min, max, sum, mean or p99", a)
}

// Percentile is the p-th percentile (nearest rank) of vs.
func Percentile(vs []float64, p float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// Normalisation says what throughput and queue are measured against.
type Normalisation string

// Normalisations.
const (
	// History is the paper's: throughput over the best seen so far,
	// queue as the best (smallest) seen so far over the current.
	History Normalisation = "history"
	// Fixed divides throughput by line capacity and scores queue q as
	// QueueRef/(QueueRef+q): the same for every evaluation and method, so
	// scores of different runs compare.
	Fixed Normalisation = "fixed"
)

// Objective turns telemetry into the value the optimizers maximise.
type Objective struct {
	// Beta weighs throughput against queue (paper: 0.5).
	Beta float64 `json:"beta"`
	// Fairness selects Eq. 15 (per flow, divided by gamma-weighted
	// dispersion) instead of Eq. 14 (per switch).
	Fairness bool    `json:"fairness"`
	Gamma    float64 `json:"gamma"`
	// Throughput aggregates a switch's ports' throughput; Queue their
	// queues; QueueStat picks the queue figure (mean, p99 or max).
	Throughput Agg    `json:"throughput_agg"`
	Queue      Agg    `json:"queue_agg"`
	QueueStat  string `json:"queue_stat"`
	// Norm is History (Eq. 14 as written) or Fixed.
	Norm Normalisation `json:"norm"`
	// QueueRef is the fixed normalisation's queue scale, bytes;
	// QueueFloor keeps the history form finite when the best queue is
	// empty (Q_min/Q_now with both raised by it; one MMU cell).
	QueueRef   float64 `json:"queue_ref_bytes"`
	QueueFloor float64 `json:"queue_floor_bytes"`
}

// DefaultObjective is the paper's evaluation setting: beta 0.5, Eq. 14,
// throughput summed over a switch's ports and the deepest mean queue.
func DefaultObjective() Objective {
	return Objective{Beta: 0.5, Gamma: 1, Throughput: AggSum, Queue: AggMax, QueueStat: "mean", Norm: History,
		QueueRef: 64 << 10, QueueFloor: PaperCell}
}

// Validate checks the objective's parameters.
func (o *Objective) Validate() error {
	switch {
	case o.Beta < 0 || o.Beta > 1:
		return fmt.Errorf("objective: beta %g: in [0, 1]", o.Beta)
	case o.Fairness && !(o.Gamma > 0):
		return fmt.Errorf("objective: gamma %g: positive", o.Gamma)
	case o.Norm != History && o.Norm != Fixed:
		return fmt.Errorf("objective: normalisation %q: history or fixed", o.Norm)
	case o.Norm == Fixed && !(o.QueueRef > 0):
		return fmt.Errorf("objective: queue reference %g: positive", o.QueueRef)
	case o.QueueFloor < 0:
		return fmt.Errorf("objective: queue floor %g: not negative", o.QueueFloor)
	case o.QueueStat != "mean" && o.QueueStat != "p99" && o.QueueStat != "max":
		return fmt.Errorf("objective: queue statistic %q: mean, p99 or max", o.QueueStat)
	}
	for _, a := range []Agg{o.Throughput, o.Queue} {
		if _, err := a.Apply([]float64{1}); err != nil {
			return fmt.Errorf("objective: %w", err)
		}
	}
	return nil
}

// HistoryBest is what Eq. 14 and 15 normalise by: per switch (or flow) the
// best throughput and the smallest queue seen so far.
type HistoryBest struct {
	TMax map[string]float64 `json:"t_max"`
	QMin map[string]float64 `json:"q_min"`
}

// unit is one term of Eq. 14 or 15: a switch or a flow.
type unit struct {
	key      string
	t, q, tc float64 // throughput, queue, capacity
}

// units are the terms telemetry gives.
func (o *Objective) units(tel Telemetry) ([]unit, error) {
	if o.Fairness {
		if len(tel.Flows) == 0 {
			return nil, errors.New("objective: fairness needs per-flow telemetry, none came")
		}
		var us []unit
		total := 0.0
		for _, sw := range tel.Switches {
			for _, p := range sw.Ports {
				total = max(total, p.Capacity)
			}
		}
		for _, f := range tel.Flows {
			us = append(us, unit{key: fmt.Sprintf("flow%d", f.ID), t: f.Throughput, q: f.Queue, tc: total / float64(len(tel.Flows))})
		}
		return us, nil
	}
	if len(tel.Switches) == 0 {
		return nil, errors.New("objective: no switch telemetry")
	}
	us := make([]unit, 0, len(tel.Switches))
	for _, sw := range tel.Switches {
		ts, qs, cs := make([]float64, 0, len(sw.Ports)), make([]float64, 0, len(sw.Ports)), make([]float64, 0, len(sw.Ports))
		for _, p := range sw.Ports {
			ts = append(ts, p.PortThroughput(tel.Duration))
			cs = append(cs, p.Capacity)
			switch o.QueueStat {
			case "p99":
				qs = append(qs, p.QueueP99)
			case "max":
				qs = append(qs, p.QueueMax)
			default:
				qs = append(qs, p.QueueMean)
			}
		}
		t, err := o.Throughput.Apply(ts)
		if err != nil {
			return nil, err
		}
		c, _ := o.Throughput.Apply(cs)
		q, err := o.Queue.Apply(qs)
		if err != nil {
			return nil, err
		}
		us = append(us, unit{key: sw.Name, t: t, q: q, tc: c})
	}
	return us, nil
}

// Score is the objective of tel. With the history normalisation it
// updates h with tel's figures first (so the current round can be its own
// best); h may be nil for the fixed one.
//
// Eq. 14: sum over switches of beta T_now/T_max + (1-beta) Q_min/Q_now.
// Eq. 15: the same terms per flow, summed, over gamma times their
// dispersion. The paper divides by gamma times the sum of squared
// deviations of the flows' throughput, which is infinite for a perfectly
// fair allocation; we divide by 1 + gamma x (variance / mean^2), which is
// the expectation itself when all flows get the same and unit-free.
func (o *Objective) Score(tel Telemetry, h *HistoryBest) (float64, error) {
	us, err := o.units(tel)
	if err != nil {
		return 0, err
	}
	if o.Norm == History {
		if h == nil {
			return 0, errors.New("objective: the history normalisation needs a history")
		}
		if h.TMax == nil {
			h.TMax, h.QMin = map[string]float64{}, map[string]float64{}
		}
		for _, u := range us {
			if u.t > h.TMax[u.key] {
				h.TMax[u.key] = u.t
			}
			if q, ok := h.QMin[u.key]; !ok || u.q < q {
				h.QMin[u.key] = u.q
			}
		}
	}
	sum := 0.0
	for _, u := range us {
		var tn, qn float64
		if o.Norm == History {
			if tm := h.TMax[u.key]; tm > 0 {
				tn = u.t / tm
			}
			qn = (h.QMin[u.key] + o.QueueFloor) / math.Max(u.q+o.QueueFloor, 1e-9)
		} else {
			if u.tc > 0 {
				tn = math.Min(u.t/u.tc, 1)
			}
			qn = o.QueueRef / (o.QueueRef + u.q)
		}
		sum += o.Beta*tn + (1-o.Beta)*qn
	}
	if !o.Fairness {
		return finite(sum)
	}
	mean, v := 0.0, 0.0
	for _, u := range us {
		mean += u.t
	}
	mean /= float64(len(us))
	for _, u := range us {
		v += (u.t - mean) * (u.t - mean)
	}
	v /= float64(len(us))
	cv2 := 0.0
	if mean > 0 {
		cv2 = v / (mean * mean)
	}
	return finite(sum / float64(len(us)) / (1 + o.Gamma*cv2))
}

// finite refuses a score that figures past float64's range (sums of rates
// near 1e308, INT counts over a vanishing sampling rate) made NaN or
// infinite: the search cannot compare it.
func finite(f float64) (float64, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("objective: telemetry gives a score of %v", f)
	}
	return f, nil
}
