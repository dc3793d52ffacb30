package fabric

import (
	"context"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/bench/fabric/workload"
)

// TestLiveReconfigure: a running 4-to-1 incast keeps running while the
// switch's ECN thresholds change in place; marking follows the new
// thresholds from the change on (none above every queue, then plenty at
// Kmin 0), flows added mid-run complete, and what a push cannot change on
// a live MMU is refused.
func TestLiveReconfigure(t *testing.T) {
	g, r := star(t, 5, gbps100, 1000)
	cfg := DefaultConfig()
	dst := host(g, "h4")
	var flows []workload.Flow
	for i := range 4 {
		flows = append(flows, workload.Flow{ID: i, Src: host(g, "h0") + i, Dst: dst, Size: 64 << 20})
	}
	s, err := New(g, r, flows, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sw, _ := g.Node("sw")
	out := 4 // h4's port on the switch
	marks := func() uint64 {
		st, err := s.PortCounters(sw, out)
		if err != nil {
			t.Fatal(err)
		}
		return st.ECNMarks
	}
	ctx := context.Background()
	// No marking: thresholds above the whole buffer.
	c, err := s.SwitchConfig(sw)
	if err != nil {
		t.Fatal(err)
	}
	c.Kmin, c.Kmax = c.Buffer, c.Buffer
	if err := s.SetSwitchConfig(sw, c); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RunFor(ctx, 500_000); err != nil {
		t.Fatal(err)
	}
	m0 := marks()
	if m0 != 0 {
		t.Fatalf("%d marks with Kmin above the buffer", m0)
	}
	c.Kmin, c.Kmax, c.Pmax = 0, 1<<10, 1
	if err := s.SetSwitchConfig(sw, c); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.SwitchConfig(sw); got.Kmin != 0 || got.Kmax != 1<<10 {
		t.Fatalf("running config %+v", got)
	}
	late := []workload.Flow{{ID: 100, Src: host(g, "h0"), Dst: host(g, "h1"), Size: 1 << 20, Start: 0}}
	if err := s.AddFlows(late); err != nil {
		t.Fatal(err)
	}
	res, err := s.RunFor(ctx, 500_000)
	if err != nil {
		t.Fatal(err)
	}
	if m := marks(); m < 100 {
		t.Fatalf("%d marks in the 0.5 ms after Kmin went to 0", m)
	}
	var found bool
	for _, f := range res.Flows {
		if f.ID == 100 {
			found = true
			if !f.Done || f.Start != 500_000 {
				t.Fatalf("late flow %+v", f)
			}
		}
	}
	if !found {
		t.Fatal("the flow added mid-run never started")
	}
	bad := c
	bad.Buffer /= 2
	if err := s.SetSwitchConfig(sw, bad); err == nil || !strings.Contains(err.Error(), "cannot change while running") {
		t.Fatalf("buffer change: %v", err)
	}
	bad = c
	bad.Headroom = c.Buffer
	if err := s.SetSwitchConfig(sw, bad); err == nil || !strings.Contains(err.Error(), "no shared buffer") {
		t.Fatalf("headroom over the buffer: %v", err)
	}
	if err := s.SetSwitchConfig(host(g, "h0"), c); err == nil {
		t.Fatal("a host took a switch configuration")
	}
	if err := s.AddFlows([]workload.Flow{{ID: 7, Src: dst, Dst: dst, Size: 1}}); err == nil {
		t.Fatal("a flow to itself was added")
	}
}

// TestDoneHook: the Done hook sees every flow once, at the instant its
// FCT ends, and a flow posted from it (a closed loop's next message)
// runs and completes.
func TestDoneHook(t *testing.T) {
	g, r := star(t, 3, gbps100, 1000)
	dst := host(g, "h2")
	flows := []workload.Flow{{ID: 0, Src: host(g, "h0"), Dst: dst, Size: 64 << 10}, {ID: 1, Src: host(g, "h1"), Dst: dst, Size: 1 << 20}}
	s, err := New(g, r, flows, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	at := map[int32]int64{}
	s.SetHooks(&Hooks{Done: func(f int32) {
		if _, twice := at[f]; twice {
			t.Fatalf("flow %d done twice", f)
		}
		at[f] = s.Now()
		if f == 0 {
			s.At(s.Now(), func(s *Sim) {
				if err := s.AddFlows([]workload.Flow{{ID: 2, Src: host(g, "h0"), Dst: dst, Size: 64 << 10, Start: s.Now()}}); err != nil {
					t.Error(err)
				}
			})
		}
	}})
	res, err := s.Run(context.Background(), 1e9)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Flows) != 3 || len(at) != 3 {
		t.Fatalf("%d flows, %d seen done", len(res.Flows), len(at))
	}
	for i, f := range res.Flows {
		if !f.Done || at[int32(i)] != f.Start+f.FCT {
			t.Fatalf("flow %+v: hook saw it done at %d", f, at[int32(i)])
		}
	}
	if res.Flows[2].Start != at[0] {
		t.Fatalf("the flow posted on flow 0's completion started at %d, not %d", res.Flows[2].Start, at[0])
	}
}
