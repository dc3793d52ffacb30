package hawkeyeanalyzer

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
)

// benchTelemetry is an incident on a chain of 10 switches of 10 ports
// (100 egress ports) with 10 000 flows: S_i.P0 leads to S_(i+1).P1, the
// other ports to hosts. An incast into S9.P0 pauses S8.P0, which pauses
// S7.P0, and so on up to S0.P0, where the victim waits.
func benchTelemetry() *hawkeyewire.Telemetry {
	const switches, ports, flows = 10, 10, 10000
	s := newScenario()
	name := func(i int) string { return fmt.Sprintf("S%d", i) }
	for i := 0; i < switches; i++ {
		for p := 0; p < ports; p++ {
			switch {
			case p == 0 && i+1 < switches:
				s.link(name(i), 0, name(i+1), 1)
			case p == 1 && i > 0:
			default:
				s.host(name(i), p, fmt.Sprintf("h%d_%d", i, p))
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	hosts := make([]uint32, 0, len(s.hosts))
	for _, ip := range s.hosts {
		hosts = append(hosts, ip)
	}
	// In address order, so that the incident is the same on every run.
	slices.Sort(hosts)
	for j := 0; j < flows; j++ {
		i := rng.IntN(switches)
		out := 0
		if rng.IntN(10) >= 4 {
			out = 1 + rng.IntN(ports-1)
		}
		in := 2 + rng.IntN(ports-2)
		if i > 0 && rng.IntN(2) == 0 {
			in = 1
		}
		if in == out {
			in = 2 + (in-1)%(ports-2)
		}
		key := hawkeyewire.FlowKey{Src: hosts[rng.IntN(len(hosts))], Dst: hosts[rng.IntN(len(hosts))],
			Sport: uint16(j), Dport: 4791, Proto: 17}
		pkts := uint32(10 + rng.IntN(990))
		var paused uint32
		q := uint64(100 + rng.IntN(1900))
		switch {
		case out == 0 && i+1 < switches:
			paused = pkts / 2
			q = uint64(50000 + rng.IntN(30000))
		case out == 0:
			q = uint64(60000 + rng.IntN(10000))
			if j%50 == 0 { // the bursts
				pkts, q = 5000, 95000
			}
		}
		s.hop(name(i), key, in, out, pkts, paused, q)
		if j == 0 {
			s.hop(name(0), key, 2, 0, 500, 400, 70000)
			s.victim = key
		}
	}
	for i := 0; i+1 < switches; i++ {
		s.pause(name(i), 0, 100)
	}
	return s.telemetry()
}

func TestBenchTelemetry(t *testing.T) {
	tel := benchTelemetry()
	g := Build(tel, Options{})
	if len(g.Ports) != 100 || len(g.Flows) != 10000 {
		t.Fatalf("%d ports, %d flows", len(g.Ports), len(g.Flows))
	}
	d := g.Diagnose()
	if d.Type != Incast || d.Initiator != "S9:0" || len(d.Path) != 10 || len(d.RootCauses) == 0 {
		t.Fatalf("type %s initiator %s path %v root causes %d problems %v", d.Type, d.Initiator, d.Path, len(d.RootCauses), d.Problems)
	}
}

// BenchmarkDiagnose is one incident's whole analysis: the provenance graph
// of 100 ports and 10 000 flows built from the telemetry, then diagnosed.
func BenchmarkDiagnose(b *testing.B) {
	tel := benchTelemetry()
	b.ReportAllocs()
	start := time.Now()
	n := 0
	for b.Loop() {
		if d := Diagnose(tel, Options{}); d.Type != Incast {
			b.Fatalf("type %s", d.Type)
		}
		n++
	}
	el := time.Since(start).Seconds()
	b.ReportMetric(float64(n)/el, "diagnoses/s")
	b.ReportMetric(float64(n)*10000/el, "flows/s")
}
