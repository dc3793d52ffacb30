package hostmesh

import (
	"context"
	"testing"
)

// TestEvalOnePerType runs one randomized evaluation run of every fault
// type (the full evaluation is `appliance mesh eval`).
func TestEvalOnePerType(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	for _, ft := range FaultTypes {
		r, err := RunOne(context.Background(), ft, 11)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: truth %q named %q alerts %q", ft, r.Truth, r.Named, r.Alerts)
		if !r.Correct {
			t.Errorf("%s missed", ft)
		}
	}
}
