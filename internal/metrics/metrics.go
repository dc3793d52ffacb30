// Package metrics is a small Prometheus registry: counters, gauges and
// histograms, labelled families, and collectors that read live values (port
// counters, queue depths) at scrape time, rendered in the Prometheus text
// exposition format. Updating a counter or gauge is one atomic operation, so
// poll loops can count without locks.
package metrics

import (
	"fmt"
	"io"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/valyala/bytebufferpool"
)

// Type is a Prometheus metric type.
type Type string

// Metric types.
const (
	CounterType   Type = "counter"
	GaugeType     Type = "gauge"
	HistogramType Type = "histogram"
)

var nameRE = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)

// Counter only goes up.
type Counter struct{ v atomic.Uint64 }

// Inc adds one.
func (c *Counter) Inc() { c.v.Add(1) }

// Add adds n.
func (c *Counter) Add(n uint64) { c.v.Add(n) }

// Value reads the counter.
func (c *Counter) Value() uint64 { return c.v.Load() }

// Gauge goes up and down.
type Gauge struct{ bits atomic.Uint64 }

// Set sets the gauge.
func (g *Gauge) Set(v float64) { g.bits.Store(math.Float64bits(v)) }

// Add adds d (which may be negative).
func (g *Gauge) Add(d float64) {
	for {
		old := g.bits.Load()
		if g.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+d)) {
			return
		}
	}
}

// Value reads the gauge.
func (g *Gauge) Value() float64 { return math.Float64frombits(g.bits.Load()) }

// Histogram counts observations into fixed buckets.
type Histogram struct {
	bounds []float64
	counts []atomic.Uint64 // one per bound plus +Inf
	sum    Gauge
	count  atomic.Uint64
}

// Observe records one value.
func (h *Histogram) Observe(v float64) {
	i := sort.SearchFloat64s(h.bounds, v)
	h.counts[i].Add(1)
	h.count.Add(1)
	h.sum.Add(v)
}

// Sample is one value of a collected metric.
type Sample struct {
	Labels []string // label values, in the family's label order
	Value  float64
}

type family struct {
	name   string
	help   string
	typ    Type
	labels []string

	mu       sync.Mutex
	children map[string]any // joined label values -> *Counter / *Gauge / *Histogram
	order    []string
	values   map[string][]string

	fn      func() float64          // for func metrics
	collect func(emit func(Sample)) // for collectors
	buckets []float64
}

// Registry holds metric families.
type Registry struct {
	mu       sync.Mutex
	families map[string]*family
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{families: map[string]*family{}} }

func (r *Registry) add(f *family) *family {
	if !nameRE.MatchString(f.name) {
		panic("metrics: invalid metric name " + strconv.Quote(f.name))
	}
	for _, l := range f.labels {
		if !nameRE.MatchString(l) || strings.HasPrefix(l, "__") {
			panic("metrics: invalid label name " + strconv.Quote(l))
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.families[f.name]; ok {
		if old.typ != f.typ || strings.Join(old.labels, ",") != strings.Join(f.labels, ",") {
			panic("metrics: " + f.name + " registered twice with different shapes")
		}
		return old
	}
	f.children = map[string]any{}
	f.values = map[string][]string{}
	r.families[f.name] = f
	return f
}

// Counter registers (or finds) an unlabelled counter.
func (r *Registry) Counter(name, help string) *Counter {
	return r.CounterVec(name, help).With()
}

// Gauge registers (or finds) an unlabelled gauge.
func (r *Registry) Gauge(name, help string) *Gauge {
	return r.GaugeVec(name, help).With()
}

// Histogram registers (or finds) an unlabelled histogram with upper bounds.
func (r *Registry) Histogram(name, help string, bounds []float64) *Histogram {
	return r.HistogramVec(name, help, bounds).With()
}

// CounterFunc registers a counter read from fn at scrape time.
func (r *Registry) CounterFunc(name, help string, fn func() float64) {
	r.add(&family{name: name, help: help, typ: CounterType, fn: fn})
}

// GaugeFunc registers a gauge read from fn at scrape time.
func (r *Registry) GaugeFunc(name, help string, fn func() float64) {
	r.add(&family{name: name, help: help, typ: GaugeType, fn: fn})
}

// Collect registers a labelled family whose samples are produced by fn at
// scrape time, e.g. per-port counters read from the ports themselves.
func (r *Registry) Collect(name, help string, typ Type, labels []string, fn func(emit func(Sample))) {
	r.add(&family{name: name, help: help, typ: typ, labels: labels, collect: fn})
}

// CounterVec is a counter family with labels.
type CounterVec struct{ f *family }

// GaugeVec is a gauge family with labels.
type GaugeVec struct{ f *family }

// HistogramVec is a histogram family with labels.
type HistogramVec struct{ f *family }

// CounterVec registers a labelled counter family.
func (r *Registry) CounterVec(name, help string, labels ...string) *CounterVec {
	return &CounterVec{r.add(&family{name: name, help: help, typ: CounterType, labels: labels})}
}

// GaugeVec registers a labelled gauge family.
func (r *Registry) GaugeVec(name, help string, labels ...string) *GaugeVec {
	return &GaugeVec{r.add(&family{name: name, help: help, typ: GaugeType, labels: labels})}
}

// HistogramVec registers a labelled histogram family.
func (r *Registry) HistogramVec(name, help string, bounds []float64, labels ...string) *HistogramVec {
	b := append([]float64(nil), bounds...)
	sort.Float64s(b)
	return &HistogramVec{r.add(&family{name: name, help: help, typ: HistogramType, labels: labels, buckets: b})}
}

func (f *family) child(values []string, mk func() any) any {
	if len(values) != len(f.labels) {
		panic(fmt.Sprintf("metrics: %s wants %d label values, got %d", f.name, len(f.labels), len(values)))
	}
	key := strings.Join(values, "\xff")
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.children[key]; ok {
		return c
	}
	c := mk()
	f.children[key] = c
	f.order = append(f.order, key)
	f.values[key] = append([]string(nil), values...)
	return c
}

// With returns the counter for the label values; keep it rather than calling
// With on a hot path.
func (v *CounterVec) With(values ...string) *Counter {
	return v.f.child(values, func() any { return new(Counter) }).(*Counter)
}

// With returns the gauge for the label values.
func (v *GaugeVec) With(values ...string) *Gauge {
	return v.f.child(values, func() any { return new(Gauge) }).(*Gauge)
}

// With returns the histogram for the label values.
func (v *HistogramVec) With(values ...string) *Histogram {
	return v.f.child(values, func() any {
		return &Histogram{bounds: v.f.buckets, counts: make([]atomic.Uint64, len(v.f.buckets)+1)}
	}).(*Histogram)
}

// WriteTo renders every family in the text exposition format, sorted by name.
func (r *Registry) WriteTo(w io.Writer) (int64, error) {
	r.mu.Lock()
	fams := make([]*family, 0, len(r.families))
	for _, f := range r.families {
		fams = append(fams, f)
	}
	r.mu.Unlock()
	sort.Slice(fams, func(i, j int) bool { return fams[i].name < fams[j].name })

	buf := bytebufferpool.Get()
	defer bytebufferpool.Put(buf)
	for _, f := range fams {
		f.render(buf)
	}
	n, err := w.Write(buf.B)
	return int64(n), err
}

// String renders the registry; handy in tests.
func (r *Registry) String() string {
	var b strings.Builder
	_, _ = r.WriteTo(&b)
	return b.String()
}

func (f *family) render(b *bytebufferpool.ByteBuffer) {
	fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", f.name, escapeHelp(f.help), f.name, f.typ)
	switch {
	case f.fn != nil:
		writeSample(b, f.name, nil, nil, "", "", f.fn())
	case f.collect != nil:
		f.collect(func(s Sample) { writeSample(b, f.name, f.labels, s.Labels, "", "", s.Value) })
	default:
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, key := range f.order {
			vals := f.values[key]
			switch c := f.children[key].(type) {
			case *Counter:
				writeSample(b, f.name, f.labels, vals, "", "", float64(c.Value()))
			case *Gauge:
				writeSample(b, f.name, f.labels, vals, "", "", c.Value())
			case *Histogram:
				var cum uint64
				for i, bound := range c.bounds {
					cum += c.counts[i].Load()
					writeSample(b, f.name+"_bucket", f.labels, vals, "le", formatFloat(bound), float64(cum))
				}
				cum += c.counts[len(c.bounds)].Load()
				writeSample(b, f.name+"_bucket", f.labels, vals, "le", "+Inf", float64(cum))
				writeSample(b, f.name+"_sum", f.labels, vals, "", "", c.sum.Value())
				writeSample(b, f.name+"_count", f.labels, vals, "", "", float64(c.count.Load()))
			}
		}
	}
}

func writeSample(b *bytebufferpool.ByteBuffer, name string, labels, values []string, extraK, extraV string, v float64) {
	b.B = append(b.B, name...)
	if len(labels) > 0 || extraK != "" {
		b.B = append(b.B, '{')
		for i, l := range labels {
			if i > 0 {
				b.B = append(b.B, ',')
			}
			val := ""
			if i < len(values) {
				val = values[i]
			}
			b.B = append(b.B, l...)
			b.B = append(b.B, '=')
			b.B = strconv.AppendQuote(b.B, val)
		}
		if extraK != "" {
			if len(labels) > 0 {
				b.B = append(b.B, ',')
			}
			b.B = append(b.B, extraK...)
			b.B = append(b.B, `="`...)
			b.B = append(b.B, extraV...)
			b.B = append(b.B, '"')
		}
		b.B = append(b.B, '}')
	}
	b.B = append(b.B, ' ')
	b.B = append(b.B, formatFloat(v)...)
	b.B = append(b.B, '\n')
}

func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

func escapeHelp(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(s)
}
