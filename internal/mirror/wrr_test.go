package mirror

import "testing"

// TestWRRSchedule: the precomputed cycle replays exactly what the smooth
// weighted round-robin picks, across cycles and after a Reset mid-cycle.
func TestWRRSchedule(t *testing.T) {
	for _, ws := range [][]int{{1}, {1, 1}, {1, 1, 2}, {3, 5, 7}, {100, 1}, {64, 64, 64, 1}, {1000, 999, 2000, 97}} {
		w, err := NewWRR(ws)
		if err != nil {
			t.Fatal(err)
		}
		if w.sched == nil {
			t.Fatalf("%v: no schedule", ws)
		}
		ref, _ := NewWRR(ws)
		ref.sched = nil
		for i := range 3*w.total + 5 {
			if i == w.total+w.total/2 {
				w.Reset()
				ref.Reset()
			}
			if a, b := w.Next(), ref.Next(); a != b {
				t.Fatalf("%v: pick %d: schedule %d, algorithm %d", ws, i, a, b)
			}
		}
	}
	w, _ := NewWRR([]int{maxSched, 1})
	if w.sched != nil {
		t.Fatal("cycle longer than maxSched precomputed")
	}
}
