package hostmesh

import (
	"context"
	"testing"
)

func TestEvalOnePerType(t *testing.T) {
	for _, ft := range FaultTypes {
		r, err := RunOne(context.Background(), ft, 11)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: truth %q named %q correct %v alerts %q stats %+v", ft, r.Truth, r.Named, r.Correct, r.Alerts, r.Stats)
		if !r.Correct {
			t.Errorf("%s missed", ft)
		}
	}
}
