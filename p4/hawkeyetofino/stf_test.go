package hawkeyetofino

import (
	"encoding/binary"
	"testing"

	"github.com/rdma-appliance/appliance/p4/stf"
)

// TestSTF: telemetry.p4's tests against bench/hawkeyesim. The twin is the
// switch program inside the fabric simulator: it sees packets through the
// simulator's hooks (enqueue, pause, polling probes) with the simulator's
// routing, topology and clock, and keeps its state as epochs in memory;
// it neither routes nor rewrites frames. No test of this set maps onto it:
// the tests route IPv4 (most of them), drop what is not IPv4, consume
// pause frames and drop polling packets (P4Testgen finds no path that
// sends one on: the event stamps hinge on the switch clock, which it does
// not know). The replay keeps the tests loadable and says, per test,
// why none runs; what hawkeyesim does is checked against the paper in
// its own package.
func TestSTF(t *testing.T) {
	rep := stf.Replay(t, "testdata/p4testgen/telemetry", telemetryModel, stf.Known{})
	if rep.Passed != 0 {
		t.Errorf("%d telemetry tests ran: update the comment", rep.Passed)
	}
}

func telemetryModel(tc *stf.Test) ([]stf.Output, string, error) {
	if len(tc.In) < 14 {
		return nil, "a frame shorter than Ethernet", nil
	}
	switch binary.BigEndian.Uint16(tc.In[12:14]) {
	case 0x0800:
		return nil, "IPv4 forwarding: the fabric simulator routes, hawkeyesim only counts", nil
	case 0x6888:
		return nil, "a polling packet: hawkeyesim takes polls as simulator probes naming a simulated flow, routed by the simulator", nil
	case 0x8808:
		return nil, "a pause frame: the simulator's links take PFC frames before any switch program", nil
	}
	return nil, "neither IPv4, polling nor PFC: dropped by the switch; the simulator carries no such frames", nil
}
