package lab

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/rdma-appliance/appliance/appliance/dashboard"
	"github.com/rdma-appliance/appliance/collector/dtacollector"
	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/internal/dtamem"
	"github.com/rdma-appliance/appliance/internal/dtawire"
	"github.com/rdma-appliance/appliance/internal/spec"
	"github.com/rdma-appliance/appliance/translator/dtatranslator"
	"github.com/rdma-appliance/appliance/verbs/soft"
)

// DTASpec configures the DTA stage: reporters send every primitive
// through the software translator into a soft-RNIC collector, which then
// answers queries for what was reported.
type DTASpec struct {
	Enabled bool `yaml:"enabled"`
	// Reporters send Reports reports each at Rate a second over Keys keys.
	Reporters int     `yaml:"reporters"`
	Reports   int     `yaml:"reports"`
	Rate      float64 `yaml:"rate"`
	Keys      int     `yaml:"keys"`
	// Loss drops that share of reports on the way out; the translator's
	// NACKs must recover every one.
	Loss float64 `yaml:"loss"`
	// Redundancy is N of Key-Write and Key-Increment.
	Redundancy int `yaml:"redundancy"`
	// KeyWriteSlots sizes the Key-Write table.
	KeyWriteSlots uint64 `yaml:"key-write-slots"`
	// FlowControl is the stage's second configuration, its own row
	// (dta-flow): DTA's flow control under loss and overload.
	FlowControl DTAFlowSpec `yaml:"flow-control"`
}

// DTAFlowSpec is the dta-flow run: the reporters' links lose LinkLoss of
// their frames (both ways), the translator meters its RDMA generation at
// Meter packets a second, and the translator must be offered at least 90%
// of Overload times that in new reports, measured where the switch hands
// them to its link (the reporters are set to twice Overload: the
// congestion notices halve their rate).
// HighShare of the reports are high priority and retransmittable (the
// reporters keep those alone); the rest are low priority, unnumbered,
// dropped by the translator over the meter. High-priority reports must
// all arrive, every low-priority one must be taken, dropped at the
// translator or lost on a link, each counted, and the reporters must
// slow down on the translator's congestion notices. The RDMA side stays
// lossless (RoCE on a PFC class).
type DTAFlowSpec struct {
	Enabled   bool    `yaml:"enabled"`
	Reports   int     `yaml:"reports"` // per reporter
	Meter     float64 `yaml:"meter"`
	Overload  float64 `yaml:"overload"`
	HighShare float64 `yaml:"high-share"`
	LinkLoss  float64 `yaml:"link-loss"`
}

func (v *DTASpec) validate(d *spec.Doc) {
	if !v.Enabled {
		return
	}
	if v.Reporters < 1 || v.Reporters > 8 {
		d.Errorf("dta.reporters", "must be 1..8, got %d", v.Reporters)
	}
	if v.Reports < 100 || v.Reports > 10_000_000 {
		d.Errorf("dta.reports", "must be 100..10000000, got %d", v.Reports)
	}
	if v.Rate < 0 {
		d.Errorf("dta.rate", "negative")
	}
	if v.Keys < 1 || v.Keys > 1<<24 {
		d.Errorf("dta.keys", "must be 1..16777216, got %d", v.Keys)
	}
	if v.Loss < 0 || v.Loss >= 0.5 {
		d.Errorf("dta.loss", "must be 0..0.5, got %g", v.Loss)
	}
	if v.Redundancy < 1 || v.Redundancy > 4 {
		d.Errorf("dta.redundancy", "must be 1..4, got %d", v.Redundancy)
	}
	if s := v.KeyWriteSlots; s == 0 || s&(s-1) != 0 || s > 1<<26 {
		d.Errorf("dta.key-write-slots", "a power of two up to 2^26, got %d", s)
	}
	f := &v.FlowControl
	if !f.Enabled {
		return
	}
	if f.Reports < 100 || f.Reports > 10_000_000 {
		d.Errorf("dta.flow-control.reports", "must be 100..10000000, got %d", f.Reports)
	}
	if f.Meter < 1000 {
		d.Errorf("dta.flow-control.meter", "RDMA packets a second, at least 1000, got %g", f.Meter)
	}
	if f.Overload == 0 {
		f.Overload = 2
	} else if f.Overload < 0.1 || f.Overload > 10 {
		d.Errorf("dta.flow-control.overload", "offered rate over the meter's, 0.1..10, got %g", f.Overload)
	}
	if f.HighShare <= 0 || f.HighShare >= 1 {
		d.Errorf("dta.flow-control.high-share", "a share of the reports, in (0, 1), got %g", f.HighShare)
	}
	if f.LinkLoss < 0 || f.LinkLoss >= 0.2 {
		d.Errorf("dta.flow-control.link-loss", "must be 0..0.2, got %g", f.LinkLoss)
	}
}

// dtaSketch is the stage's Count-Min sketch id.
const dtaSketch = 1

// runDTA wires reporters, the translator service and a collector on one
// bridged segment of ring links, runs the reporters, and checks every
// primitive through the collector's queries against what was reported.
func runDTA(ctx context.Context, l *Lab, row *Row) error { return runDTAStage(ctx, l, row, nil) }

// runDTAFlow is the dta-flow row: the stage again under loss and
// overload with the translator's flow control on.
func runDTAFlow(ctx context.Context, l *Lab, row *Row) error {
	return runDTAStage(ctx, l, row, &l.Spec.DTA.FlowControl)
}

func runDTAStage(ctx context.Context, l *Lab, row *Row, flow *DTAFlowSpec) error {
	s := &dtaStage{l: l, v: l.Spec.DTA, flow: flow, name: fmt.Sprintf("labdta%d", time.Now().UnixNano()),
		collIP: netip.MustParseAddr("10.9.0.1"), trIP: netip.MustParseAddr("10.9.0.100")}
	s.ctx, s.cancel = context.WithCancel(ctx)
	defer s.close()
	for _, step := range []func() error{s.openLinks, s.startCollector, s.startTranslator, s.newReporters} {
		if err := step(); err != nil {
			return err
		}
	}
	took, st, err := s.runReporters()
	if err != nil {
		return err
	}
	if flow != nil {
		chk, err := checkDTA(s.coll, s.reps, s.entries, true, true)
		if err == nil {
			err = checkHigh(s.coll, s.reps, s.entries)
		}
		s.recordLists(took)
		if err = s.flowFigures(row, st, took, chk, err); err != nil {
			return err
		}
		row.Pass = true
		return nil
	}
	// Over veth the kernel drops frames under load (its backlog queue
	// is not PFC): there a count, list or sketch may fall short, but
	// only by RDMA packets the translator knows it lost.
	chk, err := checkDTA(s.coll, s.reps, s.entries, l.Netns, false)
	if err == nil {
		err = chk.floors()
	}
	s.recordLists(took)
	err = s.figures(row, st, took, chk, err)
	if tbl := dtamem.FormatLoadTable(1<<16, dtamem.LoadFactorTable(1<<16, []float64{0.25, 0.5, 1, 2})); tbl != "" {
		if werr := os.WriteFile(l.Path("dta-loadfactor.txt"), []byte(tbl), 0o644); werr != nil {
			return werr
		}
	}
	if err != nil {
		return err
	}
	row.Pass = true
	return nil
}

// dtaStage is one run of the DTA stage: what its steps share.
type dtaStage struct {
	l            *Lab
	v            DTASpec
	flow         *DTAFlowSpec // nil: the lossless run
	lossy        []*lossyPort // the reporters' links, under flow
	tap          *offerTap    // the switch's port toward the translator, under flow
	name         string
	ctx          context.Context
	cancel       context.CancelFunc
	wg           sync.WaitGroup // the switch, the translator and the collector's server
	undo         []func()       // run in reverse by close
	collIP, trIP netip.Addr

	pool               *dpdk.Pool
	trPort, collPort   dpdk.Port
	repPorts, switched []dpdk.Port
	cs                 dtacollector.Spec
	key                []byte // the exchange's, shared by collector and translator
	exchange           string // the collector's exchange address
	coll               *dtacollector.Collector
	entries            *listEntries
	svc                *dtatranslator.Service
	reps               []*dtatranslator.Reporter
}

// close stops the stage: the translator and the switch go before the
// collector (a collector that left first would be seen going down), the
// collector before its RNIC, the RNIC before the links and the pool.
func (s *dtaStage) close() {
	s.cancel()
	s.wg.Wait()
	for i := len(s.undo) - 1; i >= 0; i-- {
		s.undo[i]()
	}
	s.cancel()
}

// openLinks makes the pool and the links: the translator's, the
// collector's and the reporters' ports, and their far ends, which the
// switch joins.
func (s *dtaStage) openLinks() error {
	pool, err := dpdk.NewPool(s.name, 32768, 0)
	if err != nil {
		return err
	}
	s.pool = pool
	s.undo = append(s.undo, func() { pool.Close() })
	near, far, closeLinks, err := s.l.links(s.name, 2+s.v.Reporters, pool)
	if err != nil {
		return err
	}
	s.undo = append(s.undo, closeLinks)
	s.trPort, s.collPort, s.repPorts, s.switched = near[0], near[1], near[2:], far
	if f := s.flow; f != nil {
		s.tap = &offerTap{Port: far[0]}
		s.switched[0] = s.tap
		// The reporters' links lose frames, both ways, at the switch's
		// end; the translator's and the collector's stay lossless.
		for i := 2; i < len(far); i++ {
			lp := &lossyPort{Port: far[i], loss: f.LinkLoss, rng: rand.New(rand.NewPCG(uint64(i), 23))}
			s.lossy = append(s.lossy, lp)
			s.switched[i] = lp
		}
	}
	return nil
}

// startCollector starts a soft RNIC and the collector service on it, with
// every primitive's region and one list per reporter, and its exchange.
func (s *dtaStage) startCollector() error {
	dev, err := soft.NewDevice(s.name+"coll", s.collPort, soft.Config{GIDs: []netip.Addr{s.collIP}})
	if err != nil {
		return err
	}
	s.undo = append(s.undo, func() { dev.Close() })
	if err := dev.Start(s.ctx); err != nil {
		return err
	}
	yml := fmt.Appendf(nil, `name: lab-collector
exchange: 127.0.0.1:0
redundancy: %d
key-write: {slots: %d}
key-increment: {slots: 16384}
sketches:
  - {id: %d, kind: count-min, columns: 1024, rows: 4, reporters: %d}
postcards: {slots: 16384, hops: 5}
append:
  batch: 4
  lists:
`, s.v.Redundancy, s.v.KeyWriteSlots, dtaSketch, s.v.Reporters)
	for i := range s.v.Reporters {
		yml = fmt.Appendf(yml, "    - {id: %d, entries: 65536}\n", i+1)
	}
	if s.cs, err = dtacollector.DecodeSpec("<lab dta collector>", yml); err != nil {
		return err
	}
	// The lab's exchange is on loopback, where a key is optional; it
	// authenticates anyway, so the lab runs the exchange as deployed.
	s.key = make([]byte, 32)
	_, _ = crand.Read(s.key)
	s.cs.Key = s.key
	// One poller per list: OnEntry sees a list's entries in order.
	entries := &listEntries{m: map[uint32][]uint32{}}
	s.entries = entries
	s.coll, err = dtacollector.New(s.cs, dev, dtacollector.Options{Log: s.l.Log, OnEntry: func(list uint32, _ uint64, data uint32) {
		entries.mu.Lock()
		entries.m[list] = append(entries.m[list], data)
		entries.mu.Unlock()
	}})
	if err != nil {
		return err
	}
	coll := s.coll
	s.undo = append(s.undo, func() { coll.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s.wg.Add(1)
	go func() { defer s.wg.Done(); _ = coll.Serve(s.ctx, ln) }()
	s.exchange = ln.Addr().String()
	return nil
}

// startTranslator starts the translator service and the switch between
// them all, and waits for the collector connection.
func (s *dtaStage) startTranslator() error {
	// Postcarder flows (and Append batches) are flushed after 20 ms,
	// not 1: on a loaded machine or under the race detector a flow's
	// five postcards spread over more than a millisecond and its record
	// would be written incomplete, which the check counts apart.
	yml := fmt.Appendf(nil, "name: lab-translator\nip: %s\nflush-timeout: 20ms\ncollectors:\n  - name: lab-collector\n    exchange: %s\n", s.trIP, s.exchange)
	if f := s.flow; f != nil {
		// The bucket holds 25 ms of the rate (256 packets at least):
		// the lab's goroutines share a few cores, and a translator kept
		// off its core for milliseconds would otherwise lose the tokens
		// of that time while its reports wait in the rings.
		yml = fmt.Appendf(yml, "flow-control: {rate: %g, burst: %d, high-dscp: %d}\n", f.Meter, max(256, int(f.Meter/40)), dtatranslator.HighDSCP)
	}
	ts, err := dtatranslator.DecodeSpec("<lab dta translator>", yml)
	if err != nil {
		return err
	}
	ts.Collectors[0].Key = s.key
	if s.svc, err = dtatranslator.NewService(ts, s.trPort, s.pool, s.l.Log); err != nil {
		return err
	}
	// RoCE runs on a lossless class: the switch pauses the ports that
	// feed a full one (PFC) rather than drop, and the translator, which
	// cannot resend an RDMA packet, relies on it.
	br := ring.NewBridge(s.switched...)
	br.Lossless = true
	s.wg.Add(2)
	go func() { defer s.wg.Done(); br.Run(s.ctx) }()
	go func() { defer s.wg.Done(); _ = s.svc.Run(s.ctx) }()
	if err := waitDTA(s.ctx, s.svc, 5*time.Second, func(st *dtatranslator.Status) bool { return st.Collectors[0].Up }); err != nil {
		return fmt.Errorf("translator: collector not up: %w", err)
	}
	return nil
}

// newReporters makes the reporters, each with its own list, sending the
// mix of every primitive, and resolves the translator's address.
func (s *dtaStage) newReporters() error {
	v := s.v
	sk := s.coll.Regions().Sketches[dtaSketch]
	s.reps = make([]*dtatranslator.Reporter, v.Reporters)
	for i := range s.reps {
		rc := dtatranslator.ReporterConfig{ID: uint16(i), SrcMAC: header.MAC(s.repPorts[i].Info().MAC),
			SrcIP: netip.AddrFrom4([4]byte{10, 9, 0, byte(10 + i)}), DstIP: s.trIP, Keys: uint32(v.Keys),
			Redundancy: uint8(v.Redundancy), Lists: []uint32{uint32(i + 1)}, Hops: 5, Sketch: &sk, SketchID: dtaSketch,
			Retransmittable: true, Loss: v.Loss, Count: uint64(v.Reports), Rate: v.Rate, Seed: uint64(i + 1)}
		rc.Mix.KeyWrite, rc.Mix.Append, rc.Mix.KeyIncrement, rc.Mix.Postcarder = 3, 2, 2, 1
		if f := s.flow; f != nil {
			// Overload times the meter's rate in RDMA packets (a report
			// of the mix costs N packets, Key-Write and Key-Increment, or
			// one; the sketch's columns at the end one each), twice:
			// under overload the congestion notices keep the reporters
			// at half their rate, where they still offer it.
			n, cols := float64(v.Redundancy), float64(sk.Columns)
			cost := (float64(f.Reports)*(3*n+2+2*n+1)/8 + cols) / (float64(f.Reports) + cols)
			rc.Rate = 2 * f.Overload * f.Meter / cost / float64(v.Reporters)
			rc.Count, rc.Loss, rc.HighShare, rc.HighOnly = uint64(f.Reports), 0, f.HighShare, true
			// The lab's goroutines share a few busy cores, where a
			// reporter may wait a hundred milliseconds for one; a
			// switch does not, so the reporters make up for such a wait
			// and keep to their rate on average.
			rc.CatchUp = time.Second
		}
		var err error
		if s.reps[i], err = dtatranslator.NewReporter(rc, s.repPorts[i], s.pool); err != nil {
			return err
		}
		rctx, rcancel := context.WithTimeout(s.ctx, 3*time.Second)
		err = s.reps[i].Resolve(rctx)
		rcancel()
		if err != nil {
			return err
		}
	}
	return nil
}

// runReporters runs every reporter to its count and waits until the
// translator has settled (nothing queued, its counters still); it returns
// how long that took and the translator's status then.
func (s *dtaStage) runReporters() (time.Duration, dtatranslator.Status, error) {
	t0 := time.Now()
	if s.tap != nil {
		s.tap.begin()
	}
	errs := make([]error, len(s.reps))
	var rwg sync.WaitGroup
	for i, r := range s.reps {
		rwg.Add(1)
		// Each lingers until the translator has acknowledged all its
		// reports (a loaded machine may take seconds), at most 10 s.
		go func() { defer rwg.Done(); errs[i] = r.Run(s.ctx, 10*time.Second) }()
	}
	rwg.Wait()
	for i, r := range s.reps {
		if r.Stats.Unacknowledged > 0 {
			errs = append(errs, fmt.Errorf("reporter %d: %d reports never acknowledged by the translator", i, r.Stats.Unacknowledged))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return 0, dtatranslator.Status{}, err
	}
	// waitDTA reads fresh statuses: the last publication could predate
	// every report (the reporters may be acknowledged within the 50 ms
	// between two), and its translator, with the collector up, nothing
	// outstanding and its counters still, looked settled while
	// Key-Increments were still to be sent.
	var last dtatranslator.ServiceStats
	seen := false
	err := waitDTA(s.ctx, s.svc, 15*time.Second, func(st *dtatranslator.Status) bool {
		ok := seen && st.Settled() && st.Stats == last
		last, seen = st.Stats, true
		return ok
	})
	took := time.Since(t0)
	fctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	st, serr := s.svc.FreshStatus(fctx)
	cancel()
	if err == nil && serr != nil {
		err = fmt.Errorf("no fresh status: %w", serr)
	}
	if err != nil {
		return took, st, fmt.Errorf("translator did not settle (%d reports, %d queued): %w", st.Stats.Reports, st.QueueDepth, err)
	}
	s.awaitLists()
	return took, st, nil
}

// awaitLists lets the collector's list pollers read the last entries the
// translator wrote: until every list holds what its reporter appended,
// or, where some were lost on the way, until no list has grown for 200 ms
// (at most 5 s). A fixed pause lost the race on a loaded machine: the
// check then read a list two entries short.
func (s *dtaStage) awaitLists() {
	count := func() (n int, all bool) {
		s.entries.mu.Lock()
		defer s.entries.mu.Unlock()
		all = true
		for i, r := range s.reps {
			got := len(s.entries.m[uint32(i+1)])
			n += got
			if got < len(r.Truth.Append[uint32(i+1)]) {
				all = false
			}
		}
		return n, all
	}
	last, since := -1, time.Now()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && s.ctx.Err() == nil; time.Sleep(5 * time.Millisecond) {
		n, all := count()
		if all {
			return
		}
		if n != last {
			last, since = n, time.Now()
		} else if time.Since(since) >= 200*time.Millisecond {
			return
		}
	}
}

// recordLists keeps the lists' rates for the dashboard: over the reporting
// run, and the collector's own over its last second.
func (s *dtaStage) recordLists(took time.Duration) {
	var lists []dashboard.DTAList
	for _, ls := range s.coll.Stats().Lists {
		lists = append(lists, dashboard.DTAList{Collector: s.cs.Name, ID: ls.ID, Entries: ls.Read, Capacity: ls.Entries,
			Rate: float64(ls.Read) / took.Seconds(), LastRate: ls.Rate})
	}
	s.l.record(func(r *results) { r.dtaLists = lists })
}

// figures fills the row from the reporters', the translator's and the
// check's counts. A shortfall fails the stage unless the translator lost
// RDMA packets (possible over veth only); err is the check's, returned
// unless a shortfall replaces it.
func (s *dtaStage) figures(row *Row, st dtatranslator.Status, took time.Duration, chk dtaCheck, err error) error {
	v := s.v
	var sent, lost, resent uint64
	for _, r := range s.reps {
		sent += r.Stats.Sent
		lost += r.Stats.Lost
		resent += r.Stats.Resent
	}
	c := st.Collectors[0]
	row.Ran = fmt.Sprintf("%d reporters x %d reports (Key-Write, Append, Key-Increment, Postcarder, Sketch-Merge; %.0f%% lost on the way) "+
		"-> translator service -> soft-RNIC collector, checked by query", v.Reporters, v.Reports, 100*v.Loss)
	if s.l.Netns {
		row.Ran += "; each on an AF_PACKET port in its own network namespace, switched over veth pairs " +
			"(the kernel drops frames under load: answers may fall short only by the RDMA packets the translator lost, rdma_lost)"
	}
	row.Figure("reports", "%d", sent)
	row.Figure("rate", "%.0f/s", float64(sent)/took.Seconds())
	row.Figure("rdma_pkts", "%d", c.Conn.Packets)
	row.Figure("lost", "%d", lost)
	row.Figure("nacks", "%d", st.Seq.NACKs)
	row.Figure("resent", "%d", resent)
	row.Figure("key_write", "%d/%d", chk.kwFound, chk.kwKeys)
	row.Figure("key_incr_exact", "%d/%d", chk.kiExact, chk.kiKeys)
	row.Figure("append", "%d", chk.appended)
	row.Figure("sketch", "%d/%d", chk.skExact, chk.skKeys)
	row.Figure("paths", "%d/%d", chk.pathFound, chk.paths)
	row.Figure("paths_incomplete", "%d", chk.pathIncomplete)
	lostPSNs := c.LostPSNs
	row.Figure("rdma_lost", "%d", lostPSNs)
	if short := chk.kiShort + chk.listShort + chk.skShort; short > 0 {
		row.Figure("short", "key_incr:%d,list_entries:%d,sketch:%d", chk.kiShort, chk.listShort, chk.skShort)
		if err == nil && lostPSNs == 0 {
			err = fmt.Errorf("answers short (%d key-increments, %d list entries, %d sketch counts) with no RDMA packet lost",
				chk.kiShort, chk.listShort, chk.skShort)
		}
	}
	return err
}

// listEntries are the Append entries the collector's pollers read.
type listEntries struct {
	mu sync.Mutex
	m  map[uint32][]uint32
}

// dtaCheck is what the queries found; the shortfalls are counted over a
// lossy medium only.
type dtaCheck struct {
	kwKeys, kwFound  int
	kiKeys, kiExact  int
	appended         int
	skKeys, skExact  int
	paths, pathFound int
	pathIncomplete   int
	kiShort          int
	listShort        int
	skShort          int
}

// checkDTA queries the collector for everything the reporters reported.
// Key-Write may answer empty (a slot overwritten), never wrong; counts
// never fall short; lists hold every entry in order; the sketch is the
// reporters' merged; paths answer as reported. Over a lossy medium a
// count, a list or a sketch count may fall short (counted), never over.
func checkDTA(coll *dtacollector.Collector, reps []*dtatranslator.Reporter, entries *listEntries, lossy, reordered bool) (dtaCheck, error) {
	var c dtaCheck
	// Key-Write: any value any reporter wrote (a value whose RDMA packets
	// the translator lost leaves an older one: stale, not wrong).
	want := map[uint32][]uint32{}
	counts := map[uint32]uint64{}
	for _, r := range reps {
		for k, vs := range r.Truth.KeyWriteAll {
			want[k] = append(want[k], vs...)
		}
		for k, n := range r.Truth.KeyIncrement {
			counts[k] += n
		}
	}
	for k, vs := range want {
		c.kwKeys++
		res, err := coll.KeyWrite(k, 0)
		if errors.Is(err, dtacollector.ErrNotFound) {
			continue
		}
		if err != nil {
			return c, err
		}
		if !slices.Contains(vs, res.Value) {
			return c, fmt.Errorf("key-write %d: %d, reported %v", k, res.Value, vs)
		}
		c.kwFound++
	}
	for k, n := range counts {
		c.kiKeys++
		res, err := coll.KeyIncrement(k)
		if err != nil {
			return c, err
		}
		if res.Count < n {
			if lossy {
				c.kiShort++
				continue
			}
			return c, fmt.Errorf("key-increment %d: %d, below the %d reported", k, res.Count, n)
		}
		if res.Count == n {
			c.kiExact++
		}
	}
	for i, r := range reps {
		id := uint32(i + 1)
		entries.mu.Lock()
		got := slices.Clone(entries.m[id])
		entries.mu.Unlock()
		if want := r.Truth.Append[id]; !slices.Equal(got, want) {
			// Under flow control a high-priority entry lost on a link
			// comes back resent after low-priority ones sent later:
			// then the list holds reported entries, not in their order.
			if !lossy || (!subsequence(got, want) && !(reordered && submultiset(got, want))) {
				return c, fmt.Errorf("list %d: %d entries read, %d reported", id, len(got), len(want))
			}
			c.listShort += len(want) - len(got)
		}
		c.appended += len(got)
	}
	merged := dtamem.NewSketch(&dtamem.SketchRegion{Kind: dtawire.SketchCountMin, Columns: reps[0].Truth.Sketch.Columns, Rows: reps[0].Truth.Sketch.Rows})
	for _, r := range reps {
		for i, v := range r.Truth.Sketch.C {
			merged.C[i] += v
		}
	}
	for k := range want {
		c.skKeys++
		res, err := coll.SketchCount(dtaSketch, k)
		if err != nil {
			return c, err
		}
		exp := ^uint32(0)
		for row := 0; row < merged.Rows; row++ {
			exp = min(exp, merged.C[int(dtamem.Slot(k, row, uint64(merged.Columns)))*merged.Rows+row])
		}
		if res.Count < exp && lossy {
			c.skShort++
			continue
		}
		if res.Count != exp {
			return c, fmt.Errorf("sketch count of %d: %d, the reporters' merged sketch says %d", k, res.Count, exp)
		}
		c.skExact++
	}
	// Postcards: every hop of a complete record is some reporter's path
	// for the flow, and every hop an incomplete record holds; an
	// incomplete record counts apart, not as a path found.
	for _, r := range reps {
		for k, path := range r.Truth.Postcards {
			c.paths++
			res, err := coll.Postcard(k)
			if errors.Is(err, dtacollector.ErrNotFound) {
				continue
			}
			if err != nil {
				return c, err
			}
			if !reportedPath(reps, k, res.Path) {
				return c, fmt.Errorf("flow %d: hops %v (mask %#x), reported %v", k, res.Hops, res.Mask, path)
			}
			if !res.Complete {
				c.pathIncomplete++
				continue
			}
			c.pathFound++
		}
	}
	return c, nil
}

// floors fails a lossless run whose queries answered too few keys and
// paths (a run under flow control drops low-priority reports on purpose).
func (c *dtaCheck) floors() error {
	if c.kwFound < c.kwKeys*9/10 || c.pathFound < c.paths*9/10 {
		return fmt.Errorf("too few answers: key-write %d/%d, complete paths %d/%d (%d incomplete)",
			c.kwFound, c.kwKeys, c.pathFound, c.paths, c.pathIncomplete)
	}
	return nil
}

// submultiset: every entry of got is one of want's, each as often at
// most, in any order.
func submultiset(got, want []uint32) bool {
	n := map[uint32]int{}
	for _, v := range want {
		n[v]++
	}
	for _, v := range got {
		if n[v]--; n[v] < 0 {
			return false
		}
	}
	return true
}

// subsequence: got is want with some entries left out, in want's order.
func subsequence(got, want []uint32) bool {
	i := 0
	for _, v := range want {
		if i < len(got) && got[i] == v {
			i++
		}
	}
	return i == len(got)
}

// reportedPath: every hop path holds is some reporter's path for flow k
// (two may draw one flow key; the last record stands).
func reportedPath(reps []*dtatranslator.Reporter, k uint32, path dtamem.Path) bool {
	for _, r := range reps {
		if want, ok := r.Truth.Postcards[k]; ok && len(path.Wrong(want)) == 0 {
			return true
		}
	}
	return false
}

// waitDTA polls the translator's status, as of a publication made after
// each look (FreshStatus), until ok or the timeout.
func waitDTA(ctx context.Context, svc *dtatranslator.Service, timeout time.Duration, ok func(*dtatranslator.Status) bool) error {
	deadline := time.Now().Add(timeout)
	// A loop that never publishes again times the wait out too.
	fctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	for {
		st, err := svc.FreshStatus(fctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return errors.New("timed out")
		}
		if ok(&st) {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
