package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/rdma-appliance/appliance/appliance/dashboard"
	"github.com/rdma-appliance/appliance/appliance/lab"
	"github.com/rdma-appliance/appliance/internal/service"
	"github.com/rdma-appliance/appliance/p4/dtatofino"
)

// oddTargets are request targets a client (a scanner, a typo, an attack)
// may send any service. None may end up in a label of /metrics: a label
// value that Prometheus cannot parse makes the whole scrape fail, and one
// series per path is a cardinality bomb.
var oddTargets = []string{
	"/a%09b",                          // a tab once decoded
	"/%22x%22",                        // quotes
	"/\xff",                           // a raw byte that is not UTF-8
	"/%ff%fe",                         // the same, escaped
	"/" + strings.Repeat("x/", 30000), // 60 KB of path
	"/metrics?x=%0a",                  // a real route with a newline in the query
	"/x%0ay",                          // a newline in the path
}

// TestMetricsExposition starts every service built on internal/service as
// the CLI does (ring ports, loopback HTTP), sends each the odd requests
// above, then scrapes /metrics as Prometheus would: the text format must
// parse whole (and so must the answer to a scraper that prefers OpenMetrics
// or protobuf, in the format answered), every family must be the
// appliance's or the Go runtime's or the process's, the appliance's
// families must follow Prometheus's naming conventions, and the odd
// requests must be counted under path="other", not under their own paths.
func TestMetricsExposition(t *testing.T) {
	addrs := startEveryService(t)

	// Every service.New in the source is among the services started: a
	// new service is scraped here from its first commit.
	started := map[string]bool{}
	for name := range addrs {
		started[name] = true
	}
	for _, name := range serviceNamesInSource(t) {
		if !started[name] {
			t.Errorf("service %q (service.New in the source) is not started by this test", name)
		}
	}

	names := make([]string, 0, len(addrs))
	for name := range addrs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) { checkExposition(t, addrs[name]) })
	}
}

func checkExposition(t *testing.T, addr string) {
	for _, target := range oddTargets {
		if err := rawGet(addr, target); err != nil {
			t.Fatalf("GET %.40q: %v", target, err)
		}
	}

	// The text format, as Prometheus asks for it without OpenMetrics.
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/metrics", nil)
	req.Header.Set("Accept", "text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
	body, hdr := fetch(t, req)
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("the text exposition does not parse: %v\n%s", err, excerpt(body, err))
	}
	checkFamilies(t, fams)
	if !hdr.gzipped {
		t.Errorf("/metrics was not gzip-compressed for a client that accepts gzip")
	}

	// What a Prometheus server may ask for instead: OpenMetrics first, or
	// protobuf; decoded in the format the service answered in.
	for _, accept := range []string{
		"application/openmetrics-text;version=1.0.0;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
		"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.9,text/plain;q=0.5",
	} {
		req, _ = http.NewRequest(http.MethodGet, "http://"+addr+"/metrics", nil)
		req.Header.Set("Accept", accept)
		body, hdr = fetch(t, req)
		format := hdr.header.Get("Content-Type")
		dec := expfmt.NewDecoder(strings.NewReader(body), expfmt.ResponseFormat(hdr.header))
		n := 0
		for {
			var mf dto.MetricFamily
			if err := dec.Decode(&mf); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("the %s exposition does not parse: %v\n%s", format, err, excerpt(body, err))
			}
			n++
		}
		if n < len(fams) {
			t.Errorf("the %s exposition has %d families, the text one %d", format, n, len(fams))
		}
	}
}

// checkFamilies holds the names and the labels to the conventions.
func checkFamilies(t *testing.T, fams map[string]*dto.MetricFamily) {
	t.Helper()
	for _, want := range []string{"appliance_up", "appliance_http_requests_total", "go_goroutines", "process_start_time_seconds"} {
		if fams[want] == nil {
			t.Errorf("no family %s", want)
		}
	}
	for name, mf := range fams {
		switch {
		case strings.HasPrefix(name, "appliance_"):
			for _, problem := range namingProblems(name, mf.GetType()) {
				t.Errorf("%s: %s", name, problem)
			}
		case strings.HasPrefix(name, "go_"), strings.HasPrefix(name, "process_"):
			// The client library's own families, named as every
			// Prometheus dashboard expects them.
		default:
			t.Errorf("%s: not prefixed appliance_ (nor go_ or process_)", name)
		}
		if mf.GetHelp() == "" {
			t.Errorf("%s: no help", name)
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if v := l.GetValue(); !utf8.ValidString(v) || len(v) > 200 || strings.ContainsAny(v, "\n\t") {
					t.Errorf("%s{%s=%.60q}: a label value no service should make", name, l.GetName(), v)
				}
			}
		}
	}
	// Requests are counted by route: every odd target is "other", except
	// /metrics?..., which is the /metrics route.
	paths := map[string]float64{}
	for _, m := range fams["appliance_http_requests_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "path" {
				paths[l.GetValue()] += m.GetCounter().GetValue()
			}
		}
	}
	if paths["other"] < float64(len(oddTargets)-1) || paths["/metrics"] < 1 {
		t.Errorf("requests by path: %v, want the odd ones under \"other\" and the scrape under \"/metrics\"", paths)
	}
	for p := range paths {
		if p != "other" && !strings.HasPrefix(p, "/") {
			t.Errorf("path label %.60q is not a route", p)
		}
	}
}

// namingProblems are the ways a family's name breaks Prometheus's naming
// conventions (https://prometheus.io/docs/practices/naming/): a counter
// ends in _total and nothing else does; a time is in seconds, a size in
// bytes, a fraction a _ratio, each named as the base unit.
func namingProblems(name string, typ dto.MetricType) []string {
	var out []string
	words := strings.Split(name, "_")
	has := func(ws ...string) bool {
		return slices.ContainsFunc(words, func(w string) bool { return slices.Contains(ws, w) })
	}
	total := strings.HasSuffix(name, "_total")
	switch {
	case typ == dto.MetricType_COUNTER && !total:
		out = append(out, "a counter not ending in _total")
	case typ != dto.MetricType_COUNTER && total:
		out = append(out, fmt.Sprintf("a %s ending in _total", strings.ToLower(typ.String())))
	}
	base := strings.TrimSuffix(name, "_total")
	if has("percent", "pct", "percentage", "permille", "ms", "us", "ns", "millis", "milliseconds", "microseconds",
		"nanoseconds", "minutes", "hours", "days", "kb", "mb", "gb", "kib", "mib", "gib", "kilobytes", "megabytes", "gigabytes") {
		out = append(out, "a unit other than the base unit (seconds, bytes, ratio)")
	}
	if has("latency", "delay", "duration", "time", "uptime", "elapsed", "age") && !strings.HasSuffix(base, "_seconds") {
		out = append(out, "a time not ending in _seconds")
	}
	if has("size", "memory", "bytes") && !strings.HasSuffix(base, "_bytes") {
		out = append(out, "a size not ending in _bytes")
	}
	if has("rate", "ratio", "fraction", "utilisation", "utilization", "share") && !strings.HasSuffix(base, "_ratio") {
		out = append(out, "a fraction not ending in _ratio")
	}
	return out
}

// startEveryService runs each service of the appliance until the test
// ends, the way its command runs it, and returns their HTTP addresses by
// service name (as /healthz names it).
func startEveryService(t *testing.T) map[string]string {
	t.Helper()
	id := fmt.Sprintf("expo%d", time.Now().UnixNano()%1e6)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var waits []func()
	t.Cleanup(func() {
		cancel()
		for _, w := range waits {
			w()
		}
	})
	file := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	addrs := map[string]string{}
	// start runs a command and waits for its /healthz at addr.
	start := func(addr string, args ...string) {
		t.Helper()
		var errOut lockedBuffer
		done := make(chan int, 1)
		go func() { done <- run(ctx, append([]string{"--log-level", "warn"}, args...), io.Discard, &errOut) }()
		waits = append(waits, func() { <-done })
		c := service.NewClient(addr)
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			// A failing check answers 503, with the document all the same.
			if _, body, err := c.Get(ctx, "/healthz"); err == nil {
				var h service.Health
				if err := json.Unmarshal(body, &h); err != nil || h.Service == "" {
					t.Fatalf("%v: /healthz: %v %s", args, err, body)
				}
				addrs[h.Service] = addr
				return
			}
			select {
			case code := <-done:
				t.Fatalf("%v exited %d: %s", args, code, errOut.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("%v did not come up: %s", args, errOut.String())
			}
		}
	}

	injAddr := freeAddr(t)
	inj := file("inj.yml", fmt.Sprintf(`listen: %s
ports:
  - {name: req, role: traffic, port: "ring:%[2]sr.b", addrs: [10.0.0.254]}
  - {name: resp, role: traffic, port: "ring:%[2]ss.b", addrs: [10.0.1.254]}
  - {name: d0, role: mirror, port: "ring:%[2]sm.a"}
routes:
  - {prefix: 10.0.0.1, port: req, mac: "02:00:00:00:00:01"}
`, injAddr, id))
	start(injAddr, "inject", "run", "-f", inj)
	tofAddr := freeAddr(t)
	start(tofAddr, "inject", "tofino", "-f", inj, "--sde", filepath.Join(dir, "no-sde"), "--listen", tofAddr)
	dumpAddr := freeAddr(t)
	start(dumpAddr, "dump", "--port", "ring:"+id+"m.b", "--listen", dumpAddr, "--dir", dir, "--name", "d0")
	capAddr := freeAddr(t)
	start(capAddr, "capture", "-i", "ring:"+id+"cap.b", "-w", filepath.Join(dir, "cap.pcapng"), "-q", "--listen", capAddr)

	collAddr, exAddr := freeAddr(t), freeAddr(t)
	coll := file("collector.yml", fmt.Sprintf(`name: c0
listen: %s
exchange: %s
key-write: {slots: 1024}
append:
  lists: [{id: 1, entries: 64}]
`, collAddr, exAddr))
	start(collAddr, "dta", "collect", "-f", coll, "--nic", "ring:"+id+"c.b", "--gid", "10.9.0.1")
	trAddr := freeAddr(t)
	tr := file("translator.yml", fmt.Sprintf(`name: t0
listen: %s
port: ring:%sc.a
ip: 10.9.0.100
collectors:
  - {name: c0, exchange: %s}
`, trAddr, id, exAddr))
	start(trAddr, "dta", "translate", "-f", tr)
	// The Tofino translator's control plane on the same collector, with a
	// stand-in bfshell: its per-collector and counter families have series
	// once the script is loaded and the counters read.
	dtaTofAddr := freeAddr(t)
	start(dtaTofAddr, "dta", "tofino", "-f", tofinoFile(t, dir, dtaTofAddr, exAddr, ""), "--sde", fakeSDE(t))
	cpuAddr := freeAddr(t)
	start(cpuAddr, "dta", "switch-cpu", "--port", "ring:"+id+"cpu.a", "--rate", "1000", "--listen", cpuAddr)
	hawkCPUAddr := freeAddr(t)
	hawkProg, _ := hawkeyeCPUProgram(t, dir)
	start(hawkCPUAddr, "hawkeye", "switch-cpu", "-f", hawkProg, "--port", "ring:"+id+"hcpu.a", "--sde", dir, "--out",
		filepath.Join(dir, "hawkeye-reports.jsonl"), "--listen", hawkCPUAddr)

	anAddr := freeAddr(t)
	start(anAddr, "mesh", "analyze", "--serve", anAddr, "--window", "200ms")
	agentAddr := freeAddr(t)
	start(agentAddr, "mesh", "probe", "--nic", "ring:"+id+"h.a", "--gid", "10.9.1.1", "--nic", "ring:"+id+"h.b", "--gid", "10.9.1.2",
		"--listen", agentAddr, "--analyzer", anAddr, "--interval", "20ms")

	// The lab's dashboard, served as `appliance lab --serve` serves it
	// (the stages need not run for its /metrics).
	spec, err := lab.LoadSpec("")
	if err != nil {
		t.Fatal(err)
	}
	l := &lab.Lab{Spec: spec, OutDir: dir}
	ready := make(chan string, 1)
	served := make(chan error, 1)
	go func() {
		served <- l.ServeDashboard(ctx, lab.DashboardOptions{Addr: "127.0.0.1:0", Ready: ready,
			Targets: []dashboard.Target{{Name: "collector", Addr: collAddr}}})
	}()
	waits = append(waits, func() { <-served })
	select {
	case a := <-ready:
		addrs["lab"] = a
	case err := <-served:
		t.Fatal(err)
	}
	// The translators' per-collector families have series once they are
	// connected (their /healthz fails until then); the Tofino one's
	// counter families once it read them.
	for _, a := range []string{trAddr, dtaTofAddr} {
		c := service.NewClient(a)
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if code, _, err := c.Get(ctx, "/healthz"); err == nil && code == http.StatusOK {
				break
			}
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var st dtatofino.Status
		if service.NewClient(dtaTofAddr).Do(ctx, "GET", "/v1/status", nil, &st) == nil && st.Counters != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dta tofino read no counters: %+v", st)
		}
	}
	return addrs
}

// serviceNamesInSource lists the names of the services the source
// creates: the literal first argument of every service.New outside tests.
func serviceNamesInSource(t *testing.T) []string {
	t.Helper()
	re := regexp.MustCompile(`\bservice\.New\("([^"]+)"`)
	var names []string
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && d.Name() != ".." && d.Name() != "." || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllSubmatch(b, -1) {
			names = append(names, string(m[1]))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 5 {
		t.Fatalf("found only %v", names)
	}
	return names
}

// rawGet sends target as the request line holds it, byte for byte (a Go
// client would escape it), and reads the answer whatever its status.
func rawGet(addr, target string) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", target, addr); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

type fetched struct {
	header  http.Header
	gzipped bool
}

// fetch GETs /metrics with Go's client, which asks for gzip and
// decompresses transparently (saying so in Uncompressed).
func fetch(t *testing.T, req *http.Request) (string, fetched) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d %v %s", resp.StatusCode, err, b)
	}
	return string(b), fetched{header: resp.Header, gzipped: resp.Uncompressed}
}

// excerpt shows the lines around the one a parse error names.
func excerpt(body string, err error) string {
	m := regexp.MustCompile(`line (\d+)`).FindStringSubmatch(err.Error())
	if m == nil {
		return ""
	}
	var n int
	fmt.Sscan(m[1], &n)
	lines := strings.Split(body, "\n")
	var b strings.Builder
	for i := max(n-3, 1); i <= min(n+1, len(lines)); i++ {
		fmt.Fprintf(&b, "%5d  %.200s\n", i, lines[i-1])
	}
	return b.String()
}

// TestNamingProblems: the conventions checkFamilies holds the families to,
// on names the appliance had before it followed them.
func TestNamingProblems(t *testing.T) {
	for _, tc := range []struct {
		name string
		typ  dto.MetricType
		bad  bool
	}{
		{"appliance_inject_mirror_sequence", dto.MetricType_COUNTER, true},
		{"appliance_inject_mirror_sequence_total", dto.MetricType_COUNTER, false},
		{"appliance_hostmesh_rnic_drop_rate", dto.MetricType_GAUGE, true},
		{"appliance_hostmesh_rnic_drop_ratio", dto.MetricType_GAUGE, false},
		{"appliance_hostmesh_network_latency_p99", dto.MetricType_GAUGE, true},
		{"appliance_hostmesh_network_latency_p99_seconds", dto.MetricType_GAUGE, false},
		{"appliance_start_time_seconds", dto.MetricType_GAUGE, false},
		{"appliance_dta_collector_memory", dto.MetricType_GAUGE, true},
		{"appliance_dta_collector_memory_bytes", dto.MetricType_GAUGE, false},
		{"appliance_dump_captured_bytes_total", dto.MetricType_COUNTER, false},
		{"appliance_queue_depth_total", dto.MetricType_GAUGE, true},
		{"appliance_poll_busy_percent", dto.MetricType_GAUGE, true},
		{"appliance_probe_rtt_ms", dto.MetricType_GAUGE, true},
	} {
		if got := namingProblems(tc.name, tc.typ); (len(got) > 0) != tc.bad {
			t.Errorf("%s (%s): %v", tc.name, tc.typ, got)
		}
	}
}
