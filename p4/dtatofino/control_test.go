package dtatofino

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/rdma-appliance/appliance/collector/dtacollector"
	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/internal/dtamem"
	"github.com/rdma-appliance/appliance/internal/dtawire"
	"github.com/rdma-appliance/appliance/internal/service"
	"github.com/rdma-appliance/appliance/p4/internal/p4test"
	"github.com/rdma-appliance/appliance/verbs/soft"
)

// links numbers the test collectors: ring links, soft RNICs and pools
// have process-wide names.
var links atomic.Int64

// testKey is the secret the test collectors and the translator share.
var testKey = []byte("0123456789abcdef0123456789abcdef")

// liveCollector is a collector (collector/dtacollector) on a soft RNIC at
// one end of a ring link, serving its exchange on loopback; port is the
// link's other end, the switch's port towards it.
type liveCollector struct {
	c    *dtacollector.Collector
	addr string
	port dpdk.Port
	pool *dpdk.Pool
	stop func()
}

// startCollector runs a collector of yml (with the test key) whose
// exchange listens on addr ("127.0.0.1:0" for any port).
func startCollector(t *testing.T, addr, yml string) *liveCollector {
	t.Helper()
	s, err := dtacollector.DecodeSpec("collector.yml", []byte("name: c0\nexchange: 127.0.0.1:0\n"+yml))
	if err != nil {
		t.Fatal(err)
	}
	s.Key = testKey
	id := links.Add(1)
	l := ring.NewLink(fmt.Sprintf("dtatof%d", id), ring.Config{RingSize: 4096})
	dev, err := soft.NewDevice(fmt.Sprintf("dtatofc%d", id), l.B(), soft.Config{GIDs: []netip.Addr{netip.MustParseAddr("10.9.0.1")}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := dev.Start(ctx); err != nil {
		t.Fatal(err)
	}
	pool, err := dpdk.NewPool(fmt.Sprintf("dtatofp%d", id), 1024, 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := dtacollector.New(s, dev, dtacollector.Options{Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	// A collector that replaces a stopped one listens where it did; the
	// stopped one's socket may take a moment to go.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if ln, err = net.Listen("tcp", addr); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- c.Serve(ctx, ln) }()
	lc := &liveCollector{c: c, addr: ln.Addr().String(), port: l.A(), pool: pool}
	done := false
	lc.stop = func() {
		if done {
			return
		}
		done = true
		if err := c.Close(); err != nil {
			t.Error(err)
		}
		if err := <-served; err != nil && !errors.Is(err, dtacollector.ErrClosed) {
			t.Errorf("Serve: %v", err)
		}
		dev.Close()
		cancel()
		l.A().Close()
		l.B().Close()
		pool.Close()
	}
	t.Cleanup(lc.stop)
	return lc
}

const collectorYAML = `key-write: {slots: 1024}
key-increment: {slots: 256}
append:
  lists: [{id: 1, entries: 64}]
`

// tofinoSpec is a translator with one collector, c0, at exchange, behind
// port p1 (dev port 4, pipe 0), authenticating with the test key.
func tofinoSpec(t *testing.T, exchange string, mac header.MAC) Spec {
	t.Helper()
	key := filepath.Join(t.TempDir(), "dta.key")
	if err := os.WriteFile(key, testKey, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := DecodeSpec("tofino.yml", fmt.Appendf(nil, `name: tofino-test
ip: 10.9.0.100
mac: "02:00:00:00:00:64"
qpn: 0x321
interval: 100ms
reconnect-min: 10ms
reconnect-max: 50ms
ports:
  - {name: p1, dev-port: 4, speed: 100G, fec: rs, mac: %q}
collectors:
  - {name: c0, exchange: %s, key-file: %s, port: p1, redundancy: 2}
`, mac.String(), exchange, key))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestConnectToCollector sets the translator up with a live collector
// through the exchange, and holds the script's collector entries to the
// collector: its QP, the PSN its QP expects, its address and MAC, the
// rkeys and addresses of its memory. The packets the model of
// translator.p4's egress makes from the script (icrc_test.go's, ICRC
// included) land in the collector's memory: a Key-Write read back from
// both slots, a Key-Increment counted, an Append batch read by the
// pollers.
func TestConnectToCollector(t *testing.T) {
	coll := startCollector(t, "127.0.0.1:0", collectorYAML)
	swMAC := header.MAC(coll.port.Info().MAC)
	c := &Controller{Spec: tofinoSpec(t, coll.addr, swMAC)}
	ctx := context.Background()
	s, err := c.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conns := coll.c.Connections()
	if len(conns) != 1 {
		t.Fatalf("the collector has %d connections", len(conns))
	}
	cs, got := conns[0], s.Translator.Collectors[0]
	if cs.Translator != "tofino-test" || cs.IP != "10.9.0.100" || cs.MAC != swMAC.String() || cs.TranslatorQPN != 0x321 {
		t.Fatalf("the collector's connection %+v", cs)
	}
	if got.QPN != cs.QPN || got.PSN != cs.FirstPSN || got.IP != netip.MustParseAddr("10.9.0.1") || got.MAC.IsZero() {
		t.Fatalf("collector %+v, the collector's connection %+v", got, cs)
	}
	regs := coll.c.Regions()
	if got.KeyWrite == nil || got.KeyWrite.Addr != regs.KeyWrite.Addr || got.KeyWrite.Slots != 1024 ||
		got.KeyIncrement == nil || got.KeyIncrement.Addr != regs.KeyIncrement.Addr || got.Lists[1].Addr != regs.Lists[1].Addr {
		t.Fatalf("regions %+v, the collector's %+v", got, regs)
	}
	script, err := s.Translator.Script()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		fmt.Sprintf("dst_addr=ip('10.9.0.1'), dscp=0, udp_src_port=%d, dst_qpn=%#x,", s.Translator.udpSrcPort(&got), cs.QPN),
		fmt.Sprintf("rdma_conn.add_with_set_conn(collector=0, dmac=mac('%s'), smac=mac('%s')", got.MAC, swMAC),
		fmt.Sprintf("psn.mod(REGISTER_INDEX=0, f1=%d)", cs.FirstPSN),
		fmt.Sprintf("key_write_region.add_with_set_region(collector=0, base_hi=%#x, base_lo=%#x, rkey=%#x, slot_mask=0x3ff)",
			got.KeyWrite.Addr>>32, uint32(got.KeyWrite.Addr), got.KeyWrite.RKey),
	} {
		if !strings.Contains(script, want) {
			t.Errorf("the script has no %q", want)
		}
	}

	m := newPipeModel(t, script)
	var pkts [][]byte
	data := func(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
	pkts = append(pkts, m.report(t, 0, &dtawire.Report{Opcode: dtawire.OpKeyWrite, Redundancy: 2, Key: 7, Data: data(700)})...)
	for range 2 {
		pkts = append(pkts, m.report(t, 0, &dtawire.Report{Opcode: dtawire.OpKeyIncrement, Redundancy: 2, Key: 3, Counter: 5})...)
	}
	for i := range uint32(DefaultAppendBatch) {
		pkts = append(pkts, m.report(t, 0, &dtawire.Report{Opcode: dtawire.OpAppend, ListID: 1, Data: data(1000 + i)})...)
	}
	if len(pkts) != 2+4+1 {
		t.Fatalf("the model made %d packets, want 7", len(pkts))
	}
	for _, f := range pkts {
		p := coll.pool.Get()
		p.CopyFrom(f)
		if coll.port.TxBurst(0, []*dpdk.Packet{p}) != 1 {
			t.Fatal("the link is full")
		}
	}
	waitFor(t, "the collector's memory", func() bool {
		drain(coll.port)
		kw, err := coll.c.KeyWrite(7, 2)
		ki, _ := coll.c.KeyIncrement(3)
		l, _ := coll.c.List(1, 0)
		return err == nil && kw.Value == 700 && kw.Agreeing == 2 && ki.Count == 10 && l.Read == DefaultAppendBatch
	})
	s.Close()
	waitFor(t, "the collector to drop the connection", func() bool { return len(coll.c.Connections()) == 0 })
}

// TestConnectRefused: an offer translator.p4 cannot serve fails with
// ErrOffer and the reason, and leaves no connection behind (one that fits
// connects); a collector that does not hold the key is refused.
func TestConnectRefused(t *testing.T) {
	for _, tc := range []struct{ name, yml, says string }{
		{"data width", "key-write: {slots: 1024, data-width: 8}\n", "collectors[0].key_write.data_width: 8: translator.p4 writes 4-byte data"},
		{"batch", "append:\n  batch: 2\n  lists: [{id: 1, entries: 64}]\n", "the collector reads Append batches of 2 entries, translator.p4 is built with 4"},
		{"postcard hops", "postcards: {slots: 256, hops: 3}\n", "collectors[0].postcards.hops: 3: translator.p4's records have 5 hops"},
		// The smallest path MTU takes translator.p4's largest WRITE (an
		// Append batch of 32 bytes): this one fits.
		{"smallest mtu", "mtu: 256\nappend:\n  batch: 4\n  lists: [{id: 1, entries: 64}]\npostcards: {slots: 256, hops: 5}\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			coll := startCollector(t, "127.0.0.1:0", tc.yml)
			c := &Controller{Spec: tofinoSpec(t, coll.addr, header.MAC{2, 0, 0, 0, 0, 1})}
			s, err := c.Connect(context.Background())
			if tc.says == "" { // fits
				if err != nil {
					t.Fatal(err)
				}
				s.Close()
				return
			}
			if !errors.Is(err, ErrOffer) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("%v, want ErrOffer saying %q", err, tc.says)
			}
			waitFor(t, "the collector to drop the connection", func() bool { return len(coll.c.Connections()) == 0 })
		})
	}
	coll := startCollector(t, "127.0.0.1:0", collectorYAML)
	spec := tofinoSpec(t, coll.addr, header.MAC{2, 0, 0, 0, 0, 1})
	spec.Collectors[0].Key = []byte("another key, not the collector's")
	if _, err := (&Controller{Spec: spec}).Connect(context.Background()); err == nil || !strings.Contains(err.Error(), "collector c0") {
		t.Fatalf("a collector without the translator's key: %v", err)
	}
}

// TestAcceptOffer: what a collector's offer may say that a live collector
// does not (its address, MTU, MAC, QPN), checked before the switch's
// tables take it.
func TestAcceptOffer(t *testing.T) {
	s := tofinoSpec(t, "127.0.0.1:40050", header.MAC{2, 0, 0, 0, 0, 1})
	good := dtamem.Offer{Name: "c0", IP: netip.MustParseAddr("10.9.0.1"), MAC: "02:00:00:00:00:09", QPN: 0x11, MTU: 1024,
		Regions: dtamem.Regions{KeyWrite: &dtamem.KeyWriteRegion{Addr: 0x10000, RKey: 5, Slots: 1024},
			Lists: map[uint32]dtamem.ListRegion{1: {Addr: 0x20000, RKey: 6, Entries: 64}}}}
	tr := s.Setup()
	if err := tr.accept(0, &good, 77); err != nil {
		t.Fatal(err)
	}
	if err := tr.Validate(); err != nil || tr.Collectors[0].PSN != 77 || tr.Collectors[0].QPN != 0x11 {
		t.Fatalf("%v %+v", err, tr.Collectors[0])
	}
	for _, tc := range []struct {
		name string
		edit func(o *dtamem.Offer)
		says string // from accept, or from Validate when it passes
	}{
		{"ipv6", func(o *dtamem.Offer) { o.IP = netip.MustParseAddr("fd00::1") }, "address fd00::1: translator.p4 writes to IPv4 unicast hosts"},
		{"multicast", func(o *dtamem.Offer) { o.IP = netip.MustParseAddr("224.0.0.9") }, "address 224.0.0.9"},
		{"broadcast", func(o *dtamem.Offer) { o.IP = netip.MustParseAddr("255.255.255.255") }, "address 255.255.255.255"},
		{"own address", func(o *dtamem.Offer) { o.IP = netip.MustParseAddr("10.9.0.100") }, "collectors[0].ip: 10.9.0.100 is the translator's own address"},
		{"mac", func(o *dtamem.Offer) { o.MAC = "01:00:5e:00:00:01" }, "collectors[0].mac: 01:00:5e:00:00:01: the collector's RNIC needs a unicast MAC"},
		{"bad mac", func(o *dtamem.Offer) { o.MAC = "nope" }, "dta: offer from c0: header: invalid MAC address"},
		{"qpn", func(o *dtamem.Offer) { o.QPN = 1 }, "collectors[0].qpn: 0x1: a 24-bit QPN from 2"},
		{"mtu", func(o *dtamem.Offer) { o.MTU = 16 }, "its regions need WRITEs of 32 bytes, over its path MTU 16"},
		{"batch", func(o *dtamem.Offer) { o.Regions.Batch = 8 }, "the collector reads Append batches of 8 entries, translator.p4 is built with 4"},
		{"window", func(o *dtamem.Offer) { o.Regions.KeyWrite.Addr = 0x7f00fffff000 },
			"collectors[0].key_write.slots: 0x7f00fffff000 + 1024 x 8 B crosses a 4 GiB boundary"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := good
			kw := *good.Regions.KeyWrite
			o.Regions.KeyWrite = &kw
			tc.edit(&o)
			tr := s.Setup()
			err := tr.accept(0, &o, 77)
			if err == nil {
				err = tr.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("%v, want %q", err, tc.says)
			}
		})
	}
}

// TestControllerRun runs the control plane against a live collector and a
// stand-in SDE whose run_bfshell.sh runs the scripts against the mock
// bfrt_python: the setup script is loaded, the counters are read every
// interval and served on /v1/status and /metrics (parsed as Prometheus
// does); when the collector restarts, the connection is set up again with
// the new collector and the script loaded again; the stop closes the
// connection.
func TestControllerRun(t *testing.T) {
	sde := p4test.MockSDE(t, bfrtAnswers)
	coll := startCollector(t, "127.0.0.1:0", collectorYAML)
	c := &Controller{Spec: tofinoSpec(t, coll.addr, header.MAC(coll.port.Info().MAC)), Bfshell: DefaultBfshell(sde)}
	svc := service.New("dta-tofino", "127.0.0.1:0", nil)
	c.Register(svc)
	srv := httptest.NewServer(svc.Handler())
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()

	waitFor(t, "the load and a counter read", func() bool { st := c.Status(); return st.State == "loaded" && st.CounterReads > 0 })
	setup, err := os.ReadFile(filepath.Join(sde, "scripts", "1.py"))
	if err != nil {
		t.Fatal(err)
	}
	qpn := coll.c.Connections()[0].QPN
	if !strings.Contains(string(setup), fmt.Sprintf("dst_qpn=%#x, icrc", qpn)) || !strings.Contains(string(setup), "dta: translator loaded") {
		t.Fatalf("the setup script bfshell ran is not the collector's (qpn %#x):\n%.2000s", qpn, setup)
	}
	if b, err := os.ReadFile(filepath.Join(sde, "scripts", "2.py")); err != nil || !strings.Contains(string(b), CounterPrefix) {
		t.Fatalf("the second script is not the counter script: %v", err)
	}
	var st Status
	if err := service.NewClient(srv.URL).Do(ctx, "GET", "/v1/status", nil, &st); err != nil {
		t.Fatal(err)
	}
	if st.Loads != 1 || len(st.Collectors) != 1 || !st.Collectors[0].Up || st.Collectors[0].QPN != qpn || st.Counters == nil ||
		st.Counters.Collectors[0].RDMAPackets != 1000 || st.Counters.Collectors[0].PSN != 77 || st.Counters.Reports[dtawire.OpAppend] != 1002 {
		t.Fatalf("status %+v", st)
	}
	fams := scrape(t, srv.URL)
	for name, want := range map[string]float64{
		`appliance_dta_tofino_loaded`:                                   1,
		`appliance_dta_tofino_loads_total`:                              1,
		`appliance_dta_tofino_rdma_packets_total{collector="c0"}`:       1000,
		`appliance_dta_tofino_rdma_bytes_total{collector="c0"}`:         80000,
		`appliance_dta_tofino_psn_resyncs_total{collector="c0"}`:        1000,
		`appliance_dta_tofino_reports_total{opcode="append"}`:           1002,
		`appliance_dta_tofino_reports_dropped_total{reason="nack"}`:     1001,
		`appliance_dta_tofino_postcards_total{outcome="evicted"}`:       1000,
		`appliance_dta_tofino_collector_up{collector="c0"}`:             1,
		`appliance_dta_tofino_collector_connects_total{collector="c0"}`: 1,
		`appliance_dta_tofino_counter_read_errors_total`:                0,
	} {
		if v, ok := fams[name]; !ok || v != want {
			t.Errorf("%s = %v (%v), want %v", name, v, ok, want)
		}
	}

	// The collector restarts where it listened: a new QP, new regions;
	// the translator connects again and loads the script again.
	addr := coll.addr
	coll.stop()
	coll = startCollector(t, addr, collectorYAML)
	waitFor(t, "the second load", func() bool {
		st := c.Status()
		conns := coll.c.Connections()
		return st.State == "loaded" && st.Loads == 2 && len(conns) == 1 && st.Collectors[0].QPN == conns[0].QPN
	})
	if st := c.Status(); st.Collectors[0].Connects != 2 {
		t.Fatalf("status after the restart %+v", st)
	}

	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if st := c.Status(); st.State != "stopped" || st.Collectors[0].Up {
		t.Fatalf("status after the stop %+v", st)
	}
	waitFor(t, "the collector to drop the connection", func() bool { return len(coll.c.Connections()) == 0 })
}

// TestControllerBfshellFails: a switch whose bfshell fails is tried again,
// with the reason in the status and /healthz failing; an offer that does
// not fit ends Run with ErrOffer.
func TestControllerBfshellFails(t *testing.T) {
	coll := startCollector(t, "127.0.0.1:0", collectorYAML)
	c := &Controller{Spec: tofinoSpec(t, coll.addr, header.MAC{2, 0, 0, 0, 0, 1}), Bfshell: DefaultBfshell(t.TempDir())}
	svc := service.New("dta-tofino", "127.0.0.1:0", nil)
	c.Register(svc)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()
	waitFor(t, "two attempts", func() bool {
		st := c.Status()
		return st.Collectors[0].Connects >= 2 && strings.Contains(st.LastError, "bfshell: setup script") &&
			strings.Contains(st.LastError, "run_bfshell.sh")
	})
	if h := svc.CheckHealth(); h.Status == "ok" || c.Status().Loads != 0 {
		t.Fatalf("health %+v with bfshell failing", h)
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}

	bad := startCollector(t, "127.0.0.1:0", "key-write: {slots: 1024, data-width: 8}\n")
	c = &Controller{Spec: tofinoSpec(t, bad.addr, header.MAC{2, 0, 0, 0, 0, 1})}
	if err := c.Run(context.Background()); !errors.Is(err, ErrOffer) {
		t.Fatalf("Run with an offer that does not fit: %v", err)
	}
}

// scrape reads /metrics as Prometheus's text parser does and returns
// each sample by name{labels}.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for name, mf := range fams {
		for _, m := range mf.GetMetric() {
			key := name
			if ls := m.GetLabel(); len(ls) > 0 {
				var parts []string
				for _, l := range ls {
					parts = append(parts, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
				}
				key += "{" + strings.Join(parts, ",") + "}"
			}
			switch {
			case m.Counter != nil:
				out[key] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[key] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// drain frees what the collector sent the switch (its ACKs).
func drain(p dpdk.Port) {
	var burst [32]*dpdk.Packet
	for n := p.RxBurst(0, burst[:]); n > 0; n = p.RxBurst(0, burst[:]) {
		dpdk.FreeBulk(burst[:n])
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
