package inject

import (
	"errors"
	"net/http"

	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/metrics"
	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/internal/service"
)

// LoadRequest is the body of POST /v1/load: the test's intents, the
// traffic generator's runtime metadata and the message geometry.
type LoadRequest struct {
	Intents  []intent.Intent `json:"intents"`
	Conns    []intent.Conn   `json:"connections"`
	Geometry intent.Geometry `json:"geometry"`
	// SendConns is, for send_read, how many of the first connections carry
	// SEND.
	SendConns int `json:"send_connections,omitempty"`
	// OneBased reads qpn and psn as counted from 1 (the paper's listings).
	OneBased bool `json:"one_based,omitempty"`
	// Reset zeroes the counters and the mirror sequence too, as before a
	// test (the usual case).
	Reset bool `json:"reset,omitempty"`
}

// EntryHits is one entry of GET /v1/entries.
type EntryHits struct {
	Entry string `json:"entry"`
	Event string `json:"event"`
	Hits  uint64 `json:"hits"`
}

// Register adds the injector's control endpoints and metrics to a service:
//
//	POST /v1/load     compile and load intents against metadata (LoadRequest)
//	GET  /v1/entries  the loaded entries with hit counts
//	GET  /v1/stats    per-port counters, RoCE packets received, copies mirrored
//	POST /v1/reset    zero the counters and the mirror sequence
func (in *Injector) Register(s *service.Service) {
	s.HandleFunc("POST /v1/load", func(w http.ResponseWriter, r *http.Request) {
		var req LoadRequest
		if err := service.ReadJSON(r, &req); err != nil {
			service.WriteError(w, http.StatusBadRequest, err)
			return
		}
		es, err := in.Load(req.Intents, req.Conns, req.Geometry, intent.Options{SendConns: req.SendConns, OneBased: req.OneBased})
		if err != nil {
			service.WriteError(w, http.StatusUnprocessableEntity, err)
			return
		}
		if req.Reset {
			in.Reset()
		}
		s.Log.Info("event table loaded", "intents", len(req.Intents), "connections", len(req.Conns), "entries", len(es))
		service.WriteJSON(w, http.StatusOK, map[string]any{"entries": len(es), "iter_mode": in.table.Mode().String()})
	})
	s.HandleFunc("GET /v1/entries", func(w http.ResponseWriter, _ *http.Request) {
		es, hits := in.table.Entries()
		out := make([]EntryHits, len(es))
		for i, e := range es {
			out[i] = EntryHits{Entry: e.String(), Event: e.Event.String(), Hits: hits[i]}
		}
		service.WriteJSON(w, http.StatusOK, out)
	})
	s.HandleFunc("GET /v1/stats", func(w http.ResponseWriter, _ *http.Request) {
		service.WriteJSON(w, http.StatusOK, in.Stats())
	})
	s.HandleFunc("POST /v1/reset", func(w http.ResponseWriter, _ *http.Request) {
		in.Reset()
		service.WriteJSON(w, http.StatusOK, in.Stats())
	})
	s.AddCheck("injector loop", func() error {
		if !in.running.Load() {
			return errNotRunning
		}
		return nil
	})
	s.Metrics.CounterFunc("appliance_inject_roce_rx_packets_total", "RoCE packets received on the traffic ports.",
		func() float64 { return float64(in.rxRoCE.Load()) })
	s.Metrics.CounterFunc("appliance_inject_poll_loop_polls_total", "Passes of the pipeline loop (utilisation: the busy ones' rate over this one's).",
		func() float64 { return float64(in.loop.Polls.Load()) })
	s.Metrics.CounterFunc("appliance_inject_poll_loop_busy_polls_total", "Passes of the pipeline loop that did work.",
		func() float64 { return float64(in.loop.Busy.Load()) })
	s.Metrics.CounterFunc("appliance_inject_mirror_sequence_total", "Mirrored copies made (the last mirror sequence number).",
		func() float64 { return float64(in.seq.Load()) })
	type field struct {
		name, help string
		get        func(mirror.PortStats) uint64
	}
	for _, f := range []field{
		{"rx_packets_total", "Frames received per port.", func(p mirror.PortStats) uint64 { return p.RxPackets }},
		{"rx_roce_packets_total", "RoCE packets received per port.", func(p mirror.PortStats) uint64 { return p.RxRoCE }},
		{"tx_packets_total", "Frames transmitted per port.", func(p mirror.PortStats) uint64 { return p.TxPackets }},
		{"tx_dropped_total", "Frames dropped because a transmit queue stayed full.", func(p mirror.PortStats) uint64 { return p.TxDropped }},
		{"mirrored_packets_total", "Mirrored copies sent per mirror port.", func(p mirror.PortStats) uint64 { return p.Mirrored }},
		{"event_drop_total", "Packets dropped by a drop event.", func(p mirror.PortStats) uint64 { return p.Dropped }},
		{"event_ecn_total", "Packets ECN-marked by an event.", func(p mirror.PortStats) uint64 { return p.ECNMarked }},
		{"event_corrupt_total", "Packets corrupted by a bit-error event.", func(p mirror.PortStats) uint64 { return p.Corrupted }},
		{"malformed_total", "Frames that did not decode.", func(p mirror.PortStats) uint64 { return p.Malformed }},
		{"no_route_total", "Frames without a route.", func(p mirror.PortStats) uint64 { return p.NoRoute }},
	} {
		s.Metrics.Collect("appliance_inject_port_"+f.name, f.help, metrics.CounterType, []string{"port", "role"},
			func(emit func(metrics.Sample)) {
				for _, p := range in.Stats().Ports {
					emit(metrics.Sample{Labels: []string{p.Name, p.Role}, Value: float64(f.get(p))})
				}
			})
	}
}

var errNotRunning = errors.New("inject: the pipeline loop is not running")
