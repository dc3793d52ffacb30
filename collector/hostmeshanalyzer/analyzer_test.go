package hostmeshanalyzer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// cluster hand-builds probe results on a rail-optimized cluster of hosts
// m0..m{H-1} with RNICs n0..n{R-1} (RNIC r on rail r) and two spines: a
// probe from RNIC a to b with source port p crosses rail a, spine p%2,
// rail b. fault decides each probe's fate.
type cluster struct {
	hosts, rnics int
	rng          *rand.Rand
}

type probe struct {
	host, src, dst int
	sport          uint16
	spine          int
}

// fate: timeout, or the network latency and processing delay.
type fate func(p probe) (timeout bool, net, proc int64)

func healthy(probe) (bool, int64, int64) { return false, 5000, 3000 }

func ip(h, r int) string { return fmt.Sprintf("10.%d.%d.1", h, r) }

func (c *cluster) batches(start int64, perRNIC int, f fate) []Batch {
	var out []Batch
	for h := range c.hosts {
		b := Batch{Host: fmt.Sprintf("m%d", h)}
		seen := map[Tuple]bool{}
		for s := range c.rnics {
			for k := range perRNIC {
				d := c.rng.IntN(c.rnics - 1)
				if d >= s {
					d++
				}
				sport := uint16(0xc000 + c.rng.IntN(8))
				p := probe{host: h, src: s, dst: d, sport: sport, spine: int(sport) % 2}
				r := Result{Host: b.Host, Src: fmt.Sprintf("n%d", s), Dst: fmt.Sprintf("n%d", d), SrcIP: ip(h, s), DstIP: ip(h, d),
					SPort: sport, Seq: uint64(k), At: start + int64(k)*int64(time.Millisecond)}
				r.Timeout, r.NetworkNs, r.ProcessingNs = f(p)
				if r.Timeout {
					r.NetworkNs, r.ProcessingNs = 0, 0
				}
				b.Results = append(b.Results, r)
				if t := r.Tuple(); !seen[t] {
					seen[t] = true
					b.Paths = append(b.Paths, Path{Host: b.Host, Src: r.Src, Dst: r.Dst, Tuple: t, At: start, Complete: true,
						Hops: []string{fmt.Sprintf("rail%d", s), fmt.Sprintf("spine%d", p.spine), fmt.Sprintf("rail%d", d)}})
				}
			}
		}
		out = append(out, b)
	}
	return out
}

func analyzeOne(t *testing.T, a *Analyzer, bs []Batch, end int64) *Report {
	t.Helper()
	for i := range bs {
		a.Add(&bs[i])
	}
	r := a.Analyze(end)
	var buf bytes.Buffer
	r.WriteText(&buf)
	t.Log(buf.String())
	return r
}

const win = int64(20 * time.Second)

func TestFaultFreeNoAlert(t *testing.T) {
	c := &cluster{hosts: 4, rnics: 8, rng: rand.New(rand.NewPCG(1, 1))}
	jitter := rand.New(rand.NewPCG(2, 2))
	r := analyzeOne(t, NewAnalyzer(Config{}), c.batches(0, 200, func(probe) (bool, int64, int64) {
		return false, 4000 + jitter.Int64N(3000), 2000 + jitter.Int64N(4000)
	}), win)
	if len(r.Alerts) != 0 || r.Probes != 4*8*200 || r.Network.P50 < 4000 || r.Processing.P99 > 6000 {
		t.Fatalf("alerts %v, report %+v", r.Alerts, r)
	}
}

// TestRNICAnomaly: a dead RNIC is anomalous; its peers, which fail the one
// probe in seven that involves it, are not; its probes count as RNIC
// problems, and for the hold after the window too.
func TestRNICAnomaly(t *testing.T) {
	c := &cluster{hosts: 2, rnics: 8, rng: rand.New(rand.NewPCG(3, 3))}
	dead := func(p probe) (bool, int64, int64) {
		if p.host == 1 && (p.src == 5 || p.dst == 5) {
			return true, 0, 0
		}
		return healthy(p)
	}
	a := NewAnalyzer(Config{})
	r := analyzeOne(t, a, c.batches(0, 200, dead), win)
	if r.SuspectRNIC() != "m1/n5" || (len(r.RNICs) > 1 && r.RNICs[1].Anomalous) {
		t.Fatalf("suspects %+v", r.RNICs)
	}
	if r.SwitchProblems != 0 || r.RNICProblems != r.Timeouts || r.SuspectLink() != "" || r.RNICDropRate == 0 {
		t.Fatalf("switch %d rnic %d of %d, link %q", r.SwitchProblems, r.RNICProblems, r.Timeouts, r.SuspectLink())
	}
	// Next window: a few timeouts, below the threshold, still RNIC problems.
	some := func(p probe) (bool, int64, int64) {
		if p.host == 1 && p.dst == 5 && p.sport%4 == 0 {
			return true, 0, 0
		}
		return healthy(p)
	}
	r = analyzeOne(t, a, c.batches(win, 200, some), 2*win)
	if r.SuspectRNIC() != "m1/n5" || !r.RNICs[0].Held || r.SwitchProblems != 0 {
		t.Fatalf("held: %+v", r.RNICs)
	}
	// After the hold (a minute), the same few timeouts are the switch
	// network's.
	for w := int64(3); w <= 5; w++ {
		r = analyzeOne(t, a, c.batches((w-1)*win, 200, some), w*win)
	}
	if r.SuspectRNIC() != "" || r.SwitchProblems == 0 {
		t.Fatalf("after hold: %+v, switch problems %d", r.RNICs, r.SwitchProblems)
	}
}

// TestThreshold: more than 10% of an RNIC's probes make it anomalous, not
// 10% or less.
func TestThreshold(t *testing.T) {
	for _, tc := range []struct {
		every int
		want  bool
	}{{20, false}, {12, false}, {6, true}} {
		n := 0
		f := func(p probe) (bool, int64, int64) {
			if p.host == 0 && p.dst == 2 {
				n++
				if n%tc.every == 0 {
					return true, 0, 0
				}
			}
			return healthy(p)
		}
		c := &cluster{hosts: 1, rnics: 4, rng: rand.New(rand.NewPCG(4, 4))}
		// Both spines fail alike, so no link explains it.
		r := analyzeOne(t, NewAnalyzer(Config{}), c.batches(0, 300, f), win)
		if got := r.SuspectRNIC() == "m0/n2"; got != tc.want {
			t.Fatalf("one in %d: anomalous %v, %+v", tc.every, got, r.RNICs)
		}
	}
}

// TestLinkVoting: a down spine link makes a quarter of its rail's probes
// time out; no RNIC is blamed and the voting names the link, the switches
// at its ends tie.
func TestLinkVoting(t *testing.T) {
	c := &cluster{hosts: 4, rnics: 4, rng: rand.New(rand.NewPCG(5, 5))}
	down := func(p probe) (bool, int64, int64) {
		if p.spine == 1 && (p.src == 2 || p.dst == 2) {
			return true, 0, 0
		}
		return healthy(p)
	}
	r := analyzeOne(t, NewAnalyzer(Config{}), c.batches(0, 200, down), win)
	if r.SuspectRNIC() != "" || r.SuspectLink() != "rail2~spine1" {
		t.Fatalf("rnic %q link %q: %+v", r.SuspectRNIC(), r.SuspectLink(), r.Links[:2])
	}
	if sw := r.SuspectSwitches(); len(sw) != 2 || sw[0] != "rail2" && sw[0] != "spine1" {
		t.Fatalf("switches %v", sw)
	}
	for _, s := range r.RNICs {
		if strings.HasSuffix(s.RNIC, "/n2") && s.Rate > 0.1 && s.Explained != "rail2~spine1" {
			t.Fatalf("%+v not explained by the link", s)
		}
	}
	// High latency on one direction of a link votes the same way.
	slow := func(p probe) (bool, int64, int64) {
		if p.spine == 0 && p.dst == 3 {
			return false, 40000, 3000
		}
		return healthy(p)
	}
	r = analyzeOne(t, NewAnalyzer(Config{}), c.batches(0, 200, slow), win)
	if r.SuspectLink() != "rail3~spine0" || r.HighLatency == 0 || r.Timeouts != 0 {
		t.Fatalf("slow link: %q, %d high", r.SuspectLink(), r.HighLatency)
	}
	// Bursts that delay a third of the probes over that direction are
	// ordinary traffic, not congestion: no alert.
	k := 0
	bursty := func(p probe) (bool, int64, int64) {
		if p.spine == 0 && p.dst == 3 {
			if k++; k%3 == 0 {
				return false, 40000, 3000
			}
		}
		return healthy(p)
	}
	r = analyzeOne(t, NewAnalyzer(Config{}), c.batches(0, 200, bursty), win)
	if r.HighLatency == 0 || len(r.Alerts) != 0 {
		t.Fatalf("bursts: %d high, alerts %v", r.HighLatency, r.Alerts)
	}
}

func TestProcessingOverload(t *testing.T) {
	c := &cluster{hosts: 4, rnics: 4, rng: rand.New(rand.NewPCG(6, 6))}
	r := analyzeOne(t, NewAnalyzer(Config{}), c.batches(0, 100, func(p probe) (bool, int64, int64) {
		if p.host == 2 {
			return false, 5000, 2_000_000
		}
		return healthy(p)
	}), win)
	if r.SuspectHost() != "m2" || r.SuspectLink() != "" || r.SuspectRNIC() != "" {
		t.Fatalf("host %q, alerts %v", r.SuspectHost(), r.Alerts)
	}
}

func TestReadBatchesAndAnalyzeAll(t *testing.T) {
	c := &cluster{hosts: 2, rnics: 4, rng: rand.New(rand.NewPCG(7, 7))}
	var buf bytes.Buffer
	for _, w := range []int64{0, 1} {
		for _, b := range c.batches(w*int64(time.Second), 1000, healthy) {
			buf.WriteString(mustJSON(t, b))
		}
	}
	bs, err := ReadBatches(&buf)
	if err != nil || len(bs) != 4 {
		t.Fatal(len(bs), err)
	}
	rs := AnalyzeAll(bs, Config{Window: time.Second})
	if len(rs) < 2 || rs[0].Probes == 0 {
		t.Fatalf("%d reports", len(rs))
	}
	if _, err := ReadBatches(strings.NewReader(`{"host": 3}`)); err == nil {
		t.Fatal("malformed batch accepted")
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}
