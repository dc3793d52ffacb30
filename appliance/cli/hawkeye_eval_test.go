package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/bench/hawkeyeeval"
)

// TestHawkeyeEvalShards: two shards write their scores, merge prints
// the table of both, and --json writes per topology and anomaly type the traces,
// what manifested and every method's figures.
func TestHawkeyeEvalShards(t *testing.T) {
	dir := t.TempDir()
	small := []string{"--traces", "1", "--anomalies", "pfc-storm,flow-contention", "--methods", "hawkeye,full-polling", "--quiet"}
	for _, sh := range []string{"0/2", "1/2"} {
		if code, out, errOut := runCLI(t, append([]string{"hawkeye", "eval", "--shard", sh, "--out", dir}, small...)...); code != 0 {
			t.Fatalf("shard %s: %d %s %s", sh, code, out, errOut)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "hawkeye-eval-shard-*.json"))
	if len(files) != 2 {
		t.Fatalf("shard files %v", files)
	}
	js := filepath.Join(dir, "merged.json")
	code, merged, errOut := runCLI(t, append([]string{"hawkeye", "merge", "--out", dir, "--json", js}, files...)...)
	if code != 0 {
		t.Fatalf("merge: %d %s", code, errOut)
	}
	// Both shards' traces are in the table (bench/hawkeyeeval's tests pin
	// that merged shards score as one run).
	for _, a := range []string{"pfc-storm  ", "flow-contention  "} {
		if !strings.Contains(merged, a) {
			t.Fatalf("merged table lacks %s:\n%s", a, merged)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "hawkeye-eval.txt")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Results []struct {
			Topology   string                                `json:"topology"`
			Anomaly    string                                `json:"anomaly"`
			Traces     *int                                  `json:"traces"`
			Manifested *int                                  `json:"manifested"`
			Methods    map[string]map[string]json.RawMessage `json:"methods"`
		} `json:"results"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 2 || rep.Results[0].Topology != "k4" || rep.Results[0].Anomaly != "pfc-storm" || *rep.Results[0].Traces != 1 ||
		rep.Results[0].Manifested == nil || len(rep.Results[0].Methods) != 2 {
		t.Fatalf("json %s", b)
	}
	for _, f := range []string{"precision", "recall", "top1", "top3", "false_alarms", "bytes_per_incident", "switches_polled", "causal_coverage"} {
		if _, ok := rep.Results[0].Methods["hawkeye"][f]; !ok {
			t.Errorf("json lacks methods.hawkeye.%s", f)
		}
	}
}

// TestHawkeyeEvalBadInput: a flag out of range, an unknown topology,
// anomaly type or method is a usage error naming the flag.
func TestHawkeyeEvalBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--traces", "0"}, "--traces"},
		{[]string{"--traces", "20000"}, "--traces"},
		{[]string{"--topology", "k5"}, "--topology"},
		{[]string{"--topology", "fattree"}, "--topology"},
		{[]string{"--anomalies", "pfc-strom"}, "--anomalies"},
		{[]string{"--methods", "hawkeye,netsite"}, "--methods"},
		{[]string{"--epoch", "10ns"}, "--epoch"},
		{[]string{"--epoch", "5s"}, "--epoch"},
		{[]string{"--threshold", "90"}, "--threshold"},
		{[]string{"--workers", "-1"}, "--workers"},
		{[]string{"--shard", "2/2"}, "--shard"},
		{[]string{"extra"}, "no arguments"},
	} {
		code, _, errOut := runCLI(t, append([]string{"hawkeye", "eval", "--quiet"}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, %q", c.args, code, errOut)
		}
	}
	if code, _, errOut := runCLI(t, "hawkeye", "merge", filepath.Join(t.TempDir(), "none.json")); code != 1 || !strings.Contains(errOut, "none.json") {
		t.Errorf("merge of a missing file: exit %d, %q", code, errOut)
	}
}

// TestHawkeyeSweepPlots: merging the shards of a sweep (scores at two
// epochs and thresholds) draws Figure 7 into the output directory, the
// precision and the recall over the epoch, one line per threshold.
func TestHawkeyeSweepPlots(t *testing.T) {
	dir := t.TempDir()
	var files []string
	for i, p := range []hawkeyeeval.Params{{EpochShift: 17, Threshold: 200}, {EpochShift: 21, Threshold: 500}} {
		tr := &hawkeyeeval.TraceResult{Topology: hawkeyeeval.Topology{K: 4}, Anomaly: hawkeyeeval.Storm, Manifested: true,
			Truth: hawkeyeeval.Truth{Anomaly: hawkeyeeval.Storm, Host: "h3", Outside: hawkeyeeval.NoAnomaly},
			Incidents: []hawkeyeeval.Incident{{Victim: true, Expect: []hawkeyeeval.Anomaly{hawkeyeeval.Storm},
				Results: []hawkeyeeval.Result{{Method: hawkeyeeval.Hawkeye, Verdict: hawkeyeeval.Verdict{Anomaly: hawkeyeeval.Storm, Host: "h3"}}}}}}
		sc := hawkeyeeval.Scores{}
		sc.Tally(p, tr, []hawkeyeeval.Method{hawkeyeeval.Hawkeye})
		path, err := writeShard(dir, "sweep", i, 2, sc.Flatten())
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, path)
	}
	if code, out, errOut := runCLI(t, append([]string{"hawkeye", "merge", "--out", dir}, files...)...); code != 0 || !strings.Contains(out, "Figure 7") {
		t.Fatalf("merge: %d %s %s", code, out, errOut)
	}
	for _, what := range []string{"precision", "recall"} {
		b, err := os.ReadFile(filepath.Join(dir, "hawkeye-figure7-"+what+"-k4.svg"))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"<svg", "average " + what, "threshold 200%", "threshold 500%", "epoch (us)"} {
			if !strings.Contains(string(b), want) {
				t.Errorf("%s plot lacks %q", what, want)
			}
		}
	}
}
