package tuning

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/internal/topo"
)

func TestPaperSpace(t *testing.T) {
	s := PaperSpace("leaf")
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if s.Size() != 3300 {
		t.Fatalf("paper space has %v points, want 3300", s.Size())
	}
	n := 0
	s.Enumerate(func(p Point) bool {
		c, err := s.Config(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Check(c); err != nil {
			t.Fatalf("point %v: %v", p, err)
		}
		if w := c.Scopes["leaf"]; w.Kmax != w.Kmin+500 {
			t.Fatalf("Kmax %d, Kmin %d: want Kmin + 500", w.Kmax, w.Kmin)
		}
		n++
		return true
	})
	if n != 3300 {
		t.Fatalf("enumerated %d points", n)
	}
	two := PaperSpace("leaf", "spine")
	if two.Size() != 3300*3300 {
		t.Fatalf("two scopes: %v points", two.Size())
	}
}

func TestSpaceBounds(t *testing.T) {
	bad := []struct {
		name string
		edit func(*Space)
		want string
	}{
		{"pmax over 100", func(s *Space) { s.Param(ParamPmax).Values = []float64{10, 120} }, "pmax"},
		{"negative headroom", func(s *Space) { s.Param(ParamHeadroom).Values = []float64{-100, 100} }, "headroom"},
		{"alpha zero", func(s *Space) { s.Param(ParamAlpha).Values = []float64{0, 1} }, "alpha"},
		{"descending", func(s *Space) { s.Param(ParamKmin).Values = []float64{500, 0} }, "ascend"},
		{"over the chip", func(s *Space) { s.MaxThresholdCells = 4000 }, "exceeds"},
		{"no scopes", func(s *Space) { s.Scopes = nil }, "no scopes"},
		{"bad scope", func(s *Space) { s.Scopes = []string{"port:leaf0"} }, "port"},
		{"unknown", func(s *Space) { s.Params = append(s.Params, Param{Name: "xoff", Values: []float64{1}}) }, "unknown"},
	}
	for _, b := range bad {
		s := PaperSpace("leaf")
		b.edit(&s)
		err := s.Validate()
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s: %v, want an error about %q", b.name, err, b.want)
		}
	}
	s := PaperSpace("leaf")
	c, _ := s.Config(Point{0, 0, 0, 0})
	w := c.Scopes["leaf"]
	w.Kmin = 6000
	w.Kmax = 6500
	c.Scopes["leaf"] = w
	if err := s.Check(c); err == nil {
		t.Error("Kmin 6000 passed a space bounded at 5000")
	}
	if _, err := s.Config(Point{11, 0, 0, 0}); err == nil {
		t.Error("a point past the last level made a configuration")
	}
}

// Every method, from any seed, proposes only points inside the space,
// and the tuner's guard would refuse anything else.
func TestOptimizersStayInBounds(t *testing.T) {
	s := PaperSpace("leaf", "spine")
	for _, m := range []string{"anneal", "grid", "random", "hillclimb"} {
		for seed := range uint64(5) {
			o, err := NewOptimizer(m, &s, seed, PaperAnneal(), nil)
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(seed, 1))
			for i := range 400 {
				p, ok := o.Next()
				if !ok {
					break
				}
				if !s.Inside(p) {
					t.Fatalf("%s seed %d step %d: %v outside the space", m, seed, i, p)
				}
				c, _ := s.Config(p)
				if err := s.Check(c); err != nil {
					t.Fatalf("%s: %v", m, err)
				}
				o.Tell(r.Float64())
			}
		}
	}
}

func TestCompress(t *testing.T) {
	g, err := topo.FatTree(4, 100e9, 1000)
	if err != nil {
		t.Fatal(err)
	}
	r := g.ShortestPaths()
	// Two senders in pod 0 to a receiver in pod 0 under another tor.
	flows := []Demand{{0, 2}, {1, 2}}
	c := Compress(g, r, flows, CompressOptions{PerLayer: true, OnPathOnly: true, ReceiverSide: true})
	if strings.Join(c.Scopes, ",") != "agg,tor" {
		t.Errorf("scopes %v, want agg and tor (no core on an intra-pod path)", c.Scopes)
	}
	if strings.Join(c.Telemetry, ",") != "tor1" {
		t.Errorf("telemetry %v, want the receiver's tor1", c.Telemetry)
	}
	if c.Switches != 20 || c.OnPath != 4 {
		t.Errorf("%d switches, %d on path; want 20 and 4 (2 tors, 2 aggs)", c.Switches, c.OnPath)
	}
	before, after := c.Log10Size(3300)
	if math.Abs(before-20*math.Log10(3300)) > 1e-9 || math.Abs(after-2*math.Log10(3300)) > 1e-9 {
		t.Errorf("sizes 10^%.1f -> 10^%.1f", before, after)
	}
	all := Compress(g, r, flows, CompressOptions{})
	if len(all.Scopes) != 20 || len(all.Telemetry) != 20 {
		t.Errorf("uncompressed: %d scopes, %d watched", len(all.Scopes), len(all.Telemetry))
	}
}

func TestParseScope(t *testing.T) {
	for in, want := range map[string]string{"leaf": "layer leaf -1", "switch:leaf1": "switch leaf1 -1", "port:leaf1/3": "port leaf1 3"} {
		k, n, p, err := ParseScope(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join([]string{k, n, itoa(p)}, " "); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
	for _, bad := range []string{"", "port:x", "port:x/-1", "a b"} {
		if _, _, _, err := ParseScope(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func itoa(i int) string {
	if i < 0 {
		return "-" + itoa(-i)
	}
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + itoa(i%10)
}
