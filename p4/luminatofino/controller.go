package luminatofino

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/internal/service"
	"github.com/rdma-appliance/appliance/p4/internal/bfrt"
	"github.com/rdma-appliance/appliance/translator/inject"
)

// Controller is the Tofino injector's control plane as a service, with
// the software injector's HTTP API, so an orchestrator drives either the
// same way: POST /v1/load renders the test's bfrt_python script (Script)
// and runs it with bfshell, GET /v1/stats runs CounterScript and returns
// what ParseCounters read, GET /v1/entries lists the loaded entries. The
// switch does not count hits per entry; Hits are reported as 0 and the
// per-port event counters hold the totals.
type Controller struct {
	Spec inject.Spec
	// Bfshell runs a bfrt_python script on the switch and returns what
	// bfshell printed; DefaultBfshell(sdePath) runs the SDE's.
	Bfshell func(ctx context.Context, script string) ([]byte, error)

	mu   sync.Mutex
	prog *Program
}

// DefaultBfshell runs `$SDE/run_bfshell.sh -b FILE` with SDE set, the
// way the SDE's tools expect.
func DefaultBfshell(sde string) func(ctx context.Context, script string) ([]byte, error) {
	return bfrt.Bfshell(sde, "lumina")
}

// ErrNotLoaded is returned for counters before any test was loaded.
var ErrNotLoaded = errors.New("lumina: no test loaded on the switch yet")

// ErrBfshell is wrapped when bfshell fails on the switch.
var ErrBfshell = errors.New("lumina: bfshell")

// Load renders and runs the setup script of a test.
func (c *Controller) Load(ctx context.Context, req inject.LoadRequest) (*Program, error) {
	p, err := FromSpec(c.Spec, req)
	if err != nil {
		return nil, err
	}
	script, err := p.Script()
	if err != nil {
		return nil, err
	}
	if _, err := c.Bfshell(ctx, script); err != nil {
		return nil, fmt.Errorf("%w: setup script: %w", ErrBfshell, err)
	}
	c.mu.Lock()
	c.prog = &p
	c.mu.Unlock()
	return &p, nil
}

// Stats reads the switch's counters.
func (c *Controller) Stats(ctx context.Context) (mirror.InjectorStats, error) {
	c.mu.Lock()
	p := c.prog
	c.mu.Unlock()
	if p == nil {
		return mirror.InjectorStats{}, ErrNotLoaded
	}
	script, err := p.CounterScript()
	if err != nil {
		return mirror.InjectorStats{}, err
	}
	out, err := c.Bfshell(ctx, script)
	if err != nil {
		return mirror.InjectorStats{}, fmt.Errorf("%w: counter script: %w", ErrBfshell, err)
	}
	cnt, err := ParseCounters(bytes.NewReader(out))
	if err != nil {
		return mirror.InjectorStats{}, err
	}
	return cnt.Stats(), nil
}

// Register adds the control API to a service.
func (c *Controller) Register(s *service.Service) {
	s.HandleFunc("POST /v1/load", func(w http.ResponseWriter, r *http.Request) {
		var req inject.LoadRequest
		if err := service.ReadJSON(r, &req); err != nil {
			service.WriteError(w, http.StatusBadRequest, err)
			return
		}
		p, err := c.Load(r.Context(), req)
		if err != nil {
			code := http.StatusUnprocessableEntity // the test does not fit the program
			if errors.Is(err, ErrBfshell) {
				code = http.StatusBadGateway
			}
			service.WriteError(w, code, err)
			return
		}
		s.Log.Info("test loaded on the switch", "entries", len(p.Entries), "connections", len(p.Conns))
		service.WriteJSON(w, http.StatusOK, map[string]any{"entries": len(p.Entries), "iter_mode": p.IterMode.String()})
	})
	s.HandleFunc("GET /v1/stats", func(w http.ResponseWriter, r *http.Request) {
		st, err := c.Stats(r.Context())
		if errors.Is(err, ErrNotLoaded) {
			// Nothing loaded yet: empty counters, so reachability checks
			// succeed before the first test.
			service.WriteJSON(w, http.StatusOK, mirror.InjectorStats{})
			return
		}
		if err != nil {
			service.WriteError(w, http.StatusBadGateway, err)
			return
		}
		service.WriteJSON(w, http.StatusOK, st)
	})
	s.HandleFunc("GET /v1/entries", func(w http.ResponseWriter, _ *http.Request) {
		c.mu.Lock()
		defer c.mu.Unlock()
		var out []inject.EntryHits
		if c.prog != nil {
			for _, e := range c.prog.Entries {
				out = append(out, inject.EntryHits{Entry: e.String(), Event: e.Event.String()})
			}
		}
		service.WriteJSON(w, http.StatusOK, out)
	})
}
