package dtacollector

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/internal/metrics"
	"github.com/rdma-appliance/appliance/internal/service"
	"github.com/rdma-appliance/appliance/verbs"
)

// Register adds the collector's endpoints, health checks and metrics to
// an HTTP service:
//
//	GET /v1/regions                       RegionsInfo: the offer (address, MTU, regions) and memory
//	GET /v1/connections                   []ConnState: the translators connected now
//	GET /v1/stats                         Stats: connections, push notifications, lists, memory
//	GET /v1/keywrite/{key}?consensus=k    KeyWriteResult
//	GET /v1/keyincrement/{key}            KeyIncrementResult
//	GET /v1/sketches/{id}/count/{key}     SketchCountResult (count-min)
//	GET /v1/sketches/{id}/cardinality     CardinalityResult (hyperloglog)
//	GET /v1/postcards/{key}?expect=h0,h1  PostcardResult (complete, missing hops); with expect,
//	                                      every reported hop checked against the path (409 if not)
//	GET /v1/lists                         []ListStatus
//	GET /v1/lists/{id}?recent=n           ListStatus with the latest n entries
//
// Keys are decimal, 0x-hex or dotted IPv4. Unknown lists and sketches,
// primitives the collector does not serve and absent keys answer 404,
// disagreeing slots and a path that differs 409, malformed queries 400, each with the reason.
// /healthz fails while the device port is down or Serve is not running.
func (c *Collector) Register(h *service.Service) {
	h.HandleFunc("GET /v1/regions", func(w http.ResponseWriter, _ *http.Request) {
		service.WriteJSON(w, http.StatusOK, c.Info())
	})
	h.HandleFunc("GET /v1/connections", func(w http.ResponseWriter, _ *http.Request) {
		service.WriteJSON(w, http.StatusOK, c.Connections())
	})
	h.HandleFunc("GET /v1/stats", func(w http.ResponseWriter, _ *http.Request) {
		service.WriteJSON(w, http.StatusOK, c.Stats())
	})
	h.HandleFunc("GET /v1/keywrite/{key}", func(w http.ResponseWriter, r *http.Request) {
		key, err := ParseKey(r.PathValue("key"))
		if err != nil {
			queryError(w, err)
			return
		}
		k := 0
		if s := r.URL.Query().Get("consensus"); s != "" {
			if k, err = strconv.Atoi(s); err != nil {
				queryError(w, fmt.Errorf("consensus %q: %w", s, ErrBadQuery))
				return
			}
		}
		respond(w, func() (any, error) { return c.KeyWrite(key, k) })
	})
	h.HandleFunc("GET /v1/keyincrement/{key}", func(w http.ResponseWriter, r *http.Request) {
		key, err := ParseKey(r.PathValue("key"))
		if err != nil {
			queryError(w, err)
			return
		}
		respond(w, func() (any, error) { return c.KeyIncrement(key) })
	})
	h.HandleFunc("GET /v1/sketches/{id}/count/{key}", func(w http.ResponseWriter, r *http.Request) {
		id, err := parseID(r.PathValue("id"), 16, "sketch")
		if err != nil {
			queryError(w, err)
			return
		}
		key, err := ParseKey(r.PathValue("key"))
		if err != nil {
			queryError(w, err)
			return
		}
		respond(w, func() (any, error) { return c.SketchCount(uint16(id), key) })
	})
	h.HandleFunc("GET /v1/sketches/{id}/cardinality", func(w http.ResponseWriter, r *http.Request) {
		id, err := parseID(r.PathValue("id"), 16, "sketch")
		if err != nil {
			queryError(w, err)
			return
		}
		respond(w, func() (any, error) { return c.SketchCardinality(uint16(id)) })
	})
	h.HandleFunc("GET /v1/postcards/{key}", func(w http.ResponseWriter, r *http.Request) {
		key, err := ParseKey(r.PathValue("key"))
		if err != nil {
			queryError(w, err)
			return
		}
		var want []uint32
		if e := r.URL.Query().Get("expect"); e != "" {
			if want, err = ParsePath(e); err != nil {
				queryError(w, err)
				return
			}
		}
		respond(w, func() (any, error) { return c.PostcardCheck(key, want) })
	})
	h.HandleFunc("GET /v1/lists", func(w http.ResponseWriter, _ *http.Request) {
		service.WriteJSON(w, http.StatusOK, c.Stats().Lists)
	})
	h.HandleFunc("GET /v1/lists/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, err := parseID(r.PathValue("id"), 32, "list")
		if err != nil {
			queryError(w, err)
			return
		}
		n := 0
		if s := r.URL.Query().Get("recent"); s != "" {
			if n, err = strconv.Atoi(s); err != nil {
				queryError(w, fmt.Errorf("recent %q: %w", s, ErrBadQuery))
				return
			}
		}
		respond(w, func() (any, error) { return c.List(uint32(id), n) })
	})

	h.AddCheck("rdma device", func() error {
		pa, err := c.dev.QueryPort(c.opt.Port)
		if err != nil {
			return err
		}
		if pa.State != verbs.PortActive {
			return fmt.Errorf("%s port %d is %d, not active", c.dev.Info().Name, c.opt.Port, pa.State)
		}
		return nil
	})
	h.AddCheck("exchange", func() error {
		c.mu.Lock()
		defer c.mu.Unlock()
		if !c.serving || c.closing {
			return errors.New("not accepting translators")
		}
		return nil
	})

	m := h.Metrics
	m.Collect("appliance_dta_collector_memory_bytes", "Registered memory per primitive.", metrics.GaugeType,
		[]string{"primitive"}, func(emit func(metrics.Sample)) {
			for _, p := range c.memory() {
				emit(metrics.Sample{Labels: []string{p.Primitive}, Value: float64(p.Bytes)})
			}
		})
	m.GaugeFunc("appliance_dta_collector_connections", "Translators connected now.", func() float64 {
		c.mu.Lock()
		defer c.mu.Unlock()
		return float64(len(c.conns))
	})
	m.CounterFunc("appliance_dta_collector_connects_total", "Translators connected through the exchange.",
		func() float64 { return float64(c.connects.Load()) })
	m.CounterFunc("appliance_dta_collector_refused_total", "Exchanges refused (bad hello, failed authentication, not admitted, limits, QP setup failed).",
		func() float64 { return float64(c.refused.Load()) })
	m.CounterFunc("appliance_dta_collector_auth_failures_total", "Exchanges refused because the peer did not prove it holds the key.",
		func() float64 { return float64(c.authFail.Load()) })
	m.CounterFunc("appliance_dta_collector_push_notifications_total", "WRITEs with immediate received (reports with the immediate flag).",
		func() float64 { return float64(c.pushes.Load()) })
	m.Collect("appliance_dta_collector_list_entries_total", "Append entries read by the list's pollers.", metrics.CounterType,
		[]string{"list"}, func(emit func(metrics.Sample)) {
			for _, id := range c.listIDs {
				emit(metrics.Sample{Labels: []string{strconv.FormatUint(uint64(id), 10)}, Value: float64(c.lists[id].read())})
			}
		})
	m.Collect("appliance_dta_collector_list_lost_total", "Append positions the list's pollers skipped as holes: writes that never landed (DTA does not resend).", metrics.CounterType,
		[]string{"list"}, func(emit func(metrics.Sample)) {
			for _, id := range c.listIDs {
				emit(metrics.Sample{Labels: []string{strconv.FormatUint(uint64(id), 10)}, Value: float64(c.lists[id].lost())})
			}
		})
	for _, f := range []struct {
		name, help string
		get        func(*dpdk.LoopStats) uint64
	}{
		{"polls_total", "Passes of a list poller's loop (utilisation: the busy ones' rate over this one's).", func(l *dpdk.LoopStats) uint64 { return l.Polls.Load() }},
		{"busy_polls_total", "Passes of a list poller's loop that read entries.", func(l *dpdk.LoopStats) uint64 { return l.Busy.Load() }},
	} {
		m.Collect("appliance_dta_collector_poll_loop_"+f.name, f.help, metrics.CounterType, []string{"list", "poller"},
			func(emit func(metrics.Sample)) {
				for _, id := range c.listIDs {
					for _, p := range c.lists[id].pollers {
						emit(metrics.Sample{Labels: []string{strconv.FormatUint(uint64(id), 10), strconv.Itoa(p.index)},
							Value: float64(f.get(&p.loop))})
					}
				}
			})
	}
	m.Collect("appliance_dta_collector_list_entries_per_second", "Append entries read per second over the last second.", metrics.GaugeType,
		[]string{"list"}, func(emit func(metrics.Sample)) {
			for _, id := range c.listIDs {
				r := math.Float64frombits(c.lists[id].rate.Load())
				emit(metrics.Sample{Labels: []string{strconv.FormatUint(uint64(id), 10)}, Value: r})
			}
		})
}

// respond writes a query's result, or its error with the status it maps
// to.
func respond(w http.ResponseWriter, q func() (any, error)) {
	v, err := q()
	if err != nil {
		queryError(w, err)
		return
	}
	service.WriteJSON(w, http.StatusOK, v)
}

// StatusOf is the HTTP status a query error maps to.
func StatusOf(err error) int {
	switch {
	case errors.Is(err, ErrNotServed), errors.Is(err, ErrUnknownList), errors.Is(err, ErrUnknownSketch), errors.Is(err, ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, ErrNoConsensus), errors.Is(err, ErrMismatch):
		return http.StatusConflict
	case errors.Is(err, ErrBadQuery):
		return http.StatusBadRequest
	case errors.Is(err, ErrClosed):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func queryError(w http.ResponseWriter, err error) { service.WriteError(w, StatusOf(err), err) }

func parseID(s string, bits int, what string) (uint64, error) {
	v, err := strconv.ParseUint(s, 0, bits)
	if err != nil {
		return 0, fmt.Errorf("%s id %q: want a number up to 2^%d-1: %w", what, s, bits, ErrBadQuery)
	}
	return v, nil
}
