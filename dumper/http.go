package dumper

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"

	"github.com/rdma-appliance/appliance/internal/metrics"
	"github.com/rdma-appliance/appliance/internal/service"
)

// Register adds the dumper's control endpoints, health check, metrics and
// stop hook to a service:
//
//	POST /v1/start        begin a capture (empties the arenas)
//	POST /v1/stop         end it, write the files; the Result
//	GET  /v1/status       state and counters (Status)
//	GET  /v1/files        the files of the last stop
//	GET  /v1/files/{name} one of them, as written
//
// When the service stops (SIGTERM) during a capture, the capture is
// written first, as Lumina's dumper does on TERM.
func (d *Dumper) Register(s *service.Service) {
	s.HandleFunc("POST /v1/start", func(w http.ResponseWriter, _ *http.Request) {
		if err := d.Start(); err != nil {
			code := http.StatusInternalServerError
			if errors.Is(err, ErrRunning) {
				code = http.StatusConflict
			}
			service.WriteError(w, code, err)
			return
		}
		s.Log.Info("capture started", "queues", len(d.workers), "num_pkts", d.cfg.NumPkts, "snap_len", d.cfg.SnapLen)
		service.WriteJSON(w, http.StatusOK, d.Status())
	})
	s.HandleFunc("POST /v1/stop", func(w http.ResponseWriter, r *http.Request) {
		res, err := d.Stop(r.Context())
		if err != nil {
			code := http.StatusInternalServerError
			if errors.Is(err, ErrNotRunning) {
				code = http.StatusConflict
			}
			service.WriteError(w, code, err)
			return
		}
		logResult(s, res)
		service.WriteJSON(w, http.StatusOK, res)
	})
	s.HandleFunc("GET /v1/status", func(w http.ResponseWriter, _ *http.Request) {
		service.WriteJSON(w, http.StatusOK, d.Status())
	})
	// The captures hold the tested traffic: like the changes, they are
	// for the token's holders only off loopback.
	s.Handle("GET /v1/files", s.Private(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		service.WriteJSON(w, http.StatusOK, d.Files())
	})))
	s.Handle("GET /v1/files/{name}", s.Private(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		for _, f := range d.Files() {
			if f.Name != name {
				continue
			}
			fh, err := os.Open(f.Path)
			if err != nil {
				service.WriteError(w, http.StatusGone, err)
				return
			}
			defer fh.Close()
			fi, err := fh.Stat()
			if err != nil {
				service.WriteError(w, http.StatusInternalServerError, err)
				return
			}
			w.Header().Set("Content-Type", "application/vnd.tcpdump.pcap")
			http.ServeContent(w, r, f.Name, fi.ModTime(), fh)
			return
		}
		service.WriteError(w, http.StatusNotFound, fmt.Errorf("dumper %s: no file %q", d.cfg.Name, name))
	})))
	s.AddCheck("dumper "+d.cfg.Name+" workers", func() error {
		if d.state.Load() != stateCapturing {
			return nil
		}
		for _, w := range d.workers {
			if !w.alive.Load() {
				if e := w.err.Load(); e != nil {
					return fmt.Errorf("queue %d: %s", w.queue, *e)
				}
				return fmt.Errorf("queue %d: worker not running", w.queue)
			}
		}
		return nil
	})
	s.OnStop("dumper "+d.cfg.Name, func(ctx context.Context) error {
		if d.state.Load() != stateCapturing {
			return nil
		}
		res, err := d.Stop(ctx)
		if errors.Is(err, ErrNotRunning) {
			return nil
		}
		if res != nil {
			logResult(s, res)
		}
		return err
	})
	s.Metrics.GaugeFunc("appliance_dump_capturing", "1 while the dumper captures.", func() float64 {
		if d.state.Load() == stateCapturing {
			return 1
		}
		return 0
	})
	type field struct {
		name, help string
		get        func(WorkerStatus) uint64
	}
	for _, f := range []field{
		{"received_packets_total", "Frames received per queue in the current or last capture.", func(w WorkerStatus) uint64 { return w.Received }},
		{"captured_packets_total", "Copies stored in the arena per queue.", func(w WorkerStatus) uint64 { return w.Captured }},
		{"captured_bytes_total", "Wire bytes of the stored copies per queue.", func(w WorkerStatus) uint64 { return w.Bytes }},
		{"arena_full_total", "Copies dropped because the queue's arena was full.", func(w WorkerStatus) uint64 { return w.ArenaFull }},
		{"poll_loop_polls_total", "Passes of the queue's poll loop (utilisation: the busy ones' rate over this one's).", func(w WorkerStatus) uint64 { return w.Polls }},
		{"poll_loop_busy_polls_total", "Passes of the queue's poll loop that received frames.", func(w WorkerStatus) uint64 { return w.BusyPolls }},
	} {
		s.Metrics.Collect("appliance_dump_"+f.name, f.help, metrics.CounterType, []string{"dumper", "queue"},
			func(emit func(metrics.Sample)) {
				for _, w := range d.workers {
					st := w.status()
					emit(metrics.Sample{Labels: []string{d.cfg.Name, strconv.Itoa(w.queue)}, Value: float64(f.get(st))})
				}
			})
	}
	s.Metrics.CounterFunc("appliance_dump_port_dropped_total", "Copies the port dropped (queue full, no buffer) since the capture started.",
		func() float64 { return float64(d.Status().PortDropped) })
}

func logResult(s *service.Service, res *Result) {
	s.Log.Info("capture written", "files", len(res.Files), "captured", res.Captured, "written", res.Written,
		"arena_full", res.ArenaFull, "port_dropped", res.PortDropped, "malformed", res.Malformed)
}
