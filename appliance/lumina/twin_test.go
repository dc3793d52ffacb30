package lumina

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// runTwin runs a ready-made test once on the virtual testbed and returns
// the repeat and its merged trace.
func runTwin(t *testing.T, tt *Test, adjust func(*TestbedConfig)) (RepeatResult, []byte) {
	t.Helper()
	tt.Spec.ResultPath = t.TempDir()
	tt.Spec.NumRepeats = 1
	sum, err := (&Runner{Test: tt, Lab: true, Testbed: adjust}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rep := sum.Repeats[0]
	b, err := os.ReadFile(filepath.Join(rep.Dir, tt.Spec.AggregatePcapFilename))
	if err != nil {
		t.Fatal(err)
	}
	return rep, b
}

// TestTwinDeterministic: two runs of one test on the virtual testbed give
// byte-identical aggregate traces, and the wall-clock mode is still there.
func TestTwinDeterministic(t *testing.T) {
	for _, name := range []string{"fast-retrans-20k.yml", "cnp-pacing.yml"} {
		t.Run(name, func(t *testing.T) {
			rep1, tr1 := runTwin(t, loadReady(t, name), nil)
			rep2, tr2 := runTwin(t, loadReady(t, name), nil)
			if !rep1.Valid || !rep2.Valid || rep1.Traffic != "ok" {
				t.Fatalf("repeats %+v / %+v", rep1, rep2)
			}
			if len(tr1) == 0 || !bytes.Equal(tr1, tr2) {
				first := -1
				for i := range min(len(tr1), len(tr2)) {
					if tr1[i] != tr2[i] {
						first = i
						break
					}
				}
				t.Fatalf("traces differ: %d and %d bytes, first at %d", len(tr1), len(tr2), first)
			}
		})
	}
}

// paperNACK is what Lumina's Figures 8 and 9 report per NIC: the NACK
// generation latency (about 1.1 us on every ConnectX) and the range of the
// NACK reaction latency.
var paperNACK = map[string]struct {
	gen                 float64 // us
	reactLow, reactHigh float64 // us
}{
	"CX4": {1.1, 150, 200},
	"CX5": {1.1, 3, 6},
	"CX6": {1.1, 3, 6},
}

// nackSample runs Figures 8/9's setting once (NACKSample) and returns the
// NACK generation and reaction latencies, in microseconds.
func nackSample(t *testing.T, nic string, size, psn int) (gen, react float64) {
	t.Helper()
	gen, react, err := NACKSample(context.Background(), t.TempDir(), nic, size, psn)
	if err != nil {
		t.Fatal(err)
	}
	return gen, react
}

// TestTwinPaperNACK reproduces Lumina's Figures 8 and 9 on the twin, in the
// paper's setting (one connection, one packet of a 20 KB or 100 KB WRITE
// dropped, the position swept), per ConnectX profile, from the traces with
// Lumina's analyzer: the mean NACK generation latency within 10% of the
// paper's 1.1 us, the mean reaction latency inside the paper's range, and
// for CX5/CX6 the 100 KB levels of Figure 9(b): about 6 us when one of the
// first 20 packets is dropped (within 10%), about 3 us for a later one
// (from the 50th; the twin ramps between the two). The 20 KB sweep takes
// every position but the tail (whose loss a timeout recovers); the 100 KB
// one every position of the first 20 and every fifth after, to keep the
// test short.
func TestTwinPaperNACK(t *testing.T) {
	for _, nic := range []string{"CX4", "CX5", "CX6"} {
		t.Run(nic, func(t *testing.T) {
			want := paperNACK[nic]
			var gen, react, early, late []float64
			for psn := 0; psn < 19; psn++ {
				g, r := nackSample(t, nic, 20<<10, psn)
				gen, react = append(gen, g), append(react, r)
			}
			for psn := 0; psn < 99; psn++ {
				if psn >= 20 && psn%5 != 0 {
					continue
				}
				g, r := nackSample(t, nic, 100<<10, psn)
				gen, react = append(gen, g), append(react, r)
				if psn < 20 {
					early = append(early, r)
				} else if psn >= 50 {
					late = append(late, r)
				}
			}
			g, r := mean(gen), mean(react)
			t.Logf("%s: NACK generation %.2f us (paper %.1f), reaction %.2f us (paper %g-%g); 100 KB reaction %.2f us for the first 20 packets (%.2f-%.2f), %.2f us from the 50th (%d samples)",
				nic, g, want.gen, r, want.reactLow, want.reactHigh, mean(early), slices.Min(early), slices.Max(early), mean(late), len(gen))
			if math.Abs(g-want.gen) > 0.1*want.gen {
				t.Errorf("NACK generation %.3f us, paper %.1f us: more than 10%% off", g, want.gen)
			}
			if r < want.reactLow || r > want.reactHigh {
				t.Errorf("NACK reaction %.2f us, outside the paper's %g-%g us", r, want.reactLow, want.reactHigh)
			}
			if nic != "CX4" {
				// Figure 9(b): a retransmission early in a long message
				// waits for the transmit pipeline to drain, a late one
				// only for the NAK's processing.
				if e := mean(early); math.Abs(e-6) > 0.6 {
					t.Errorf("100 KB, first 20 packets: reaction %.2f us, paper about 6 us", e)
				}
				if l := mean(late); math.Abs(l-3) > 0.3 {
					t.Errorf("100 KB, later packets: reaction %.2f us, paper about 3 us", l)
				}
			}
		})
	}
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}
