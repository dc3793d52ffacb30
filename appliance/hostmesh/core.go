package hostmesh

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/rdma-appliance/appliance/collector/hostmeshanalyzer"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// Config is the agent's behaviour; zero fields take the paper's values.
type Config struct {
	// Host names this host to the analyzer (default: the hostname).
	Host string
	// Interval between two probes of one RNIC (100 ms) and the time after
	// which a probe that has not arrived is a timeout (500 ms).
	Interval time.Duration
	Timeout  time.Duration
	// PoolSize source ports (8), one of them replaced every Rotate (10 s),
	// so that over time every ECMP path and every 5-tuple a switch might
	// mishandle is probed.
	PoolSize int
	Rotate   time.Duration
	// TraceEvery is the least time between two path traces of the agent
	// (100 ms): switches rate-limit the ICMP answers, and traceroute costs
	// their CPUs. TraceHops is the largest TTL tried (8).
	TraceEvery time.Duration
	TraceHops  int
	// MaxBuffered bounds the results and paths held for upload (100000):
	// with the analyzer down, the oldest go first and are counted.
	MaxBuffered int
	// Seed makes target and port choices reproducible (0: random).
	Seed uint64
}

func (c Config) withDefaults() Config {
	dur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	dur(&c.Interval, 100*time.Millisecond)
	dur(&c.Timeout, 500*time.Millisecond)
	dur(&c.Rotate, 10*time.Second)
	dur(&c.TraceEvery, 100*time.Millisecond)
	if c.PoolSize <= 0 {
		c.PoolSize = 8
	}
	if c.TraceHops <= 0 {
		c.TraceHops = 8
	}
	if c.MaxBuffered <= 0 {
		c.MaxBuffered = 100000
	}
	return c
}

// RNIC is one of the host's RNICs as the core knows it.
type RNIC struct {
	Name string
	Addr netip.Addr
}

// Counters are what the agent counts; they travel in every batch.
type Counters struct {
	Sent, Received, Timeouts uint64
	// SendErrors: posts or send completions that failed. Malformed: payloads
	// that are not probes or fail the checksum. Foreign: probes of another
	// host's agent. Unexpected: probes not outstanding (late after their
	// timeout, or duplicates). BadTimestamps: completions without usable
	// timestamps. Dropped: results and paths lost to the upload bound.
	SendErrors, Malformed, Foreign, Unexpected, BadTimestamps, Dropped uint64
	Traces, RNICsDown                                                  uint64
}

// Send is a probe the core wants sent: from an RNIC to Dst with the flow
// label that gives SPort, carrying Payload.
type Send struct {
	Seq       uint64
	Dst       int
	FlowLabel uint32
	SPort     uint16
	Payload   [ProbeSize]byte
}

// Trace is a path trace the core wants: the 5-tuple of Src probing Dst
// with FlowLabel, TTL 1..Hops.
type Trace struct {
	Src, Dst  int
	FlowLabel uint32
	SPort     uint16
	Hops      int
}

type pending struct {
	src, dst int
	sport    uint16
	ts       Timestamps
	rx       bool // T3, T4 known
}

// Core is the probing logic without a transport: which RNIC probes which,
// with which source port, what is outstanding, what timed out, which
// 5-tuple to trace next, and the results. Times are ns of the host clock
// (T1, T4, now) or of the RNICs' clock (T2, T3). It is safe for concurrent
// use by the sender and receiver loops.
type Core struct {
	mu      sync.Mutex
	cfg     Config
	id      uint64
	rnics   []RNIC
	addrs   []string // the RNICs' addresses as results carry them
	down    []bool
	rng     *rand.Rand
	pool    []uint32 // flow labels
	epoch   uint32
	rotated int64
	seq     uint64
	pend    map[uint64]*pending
	results []hostmeshanalyzer.Result
	paths   []hostmeshanalyzer.Path
	gone    []string
	cursor  int
	// roundA and roundB draw the order of the cursor's round (shuffle).
	roundA, roundB int
	fresh          []int // trace combinations due before the cursor's
	traced         int64
	cnt            Counters
	// pfc are the PFC counters' changes to upload, pfcLast each RNIC's
	// last reading.
	pfc     []hostmeshanalyzer.PFC
	pfcLast []pfcLast
}

// NewCore makes the core for a host's RNICs (at least two).
func NewCore(cfg Config, rnics []RNIC) (*Core, error) {
	cfg = cfg.withDefaults()
	if len(rnics) < 2 || len(rnics) > 255 {
		return nil, fmt.Errorf("hostmesh: %d RNICs: need 2..255 to probe between", len(rnics))
	}
	seen := map[string]bool{}
	for _, r := range rnics {
		if seen[r.Name] || !r.Addr.IsValid() {
			return nil, fmt.Errorf("hostmesh: RNIC %q: duplicate name or no address", r.Name)
		}
		seen[r.Name] = true
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d", cfg.Host, seed)
	c := &Core{cfg: cfg, id: h.Sum64(), rnics: rnics, down: make([]bool, len(rnics)),
		rng: rand.New(rand.NewPCG(seed, 0x4d65736874)), pend: map[uint64]*pending{}, rotated: -1}
	for range cfg.PoolSize {
		c.pool = append(c.pool, c.newLabel())
	}
	for _, r := range rnics {
		c.addrs = append(c.addrs, r.Addr.String())
	}
	return c, nil
}

// newLabel draws a flow label whose source port is not yet in the pool.
func (c *Core) newLabel() uint32 {
	for {
		fl := uint32(c.rng.IntN(roce.FlowLabelMask)) + 1
		sp := roce.FlowLabelToUDPSrcPort(fl)
		dup := false
		for _, x := range c.pool {
			dup = dup || roce.FlowLabelToUDPSrcPort(x) == sp
		}
		if !dup {
			return fl
		}
	}
}

// Config is the core's configuration with defaults filled in.
func (c *Core) Config() Config { return c.cfg }

// ID is the agent's id that its probes carry.
func (c *Core) ID() uint64 { return c.id }

// RNICs are the host's RNICs.
func (c *Core) RNICs() []RNIC { return c.rnics }

// Counters are the counts so far.
func (c *Core) Counters() Counters {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cnt
}

// Next is src's next probe at now (host clock): a random other live RNIC
// with a random pool port. It reports false when src is down or alone.
func (c *Core) Next(src int, now int64) (Send, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down[src] {
		return Send{}, false
	}
	if c.rotated < 0 {
		c.rotated = now
	} else if now-c.rotated >= int64(c.cfg.Rotate) {
		c.rotated = now
		pi := c.rng.IntN(len(c.pool))
		c.pool[pi] = c.newLabel()
		c.epoch++
		// The new port's 5-tuples have no path yet: trace them first,
		// sources interleaved (see NextTrace).
		n := len(c.rnics)
		for j := range n * (n - 1) {
			c.fresh = append(c.fresh, (j%n*(n-1)+j/n)*len(c.pool)+pi)
		}
	}
	var cand [256]int
	n := 0
	for i := range c.rnics {
		if i != src && !c.down[i] {
			cand[n] = i
			n++
		}
	}
	if n == 0 {
		return Send{}, false
	}
	dst := cand[c.rng.IntN(n)]
	fl := c.pool[c.rng.IntN(len(c.pool))]
	c.seq++
	s := Send{Seq: c.seq, Dst: dst, FlowLabel: fl, SPort: roce.FlowLabelToUDPSrcPort(fl)}
	p := Probe{HostID: c.id, Src: uint8(src), Dst: uint8(dst), SPort: s.SPort, Seq: s.Seq, T1: now, Epoch: c.epoch}
	p.Encode(s.Payload[:])
	c.pend[s.Seq] = &pending{src: src, dst: dst, sport: s.SPort, ts: Timestamps{T1: now}}
	c.cnt.Sent++
	return s, true
}

// Sent records a probe's send completion: its RNIC timestamp (T2), or a
// failure (the probe is forgotten, not a timeout: it never left).
func (c *Core) Sent(seq uint64, t2 int64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pend[seq]
	if p == nil {
		return
	}
	if !ok {
		c.cnt.SendErrors++
		delete(c.pend, seq)
		return
	}
	p.ts.T2 = t2
	if p.rx {
		c.complete(seq, p)
	}
}

// Received takes a receive completion on RNIC dst: the payload, the RNIC's
// timestamp (T3) and the time the application polled it (T4). Malformed,
// foreign and unexpected probes are counted and refused with an error.
func (c *Core) Received(dst int, payload []byte, t3, t4 int64) error {
	var pr Probe
	if err := pr.Decode(payload); err != nil {
		c.mu.Lock()
		c.cnt.Malformed++
		c.mu.Unlock()
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if pr.HostID != c.id {
		c.cnt.Foreign++
		return fmt.Errorf("hostmesh: probe of another agent (%016x)", pr.HostID)
	}
	p := c.pend[pr.Seq]
	if p == nil || int(pr.Dst) != dst || p.dst != dst || p.ts.T1 != pr.T1 {
		c.cnt.Unexpected++
		return fmt.Errorf("hostmesh: probe %d not outstanding for %d", pr.Seq, dst)
	}
	p.ts.T3, p.ts.T4, p.rx = t3, t4, true
	if p.ts.T2 != 0 {
		c.complete(pr.Seq, p)
	}
	return nil
}

// complete turns a probe with all four timestamps into a result.
func (c *Core) complete(seq uint64, p *pending) {
	delete(c.pend, seq)
	net, proc, err := p.ts.Split()
	if err != nil {
		c.cnt.BadTimestamps++
		return
	}
	c.cnt.Received++
	r := c.result(seq, p)
	r.NetworkNs, r.ProcessingNs = net, proc
	c.push(r)
}

func (c *Core) result(seq uint64, p *pending) hostmeshanalyzer.Result {
	return hostmeshanalyzer.Result{Host: c.cfg.Host, Src: c.rnics[p.src].Name, Dst: c.rnics[p.dst].Name, SrcIP: c.addrs[p.src],
		DstIP: c.addrs[p.dst], SPort: p.sport, Seq: seq, At: p.ts.T1}
}

func (c *Core) push(r hostmeshanalyzer.Result) {
	if len(c.results) >= c.cfg.MaxBuffered {
		c.results = c.results[1:]
		c.cnt.Dropped++
	}
	c.results = append(c.results, r)
}

// Expire turns the probes outstanding longer than the timeout into
// timeouts. A probe that arrived but whose send completion is missing is
// no timeout (it arrived); it is counted as bad timestamps.
func (c *Core) Expire(now int64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for seq, p := range c.pend {
		if now-p.ts.T1 < int64(c.cfg.Timeout) {
			continue
		}
		delete(c.pend, seq)
		if p.rx {
			c.cnt.BadTimestamps++
			continue
		}
		r := c.result(seq, p)
		r.Timeout = true
		c.push(r)
		c.cnt.Timeouts++
		n++
	}
	return n
}

// Outstanding is how many probes await their arrival.
func (c *Core) Outstanding() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pend)
}

// MarkDown takes an RNIC out of the mesh (its device disappeared): it no
// longer sends or is probed, its outstanding probes are forgotten, and the
// next batch reports it. The other RNICs carry on.
func (c *Core) MarkDown(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down[i] {
		return
	}
	c.down[i] = true
	c.cnt.RNICsDown++
	c.gone = append(c.gone, c.rnics[i].Name)
	for seq, p := range c.pend {
		if p.src == i || p.dst == i {
			delete(c.pend, seq)
		}
	}
}

// Down says whether RNIC i was marked down.
func (c *Core) Down(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.down[i]
}

// NextTrace is the next path trace due at now, at most one per TraceEvery:
// every (source, target, pool port) once a round, in an order drawn anew
// each round. Consecutive traces leave from different RNICs, so their first
// hops are different switches, each answering its share of the agent's
// traces at an even pace; and agents on the hosts of a cluster, started
// together, do not trace through the same switches at the same times round
// after round. Switches rate-limit their ICMP answers: agents in lockstep
// would have the same agents' traces fail every time.
func (c *Core) NextTrace(now int64) (Trace, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.traced != 0 && now-c.traced < int64(c.cfg.TraceEvery) {
		return Trace{}, false
	}
	n := len(c.rnics)
	total := n * (n - 1) * len(c.pool)
	for range total + len(c.fresh) {
		var k int
		if len(c.fresh) > 0 {
			k, c.fresh = c.fresh[0], c.fresh[1:]
		} else {
			if c.cursor%total == 0 {
				c.shuffle(total)
			}
			k = c.order((c.roundA*c.cursor + c.roundB) % total)
			c.cursor++
		}
		src, rest := k/((n-1)*len(c.pool)), k%((n-1)*len(c.pool))
		dst, pi := rest/len(c.pool), rest%len(c.pool)
		if dst >= src {
			dst++
		}
		if c.down[src] || c.down[dst] {
			continue
		}
		c.traced = now
		c.cnt.Traces++
		fl := c.pool[pi]
		return Trace{Src: src, Dst: dst, FlowLabel: fl, SPort: roce.FlowLabelToUDPSrcPort(fl), Hops: c.cfg.TraceHops}, true
	}
	return Trace{}, false
}

// shuffle draws a round's order: position j of the round is combination
// order((a*j+b) mod total), a prime to total, a permutation of the
// combinations that still changes the source at every step (n divides
// total, so consecutive sources differ by a mod n, which is not 0).
func (c *Core) shuffle(total int) {
	for {
		c.roundA = 1 + c.rng.IntN(max(total-1, 1))
		x, y := c.roundA, total
		for y != 0 {
			x, y = y, x%y
		}
		if x == 1 {
			break
		}
	}
	c.roundB = c.rng.IntN(total)
}

// order is the trace combination at position j of the plain order: sources
// vary fastest, then targets, then pool ports. A combination's index k is
// (src*(n-1)+t)*P+pi, t the target among src's n-1 others.
func (c *Core) order(j int) int {
	n, np := len(c.rnics), len(c.pool)
	src, r := j%n, j/n
	t, pi := r%(n-1), r/(n-1)%np
	return (src*(n-1)+t)*np + pi
}

// TraceDone records a trace's answers: the switches in TTL order and
// whether the destination was reached.
func (c *Core) TraceDone(t Trace, hops []string, complete bool, now int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, d := &c.rnics[t.Src], &c.rnics[t.Dst]
	if !complete {
		// Try again soon (a switch's ICMP rate limit, a lost answer); a
		// tuple that keeps failing takes one turn in each round.
		n := len(c.rnics)
		for pi, fl := range c.pool {
			if fl == t.FlowLabel {
				dst := t.Dst
				if dst > t.Src {
					dst--
				}
				if k := (t.Src*(n-1)+dst)*len(c.pool) + pi; !slices.Contains(c.fresh, k) {
					c.fresh = append(c.fresh, k)
				}
			}
		}
	}
	if len(c.paths) >= c.cfg.MaxBuffered {
		c.paths = c.paths[1:]
		c.cnt.Dropped++
	}
	c.paths = append(c.paths, hostmeshanalyzer.Path{Host: c.cfg.Host, Src: s.Name, Dst: d.Name, At: now, Hops: hops, Complete: complete,
		Tuple: hostmeshanalyzer.Tuple{SrcIP: c.addrs[t.Src], DstIP: c.addrs[t.Dst], SPort: t.SPort}})
}

// Batch takes what has accumulated for the analyzer.
func (c *Core) Batch() hostmeshanalyzer.Batch {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := hostmeshanalyzer.Batch{Host: c.cfg.Host, Results: c.results, Paths: c.paths, Down: c.gone, Counters: c.cnt.Map(), PFC: c.pfc}
	c.results, c.paths, c.gone, c.pfc = nil, nil, nil, nil
	return b
}

// Map is the counters by name.
func (n Counters) Map() map[string]uint64 {
	return map[string]uint64{"sent": n.Sent, "received": n.Received, "timeouts": n.Timeouts, "send_errors": n.SendErrors,
		"malformed": n.Malformed, "foreign": n.Foreign, "unexpected": n.Unexpected, "bad_timestamps": n.BadTimestamps,
		"dropped": n.Dropped, "traces": n.Traces, "rnics_down": n.RNICsDown}
}
