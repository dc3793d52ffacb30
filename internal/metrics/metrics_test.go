package metrics

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func TestExposition(t *testing.T) {
	r := NewRegistry()
	r.Counter("app_packets_total", "Packets seen.").Add(3)
	g := r.GaugeVec("app_queue_depth", "Queue depth by port.", "port")
	g.WithLabelValues("p0").Set(1.5)
	g.WithLabelValues(`we"ird`).Add(-2)
	r.GaugeFunc("app_up", "Always 1.", func() float64 { return 1 })
	r.CounterFunc("app_polls_total", "Polls.", func() float64 { return 9 })
	r.Collect("app_port_rx_packets_total", "Per-port packets.", CounterType, []string{"port", "queue"}, func(emit func(Sample)) {
		emit(Sample{Labels: []string{"ring:a", "0"}, Value: 7})
	})
	want := `# HELP app_packets_total Packets seen.
# TYPE app_packets_total counter
app_packets_total 3
# HELP app_polls_total Polls.
# TYPE app_polls_total counter
app_polls_total 9
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

// TestLabelValues: whatever a label value holds, the exposition parses and
// gives it back (a value that is not UTF-8 comes back mended).
func TestLabelValues(t *testing.T) {
	r := NewRegistry()
	values := []string{"/a\tb", `/"x"`, "a\nb", `back\slash`, "\xff", "ok"}
	v := r.CounterVec("app_requests_total", "Requests.", "path")
	for _, s := range values[:4] {
		v.WithLabelValues(s).Inc()
	}
	r.Collect("app_port_packets_total", "Packets.", CounterType, []string{"port"}, func(emit func(Sample)) {
		for _, s := range values[4:] {
			emit(Sample{Labels: []string{s}, Value: 1})
		}
	})
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(r.String()))
	if err != nil {
		t.Fatalf("%v\n%s", err, r.String())
	}
	got := map[string]bool{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			got[m.GetLabel()[0].GetValue()] = true
		}
	}
	for _, s := range []string{"/a\tb", `/"x"`, "a\nb", `back\slash`, "\uFFFD", "ok"} {
		if !got[s] {
			t.Errorf("label value %q lost: %v", s, got)
		}
	}
}

func TestRegistrationRules(t *testing.T) {
	r := NewRegistry()
	a := r.Counter("x_total", "x")
	if b := r.Counter("x_total", "x"); a != b {
		t.Fatal("registering the same counter twice gave two counters")
	}
	va := r.CounterVec("v_total", "v", "result")
	if vb := r.CounterVec("v_total", "v", "result"); va != vb {
		t.Fatal("registering the same family twice gave two families")
	}
	r.GaugeFunc("f", "f", func() float64 { return 0 })
	for name, fn := range map[string]func(){
		"bad name":        func() { r.Counter("1x", "") },
		"utf-8 name":      func() { r.Counter("ä_total", "") },
		"bad label":       func() { r.CounterVec("y_total", "", "a-b") },
		"reserved label":  func() { r.CounterVec("y_total", "", "__a") },
		"shape clash":     func() { r.Gauge("x_total", "x") },
		"label count":     func() { r.CounterVec("z_total", "", "a").WithLabelValues("1", "2") },
		"func twice":      func() { r.GaugeFunc("f", "f", func() float64 { return 0 }) },
		"collect clashes": func() { r.Collect("f", "f", GaugeType, nil, func(func(Sample)) {}) },
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

// TestHandler: /metrics answers in the format asked for, compressed when
// asked; a family that fails to collect is logged and left out, and the
// others are served.
func TestHandler(t *testing.T) {
	r := NewRegistry()
	r.Counter("app_things_total", "Things.").Add(2)
	r.Collect("app_broken", "Emits the wrong number of label values.", GaugeType, []string{"a", "b"}, func(emit func(Sample)) {
		emit(Sample{Labels: []string{"only one"}, Value: 1})
	})
	var log logLines
	srv := httptest.NewServer(r.Handler(&log))
	defer srv.Close()
	get := func(accept, encoding string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		req.Header.Set("Accept", accept)
		req.Header.Set("Accept-Encoding", encoding)
		resp, err := http.DefaultTransport.RoundTrip(req) // no transparent gunzip
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body io.Reader = resp.Body
		if resp.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %v %s", resp.StatusCode, err, b)
		}
		return resp, string(b)
	}

	resp, body := get("", "gzip")
	if resp.Header.Get("Content-Encoding") != "gzip" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain; version=0.0.4") ||
		!strings.Contains(body, "app_things_total 2") || strings.Contains(body, "app_broken") {
		t.Errorf("text: %v\n%s", resp.Header, body)
	}
	if !strings.Contains(log.String(), "app_broken") {
		t.Errorf("the failed family was not logged: %q", log.String())
	}

	// A scraper that prefers OpenMetrics gets the text format (see
	// Handler); one that asks for protobuf gets it.
	for _, accept := range []string{"application/openmetrics-text;version=1.0.0;q=0.9,text/plain;version=0.0.4;q=0.5",
		"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"} {
		resp, body = get(accept, "identity")
		if resp.Header.Get("Content-Encoding") != "" || strings.Contains(resp.Header.Get("Content-Type"), "openmetrics") {
			t.Errorf("%s: %v", accept, resp.Header)
		}
		dec := expfmt.NewDecoder(strings.NewReader(body), expfmt.ResponseFormat(resp.Header))
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err != nil || mf.GetName() != "app_things_total" || mf.GetMetric()[0].GetCounter().GetValue() != 2 {
			t.Errorf("%s: %v %v", accept, err, mf.String())
		}
	}
}

type logLines struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logLines) Println(v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, x := range v {
		if err, ok := x.(error); ok {
			l.b.WriteString(err.Error())
		}
	}
	l.b.WriteByte('\n')
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestCounterAllocs(t *testing.T) {
	r := NewRegistry()
	c := r.Counter("c_total", "c")
	g := r.Gauge("g", "g")
	v := r.CounterVec("v_total", "v", "result").WithLabelValues("ok")
	if a := testing.AllocsPerRun(1000, func() { c.Inc(); c.Add(2); g.Add(1); v.Inc() }); a != 0 {
		t.Fatalf("allocs %v", a)
	}
}

func BenchmarkCounterInc(b *testing.B) {
	c := NewRegistry().Counter("c_total", "c")
	b.ReportAllocs()
	for b.Loop() {
		c.Inc()
	}
}
