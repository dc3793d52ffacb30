package perftest

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/verbs"
	"github.com/rdma-appliance/appliance/verbs/soft"
)

func TestQPInfoKeyMessage(t *testing.T) {
	q := QPInfo{LID: 0, OutReads: 16, QPN: 0x1a2b3c, PSN: 0xabcdef, RKey: 0xdeadbeef, VAddr: 0x7f0012345000,
		GID: verbs.GIDFromAddr(netip.MustParseAddr("192.168.1.2"))}
	const golden = "0000:0010:1a2b3c:abcdef:deadbeef:00007f0012345000:00:00:00:00:00:00:00:00:00:00:ff:ff:c0:a8:01:02"
	if s := q.String(); s != golden {
		t.Fatalf("key message\n got %s\nwant %s", s, golden)
	}
	back, err := ParseQPInfo(golden)
	if err != nil || back != q {
		t.Fatalf("parse: %+v %v", back, err)
	}
	for _, bad := range []string{"", "0000:0010", strings.Replace(golden, "1a2b3c", "1a2b3c4", 1),
		strings.Replace(golden, "ff:ff", "fff:ff", 1), strings.Replace(golden, "deadbeef", "xyz", 1),
		golden + ":00"} {
		if _, err := ParseQPInfo(bad); err == nil {
			t.Errorf("ParseQPInfo(%q) accepted", bad)
		}
	}
}

func TestParamsValidate(t *testing.T) {
	if err := (Params{}).Defaults().Validate(); err != nil {
		t.Fatal(err)
	}
	p := Params{Verb: Atomic, Latency: true}.Defaults()
	if p.Size != 8 || p.Iters != DefaultLatIters || p.TxDepth != 1 {
		t.Fatalf("atomic latency defaults %+v", p)
	}
	if p := (Params{Verb: Write, Latency: true, Inline: -1}).Defaults(); p.Inline != DefaultLatInl || p.Size != 2 {
		t.Fatalf("write latency defaults %+v", p)
	}
	if n := len(Params{All: true}.Defaults().Sizes()); n != 23 {
		t.Fatalf("-a runs %d sizes, want 23 (2 B to 8 MiB)", n)
	}
	for _, p := range []Params{{Iters: 2}, {Size: -1}, {CQMod: 200, TxDepth: 100}, {MTU: 1500}, {QPs: 1000},
		{Verb: Read, WriteImm: true}, {Latency: true, QPs: 2}, {Verb: Verb(9)}} {
		if err := p.Defaults().Validate(); err == nil {
			t.Errorf("%+v accepted", p)
		}
	}
}

func runLoop(t *testing.T, p Params) (client, server []Result, cout, sout string) {
	t.Helper()
	var cb, sb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, s, err := Loopback(ctx, p, LoopbackOptions{Client: &cb, Server: &sb})
	if err != nil {
		t.Fatalf("%+v: %v\nclient:\n%s\nserver:\n%s", p, err, cb.String(), sb.String())
	}
	return c, s, cb.String(), sb.String()
}

func TestLoopbackBW(t *testing.T) {
	for _, p := range []Params{
		{Verb: Write, Size: 4096, Iters: 2000},
		{Verb: Write, Size: 64, Iters: 3000, QPs: 3, CQMod: 16, TxDepth: 64},
		{Verb: Write, Size: 1000, Iters: 500, WriteImm: true},
		{Verb: Read, Size: 65536, Iters: 200, MTU: 4096},
		{Verb: Send, Size: 300, Iters: 2000, MTU: 256, Inline: 256},
		{Verb: Atomic, Iters: 1000},
		{Verb: Atomic, Atomic: CmpSwap, Iters: 500},
	} {
		c, s, cout, sout := runLoop(t, p)
		if len(c) != 1 {
			t.Fatalf("%+v: client results %+v", p, c)
		}
		r := c[0]
		want := p.Defaults()
		if r.Bytes != want.Size || r.Iters != want.Iters || r.AvgBps <= 0 || r.PeakBps < r.AvgBps || r.MsgRate <= 0 {
			t.Errorf("%+v: client %+v", p, r)
		}
		if got := r.AvgBps / float64(r.Bytes); got < r.MsgRate*0.999 || got > r.MsgRate*1.001 {
			t.Errorf("%+v: bandwidth %v B/s and message rate %v/s disagree", p, r.AvgBps, r.MsgRate)
		}
		if p.usesRecv() != (len(s) == 1) {
			t.Errorf("%+v: server results %+v", p, s)
		}
		if !strings.Contains(cout, "BW peak[MB/sec]") || !strings.Contains(cout, p.Defaults().Title()) ||
			!strings.Contains(cout, "remote address: LID") || !strings.Contains(sout, "local address: LID") {
			t.Errorf("%+v: report\n%s", p, cout)
		}
		t.Logf("%s %d B: %.0f MB/s, %.3f Mpps", p.Defaults().Title(), r.Bytes, BWIn(r.AvgBps, false), r.MsgRate/1e6)
	}
}

func TestLoopbackLatency(t *testing.T) {
	ps := []Params{
		{Verb: Send, Latency: true, Iters: 300, Inline: -1},
		{Verb: Send, Latency: true, Iters: 100, Size: 5000},
		{Verb: Write, Latency: true, Iters: 200, WriteImm: true},
		{Verb: Read, Latency: true, Iters: 300, Size: 4096},
		{Verb: Atomic, Latency: true, Iters: 300},
	}
	if !raceEnabled {
		// Polling memory the RNIC writes is what ib_write_lat does; the
		// race detector rightly calls it a race with the soft RNIC's copy.
		ps = append(ps, Params{Verb: Write, Latency: true, Iters: 300, Size: 64, Inline: -1})
	}
	for _, p := range ps {
		c, s, cout, _ := runLoop(t, p)
		if len(c) != 1 || c[0].Lat == nil {
			t.Fatalf("%+v: client %+v", p, c)
		}
		l := c[0].Lat
		if !(l.Min > 0 && l.Min <= l.Typical && l.Typical <= l.P99 && l.P99 <= l.P999 && l.P999 <= l.Max &&
			l.Min <= l.Avg && l.Avg <= l.Max) {
			t.Errorf("%+v: latency stats out of order %+v", p, l)
		}
		if p.pingPong() != (len(s) == 1) {
			t.Errorf("%+v: server results %+v", p, s)
		}
		if !strings.Contains(cout, "t_typical[usec]") {
			t.Errorf("report\n%s", cout)
		}
		t.Logf("%s %d B: typical %.2f us, p99 %.2f us", p.Defaults().Title(), c[0].Bytes, l.Typical, l.P99)
	}
}

func TestLoopbackAllSizes(t *testing.T) {
	c, _, cout, _ := runLoop(t, Params{Verb: Write, All: true, Iters: 5, MTU: 4096})
	if len(c) != 23 || c[0].Bytes != 2 || c[22].Bytes != 1<<23 {
		t.Fatalf("%d results\n%s", len(c), cout)
	}
	if strings.Count(cout, "BW peak") != 1 {
		t.Errorf("title printed %d times", strings.Count(cout, "BW peak"))
	}
}

func TestLatStats(t *testing.T) {
	s := make([]int64, 1000)
	for i := range s {
		s[i] = int64(1000 * (1000 - i)) // 1..1000 us
	}
	l := latStats(s, 1)
	if l.Min != 1 || l.Max != 1000 || l.Typical != 501 || l.P99 != 990 || l.P999 != 999 || l.Avg != 500.5 {
		t.Fatalf("%+v", l)
	}
	if l := latStats([]int64{4000, 4000}, 2); l.Min != 2 || l.Stdev != 0 {
		t.Fatalf("halved %+v", l)
	}
}

func TestBWFigures(t *testing.T) {
	// Four messages posted at 0 and completing 1 us apart: 4 x 1000 B in
	// 4 us is 1e9 B/s on average; the best run is the same.
	var r Result
	bwFigures(&r, 1000, []int64{0, 0, 0, 0}, []int64{1000, 2000, 3000, 4000})
	if r.AvgBps != 1e9 || r.MsgRate != 1e6 || r.PeakBps != 1e9 {
		t.Fatalf("%+v", r)
	}
	// A slow start: the peak comes from the later messages.
	bwFigures(&r, 1000, []int64{0, 10000, 10000, 10000}, []int64{10000, 10500, 11000, 11500})
	if r.PeakBps <= r.AvgBps || r.PeakBps != 1000/(1500.0/3)*1e9 {
		t.Fatalf("%+v", r)
	}
}

// TestServerRejectsBadHello drives a server by hand: bad parameters and a
// wrong protocol version get an ERR line and an error, never a hang.
func TestServerRejectsBadHello(t *testing.T) {
	for _, hello := range []string{
		`PERFTEST 1 {"verb":"write","size":-5}`,
		`PERFTEST 2 {}`,
		`PERFTEST 1 {"verb":"teleport"}`,
		`HELLO`,
	} {
		a, b := net.Pipe()
		done := make(chan error, 1)
		go func() {
			_, err := RunServer(context.Background(), a, Config{}, nil)
			a.Close()
			done <- err
		}()
		if _, err := b.Write([]byte(hello + "\n")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 512)
		b.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, _ := b.Read(buf)
		if hello != "HELLO" && !strings.HasPrefix(string(buf[:n]), "ERR ") {
			t.Errorf("%s: answer %q", hello, buf[:n])
		}
		b.Close()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("%s: accepted", hello)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: server hangs", hello)
		}
	}
}

// cutPort is a cable that can be pulled: once cut, it drops every frame in
// both directions.
type cutPort struct {
	dpdk.Port
	cut *atomic.Bool
}

func (c cutPort) RxBurst(q int, pkts []*dpdk.Packet) int {
	n := c.Port.RxBurst(q, pkts)
	if c.cut.Load() {
		dpdk.FreeBulk(pkts[:n])
		return 0
	}
	return n
}

func (c cutPort) TxBurst(q int, pkts []*dpdk.Packet) int {
	if c.cut.Load() {
		dpdk.FreeBulk(pkts)
		return len(pkts)
	}
	return c.Port.TxBurst(q, pkts)
}

// TestPeerVanishes pulls the cable in the middle of a SEND test: the
// client's QP runs out of retries and both sides end with errors (the
// server because the client tells it), never a hang.
func TestPeerVanishes(t *testing.T) {
	var cut atomic.Bool
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	time.AfterFunc(300*time.Millisecond, func() { cut.Store(true) })
	start := time.Now()
	_, _, err := Loopback(ctx, Params{Verb: Send, Iters: 1 << 24, Size: 64}, LoopbackOptions{
		Capture: func(side int, p dpdk.Port) dpdk.Port {
			if side == 0 {
				return cutPort{Port: p, cut: &cut}
			}
			return p
		}})
	if err == nil || !strings.Contains(err.Error(), verbs.WCRetryExcErr.String()) {
		t.Fatalf("error %v, want the client's retry-exceeded completion", err)
	}
	t.Logf("after %v: %v", time.Since(start).Round(time.Millisecond), err)
}

// TestServerCancelled stops the server's context mid-run: the client learns
// it from the exchange and stops too.
func TestServerCancelled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var once atomic.Bool
	_, _, err := Loopback(ctx, Params{Verb: Write, Iters: 1 << 24, Size: 64}, LoopbackOptions{
		Devices: func(server, client *soft.Device) {
			if once.CompareAndSwap(false, true) {
				time.AfterFunc(200*time.Millisecond, cancel)
			}
		}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context canceled", err)
	}
}
