package hostmeshanalyzer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// cluster hand-builds probe results on a rail-optimized cluster of hosts
// m0..m{H-1} with RNICs n0..n{R-1} (RNIC r on rail r) and spines (two
// unless set): a probe from RNIC a to b with source port p crosses rail a,
// spine p%spines, rail b. fault decides each probe's fate.
type cluster struct {
	hosts, rnics, spines int
	rng                  *rand.Rand
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
				p := probe{host: h, src: s, dst: d, sport: sport, spine: int(sport) % max(c.spines, 2)}
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
	if r.First(KindRNIC) != "m1/n5" || (len(r.RNICs) > 1 && r.RNICs[1].Anomalous) {
		t.Fatalf("suspects %+v", r.RNICs)
	}
	if r.SwitchProblems != 0 || r.RNICProblems != r.Timeouts || r.First(KindLink) != "" || r.RNICDropRate == 0 {
		t.Fatalf("switch %d rnic %d of %d, link %q", r.SwitchProblems, r.RNICProblems, r.Timeouts, r.First(KindLink))
	}
	// Next window: a few timeouts, below the threshold, still RNIC problems.
	some := func(p probe) (bool, int64, int64) {
		if p.host == 1 && p.dst == 5 && p.sport%4 == 0 {
			return true, 0, 0
		}
		return healthy(p)
	}
	r = analyzeOne(t, a, c.batches(win, 200, some), 2*win)
	// Held, it raises no alert of its own: it was alerted on when found.
	if len(r.RNICs) == 0 || r.RNICs[0].RNIC != "m1/n5" || !r.RNICs[0].Held || r.SwitchProblems != 0 || len(r.Alerts) != 0 {
		t.Fatalf("held: %+v, alerts %q", r.RNICs, r.Alerts)
	}
	// After the hold (a minute), the same few timeouts are the switch
	// network's.
	for w := int64(3); w <= 5; w++ {
		r = analyzeOne(t, a, c.batches((w-1)*win, 200, some), w*win)
	}
	if r.First(KindRNIC) != "" || r.SwitchProblems == 0 {
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
		// Step 1's verdict: below the threshold the voting may still
		// find its link, an RNIC problem of another kind.
		if got := len(r.RNICs) > 0 && r.RNICs[0].RNIC == "m0/n2" && r.RNICs[0].Anomalous; got != tc.want {
			t.Fatalf("one in %d: anomalous %v, %+v", tc.every, got, r.RNICs)
		}
	}
}

// TestLinkVoting: a down spine link makes a quarter of its rail's probes
// time out; no RNIC is blamed and the voting names the link, and only
// the link.
func TestLinkVoting(t *testing.T) {
	c := &cluster{hosts: 4, rnics: 4, rng: rand.New(rand.NewPCG(5, 5))}
	down := func(p probe) (bool, int64, int64) {
		if p.spine == 1 && (p.src == 2 || p.dst == 2) {
			return true, 0, 0
		}
		return healthy(p)
	}
	r := analyzeOne(t, NewAnalyzer(Config{}), c.batches(0, 200, down), win)
	if r.First(KindRNIC) != "" || r.First(KindLink) != "rail2~spine1" {
		t.Fatalf("rnic %q link %q: %+v", r.First(KindRNIC), r.First(KindLink), r.Links[:2])
	}
	// The link explains every timeout: the switches at its ends are
	// not suspects of their own.
	if len(r.Suspects) != 1 || len(r.Alerts) != 1 {
		t.Fatalf("suspects %+v", r.Suspects)
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
	if r.First(KindLink) != "rail3~spine0" || r.HighLatency == 0 || r.Timeouts != 0 {
		t.Fatalf("slow link: %q, %d high", r.First(KindLink), r.HighLatency)
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
	if r.First(KindHost) != "m2" || r.First(KindLink) != "" || r.First(KindRNIC) != "" {
		t.Fatalf("host %q, alerts %v", r.First(KindHost), r.Alerts)
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

// TestSwitchVoting: a spine that drops some of what arrives from two
// rails fails probes over two of its links, none of which explains the
// rest: the suspect is the spine, alone; the RNICs of those rails, whose
// failures are confined to the spine's links, are not blamed. A rail
// switch that drops what comes down from two of its four spines fails a
// sixth of its RNICs' incoming probes over two links: again the switch,
// and again when it drops from all four.
func TestSwitchVoting(t *testing.T) {
	c := &cluster{hosts: 4, rnics: 4, rng: rand.New(rand.NewPCG(8, 8))}
	jitter := rand.New(rand.NewPCG(9, 9))
	spine := func(p probe) (bool, int64, int64) {
		if p.spine == 1 && (p.src == 1 || p.src == 2) && jitter.IntN(3) == 0 {
			return true, 0, 0
		}
		return healthy(p)
	}
	r := analyzeOne(t, NewAnalyzer(Config{}), c.batches(0, 200, spine), win)
	if top, _ := r.Top(); len(r.Suspects) != 1 || top.Kind != KindSwitch || top.Name != "spine1" {
		t.Fatalf("suspects %+v", r.Suspects)
	}
	c = &cluster{hosts: 4, rnics: 4, spines: 4, rng: rand.New(rand.NewPCG(10, 10))}
	rail := func(p probe) (bool, int64, int64) {
		if p.dst == 2 && p.spine < 2 && jitter.IntN(3) == 0 {
			return true, 0, 0
		}
		return healthy(p)
	}
	r = analyzeOne(t, NewAnalyzer(Config{}), c.batches(0, 200, rail), win)
	if top, _ := r.Top(); len(r.Suspects) != 1 || top.Kind != KindSwitch || top.Name != "rail2" {
		t.Fatalf("suspects %+v, rnics %+v", r.Suspects, r.RNICs)
	}
	// Dropping from all of its spines, the rail switch fails every RNIC
	// under it on every path: each is anomalous, together they are the
	// switch's.
	all := func(p probe) (bool, int64, int64) {
		if p.dst == 2 && jitter.IntN(4) == 0 {
			return true, 0, 0
		}
		return healthy(p)
	}
	r = analyzeOne(t, NewAnalyzer(Config{}), c.batches(0, 200, all), win)
	if top, _ := r.Top(); len(r.Suspects) != 1 || top.Kind != KindSwitch || top.Name != "rail2" || r.RNICs[0].Anomalous != true {
		t.Fatalf("suspects %+v, rnics %+v", r.Suspects, r.RNICs)
	}
}

// TestSuspectRanking: suspects of every kind in one ranking: lost probes
// before slow ones before slow answers, and among lost probes the sicker
// suspect first, whatever its kind: a down link, which loses every probe
// over it, outranks an RNIC that loses a quarter of the probes to it,
// though the RNIC was judged first.
func TestSuspectRanking(t *testing.T) {
	c := &cluster{hosts: 4, rnics: 4, rng: rand.New(rand.NewPCG(11, 11))}
	jitter := rand.New(rand.NewPCG(12, 12))
	mixed := func(p probe) (bool, int64, int64) {
		switch {
		case p.host == 3 && p.dst == 3 && jitter.IntN(4) == 0:
			return true, 0, 0
		case p.spine == 1 && (p.src == 2 || p.dst == 2):
			return true, 0, 0
		case p.host == 1:
			return false, 5000, 2_000_000
		}
		return healthy(p)
	}
	r := analyzeOne(t, NewAnalyzer(Config{}), c.batches(0, 200, mixed), win)
	var got []string
	for _, s := range r.Suspects {
		got = append(got, s.Kind+" "+s.Name)
	}
	want := []string{"link rail2~spine1", "rnic m3/n3", "host m1"}
	if !slices.Equal(got, want) || !slices.Equal(r.Alerts, []string{r.Suspects[0].Alert, r.Suspects[1].Alert, r.Suspects[2].Alert}) {
		t.Fatalf("suspects %q, want %q", got, want)
	}
	if top, ok := r.Top(); !ok || top.Name != "rail2~spine1" || r.First(KindRNIC) != "m3/n3" {
		t.Fatalf("top %+v", top)
	}
	// Slow probes rank below lost ones.
	slow := func(p probe) (bool, int64, int64) {
		switch {
		case p.host == 0 && p.dst == 3 && jitter.IntN(3) == 0:
			return true, 0, 0
		case p.spine == 0 && p.dst == 1:
			return false, 40000, 3000
		}
		return healthy(p)
	}
	r = analyzeOne(t, NewAnalyzer(Config{}), c.batches(0, 200, slow), win)
	if len(r.Suspects) != 2 || r.Suspects[0].Kind != KindRNIC || r.Suspects[1].Name != "rail1~spine0" || r.Suspects[1].Basis != "latency" {
		t.Fatalf("suspects %+v", r.Suspects)
	}
}

// TestPFCStorm: an RNIC that pauses its switch for good freezes the
// lossless class behind it: probes to and from it time out, and so do
// those stuck at the spine its switch's pauses froze. Probing alone blames
// the spine's links and the RNICs whose probes cross it; with the RNICs'
// pause counters the storming RNIC is the one suspect, and every abnormal
// probe behind it is its.
func TestPFCStorm(t *testing.T) {
	c := &cluster{hosts: 4, rnics: 4, rng: rand.New(rand.NewPCG(7, 7))}
	k := 0
	storm := func(p probe) (bool, int64, int64) {
		if p.host == 1 && (p.src == 2 || p.dst == 2) {
			return true, 0, 0
		}
		if p.spine == 1 {
			if k++; k%3 != 0 {
				return true, 0, 0
			}
			return false, 90000, 3000
		}
		return healthy(p)
	}
	pfc := func(bs []Batch, tx int64) []Batch {
		for i := range bs {
			switch bs[i].Host {
			case "m1":
				bs[i].PFC = append(bs[i].PFC, PFC{RNIC: "n2", From: 0, To: win, TxPause: 40, TxPauseNs: tx})
			case "m2":
				bs[i].PFC = append(bs[i].PFC, PFC{RNIC: "n0", From: 0, To: win, RxPause: 12, RxPauseNs: win / 2})
			}
		}
		return bs
	}
	// Without counters: the network takes the blame.
	r := analyzeOne(t, NewAnalyzer(Config{}), c.batches(0, 200, storm), win)
	if len(r.Suspects) == 0 || r.Suspects[0].Kind == KindRNIC && r.Suspects[0].Basis == "pfc" {
		t.Fatalf("without counters: %+v", r.Suspects)
	}
	// Probes of a 5-tuple never traced time out too: nothing says they
	// avoided the freeze, and their RNIC is not blamed.
	untraced := func(bs []Batch) []Batch {
		for k := range 40 {
			bs[3].Results = append(bs[3].Results, Result{Host: "m3", Src: "n0", Dst: "n1", SrcIP: ip(3, 0), DstIP: ip(3, 1), SPort: 0xd000,
				Seq: uint64(1000 + k), At: int64(k) * int64(time.Millisecond), Timeout: true})
		}
		return bs
	}
	r = analyzeOne(t, NewAnalyzer(Config{}), untraced(pfc(c.batches(0, 200, storm), win)), win)
	if len(r.Suspects) != 1 || r.Suspects[0].Name != "m1/n2" || r.Suspects[0].Basis != "pfc" {
		t.Fatalf("storm: suspects %+v", r.Suspects)
	}
	if len(r.PFC) != 2 || !r.PFC[0].Storming || r.PFC[0].Timeouts == 0 || r.PFC[1].Storming || r.SwitchProblems != 0 || r.HighLatency != 0 {
		t.Fatalf("storm: pfc %+v, %d switch problems, %d high latency", r.PFC, r.SwitchProblems, r.HighLatency)
	}
	// Pauses of a healthy RNIC (under 1% of the window) are no storm:
	// the network's faults are judged as without counters.
	r = analyzeOne(t, NewAnalyzer(Config{}), pfc(c.batches(0, 200, storm), win/200), win)
	if len(r.Suspects) == 0 || r.Suspects[0].Basis == "pfc" || len(r.PFC) != 2 || r.PFC[0].Storming {
		t.Fatalf("short pauses: suspects %+v pfc %+v", r.Suspects, r.PFC)
	}
	// A sample spanning two windows counts in each for its share.
	a := NewAnalyzer(Config{})
	a.Add(&Batch{Host: "m0", PFC: []PFC{{RNIC: "n1", From: win / 2, To: win + win/2, TxPause: 10, TxPauseNs: win}}})
	r1, r2 := a.Analyze(win), a.Analyze(2*win)
	if len(r1.PFC) != 1 || r1.PFC[0].TxPause != 5 || r1.PFC[0].TxPauseNs != win/2 || len(r2.PFC) != 1 || r2.PFC[0].TxPause != 5 {
		t.Fatalf("split sample: %+v / %+v", r1.PFC, r2.PFC)
	}
}

// TestLosslessDiscards: a rail switch whose lossless class discards (PFC
// off or headroom short) loses some of the probes over it, and its
// incast's queues delay probes over a spine next to it. With its PG drop
// counters the switch is the one suspect, the delays charged to it; other
// priority groups' discards and malformed records count for nothing, and
// discards while the probes over it pass unharmed raise no alert.
func TestLosslessDiscards(t *testing.T) {
	c := &cluster{hosts: 4, rnics: 4, rng: rand.New(rand.NewPCG(9, 9))}
	k := 0
	fault := func(p probe) (bool, int64, int64) {
		k++
		switch {
		case (p.src == 2 || p.dst == 2) && k%4 == 0:
			return true, 0, 0
		case p.src != 2 && p.dst != 2 && p.spine == 1 && k%2 == 0:
			return false, 60000, 3000
		}
		return healthy(p)
	}
	drops := func(bs []Batch, pg int) []Batch {
		return append(bs, Batch{Host: "poller", PGDrops: []PGDrop{
			{Switch: "rail2", Port: "Ethernet8", PG: pg, From: 0, To: win / 2, Discards: 700},
			{Switch: "rail2", Port: "Ethernet12", PG: pg, From: win / 2, To: win, Discards: 300},
			{Switch: "", Port: "Ethernet0", PG: pg, From: 0, To: win, Discards: 5},
			{Switch: "rail1", Port: "Ethernet0", PG: 99, From: 0, To: win, Discards: 5},
			{Switch: "rail1", Port: "Ethernet0", PG: pg, From: win, To: 0, Discards: 5},
		}})
	}
	// Without the counters the probing alone does not name the switch.
	r := analyzeOne(t, NewAnalyzer(Config{}), c.batches(0, 200, fault), win)
	if len(r.Suspects) == 0 || slices.ContainsFunc(r.Suspects, func(s Suspect) bool { return s.Basis == "discards" }) {
		t.Fatalf("without counters: %+v", r.Suspects)
	}
	// Probes of a 5-tuple never traced, to an RNIC under the switch,
	// are its too: the RNIC hangs off it on every path.
	untraced := func(bs []Batch) []Batch {
		for k := range 60 {
			bs[3].Results = append(bs[3].Results, Result{Host: "m3", Src: "n0", Dst: "n2", SrcIP: ip(3, 0), DstIP: ip(3, 2), SPort: 0xd000,
				Seq: uint64(1000 + k), At: int64(k) * int64(time.Millisecond), Timeout: true})
		}
		return bs
	}
	a := NewAnalyzer(Config{})
	r = analyzeOne(t, a, untraced(drops(c.batches(0, 200, fault), 3)), win)
	if len(r.Suspects) != 1 || r.Suspects[0].Kind != KindSwitch || r.Suspects[0].Name != "rail2" || r.Suspects[0].Basis != "discards" {
		t.Fatalf("discards: suspects %+v", r.Suspects)
	}
	d := r.Discards
	if len(d) != 1 || d[0].Discards != 1000 || !slices.Equal(d[0].Ports, []string{"Ethernet12", "Ethernet8"}) || d[0].Timeouts == 0 || d[0].SlowNear == 0 {
		t.Fatalf("discards: %+v", d)
	}
	if r.SwitchProblems != d[0].Timeouts || r.RNICProblems != 0 || len(r.RNICs) > 0 && r.RNICs[0].Anomalous {
		t.Fatalf("discards: %d switch problems, %d RNIC problems, RNICs %+v", r.SwitchProblems, r.RNICProblems, r.RNICs)
	}
	if a.Malformed != 3 {
		t.Fatalf("malformed records counted %d, want 3", a.Malformed)
	}
	// The next window, without discards: the switch is held, the slow
	// probes over it are still its; a lost one is not its discard.
	slowOver := func(p probe) (bool, int64, int64) {
		if k++; p.dst == 2 {
			return k%40 == 0, 60000, 3000
		}
		return healthy(p)
	}
	r = analyzeOne(t, a, c.batches(win, 200, slowOver), 2*win)
	if len(r.Discards) != 1 || !r.Discards[0].Held || r.Discards[0].Timeouts != 0 || r.Discards[0].SlowOver == 0 ||
		!slices.ContainsFunc(r.Suspects, func(s Suspect) bool { return s.Name == "rail2" && strings.Contains(s.Alert, "(held)") }) {
		t.Fatalf("held: discards %+v suspects %+v", r.Discards, r.Suspects)
	}
	// Past the hold (a minute) it is forgotten.
	r = analyzeOne(t, a, c.batches(5*win, 200, slowOver), 6*win)
	if len(r.Discards) != 0 || slices.ContainsFunc(r.Suspects, func(s Suspect) bool { return s.Basis == "discards" }) {
		t.Fatalf("after the hold: discards %+v suspects %+v", r.Discards, r.Suspects)
	}
	// Another group's discards (the lossy PG 0) are not the lossless
	// class's.
	r = analyzeOne(t, NewAnalyzer(Config{}), drops(c.batches(0, 200, fault), 0), win)
	if len(r.Discards) != 0 || slices.ContainsFunc(r.Suspects, func(s Suspect) bool { return s.Basis == "discards" }) {
		t.Fatalf("PG 0: discards %+v suspects %+v", r.Discards, r.Suspects)
	}
	// Discards the probes did not suffer from: reported, not alerted.
	r = analyzeOne(t, NewAnalyzer(Config{}), drops(c.batches(0, 200, healthy), 3), win)
	if len(r.Discards) != 1 || len(r.Suspects) != 0 {
		t.Fatalf("unharmed: discards %+v suspects %+v", r.Discards, r.Suspects)
	}
	// A record spanning two windows counts in each for its share.
	a = NewAnalyzer(Config{})
	a.Add(&Batch{Host: "poller", PGDrops: []PGDrop{{Switch: "s", Port: "p", PG: 3, From: win / 2, To: win + win/2, Discards: 10}}})
	a.Add(&Batch{Host: "m0", Results: []Result{{Host: "m0", Src: "n0", Dst: "n1", At: 1}}})
	r1, r2 := a.Analyze(win), a.Analyze(2*win)
	if len(r1.Discards) != 1 || r1.Discards[0].Discards != 5 || len(r2.Discards) != 1 || r2.Discards[0].Discards != 5 {
		t.Fatalf("split record: %+v / %+v", r1.Discards, r2.Discards)
	}
}

// TestAnalyzeAllClockJump: a recording with a timestamp decades or the
// clock's end away from the rest (a host's bad clock)
// is analysed in the windows that hold results, every result in one,
// rather than in a report per empty window or a loop without end.
func TestAnalyzeAllClockJump(t *testing.T) {
	for _, ats := range [][]int64{{0, 999_999_999_999_999_999}, {math.MinInt64, 0, math.MaxInt64 - 1}, {5, math.MaxInt64}} {
		var b Batch
		for _, at := range ats {
			b.Results = append(b.Results, Result{Host: "h1", Src: "r0", Dst: "r1", At: at})
		}
		rs := AnalyzeAll([]Batch{b}, Config{Window: time.Second, MinProbes: 1})
		probes := 0
		for _, r := range rs {
			probes += r.Probes
		}
		want := len(ats)
		if ats[len(ats)-1] == math.MaxInt64 {
			want-- // ends no window
		}
		if len(rs) > len(ats) || probes != want {
			t.Errorf("%v: %d reports, %d probes, want %d", ats, len(rs), probes, want)
		}
	}
}
