package hawkeyeagent

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/bench/perftest"
	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
)

// run runs an agent on cfg and returns what it printed and logged.
func run(t *testing.T, cfg Config) (*Agent, string, string) {
	t.Helper()
	var out, log bytes.Buffer
	cfg.Out, cfg.Log = &out, slog.New(slog.NewTextHandler(&log, nil))
	a := New(cfg)
	if err := a.Run(context.Background()); err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	return a, out.String(), log.String()
}

// TestAgent: RTT lines over the threshold become polling frames on the
// port (read back from the ring's other end) and printed polls; bad lines
// are skipped.
func TestAgent(t *testing.T) {
	const id = "hawkeye-agent-test"
	lk := ring.Named(id, ring.Config{})
	pool, err := dpdk.NewPool(id, 64, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	gw, _ := header.ParseMAC("0c:42:a1:00:00:01")
	lines := `# flow a
10.0.0.1 10.0.0.9 17 49153 4791 5000
10.0.0.1 10.0.0.9 17 49153 4791 14000
10.0.0.1 10.0.0.9 17 49153 4791 16000
10.0.0.1:49153 10.0.0.9:4791 20000
10.0.0.2:50000 10.0.0.9:4791 4000
10.0.0.2:50000 10.0.0.9:4791 13000
garbage line
`
	a, out, log := run(t, Config{Threshold: 300, Interval: time.Hour, FirstEvent: 1, Port: lk.A(), Pool: pool, Dst: gw,
		Input: strings.NewReader(lines)})
	// 16000 > 3 x 5000 polls flow a; 20000 is within the interval;
	// 13000 > 3 x 4000: flow b polls too.
	if n := strings.Count(out, "poll event"); n != 2 || !strings.Contains(out, "poll event 1: 10.0.0.1:49153 -> 10.0.0.9:4791") ||
		!strings.Contains(out, "poll event 2: 10.0.0.2:50000") || !strings.Contains(log, "bad RTT sample") {
		t.Fatalf("out %q log %q", out, log)
	}
	if st := a.Stats(); st != (Stats{Samples: 6, Polls: 2, Sent: 2, Bad: 1}) {
		t.Fatalf("stats %+v", st)
	}
	pkts := make([]*dpdk.Packet, 8)
	n := lk.B().RxBurst(0, pkts)
	if n != 2 {
		t.Fatalf("%d frames on the port", n)
	}
	for i, p := range pkts[:n] {
		h, ok := hawkeyewire.ParseFrame(p.Data())
		if !ok || p.Len() != 60 || h.Type() != hawkeyewire.TypeFlow || h.Event() != uint8(1+i) || h.Victim().Dport != 4791 {
			t.Fatalf("frame %d: %x", i, p.Data())
		}
		if d := p.Data(); d[0] != 0x0c || d[5] != 0x01 {
			t.Fatalf("frame %d to %x", i, d[:6])
		}
		p.Free()
	}
}

// TestAgentHostmesh: Hostmesh batches are samples too (twice the one-way
// latency, a round trip): a probe 5-tuple whose latency jumps is polled;
// timeouts are not samples; a malformed batch is counted and skipped.
func TestAgentHostmesh(t *testing.T) {
	lines := `{"host":"h1","results":[{"host":"h1","src":"rnic0","dst":"rnic1","src_ip":"10.1.0.1","dst_ip":"10.1.1.1","sport":49200,"seq":1,"at_ns":1,"network_ns":3000,"processing_ns":900}]}
{"host":"h1","results":[{"host":"h1","src":"rnic0","dst":"rnic1","src_ip":"10.1.0.1","dst_ip":"10.1.1.1","sport":49200,"seq":2,"at_ns":2,"timeout":true}]}
{"host":"h1","results":[{"host":"h1","src":"rnic0","dst":"rnic1","src_ip":"10.1.0.1","dst_ip":"10.1.1.1","sport":49200,"seq":3,"at_ns":3,"network_ns":12000,"processing_ns":900}]}
{"host":"h1","results":[{"src_ip":"fe80::1","dst_ip":"10.1.1.1","network_ns":5}]}
{"host":
`
	_, out, log := run(t, Config{Threshold: 300, Interval: time.Hour, Input: strings.NewReader(lines)})
	if n := strings.Count(out, "poll event"); n != 1 || !strings.Contains(out, "10.1.0.1:49200 -> 10.1.1.1:4791 proto 17 rtt 24000 ns (base 6000 ns)") {
		t.Fatalf("out %q", out)
	}
	if strings.Count(log, "bad Hostmesh batch") != 2 {
		t.Fatalf("log %q", log)
	}
}

// TestAgentPing: the agent measures RTTs itself with RDMA READs (here
// between two software RNICs in the process): every ping is a sample of
// the QP's 5-tuple, and a flow over the threshold is polled.
func TestAgentPing(t *testing.T) {
	_, out, log := run(t, Config{Threshold: 100, Interval: time.Hour, JSON: true,
		Ping: &Ping{Loopback: true, Params: perftest.PingParams{Count: 50, Interval: time.Millisecond}}})
	var p Poll
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("%v: %q", err, out)
	}
	v := p.Victim
	if IP4(v.Src).String() != "192.168.77.2" || IP4(v.Dst).String() != "192.168.77.1" || v.Dport != 4791 || v.Sport < 0xc000 ||
		p.RTT <= p.Base || p.Base <= 0 {
		t.Fatalf("poll %+v", p)
	}
	if !strings.Contains(log, "samples=50") {
		t.Fatalf("log %q", log)
	}
}
