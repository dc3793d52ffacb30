package lumina

import (
	"context"
	"reflect"
	"testing"

	"github.com/rdma-appliance/appliance/translator/inject"
)

// TestBalance runs the Figure 7b experiment on the twin with dumpers of a
// fixed cost (40 ns a copy, 25 M copies/s, below a 400 Gbit/s port's
// 45 M frames/s and above a quarter of both ports'): per-port mirroring
// fills the data dumper's ring over four 1 MB messages and the traces
// have gaps, exactly the copies its NIC discarded; round-robin over the
// pool of four keeps every trace whole; 100 KB messages fit the ring
// either way. Two runs give the same table.
func TestBalance(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates about 100,000 frames")
	}
	cfg := BalanceConfig{Rounds: 2, Messages: 4, Sizes: []int{100 << 10, 1 << 20}, SpeedsGbps: []int{400},
		Cost: FixedDumperCost(40), Dir: t.TempDir()}
	res, err := RunBalance(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + res.Table())
	if res.TrafficFails != 0 {
		t.Fatalf("%d rounds of traffic failed", res.TrafficFails)
	}
	for _, size := range cfg.Sizes {
		wrr := res.Row(inject.BalanceWRR, 400, size)
		port := res.Row(inject.BalanceIngressPort, 400, size)
		if wrr == nil || port == nil {
			t.Fatalf("rows missing for %d bytes: %+v", size, res.Rows)
		}
		if wrr.Passed != wrr.Rounds || wrr.Lost != 0 || wrr.Discarded != 0 {
			t.Errorf("round-robin, %d bytes: %+v", size, *wrr)
		}
		if size == 100<<10 && (port.Passed != port.Rounds || port.Lost != 0) {
			t.Errorf("per-port, 100 KB messages fit the ring: %+v", *port)
		}
		if size == 1<<20 && (port.Passed != 0 || port.Lost == 0 || port.Lost != port.Discarded) {
			t.Errorf("per-port, 1 MB messages: want every round to lose exactly the discarded copies: %+v", *port)
		}
	}
	if w, p := res.Total(inject.BalanceWRR, 400), res.Total(inject.BalanceIngressPort, 0); w.Rounds != 4 || w.Passed != 4 ||
		p.Rounds != 4 || p.Passed != 2 || p.Lost != res.Row(inject.BalanceIngressPort, 400, 1<<20).Lost {
		t.Errorf("totals: round-robin %+v, per-port %+v", w, p)
	}
	again, err := RunBalance(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res.Rows, again.Rows) {
		t.Fatalf("two runs differ:\n%s\n%s", res.Table(), again.Table())
	}
}

// TestMeasureDumperCost: the measurement runs the dumper over real bursts
// and returns sorted, positive samples, one per measured burst.
func TestMeasureDumperCost(t *testing.T) {
	c, err := MeasureDumperCost(200, 32, 1100)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.PerCopy) != 200 || c.Median <= 0 || c.P99 < c.Median || c.Rate() <= 0 {
		t.Fatalf("%d samples, median %v, p99 %v", len(c.PerCopy), c.Median, c.P99)
	}
	for i := 1; i < len(c.PerCopy); i++ {
		if c.PerCopy[i] < c.PerCopy[i-1] {
			t.Fatal("samples not sorted")
		}
	}
	if _, err := MeasureDumperCost(0, 32, 1100); err == nil {
		t.Fatal("zero bursts accepted")
	}
}
