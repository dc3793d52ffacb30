package hostmesh

import (
	"context"
	"testing"

	"github.com/rdma-appliance/appliance/collector/hostmeshanalyzer"
)

// TestEvalMisconfigurations: the two misconfigurations act on frames in
// the simulator (the ACL denies the RNIC's RDMA frames, the switch short
// of headroom drops frames at admission, which a correct fabric never
// does) from when they are placed, and the runs are scored against the
// element misconfigured.
func TestEvalMisconfigurations(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	acl, err := RunOne(context.Background(), 4, FaultACL, 3)
	if err != nil {
		t.Fatal(err)
	}
	if acl.Stats.Faults.ACL == 0 || acl.Truth.Kind != hostmeshanalyzer.KindRNIC || acl.FaultAt == 0 {
		t.Fatalf("acl: %s, %+v", acl.Detail, acl.Stats.Faults)
	}
	hr, err := RunOne(context.Background(), 4, FaultHeadroom, 3)
	if err != nil {
		t.Fatal(err)
	}
	if hr.Stats.Drops == 0 || hr.Truth.Kind != hostmeshanalyzer.KindSwitch {
		t.Fatalf("headroom: %s, %d drops", hr.Detail, hr.Stats.Drops)
	}
	t.Logf("acl %s: top %s, %d false alerts; headroom %s: top %s, %d false alerts", acl.Detail, acl.Top, acl.FalseAlerts, hr.Detail, hr.Top, hr.FalseAlerts)
}
