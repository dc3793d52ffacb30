package fabric

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/rdma-appliance/appliance/bench/fabric/workload"
	"github.com/rdma-appliance/appliance/internal/topo"
)

// Stats are fabric-wide counters.
type Stats struct {
	Events         uint64 `json:"events"`
	Hops           uint64 `json:"packet_hops"`
	Drops          uint64 `json:"drops"`
	TTLDrops       uint64 `json:"ttl_drops"`
	NoRoute        uint64 `json:"no_route"`
	ECNMarks       uint64 `json:"ecn_marks"`
	CNPs           uint64 `json:"cnps"`
	PauseFrames    uint64 `json:"pause_frames"` // XOFF frames switches sent
	InjectedPauses uint64 `json:"injected_pauses"`
	Retransmits    uint64 `json:"retransmitted_packets"`
	Timeouts       uint64 `json:"timeouts"`
}

// add sums b's counters into a's (the partitions of a parallel run).
func (a *Stats) add(b *Stats) {
	a.Events += b.Events
	a.Hops += b.Hops
	a.Drops += b.Drops
	a.TTLDrops += b.TTLDrops
	a.NoRoute += b.NoRoute
	a.ECNMarks += b.ECNMarks
	a.CNPs += b.CNPs
	a.PauseFrames += b.PauseFrames
	a.InjectedPauses += b.InjectedPauses
	a.Retransmits += b.Retransmits
	a.Timeouts += b.Timeouts
}

// FlowResult is one flow's outcome.
type FlowResult struct {
	ID          int     `json:"id"`
	Src         string  `json:"src"`
	Dst         string  `json:"dst"`
	Size        int64   `json:"size"`
	Start       int64   `json:"start_ns"`
	Done        bool    `json:"done"`
	Failed      bool    `json:"failed,omitempty"` // retries exhausted
	FCT         int64   `json:"fct_ns,omitempty"`
	Gbps        float64 `json:"gbps,omitempty"` // goodput over the FCT
	Retransmits uint64  `json:"retransmits"`
	CNPs        uint64  `json:"cnps"`
}

// PortResult is one port's counters.
type PortResult struct {
	Node string `json:"node"`
	Port int    `json:"port"`
	Peer string `json:"peer"`
	PortStats
}

// Results are a run's outcome so far.
type Results struct {
	SimNs int64        `json:"sim_ns"`
	Stats Stats        `json:"stats"`
	Flows []FlowResult `json:"flows"`
	Ports []PortResult `json:"ports"`
}

// New builds a simulation of flows on a topology with its routes.
func New(g *topo.Graph, routes *topo.Routes, flows []workload.Flow, cfg Config) (*Sim, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("fabric: %w", err)
	}
	if err := g.Validate(); err != nil {
		return nil, err
	}
	if len(g.Nodes) >= maxEntities {
		return nil, fmt.Errorf("fabric: %d nodes, at most %d", len(g.Nodes), maxEntities-1)
	}
	s := &Sim{next: make([]uint64, len(g.Nodes)+1), free: -1, cfg: cfg, res: &Results{}, ProgressEvery: 1 << 62}
	for e := range s.next {
		s.next[e] = uint64(e) << entityBits
	}
	s.as(0)
	s.net = &network{s: s}
	if err := s.net.build(g, routes, flows, &s.cfg); err != nil {
		return nil, err
	}
	if cfg.SampleInterval > 0 {
		s.schedule(0, evSample, 0, 0)
	}
	return s, nil
}

// SetHooks installs switch-program hooks. It panics on a simulation that
// runs in parallel (RunParallel): hooks see the whole fabric.
func (s *Sim) SetHooks(h *Hooks) {
	if err := s.partitioned(); err != nil {
		panic(err)
	}
	s.net.hooks = h
}

// AddFault makes a host inject PAUSE frames (a PFC storm's origin).
func (s *Sim) AddFault(f HostFault) error {
	if err := s.partitioned(); err != nil {
		return err
	}
	i, ok := s.net.g.Node(f.Host)
	if !ok || s.net.nodeHost[i] < 0 {
		return fmt.Errorf("fabric: fault on %q: no such host", f.Host)
	}
	if f.Interval <= 0 || f.Until < f.From || f.Prio >= NumPrio {
		return fmt.Errorf("fabric: fault on %s: interval %d, from %d until %d, prio %d", f.Host, f.Interval, f.From, f.Until, f.Prio)
	}
	hi := s.net.nodeHost[i]
	s.net.hosts[hi].fault = &f
	s.schedule(f.From, evInject, hi, 0)
	return nil
}

// SetSeries streams the time series (every SampleInterval: each switch
// port's egress queue bytes and paused priorities) as CSV rows
// time_ns,node,port,queue_bytes,paused_mask to w; nothing is kept in
// memory. It panics on a simulation that runs in parallel (RunParallel).
func (s *Sim) SetSeries(w io.Writer) {
	if err := s.partitioned(); err != nil {
		panic(err) // samples read every port at once
	}
	s.series = bufio.NewWriter(w)
	fmt.Fprintln(s.series, "time_ns,node,port,queue_bytes,paused_mask")
}

// sample writes one row per switch port and schedules the next sample
// while anything else is left to happen.
func (n *network) sample() {
	s := n.s
	if s.series != nil {
		var buf [96]byte
		for i := range n.ports {
			pt := &n.ports[i]
			if pt.sw < 0 {
				continue
			}
			var q int64
			var mask int
			for p := 0; p < NumPrio; p++ {
				q += pt.q[p].bytes
				if pt.paused[p] > s.now {
					mask |= 1 << p
				}
			}
			b := strconv.AppendInt(buf[:0], s.now, 10)
			b = append(b, ',')
			b = append(b, n.g.Nodes[pt.node].Name...)
			b = append(b, ',')
			b = strconv.AppendInt(b, int64(pt.num), 10)
			b = append(b, ',')
			b = strconv.AppendInt(b, q, 10)
			b = append(b, ',')
			b = strconv.AppendInt(b, int64(mask), 10)
			b = append(b, '\n')
			s.series.Write(b)
		}
	}
	if s.q.len() > 0 {
		s.schedule(s.now+s.cfg.SampleInterval, evSample, 0, 0)
	}
}

// finish fills the results as of now.
func (s *Sim) finish(now int64) {
	n := s.net
	r := s.res
	r.SimNs = now
	r.Stats = s.Stats()
	r.Flows = r.Flows[:0]
	for i := range n.flows {
		fs := &n.flows[i]
		if !fs.started {
			continue
		}
		fr := FlowResult{ID: fs.f.ID, Src: n.g.Nodes[fs.f.Src].Name, Dst: n.g.Nodes[fs.f.Dst].Name, Size: fs.f.Size,
			Start: fs.f.Start, Done: fs.done, Failed: fs.failed, Retransmits: fs.retrans, CNPs: fs.cnps}
		if fs.done {
			fr.FCT = fs.end - fs.f.Start
			fr.Gbps = float64(fs.f.Size) * 8 / float64(max(fr.FCT, 1))
		}
		r.Flows = append(r.Flows, fr)
	}
	r.Ports = r.Ports[:0]
	for i := range n.ports {
		pt := &n.ports[i]
		st := pt.st
		for p := 0; p < NumPrio; p++ {
			if pt.paused[p] > now {
				st.PausedNs += now - pt.pausedAt[p]
			}
		}
		r.Ports = append(r.Ports, PortResult{Node: n.g.Nodes[pt.node].Name, Port: int(pt.num),
			Peer: n.g.Nodes[n.ports[pt.peer].node].Name, PortStats: st})
	}
	if s.series != nil {
		s.series.Flush()
	}
}

// WriteJSON writes the results as indented JSON.
func (r *Results) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteFlowsCSV writes one row per flow.
func (r *Results) WriteFlowsCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"id", "src", "dst", "size", "start_ns", "done", "fct_ns", "gbps", "retransmits", "cnps"})
	for _, f := range r.Flows {
		_ = cw.Write([]string{strconv.Itoa(f.ID), f.Src, f.Dst, strconv.FormatInt(f.Size, 10), strconv.FormatInt(f.Start, 10),
			strconv.FormatBool(f.Done), strconv.FormatInt(f.FCT, 10), strconv.FormatFloat(f.Gbps, 'f', 3, 64),
			strconv.FormatUint(f.Retransmits, 10), strconv.FormatUint(f.CNPs, 10)})
	}
	cw.Flush()
	return cw.Error()
}

// FCTPercentile is the p-th percentile (0..100) of finished flows' FCTs.
func (r *Results) FCTPercentile(p float64) int64 {
	var v []int64
	for _, f := range r.Flows {
		if f.Done {
			v = append(v, f.FCT)
		}
	}
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[min(len(v)-1, int(p/100*float64(len(v))))]
}

// Port is the result of node's port num, or nil.
func (r *Results) Port(node string, num int) *PortResult {
	for i := range r.Ports {
		if r.Ports[i].Node == node && r.Ports[i].Port == num {
			return &r.Ports[i]
		}
	}
	return nil
}
