package hostmesh

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/rdma-appliance/appliance/internal/service"
)

// ServeOptions run an agent as a service (`appliance mesh probe`).
type ServeOptions struct {
	Agent   AgentConfig
	Devices []Device
	// Analyzer is the analyzer's address (host:port); empty for none.
	Analyzer string
	// MaxHeld results are held while the analyzer is down.
	MaxHeld int
	// Out, when set, is a file the batches are appended to.
	Out string
	// Listen is the HTTP address of /v1/status, /metrics and /healthz.
	Listen string
	// Duration stops the agent after this long; 0 runs until ctx ends.
	Duration time.Duration
	Log      *slog.Logger
}

// ServeStatus is what GET /v1/status answers, and Serve returns at the end.
type ServeStatus struct {
	Counters Counters     `json:"counters"`
	RNICs    []RNICStatus `json:"rnics"`
	Upload   UploadStats  `json:"upload"`
}

// Serve probes between o.Devices, sends the results to the analyzer and
// serves the agent's status until ctx ends (or o.Duration passes), and
// returns the last status.
func Serve(ctx context.Context, o ServeOptions) (*ServeStatus, error) {
	up := NewUploader(o.Analyzer, o.MaxHeld)
	if o.Out != "" {
		f, err := os.OpenFile(o.Out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		up.File = f
	}
	ag, err := NewAgent(o.Agent, o.Devices, up, o.Log)
	if err != nil {
		return nil, err
	}
	defer ag.Close()
	status := func() *ServeStatus {
		c, rn := ag.Status()
		return &ServeStatus{Counters: c, RNICs: rn, Upload: up.Stats()}
	}
	h := service.New("hostmesh-agent", o.Listen, o.Log)
	h.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		service.WriteJSON(w, 200, status())
	})
	h.AddCheck("analyzer", func() error {
		if st := up.Stats(); o.Analyzer != "" && st.LastError != "" {
			return errors.New(st.LastError)
		}
		return nil
	})
	if o.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Duration)
		defer cancel()
	}
	agentDone := make(chan error, 1)
	go func() { agentDone <- ag.Run(ctx) }()
	o.Log.Info("hostmesh agent", "host", o.Agent.Host, "rnics", len(o.Devices), "analyzer", o.Analyzer)
	if err := h.Run(ctx); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return nil, err
	}
	<-agentDone
	return status(), nil
}
