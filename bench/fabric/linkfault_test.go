package fabric

import (
	"testing"

	"github.com/rdma-appliance/appliance/bench/fabric/workload"
	"github.com/rdma-appliance/appliance/internal/topo"
)

// probeRig sends one probe every 10 us from m0n0 to m0n1 on a 2-machine,
// 2-rail cluster with one spine and counts what arrives, with the RNIC
// timestamps of the last.
type probeRig struct {
	s             *Sim
	got           int
	sent, rx, dlv int64
}

func newProbeRig(t *testing.T, cfg Config) *probeRig {
	t.Helper()
	g, err := topo.RailOptimized(2, 2, 1, gbps100, gbps100, 1000)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(g, g.ShortestPaths(), nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &probeRig{s: s}
	s.SetHooks(&Hooks{Deliver: func(h int, p *Packet) {
		r.got++
		r.sent, r.rx, r.dlv = p.Sent, p.Echo, s.Now()
	}})
	src, _ := g.Node("m0n0")
	dst, _ := g.Node("m0n1")
	for k := range 100 {
		s.At(int64(k)*10_000, func(s *Sim) {
			if err := s.Send(src, 0, Packet{Kind: KindProbe, Prio: PrioData, Size: 120, Src: int32(src), Dst: int32(dst), Hash: uint32(k)}); err != nil {
				t.Error(err)
			}
		})
	}
	return r
}

func TestLinkFaults(t *testing.T) {
	// Healthy: every probe arrives; four 1 us links of 120-byte frames.
	r := newProbeRig(t, DefaultConfig())
	run(t, r.s, 2e6)
	if r.got != 100 || r.rx-r.sent < 4000 || r.rx-r.sent > 5000 || r.dlv != r.rx {
		t.Fatalf("healthy: %d probes, sent %d rx %d deliver %d", r.got, r.sent, r.rx, r.dlv)
	}
	// A flap of the spine link for the middle 300 us loses 30 probes.
	r = newProbeRig(t, DefaultConfig())
	if err := r.s.AddLinkFault(LinkFault{A: "rail0", B: "spine0", Start: 300_000, End: 600_000}); err != nil {
		t.Fatal(err)
	}
	run(t, r.s, 2e6)
	if r.got != 70 || r.s.FaultStats().Down != 30 {
		t.Fatalf("flap: %d probes, %+v", r.got, r.s.FaultStats())
	}
	// One way only: the other direction is healthy.
	r = newProbeRig(t, DefaultConfig())
	if err := r.s.AddLinkFault(LinkFault{A: "spine0", B: "rail0", OneWay: true}); err != nil {
		t.Fatal(err)
	}
	run(t, r.s, 2e6)
	if r.got != 100 {
		t.Fatalf("reverse direction fault hit %d", 100-r.got)
	}
	// 5-tuple drops: the hashes with the low two bits 1 (25 of 100).
	r = newProbeRig(t, DefaultConfig())
	if err := r.s.AddLinkFault(LinkFault{A: "rail0", B: "spine0", HashMask: 3, HashValue: 1}); err != nil {
		t.Fatal(err)
	}
	run(t, r.s, 2e6)
	if r.got != 75 || r.s.FaultStats().Silent != 25 {
		t.Fatalf("silent: %d, %+v", r.got, r.s.FaultStats())
	}
	// Corruption at 30%, deterministic for the seed.
	var lost [2]int
	for k := range lost {
		r = newProbeRig(t, DefaultConfig())
		if err := r.s.AddLinkFault(LinkFault{A: "spine0", B: "rail1", Prob: 0.3}); err != nil {
			t.Fatal(err)
		}
		run(t, r.s, 2e6)
		lost[k] = 100 - r.got
	}
	if lost[0] != lost[1] || lost[0] < 15 || lost[0] > 45 {
		t.Fatalf("corruption lost %v", lost)
	}
	// A dead RNIC neither sends nor receives.
	r = newProbeRig(t, DefaultConfig())
	if err := r.s.KillRNIC("m0n0", 0, 500_000); err != nil {
		t.Fatal(err)
	}
	run(t, r.s, 2e6)
	if r.got != 50 || r.s.FaultStats().DeadRNIC != 50 {
		t.Fatalf("dead: %d %+v", r.got, r.s.FaultStats())
	}
	// CPU overload: delivery waits for the processing delay, the RNIC
	// timestamp does not.
	r = newProbeRig(t, DefaultConfig())
	if err := r.s.SetProcessingDelay("m0n1", 7000); err != nil {
		t.Fatal(err)
	}
	run(t, r.s, 2e6)
	if r.got != 100 || r.dlv-r.rx != 7000 || r.rx-r.sent > 5000 {
		t.Fatalf("processing: sent %d rx %d deliver %d", r.sent, r.rx, r.dlv)
	}
	if err := r.s.AddLinkFault(LinkFault{A: "m0n0", B: "m1n1"}); err == nil {
		t.Fatal("fault on a link that does not exist")
	}
}

func TestAddFlow(t *testing.T) {
	g, rt := star(t, 3, gbps100, 1000)
	s, err := New(g, rt, nil, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	fi, err := s.AddFlow(workload.Flow{ID: 9, Src: host(g, "h0"), Dst: host(g, "h2"), Size: 64 << 10, Start: 1000})
	if err != nil || s.FlowHash(fi) != FlowIDHash(9) {
		t.Fatal(err)
	}
	res := run(t, s, 1e7)
	if len(res.Flows) != 1 || !res.Flows[0].Done {
		t.Fatalf("%+v", res.Flows)
	}
}

// TestRetryLimit: a flow to a dead RNIC retransmits after every timeout
// until its retries run out, then fails and sends nothing more; without a
// limit it retransmits for as long as the run lasts.
func TestRetryLimit(t *testing.T) {
	g, rt := star(t, 2, gbps100, 1000)
	sent := func(limit int, until int64) (FlowResult, uint64) {
		cfg := DefaultConfig()
		cfg.Host.RetryLimit = limit
		s, err := New(g, rt, []workload.Flow{{ID: 1, Src: host(g, "h0"), Dst: host(g, "h1"), Size: 1 << 20}}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.KillRNIC("h1", 0, 0); err != nil {
			t.Fatal(err)
		}
		res := run(t, s, until)
		return res.Flows[0], res.Port("h0", 0).TxData
	}
	f, tx := sent(3, 20e6)
	if !f.Failed || f.Done {
		t.Fatalf("limit 3: %+v", f)
	}
	if _, later := sent(3, 40e6); later != tx {
		t.Fatalf("failed flow still sending: %d then %d data frames", tx, later)
	}
	f, tx = sent(0, 20e6)
	if _, later := sent(0, 40e6); f.Failed || later <= tx {
		t.Fatalf("no limit: %+v, %d then %d data frames", f, tx, later)
	}
	cfg := DefaultConfig()
	cfg.Host.RetryLimit = 8
	if err := cfg.Validate(); err == nil {
		t.Fatal("retry limit 8 accepted")
	}
}
