package hawkeyeagent

import (
	"testing"

	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
)

// TestDetector: the first sample is the base, smaller ones lower it,
// one over the threshold polls once per interval, event ids count up.
func TestDetector(t *testing.T) {
	d := NewDetector(300, 1000, 250)
	k := hawkeyewire.FlowKey{Src: 0x0a000001, Dst: 0x0a000009, Proto: 17, Sport: 0xc123, Dport: 4791}
	k2 := hawkeyewire.FlowKey{Src: 0xc0a80102, Dst: 0xc0a80304, Proto: 17, Sport: 0xc000, Dport: 4791}
	steps := []struct {
		k       hawkeyewire.FlowKey
		rtt, at int64
		poll    bool
	}{
		{k, 10, 0, false},   // base 10
		{k, 30, 1, false},   // exactly 300%: not over
		{k, 8, 2, false},    // base 8
		{k, 25, 3, true},    // 312%
		{k, 90, 500, false}, // within the interval
		{k2, 5, 600, false},
		{k2, 16, 700, true}, // another flow polls at once
		{k, 90, 1003, true},
	}
	var evs []uint8
	for i, s := range steps {
		p, ok := d.Observe(s.k, s.rtt, s.at)
		if ok != s.poll {
			t.Fatalf("step %d: poll %v", i, ok)
		}
		if ok {
			if p.Type != hawkeyewire.TypeFlow || p.Victim != s.k {
				t.Fatalf("step %d: %+v", i, p)
			}
			evs = append(evs, p.Event)
		}
	}
	if len(evs) != 3 || evs[0] != 250 || evs[1] != 251 || evs[2] != 252 {
		t.Fatalf("events %v", evs)
	}
	d.SetBase(k2, 100)
	if _, ok := d.Observe(k2, 50, 5000); ok || d.Base(k2) != 100 {
		t.Fatal("a fixed base moved")
	}
}
