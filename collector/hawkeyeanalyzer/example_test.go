package hawkeyeanalyzer

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
)

var update = flag.Bool("update", false, "rewrite testdata/*.json from the hand-built cases")

// examples are the hand-built cases as telemetry files (what `appliance
// hawkeye diagnose` reads), with the type each must be diagnosed as.
func examples() map[string]struct {
	tel  *hawkeyewire.Telemetry
	want Anomaly
} {
	c := newIncast()
	r, _ := newInLoop()
	oc, _ := newOutOfLoopContention()
	s, _ := newContention()
	type ex = struct {
		tel  *hawkeyewire.Telemetry
		want Anomaly
	}
	return map[string]ex{
		"incast.json":                  {c.s.telemetry(), Incast},
		"storm.json":                   {newStorm().s.telemetry(), Storm},
		"deadlock-in-loop.json":        {r.s.telemetry(), DeadlockInLoop},
		"deadlock-out-injection.json":  {newOutOfLoopInjection().s.telemetry(), DeadlockOutOfLoopInjection},
		"deadlock-out-contention.json": {oc.s.telemetry(), DeadlockOutOfLoopContention},
		"contention.json":              {s.telemetry(), Contention},
		"incast-missing-sw4.json":      {without(c.s.telemetry(), "SW4"), Unknown},
	}
}

func TestExampleFiles(t *testing.T) {
	for name, ex := range examples() {
		path := filepath.Join("testdata", name)
		if *update {
			b, err := json.MarshalIndent(ex.tel, "", " ")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatalf("%v (run with -update to write the examples)", err)
		}
		tel, err := Decode(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if d := Diagnose(tel, Options{}); d.Type != ex.want {
			t.Errorf("%s: %s, want %s", name, d.Type, ex.want)
		}
	}
}
