package mirror

import "fmt"

// WRR is a smooth weighted round-robin scheduler (the nginx algorithm):
// over every cycle of sum(weights) picks, target i is chosen weights[i]
// times, interleaved as evenly as the weights allow, so consecutive mirrored
// copies spread over the dumpers instead of arriving at one in runs. It is
// the per-packet load balancer of Lumina's Figure 4.
type WRR struct {
	weights []int
	current []int
	total   int
	// sched is one cycle of picks, replayed by Next instead of rerunning
	// the algorithm per pick: a cycle ends with every current weight back
	// at zero (each target gained total*weight and gave back weight*total),
	// so the picks repeat exactly. Nil when the cycle is too long to keep.
	sched []uint16
	pos   int
}

// maxSched bounds the precomputed cycle (sum of weights).
const maxSched = 1 << 12

// NewWRR returns a scheduler over len(weights) targets; every weight must
// be positive.
func NewWRR(weights []int) (*WRR, error) {
	if len(weights) == 0 {
		return nil, fmt.Errorf("mirror: weighted round-robin over no targets")
	}
	w := &WRR{weights: append([]int(nil), weights...), current: make([]int, len(weights))}
	for i, x := range weights {
		if x <= 0 {
			return nil, fmt.Errorf("mirror: weight %d of target %d: weights are positive", x, i)
		}
		w.total += x
	}
	if w.total <= maxSched {
		w.sched = make([]uint16, w.total)
		for i := range w.sched {
			w.sched[i] = uint16(w.next())
		}
		w.Reset()
	}
	return w, nil
}

// Next returns the next target.
func (w *WRR) Next() int {
	if w.sched != nil {
		t := w.sched[w.pos]
		if w.pos++; w.pos == len(w.sched) {
			w.pos = 0
		}
		return int(t)
	}
	return w.next()
}

func (w *WRR) next() int {
	best := 0
	for i := range w.current {
		w.current[i] += w.weights[i]
		if w.current[i] > w.current[best] {
			best = i
		}
	}
	w.current[best] -= w.total
	return best
}

// Reset restarts the cycle.
func (w *WRR) Reset() {
	clear(w.current)
	w.pos = 0
}
