package tuning

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// DTASource reads INT report counts from a DTA collector: switches append
// one INT report per sampled packet of a port to that port's Append list
// (appliance dta report, or a Tofino reporter), the collector's pollers
// count them, and the tuner turns the counts into throughput with Eq. 16
// (the paper's "throughput inferred from INT report counts"). Queue depth
// is not in an Append stream, so the objective's queue term reads zero:
// pair it with a source that has queues, or weight throughput alone.
type DTASource struct {
	// Collector is the collector's HTTP address (appliance dta collect's
	// --listen); Client may be nil.
	Collector string
	Client    *http.Client
	// Lists maps a DTA list id to the port its reports are about.
	Lists map[uint32]DTAPort
}

// DTAPort is the switch port one Append list reports on.
type DTAPort struct {
	Switch, Layer string
	Port          int
	Capacity      float64 // line rate, bits/s
	SampleRate    float64 // reports per packet
	AvgPacket     float64 // bytes
}

var _ TelemetrySource = (*DTASource)(nil)

// Read counts each list's entries over d (the difference of the pollers'
// counts before and after) and returns them as INT report counts per port.
func (s *DTASource) Read(ctx context.Context, d time.Duration) (Telemetry, error) {
	before, err := s.counts(ctx)
	if err != nil {
		return Telemetry{}, err
	}
	t0 := time.Now()
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return Telemetry{}, fmt.Errorf("%w: %w", ErrNoTelemetry, ctx.Err())
	}
	after, err := s.counts(ctx)
	if err != nil {
		return Telemetry{}, err
	}
	t := Telemetry{Duration: time.Since(t0).Nanoseconds(), Source: "dta collector " + s.Collector}
	bySwitch := map[string]int{}
	for id, p := range s.Lists {
		a, ok := after[id]
		if !ok {
			return Telemetry{}, fmt.Errorf("%w: collector %s serves no list %d", ErrNoTelemetry, s.Collector, id)
		}
		ps := PortStats{Port: p.Port, Capacity: p.Capacity, Reports: a - before[id], SampleRate: p.SampleRate, AvgPacket: p.AvgPacket}
		i, ok := bySwitch[p.Switch]
		if !ok {
			i = len(t.Switches)
			bySwitch[p.Switch] = i
			t.Switches = append(t.Switches, SwitchStats{Name: p.Switch, Layer: p.Layer})
		}
		t.Switches[i].Ports = append(t.Switches[i].Ports, ps)
	}
	return t, nil
}

// counts reads every list's entries read so far.
func (s *DTASource) counts(ctx context.Context) (map[uint32]uint64, error) {
	url := strings.TrimSuffix(s.Collector, "/") + "/v1/lists"
	if !strings.Contains(url, "://") {
		url = "http://" + url
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	cl := s.Client
	if cl == nil {
		cl = http.DefaultClient
	}
	resp, err := cl.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrNoTelemetry, url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: %s: %s", ErrNoTelemetry, url, resp.Status)
	}
	var lists []struct {
		ID   uint32 `json:"id"`
		Read uint64 `json:"read"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&lists); err != nil {
		return nil, fmt.Errorf("dta collector lists from %s: %w", url, err)
	}
	out := make(map[uint32]uint64, len(lists))
	for _, l := range lists {
		out[l.ID] = l.Read
	}
	return out, nil
}
