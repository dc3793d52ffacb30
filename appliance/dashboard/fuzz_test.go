package dashboard

import (
	"strings"
	"testing"
)

// FuzzParseCounters: a service's /metrics (its word, or whatever answers
// at a target's address) is read without a panic; every counter read is a
// sample line's series of a family typed counter, so there are no more
// counters than samples, and none of the Go runtime's or the process's.
func FuzzParseCounters(f *testing.F) {
	f.Add("# HELP a_total Things.\n# TYPE a_total counter\na_total 5\n# TYPE b counter\nb{port=\"ring:x y\",q=\"a}\\\"b\"} 7 1700000000000\nb_total{x=\"1\"} 3\n# TYPE g gauge\ng 9\nbroken{x=\"1\" 4\n")
	f.Add("# TYPE x counter\nx{a=\"\\\\\"} NaN\nx +Inf\nx{} -1e308\n")
	f.Add("# TYPE go_gc counter\ngo_gc 1\n# TYPE process_x counter\nprocess_x 2\n")
	f.Fuzz(func(t *testing.T, text string) {
		c, n := parseCounters(text)
		if len(c) > n {
			t.Fatalf("%d counters of %d samples", len(c), n)
		}
		for series := range c {
			if !strings.Contains(text, series) {
				t.Fatalf("series %q is not in the text", series)
			}
			if name, _, _ := strings.Cut(series, "{"); strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
				t.Fatalf("the runtime's %q shown", series)
			}
		}
	})
}
