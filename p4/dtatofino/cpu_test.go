package dtatofino

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/internal/dtawire"
	"github.com/rdma-appliance/appliance/internal/service"
	"github.com/rdma-appliance/appliance/translator/dtatranslator"
)

// cpuRig is a CPUAgent on one end of a ring link; the test plays the
// switch's pipeline on the other end, on a virtual clock.
type cpuRig struct {
	t     *testing.T
	pool  *dpdk.Pool
	sw    dpdk.Port // the pipeline's side of the CPU's port
	agent *CPUAgent
	now   int64
}

func newCPURig(t *testing.T, rate uint64, burst, depth int) *cpuRig {
	t.Helper()
	l := ring.NewLink(t.Name(), ring.Config{RingSize: 4096})
	t.Cleanup(func() { l.A().Close(); l.B().Close() })
	pool, err := dpdk.NewPool(t.Name(), 8192, 0)
	if err != nil {
		t.Fatal(err)
	}
	r := &cpuRig{t: t, pool: pool, sw: l.B(), now: 1e9}
	r.agent, err = NewCPUAgent(CPUAgentConfig{Port: l.A(), Rate: rate, Burst: burst, Depth: depth, Now: func() int64 { return r.now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.agent.Close)
	return r
}

// reportFrame is a high-priority Key-Write report of key, as a reporter
// sends it to the translator.
func reportFrame(t testing.TB, key uint32) []byte {
	t.Helper()
	var payload [64]byte
	r := dtawire.Report{Opcode: dtawire.OpKeyWrite, Redundancy: 1, Key: key, Data: be32(nil, key^0xdeadbeef),
		Retransmittable: true, Seq: uint8(key)}
	n, err := dtawire.Format{}.Encode(payload[:], &r)
	if err != nil {
		t.Fatal(err)
	}
	frame := make([]byte, 128)
	m, err := dtatranslator.WriteUDP4(frame, header.MAC{2, 0, 0, 0, 0, 1}, header.MAC{2, 0, 0, 0, 0, 2},
		[4]byte{10, 0, 0, 1}, [4]byte{10, 0, 0, 2}, dtawire.GeneratorPort, dtawire.ReportPort, 46, payload[:n])
	if err != nil {
		t.Fatal(err)
	}
	return frame[:m]
}

// toCPU sends frames to the agent as the pipeline does.
func (r *cpuRig) toCPU(frames ...[]byte) {
	r.t.Helper()
	for _, f := range frames {
		p := r.pool.Get()
		if p == nil || p.CopyFrom(f) != len(f) {
			r.t.Fatal("no packet buffer")
		}
		if r.sw.TxBurst(0, []*dpdk.Packet{p}) != 1 {
			r.t.Fatal("the ring refused a frame")
		}
	}
}

// fromCPU returns the keys of the reports the agent sent back, in order.
func (r *cpuRig) fromCPU() []uint32 {
	var keys []uint32
	bufs := make([]*dpdk.Packet, 64)
	for {
		n := r.sw.RxBurst(0, bufs)
		for _, p := range bufs[:n] {
			var h header.Parsed
			var rep dtawire.Report
			d := p.Data()
			if header.Decode(d, &h) != nil || (dtawire.Format{}).Parse(d[h.PayloadOff:h.PayloadOff+h.PayloadLen], &rep) != nil {
				r.t.Fatalf("the agent sent back a frame that is not a report: % x", d)
			}
			keys = append(keys, rep.Key)
			p.Free()
		}
		if n < len(bufs) {
			return keys
		}
	}
}

// TestCPUAgentPaces: the agent sends the reports back in the order they
// came, never faster than its rate allows (a burst of 32, then the rate),
// and counts and drops frames that are not reports.
func TestCPUAgentPaces(t *testing.T) {
	const rate = 10000 // 10 a millisecond
	r := newCPURig(t, rate, 0, 0)
	var frames [][]byte
	for k := range uint32(200) {
		frames = append(frames, reportFrame(t, k))
	}
	r.toCPU(frames...)
	notReport := append([]byte(nil), frames[0]...)
	binary.BigEndian.PutUint16(notReport[header.EthernetHeaderLen+header.IPv4MinHeaderLen+2:], 4791)
	r.toCPU(notReport, []byte{1, 2, 3})
	var got []uint32
	start := r.now
	for step := 0; len(got) < 200 && step < 1000; step++ {
		for r.agent.Poll() {
		}
		got = append(got, r.fromCPU()...)
		// Never more than the first burst and what the rate refilled.
		if allowed := 32 + (r.now-start)*rate/1e9; int64(len(got)) > allowed {
			t.Fatalf("%d reports back after %d us: at most %d", len(got), (r.now-start)/1000, allowed)
		}
		r.now += 100_000
	}
	for i, k := range got {
		if k != uint32(i) {
			t.Fatalf("report %d came back as key %d", i, k)
		}
	}
	st := r.agent.Stats()
	if len(got) != 200 || st.Received != 200 || st.Resent != 200 || st.Queued != 0 || st.Malformed != 2 || st.Overflow != 0 {
		t.Fatalf("%d back, stats %+v", len(got), st)
	}
	if took := (r.now - start) / 1e6; took < (200-32)/10 {
		t.Fatalf("200 reports back in %d ms at 10 a millisecond", took)
	}
}

// TestCPUAgentOverflow: reports beyond Depth are counted and dropped, the
// rest kept; Close counts what was still queued.
func TestCPUAgentOverflow(t *testing.T) {
	r := newCPURig(t, 1, 5, 4)
	for k := range uint32(15) {
		r.toCPU(reportFrame(t, k))
	}
	for r.agent.Poll() {
	}
	// Polls of 5: the first burst's tokens (5) send 4 and then 1, the
	// queue of 4 fills, and the rest (6) are lost.
	back := r.fromCPU()
	st := r.agent.Stats()
	if len(back) != 5 || st.Received != 15 || st.Overflow != 6 || st.Resent != 5 || st.Queued != 4 {
		t.Fatalf("%d back, stats %+v", len(back), st)
	}
	r.agent.Close()
	if st := r.agent.Stats(); st.Queued != 0 || st.Discarded != 4 {
		t.Fatalf("after Close: %+v", st)
	}
}

// TestCPUAgentLoop runs the agent against the model of translator.p4's
// flow control from the script the control plane writes: high-priority
// reports arrive at twice a collector's meter rate for 50 ms; those over
// the meter go to the CPU's port, and the agent, at half the meter's rate,
// sends them back in until the meter lets each through. Every report is
// translated once and none is lost: DTA's promise for high priority,
// kept by the switch and its CPU.
func TestCPUAgentLoop(t *testing.T) {
	tr, meter := meteredModel(t)
	f := tr.FlowControl
	r := newCPURig(t, f.Rate/2, 0, 0)
	const coll = 0
	gap := int64(1e9 / (2 * f.Rate))
	end := r.now + 50e6
	translated := map[uint32]int{}
	toCPU, sent := 0, 0
	next := r.now
	var key uint32
	for step := 0; step < 1_000_000 && (r.now < end || len(translated) < sent); step++ {
		for ; r.now < end && next <= r.now; next += gap {
			sent++
			key++
			switch v, _ := meter.decide(t, coll, 46, 8, next); v {
			case flowTranslate:
				translated[key]++
			case flowToCPU:
				toCPU++
				r.toCPU(reportFrame(t, key))
			default:
				t.Fatalf("a high-priority report %v", v)
			}
		}
		r.agent.Poll()
		for _, k := range r.fromCPU() {
			v, resent := meter.decide(t, coll, 0, f.CPUPort, r.now)
			if !resent {
				t.Fatal("the model does not take the CPU's port's reports for resends")
			}
			switch v {
			case flowTranslate:
				translated[k]++
			case flowToCPU:
				r.toCPU(reportFrame(t, k))
			default:
				t.Fatalf("a resend %v", v)
			}
		}
		r.now += 20_000
	}
	for k := uint32(1); k <= key; k++ {
		if translated[k] != 1 {
			t.Fatalf("report %d translated %d times", k, translated[k])
		}
	}
	st := r.agent.Stats()
	if toCPU == 0 || st.Overflow != 0 || st.Malformed != 0 || st.Queued != 0 {
		t.Fatalf("%d reports, %d to the CPU, agent %+v", sent, toCPU, st)
	}
	t.Logf("%d reports at twice the meter's %d/s: %d went to the CPU, %d resends, all translated once", sent, f.Rate,
		toCPU, st.Resent)
}

func TestCPUAgentConfig(t *testing.T) {
	l := ring.NewLink(t.Name(), ring.Config{})
	defer l.A().Close()
	defer l.B().Close()
	for _, c := range []CPUAgentConfig{
		{},
		{Port: l.A(), Rate: 0},
		{Port: l.A(), Rate: 1, Queue: 1},
		{Port: l.A(), Rate: 1, Burst: 2000},
		{Port: l.A(), Rate: 1, Depth: -1},
		{Port: l.A(), Rate: 1, Format: dtawire.Format{DataWidth: 6}},
	} {
		if _, err := NewCPUAgent(c); !errors.Is(err, ErrCPUAgent) {
			t.Errorf("%+v: %v", c, err)
		}
	}
}

// BenchmarkCPUAgent is the agent's whole path per report: a burst of 32
// reports from the pipeline's side of a ring link, taken, checked, queued
// and sent back (at a rate that never holds them back), then drained.
func BenchmarkCPUAgent(b *testing.B) {
	l := ring.NewLink(b.Name(), ring.Config{RingSize: 1024})
	defer l.A().Close()
	defer l.B().Close()
	pool, err := dpdk.NewPool(b.Name(), 1024, 0)
	if err != nil {
		b.Fatal(err)
	}
	var now int64
	a, err := NewCPUAgent(CPUAgentConfig{Port: l.A(), Rate: 1 << 40, Now: func() int64 { now += 1e6; return now }})
	if err != nil {
		b.Fatal(err)
	}
	frame := reportFrame(b, 7)
	burst := make([]*dpdk.Packet, 32)
	back := make([]*dpdk.Packet, 32)
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; done += len(burst) {
		n := pool.GetBulk(burst)
		for _, p := range burst[:n] {
			p.CopyFrom(frame)
		}
		if l.B().TxBurst(0, burst[:n]) != n {
			b.Fatal("ring full")
		}
		a.Poll()
		k := l.B().RxBurst(0, back)
		if k != n {
			b.Fatalf("%d of %d back", k, n)
		}
		dpdk.FreeBulk(back[:k])
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reports/s")
}

// TestCPUAgentHTTP: the service's status and metrics show the counters.
func TestCPUAgentHTTP(t *testing.T) {
	r := newCPURig(t, 1000, 0, 0)
	r.toCPU(reportFrame(t, 1), reportFrame(t, 2), []byte{1, 2, 3})
	for r.agent.Poll() {
	}
	s := service.New("dta-switch-cpu", "127.0.0.1:0", nil)
	r.agent.Register(s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	<-s.Ready()
	c := service.NewClient(s.Addr())
	var st CPUAgentStats
	if err := c.Do(ctx, "GET", "/v1/status", nil, &st); err != nil || st.Received != 2 || st.Resent != 2 || st.Malformed != 1 {
		t.Fatalf("status: %v %+v", err, st)
	}
	_, body, err := c.Get(ctx, "/metrics")
	for _, want := range []string{"appliance_dta_switch_cpu_received_total 2", "appliance_dta_switch_cpu_malformed_total 1",
		"appliance_dta_switch_cpu_queued 0"} {
		if err != nil || !strings.Contains(string(body), want+"\n") {
			t.Fatalf("metrics lack %q: %v\n%s", want, err, body)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
