package lumina

import (
	"context"
	"testing"

	"github.com/rdma-appliance/appliance/translator/inject"
)

// TestBalance runs a few rounds of the Figure 7b experiment: per-packet
// round-robin keeps every trace whole, mirroring by flow loses copies.
func TestBalance(t *testing.T) {
	if testing.Short() {
		t.Skip("paced traffic for about two seconds")
	}
	res, err := RunBalance(context.Background(), BalanceConfig{Rounds: 3, Dir: t.TempDir(),
		Progress: func(b inject.Balance, r int, ok bool) { t.Logf("%v round %d: %v", b, r, ok) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + res.Table())
	if res.TrafficFails != 0 {
		t.Fatalf("%d rounds of traffic failed", res.TrafficFails)
	}
	wrr, flow := res.Rows[0], res.Rows[1]
	if wrr.FailedUnstarved() != 0 {
		t.Fatalf("per-packet WRR lost copies with every dumper polling: %+v", wrr)
	}
	if wrr.Passed == 0 {
		t.Skipf("every WRR round starved a dumper: the machine is too busy to tell the balancers apart\n%s", res.Table())
	}
	if flow.Passed == flow.Rounds || flow.Lost == 0 {
		t.Fatalf("flow-hash mirroring lost nothing: %+v", flow)
	}
}
