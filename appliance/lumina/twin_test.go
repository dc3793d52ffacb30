package lumina

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
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
