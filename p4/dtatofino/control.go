package dtatofino

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/internal/dtamem"
	"github.com/rdma-appliance/appliance/internal/dtawire"
	"github.com/rdma-appliance/appliance/internal/metrics"
	"github.com/rdma-appliance/appliance/internal/service"
	"github.com/rdma-appliance/appliance/p4/internal/bfrt"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// Controller is the Tofino translator's control plane as a service
// (`appliance dta tofino`): it sets up a connection with each collector
// of its Spec through the exchange the software translator uses
// (dtamem.Dial: the translator's endpoint and first PSN in the Hello, the
// collector's QP and regions in the Offer, both sides authenticated with
// the collector's key), checks every value the collectors sent against
// what translator.p4 holds, renders the setup script, loads it with
// bfshell, and reads the counters back every Spec.Interval. The
// connections live as long as the exchange's TCP connections, which the
// Controller holds open: when one ends (a collector restarted), it sets
// every connection up again and loads the script again, since a load
// resets every collector's PSN.
type Controller struct {
	Spec Spec
	// Bfshell runs a bfrt_python script on the switch and returns what
	// bfshell printed (DefaultBfshell runs the SDE's). Without it the
	// scripts are only rendered (for Script) and no counter is read.
	Bfshell func(ctx context.Context, script string) ([]byte, error)
	// Script, when set, is given each setup script before it is loaded
	// (the CLI writes it to a file).
	Script func(script string) error
	Log    *slog.Logger

	initOnce sync.Once
	mu       sync.Mutex
	st       Status
}

// DefaultBfshell runs `$SDE/run_bfshell.sh -b FILE` with SDE set, the
// way the SDE's tools expect.
func DefaultBfshell(sde string) func(ctx context.Context, script string) ([]byte, error) {
	return bfrt.Bfshell(sde, "dta")
}

// Errors of the Controller: ErrOffer wraps a collector's offer that
// translator.p4 cannot serve (the files disagree: it does not go away by
// trying again); ErrBfshell wraps bfshell's failures.
var (
	ErrOffer   = errors.New("dta tofino: a collector's offer")
	ErrBfshell = errors.New("dta tofino: bfshell")
)

// Status is the Controller's state in GET /v1/status.
type Status struct {
	Name    string `json:"name"`
	Program string `json:"program"`
	// State is connecting (setting the collectors' connections up),
	// loading, loaded (the script is on the switch), rendered (loaded
	// nowhere: no bfshell) or stopped.
	State string `json:"state"`
	// Loads counts the setup scripts loaded (or rendered, without
	// bfshell); LoadedAt is the last one's time.
	Loads     int       `json:"loads"`
	LoadedAt  time.Time `json:"loaded_at,omitzero"`
	LastError string    `json:"last_error,omitempty"`
	// Collectors are the collectors' connections, as their offers gave
	// them.
	Collectors []CollectorState `json:"collectors"`
	// Counters are the switch's as last read (CounterReads reads,
	// CounterErrors failed), at CountersAt. A load clears them on the
	// switch.
	Counters      *Counters `json:"counters,omitempty"`
	CountersAt    time.Time `json:"counters_at,omitzero"`
	CounterReads  uint64    `json:"counter_reads"`
	CounterErrors uint64    `json:"counter_errors"`
}

// CollectorState is one collector's connection.
type CollectorState struct {
	Name     string `json:"name"`
	Exchange string `json:"exchange"`
	Up       bool   `json:"up"`
	Connects int    `json:"connects"`
	// The collector's end as its offer gave it, and the first PSN the
	// translator sent in its Hello.
	IP       netip.Addr     `json:"ip,omitzero"`
	MAC      string         `json:"mac,omitempty"`
	QPN      uint32         `json:"qpn,omitempty"`
	FirstPSN uint32         `json:"first_psn"`
	MTU      int            `json:"mtu,omitempty"`
	Regions  dtamem.Regions `json:"regions"`
}

// Session is the collectors' connections, set up through their
// exchanges, and the Translator their offers complete: it lasts as long
// as every exchange's TCP connection.
type Session struct {
	Translator Translator
	offers     []*dtamem.Offer
	conns      []net.Conn
	ended      chan struct{}
	endOnce    sync.Once
	// gone is the first collector whose connection ended.
	gone int
	wg   sync.WaitGroup
}

// Ended is closed when a collector's exchange connection ends.
func (s *Session) Ended() <-chan struct{} { return s.ended }

// Close ends every connection: the collectors destroy their QPs.
func (s *Session) Close() {
	for _, c := range s.conns {
		c.Close()
	}
	s.wg.Wait()
}

// watch waits for collector i's exchange connection to end: the
// collector never writes after its offer, so a read returns when it goes
// away (or when Close closes it).
func (s *Session) watch(i int) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_, _ = io.Copy(io.Discard, s.conns[i])
		s.endOnce.Do(func() { s.gone = i; close(s.ended) })
	}()
}

// Connect runs the exchange with every collector of the spec and returns
// the session, whose Translator is complete and valid. A collector that
// cannot be reached, refuses the translator or fails authentication
// fails it; an offer translator.p4 cannot serve fails it with ErrOffer.
func (c *Controller) Connect(ctx context.Context) (*Session, error) {
	s := &Session{Translator: c.Spec.Setup(), ended: make(chan struct{})}
	t := &s.Translator
	for i, cs := range c.Spec.Collectors {
		var smac header.MAC
		for _, p := range t.Ports {
			if p.Name == cs.Port {
				smac = p.MAC
			}
		}
		psn := rand.Uint32() & roce.PSNMask
		h := dtamem.Hello{Name: c.Spec.Name, IP: t.IP, MAC: smac.String(), QPN: t.QPN, PSN: psn}
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		tcp, o, err := dtamem.Dial(dctx, cs.Exchange, h, cs.Key)
		cancel()
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("collector %s: %w", cs.Name, err)
		}
		s.conns = append(s.conns, tcp)
		s.offers = append(s.offers, o)
		if err := t.accept(i, o, psn); err != nil {
			s.Close()
			return nil, fmt.Errorf("%w: collector %s (%s): %w", ErrOffer, cs.Name, cs.Exchange, err)
		}
	}
	if err := t.Validate(); err != nil {
		s.Close()
		return nil, fmt.Errorf("%w: the collectors' offers do not fit translator.p4: %w", ErrOffer, err)
	}
	for i := range s.conns {
		s.watch(i)
	}
	return s, nil
}

// accept checks what Dial does not of collector i's offer and fills the
// collector with it: an IPv4 address, a path MTU that takes the
// program's largest WRITE, the Append batch the program was built with.
// Validate checks the rest (MAC, QPN, the regions' geometry).
func (t *Translator) accept(i int, o *dtamem.Offer, psn uint32) error {
	ep, err := o.Endpoint()
	if err != nil {
		return err
	}
	if !o.IP.Unmap().Is4() { // Endpoint took only a unicast host
		return fmt.Errorf("address %v: translator.p4 writes to IPv4 unicast hosts", o.IP)
	}
	r := o.Regions
	if len(r.Lists) > 0 && r.BatchEntries() != t.appendBatch() {
		return fmt.Errorf("the collector reads Append batches of %d entries, translator.p4 is built with %d (append-batch)",
			r.BatchEntries(), t.appendBatch())
	}
	if w := t.maxWrite(&r); o.MTU > 0 && w > o.MTU {
		return fmt.Errorf("its regions need WRITEs of %d bytes, over its path MTU %d", w, o.MTU)
	}
	c := &t.Collectors[i]
	c.MAC, c.IP, c.QPN, c.PSN = ep.MAC, o.IP.Unmap(), o.QPN, psn
	c.KeyWrite, c.KeyIncrement, c.Postcards = r.KeyWrite, r.KeyIncrement, r.Postcards
	c.Lists, c.Sketches = r.Lists, r.Sketches
	return nil
}

// maxWrite is the largest WRITE translator.p4 sends into regions r: an
// 8-byte entry (Key-Write, a merged sketch column), an Append batch, a
// postcard record.
func (t *Translator) maxWrite(r *dtamem.Regions) int {
	n := 0
	if r.KeyWrite != nil || len(r.Sketches) > 0 {
		n = EntryLen
	}
	if len(r.Lists) > 0 {
		n = max(n, t.appendBatch()*dtamem.AppendEntryLen)
	}
	if r.Postcards != nil {
		n = max(n, RecordLen)
	}
	return n
}

func (c *Controller) log() *slog.Logger {
	if c.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Log
}

// update changes the status under the lock.
func (c *Controller) update(f func(st *Status)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(&c.st)
}

// Status is the Controller's state now.
func (c *Controller) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.st
	st.Collectors = append([]CollectorState(nil), c.st.Collectors...)
	return st
}

// init sets the status up from the spec, once: Register and Run both
// need it, in either order.
func (c *Controller) init() {
	c.initOnce.Do(func() {
		c.update(func(st *Status) {
			st.Name, st.Program, st.State = c.Spec.Name, bfrt.ProgName(c.Spec.Program, DefaultTranslatorName), "connecting"
			for _, cs := range c.Spec.Collectors {
				st.Collectors = append(st.Collectors, CollectorState{Name: cs.Name, Exchange: cs.Exchange})
			}
		})
	})
}

// Run keeps the translator loaded until ctx ends: the collectors'
// connections, the setup script, the counters every Spec.Interval; again
// from the connections whenever a collector goes away, with a growing
// wait between failures. It returns nil when ctx ends, and the error of
// an offer translator.p4 cannot serve (ErrOffer) or of a script that
// cannot be rendered.
func (c *Controller) Run(ctx context.Context) error {
	c.init()
	defer c.update(func(st *Status) { st.State = "stopped" })
	wait := c.Spec.ReconnectMin
	retry := func(err error) bool {
		c.update(func(st *Status) { st.LastError = err.Error() })
		c.log().Warn("dta tofino: not loaded", "err", err, "retry", wait)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
		wait = min(2*wait, c.Spec.ReconnectMax)
		return true
	}
	for ctx.Err() == nil {
		c.update(func(st *Status) { st.State = "connecting" })
		s, err := c.Connect(ctx)
		if errors.Is(err, ErrOffer) {
			c.update(func(st *Status) { st.LastError = err.Error() })
			return err
		}
		if err != nil {
			if ctx.Err() != nil || !retry(err) {
				return nil
			}
			continue
		}
		c.connected(s)
		err = c.load(ctx, s)
		if err == nil {
			wait = c.Spec.ReconnectMin
			c.serve(ctx, s)
		}
		s.Close()
		c.update(func(st *Status) {
			for i := range st.Collectors {
				st.Collectors[i].Up = false
			}
		})
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, ErrBfshell):
			if !retry(err) {
				return nil
			}
		case err != nil:
			c.update(func(st *Status) { st.LastError = err.Error() })
			return err
		default:
			name := c.Spec.Collectors[s.gone].Name
			c.update(func(st *Status) { st.LastError = fmt.Sprintf("collector %s closed the exchange connection", name) })
			c.log().Warn("collector gone: connecting again", "collector", name)
		}
	}
	return nil
}

// connected records the session's offers.
func (c *Controller) connected(s *Session) {
	c.update(func(st *Status) {
		for i, o := range s.offers {
			cs := &st.Collectors[i]
			tc := s.Translator.Collectors[i]
			cs.Up, cs.IP, cs.MAC, cs.QPN, cs.FirstPSN, cs.MTU, cs.Regions = true, tc.IP, tc.MAC.String(), tc.QPN, tc.PSN, o.MTU, o.Regions
			cs.Connects++
			if o.Redundancy > tc.redundancy() {
				c.log().Warn("the collector queries with more copies than the switch makes", "collector", tc.Name,
					"collector_redundancy", o.Redundancy, "switch_redundancy", tc.redundancy())
			}
		}
	})
}

// load renders the session's setup script, hands it to Script and runs it
// with bfshell.
func (c *Controller) load(ctx context.Context, s *Session) error {
	script, err := s.Translator.Script()
	if err != nil {
		return err
	}
	if c.Script != nil {
		if err := c.Script(script); err != nil {
			return err
		}
	}
	state := "rendered"
	if c.Bfshell != nil {
		c.update(func(st *Status) { st.State = "loading" })
		if _, err := c.Bfshell(ctx, script); err != nil {
			return fmt.Errorf("%w: setup script: %w", ErrBfshell, err)
		}
		state = "loaded"
	}
	c.update(func(st *Status) {
		st.State, st.Loads, st.LoadedAt, st.LastError = state, st.Loads+1, time.Now(), ""
		st.Counters = nil
	})
	c.log().Info("dta tofino: "+state, "program", bfrt.ProgName(s.Translator.Name, DefaultTranslatorName),
		"collectors", len(s.Translator.Collectors))
	return nil
}

// serve reads the counters every Spec.Interval until a collector goes
// away or ctx ends.
func (c *Controller) serve(ctx context.Context, s *Session) {
	var script string
	if c.Bfshell != nil {
		script, _ = s.Translator.CounterScript() // Validate passed: it renders
		c.readCounters(ctx, s, script)
	}
	tick := time.NewTicker(c.Spec.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.Ended():
			return
		case <-tick.C:
			if c.Bfshell != nil {
				c.readCounters(ctx, s, script)
			}
		}
	}
}

func (c *Controller) readCounters(ctx context.Context, s *Session, script string) {
	out, err := c.Bfshell(ctx, script)
	var cnt Counters
	if err == nil {
		cnt, err = s.Translator.ParseCounters(bytes.NewReader(out))
	} else {
		err = fmt.Errorf("%w: counter script: %w", ErrBfshell, err)
	}
	if ctx.Err() != nil {
		return // bfshell was stopped with the service
	}
	c.update(func(st *Status) {
		st.CounterReads++
		if err != nil {
			st.CounterErrors++
			st.LastError = err.Error()
			return
		}
		st.Counters, st.CountersAt = &cnt, time.Now()
	})
	if err != nil {
		c.log().Warn("dta tofino: reading the counters", "err", err)
	}
}

// Register adds the status, the metrics and a health check to a service:
//
//	GET /v1/status   Status
func (c *Controller) Register(s *service.Service) {
	c.init()
	s.HandleFunc("GET /v1/status", func(w http.ResponseWriter, _ *http.Request) {
		service.WriteJSON(w, http.StatusOK, c.Status())
	})
	s.AddCheck("switch", func() error {
		st := c.Status()
		if st.State != "loaded" && st.State != "rendered" {
			return fmt.Errorf("%s: %s", st.State, st.LastError)
		}
		return nil
	})
	m := s.Metrics
	m.GaugeFunc("appliance_dta_tofino_loaded", "1 while the setup script is loaded (or rendered, without bfshell) and every collector connected.",
		func() float64 {
			if st := c.Status(); st.State == "loaded" || st.State == "rendered" {
				return 1
			}
			return 0
		})
	m.CounterFunc("appliance_dta_tofino_loads_total", "Setup scripts loaded on the switch (rendered, without bfshell).",
		func() float64 { return float64(c.Status().Loads) })
	m.CounterFunc("appliance_dta_tofino_counter_reads_total", "Counter scripts run on the switch.",
		func() float64 { return float64(c.Status().CounterReads) })
	m.CounterFunc("appliance_dta_tofino_counter_read_errors_total", "Counter scripts that failed or whose output did not parse.",
		func() float64 { return float64(c.Status().CounterErrors) })
	// The switch's counters as last read: a load clears them, which the
	// scraper takes for a counter reset.
	counts := func(get func(cnt *Counters) map[string]uint64) func(emit func(metrics.Sample)) {
		return func(emit func(metrics.Sample)) {
			if cnt := c.Status().Counters; cnt != nil {
				for k, v := range get(cnt) {
					emit(metrics.Sample{Labels: []string{k}, Value: float64(v)})
				}
			}
		}
	}
	m.Collect("appliance_dta_tofino_reports_total", "Reports the switch received, by opcode.", metrics.CounterType, []string{"opcode"},
		counts(func(cnt *Counters) map[string]uint64 {
			out := map[string]uint64{}
			for op := dtawire.OpKeyWrite; op <= dtawire.OpSketchMerge; op++ {
				out[op.String()] = cnt.Reports[op]
			}
			return out
		}))
	m.Collect("appliance_dta_tofino_reports_dropped_total", "Reports the switch did not translate, by reason.", metrics.CounterType,
		[]string{"reason"}, counts(func(cnt *Counters) map[string]uint64 { return cnt.Dropped }))
	m.Collect("appliance_dta_tofino_postcards_total", "Postcards by outcome (held, complete, evicted, bad_hop).", metrics.CounterType,
		[]string{"outcome"}, counts(func(cnt *Counters) map[string]uint64 { return cnt.Postcards }))
	m.Collect("appliance_dta_tofino_sketch_reports_total", "Sketch-Merge reports by outcome (builds with Sketch-Merge).", metrics.CounterType,
		[]string{"outcome"}, counts(func(cnt *Counters) map[string]uint64 { return cnt.Sketches }))
	type field struct {
		name, help string
		get        func(CollectorCounters) uint64
	}
	for _, f := range []field{
		{"rdma_packets_total", "RDMA packets the switch sent, by collector.", func(cc CollectorCounters) uint64 { return cc.RDMAPackets }},
		{"rdma_bytes_total", "Bytes of the RDMA packets the switch sent, by collector.", func(cc CollectorCounters) uint64 { return cc.RDMABytes }},
		{"psn_resyncs_total", "PSN resynchronisations (the collector's NAKs), by collector.", func(cc CollectorCounters) uint64 { return cc.Resyncs }},
	} {
		m.Collect("appliance_dta_tofino_"+f.name, f.help, metrics.CounterType, []string{"collector"}, func(emit func(metrics.Sample)) {
			if cnt := c.Status().Counters; cnt != nil {
				for _, cc := range cnt.Collectors {
					emit(metrics.Sample{Labels: []string{cc.Name}, Value: float64(f.get(cc))})
				}
			}
		})
	}
	m.Collect("appliance_dta_tofino_collector_up", "1 while the collector's connection is up.", metrics.GaugeType,
		[]string{"collector"}, func(emit func(metrics.Sample)) {
			for _, cs := range c.Status().Collectors {
				v := 0.0
				if cs.Up {
					v = 1
				}
				emit(metrics.Sample{Labels: []string{cs.Name}, Value: v})
			}
		})
	m.Collect("appliance_dta_tofino_collector_connects_total", "Connections set up with the collector through its exchange.",
		metrics.CounterType, []string{"collector"}, func(emit func(metrics.Sample)) {
			for _, cs := range c.Status().Collectors {
				emit(metrics.Sample{Labels: []string{cs.Name}, Value: float64(cs.Connects)})
			}
		})
}
