package tuning

import (
	"encoding/json"
	"testing"
)

// FuzzRestore: a saved run's optimizer state (a file a resumed run reads)
// is restored or refused, never a panic; a restored optimizer goes on
// proposing points inside the space, and its best, if any, is one.
func FuzzRestore(f *testing.F) {
	s := PaperSpace("leaf")
	for _, name := range []string{"anneal", "grid", "random", "hillclimb"} {
		o, err := NewOptimizer(name, &s, 1, PaperAnneal(), nil)
		if err != nil {
			f.Fatal(err)
		}
		for i := range 5 {
			x, ok := o.Next()
			if !ok {
				break
			}
			o.Tell(float64(i%3) - float64(len(x)))
		}
		st, err := o.State()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(name, []byte(st))
	}
	f.Add("grid", []byte(`{"next":-1,"total":0}`))
	f.Fuzz(func(t *testing.T, name string, state []byte) {
		o, err := NewOptimizer(name, &s, 1, PaperAnneal(), nil)
		if err != nil || !json.Valid(state) {
			return
		}
		if err := o.Restore(state); err != nil {
			return
		}
		for i := range 20 {
			if x, _, ok := o.Best(); ok && !s.Inside(x) {
				t.Fatalf("%s: best %v outside the space", name, x)
			}
			x, ok := o.Next()
			if !ok {
				return
			}
			if !s.Inside(x) {
				t.Fatalf("%s: proposes %v outside the space", name, x)
			}
			o.Tell(float64(i % 4))
		}
	})
}

// TestRestoreRefusesForeignPoints: a state whose best or next point is
// not of the space (an empty best the fuzzer found, which Best handed on
// to the report) is refused, not resumed.
func TestRestoreRefusesForeignPoints(t *testing.T) {
	s := PaperSpace("leaf")
	g := NewGrid(&s)
	total := g.st.Total
	for name, st := range map[string]string{
		"grid empty best":  `{"total":` + itoa(total) + `,"best_x":[]}`,
		"grid next before": `{"total":` + itoa(total) + `,"next":-1}`,
		"grid next after":  `{"total":` + itoa(total) + `,"next":` + itoa(total+1) + `}`,
	} {
		if err := NewGrid(&s).Restore(json.RawMessage(st)); err == nil {
			t.Errorf("%s: restored", name)
		}
	}
	h := NewHillClimb(&s, 1, nil)
	good, _ := h.State()
	var m map[string]any
	_ = json.Unmarshal(good, &m)
	m["best_x"] = []int{999}
	bad, _ := json.Marshal(m)
	if err := NewHillClimb(&s, 1, nil).Restore(bad); err == nil {
		t.Error("hill climb: a best outside the space restored")
	}
}
