package tuning

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// TelemetrySource supplies a real network's telemetry: gNMI, SNMP, an INT
// collector or DTA counters behind one call.
type TelemetrySource interface {
	Read(ctx context.Context, d time.Duration) (Telemetry, error)
}

// HTTPSource reads Telemetry as JSON from a collector's URL (GET, with
// ?duration=NANOSECONDS), the form an INT or DTA collector exposes to
// the tuner. It waits d first so the interval is measured under the new
// configuration.
type HTTPSource struct {
	URL    string
	Client *http.Client
}

// Read waits d, then fetches.
func (h HTTPSource) Read(ctx context.Context, d time.Duration) (Telemetry, error) {
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return Telemetry{}, fmt.Errorf("%w: %w", ErrNoTelemetry, ctx.Err())
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s?duration=%d", h.URL, d.Nanoseconds()), nil)
	if err != nil {
		return Telemetry{}, err
	}
	cl := h.Client
	if cl == nil {
		cl = http.DefaultClient
	}
	resp, err := cl.Do(req)
	if err != nil {
		return Telemetry{}, fmt.Errorf("%w: %s: %w", ErrNoTelemetry, h.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Telemetry{}, fmt.Errorf("%w: %s: %s", ErrNoTelemetry, h.URL, resp.Status)
	}
	return decodeTelemetry(resp.Body, h.URL, d)
}

// decodeTelemetry reads a collector's answer: JSON telemetry whose
// figures are measurements (Telemetry.Check), over d when it says no
// interval.
func decodeTelemetry(r io.Reader, from string, d time.Duration) (Telemetry, error) {
	var t Telemetry
	if err := json.NewDecoder(r).Decode(&t); err != nil {
		return Telemetry{}, fmt.Errorf("telemetry from %s: %w", from, err)
	}
	if err := t.Check(); err != nil {
		return Telemetry{}, fmt.Errorf("telemetry from %s: %w", from, err)
	}
	if t.Duration == 0 {
		t.Duration = d.Nanoseconds()
	}
	return t, nil
}

// StubSource is a stand-in that returns fixed telemetry; it is what a
// switch target uses in tests and dry runs, and says so in Source.
type StubSource struct{ T Telemetry }

// Read returns the fixed telemetry.
func (s StubSource) Read(_ context.Context, d time.Duration) (Telemetry, error) {
	t := s.T
	t.Source = "stub (fixed telemetry, not measured)"
	if t.Duration == 0 {
		t.Duration = d.Nanoseconds()
	}
	return t, nil
}
