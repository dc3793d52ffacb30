package hawkeyeagent

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/appliance/host"
	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
)

// TestPFCMonitor: the NIC counts as paused for an interval whose readings
// differ in time paused (mlx5) or, without durations (ice), in PAUSE
// frames received; frames sent (the NIC pausing its switch) do not count;
// a failed reading clears it and starts a new baseline.
func TestPFCMonitor(t *testing.T) {
	var cur host.PFCCounters
	var fail error
	m := &PFCMonitor{Read: func() (host.PFCCounters, error) { return cur, fail }, Interval: time.Millisecond}
	step := func(c host.PFCCounters, want bool) {
		t.Helper()
		cur = c
		m.Sample()
		if m.Paused() != want {
			t.Fatalf("%+v: paused %v, want %v", c, m.Paused(), want)
		}
	}
	step(host.PFCCounters{RxPause: 5, RxPauseNs: 1000, Durations: true}, false) // the baseline
	step(host.PFCCounters{RxPause: 5, RxPauseNs: 1000, Durations: true}, false)
	step(host.PFCCounters{RxPause: 6, RxPauseNs: 9000, Durations: true}, true)
	// A frame with zero quanta (XON) counts as a frame but pauses nothing.
	step(host.PFCCounters{RxPause: 7, RxPauseNs: 9000, Durations: true}, false)
	step(host.PFCCounters{RxPause: 7, TxPause: 50, RxPauseNs: 9000, TxPauseNs: 1e6, Durations: true}, false)
	fail = errors.New("ioctl failed")
	step(host.PFCCounters{}, false)
	if m.Errors() != 1 {
		t.Fatalf("errors %d", m.Errors())
	}
	fail = nil
	step(host.PFCCounters{RxPause: 100}, false) // a new baseline after the failure
	step(host.PFCCounters{RxPause: 101}, true)
	step(host.PFCCounters{RxPause: 101}, false)
	var none *PFCMonitor
	if none.Paused() {
		t.Fatal("no monitor: never paused")
	}
}

// TestAgentPFCBit: while the NIC is paused the agent's polls carry the PFC
// bit on the wire and say so in the output; otherwise they are flow
// traces only.
func TestAgentPFCBit(t *testing.T) {
	const id = "hawkeye-agent-pfc-test"
	lk := ring.Named(id, ring.Config{})
	pool, err := dpdk.NewPool(id, 64, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var cur host.PFCCounters
	m := &PFCMonitor{Read: func() (host.PFCCounters, error) { return cur, nil }, Interval: time.Millisecond}
	m.Sample()
	cur.RxPause = 3
	m.Sample()
	gw, _ := header.ParseMAC("0c:42:a1:00:00:01")
	lines := "10.0.0.1 10.0.0.9 17 49153 4791 5000\n10.0.0.1 10.0.0.9 17 49153 4791 16000\n"
	a, out, _ := run(t, Config{Threshold: 300, Interval: time.Hour, FirstEvent: 1, Port: lk.A(), Pool: pool, Dst: gw,
		Input: strings.NewReader(lines), PFC: m})
	if !strings.Contains(out, "NIC paused (PFC bit)") || a.Stats().PFC != 1 {
		t.Fatalf("out %q stats %+v", out, a.Stats())
	}
	m.Sample() // no change since: not paused
	b, out2, _ := run(t, Config{Threshold: 300, Interval: time.Hour, FirstEvent: 2, Port: lk.A(), Pool: pool, Dst: gw,
		Input: strings.NewReader(lines), PFC: m})
	if strings.Contains(out2, "PFC") || b.Stats().PFC != 0 {
		t.Fatalf("out %q stats %+v", out2, b.Stats())
	}
	pkts := make([]*dpdk.Packet, 4)
	if n := lk.B().RxBurst(0, pkts); n != 2 {
		t.Fatalf("%d frames", n)
	}
	for i, want := range []uint16{hawkeyewire.TypeFlow | hawkeyewire.TypePFC, hawkeyewire.TypeFlow} {
		h, ok := hawkeyewire.ParseFrame(pkts[i].Data())
		if !ok || uint16(h.Type()) != want {
			t.Fatalf("frame %d: type %v, want %v", i, h.Type(), want)
		}
		pkts[i].Free()
	}
}
