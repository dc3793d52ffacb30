package fabric

import (
	"context"
	"strings"
	"testing"
)

// TestScenarioFile: the example scenario builds and runs, its incast
// draws pauses and CNPs, and its flows finish.
func TestScenarioFile(t *testing.T) {
	sc, err := LoadScenario("testdata/incast.yml")
	if err != nil {
		t.Fatal(err)
	}
	s, dur, err := sc.Build()
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Run(context.Background(), dur)
	if err != nil {
		t.Fatal(err)
	}
	done := 0
	for _, f := range res.Flows {
		if f.Done {
			done++
		}
	}
	if len(res.Flows) < 32 || done == 0 || res.Stats.CNPs == 0 || res.Stats.Drops != 0 {
		t.Fatalf("%d flows, %d done, stats %+v", len(res.Flows), done, res.Stats)
	}
	t.Logf("%d flows, %d done, p99 FCT %d ns, stats %+v", len(res.Flows), done, res.FCTPercentile(99), res.Stats)
}

// TestScenarioErrors: unknown nodes, disconnected topologies and
// impossible parameters are refused before the run, naming the line.
func TestScenarioErrors(t *testing.T) {
	base := "duration: 1ms\ntopology: {kind: leaf-spine, leaves: 2, spines: 1, hosts-per-leaf: 2}\n"
	for _, tc := range []struct{ yml, want string }{
		{base + "workload:\n  - {kind: incast, senders: [h1], dst: nobody, size: 1KB}\n", "nobody"},
		{base + "workload:\n  - {kind: gravity}\n", "s.yml:4: workload[0].kind"},
		{base + "switch: {alpha: -1}\n", "s.yml:3: switch"},
		{base + "switch: {buffer: 10KB}\n", "shared buffer"},
		{"duration: 0s\ntopology: {kind: fat-tree, k: 4}\n", "s.yml:1: duration"},
		{"duration: 1ms\ntopology:\n  kind: explicit\n  nodes:\n    - {name: h0, kind: host}\n    - {name: s0, kind: switch}\n    - {name: h1, kind: host}\n    - {name: s1, kind: switch}\n  links:\n    - {a: h0, b: s0}\n    - {a: h1, b: s1}\n", "reach"},
		{base + "faults:\n  - {host: h0, interval: 0s}\n", "faults[0].interval"},
		{base + "workload:\n  - {kind: poisson, load: 2}\n", "workload[0].load"},
	} {
		sc, err := DecodeScenario("s.yml", []byte(tc.yml))
		if err == nil {
			_, _, err = sc.Build()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.yml, err, tc.want)
		}
	}
}
