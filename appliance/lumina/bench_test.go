package lumina

import (
	"context"
	"testing"
	"time"
)

// BenchmarkBalance runs the per-packet load-balancing experiment of the
// Lumina paper (Figure 7b): 100 rounds each of per-packet WRR and of
// flow-hash mirroring onto rate-limited dumpers, and prints the table.
// The paper measured 100% integrity with per-packet balancing and 23%
// without; here flow hashing fails whenever two connections share a
// dumper.
func BenchmarkBalance(b *testing.B) {
	for i := 0; i < b.N; i++ {
		start := time.Now()
		res, err := RunBalance(context.Background(), BalanceConfig{Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		b.Log("\n" + res.Table())
		b.ReportMetric(100*res.Rows[0].PassRate(), "wrr-integrity-%")
		b.ReportMetric(100*res.Rows[1].PassRate(), "flowhash-integrity-%")
		b.ReportMetric(float64(2*res.Config.Rounds)/time.Since(start).Seconds(), "rounds/s")
	}
}
