package workload

import (
	"bytes"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestParseCDF(t *testing.T) {
	// Percent and fraction forms of one distribution are the same CDF.
	a, err := ParseCDF(strings.NewReader("0 0\n100 50\n\n# comment\n300 100\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseCDF(strings.NewReader("0 0\n100 0.5\n300 1"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("%+v != %+v", a, b)
	}
	if m := a.Mean(); m != 0.5*50+0.5*200 {
		t.Errorf("mean %v", m)
	}
	for u, want := range map[float64]float64{0: 0, 0.25: 50, 0.5: 100, 0.75: 200, 1: 300} {
		if got := a.Quantile(u); got != want {
			t.Errorf("Quantile(%v) = %v, want %v", u, got, want)
		}
		if got := a.Prob(want); math.Abs(got-u) > 1e-12 {
			t.Errorf("Prob(%v) = %v, want %v", want, got, u)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"", "no points"},
		{"# only a comment\n", "no points"},
		{"10 20 30\n", `line 1: "10 20 30"`},
		{"x 1\n", `line 1: size "x"`},
		{"-1 1\n", `line 1: size "-1"`},
		{"10 NaN\n", `line 1: probability "NaN"`},
		{"10 150\n", `line 1: probability "150"`},
		{"1e300 1\n", `size "1e300"`},
		{"10 0\n5 1\n", "line 2: size 5 is below the previous point's 10"},
		{"10 50\n20 40\n30 100\n", "line 2: probability 40 is below"},
		{"10 0\n20 50\n", "ends at probability 50"},
		{"10 0\n20 0.9\n", "ends at probability 0.9"},
	} {
		_, err := ParseCDF(strings.NewReader(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseCDF(%q) = %v, want an error saying %q", c.in, err, c.want)
		}
	}
}

// ksCheck draws n sizes and compares their empirical distribution with the
// CDF: the Kolmogorov-Smirnov distance must stay below what a correct
// sampler exceeds with probability 0.1% (1.95/sqrt(n)), plus the small
// bias of rounding to whole bytes.
func ksCheck(t *testing.T, name string, c *CDF, n int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = float64(c.Sample(rng))
	}
	slices.Sort(xs)
	d := 0.0
	for i, x := range xs {
		// Compare on both sides of each step of the empirical CDF; the
		// rounding to bytes moves a sample by half a byte at most.
		hi, lo := c.Prob(x+0.5), c.Prob(x-0.5)
		d = max(d, math.Abs(float64(i+1)/float64(n)-lo), math.Abs(hi-float64(i)/float64(n)))
	}
	limit := 1.95 / math.Sqrt(float64(n))
	if d > limit {
		t.Errorf("%s: KS distance %.5f over %d samples, want < %.5f", name, d, n, limit)
	}
}

func TestSampleMatchesCDF(t *testing.T) {
	ksCheck(t, "web search", WebSearch, 100000)
	ksCheck(t, "hawkeye", Hawkeye, 100000)
	ksCheck(t, "uniform", mustCDF("1000 0\n2000 1\n"), 50000)

	// An atom: half the flows are exactly 100 bytes.
	atom := mustCDF("100 0.5\n200 1\n")
	rng := rand.New(rand.NewPCG(3, 4))
	n100 := 0
	for range 20000 {
		s := atom.Sample(rng)
		if s < 100 || s > 200 {
			t.Fatalf("sample %d outside the CDF", s)
		}
		if s == 100 {
			n100++
		}
	}
	if math.Abs(float64(n100)/20000-0.5) > 0.02 {
		t.Errorf("%d of 20000 samples at the atom, want about half", n100)
	}
	// Sample never returns an empty flow.
	zero := mustCDF("0 1\n")
	if s := zero.Sample(rng); s != 1 {
		t.Errorf("sample of an all-zero distribution: %d", s)
	}
}

func TestEmbeddedDistributions(t *testing.T) {
	sizes, probs := WebSearch.Points()
	if sizes[len(sizes)-1] != 30e6 || probs[1] != 0.15 || sizes[1] != 10000 {
		t.Errorf("web search points %v %v", sizes, probs)
	}
	if m := WebSearch.Mean(); math.Abs(m-1.71125e6) > 1 {
		t.Errorf("web search mean %.0f, want 1711250", m)
	}
	if m := Hawkeye.Mean(); math.Abs(m-26.7211e6) > 1e3 {
		t.Errorf("hawkeye mean %.0f, want about 26.72 MB", m)
	}
	// The three statements the Hawkeye paper makes.
	for x, p := range map[float64]float64{10e6: 0.8, 100e6: 0.9, 300e6: 1} {
		if got := Hawkeye.Prob(x); math.Abs(got-p) > 1e-12 {
			t.Errorf("hawkeye P(size <= %v) = %v, want %v", x, got, p)
		}
	}
	// The sampled mean is the distribution's.
	rng := rand.New(rand.NewPCG(5, 6))
	sum := 0.0
	const n = 200000
	for range n {
		sum += float64(WebSearch.Sample(rng))
	}
	if got := sum / n; math.Abs(got/WebSearch.Mean()-1) > 0.03 {
		t.Errorf("sampled web search mean %.0f, want %.0f within 3%%", got, WebSearch.Mean())
	}
}

func TestPoisson(t *testing.T) {
	hosts := make([]int, 16)
	for i := range hosts {
		hosts[i] = 100 + i // node indices need not start at 0
	}
	const (
		bw       = 100e9
		load     = 0.5
		duration = int64(1e9) // 1 s: ~58k web-search flows
	)
	flows := Poisson(hosts, bw, load, WebSearch, duration, 42)
	if len(flows) < 1000 {
		t.Fatalf("%d flows", len(flows))
	}
	bytesBy := map[int]float64{}
	var total float64
	for i, f := range flows {
		if f.ID != i || f.Src == f.Dst || f.Src < 100 || f.Src > 115 || f.Dst < 100 || f.Dst > 115 ||
			f.Start < 0 || f.Start >= duration || f.Size < 1 || f.Prio != DefaultPrio {
			t.Fatalf("flow %+v", f)
		}
		if i > 0 && f.Start < flows[i-1].Start {
			t.Fatalf("flows out of order at %d", i)
		}
		bytesBy[f.Src] += float64(f.Size)
		total += float64(f.Size)
	}
	// Offered load: all hosts together within 3% of the target (the
	// relative standard deviation here is about 1%), each host within 15%.
	offered := total * 8 / (float64(duration) / 1e9) / float64(len(hosts))
	if math.Abs(offered/(load*bw)-1) > 0.03 {
		t.Errorf("offered load %.3g bit/s per host, want %.3g within 3%%", offered, load*bw)
	}
	for h, b := range bytesBy {
		if r := b * 8 / (load * bw); math.Abs(r-1) > 0.15 {
			t.Errorf("host %d offers %.2f of its target", h, r)
		}
	}
	// Destinations spread over the other hosts.
	dsts := map[int]int{}
	for _, f := range flows {
		if f.Src == 100 {
			dsts[f.Dst]++
		}
	}
	if len(dsts) != 15 {
		t.Errorf("host 100 sends to %d hosts, want 15", len(dsts))
	}

	// Deterministic for a seed, different for another.
	again := Poisson(hosts, bw, load, WebSearch, duration, 42)
	if !reflect.DeepEqual(flows, again) {
		t.Error("same seed, different flows")
	}
	other := Poisson(hosts, bw, load, WebSearch, duration, 43)
	if reflect.DeepEqual(flows[:10], other[:10]) {
		t.Error("different seeds, same flows")
	}
	for _, bad := range [][]Flow{
		Poisson(hosts[:1], bw, load, WebSearch, duration, 1),
		Poisson(hosts, 0, load, WebSearch, duration, 1),
		Poisson(hosts, bw, 0, WebSearch, duration, 1),
		Poisson(hosts, bw, load, nil, duration, 1),
		Poisson(hosts, bw, load, WebSearch, 0, 1),
		Poisson(hosts, math.NaN(), load, WebSearch, duration, 1),
	} {
		if len(bad) != 0 {
			t.Errorf("%d flows from degenerate input", len(bad))
		}
	}
}

func TestIncastAllToAll(t *testing.T) {
	fl := Incast([]int{1, 2, 3, 4, 0}, 0, 64<<10, 3, 100_000, 5000)
	if len(fl) != 12 {
		t.Fatalf("%d incast flows, want 4 senders x 3 bursts", len(fl))
	}
	for i, f := range fl {
		if f.ID != i || f.Dst != 0 || f.Src == 0 || f.Size != 64<<10 || f.Start != 5000+int64(i/4)*100_000 {
			t.Fatalf("flow %+v", f)
		}
	}
	if n := len(Incast([]int{1}, 0, 1, 0, 0, 0)); n != 0 {
		t.Errorf("no bursts: %d flows", n)
	}
	a := AllToAll([]int{3, 5, 7, 9}, 1000, 10)
	if len(a) != 12 {
		t.Fatalf("%d all-to-all flows, want 12", len(a))
	}
	pairs := map[[2]int]bool{}
	for _, f := range a {
		pairs[[2]int{f.Src, f.Dst}] = true
		if f.Src == f.Dst || f.Start != 10 || f.Size != 1000 {
			t.Fatalf("flow %+v", f)
		}
	}
	if len(pairs) != 12 {
		t.Errorf("%d distinct pairs", len(pairs))
	}
	m := Merge(Incast([]int{1, 2}, 0, 10, 1, 0, 500), a)
	if len(m) != 14 || m[0].Start != 10 || m[13].Start != 500 || m[13].ID != 13 {
		t.Errorf("merged %+v", m)
	}
}

func TestCSV(t *testing.T) {
	flows := Merge(Poisson([]int{0, 1, 2, 3}, 10e9, 0.3, WebSearch, 1e6, 7), Incast([]int{1, 2, 3}, 0, 4096, 2, 1000, 0))
	flows[0].Prio = 5
	var buf bytes.Buffer
	if err := WriteCSV(&buf, flows); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(buf.String(), "id,src,dst,size,start_ns,prio\n") {
		t.Fatalf("header: %q", buf.String()[:40])
	}
	back, err := ReadCSV(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, flows) {
		t.Fatal("round trip changed the flows")
	}
	// Columns by name; id and prio optional.
	got, err := ReadCSV(strings.NewReader("start_ns,size,dst,src\n10,100,2,1\n20,200,1,2\n"))
	want := []Flow{{ID: 0, Src: 1, Dst: 2, Size: 100, Start: 10, Prio: DefaultPrio}, {ID: 1, Src: 2, Dst: 1, Size: 200, Start: 20, Prio: DefaultPrio}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, %v", got, err)
	}
	empty, err := ReadCSV(strings.NewReader("src,dst,size,start_ns\n"))
	if err != nil || len(empty) != 0 {
		t.Fatalf("header only: %v %v", empty, err)
	}
	for _, c := range []struct{ in, want string }{
		{"", "empty"},
		{"src,dst,size\n", "no start_ns column"},
		{"src,dst,size,start_ns,colour\n", `unknown column "colour"`},
		{"src,dst,src,size,start_ns\n", `column "src" twice`},
		{"src,dst,size,start_ns\n1,2,3,4\n1,2,0,4\n", `line 3: size "0"`},
		{"src,dst,size,start_ns\n1,x,3,4\n", `line 2: dst "x"`},
		{"src,dst,size,start_ns\n1,2,3,-4\n", `line 2: start_ns "-4"`},
		{"src,dst,size,start_ns,prio\n1,2,3,4,8\n", `line 2: prio "8"`},
		{"src,dst,size,start_ns\n1,1,3,4\n", "line 2: flow from host 1 to itself"},
		{"src,dst,size,start_ns\n1,2,3\n", "wrong number of fields"},
	} {
		_, err := ReadCSV(strings.NewReader(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ReadCSV(%q) = %v, want an error saying %q", c.in, err, c.want)
		}
	}
}

func BenchmarkPoisson(b *testing.B) {
	hosts := make([]int, 16)
	for i := range hosts {
		hosts[i] = i
	}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n = len(Poisson(hosts, 100e9, 0.5, WebSearch, 10e6, 1))
	}
	b.ReportMetric(float64(n), "flows/op")
}

// TestInProgress: with two hosts, each sending only to the other, each
// link is a processor-sharing server, whose steady state holds n flows
// with probability (1-load)*load^n whatever the sizes: load/(1-load) on
// average. The fluid warm-up must find as many running at time 0, each
// with less than it was drawn with (what it has not sent yet).
func TestInProgress(t *testing.T) {
	const (
		load   = 0.35
		bw     = 100e9
		warmup = int64(100e6) // 100 ms, against 24 ms for the largest flow alone
		seeds  = 1500
	)
	hosts := []int{3, 4}
	var n int
	for seed := range uint64(seeds) {
		flows := InProgress(hosts, bw, load, Hawkeye, warmup, seed)
		n += len(flows)
		for i, f := range flows {
			if f.ID != i || f.Src == f.Dst || f.Start != 0 || f.Size < 1 || f.Size > 300e6 || f.Prio != DefaultPrio {
				t.Fatalf("seed %d: flow %+v", seed, f)
			}
		}
	}
	// The count per host is geometric: standard deviation 0.91 per host,
	// 0.017 over the 3000 hosts; 10% is about three of them.
	if got, want := float64(n)/(2*seeds), load/(1-load); math.Abs(got/want-1) > 0.1 {
		t.Errorf("%.3f flows in progress per host, want %.3f within 10%%", got, want)
	}
	// Sixteen hosts to random destinations: receivers share too, so
	// flows run slower and more of them are in progress.
	many := make([]int, 16)
	for i := range many {
		many[i] = 10 + i
	}
	flows := InProgress(many, bw, load, Hawkeye, warmup, 9)
	if float64(len(flows))/16 < load/(1-load)/2 || !reflect.DeepEqual(flows, InProgress(many, bw, load, Hawkeye, warmup, 9)) {
		t.Errorf("16 hosts: %d flows in progress, or not deterministic", len(flows))
	}
	// Each resumes at its max-min share: no host link oversubscribed,
	// and every link with a flow on it either full or the flows' own
	// limit elsewhere (a flow below line rate shares a full link).
	out, in := map[int]float64{}, map[int]float64{}
	for _, f := range flows {
		if !(f.Rate > 0) || f.Rate > bw*(1+1e-9) {
			t.Fatalf("flow %+v: rate out of (0, bw]", f)
		}
		out[f.Src] += f.Rate
		in[f.Dst] += f.Rate
	}
	for h, r := range out {
		if r > bw*(1+1e-9) {
			t.Errorf("host %d sends %.3g bit/s in all, over its link", h, r)
		}
	}
	for h, r := range in {
		if r > bw*(1+1e-9) {
			t.Errorf("host %d receives %.3g bit/s in all, over its link", h, r)
		}
	}
	for _, f := range flows {
		if f.Rate < bw*(1-1e-9) && out[f.Src] < bw*(1-1e-6) && in[f.Dst] < bw*(1-1e-6) {
			t.Errorf("flow %+v below line rate with neither its sender's nor its receiver's link full", f)
		}
	}
	for _, bad := range [][]Flow{
		InProgress(hosts[:1], bw, load, Hawkeye, warmup, 1),
		InProgress(hosts, bw, 0, Hawkeye, warmup, 1),
		InProgress(hosts, bw, load, nil, warmup, 1),
		InProgress(hosts, bw, load, Hawkeye, 0, 1),
	} {
		if len(bad) != 0 {
			t.Errorf("%d flows from degenerate input", len(bad))
		}
	}
}

// TestInProgressRepeatable: the same arguments draw the same flows, to the
// byte and the bit of each rate. The fair shares were once found by
// ranging over a map, whose order Go varies from one range to the next:
// when two links tied, the one taken first changed the rounding of the
// shares, and a flow's bytes left by one (6 or 7 of 626 flows here).
func TestInProgressRepeatable(t *testing.T) {
	hosts := make([]int, 128)
	for i := range hosts {
		hosts[i] = i
	}
	for seed := uint64(1); seed <= 3; seed++ {
		a := InProgress(hosts, 100e9, 0.4, Hawkeye, 100_000_000, seed)
		for range 3 {
			if b := InProgress(hosts, 100e9, 0.4, Hawkeye, 100_000_000, seed); !slices.Equal(a, b) {
				t.Fatalf("seed %d: two draws differ", seed)
			}
		}
	}
}

// TestMaxMin: progressive filling on a known case: flows a and b share
// link 0 with c, c also crosses link 1 with d, so a, b and c get a third
// of link 0 and d the rest of link 1; a flow on no link gets nothing.
func TestMaxMin(t *testing.T) {
	got := MaxMin([][]int{{0}, {0}, {0, 1}, {1}, {}}, 2, 90)
	if want := []float64{30, 30, 30, 60, 0}; !slices.Equal(got, want) {
		t.Fatalf("max-min %v, want %v", got, want)
	}
}
