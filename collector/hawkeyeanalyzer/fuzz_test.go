package hawkeyeanalyzer

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
)

// FuzzDiagnose feeds arbitrary JSON through Decode and the whole analysis:
// nothing may panic, every diagnosis renders as JSON (no NaN), text and
// DOT, its confidence stays in [0,1], its root causes are ranked, and an
// unknown diagnosis names no root cause but says what is missing.
func FuzzDiagnose(f *testing.F) {
	c := newIncast()
	r, _ := newInLoop()
	oc, _ := newOutOfLoopContention()
	s, _ := newContention()
	for _, tel := range []*hawkeyewire.Telemetry{c.s.telemetry(), newStorm().s.telemetry(), r.s.telemetry(),
		newOutOfLoopInjection().s.telemetry(), oc.s.telemetry(), s.telemetry(), without(c.s.telemetry(), "SW4")} {
		b, err := json.Marshal(tel)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	// A port record with the optional transmitted-PFC counter.
	ps := c.s.telemetry()
	ps.Reports[0].Epochs[0].Ports[0].PauseSent = 7
	if b, err := json.Marshal(ps); err == nil {
		f.Add(b)
	}
	// A victim no switch paused, whose sender's NIC its switch paused.
	nc := newIncast()
	nc.s.victim = nc.s.flow("X", "Y", 1003)
	nc.s.hop("SW1", nc.s.victim, 3, 4, 4, 0, 100)
	nt := nc.s.telemetry() // Reports[0] is SW1's
	nt.Reports[0].Epochs[0].Ports = append(nt.Reports[0].Epochs[0].Ports, hawkeyewire.PortRecord{Port: 3, PauseSent: 40})
	if b, err := json.Marshal(nt); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"victim":{"src":1},"reports":[{"switch":"a","truncated":true,"epochs":[{}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tel, err := Decode(bytes.NewReader(data))
		if err != nil {
			return
		}
		d := Diagnose(tel, Options{})
		var buf bytes.Buffer
		if err := d.WriteJSON(&buf); err != nil {
			t.Fatalf("json: %v", err)
		}
		if err := d.WriteText(&buf); err != nil {
			t.Fatalf("text: %v", err)
		}
		if dot := d.DOT(); !bytes.HasPrefix(dot, []byte("digraph")) {
			t.Fatalf("dot: %q", dot)
		}
		if math.IsNaN(d.Confidence) || d.Confidence < 0 || d.Confidence > 1 {
			t.Fatalf("confidence %v", d.Confidence)
		}
		if d.Type != None && d.Type != Unknown && !slices.Contains(Anomalies, d.Type) {
			t.Fatalf("type %q", d.Type)
		}
		if d.Type == Unknown && (len(d.RootCauses) > 0 || len(d.Problems) == 0) {
			t.Fatalf("unknown with root causes %+v, problems %v", d.RootCauses, d.Problems)
		}
		for i := 1; i < len(d.RootCauses); i++ {
			if d.RootCauses[i].Contribution > d.RootCauses[i-1].Contribution {
				t.Fatalf("root causes not ranked: %+v", d.RootCauses)
			}
		}
	})
}

// FuzzDecodeStrict: a telemetry file is read strictly or refused saying
// where; what DecodeStrict reads, Decode reads the same; and it survives
// the round trip through the writers' encoding (what the agents write,
// the strict reader takes back unchanged).
func FuzzDecodeStrict(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.json")
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"event":1,"victim":null,"time_ns":0,"hosts":null,"links":[{"a":"x","a_port":1,"host":"h"}],"reports":[]} 1`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tel, err := DecodeStrict(bytes.NewReader(data))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "telemetry") {
				t.Fatalf("error says not where: %v", err)
			}
			return
		}
		loose, err := Decode(bytes.NewReader(data))
		if err != nil || !reflect.DeepEqual(tel, loose) {
			t.Fatalf("Decode differs: %v", err)
		}
		b, err := json.Marshal(tel)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		back, err := DecodeStrict(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("the writers' encoding refused: %v\n%s", err, b)
		}
		if !reflect.DeepEqual(tel, back) {
			t.Fatalf("round trip changed the telemetry:\n%s", b)
		}
	})
}
