package dtatranslator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/internal/metrics"
	"github.com/rdma-appliance/appliance/internal/service"
)

// freshWait bounds how long /v1/status?fresh=1 waits for the loop.
const freshWait = 2 * time.Second

// Register adds the translator's endpoints, health checks and metrics
// to an HTTP service:
//
//	GET /v1/status   Status: counters, sequence tracking, each collector's connection;
//	                 ?fresh=1 waits (up to 2 s) for a status the loop published after the
//	                 request (see FreshStatus), as a check that the translator settled needs
//
// /healthz fails while the loop is not running or a collector is down,
// naming the collector and why.
func (s *Service) Register(h *service.Service) {
	h.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		switch f := r.URL.Query().Get("fresh"); f {
		case "":
			service.WriteJSON(w, http.StatusOK, s.Status())
		case "1":
			ctx, cancel := context.WithTimeout(r.Context(), freshWait)
			defer cancel()
			st, err := s.FreshStatus(ctx)
			if err != nil {
				service.WriteError(w, http.StatusServiceUnavailable, fmt.Errorf("dta: no fresh status: %w", err))
				return
			}
			service.WriteJSON(w, http.StatusOK, st)
		default:
			service.WriteError(w, http.StatusBadRequest, fmt.Errorf("dta: fresh=%q: want 1", f))
		}
	})
	h.AddCheck("translator loop", func() error {
		if !s.running.Load() {
			return errors.New("dta: the translator loop is not running")
		}
		return nil
	})
	h.AddCheck("collectors", func() error {
		var down []string
		for _, c := range s.Status().Collectors {
			if !c.Up {
				down = append(down, fmt.Sprintf("%s (%s): %s", c.Name, c.Exchange, c.LastError))
			}
		}
		if len(down) > 0 {
			return fmt.Errorf("down: %s", strings.Join(down, "; "))
		}
		return nil
	})
	type field struct {
		name, help string
		get        func(*ServiceStats) uint64
	}
	for _, f := range []field{
		{"rx_packets_total", "Frames received on the port.", func(x *ServiceStats) uint64 { return x.RxPackets }},
		{"reports_total", "DTA reports received.", func(x *ServiceStats) uint64 { return x.Reports }},
		{"malformed_reports_total", "Reports that did not parse, dropped.", func(x *ServiceStats) uint64 { return x.Malformed }},
		{"rdma_out_packets_total", "RDMA packets sent to collectors.", func(x *ServiceStats) uint64 { return x.RDMAOut }},
		{"rdma_in_packets_total", "ACKs and NAKs received from collectors.", func(x *ServiceStats) uint64 { return x.RDMAIn }},
		{"tx_dropped_total", "Frames dropped for want of buffers or port room.", func(x *ServiceStats) uint64 { return x.TxDropped }},
		{"tx_paused_polls_total", "Polls that took no new work while the port had not taken the last bursts.", func(x *ServiceStats) uint64 { return x.TxPaused }},
		{"backpressured_reports_total", "Reports refused (left to the reporters to resend) while the port was paused.", func(x *ServiceStats) uint64 { return x.Backpressured }},
		{"collector_down_total", "Reports dropped because their collector was down.", func(x *ServiceStats) uint64 { return x.CollectorDown }},
		{"no_collector_total", "Reports no collector serves, dropped.", func(x *ServiceStats) uint64 { return x.NoCollector }},
		{"refused_total", "Reports that did not fit the collector's state, dropped.", func(x *ServiceStats) uint64 { return x.Refused }},
		{"metered_drops_total", "Low-priority reports dropped by the rate meter.", func(x *ServiceStats) uint64 { return x.MeteredDrops }},
		{"queued_total", "High-priority reports queued by the rate meter.", func(x *ServiceStats) uint64 { return x.Queued }},
		{"queue_drops_total", "High-priority reports dropped because the queue was full.", func(x *ServiceStats) uint64 { return x.QueueDrops }},
		{"congestion_notices_total", "Congestion notices sent to reporters.", func(x *ServiceStats) uint64 { return x.Notices }},
		{"taken_high_reports_total", "High-priority reports taken (translated or queued).", func(x *ServiceStats) uint64 { return x.TakenHigh }},
		{"taken_low_reports_total", "Low-priority reports taken (translated).", func(x *ServiceStats) uint64 { return x.TakenLow }},
		{"refused_high_reports_total", "High-priority reports refused (full queue, backpressure): their reporters resend them.", func(x *ServiceStats) uint64 { return x.RefusedHigh }},
		{"dropped_low_reports_total", "Low-priority reports dropped (over the meter, backpressure, a full queue): lost unless retransmittable.", func(x *ServiceStats) uint64 { return x.DroppedLow }},
	} {
		h.Metrics.CounterFunc("appliance_dta_translator_"+f.name, f.help, func() float64 {
			st := s.Status()
			return float64(f.get(&st.Stats))
		})
	}
	h.Metrics.CounterFunc("appliance_dta_translator_poll_loop_polls_total", "Passes of the translator loop (utilisation: the busy ones' rate over this one's).",
		func() float64 { return float64(s.loop.Polls.Load()) })
	h.Metrics.CounterFunc("appliance_dta_translator_poll_loop_busy_polls_total", "Passes of the translator loop that did work.",
		func() float64 { return float64(s.loop.Busy.Load()) })
	h.Metrics.GaugeFunc("appliance_dta_translator_queue_depth", "High-priority reports waiting for the meter.",
		func() float64 { return float64(s.Status().QueueDepth) })
	seq := []struct {
		name, help string
		get        func(*SeqStats) uint64
	}{
		{"nacks_total", "NACKs sent to reporters for gaps in their sequence.", func(x *SeqStats) uint64 { return x.NACKs }},
		{"duplicates_total", "Resent reports already taken, dropped.", func(x *SeqStats) uint64 { return x.Duplicates }},
		{"gaps_total", "Reports dropped because reports before them were lost.", func(x *SeqStats) uint64 { return x.Gaps }},
	}
	for _, f := range seq {
		h.Metrics.CounterFunc("appliance_dta_translator_seq_"+f.name, f.help, func() float64 {
			st := s.Status()
			return float64(f.get(&st.Seq))
		})
	}
	coll := []struct {
		name, help string
		typ        metrics.Type
		get        func(*CollectorStatus) float64
	}{
		{"up", "1 while the collector's RDMA connection is up.", metrics.GaugeType, func(c *CollectorStatus) float64 {
			if c.Up {
				return 1
			}
			return 0
		}},
		{"packets_total", "RDMA packets sent on the current connection.", metrics.CounterType, func(c *CollectorStatus) float64 { return float64(c.Conn.Packets) }},
		{"resyncs_total", "PSN resynchronisations after a collector's NAK.", metrics.CounterType, func(c *CollectorStatus) float64 { return float64(c.Conn.Resyncs) }},
		{"lost_psns_total", "RDMA packets lost to resynchronisations and reconnections.", metrics.CounterType, func(c *CollectorStatus) float64 { return float64(c.LostPSNs) }},
		{"connects_total", "Connections set up through the exchange.", metrics.CounterType, func(c *CollectorStatus) float64 { return float64(c.Connects) }},
	}
	for _, f := range coll {
		h.Metrics.Collect("appliance_dta_translator_collector_"+f.name, f.help, f.typ, []string{"collector"},
			func(emit func(metrics.Sample)) {
				for _, c := range s.Status().Collectors {
					emit(metrics.Sample{Labels: []string{c.Name}, Value: f.get(&c)})
				}
			})
	}
}
