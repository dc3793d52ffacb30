package tuning

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// TestDTASource: report counts are the difference of the collector's list
// counts over the interval, and Eq. 16 turns them into throughput; a list
// the collector lacks stops the run with the reason.
func TestDTASource(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/lists" {
			http.NotFound(w, r)
			return
		}
		n := uint64(calls.Add(1))
		// 1000 reports on list 1 and 250 on list 2 between the reads.
		_ = json.NewEncoder(w).Encode([]map[string]any{{"id": 1, "read": 5000 + 1000*(n-1)}, {"id": 2, "read": 250 * (n - 1)}})
	}))
	defer srv.Close()
	s := &DTASource{Collector: srv.URL, Lists: map[uint32]DTAPort{
		1: {Switch: "leaf0", Layer: "tor", Port: 3, Capacity: 100e9, SampleRate: 0.01, AvgPacket: 1000},
		2: {Switch: "leaf0", Layer: "tor", Port: 4, Capacity: 100e9, SampleRate: 0.01, AvgPacket: 1000},
	}}
	tel, err := s.Read(context.Background(), 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(tel.Switches) != 1 || len(tel.Switches[0].Ports) != 2 {
		t.Fatalf("%+v", tel)
	}
	for _, p := range tel.Switches[0].Ports {
		want := uint64(1000)
		if p.Port == 4 {
			want = 250
		}
		if p.Reports != want {
			t.Fatalf("port %d: %d reports, want %d", p.Port, p.Reports, want)
		}
		got := p.PortThroughput(tel.Duration)
		exp := INTThroughput(want, 1000, 0.01, tel.Duration)
		if math.Abs(got-exp) > 1e-6*exp {
			t.Fatalf("port %d: throughput %g, Eq. 16 gives %g", p.Port, got, exp)
		}
	}
	s.Lists[9] = DTAPort{Switch: "x"}
	if _, err := s.Read(context.Background(), time.Millisecond); !errors.Is(err, ErrNoTelemetry) {
		t.Fatalf("missing list: %v", err)
	}
	s.Collector = "127.0.0.1:1"
	if _, err := s.Read(context.Background(), time.Millisecond); !errors.Is(err, ErrNoTelemetry) {
		t.Fatalf("no collector: %v", err)
	}
}
