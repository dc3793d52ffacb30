package tunesim

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/tuning"
)

// synthetic is a landscape whose throughput is (1 + point number) bits/s
// on a 1 Gbit/s port with an empty queue: scores rise with the number.
func synthetic() *Landscape {
	sc := SimScenarios()["incast-2"]
	l := &Landscape{Scenario: sc.Name, Space: tuning.PaperSpace(sc.Scopes...), Objective: sc.Objective, Baselines: map[string]tuning.Telemetry{}}
	tel := func(tput float64) tuning.Telemetry {
		return tuning.Telemetry{Duration: int64(time.Millisecond), Switches: []tuning.SwitchStats{{Name: "leaf1", Layer: "leaf",
			Ports: []tuning.PortStats{{Port: 1, Capacity: 1e9, Throughput: tput}}}}}
	}
	n := int(l.Space.Size())
	for i := range n {
		l.Tel = append(l.Tel, tel(1e9*float64(i+1)/float64(n)))
	}
	// The experience preset sits at the 90th percentile, another at the
	// 50th: 10% of the grid beats the best baseline.
	l.Baselines["experience"] = tel(1e9 * 0.9)
	l.Baselines["dcqcn"] = tel(1e9 * 0.5)
	return l
}

// TestDiscriminateShares: the grid's best, its near-optimal share and the
// shares beating the baselines come out of the landscape exactly; point
// numbers follow the space's enumeration; every method gets its budget.
func TestDiscriminateShares(t *testing.T) {
	l := synthetic()
	r, err := Discriminate(l, NormFixed, []int{33, 330}, 10)
	if err != nil {
		t.Fatal(err)
	}
	n := float64(len(l.Tel))
	if want := 0.5*1 + 0.5*1.0; math.Abs(r.GridBest-want) > 1e-12 {
		t.Fatalf("grid best %g, want %g", r.GridBest, want)
	}
	// Within 1% of 1.0 on a throughput term weighted 0.5: tput >= 0.98.
	if want := math.Floor(0.02*n+1e-9) + 1; math.Abs(r.NearOptimal*n-want) > 1 {
		t.Errorf("near-optimal %g points, want %g", r.NearOptimal*n, want)
	}
	if r.BestBaseline != "experience" || math.Abs(r.BeatBest-0.1) > 1/n || math.Abs(r.BeatThroughput-0.1) > 1/n {
		t.Errorf("best baseline %s, beaten by %g (throughput %g), want experience by 0.1", r.BestBaseline, r.BeatBest, r.BeatThroughput)
	}
	for _, m := range DiscMethods {
		sp := r.Methods[m]
		if len(sp) != 2 || len(sp[0].Ratios) != 10 || sp[1].Worst > sp[1].Median || sp[1].Median > 1 {
			t.Errorf("%s: %+v", m, sp)
		}
	}
	sp := l.Space
	last := tuning.Point{10, 9, 5, 4}
	if pointIndex(&sp, last) != len(l.Tel)-1 || pointIndex(&sp, tuning.Point{0, 0, 0, 1}) != 1 {
		t.Error("point numbers do not follow the enumeration")
	}
}

// TestDiscriminatePair: the pair's grid is the sum of the two, and its
// shares, counted by sorting, match counting pairs one by one.
func TestDiscriminatePair(t *testing.T) {
	a, b := synthetic(), synthetic()
	r, err := DiscriminatePair(a, b, NormFixed, []int{100}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if r.GridBest != 2 || r.Points != len(a.Tel)*len(b.Tel) {
		t.Fatalf("pair grid best %g over %d points", r.GridBest, r.Points)
	}
	sa, ba, _ := a.scores(NormFixed)
	best := 2 * ba["experience"]
	cnt := 0
	for _, x := range sa {
		for _, y := range sa {
			if x+y > best {
				cnt++
			}
		}
	}
	if got := r.BeatBest * float64(r.Points); math.Abs(got-float64(cnt)) > 0.5 {
		t.Fatalf("pairs beating the best baseline: %g, counted %d", got, cnt)
	}
}

// TestLandscapeFiles: the committed landscapes read back whole (every grid
// point and the five presets) and survive a write and read.
func TestLandscapeFiles(t *testing.T) {
	for _, name := range []string{"incast-2", "incast-39", "mixed"} {
		l, err := ReadLandscape(filepath.Join("testdata", "landscape-"+name+".csv.gz"))
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Tel) != 3300 || len(l.Baselines) != len(tuning.BaselineNames()) {
			t.Fatalf("%s: %d points, %d baselines", name, len(l.Tel), len(l.Baselines))
		}
		var buf bytes.Buffer
		if err := WriteLandscape(&buf, l, time.Duration(l.Tel[0].Duration)); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "l.csv.gz")
		if err := writeFile(path, buf.Bytes()); err != nil {
			t.Fatal(err)
		}
		l2, err := ReadLandscape(path)
		if err != nil {
			t.Fatal(err)
		}
		s1, _, _ := l.scores(NormEq14)
		s2, _, _ := l2.scores(NormEq14)
		for i := range s1 {
			if math.Abs(s1[i]-s2[i]) > 1e-6*math.Abs(s1[i]) {
				t.Fatalf("%s point %d: %g then %g", name, i, s1[i], s2[i])
			}
		}
	}
}

func writeFile(path string, b []byte) error { return os.WriteFile(path, b, 0o644) }
