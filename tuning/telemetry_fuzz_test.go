package tuning

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

// FuzzTelemetry: a collector's answer (JSON telemetry over HTTP) is read
// or refused, never a panic; what is read scores finite under the paper's
// objective and the fixed normalisation, each switch's term of the fixed
// one in [0, 1].
func FuzzTelemetry(f *testing.F) {
	good := Telemetry{Duration: 1e9, Switches: []SwitchStats{{Name: "leaf1", Ports: []PortStats{
		{Port: 1, Capacity: 100e9, Throughput: 60e9, QueueMean: 1e5, QueueP99: 3e5, QueueMax: 5e5},
		{Port: 2, Capacity: 100e9, Reports: 1000, SampleRate: 0.01, AvgPacket: 1024}}}},
		Flows: []FlowStats{{ID: 1, Throughput: 3e9, Queue: 100}, {ID: 2, Throughput: 1e9}}}
	b, _ := json.Marshal(good)
	f.Add(string(b))
	f.Add(`{"duration_ns":1,"switches":[{"name":"s","ports":[{"capacity_bps":1e308,"throughput_bps":1e308},{"capacity_bps":1e308,"throughput_bps":1e308}]}]}`)
	f.Add(`{"switches":[{"name":"s","ports":[{"queue_mean_bytes":-1}]}]}`)
	f.Add(`{"duration_ns":1,"switches":[{"name":"s","ports":[{"int_reports":18446744073709551615,"int_sample_rate":1e-300,"int_avg_packet_bytes":1e300}]}]}`)
	fixed := DefaultObjective()
	fixed.Norm, fixed.QueueRef = Fixed, 1e5
	fair := DefaultObjective()
	fair.Fairness = true
	f.Fuzz(func(t *testing.T, body string) {
		tel, err := decodeTelemetry(strings.NewReader(body), "fuzz", time.Second)
		if err != nil {
			return
		}
		for _, o := range []Objective{DefaultObjective(), fixed, fair} {
			s, err := o.Score(tel, &HistoryBest{})
			if err != nil {
				continue
			}
			if math.IsNaN(s) || math.IsInf(s, 0) || s < 0 {
				t.Fatalf("score %v", s)
			}
			if o.Norm == Fixed && !o.Fairness && s > float64(len(tel.Switches))+1e-9 {
				t.Fatalf("fixed score %v over %d switches", s, len(tel.Switches))
			}
		}
	})
}

// TestTelemetryRefused: a collector's negative queue (which scored above
// an empty one) is refused when read, and a score past float64's range is
// an error, not NaN.
func TestTelemetryRefused(t *testing.T) {
	if _, err := decodeTelemetry(strings.NewReader(`{"switches":[{"name":"s","ports":[{"queue_mean_bytes":-1}]}]}`), "x", time.Second); err == nil {
		t.Error("a negative queue read")
	}
	tel, err := decodeTelemetry(strings.NewReader(`{"duration_ns":1,"switches":[{"name":"s","ports":[{"capacity_bps":1e308,"throughput_bps":1e308},{"capacity_bps":1e308,"throughput_bps":1e308}]}]}`), "x", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultObjective()
	if s, err := o.Score(tel, &HistoryBest{}); err == nil {
		t.Errorf("score %v", s)
	}
}
