package hawkeyeeval

import (
	"context"
	"testing"
)

// BenchmarkTrace is the cost of one trace of the evaluation (the trace,
// its counterfactual, every detection read and diagnosed by every
// method) on each fat-tree: what sizes a full evaluation (six types times
// the traces) and its shards. The full evaluation itself is
// 'appliance hawkeye eval', not a benchmark.
func BenchmarkTrace(b *testing.B) {
	for _, tp := range []Topology{{4}, {8}} {
		b.Run(tp.String(), func(b *testing.B) {
			b.ReportAllocs()
			detections := 0
			for i := range b.N {
				a := Anomalies[i%len(Anomalies)]
				tr, err := Generate(tp, a, uint64(i/len(Anomalies)+1))
				if err != nil {
					b.Fatal(err)
				}
				res, err := Run(context.Background(), tr, RunOptions{Params: DefaultParams(), Methods: Methods})
				if err != nil {
					b.Fatal(err)
				}
				detections += len(res.Incidents)
			}
			b.ReportMetric(float64(detections)/float64(b.N), "detections/trace")
		})
	}
}
