package hostmeshanalyzer

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Config are the analyzer's thresholds. The zero value of a field means
// the paper's constant (or this package's default where the paper gives
// none).
type Config struct {
	// Window is the analysis period (20 s).
	Window time.Duration
	// Hold is how long an anomalous RNIC's probes keep counting as RNIC
	// problems (1 minute).
	Hold time.Duration
	// TimeoutFraction: an RNIC is anomalous when more than this share of
	// its probes time out (0.1).
	TimeoutFraction float64
	// MinProbes an RNIC needs in a window to be judged (10).
	MinProbes int
	// HighLatencyFactor: a probe's network latency is high above this
	// many times the window's median (3), and at least HighLatencyMin
	// above it.
	HighLatencyFactor float64
	HighLatencyMin    time.Duration
	// MinVotes: links and switches are only alerted on once this many
	// abnormal probes vote (5), and when at least MinDropShare (0.01) of
	// the probes over the top link timed out, or more than
	// MinLatencyShare (0.5) of those over one direction of it had a high
	// latency. Congestion is a standing queue, as behind the hash
	// collisions on rail uplinks that the paper locates by latency: it
	// delays the median probe over the link. Bursts of ordinary traffic
	// delay a minority: in the simulator, under web-search traffic at 5%
	// load, up to a quarter of a busy link's probes exceed the threshold
	// in fault-free windows, while a collision on an uplink delays all of
	// them, by a hundred times the median.
	MinVotes        int
	MinDropShare    float64
	MinLatencyShare float64
	// MinExplainShare: after the top link, a further link is suspicious
	// only when the abnormal probes the links before it do not explain
	// give it at least this share (0.2) of the top link's votes; fewer are
	// the noise any fault leaves around it.
	MinExplainShare float64
	// ProcessingFactor: a host whose median processing delay exceeds
	// this many times the other hosts' median (4) and ProcessingMin
	// (100 us) is alerted on as overloaded.
	ProcessingFactor float64
	ProcessingMin    time.Duration
	// PFCStormShare: an RNIC that held its link paused (its tx pause
	// duration on the probes' class) for more than this share of the
	// window (0.01) is storming. A healthy RNIC drains its receive buffer
	// and pauses its switch rarely and for microseconds; one that cannot
	// (a PCIe link downgraded under it, problem #8) pauses it for good, and
	// PFC spreads the pause to every switch and RNIC whose traffic waits
	// behind it.
	PFCStormShare float64
	// LosslessPG is the switches' ingress priority group of the probes'
	// (lossless) class, whose discards step 0b reads (3, as the RDMA class
	// maps on SONiC and as mesh probe's --pfc-prio; 0 means the default,
	// PG 0 being the lossy group).
	LosslessPG int
	// MaxResults bounds the results kept (1,000,000): a flood from a
	// broken agent cannot exhaust memory.
	MaxResults int
}

func (c Config) withDefaults() Config {
	def := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	if c.Window == 0 {
		c.Window = 20 * time.Second
	}
	if c.Hold == 0 {
		c.Hold = time.Minute
	}
	def(&c.TimeoutFraction, 0.1)
	def(&c.HighLatencyFactor, 3)
	def(&c.MinDropShare, 0.01)
	def(&c.MinLatencyShare, 0.5)
	def(&c.MinExplainShare, 0.2)
	def(&c.ProcessingFactor, 4)
	def(&c.PFCStormShare, 0.01)
	if c.LosslessPG == 0 {
		c.LosslessPG = 3
	}
	if c.MinProbes == 0 {
		c.MinProbes = 10
	}
	if c.MinVotes == 0 {
		c.MinVotes = 5
	}
	if c.ProcessingMin == 0 {
		c.ProcessingMin = 100 * time.Microsecond
	}
	if c.MaxResults == 0 {
		c.MaxResults = 1_000_000
	}
	return c
}

// Analyzer keeps the uploaded results and paths and analyzes them window
// by window. It is safe for concurrent use.
type Analyzer struct {
	mu      sync.Mutex
	cfg     Config
	results []Result
	paths   map[Tuple]*Path
	pfc     []pfcSample
	pgdrops []PGDrop
	held    map[string]int64 // RNIC -> anomalous until (ns)
	// discardHeld: switch -> until when (ns) it counts as discarding
	// after its lossless class last did.
	discardHeld map[string]int64
	down        map[string]bool
	// Counters: results and batches taken, results dropped (over the
	// bound, or too old for any window), switch counter records dropped
	// as malformed (PGDrop.Valid).
	Batches, Taken, Dropped, Malformed uint64
}

// NewAnalyzer makes an analyzer.
func NewAnalyzer(cfg Config) *Analyzer {
	return &Analyzer{cfg: cfg.withDefaults(), paths: map[Tuple]*Path{}, held: map[string]int64{}, down: map[string]bool{},
		discardHeld: map[string]int64{}}
}

// Config is the analyzer's configuration with defaults filled in.
func (a *Analyzer) Config() Config { return a.cfg }

// Add takes an agent's batch.
func (a *Analyzer) Add(b *Batch) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.Batches++
	for _, r := range b.Results {
		if len(a.results) >= a.cfg.MaxResults {
			a.Dropped++
			continue
		}
		a.results = append(a.results, r)
		a.Taken++
	}
	for i := range b.Paths {
		p := b.Paths[i]
		// A partial trace (a hop that did not answer) keeps the last
		// complete path: the probes of a tuple follow it until routes
		// change, and a failing link is exactly what stops a trace.
		if cur, ok := a.paths[p.Tuple]; ok && !p.Complete && cur.Complete {
			continue
		}
		if cur, ok := a.paths[p.Tuple]; ok && cur.At > p.At {
			continue
		}
		a.paths[p.Tuple] = &p
	}
	for _, d := range b.Down {
		a.down[b.Host+"/"+d] = true
	}
	for _, p := range b.PFC {
		if len(a.pfc) >= a.cfg.MaxResults {
			a.Dropped++
			continue
		}
		a.pfc = append(a.pfc, pfcSample{key: p.Key(b.Host), PFC: p})
	}
	for _, d := range b.PGDrops {
		switch {
		case d.Valid() != nil:
			a.Malformed++
		case len(a.pgdrops) >= a.cfg.MaxResults:
			a.Dropped++
		default:
			a.pgdrops = append(a.pgdrops, d)
		}
	}
}

// pfcSample is an RNIC's PFC counters over an interval, by its
// cluster-wide name.
type pfcSample struct {
	key string
	PFC
}

// Percentiles are the SLA percentiles of a distribution, ns.
type Percentiles struct {
	N    int   `json:"n"`
	P50  int64 `json:"p50_ns"`
	P90  int64 `json:"p90_ns"`
	P99  int64 `json:"p99_ns"`
	P999 int64 `json:"p999_ns"`
	Max  int64 `json:"max_ns"`
}

func percentiles(v []int64) Percentiles {
	if len(v) == 0 {
		return Percentiles{}
	}
	slices.Sort(v)
	at := func(q float64) int64 { return v[min(len(v)-1, int(q*float64(len(v))))] }
	return Percentiles{N: len(v), P50: at(0.5), P90: at(0.9), P99: at(0.99), P999: at(0.999), Max: v[len(v)-1]}
}

// RNICStatus is one RNIC's window.
type RNICStatus struct {
	RNIC     string `json:"rnic"`
	Probes   int    `json:"probes"` // sent by it or to it
	Timeouts int    `json:"timeouts"`
	// In and InTimeouts are the probes to it.
	In         int `json:"probes_to"`
	InTimeouts int `json:"timeouts_to"`
	// Rate is the timeout rate of the worse direction.
	Rate float64 `json:"timeout_rate"`
	// Anomalous this window; Held from an earlier window; Down reported
	// gone by its agent; Explained says its timeouts were confined to one
	// switch link, which takes them instead.
	Anomalous bool   `json:"anomalous,omitempty"`
	Held      bool   `json:"held,omitempty"`
	Down      bool   `json:"down,omitempty"`
	Explained string `json:"explained_by,omitempty"`
}

func (st *RNICStatus) count(to, timeout bool) {
	st.Probes++
	if to {
		st.In++
	}
	if timeout {
		st.Timeouts++
		if to {
			st.InTimeouts++
		}
	}
}

// rate is the worse direction's timeout rate: probes to the RNIC (the
// paper's rule), or from it (an RNIC that cannot send fails the probes
// to its peers, one in seven each, and all of its own).
func (st *RNICStatus) rate(minProbes int) {
	st.Rate = 0
	if st.In >= minProbes {
		st.Rate = float64(st.InTimeouts) / float64(st.In)
	}
	if out := st.Probes - st.In; out >= minProbes {
		st.Rate = max(st.Rate, float64(st.Timeouts-st.InTimeouts)/float64(out))
	}
}

// PFCStatus is one RNIC's pause counters over a window: the frames it sent
// and received and how long they held its link (ns), the share of the
// window it held its link paused, whether that makes it a storm's origin,
// and the abnormal probes (timeouts, slow answers) the analysis took for
// the storm's rather than the network's.
type PFCStatus struct {
	RNIC      string  `json:"rnic"`
	TxPause   uint64  `json:"tx_pause"`
	RxPause   uint64  `json:"rx_pause"`
	TxPauseNs int64   `json:"tx_pause_ns"`
	RxPauseNs int64   `json:"rx_pause_ns"`
	TxShare   float64 `json:"tx_share"`
	Storming  bool    `json:"storming,omitempty"`
	Timeouts  int     `json:"timeouts_behind,omitempty"`
	Slow      int     `json:"slow_behind,omitempty"`
}

// Vote is a link's or switch's share of the abnormal probes.
type Vote struct {
	Name      string `json:"name"`
	Votes     int    `json:"votes"`
	Timeouts  int    `json:"timeouts"`
	HighLat   int    `json:"high_latency"`
	Traversed int    `json:"traversed"` // probes of the window over it
	// Dir is the direction ranked ("a>b"), for latency, and MedianNs the
	// median network latency of the probes over it.
	Dir      string  `json:"direction,omitempty"`
	MedianNs int64   `json:"median_ns,omitempty"`
	Share    float64 `json:"share"` // votes / traversed
}

// count takes one probe over the voted element: every probe traverses
// it, an abnormal one votes, as a timeout or a slow answer.
func (v *Vote) count(abnormal, timeout bool) {
	v.Traversed++
	if !abnormal {
		return
	}
	v.Votes++
	if timeout {
		v.Timeouts++
	} else {
		v.HighLat++
	}
}

// HostStatus is one host's processing delay.
type HostStatus struct {
	Host       string      `json:"host"`
	Processing Percentiles `json:"processing"`
	Overloaded bool        `json:"overloaded,omitempty"`
}

// Report is one window's analysis.
type Report struct {
	Start    int64 `json:"start_ns"`
	End      int64 `json:"end_ns"`
	Probes   int   `json:"probes"`
	Timeouts int   `json:"timeouts"`
	// Timeouts split into RNIC problems and switch-network problems;
	// probes over the high-latency threshold (not to or from anomalous
	// RNICs).
	RNICProblems   int   `json:"rnic_problems"`
	SwitchProblems int   `json:"switch_problems"`
	HighLatency    int   `json:"high_latency"`
	HighLatencyNs  int64 `json:"high_latency_threshold_ns"`
	// Unlocalized abnormal probes had no traced path.
	Unlocalized    int         `json:"unlocalized"`
	RNICDropRate   float64     `json:"rnic_drop_rate"`
	SwitchDropRate float64     `json:"switch_drop_rate"`
	Network        Percentiles `json:"network_latency"`
	Processing     Percentiles `json:"processing_delay"`
	// RNICs: anomalous first (highest timeout rate first), then the rest
	// with timeouts. Links and Switches ranked by votes (Algorithm 1).
	RNICs []RNICStatus `json:"rnics"`
	// PFC are the RNICs that sent or received pause frames in the window,
	// storming ones first.
	PFC []PFCStatus `json:"pfc,omitempty"`
	// Discards are the switches whose lossless class discarded frames in
	// the window, most discards first.
	Discards []DiscardStatus `json:"discards,omitempty"`
	Links    []Vote          `json:"links"`
	// Basis is what Links and Switches are ranked by: "drops" or
	// "latency".
	Basis string `json:"basis"`
	// Hot are the link directions with the highest median latency.
	Hot      []Vote       `json:"hot"`
	Switches []Vote       `json:"switches"`
	Hosts    []HostStatus `json:"hosts"`
	// Suspects are every element alerted on, ranked across kinds (see
	// rankSuspects); Alerts are their alert lines in that order.
	Suspects []Suspect `json:"suspects"`
	Alerts   []string  `json:"alerts"`
}

// Kinds of suspects.
const (
	KindRNIC   = "rnic"
	KindLink   = "link"
	KindSwitch = "switch"
	KindHost   = "host"
)

// Suspect is an element a window's analysis alerts on, with the evidence
// it is ranked by: Basis is "drops" (probes lost), "latency" (probes
// delayed) or "processing" (probes a host answered slowly), Evidence how
// many of the window's abnormal probes of that basis it explains, and
// Share what part they are of the probes that crossed it (or that it
// sent, received or answered).
type Suspect struct {
	Kind     string  `json:"kind"`
	Name     string  `json:"name"`
	Basis    string  `json:"basis"`
	Evidence int     `json:"evidence"`
	Share    float64 `json:"share"`
	Alert    string  `json:"alert"`
}

// Top is the window's top suspect across all kinds, ok false when it
// raised no alert.
func (r *Report) Top() (s Suspect, ok bool) {
	if len(r.Suspects) == 0 {
		return Suspect{}, false
	}
	return r.Suspects[0], true
}

// First is the highest-ranked suspect of a kind, or "".
func (r *Report) First(kind string) string {
	for _, s := range r.Suspects {
		if s.Kind == kind {
			return s.Name
		}
	}
	return ""
}

// Span is the time the kept results cover.
func (a *Analyzer) Span() (first, last int64, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.results) == 0 {
		return 0, 0, false
	}
	first, last = a.results[0].At, a.results[0].At
	for _, r := range a.results {
		first, last = min(first, r.At), max(last, r.At)
	}
	return first, last, true
}

// Analyze analyzes the window that ends at end (ns, the agents' clock)
// and forgets the results before it.
func (a *Analyzer) Analyze(end int64) *Report {
	a.mu.Lock()
	defer a.mu.Unlock()
	start := end - int64(a.cfg.Window)
	var win []Result
	kept := a.results[:0]
	for _, r := range a.results {
		switch {
		case r.At >= end:
			kept = append(kept, r)
		case r.At >= start:
			win = append(win, r)
		}
	}
	a.results = kept
	pfc := a.pfc
	a.pfc = nil
	for _, p := range pfc {
		if p.To > end {
			a.pfc = append(a.pfc, p)
		}
	}
	pg := a.pgdrops
	a.pgdrops = nil
	for _, d := range pg {
		if d.To > end {
			a.pgdrops = append(a.pgdrops, d)
		}
	}
	return a.analyze(start, end, win, pfc, pg)
}

// pathOf is the traced path of a result, nil if none is known.
func (a *Analyzer) pathOf(r *Result) []string {
	p, ok := a.paths[r.Tuple()]
	if !ok || !p.Complete {
		return nil
	}
	return p.Nodes()
}

// window is one analysis: the results of the window, their traced paths,
// and the report the steps fill in turn.
type window struct {
	a          *Analyzer
	c          *Config
	start, end int64
	win        []Result
	paths      [][]string
	rep        *Report
	// flagged are the RNICs whose probes count as RNIC problems: held
	// from earlier windows, gone, or found anomalous in this one.
	flagged map[string]bool
	// hostProc is each host's processing delays, for step 4.
	hostProc map[string][]int64
	// storms are the storming RNICs' counters; behind says which results
	// wait behind a storm (their timeouts and delays are the storm's).
	storms map[string]*PFCStatus
	behind []bool
	// discarding are the switches whose lossless class discarded;
	// charged says which of them a result is charged to ("" for none),
	// rippleOf which discarding switch a neighbour's slow probes are
	// charged to. aside are the results behind a storm or charged to a
	// discarding switch: the RNIC counts leave them out.
	discarding map[string]*DiscardStatus
	charged    []string
	rippleOf   map[string]string
	aside      []bool
}

func (a *Analyzer) analyze(start, end int64, win []Result, pfc []pfcSample, pg []PGDrop) *Report {
	w := &window{a: a, c: &a.cfg, start: start, end: end, win: win,
		rep: &Report{Start: start, End: end, Probes: len(win)}}
	w.paths = make([][]string, len(win))
	for i := range win {
		w.paths[i] = a.pathOf(&win[i])
		if win[i].Timeout {
			w.rep.Timeouts++
		}
	}
	w.pfcStorms(pfc)
	w.losslessDiscards(pg)
	w.aside = make([]bool, len(win))
	for i := range win {
		w.aside[i] = w.behind[i] || w.charged[i] != ""
	}
	w.anomalousRNICs()
	w.slaPercentiles()
	sus := w.rnicSuspects()
	sus = append(sus, w.voting()...)
	sus = append(sus, w.discardSuspects()...)
	sus = append(sus, w.overloadedHosts()...)
	sus = append(sus, w.stormSuspects()...)
	w.rankSuspects(sus)
	return w.rep
}

// pfcStorms is step 0, from the RNICs' PFC counters: the RNICs that held
// their links paused for more than PFCStormShare of the window are
// storming, and the probes that wait behind them are the storm's. A
// storming RNIC's switch cannot send to it; its queue to the RNIC fills,
// the switch pauses the ports that feed it, and their switches in turn:
// the lossless class freezes hop by hop, and probes stuck anywhere on the
// way time out as if lost. Probes are behind a storm when they are to or
// from the storming RNIC, when an RNIC of theirs was paused by its switch
// in the window (the pause reached its rail), when their path is not
// traced (it may cross the freeze as well as any), or when their path crosses
// the storming RNIC's switch or a switch next to it: those send to it and
// are the first its pauses freeze, with every port that feeds them. The
// RNICs' counters do not show how far the freeze went past them; in a
// two-tier rail-optimized cluster every spine is next to every rail, so
// every probe of a storm's window is taken for the storm's, and a second
// fault in those windows goes unseen until the storm ends (the switches'
// pause counters would bound the freeze). Without a storm nothing is
// behind one: the pauses an incast sends are the network's business, and
// the voting judges them.
func (w *window) pfcStorms(pfc []pfcSample) {
	w.behind = make([]bool, len(w.win))
	w.storms = map[string]*PFCStatus{}
	span := w.end - w.start
	by := map[string]*PFCStatus{}
	for i := range pfc {
		p := &pfc[i]
		// The interval's share in the window, counters spread evenly
		// over it.
		lo, hi := max(p.From, w.start), min(p.To, w.end)
		if hi <= lo && !(p.To == p.From && p.To > w.start && p.To <= w.end) {
			continue
		}
		f := 1.0
		if p.To > p.From {
			f = float64(hi-lo) / float64(p.To-p.From)
		}
		st := by[p.key]
		if st == nil {
			st = &PFCStatus{RNIC: p.key}
			by[p.key] = st
		}
		st.TxPause += uint64(math.Round(f * float64(p.TxPause)))
		st.RxPause += uint64(math.Round(f * float64(p.RxPause)))
		st.TxPauseNs += int64(f * float64(p.TxPauseNs))
		st.RxPauseNs += int64(f * float64(p.RxPauseNs))
	}
	paused := map[string]bool{}
	for k, st := range by {
		st.TxShare = float64(st.TxPauseNs) / float64(max(span, 1))
		if st.TxPause > 0 && st.TxShare > w.c.PFCStormShare {
			st.Storming = true
			w.storms[k] = st
		}
		if st.RxPause > 0 && st.RxPauseNs > 0 {
			paused[k] = true
		}
	}
	for _, st := range by {
		if st.TxPause > 0 || st.RxPause > 0 {
			w.rep.PFC = append(w.rep.PFC, *st)
		}
	}
	slices.SortFunc(w.rep.PFC, func(x, y PFCStatus) int {
		return cmp.Or(cmp.Compare(y.TxShare, x.TxShare), cmp.Compare(y.RxPauseNs, x.RxPauseNs), cmp.Compare(x.RNIC, y.RNIC))
	})
	if len(w.storms) == 0 {
		return
	}
	// The storming RNICs' switches and their neighbours, from the
	// traced paths.
	stormSw := map[string]bool{}
	for _, p := range w.paths {
		if len(p) < 3 {
			continue
		}
		if w.storms[p[0]] != nil {
			stormSw[p[1]] = true
		}
		if w.storms[p[len(p)-1]] != nil {
			stormSw[p[len(p)-2]] = true
		}
	}
	next := map[string]bool{}
	for _, p := range w.paths {
		for j := 2; j < len(p)-1; j++ {
			if stormSw[p[j-1]] {
				next[p[j]] = true
			}
			if stormSw[p[j]] {
				next[p[j-1]] = true
			}
		}
	}
	for sw := range next {
		stormSw[sw] = true
	}
	for i := range w.win {
		r := &w.win[i]
		s, d := r.SrcKey(), r.DstKey()
		// A probe whose path is not traced may cross the freeze as well
		// as any other: its timeout does not say its RNIC failed.
		b := w.storms[s] != nil || w.storms[d] != nil || paused[s] || paused[d] || w.paths[i] == nil
		for _, n := range w.paths[i] {
			b = b || stormSw[n]
		}
		w.behind[i] = b
	}
}

// stormSuspects are step 0's verdicts: each storming RNIC, with the
// abnormal probes behind it. Pauses come before any loss in the ranking:
// they explain the timeouts behind them, which are not the network's.
func (w *window) stormSuspects() []Suspect {
	// Every abnormal probe behind storms is the storms': the one whose
	// pause held it is not known, so each storm counts all of them.
	to, slow := 0, 0
	for i := range w.win {
		switch r := &w.win[i]; {
		case !w.behind[i]:
		case r.Timeout:
			to++
		case r.NetworkNs > w.rep.HighLatencyNs:
			slow++
		}
	}
	var sus []Suspect
	for _, k := range sortedKeys(w.storms) {
		st := w.storms[k]
		st.Timeouts, st.Slow = to, slow
		for i := range w.rep.PFC {
			if w.rep.PFC[i].RNIC == k {
				w.rep.PFC[i] = *st
			}
		}
		sus = append(sus, Suspect{Kind: KindRNIC, Name: k, Basis: "pfc", Evidence: to + slow, Share: st.TxShare,
			Alert: fmt.Sprintf("ALERT rnic %s: PFC storm: sent %d pause frames, its link paused %.1f%% of the window; %d timeouts and %d slow probes behind it",
				k, st.TxPause, 100*min(st.TxShare, 1), to, slow)})
	}
	return sus
}

// anomalousRNICs is step 1, the anomalous RNICs (section 3.4.1). Probes to
// or from an RNIC count for it. An RNIC that fails one probe in seven
// because a neighbour of its host is dead, or because a switch link on a
// quarter of its paths is down, is not itself anomalous: candidates are
// taken worst first, each one's probes leave the others' counts (a dead
// RNIC explains its peers' timeouts), and a candidate whose timeouts all
// cross one switch link, with its other probes healthy, is left to the
// voting.
func (w *window) anomalousRNICs() {
	held := w.carriedOver()
	status, explained := w.flagRounds()
	// Held and down RNICs get their own counts (all their probes).
	for k := range held {
		st := &RNICStatus{RNIC: k, Held: !w.a.down[k], Down: w.a.down[k], Anomalous: true}
		for i := range w.win {
			if (w.win[i].SrcKey() == k || w.win[i].DstKey() == k) && !w.aside[i] {
				st.count(w.win[i].DstKey() == k, w.win[i].Timeout)
			}
		}
		st.rate(w.c.MinProbes)
		status[k] = st
	}
	for k, l := range explained {
		if st := status[k]; st != nil && !st.Anomalous && st.Rate > w.c.TimeoutFraction {
			st.Explained = l
		}
	}
	w.rankRNICs(status)
}

// carriedOver flags the RNICs still held from an earlier window (and
// forgets the holds that ended) and those their agents reported gone:
// their probes are RNIC problems before any counting. It returns them.
func (w *window) carriedOver() map[string]bool {
	w.flagged = map[string]bool{}
	for k, until := range w.a.held {
		if until > w.start {
			w.flagged[k] = true
		} else {
			delete(w.a.held, k)
		}
	}
	for k := range w.a.down {
		w.flagged[k] = true
	}
	held := map[string]bool{}
	for k := range w.flagged {
		held[k] = true
	}
	return held
}

// flagRounds flags the worst candidate RNIC round after round, until no
// candidate is left, and holds each one flagged. It returns the status of
// every RNIC counted in the last round (the RNICs flagged in earlier
// rounds, then the counts of the rest) and the candidates whose timeouts
// one switch link explains.
func (w *window) flagRounds() (map[string]*RNICStatus, map[string]string) {
	flaggedNow := map[string]*RNICStatus{}
	var status map[string]*RNICStatus
	explained := map[string]string{}
	for {
		status = map[string]*RNICStatus{}
		for k, st := range flaggedNow {
			status[k] = st
		}
		best := w.flagRound(status, explained)
		if best == nil {
			break
		}
		best.Anomalous = true
		flaggedNow[best.RNIC] = best
		w.flagged[best.RNIC] = true
		w.a.held[best.RNIC] = w.end + int64(w.c.Hold)
	}
	return status, explained
}

// flagRound counts the probes of the RNICs not flagged yet, leaving out
// every probe that involves a flagged one (its timeouts are that RNIC's),
// into status, and returns the candidate with the highest timeout rate,
// or nil.
func (w *window) flagRound(status map[string]*RNICStatus, explained map[string]string) *RNICStatus {
	count := map[string]*RNICStatus{}
	for i := range w.win {
		r := &w.win[i]
		s, d := r.SrcKey(), r.DstKey()
		if w.flagged[s] || w.flagged[d] || w.aside[i] {
			continue
		}
		for j, k := range [2]string{s, d} {
			st := count[k]
			if st == nil {
				st = &RNICStatus{RNIC: k}
				count[k] = st
			}
			st.count(j == 1, r.Timeout)
		}
	}
	var best *RNICStatus
	for _, k := range sortedKeys(count) {
		st := count[k]
		st.rate(w.c.MinProbes)
		status[k] = st
		if st.Probes < w.c.MinProbes || st.Rate <= w.c.TimeoutFraction || explained[k] != "" {
			continue
		}
		if l := w.a.confined(w.win, w.paths, w.aside, k, w.flagged); l != "" {
			explained[k] = l
			continue
		}
		if best == nil || st.Rate > best.Rate {
			best = st
		}
	}
	return best
}

// rankRNICs reports the anomalous RNICs and those with timeouts: the
// anomalous first, then by timeout rate.
func (w *window) rankRNICs(status map[string]*RNICStatus) {
	rep := w.rep
	for _, st := range status {
		if st.Anomalous || st.Timeouts > 0 {
			rep.RNICs = append(rep.RNICs, *st)
		}
	}
	slices.SortFunc(rep.RNICs, func(x, y RNICStatus) int {
		if x.Anomalous != y.Anomalous {
			if x.Anomalous {
				return -1
			}
			return 1
		}
		if x.Rate != y.Rate {
			return cmp.Compare(y.Rate, x.Rate)
		}
		return cmp.Compare(x.RNIC, y.RNIC)
	})
}

// slaPercentiles is step 2: the SLA percentiles of the answered probes,
// per host processing delay, and the network latency over which a probe
// counts as abnormal in the voting.
func (w *window) slaPercentiles() {
	var netv, procv []int64
	w.hostProc = map[string][]int64{}
	for i := range w.win {
		r := &w.win[i]
		if r.Timeout {
			continue
		}
		netv = append(netv, r.NetworkNs)
		procv = append(procv, r.ProcessingNs)
		w.hostProc[r.Host] = append(w.hostProc[r.Host], r.ProcessingNs)
	}
	rep := w.rep
	rep.Network = percentiles(slices.Clone(netv))
	rep.Processing = percentiles(procv)
	rep.HighLatencyNs = max(int64(w.c.HighLatencyFactor*float64(rep.Network.P50)), rep.Network.P50+int64(w.c.HighLatencyMin))
}

// ballots are the votes of step 3, each keyed by name, and the abnormal
// probes that cast them.
type ballots struct {
	links  map[string]*Vote
	dlinks map[string]*Vote // by direction, for latency
	dlat   map[string][]int64
	sws    map[string]*Vote
	abn    []abnormalProbe
}

// abnormalProbe is an abnormal probe of the switch network with a traced
// path: the links it crossed, by name and by direction.
type abnormalProbe struct {
	timeout     bool
	links, dirs []string
}

func voteFor(m map[string]*Vote, k string) *Vote {
	v := m[k]
	if v == nil {
		v = &Vote{Name: k}
		m[k] = v
	}
	return v
}

// voting is step 3, the voting (Algorithm 1) by the abnormal probes of the
// switch network, on links and on switches; traversals give each its
// share. It returns the suspects of the switch network.
func (w *window) voting() []Suspect {
	b := w.castVotes()
	sus := w.rankVotes(b)
	if rep := w.rep; rep.Probes > 0 {
		rep.RNICDropRate = float64(rep.RNICProblems) / float64(rep.Probes)
		rep.SwitchDropRate = float64(rep.SwitchProblems) / float64(rep.Probes)
	}
	return sus
}

// castVotes walks each probe's path: every link and switch on it is
// traversed, and voted for when the probe was abnormal (a timeout or high
// latency not already blamed on a flagged RNIC). It also tells the RNIC
// problems from the switch network's.
func (w *window) castVotes() ballots {
	b := ballots{links: map[string]*Vote{}, dlinks: map[string]*Vote{}, dlat: map[string][]int64{}, sws: map[string]*Vote{}}
	rep, thr := w.rep, w.rep.HighLatencyNs
	for i := range w.win {
		r := &w.win[i]
		// A probe behind a storm is the storming RNIC's problem.
		rnicProblem := w.flagged[r.SrcKey()] || w.flagged[r.DstKey()] || w.behind[i]
		if r.Timeout {
			if rnicProblem {
				rep.RNICProblems++
			} else {
				rep.SwitchProblems++
			}
		}
		p := w.paths[i]
		high := !r.Timeout && r.NetworkNs > thr && !rnicProblem
		if high {
			rep.HighLatency++
		}
		abnormal := (r.Timeout && !rnicProblem) || high
		// A probe over a switch whose lossless class discards is its,
		// and so is a slow one next to it (its incast's queues): they
		// vote for nothing else.
		if sw := cmp.Or(w.charged[i], w.rippleCharge(p)); abnormal && sw != "" && (w.charged[i] != "" || high) {
			switch st := w.discarding[sw]; {
			case high && w.charged[i] != "":
				st.SlowOver++
			case high:
				st.SlowNear++
			}
			abnormal = false
		}
		if p == nil {
			if abnormal {
				rep.Unlocalized++
			}
			continue
		}
		var ab abnormalProbe
		for j := 1; j < len(p); j++ {
			dir := p[j-1] + ">" + p[j]
			if !r.Timeout {
				b.dlat[dir] = append(b.dlat[dir], r.NetworkNs)
			}
			l := LinkName(p[j-1], p[j])
			voteFor(b.links, l).count(abnormal, r.Timeout)
			voteFor(b.dlinks, dir).count(abnormal, r.Timeout)
			if abnormal {
				ab.links, ab.dirs = append(ab.links, l), append(ab.dirs, dir)
			}
		}
		for _, sw := range p[1 : len(p)-1] {
			voteFor(b.sws, sw).count(abnormal, r.Timeout)
		}
		if abnormal {
			ab.timeout = r.Timeout
			b.abn = append(b.abn, ab)
		}
	}
	return b
}

// rankVotes ranks links and switches by drops first: in a lossless fabric
// a switch-network timeout is rare and telling, while some probes always
// meet a queue; latency ranks (and alerts) only when the drops explain
// nothing. It returns the suspects the ranking's basis explains.
func (w *window) rankVotes(b ballots) []Suspect {
	rep, c := w.rep, w.c
	rep.Links, rep.Switches = ranked(b.links, false), ranked(b.sws, false)
	for k, v := range b.dlinks {
		v.MedianNs = percentiles(b.dlat[k]).P50
		if v.Traversed >= c.MinProbes {
			rep.Hot = append(rep.Hot, *v)
			rep.Hot[len(rep.Hot)-1].Dir = k
		}
	}
	slices.SortFunc(rep.Hot, func(x, y Vote) int { return cmp.Or(cmp.Compare(y.MedianNs, x.MedianNs), cmp.Compare(x.Dir, y.Dir)) })
	rep.Hot = rep.Hot[:min(len(rep.Hot), 5)]
	rep.Basis = "drops"
	picks := w.explain(b.abn, b.links, false)
	if len(picks) == 0 && !c.alerting(rep.Switches, false) {
		// A queue builds in one direction: rank that, name the link.
		if picks = w.explain(b.abn, b.dlinks, true); len(picks) > 0 {
			l := ranked(b.dlinks, true)
			for i := range l {
				from, to, _ := strings.Cut(l[i].Name, ">")
				l[i].Dir, l[i].Name = l[i].Name, LinkName(from, to)
			}
			rep.Links, rep.Switches, rep.Basis = l, ranked(b.sws, true), "latency"
		}
	}
	return w.networkSuspects(picks, b)
}

// pick is a link that explain chose, with the abnormal probes it took.
type pick struct {
	key   string // the link, or its direction for latency
	votes int
}

// explain runs Algorithm 1 to its end, as binary tomography does: the
// link on the most abnormal paths is the most suspicious; the probes it
// explains leave the count, and the next link is suspicious only if
// enough abnormal probes remain on it that noise cannot account for them
// (MinExplainShare of the first link's). One failing link explains its
// probes alone; a switch that drops on several of its ports needs several
// of its links. Drops vote on links, latency on link directions (a queue
// builds one way).
func (w *window) explain(abn []abnormalProbe, votes map[string]*Vote, latency bool) []pick {
	c := w.c
	left := make([]bool, len(abn))
	var picks []pick
	for {
		count := map[string]int{}
		for i, a := range abn {
			if left[i] || a.timeout == latency {
				continue
			}
			keys := a.links
			if latency {
				keys = a.dirs
			}
			for _, k := range keys {
				count[k]++
			}
		}
		eligible := func(k string) bool {
			n, trav := count[k], float64(votes[k].Traversed)
			if n < c.MinVotes || (len(picks) > 0 && float64(n) < c.MinExplainShare*float64(picks[0].votes)) {
				return false
			}
			if latency {
				return float64(n) > c.MinLatencyShare*trav
			}
			return float64(n) >= c.MinDropShare*trav
		}
		best := ""
		for _, k := range sortedKeys(count) {
			switch {
			case latency:
				// The hotspot: of the directions that delay most of
				// their probes, the one that delays them longest (a
				// queue PFC spread upstream is shorter than the one
				// it spread from, or its probes queue twice).
				if eligible(k) && (best == "" || cmp.Or(cmp.Compare(votes[k].MedianNs, votes[best].MedianNs), cmp.Compare(count[k], count[best])) > 0) {
					best = k
				}
			// Ties go to a link between switches over an RNIC's own
			// link: step 1 judged the RNIC already, and an RNIC whose
			// timeouts all cross one switch link was left to the
			// voting for it.
			case best == "" || count[k] > count[best] || (count[k] == count[best] && toRNIC(best) && !toRNIC(k)):
				best = k
			}
		}
		if best == "" || !eligible(best) {
			return picks
		}
		n := count[best]
		picks = append(picks, pick{best, n})
		for i, a := range abn {
			if !left[i] && (slices.Contains(a.links, best) || slices.Contains(a.dirs, best)) {
				left[i] = true
			}
		}
	}
}

// networkSuspects turns the links explain chose into the window's one
// switch-network suspect, as Algorithm 1 returns the most suspicious
// element. Several links that converge on one switch make that switch the
// suspect (Algorithm 1 on switches, the paper's footnote 4): links of it
// that lose probes, or directions into it that queue them. PFC spreads a
// queue upstream, from the congested egress back to the senders, so slow
// directions out of a switch toward the one they queue for do not count
// for it: the directions into the switch the queues converge on do.
// Otherwise the first link is the suspect; a link to an RNIC is an RNIC
// problem (footnote 3: probing cannot tell an RNIC from its link or the
// switch port facing it). Links chosen beyond the suspect are the fault's
// ripples (the queues an incast spreads): they stay in the ranking,
// without an alert. Without any link, a switch whose lost probes are
// spread over its links too thinly for any one of them may still be
// voted suspect on its own.
func (w *window) networkSuspects(picks []pick, b ballots) []Suspect {
	rep, c := w.rep, w.c
	latency := rep.Basis == "latency"
	abn := rep.SwitchProblems + rep.HighLatency - rep.Unlocalized
	if len(picks) == 0 {
		if !c.alerting(rep.Switches, false) {
			return nil
		}
		top := rep.Switches[0]
		return []Suspect{{Kind: KindSwitch, Name: top.Name, Basis: "drops", Evidence: top.Timeouts, Share: share(top.Timeouts, top.Traversed),
			Alert: fmt.Sprintf("ALERT switch %s: %d of %d abnormal probes (%d timeouts) on paths through it, %.1f%% of the %d probes over it, no one of its links enough",
				top.Name, top.Votes, abn, top.Timeouts, 100*top.Share, top.Traversed)}}
	}
	into := map[string][]pick{}
	for _, p := range picks {
		if latency {
			_, to, _ := strings.Cut(p.key, ">")
			into[to] = append(into[to], p)
			continue
		}
		x, y := LinkEnds(p.key)
		into[x], into[y] = append(into[x], p), append(into[y], p)
	}
	best, bestVotes := "", 0
	for _, sw := range sortedKeys(into) {
		if b.sws[sw] == nil || len(into[sw]) < 2 {
			continue
		}
		total := 0
		for _, p := range into[sw] {
			total += p.votes
		}
		if total > bestVotes {
			best, bestVotes = sw, total
		}
	}
	if best != "" {
		var via []string
		for _, p := range into[best] {
			via = append(via, p.key)
		}
		v := b.sws[best]
		return []Suspect{{Kind: KindSwitch, Name: best, Basis: rep.Basis, Evidence: bestVotes, Share: share(bestVotes, v.Traversed),
			Alert: fmt.Sprintf("ALERT switch %s: %d of %d abnormal probes (%s) over %d of its links: %s",
				best, bestVotes, abn, rep.Basis, len(via), strings.Join(via, ", "))}}
	}
	p := picks[0]
	v, name := b.links[p.key], p.key
	if latency {
		from, to, _ := strings.Cut(p.key, ">")
		v, name = b.dlinks[p.key], LinkName(from, to)
	}
	what := fmt.Sprintf("%d of %d abnormal probes (%d timeouts, %d high latency%s), %.1f%% of the %d probes over it",
		p.votes, abn, v.Timeouts, v.HighLat, direction(p.key, latency), 100*share(p.votes, v.Traversed), v.Traversed)
	if toRNIC(name) {
		rnic, sw := LinkEnds(name)
		if !toRNIC(rnic) {
			rnic = sw
		}
		return []Suspect{{Kind: KindRNIC, Name: rnic, Basis: rep.Basis, Evidence: p.votes, Share: share(p.votes, v.Traversed),
			Alert: fmt.Sprintf("ALERT rnic %s: its link %s: %s (RNIC problem)", rnic, name, what)}}
	}
	return []Suspect{{Kind: KindLink, Name: name, Basis: rep.Basis, Evidence: p.votes, Share: share(p.votes, v.Traversed),
		Alert: "ALERT link " + name + ": " + what}}
}

func share(n, of int) float64 { return float64(n) / float64(max(of, 1)) }

// toRNIC says a link (or a direction) has an RNIC at an end: RNICs are
// named host/rnic.
func toRNIC(link string) bool { return strings.Contains(link, "/") }

func direction(key string, latency bool) string {
	if !latency {
		return ""
	}
	return ", direction " + key
}

// overloadedHosts is step 4: hosts by median processing delay, each
// against the others' median, since a CPU-starved host delays every
// probe it answers whatever the network does. It returns the overloaded
// hosts as suspects, each with the probes it answered that slowly.
func (w *window) overloadedHosts() []Suspect {
	rep, c := w.rep, w.c
	var meds []int64
	for _, h := range sortedKeys(w.hostProc) {
		hs := HostStatus{Host: h, Processing: percentiles(w.hostProc[h])}
		rep.Hosts = append(rep.Hosts, hs)
		meds = append(meds, hs.Processing.P50)
	}
	var sus []Suspect
	for i := range rep.Hosts {
		others := make([]int64, 0, len(meds))
		for j, m := range meds {
			if j != i {
				others = append(others, m)
			}
		}
		h := &rep.Hosts[i]
		base := percentiles(others).P50
		if h.Processing.P50 <= int64(c.ProcessingMin) || (len(others) > 0 && float64(h.Processing.P50) <= c.ProcessingFactor*float64(base)) {
			continue
		}
		h.Overloaded = true
		thr := max(int64(c.ProcessingMin), int64(c.ProcessingFactor*float64(base)))
		slow := 0
		for _, d := range w.hostProc[h.Host] {
			if d > thr {
				slow++
			}
		}
		sus = append(sus, Suspect{Kind: KindHost, Name: h.Host, Basis: "processing", Evidence: slow, Share: share(slow, h.Processing.N),
			Alert: fmt.Sprintf("ALERT host %s: processing delay P50 %s P99 %s, %d of %d probes over %s (CPU overload?)",
				h.Host, time.Duration(h.Processing.P50), time.Duration(h.Processing.P99), slow, h.Processing.N, time.Duration(thr))})
	}
	slices.SortFunc(rep.Hosts, func(x, y HostStatus) int {
		return cmp.Or(cmp.Compare(y.Processing.P50, x.Processing.P50), cmp.Compare(x.Host, y.Host))
	})
	return sus
}

// rnicSuspects are step 1's verdicts: RNICs their agents report gone, and
// RNICs anomalous in this window. An RNIC held from an earlier window is
// a suspect again only while it still fails as a fresh candidate would
// (over the timeout fraction, not confined to one switch link), and is
// then held for another minute: the hold decides how its probes are
// counted, an alert says it is anomalous now.
func (w *window) rnicSuspects() []Suspect {
	var sus []Suspect
	for _, st := range w.rep.RNICs {
		var line string
		switch {
		case st.Down:
			line = fmt.Sprintf("ALERT rnic %s: reported gone by its agent", st.RNIC)
		case st.Held && w.stillFailing(&st):
			w.a.held[st.RNIC] = w.end + int64(w.c.Hold)
			line = fmt.Sprintf("ALERT rnic %s: still anomalous (held from an earlier window), %.1f%% of %d probes timed out", st.RNIC, 100*st.Rate, st.Probes)
		case st.Anomalous && !st.Held:
			line = fmt.Sprintf("ALERT rnic %s: %.1f%% of %d probes timed out (RNIC problem)", st.RNIC, 100*st.Rate, st.Probes)
		default:
			continue
		}
		sus = append(sus, Suspect{Kind: KindRNIC, Name: st.RNIC, Basis: "drops", Evidence: st.Timeouts, Share: st.Rate, Alert: line})
	}
	return w.sharedSwitch(sus)
}

// sharedSwitch replaces the RNIC suspects that are most of one switch's
// RNICs (at least two, more than half of those its probes showed) by that
// switch: RNICs failing together under one switch are its problem more
// likely than as many RNIC faults at once (Algorithm 1 on switches over
// their failing probes: every one crosses it). A switch that drops what
// comes down from all of its spines fails every RNIC under it on every
// path, which step 1 alone blames on the RNICs. RNICs their agents report
// gone stay theirs.
func (w *window) sharedSwitch(sus []Suspect) []Suspect {
	under := map[string]map[string]bool{} // switch -> its RNICs
	of := map[string]string{}             // RNIC -> its switch
	for _, p := range w.paths {
		if len(p) < 3 {
			continue
		}
		for _, e := range [][2]string{{p[0], p[1]}, {p[len(p)-1], p[len(p)-2]}} {
			if under[e[1]] == nil {
				under[e[1]] = map[string]bool{}
			}
			under[e[1]][e[0]] = true
			of[e[0]] = e[1]
		}
	}
	group := map[string][]int{}
	for i, s := range sus {
		if sw := of[s.Name]; sw != "" && !strings.HasSuffix(s.Alert, "reported gone by its agent") {
			group[sw] = append(group[sw], i)
		}
	}
	drop := map[int]bool{}
	var out []Suspect
	for _, sw := range sortedKeys(group) {
		g := group[sw]
		if len(g) < 2 || 2*len(g) <= len(under[sw]) {
			continue
		}
		timeouts, rate, names := 0, 0.0, make([]string, 0, len(g))
		for _, i := range g {
			drop[i] = true
			timeouts += sus[i].Evidence
			rate += sus[i].Share / float64(len(g))
			names = append(names, sus[i].Name)
		}
		out = append(out, Suspect{Kind: KindSwitch, Name: sw, Basis: "drops", Evidence: timeouts, Share: rate,
			Alert: fmt.Sprintf("ALERT switch %s: %d of its %d RNICs failing at once (%s), %d probes timed out", sw, len(g), len(under[sw]),
				strings.Join(names, ", "), timeouts)})
	}
	for i, s := range sus {
		if !drop[i] {
			out = append(out, s)
		}
	}
	return out
}

// stillFailing judges a held RNIC as flagRound judges a candidate.
func (w *window) stillFailing(st *RNICStatus) bool {
	if st.Probes < w.c.MinProbes || st.Rate <= w.c.TimeoutFraction {
		return false
	}
	others := make(map[string]bool, len(w.flagged))
	for k, v := range w.flagged {
		others[k] = v && k != st.RNIC
	}
	return w.a.confined(w.win, w.paths, w.aside, st.RNIC, others) == ""
}

// rankSuspects is step 5: every suspect of the window in one ranking
// across kinds, and its alert lines in that order. A PFC storm comes
// first: its pauses explain the probes held behind it. Drops next: in a
// lossless fabric a lost probe is a fault's mark, a slow one may be
// traffic; latency next, and slow answers of a host, which say nothing of
// the network, last. Within a basis the sicker element leads, whatever
// its kind: the one that failed the larger share of the probes it
// carried (an RNIC that loses every probe to it before a link that loses
// a third of its probes), then the one that explains more probes.
func (w *window) rankSuspects(sus []Suspect) {
	basis := map[string]int{"pfc": 0, "discards": 1, "drops": 2, "latency": 3, "processing": 4}
	kind := map[string]int{KindRNIC: 0, KindLink: 1, KindSwitch: 2, KindHost: 3}
	slices.SortStableFunc(sus, func(x, y Suspect) int {
		return cmp.Or(cmp.Compare(basis[x.Basis], basis[y.Basis]), cmp.Compare(y.Share, x.Share), cmp.Compare(y.Evidence, x.Evidence),
			cmp.Compare(kind[x.Kind], kind[y.Kind]), cmp.Compare(x.Name, y.Name))
	})
	w.rep.Suspects = sus
	for _, s := range sus {
		w.rep.Alerts = append(w.rep.Alerts, s.Alert)
	}
}

// confined returns the switch links an RNIC's timeouts are confined to,
// when its probes over its other paths are healthy (at most the timeout
// fraction fail), else "". An RNIC fails on every path; the switch network
// fails it on some: one link that is down, or a switch that drops what
// arrives through several of its ports. The links are taken one by one,
// the one most of the timeouts left cross first, until the probes over
// the rest are healthy; if that takes more than three quarters of the
// RNIC's traced probes, the fault is the RNIC's.
func (a *Analyzer) confined(win []Result, paths [][]string, aside []bool, k string, flagged map[string]bool) string {
	var mine []int
	var all RNICStatus
	for i := range win {
		r := &win[i]
		if (r.SrcKey() == k || r.DstKey() == k) && !flagged[r.SrcKey()] && !flagged[r.DstKey()] && !aside[i] {
			all.count(r.DstKey() == k, r.Timeout)
			// Probes of untraced 5-tuples can neither confirm nor
			// refute.
			if paths[i] != nil {
				mine = append(mine, i)
			}
		}
	}
	frac := a.cfg.TimeoutFraction
	var bad []string
	crossesBad := func(p []string) bool {
		for _, l := range bad {
			if crosses(p, l) {
				return true
			}
		}
		return false
	}
	for {
		var rest RNICStatus
		count := map[string]int{}
		off := 0
		for _, i := range mine {
			r, p := &win[i], paths[i]
			if crossesBad(p) {
				off++
				continue
			}
			rest.count(r.DstKey() == k, r.Timeout)
			if r.Timeout {
				for j := 2; j < len(p)-1; j++ { // switch-to-switch links only
					count[LinkName(p[j-1], p[j])]++
				}
			}
		}
		if 4*off > 3*len(mine) {
			return ""
		}
		if rest.rate(a.cfg.MinProbes); rest.Rate <= frac && len(bad) > 0 {
			// Confined only on evidence: enough healthy-path probes in
			// each direction that failed (the traces of a dead or
			// paused RNIC's tuples fail too, so few of its paths may
			// be known).
			if all.In > 0 && float64(all.InTimeouts)/float64(all.In) > frac && rest.In < a.cfg.MinProbes {
				return ""
			}
			if out := all.Probes - all.In; out > 0 && float64(all.Timeouts-all.InTimeouts)/float64(out) > frac && rest.Probes-rest.In < a.cfg.MinProbes {
				return ""
			}
			return strings.Join(bad, "+")
		}
		best, n := "", 0
		for _, l := range sortedKeys(count) {
			if count[l] > n {
				best, n = l, count[l]
			}
		}
		if best == "" {
			return ""
		}
		bad = append(bad, best)
	}
}

func crosses(p []string, link string) bool {
	for j := 1; j < len(p); j++ {
		if LinkName(p[j-1], p[j]) == link {
			return true
		}
	}
	return false
}

// ranked orders the voted links or switches by their timeouts (then
// high-latency probes), or by their high-latency probes.
func ranked(m map[string]*Vote, latency bool) []Vote {
	out := make([]Vote, 0, len(m))
	for _, v := range m {
		if v.Votes == 0 {
			continue
		}
		v.Share = float64(v.Votes) / float64(max(v.Traversed, 1))
		out = append(out, *v)
	}
	slices.SortFunc(out, func(x, y Vote) int {
		if latency {
			return cmp.Or(cmp.Compare(y.HighLat, x.HighLat), cmp.Compare(y.Votes, x.Votes), cmp.Compare(x.Name, y.Name))
		}
		return cmp.Or(cmp.Compare(y.Timeouts, x.Timeouts), cmp.Compare(y.HighLat, x.HighLat), cmp.Compare(y.Share, x.Share), cmp.Compare(x.Name, y.Name))
	})
	return out
}

// alerting says whether the top of a ranking is worth an alert: enough
// votes of its kind, and a large enough share of the probes over it.
func (c *Config) alerting(l []Vote, latency bool) bool {
	if len(l) == 0 {
		return false
	}
	if latency {
		n := l[0].HighLat
		return n >= c.MinVotes && float64(n) > c.MinLatencyShare*float64(l[0].Traversed)
	}
	n := l[0].Timeouts
	return n >= c.MinVotes && float64(n) >= c.MinDropShare*float64(l[0].Traversed)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
