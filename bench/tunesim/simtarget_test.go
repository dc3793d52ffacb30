package tunesim

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/tuning"
)

func TestSimTarget(t *testing.T) {
	st, err := NewSimTargetNamed("incast-2")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Telemetry) != 1 || st.Telemetry[0] != "leaf1" {
		t.Fatalf("watching %v, want the receiver's leaf1", st.Telemetry)
	}
	s := tuning.PaperSpace(st.Sc.Scopes...)
	ctx := context.Background()
	lo, _ := s.Config(tuning.Point{0, 0, 0, 0})
	hi, _ := s.Config(tuning.Point{10, 9, 5, 4})
	var tels [2]tuning.Telemetry
	for i, c := range []tuning.Config{lo, hi} {
		if err := st.Apply(ctx, c); err != nil {
			t.Fatal(err)
		}
		if tels[i], err = st.Measure(ctx, time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	p0, p1 := tels[0].Switches[0].Ports, tels[1].Switches[0].Ports
	if len(p0) != 1 || p0[0].Capacity != 25e9 || len(tels[0].Flows) != 2 {
		t.Fatalf("telemetry: ports %+v, flows %+v", p0, tels[0].Flows)
	}
	if !(p1[0].QueueMean > p0[0].QueueMean) {
		t.Errorf("highest watermarks queue %.0f B, lowest %.0f B", p1[0].QueueMean, p0[0].QueueMean)
	}
	// Eq. 16 from INT report counts gives the same throughput within the
	// sampling's rounding.
	st.INTSampleRate = 1.0 / 8
	st.Apply(ctx, hi)
	ti, err := st.Measure(ctx, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	pi := ti.Switches[0].Ports[0]
	if pi.Throughput != 0 || pi.Reports == 0 {
		t.Fatalf("INT port %+v", pi)
	}
	got, want := pi.PortThroughput(ti.Duration), p1[0].Throughput
	if math.Abs(got-want)/want > 0.02 {
		t.Errorf("INT throughput %.3g, counted %.3g", got, want)
	}
	// A layer the scenario lacks is an unreachable switch; ports cannot
	// be simulated.
	bad := tuning.Uniform(tuning.PaperCell, lo.Scopes["leaf"], "core")
	if err := st.Apply(ctx, bad); !errors.Is(err, tuning.ErrUnreachable) {
		t.Errorf("unknown layer: %v", err)
	}
	if err := st.Apply(ctx, tuning.Uniform(tuning.PaperCell, lo.Scopes["leaf"], "port:leaf1/3")); err == nil {
		t.Error("a port scope was simulated")
	}
	// A switch scope configures that switch only.
	if err := st.Apply(ctx, tuning.Uniform(tuning.PaperCell, hi.Scopes["leaf"], "switch:leaf1")); err != nil {
		t.Fatal(err)
	}
	ts, err := st.Measure(ctx, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if q := ts.Switches[0].Ports[0].QueueMean; math.Abs(q-p1[0].QueueMean) > 0.2*p1[0].QueueMean {
		t.Errorf("leaf1 alone at the high watermarks queues %.0f B, the whole layer %.0f B", q, p1[0].QueueMean)
	}
}
