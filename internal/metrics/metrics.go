// Package metrics is each service's Prometheus registry, on
// github.com/prometheus/client_golang: counters and gauges, labelled
// families, and families that read live values (port counters, poll-loop
// passes, queue depths) only when /metrics is scraped, so the loops that
// count keep doing it with one atomic operation of their own and never
// touch the registry. It serves the registry with promhttp (gzip).
//
// Every service has its own registry rather than the library's global
// one: tests and the lab run several services in one process, and each
// must expose only its own families.
package metrics

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Type is the type of a family Collect produces.
type Type = prometheus.ValueType

// The types Collect takes.
const (
	CounterType = prometheus.CounterValue
	GaugeType   = prometheus.GaugeValue
)

// Registry holds one service's metric families.
type Registry struct {
	reg *prometheus.Registry
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{reg: prometheus.NewRegistry()} }

// MustRegister adds collectors made with client_golang directly (the Go
// runtime's and the process's, a histogram); it panics on a name
// registered twice, as the registration methods below do.
func (r *Registry) MustRegister(cs ...prometheus.Collector) { r.reg.MustRegister(cs...) }

// Gatherer is the registry for client_golang's gathering and testing
// helpers.
func (r *Registry) Gatherer() prometheus.Gatherer { return r.reg }

// Handler serves the registry as /metrics: the Prometheus text format (or
// protobuf to a client that asks for it), compressed when the client
// accepts it. OpenMetrics is not offered: it names a counter's family
// without _total, and the Go collector's counter go_memstats_alloc_bytes_total
// then collides with its gauge go_memstats_alloc_bytes, which makes the
// exposition invalid for a strict OpenMetrics parser (client_golang issue
// 829); Prometheus falls back to the text format. A family that fails to
// collect is logged through log and left out rather than failing the whole
// scrape: one broken collector must not blind the operator to every other
// metric.
func (r *Registry) Handler(log promhttp.Logger) http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{
		ErrorLog:      log,
		ErrorHandling: promhttp.ContinueOnError,
	})
}

// checkNames panics on a metric or label name outside the classic
// Prometheus character set. client_golang accepts any UTF-8 name, which
// scrapers that predate UTF-8 names see escaped or refuse; the appliance's
// names stay [a-zA-Z_:][a-zA-Z0-9_:]*.
func checkNames(name string, labels []string) {
	if !model.LegacyValidation.IsValidMetricName(name) {
		panic(fmt.Sprintf("metrics: invalid metric name %q", name))
	}
	for _, l := range labels {
		if !model.LegacyValidation.IsValidLabelName(l) || strings.HasPrefix(l, "__") {
			panic(fmt.Sprintf("metrics: %s: invalid label name %q", name, l))
		}
	}
}

// register adds c, or returns the collector already registered under the
// same description (so registering a counter twice gives the same
// counter, as callers that register lazily expect). A different family
// under the same name panics: that is a programming error.
func register[C prometheus.Collector](r *Registry, c C) C {
	if err := r.reg.Register(c); err != nil {
		if are, ok := err.(prometheus.AlreadyRegisteredError); ok {
			if old, ok := are.ExistingCollector.(C); ok {
				return old
			}
		}
		panic("metrics: " + err.Error())
	}
	return c
}

// Counter registers (or finds) an unlabelled counter.
func (r *Registry) Counter(name, help string) prometheus.Counter {
	checkNames(name, nil)
	return register(r, prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help}))
}

// Gauge registers (or finds) an unlabelled gauge.
func (r *Registry) Gauge(name, help string) prometheus.Gauge {
	checkNames(name, nil)
	return register(r, prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help}))
}

// CounterVec registers (or finds) a labelled counter family. Keep the
// counter WithLabelValues returns rather than looking it up per event on
// a hot path: the lookup hashes the values.
func (r *Registry) CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	checkNames(name, labels)
	return register(r, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels))
}

// GaugeVec registers (or finds) a labelled gauge family.
func (r *Registry) GaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	checkNames(name, labels)
	return register(r, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels))
}

// CounterFunc registers a counter read from fn at scrape time: fn reads
// the atomic counter a loop keeps, so counting costs the loop nothing
// more.
func (r *Registry) CounterFunc(name, help string, fn func() float64) {
	checkNames(name, nil)
	r.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, fn))
}

// GaugeFunc registers a gauge read from fn at scrape time.
func (r *Registry) GaugeFunc(name, help string, fn func() float64) {
	checkNames(name, nil)
	r.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, fn))
}

// Sample is one series of a family Collect produces.
type Sample struct {
	Labels []string // label values, in the family's label order
	Value  float64
}

// Collect registers a labelled family whose series fn emits at scrape
// time, e.g. per-port counters read from the ports themselves.
func (r *Registry) Collect(name, help string, typ Type, labels []string, fn func(emit func(Sample))) {
	checkNames(name, labels)
	r.reg.MustRegister(&funcCollector{desc: prometheus.NewDesc(name, help, labels, nil), typ: typ, fn: fn})
}

// funcCollector is a family read at scrape time.
type funcCollector struct {
	desc *prometheus.Desc
	typ  prometheus.ValueType
	fn   func(emit func(Sample))
}

func (c *funcCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *funcCollector) Collect(ch chan<- prometheus.Metric) {
	c.fn(func(s Sample) {
		m, err := prometheus.NewConstMetric(c.desc, c.typ, s.Value, validUTF8(s.Labels)...)
		if err != nil {
			m = prometheus.NewInvalidMetric(c.desc, err)
		}
		ch <- m
	})
}

// validUTF8 mends label values that are not UTF-8. They come from
// configuration (port, dumper and collector names), and client_golang
// refuses such a value, which would drop the series.
func validUTF8(values []string) []string {
	for i, v := range values {
		if !utf8.ValidString(v) {
			values = slices.Clone(values) // the caller's slice stays as it was
			for j := i; j < len(values); j++ {
				values[j] = strings.ToValidUTF8(values[j], "\uFFFD")
			}
			return values
		}
	}
	return values
}

// String renders the registry in the text format; handy in tests.
func (r *Registry) String() string {
	fams, err := r.reg.Gather()
	var b strings.Builder
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range fams {
		if err := enc.Encode(f); err != nil {
			b.WriteString("# " + err.Error() + "\n")
		}
	}
	if err != nil {
		b.WriteString("# " + err.Error() + "\n")
	}
	return b.String()
}
