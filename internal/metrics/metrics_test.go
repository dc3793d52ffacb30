package metrics

import (
	"strings"
	"testing"
)

func TestExposition(t *testing.T) {
	r := NewRegistry()
	r.Counter("app_packets_total", "Packets seen.").Add(3)
	g := r.GaugeVec("app_queue_depth", "Queue depth by port.", "port")
	g.With("p0").Set(1.5)
	g.With(`we"ird`).Add(-2)
	r.GaugeFunc("app_up", "Always 1.", func() float64 { return 1 })
	r.Collect("app_port_rx_packets_total", "Per-port packets.", CounterType, []string{"port", "queue"}, func(emit func(Sample)) {
		emit(Sample{Labels: []string{"ring:a", "0"}, Value: 7})
	})
	h := r.Histogram("app_latency_seconds", "Latency.", []float64{0.001, 0.01})
	h.Observe(0.0005)
	h.Observe(0.005)
	h.Observe(1)
	want := `# HELP app_latency_seconds Latency.
# TYPE app_latency_seconds histogram
app_latency_seconds_bucket{le="0.001"} 1
app_latency_seconds_bucket{le="0.01"} 2
app_latency_seconds_bucket{le="+Inf"} 3
app_latency_seconds_sum 1.0055
app_latency_seconds_count 3
# HELP app_packets_total Packets seen.
# TYPE app_packets_total counter
app_packets_total 3
# HELP app_port_rx_packets_total Per-port packets.
# TYPE app_port_rx_packets_total counter
app_port_rx_packets_total{port="ring:a",queue="0"} 7
# HELP app_queue_depth Queue depth by port.
# TYPE app_queue_depth gauge
app_queue_depth{port="p0"} 1.5
app_queue_depth{port="we\"ird"} -2
# HELP app_up Always 1.
# TYPE app_up gauge
app_up 1
`
	if got := r.String(); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestRegistrationRules(t *testing.T) {
	r := NewRegistry()
	a := r.Counter("x_total", "x")
	if b := r.Counter("x_total", "x"); a != b {
		t.Fatal("registering the same counter twice gave two counters")
	}
	for name, fn := range map[string]func(){
		"bad name":    func() { r.Counter("1x", "") },
		"shape clash": func() { r.Gauge("x_total", "") },
		"label count": func() { r.CounterVec("y_total", "", "a").With("1", "2") },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			fn()
		}()
	}
	if !strings.Contains(r.String(), "x_total 0") {
		t.Fatal(r.String())
	}
}

func TestCounterAllocs(t *testing.T) {
	r := NewRegistry()
	c := r.Counter("c_total", "")
	g := r.Gauge("g", "")
	if a := testing.AllocsPerRun(1000, func() { c.Inc(); g.Add(1) }); a != 0 {
		t.Fatalf("allocs %v", a)
	}
}
