// Package service is the HTTP plumbing every appliance service shares: one
// listen address serving /metrics (Prometheus, with the Go runtime's and
// the process's metrics next to the service's own), /healthz (per-component
// checks, failing components named) and the service's own control endpoints;
// structured logs; and a graceful stop that drains HTTP and runs the
// service's flush hooks when the context ends (SIGTERM in the CLI).
//
// Control endpoints change what a service does (inject drops, stop a
// capture, take results), so every request other than GET and HEAD must
// say it is JSON (a web page cannot send that cross-origin without a
// preflight the service never answers) and, when the service has a
// token or listens off loopback, carry it as a bearer token. Read-only
// endpoints (/metrics, /healthz, status) stay open. Bodies are bounded.
package service

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/rdma-appliance/appliance/internal/metrics"
)

// Version is the appliance version, set by the CLI at start-up.
var Version = "dev"

// Service is one HTTP-controlled service.
type Service struct {
	Name    string
	Log     *slog.Logger
	Metrics *metrics.Registry

	// ShutdownTimeout bounds the graceful stop (default 10 s).
	ShutdownTimeout time.Duration

	// Token, when set, is the bearer token every mutating request must
	// carry (New takes the process's, see SetDefaultToken). Without one,
	// mutating requests are served only on a loopback listener.
	Token []byte
	// offLoopback is whether the listener is reachable from other hosts:
	// judged from the configured address at New, from the bound one at Run.
	offLoopback atomic.Bool

	addr    string
	mux     *http.ServeMux
	handler http.Handler // mux behind the request counter
	start   time.Time
	mu      sync.Mutex
	routes  map[string]string // registered pattern -> its path label
	checks  []check
	stops   []stopHook
	comps   []component
	ln      net.Listener
	ready   chan struct{}
}

type check struct {
	name string
	fn   func() error
}

type component struct {
	name string
	fn   func(context.Context) error
}

type stopHook struct {
	name string
	fn   func(context.Context) error
}

// New creates a service that will listen on addr ("127.0.0.1:0" picks a port).
func New(name, addr string, log *slog.Logger) *Service {
	if log == nil {
		log = slog.Default()
	}
	s := &Service{Name: name, Log: log.With("service", name), Metrics: metrics.NewRegistry(),
		ShutdownTimeout: 10 * time.Second, addr: addr, mux: http.NewServeMux(), start: time.Now(),
		routes: map[string]string{}, ready: make(chan struct{})}
	if t := defaultToken.Load(); t != nil {
		s.Token = *t
	}
	if host, _, err := net.SplitHostPort(addr); err != nil || !LoopbackHost(host) {
		s.offLoopback.Store(true)
	}
	// Each service's registry has its own runtime collectors: the
	// library's default registry would be shared by every service of a
	// test or the lab, and would refuse the second one's families.
	s.Metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s.Metrics.GaugeFunc("appliance_up", "1 while the service runs.", func() float64 { return 1 })
	s.Metrics.GaugeFunc("appliance_start_time_seconds", "Service start time, Unix seconds.",
		func() float64 { return float64(s.start.UnixNano()) / 1e9 })
	s.Metrics.GaugeFunc("appliance_goroutines", "Goroutines in the process.",
		func() float64 { return float64(runtime.NumGoroutine()) })
	s.Metrics.Collect("appliance_build_info", "Build information.", metrics.GaugeType,
		[]string{"version", "service", "goversion"}, func(emit func(metrics.Sample)) {
			emit(metrics.Sample{Labels: []string{Version, name, runtime.Version()}, Value: 1})
		})
	s.handler = s.countRequests(s.guard(s.mux))
	s.Handle("GET /metrics", s.Metrics.Handler(promLog{s.Log}))
	s.HandleFunc("GET /healthz", s.serveHealth)
	s.HandleFunc("GET /{$}", s.serveIndex)
	return s
}

// Handle registers a control endpoint (Go 1.22 patterns, e.g. "POST /start").
func (s *Service) Handle(pattern string, h http.Handler) {
	s.mux.Handle(pattern, h)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.routes[pattern] = routeLabel(pattern)
}

// HandleFunc registers a control endpoint function.
func (s *Service) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	s.Handle(pattern, http.HandlerFunc(h))
}

// routeLabel is the path label of a registered pattern: its path, without
// the method or host ("GET /v1/lists/{id}" -> "/v1/lists/{id}").
func routeLabel(pattern string) string {
	if i := strings.IndexByte(pattern, '/'); i >= 0 {
		return pattern[i:]
	}
	return pattern
}

// AddCheck adds a named health check; /healthz fails naming every failing one.
func (s *Service) AddCheck(name string, fn func() error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks = append(s.checks, check{name, fn})
}

// OnStop adds a hook run at graceful stop, in reverse order of registration
// (like defer), e.g. to drain queues and flush a capture.
func (s *Service) OnStop(name string, fn func(context.Context) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stops = append(s.stops, stopHook{name, fn})
}

// Go adds a component that runs for the service's life (a poll loop):
// Run starts it once it listens and cancels its context at the stop,
// before the stop hooks run, waiting for it to return. A component that
// returns before the stop (a core it could not have, a port that went
// away) stops the service: Run returns its error, named.
func (s *Service) Go(name string, fn func(ctx context.Context) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.comps = append(s.comps, component{name, fn})
}

// Addr is the address actually listened on, once Ready is closed.
func (s *Service) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return s.ln.Addr().String()
	}
	return s.addr
}

// Ready is closed once the service listens.
func (s *Service) Ready() <-chan struct{} { return s.ready }

// Handler is the service's HTTP handler, as Run serves it, for tests with
// httptest.
func (s *Service) Handler() http.Handler { return s.handler }

// Run serves until ctx ends, then stops gracefully: HTTP stops accepting and
// drains, and the stop hooks run. A hook's error is returned (joined), named.
func (s *Service) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("%s: listen %s: %w", s.Name, s.addr, err)
	}
	s.mu.Lock()
	s.ln = ln
	s.mu.Unlock()
	if ap, err := netip.ParseAddrPort(ln.Addr().String()); err == nil {
		s.offLoopback.Store(!ap.Addr().IsLoopback())
	}
	if s.offLoopback.Load() && s.Token == nil {
		s.Log.Warn("listening off loopback without a token: control endpoints refuse every change (give one with --token-file or APPLIANCE_TOKEN_FILE)",
			"addr", ln.Addr().String())
	}
	// Slow or endless clients are cut off: headers within 10 s, a
	// request within a minute, idle keep-alives after two.
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute,
		IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	close(s.ready)
	s.Log.Info("listening", "addr", ln.Addr().String())

	s.mu.Lock()
	comps := append([]component(nil), s.comps...)
	s.mu.Unlock()
	cctx, stopComps := context.WithCancel(context.WithoutCancel(ctx))
	defer stopComps()
	type ended struct {
		name string
		err  error
	}
	endc := make(chan ended, len(comps))
	for _, c := range comps {
		go func() { endc <- ended{c.name, c.fn(cctx)} }()
	}
	running := len(comps)

	var serveErr, compErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	case e := <-endc:
		running--
		if e.err == nil {
			e.err = errors.New("ended before the service")
		}
		compErr = fmt.Errorf("%s: %s: %w", s.Name, e.name, e.err)
	}
	s.Log.Info("stopping", "reason", stopReason(ctx, cmp.Or(compErr, serveErr)))
	sctx, cancel := context.WithTimeout(context.Background(), s.ShutdownTimeout)
	defer cancel()
	errs := []error{}
	if compErr != nil {
		errs = append(errs, compErr)
	}
	stopComps()
	for ; running > 0; running-- {
		if e := <-endc; e.err != nil && !errors.Is(e.err, context.Canceled) {
			errs = append(errs, fmt.Errorf("%s: stopping %s: %w", s.Name, e.name, e.err))
		}
	}
	if err := srv.Shutdown(sctx); err != nil {
		errs = append(errs, fmt.Errorf("%s: http shutdown: %w", s.Name, err))
	}
	s.mu.Lock()
	hooks := append([]stopHook(nil), s.stops...)
	s.mu.Unlock()
	for i := len(hooks) - 1; i >= 0; i-- {
		if err := hooks[i].fn(sctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: stopping %s: %w", s.Name, hooks[i].name, err))
		}
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		errs = append(errs, fmt.Errorf("%s: serve: %w", s.Name, serveErr))
	}
	s.Log.Info("stopped")
	return errors.Join(errs...)
}

func stopReason(ctx context.Context, serveErr error) string {
	if serveErr != nil {
		return serveErr.Error()
	}
	if c := context.Cause(ctx); c != nil {
		return c.Error()
	}
	return "context done"
}

// promLog logs the metric families that failed to collect (promhttp
// leaves them out of the scrape and says why here).
type promLog struct{ log *slog.Logger }

func (l promLog) Println(v ...any) {
	l.log.Error("metrics", "err", strings.TrimSuffix(fmt.Sprintln(v...), "\n"))
}

// Health is the /healthz document.
type Health struct {
	Service string            `json:"service"`
	Status  string            `json:"status"` // "ok" or "failing"
	Version string            `json:"version"`
	Uptime  string            `json:"uptime"`
	Checks  map[string]string `json:"checks,omitempty"` // component -> "ok" or its error
	Failing []string          `json:"failing,omitempty"`
}

// CheckHealth runs the checks.
func (s *Service) CheckHealth() Health {
	s.mu.Lock()
	checks := append([]check(nil), s.checks...)
	s.mu.Unlock()
	h := Health{Service: s.Name, Status: "ok", Version: Version, Uptime: time.Since(s.start).Round(time.Second).String(),
		Checks: map[string]string{}}
	for _, c := range checks {
		if err := c.fn(); err != nil {
			h.Checks[c.name] = err.Error()
			h.Failing = append(h.Failing, c.name)
		} else {
			h.Checks[c.name] = "ok"
		}
	}
	if len(h.Failing) > 0 {
		sort.Strings(h.Failing)
		h.Status = "failing"
	}
	return h
}

func (s *Service) serveHealth(w http.ResponseWriter, _ *http.Request) {
	h := s.CheckHealth()
	status := http.StatusOK
	if h.Status != "ok" {
		status = http.StatusServiceUnavailable
	}
	WriteJSON(w, status, h)
}

func (s *Service) serveIndex(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintf(w, "%s (appliance %s)\nendpoints: /metrics /healthz and the service's control API\n", s.Name, Version)
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// countRequests counts requests by route and status and logs them. The
// path label is the route the mux matched (its pattern's path), never the
// request's own path: that is the client's to choose, so it would make one
// series per scanner probe, and could hold bytes the exposition has to
// escape. Requests that match no route are counted as "other".
func (s *Service) countRequests(h http.Handler) http.Handler {
	reqs := s.Metrics.CounterVec("appliance_http_requests_total", "HTTP requests by path and status.", "path", "code")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: 200}
		t0 := time.Now()
		h.ServeHTTP(rec, r)
		// The mux sets r.Pattern, but for some redirects to a path
		// derived from the request: only a registered pattern is a route.
		s.mu.Lock()
		path, ok := s.routes[r.Pattern]
		s.mu.Unlock()
		if !ok {
			path = "other"
		}
		reqs.WithLabelValues(path, strconv.Itoa(rec.status)).Inc()
		if r.URL.Path != "/metrics" && r.URL.Path != "/healthz" {
			s.Log.Debug("http", "method", r.Method, "path", r.URL.Path, "status", rec.status, "took", time.Since(t0))
		}
	})
}

// WriteJSON writes v as indented JSON with the status code.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// ErrorBody is the JSON body of an error response.
type ErrorBody struct {
	Error string `json:"error"`
}

// WriteError writes err as a JSON error with the status code.
func WriteError(w http.ResponseWriter, status int, err error) {
	WriteJSON(w, status, ErrorBody{Error: err.Error()})
}

// MaxBody bounds control request bodies.
const MaxBody = 16 << 20

// ReadJSON decodes a request body strictly (unknown fields are errors).
// The service's handler bounds the body at MaxBody: a longer one fails
// here, saying so.
func ReadJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			return fmt.Errorf("bad request body: over %d bytes: %w", mbe.Limit, err)
		}
		return fmt.Errorf("bad request body: %w", err)
	}
	return nil
}

// defaultToken is the process's token (SetDefaultToken).
var defaultToken atomic.Pointer[[]byte]

// SetDefaultToken sets the bearer token the services and clients made
// after it use: the CLI reads it once from --token-file or
// APPLIANCE_TOKEN_FILE. nil clears it.
func SetDefaultToken(tok []byte) {
	if tok == nil {
		defaultToken.Store(nil)
		return
	}
	defaultToken.Store(&tok)
}

// HasDefaultToken says whether the process has a token (SetDefaultToken).
func HasDefaultToken() bool { return defaultToken.Load() != nil }

// MinTokenLen is the shortest token accepted (128 bits).
const MinTokenLen = 16

// ReadToken reads a bearer token from a file: its bytes with surrounding
// white space removed, at least MinTokenLen printable ASCII characters
// (`head -c 32 /dev/urandom | base64`). A file every user may read is
// refused, as ssh refuses such private keys.
func ReadToken(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("token: %w", err)
	}
	if fi.Mode().Perm()&0o007 != 0 {
		return nil, fmt.Errorf("token: %s: mode %v lets every user read it (chmod o-rwx)", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("token: %w", err)
	}
	b = bytes.TrimSpace(b)
	if len(b) < MinTokenLen {
		return nil, fmt.Errorf("token: %s: %d bytes, want at least %d", path, len(b), MinTokenLen)
	}
	for _, c := range b {
		if c <= ' ' || c > '~' {
			return nil, fmt.Errorf("token: %s: want printable ASCII without spaces (it travels in a header)", path)
		}
	}
	return b, nil
}

// LoopbackHost reports whether a host (of a listen or dial address)
// reaches only this host: localhost or a loopback address.
func LoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// guard bounds every body and lets a mutating request through only with
// a JSON content type and, when required, the token.
func (s *Service) guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			h.ServeHTTP(w, r)
			return
		}
		if err := s.authorize(r); err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="appliance"`)
			WriteError(w, http.StatusUnauthorized, err)
			return
		}
		// Every mutating request, with a body or not: an empty text/plain
		// POST is what a web page may send anywhere without asking.
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
			WriteError(w, http.StatusUnsupportedMediaType,
				fmt.Errorf("%s %s: want Content-Type: application/json", r.Method, r.URL.Path))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Private wraps a handler that serves what only the token's holders may
// read (a dumper's captures hold the traffic): every method needs the
// token, as a change does, when the service has one or listens off
// loopback.
func (s *Service) Private(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.authorize(r); err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="appliance"`)
			WriteError(w, http.StatusUnauthorized, err)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// authorize checks a request's bearer token.
func (s *Service) authorize(r *http.Request) error {
	if s.Token == nil {
		if s.offLoopback.Load() {
			return errors.New("this service listens off loopback and has no token: it takes no changes and serves no private data (start it with --token-file or APPLIANCE_TOKEN_FILE)")
		}
		return nil
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return errors.New("want Authorization: Bearer <token>")
	}
	// Hashes of equal length, compared in constant time: neither the
	// token's bytes nor its length leak through timing.
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256(s.Token)
	if subtle.ConstantTimeCompare(a[:], b[:]) != 1 {
		return errors.New("wrong token")
	}
	return nil
}
