package tuning

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/rdma-appliance/appliance/internal/topo"
)

// Watermark is one scope's ECN and PFC watermarks in the units switches
// are configured in: queue thresholds in MMU cells, the marking
// probability in percent, and the dynamic threshold alpha as the switch
// takes it.
type Watermark struct {
	Kmin     int64   `json:"kmin_cells"`
	Kmax     int64   `json:"kmax_cells"`
	Pmax     float64 `json:"pmax_pct"`
	Headroom int64   `json:"headroom_cells"`
	Alpha    float64 `json:"alpha"`
}

// Validate checks what any switch would refuse.
func (w Watermark) Validate() error {
	switch {
	case w.Kmin < 0 || w.Kmax < w.Kmin:
		return fmt.Errorf("ECN Kmin %d, Kmax %d cells: 0 <= Kmin <= Kmax", w.Kmin, w.Kmax)
	case !(w.Pmax > 0 && w.Pmax <= 100):
		return fmt.Errorf("ECN Pmax %g%%: in (0, 100]", w.Pmax)
	case w.Headroom < 0:
		return fmt.Errorf("PFC headroom %d cells: not negative", w.Headroom)
	case !(w.Alpha > 0) || math.IsInf(w.Alpha, 0):
		return fmt.Errorf("PFC alpha %g: positive", w.Alpha)
	}
	return nil
}

func (w Watermark) String() string {
	return fmt.Sprintf("Kmin %d Kmax %d cells, Pmax %g%%, headroom %d cells, alpha %g", w.Kmin, w.Kmax, w.Pmax, w.Headroom, w.Alpha)
}

// Scopes name what one watermark applies to: a switch layer ("leaf", as
// topo.Node.Layer), one switch ("switch:leaf1") or one port of a switch
// ("port:leaf1/3"). The paper's compression configures whole layers.
const (
	ScopeSwitchPrefix = "switch:"
	ScopePortPrefix   = "port:"
)

// ParseScope splits a scope into its kind ("layer", "switch" or "port"),
// the layer or switch name and the port (-1 unless a port scope).
func ParseScope(s string) (kind, name string, port int, err error) {
	switch {
	case strings.HasPrefix(s, ScopeSwitchPrefix):
		name = strings.TrimPrefix(s, ScopeSwitchPrefix)
		if name == "" {
			return "", "", -1, fmt.Errorf("scope %q: no switch name", s)
		}
		return "switch", name, -1, nil
	case strings.HasPrefix(s, ScopePortPrefix):
		rest := strings.TrimPrefix(s, ScopePortPrefix)
		i := strings.LastIndexByte(rest, '/')
		if i <= 0 {
			return "", "", -1, fmt.Errorf("scope %q: want port:SWITCH/PORT", s)
		}
		p, perr := strconv.Atoi(rest[i+1:])
		if perr != nil || p < 0 {
			return "", "", -1, fmt.Errorf("scope %q: port number: %w", s, errors.Join(perr, errors.New("a number >= 0")))
		}
		return "port", rest[:i], p, nil
	case s == "" || strings.ContainsAny(s, ":/ "):
		return "", "", -1, fmt.Errorf("scope %q: a layer name, switch:NAME or port:SWITCH/PORT", s)
	}
	return "layer", s, -1, nil
}

// Config is one candidate: the watermark of every tuned scope. It is pure
// data; Space.Check says whether it lies inside a space's bounds.
type Config struct {
	// Cell is the MMU cell size in bytes the thresholds count in.
	Cell   int64                `json:"cell_bytes"`
	Scopes map[string]Watermark `json:"scopes"`
}

// Validate checks every scope name and watermark.
func (c Config) Validate() error {
	if c.Cell <= 0 {
		return fmt.Errorf("cell size %d bytes: positive", c.Cell)
	}
	if len(c.Scopes) == 0 {
		return errors.New("no scope has a watermark")
	}
	for _, s := range c.ScopeNames() {
		if _, _, _, err := ParseScope(s); err != nil {
			return err
		}
		if err := c.Scopes[s].Validate(); err != nil {
			return fmt.Errorf("scope %s: %w", s, err)
		}
	}
	return nil
}

// ScopeNames are the configured scopes, sorted.
func (c Config) ScopeNames() []string {
	out := make([]string, 0, len(c.Scopes))
	for s := range c.Scopes {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Uniform is a configuration giving every scope the same watermark.
func Uniform(cell int64, w Watermark, scopes ...string) Config {
	c := Config{Cell: cell, Scopes: map[string]Watermark{}}
	for _, s := range scopes {
		c.Scopes[s] = w
	}
	return c
}

func (c Config) String() string {
	var b strings.Builder
	for i, s := range c.ScopeNames() {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %v", s, c.Scopes[s])
	}
	return b.String()
}

// Parameter names.
const (
	ParamKmin     = "kmin"
	ParamKmax     = "kmax"
	ParamPmax     = "pmax"
	ParamHeadroom = "headroom"
	ParamAlpha    = "alpha"
)

var paramOrder = []string{ParamKmin, ParamKmax, ParamPmax, ParamHeadroom, ParamAlpha}

// Param is one tunable parameter's allowed values, ascending: a range
// with a step or an explicit list (the paper's alpha values are not
// evenly spaced).
type Param struct {
	Name   string    `json:"name"`
	Values []float64 `json:"values"`
}

// Range is min, min+step, ... up to max (inclusive when it lands on it).
func Range(name string, lo, hi, step float64) (Param, error) {
	if !(step > 0) || hi < lo || math.IsInf(hi, 0) || math.IsNaN(lo) {
		return Param{}, fmt.Errorf("%s: range %g..%g step %g: want min <= max and a positive step", name, lo, hi, step)
	}
	n := int(math.Floor((hi-lo)/step+1e-9)) + 1
	if n > 1_000_000 {
		return Param{}, fmt.Errorf("%s: range %g..%g step %g has %d values, too many", name, lo, hi, step, n)
	}
	p := Param{Name: name, Values: make([]float64, n)}
	for i := range n {
		p.Values[i] = lo + float64(i)*step
	}
	return p, nil
}

// Min and Max are the bounds.
func (p Param) Min() float64 { return p.Values[0] }

// Max is the upper bound.
func (p Param) Max() float64 { return p.Values[len(p.Values)-1] }

// Space is what the tuner searches: the same parameters for every scope.
// A point of the space is one index per (scope, parameter) dimension, so
// every configuration the tuner can form lies on the declared grid and
// inside its bounds.
type Space struct {
	Cell   int64    `json:"cell_bytes"`
	Scopes []string `json:"scopes"`
	Params []Param  `json:"params"`
	// KmaxOffset, when positive, ties Kmax to Kmin (Kmax = Kmin +
	// offset cells, the paper's traversal) instead of tuning it.
	KmaxOffset int64 `json:"kmax_offset_cells,omitempty"`
	// Limits are hardware limits the bounds must respect (zero: none).
	MaxThresholdCells int64 `json:"max_threshold_cells,omitempty"`
}

// The paper's traversal space (Section 2.3), in cells of 256 bytes (the
// Trident 3's cell, the chip of the paper's H3C S6850 ToRs).
var (
	PaperKmin     = []float64{0, 500, 1000, 1500, 2000, 2500, 3000, 3500, 4000, 4500, 5000}
	PaperPmax     = []float64{1, 10, 20, 30, 40, 50, 60, 70, 80, 90}
	PaperAlpha    = []float64{1, 3, 5, 11, 20}
	PaperHeadroom = []float64{100, 200, 300, 400, 500, 600}
)

// PaperCell is the MMU cell the paper's thresholds count in.
const PaperCell = 256

// PaperSpace is the paper's 3300-point traversal space (11 Kmin x 10 Pmax
// x 5 alpha x 6 headroom, Kmax = Kmin + 500 cells) for each scope.
func PaperSpace(scopes ...string) Space {
	return Space{Cell: PaperCell, Scopes: scopes, KmaxOffset: 500, Params: []Param{
		{Name: ParamKmin, Values: slices.Clone(PaperKmin)},
		{Name: ParamPmax, Values: slices.Clone(PaperPmax)},
		{Name: ParamHeadroom, Values: slices.Clone(PaperHeadroom)},
		{Name: ParamAlpha, Values: slices.Clone(PaperAlpha)},
	}}
}

// Param is the named parameter, or nil.
func (s *Space) Param(name string) *Param {
	for i := range s.Params {
		if s.Params[i].Name == name {
			return &s.Params[i]
		}
	}
	return nil
}

// Validate checks the space's bounds: known parameters, each once,
// ascending values within what a switch accepts.
func (s *Space) Validate() error {
	if s.Cell <= 0 {
		return fmt.Errorf("space: cell size %d: positive", s.Cell)
	}
	if len(s.Scopes) == 0 {
		return errors.New("space: no scopes to tune")
	}
	seen := map[string]bool{}
	for _, sc := range s.Scopes {
		if _, _, _, err := ParseScope(sc); err != nil {
			return fmt.Errorf("space: %w", err)
		}
		if seen[sc] {
			return fmt.Errorf("space: scope %s twice", sc)
		}
		seen[sc] = true
	}
	have := map[string]bool{}
	for _, p := range s.Params {
		if !slices.Contains(paramOrder, p.Name) {
			return fmt.Errorf("space: unknown parameter %q (kmin, kmax, pmax, headroom, alpha)", p.Name)
		}
		if have[p.Name] {
			return fmt.Errorf("space: parameter %s twice", p.Name)
		}
		have[p.Name] = true
		if len(p.Values) == 0 {
			return fmt.Errorf("space: %s has no values", p.Name)
		}
		for i, v := range p.Values {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("space: %s value %g", p.Name, v)
			}
			if i > 0 && v <= p.Values[i-1] {
				return fmt.Errorf("space: %s values must ascend (%g after %g)", p.Name, v, p.Values[i-1])
			}
		}
		lo, hi := p.Min(), p.Max()
		switch p.Name {
		case ParamKmin, ParamKmax, ParamHeadroom:
			if lo < 0 || lo != math.Trunc(lo) || hi != math.Trunc(hi) {
				return fmt.Errorf("space: %s bounds %g..%g: whole cells, not negative", p.Name, lo, hi)
			}
			if s.MaxThresholdCells > 0 && hi+float64(max(s.KmaxOffset, 0)) > float64(s.MaxThresholdCells) {
				return fmt.Errorf("space: %s up to %g cells exceeds the switch's %d", p.Name, hi, s.MaxThresholdCells)
			}
		case ParamPmax:
			if lo <= 0 || hi > 100 {
				return fmt.Errorf("space: pmax bounds %g..%g%%: within (0, 100]", lo, hi)
			}
		case ParamAlpha:
			if lo <= 0 {
				return fmt.Errorf("space: alpha bounds %g..%g: positive", lo, hi)
			}
		}
	}
	for _, need := range []string{ParamKmin, ParamPmax, ParamHeadroom, ParamAlpha} {
		if !have[need] {
			return fmt.Errorf("space: no %s parameter", need)
		}
	}
	switch {
	case s.KmaxOffset < 0:
		return fmt.Errorf("space: kmax offset %d: not negative", s.KmaxOffset)
	case s.KmaxOffset > 0 && have[ParamKmax]:
		return errors.New("space: kmax is tied to kmin by the offset; drop the kmax parameter or the offset")
	case s.KmaxOffset == 0 && !have[ParamKmax]:
		return errors.New("space: no kmax parameter and no kmax offset")
	case have[ParamKmax] && s.Param(ParamKmax).Max() < s.Param(ParamKmin).Min():
		return errors.New("space: no kmax value is at least the smallest kmin")
	}
	return nil
}

// Dims is the number of dimensions: parameters times scopes.
func (s *Space) Dims() int { return len(s.Params) * len(s.Scopes) }

// dim is dimension d's parameter.
func (s *Space) dim(d int) *Param { return &s.Params[d%len(s.Params)] }

// Levels is how many values dimension d has.
func (s *Space) Levels(d int) int { return len(s.dim(d).Values) }

// Size is the number of points (as a float: per-port spaces overflow
// integers quickly).
func (s *Space) Size() float64 {
	n := 1.0
	for d := range s.Dims() {
		n *= float64(s.Levels(d))
	}
	return n
}

// Point is one index per dimension: scope-major, parameters in
// Space.Params order.
type Point []int

// Key is a point's stable text form (map keys, state files).
func (p Point) Key() string {
	var b strings.Builder
	for i, v := range p {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(v))
	}
	return b.String()
}

// Inside says whether every index is within its dimension.
func (s *Space) Inside(p Point) bool {
	if len(p) != s.Dims() {
		return false
	}
	for d, v := range p {
		if v < 0 || v >= s.Levels(d) {
			return false
		}
	}
	return true
}

// insideOrNil is Inside for a point a restored state may not have yet (a
// best before any evaluation): absent is fine, empty or outside is not.
func (s *Space) insideOrNil(p Point) bool { return p == nil || s.Inside(p) }

// allInside reports whether every point of ps is inside.
func (s *Space) allInside(ps []Point) bool {
	for _, p := range ps {
		if !s.Inside(p) {
			return false
		}
	}
	return true
}

// Config is the configuration at point p. A Kmax below Kmin (possible
// when both are tuned) is raised to Kmin, as switches do.
func (s *Space) Config(p Point) (Config, error) {
	if !s.Inside(p) {
		return Config{}, fmt.Errorf("point %v is outside the space", p)
	}
	c := Config{Cell: s.Cell, Scopes: make(map[string]Watermark, len(s.Scopes))}
	np := len(s.Params)
	for si, sc := range s.Scopes {
		var w Watermark
		for pi, par := range s.Params {
			v := par.Values[p[si*np+pi]]
			switch par.Name {
			case ParamKmin:
				w.Kmin = int64(v)
			case ParamKmax:
				w.Kmax = int64(v)
			case ParamPmax:
				w.Pmax = v
			case ParamHeadroom:
				w.Headroom = int64(v)
			case ParamAlpha:
				w.Alpha = v
			}
		}
		if s.KmaxOffset > 0 {
			w.Kmax = w.Kmin + s.KmaxOffset
		}
		w.Kmax = max(w.Kmax, w.Kmin)
		c.Scopes[sc] = w
	}
	return c, nil
}

// Check says whether c lies inside the space's bounds: the same scopes,
// every value between its parameter's min and max (Kmax as the offset or
// its own bounds say). The tuner checks every configuration before a
// target sees it.
func (s *Space) Check(c Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if c.Cell != s.Cell {
		return fmt.Errorf("cell size %d, the space counts in %d", c.Cell, s.Cell)
	}
	if len(c.Scopes) != len(s.Scopes) {
		return fmt.Errorf("%d scopes, the space has %d", len(c.Scopes), len(s.Scopes))
	}
	in := func(name string, v float64) error {
		p := s.Param(name)
		if p == nil {
			return nil
		}
		if v < p.Min() || v > p.Max() {
			return fmt.Errorf("%s %g outside the bounds %g..%g", name, v, p.Min(), p.Max())
		}
		return nil
	}
	for _, sc := range s.Scopes {
		w, ok := c.Scopes[sc]
		if !ok {
			return fmt.Errorf("scope %s has no watermark", sc)
		}
		err := errors.Join(in(ParamKmin, float64(w.Kmin)), in(ParamKmax, float64(w.Kmax)), in(ParamPmax, w.Pmax),
			in(ParamHeadroom, float64(w.Headroom)), in(ParamAlpha, w.Alpha))
		if s.KmaxOffset > 0 && w.Kmax != w.Kmin+s.KmaxOffset {
			err = errors.Join(err, fmt.Errorf("kmax %d is not kmin + %d", w.Kmax, s.KmaxOffset))
		}
		if err != nil {
			return fmt.Errorf("scope %s: %w", sc, err)
		}
	}
	return nil
}

// Nearest is the point whose configuration is closest to c, dimension by
// dimension (baselines and start points given as watermarks land on the
// grid this way); scopes c lacks take the middle of each range.
func (s *Space) Nearest(c Config) Point {
	p := make(Point, s.Dims())
	np := len(s.Params)
	for si, sc := range s.Scopes {
		w, ok := c.Scopes[sc]
		for pi, par := range s.Params {
			if !ok {
				p[si*np+pi] = len(par.Values) / 2
				continue
			}
			var v float64
			switch par.Name {
			case ParamKmin:
				v = float64(w.Kmin)
			case ParamKmax:
				v = float64(w.Kmax)
			case ParamPmax:
				v = w.Pmax
			case ParamHeadroom:
				v = float64(w.Headroom)
			case ParamAlpha:
				v = w.Alpha
			}
			best := 0
			for i, x := range par.Values {
				if math.Abs(x-v) < math.Abs(par.Values[best]-v) {
					best = i
				}
			}
			p[si*np+pi] = best
		}
	}
	return p
}

// Enumerate calls f with every point in order (the last dimension
// fastest) until f returns false.
func (s *Space) Enumerate(f func(Point) bool) {
	n := s.Dims()
	p := make(Point, n)
	for {
		if !f(slices.Clone(p)) {
			return
		}
		d := n - 1
		for ; d >= 0; d-- {
			p[d]++
			if p[d] < s.Levels(d) {
				break
			}
			p[d] = 0
		}
		if d < 0 {
			return
		}
	}
}

// CompressOptions are the paper's three ways (Section 5.4) of shrinking
// the search space.
type CompressOptions struct {
	// PerLayer gives every switch of a layer the same watermark; off,
	// each switch is its own scope.
	PerLayer bool
	// OnPathOnly keeps the switches some flow crosses.
	OnPathOnly bool
	// ReceiverSide keeps, for telemetry, only the switches that deliver
	// to a receiver (the last hop of some flow).
	ReceiverSide bool
}

// Compression is what compression keeps.
type Compression struct {
	// Scopes to tune, sorted.
	Scopes []string `json:"scopes"`
	// Telemetry names the switches whose telemetry feeds the objective.
	Telemetry []string `json:"telemetry"`
	// Switches is every switch of the topology; OnPath those the traffic
	// crosses.
	Switches int `json:"switches"`
	OnPath   int `json:"on_path"`
}

// Log10Size is log10 of the search space size with per-scope size
// points: before compression each switch is tuned on its own.
func (c Compression) Log10Size(points float64) (before, after float64) {
	return float64(c.Switches) * math.Log10(points), float64(len(c.Scopes)) * math.Log10(points)
}

// Demand is a flow's ends: nodes of the topology.
type Demand struct{ Src, Dst int }

// Compress picks the scopes to tune and the switches to watch for flows
// between the demands' ends on a topology with its routes. Paths follow
// every ECMP choice.
func Compress(g *topo.Graph, routes *topo.Routes, flows []Demand, o CompressOptions) Compression {
	onPath := map[int]bool{}
	lastHop := map[int]bool{}
	for _, f := range flows {
		// Breadth-first over every equal-cost next hop from the
		// source's switch to the destination.
		ports := g.Ports(f.Src)
		if len(ports) == 0 {
			continue
		}
		frontier := []int{ports[0].Peer}
		seen := map[int]bool{}
		for len(frontier) > 0 {
			n := frontier[0]
			frontier = frontier[1:]
			if seen[n] || n < 0 || n >= len(g.Nodes) || g.Nodes[n].Kind != topo.Switch {
				continue
			}
			seen[n] = true
			onPath[n] = true
			for _, port := range routes.NextHops(n, f.Dst) {
				peer := g.Ports(n)[port].Peer
				if peer == f.Dst {
					lastHop[n] = true
					continue
				}
				frontier = append(frontier, peer)
			}
		}
	}
	var c Compression
	scopes := map[string]bool{}
	for i, nd := range g.Nodes {
		if nd.Kind != topo.Switch {
			continue
		}
		c.Switches++
		if onPath[i] {
			c.OnPath++
		}
		if o.OnPathOnly && !onPath[i] {
			continue
		}
		if o.PerLayer && nd.Layer != "" {
			scopes[nd.Layer] = true
		} else {
			scopes[ScopeSwitchPrefix+nd.Name] = true
		}
		if !o.ReceiverSide || lastHop[i] {
			c.Telemetry = append(c.Telemetry, nd.Name)
		}
	}
	for s := range scopes {
		c.Scopes = append(c.Scopes, s)
	}
	sort.Strings(c.Scopes)
	sort.Strings(c.Telemetry)
	return c
}

// AlphaUnit converts the space's alpha (the switch's dynamic-threshold
// setting, the paper's 1..20) to the simulator's fraction of the free
// shared buffer a priority group may take: alpha 1 is 1/64 (about 0.5 MB
// of an empty 32 MB buffer, below the largest ECN thresholds, so PFC can
// fire before ECN as the paper observes for alpha 1), alpha 20 is 0.31.
const AlphaUnit = 1.0 / 64
