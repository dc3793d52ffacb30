package lumina

import (
	"context"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/collector/luminaanalyzer"
	"github.com/rdma-appliance/appliance/internal/intent"
)

func TestFuzzEventsDeterministic(t *testing.T) {
	a := fuzzEvents(rand.New(rand.NewPCG(7, 1)), 6, 3, 20, true)
	b := fuzzEvents(rand.New(rand.NewPCG(7, 1)), 6, 3, 20, true)
	if !reflect.DeepEqual(a, b) || len(a) == 0 || len(a) > 6 {
		t.Fatalf("%v vs %v", a, b)
	}
	for _, e := range fuzzEvents(rand.New(rand.NewPCG(9, 1)), 8, 2, 5, false) {
		if e.Type != "ecn" {
			t.Fatalf("tx-depth > 1 drew %v", e)
		}
	}
}

// TestMarshalRoundTrip: a written test reads back to the same spec, psn
// as a number.
func TestMarshalRoundTrip(t *testing.T) {
	tt := loadReady(t, "fast-retrans-20k.yml")
	tt.Spec.Traffic.DataPktEvents[3].PSN = "all"
	tt.Spec.Traffic.DataPktEvents[3].Type = "ecn"
	data, err := MarshalTest(&tt.Spec)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "psn: 19") || strings.Contains(string(data), `psn: "19"`) || !strings.Contains(string(data), "psn: all") {
		t.Fatalf("psn not written as a number:\n%s", data)
	}
	back, err := DecodeTest("back.yml", data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Spec, tt.Spec) || back.Intents[3].PSN != intent.AllPSNs {
		t.Fatalf("round trip differs:\n%+v\n%+v", back.Spec, tt.Spec)
	}
}

// TestRunFuzz keeps exactly the valid cases the check flags, as files
// that load again.
func TestRunFuzz(t *testing.T) {
	base := loadReady(t, "fast-retrans-20k.yml")
	base.Spec.Traffic.NumQPs = "2"
	base.NumQPs = 2
	out := t.TempDir()
	cases, err := RunFuzz(context.Background(), FuzzConfig{Base: base, Seed: 3, Cases: 4, Budget: 3, Out: out, Lab: true,
		Check: func(_ context.Context, _ string, m *luminaanalyzer.Meta) ([]string, error) {
			for _, in := range m.Intents {
				if in.Type.String() == "drop" {
					return []string{"a drop"}, nil
				}
			}
			return nil, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	kept := 0
	for _, c := range cases {
		hasDrop := false
		for _, e := range c.Events {
			hasDrop = hasDrop || e.Type == "drop"
		}
		if !c.Valid {
			t.Fatalf("case %d invalid: %+v", c.Index, c)
		}
		if hasDrop != (c.File != "") {
			t.Fatalf("case %+v kept %q", c, c.File)
		}
		if c.File != "" {
			kept++
			if _, err := LoadTest(c.File); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("%d of %d cases kept", kept, len(cases))
}
