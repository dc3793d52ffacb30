package fabric

import (
	"fmt"
	"os"
	"time"

	"github.com/rdma-appliance/appliance/bench/fabric/workload"
	"github.com/rdma-appliance/appliance/internal/spec"
	"github.com/rdma-appliance/appliance/internal/topo"
)

// Scenario is a simulation as written in YAML (`appliance sim run`): a
// topology, switch and host behaviour, workloads and faults, and how long
// to run.
//
//	seed: 1
//	duration: 10ms
//	sample-interval: 10us
//	topology: {kind: fat-tree, k: 4, bandwidth: 100G, delay: 1us}
//	switch: {buffer: 16MB, alpha: 0.125, headroom: 64KB, ecn: {kmin: 5KB, kmax: 200KB, pmax: 0.1}}
//	host: {mtu: 1024, dcqcn: true}
//	workload:
//	  - {kind: poisson, load: 0.5, cdf: web-search}
//	  - {kind: incast, senders: [h1, h2, h3], dst: h0, size: 64KB, bursts: 10, interval: 100us}
//	faults:
//	  - {host: h5, interval: 100us, from: 1ms, until: 3ms}
type Scenario struct {
	Seed           uint64                `yaml:"seed"`
	Duration       string                `yaml:"duration"`
	SampleInterval string                `yaml:"sample-interval"`
	Topology       topo.Spec             `yaml:"topology"`
	Switch         SwitchSpec            `yaml:"switch"`
	Layers         map[string]SwitchSpec `yaml:"layers"`
	Host           HostSpec              `yaml:"host"`
	Hosts          map[string]HostSpec   `yaml:"hosts"`
	Workload       []WorkloadSpec        `yaml:"workload"`
	Faults         []FaultSpec           `yaml:"faults"`
	TTL            int                   `yaml:"ttl"`
}

// SwitchSpec sets switch behaviour; absent keys keep the defaults.
type SwitchSpec struct {
	Buffer      string   `yaml:"buffer"`
	Cell        string   `yaml:"cell"`
	Guaranteed  string   `yaml:"guaranteed"`
	Alpha       *float64 `yaml:"alpha"`
	Headroom    string   `yaml:"headroom"`
	Lossless    []int    `yaml:"lossless"`
	XonOffset   string   `yaml:"xon-offset"`
	PauseQuanta *int     `yaml:"pause-quanta"`
	ECN         *ECNSpec `yaml:"ecn"`
	Weights     []int    `yaml:"weights"`
}

// ECNSpec is RED marking.
type ECNSpec struct {
	Enabled *bool    `yaml:"enabled"`
	Kmin    string   `yaml:"kmin"`
	Kmax    string   `yaml:"kmax"`
	Pmax    *float64 `yaml:"pmax"`
}

// HostSpec sets RNIC behaviour; absent keys keep the defaults.
type HostSpec struct {
	MTU             int    `yaml:"mtu"`
	AckEvery        int    `yaml:"ack-every"`
	CNPInterval     string `yaml:"cnp-interval"`
	RTO             string `yaml:"rto"`
	DCQCN           *bool  `yaml:"dcqcn"`
	ProcessingDelay string `yaml:"processing-delay"`
}

// WorkloadSpec is one source of flows.
type WorkloadSpec struct {
	// Kind is poisson, incast, all-to-all or csv.
	Kind string `yaml:"kind"`
	// Poisson: load per host link, flow sizes from cdf (web-search,
	// hawkeye or a file in the "size prob" format), over hosts (all when
	// empty) for the run's duration.
	Load  float64  `yaml:"load"`
	CDF   string   `yaml:"cdf"`
	Hosts []string `yaml:"hosts"`
	// Incast: senders to dst, size each, bursts of them interval apart.
	Senders  []string `yaml:"senders"`
	Dst      string   `yaml:"dst"`
	Size     string   `yaml:"size"`
	Bursts   int      `yaml:"bursts"`
	Interval string   `yaml:"interval"`
	Start    string   `yaml:"start"`
	// CSV: flows from a file (workload.WriteCSV's format).
	File string `yaml:"file"`
}

// FaultSpec makes a host inject PAUSE frames.
type FaultSpec struct {
	Host     string `yaml:"host"`
	Prio     int    `yaml:"prio"`
	Quanta   int    `yaml:"quanta"`
	Interval string `yaml:"interval"`
	From     string `yaml:"from"`
	Until    string `yaml:"until"`
}

// LoadScenario reads and checks a scenario file; every problem names its
// line and key.
func LoadScenario(path string) (Scenario, error) {
	return spec.LoadAs[Scenario](path)
}

// DecodeScenario is LoadScenario for YAML held in memory.
func DecodeScenario(name string, data []byte) (Scenario, error) {
	return spec.DecodeAs[Scenario](name, data)
}

// nsOf reads a duration such as 10us or 1ms; empty is def.
func nsOf(s string, def int64) (int64, error) {
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("duration %q: like 10us or 1ms", s)
	}
	return int64(d), nil
}

// Validate records every problem in doc.
func (s *Scenario) Validate(doc *spec.Doc) {
	if d, err := nsOf(s.Duration, 0); err != nil || d <= 0 {
		doc.Errorf("duration", "%q: a positive duration such as 10ms", s.Duration)
	}
	if _, err := nsOf(s.SampleInterval, 0); err != nil {
		doc.Errorf("sample-interval", "%v", err)
	}
	if s.TTL < 0 || s.TTL > 255 {
		doc.Errorf("ttl", "%d: 1..255", s.TTL)
	}
	s.Topology.ValidateAt(doc, "topology")
	var c Config
	if err := s.apply(&c); err != nil {
		doc.Errorf("switch", "%v", err)
	} else if err := c.Validate(); err != nil {
		doc.Errorf("switch", "%v", err)
	}
	for i, w := range s.Workload {
		key := fmt.Sprintf("workload[%d]", i)
		switch w.Kind {
		case "poisson":
			if w.Load <= 0 || w.Load > 1 {
				doc.Errorf(key+".load", "%g: in (0, 1]", w.Load)
			}
			if _, err := loadCDF(w.CDF); err != nil {
				doc.Errorf(key+".cdf", "%v", err)
			}
		case "incast":
			if len(w.Senders) == 0 || w.Dst == "" {
				doc.Errorf(key, "incast needs senders and dst")
			}
			if n, err := spec.ParseSize(w.Size); err != nil || n <= 0 {
				doc.Errorf(key+".size", "%q: a positive size", w.Size)
			}
		case "all-to-all":
			if n, err := spec.ParseSize(w.Size); err != nil || n <= 0 {
				doc.Errorf(key+".size", "%q: a positive size", w.Size)
			}
		case "csv":
			if _, err := os.Stat(w.File); err != nil {
				doc.Errorf(key+".file", "%v", err)
			}
		default:
			doc.Errorf(key+".kind", "%q: poisson, incast, all-to-all or csv", w.Kind)
		}
		if _, err := nsOf(w.Interval, 0); err != nil {
			doc.Errorf(key+".interval", "%v", err)
		}
		if _, err := nsOf(w.Start, 0); err != nil {
			doc.Errorf(key+".start", "%v", err)
		}
	}
	for i, f := range s.Faults {
		key := fmt.Sprintf("faults[%d]", i)
		if iv, err := nsOf(f.Interval, 0); err != nil || iv <= 0 {
			doc.Errorf(key+".interval", "%q: a positive duration", f.Interval)
		}
		if f.Prio < 0 || f.Prio >= NumPrio || f.Quanta < 0 || f.Quanta > 0xffff {
			doc.Errorf(key, "prio 0..7 and quanta 0..65535")
		}
	}
}

// apply sets c to the defaults with the scenario's changes.
func (s *Scenario) apply(c *Config) error {
	*c = DefaultConfig()
	c.Seed = s.Seed
	if s.TTL > 0 {
		c.TTL = uint8(s.TTL)
	}
	var err error
	if c.SampleInterval, err = nsOf(s.SampleInterval, 0); err != nil {
		return err
	}
	if err := s.Switch.apply(&c.Switch); err != nil {
		return err
	}
	for name, l := range s.Layers {
		sc := c.Switch
		if err := l.apply(&sc); err != nil {
			return fmt.Errorf("layer %s: %w", name, err)
		}
		if c.Layers == nil {
			c.Layers = map[string]SwitchConfig{}
		}
		c.Layers[name] = sc
	}
	if err := s.Host.apply(&c.Host); err != nil {
		return err
	}
	for name, h := range s.Hosts {
		hc := c.Host
		if err := h.apply(&hc); err != nil {
			return fmt.Errorf("host %s: %w", name, err)
		}
		if c.Hosts == nil {
			c.Hosts = map[string]HostConfig{}
		}
		c.Hosts[name] = hc
	}
	return nil
}

func setSize(dst *int64, s string) error {
	if s == "" {
		return nil
	}
	v, err := spec.ParseSize(s)
	*dst = v
	return err
}

func (w *SwitchSpec) apply(c *SwitchConfig) error {
	for _, f := range []struct {
		dst *int64
		s   string
	}{{&c.Buffer, w.Buffer}, {&c.Cell, w.Cell}, {&c.Guaranteed, w.Guaranteed}, {&c.Headroom, w.Headroom}, {&c.XonOffset, w.XonOffset}} {
		if err := setSize(f.dst, f.s); err != nil {
			return err
		}
	}
	if w.Alpha != nil {
		c.Alpha = *w.Alpha
	}
	if w.Lossless != nil {
		c.Lossless = 0
		for _, p := range w.Lossless {
			if p < 0 || p >= NumPrio {
				return fmt.Errorf("lossless priority %d: 0..7", p)
			}
			c.Lossless |= 1 << p
		}
	}
	if w.PauseQuanta != nil {
		if *w.PauseQuanta < 0 || *w.PauseQuanta > 0xffff {
			return fmt.Errorf("pause quanta %d: 0..65535", *w.PauseQuanta)
		}
		c.PauseQuanta = uint16(*w.PauseQuanta)
	}
	if e := w.ECN; e != nil {
		if e.Enabled != nil {
			c.ECN = *e.Enabled
		}
		if err := setSize(&c.Kmin, e.Kmin); err != nil {
			return err
		}
		if err := setSize(&c.Kmax, e.Kmax); err != nil {
			return err
		}
		if e.Pmax != nil {
			c.Pmax = *e.Pmax
		}
	}
	if w.Weights != nil {
		if len(w.Weights) != NumPrio {
			return fmt.Errorf("weights: %d, want one per priority (8)", len(w.Weights))
		}
		copy(c.Weights[:], w.Weights)
	}
	return nil
}

func (h *HostSpec) apply(c *HostConfig) error {
	if h.MTU != 0 {
		c.MTU = h.MTU
	}
	if h.AckEvery != 0 {
		c.AckEvery = h.AckEvery
	}
	if h.DCQCN != nil {
		c.DCQCN = *h.DCQCN
	}
	var err error
	if c.CNPInterval, err = nsOf(h.CNPInterval, c.CNPInterval); err != nil {
		return err
	}
	if c.RTO, err = nsOf(h.RTO, c.RTO); err != nil {
		return err
	}
	c.ProcessingDelay, err = nsOf(h.ProcessingDelay, c.ProcessingDelay)
	return err
}

// loadCDF names a built-in distribution or reads a file.
func loadCDF(name string) (*workload.CDF, error) {
	switch name {
	case "", "web-search":
		return workload.WebSearch, nil
	case "hawkeye":
		return workload.Hawkeye, nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("cdf %q: web-search, hawkeye or a file: %w", name, err)
	}
	defer f.Close()
	return workload.ParseCDF(f)
}

// Build turns a scenario into a ready simulation and its run length.
func (s *Scenario) Build() (*Sim, int64, error) {
	g, routes, err := s.Topology.Build()
	if err != nil {
		return nil, 0, err
	}
	var cfg Config
	if err := s.apply(&cfg); err != nil {
		return nil, 0, err
	}
	dur, _ := nsOf(s.Duration, 0)
	hostsOf := func(names []string) ([]int, error) {
		if len(names) == 0 {
			return g.Hosts(), nil
		}
		var out []int
		for _, n := range names {
			i, ok := g.Node(n)
			if !ok || g.Nodes[i].Kind != topo.Host {
				return nil, fmt.Errorf("fabric: %q is not a host of the topology", n)
			}
			out = append(out, i)
		}
		return out, nil
	}
	var flows []workload.Flow
	for i, w := range s.Workload {
		start, _ := nsOf(w.Start, 0)
		var fl []workload.Flow
		switch w.Kind {
		case "poisson":
			hosts, err := hostsOf(w.Hosts)
			if err != nil {
				return nil, 0, err
			}
			cdf, err := loadCDF(w.CDF)
			if err != nil {
				return nil, 0, err
			}
			bw := g.Links[g.Ports(hosts[0])[0].Link].Bandwidth
			fl = workload.Poisson(hosts, bw, w.Load, cdf, dur, s.Seed+uint64(i))
		case "incast":
			snd, err := hostsOf(w.Senders)
			if err != nil {
				return nil, 0, err
			}
			dst, err := hostsOf([]string{w.Dst})
			if err != nil {
				return nil, 0, err
			}
			size, _ := spec.ParseSize(w.Size)
			iv, _ := nsOf(w.Interval, 0)
			fl = workload.Incast(snd, dst[0], size, max(w.Bursts, 1), iv, start)
		case "all-to-all":
			hosts, err := hostsOf(w.Hosts)
			if err != nil {
				return nil, 0, err
			}
			size, _ := spec.ParseSize(w.Size)
			fl = workload.AllToAll(hosts, size, start)
		case "csv":
			f, err := os.Open(w.File)
			if err != nil {
				return nil, 0, err
			}
			fl, err = workload.ReadCSV(f)
			f.Close()
			if err != nil {
				return nil, 0, fmt.Errorf("fabric: %s: %w", w.File, err)
			}
		}
		for _, f := range fl {
			f.ID = len(flows)
			flows = append(flows, f)
		}
	}
	sim, err := New(g, routes, flows, cfg)
	if err != nil {
		return nil, 0, err
	}
	for _, f := range s.Faults {
		iv, _ := nsOf(f.Interval, 0)
		from, _ := nsOf(f.From, 0)
		until, _ := nsOf(f.Until, dur)
		q := f.Quanta
		if q == 0 {
			q = 0xffff
		}
		prio := f.Prio
		if prio == 0 {
			prio = PrioData
		}
		if err := sim.AddFault(HostFault{Host: f.Host, Prio: uint8(prio), Quanta: uint16(q), Interval: iv, From: from, Until: until}); err != nil {
			return nil, 0, err
		}
	}
	return sim, dur, nil
}
