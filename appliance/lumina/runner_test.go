package lumina

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/collector/luminaanalyzer"
)

func loadReady(t *testing.T, name string) *Test {
	t.Helper()
	tt, err := LoadTest(filepath.Join("testdata", "tests", name))
	if err != nil {
		t.Fatal(err)
	}
	tt.Spec.ResultPath = t.TempDir()
	return tt
}

// TestRunnerLab runs ready-made tests on the in-process testbed and
// checks what lands in the result directory.
func TestRunnerLab(t *testing.T) {
	tt := loadReady(t, "fast-retrans-20k.yml")
	tt.Spec.NumRepeats = 2
	var analysed []string
	r := &Runner{Test: tt, Lab: true, Analyze: func(_ context.Context, dir string, m *luminaanalyzer.Meta) (string, bool, error) {
		analysed = append(analysed, dir)
		if len(m.Conns) != 20 || len(m.Entries) != 20 || !m.Valid || m.Injector.Mirrored == 0 {
			t.Errorf("meta %+v", m)
		}
		return "checked", true, nil
	}}
	sum, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Repeats) != 2 || len(analysed) != 2 {
		t.Fatalf("summary %+v", sum)
	}
	for _, rep := range sum.Repeats {
		if !rep.Valid || rep.Traffic != "ok" || !rep.AnalysisOK || rep.Packets < 400 {
			t.Fatalf("repeat %+v", rep)
		}
		for _, f := range []string{"trace.pcap", "meta.json", "trafficgen.json", "integrity.json", "dumpers.json",
			"dumps/requester-q0.pcap", "dumps/responder-q0.pcap"} {
			if _, err := os.Stat(filepath.Join(rep.Dir, f)); err != nil {
				t.Errorf("repeat %d: %v", rep.Repeat, err)
			}
		}
		m, err := luminaanalyzer.ReadMeta(rep.Dir)
		if err != nil {
			t.Fatal(err)
		}
		var hits uint64
		for _, h := range m.Hits {
			hits += h
		}
		if hits != 20 || m.Responder["out_of_sequence"] == 0 {
			t.Fatalf("repeat %d: %d hits, responder counters %v", rep.Repeat, hits, m.Responder)
		}
	}
	if _, err := os.Stat(filepath.Join(sum.Dir, "summary.json")); err != nil {
		t.Fatal(err)
	}
}

// TestRunnerRetryExceeded: a test whose every retransmission is dropped
// ends in retry exceeded, which is its result, not a failure to run.
func TestRunnerRetryExceeded(t *testing.T) {
	tt := loadReady(t, "timeout-retries.yml")
	sum, err := (&Runner{Test: tt, Lab: true}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rep := sum.Repeats[0]
	if !rep.Valid || !strings.Contains(rep.Traffic, "retry") {
		t.Fatalf("repeat %+v", rep)
	}
}

func TestRunnerRemote(t *testing.T) {
	tt := loadReady(t, "fast-retrans-20k.yml")
	if _, err := (&Runner{Test: tt}).Run(context.Background()); !errors.Is(err, ErrRemote) {
		t.Fatalf("without --lab: %v", err)
	}
}

// TestProfileSlowRestart: slow-restart governs the CNP a CX5 or CX6
// responder sends beside each NAK sequence error; a CX4 never sends one.
func TestProfileSlowRestart(t *testing.T) {
	for _, c := range []struct {
		nic  string
		slow bool
		want bool
	}{{"CX5", true, true}, {"CX5", false, false}, {"CX6", true, true}, {"CX6", false, false}, {"CX4", true, false}} {
		h := HostSpec{NIC: NICSpec{Type: c.nic}, RoCEParameters: RoCEParameters{SlowRestart: c.slow, DCQCNNPEnable: true}}
		if got := profile(h).NAKTriggersCNP; got != c.want {
			t.Errorf("%s slow-restart %v: NAK triggers CNP %v, want %v", c.nic, c.slow, got, c.want)
		}
	}
}
