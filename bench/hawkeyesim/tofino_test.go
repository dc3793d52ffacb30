package hawkeyesim

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
	"github.com/rdma-appliance/appliance/p4/hawkeyetofino"
)

// standInBfshell runs a script with testdata/bfshell.py against regs.
func standInBfshell(t *testing.T, regs *map[string][]uint64) func(context.Context, string) ([]byte, error) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed: the read script is not run")
	}
	mock, err := filepath.Abs("testdata/bfshell.py")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	return func(ctx context.Context, script string) ([]byte, error) {
		b, err := json.Marshal(*regs)
		if err != nil {
			return nil, err
		}
		rf, sf := filepath.Join(dir, "regs.json"), filepath.Join(dir, "read.py")
		if err := os.WriteFile(rf, b, 0o644); err != nil {
			return nil, err
		}
		if err := os.WriteFile(sf, []byte(script), 0o644); err != nil {
			return nil, err
		}
		return exec.CommandContext(ctx, py, mock, rf, sf).CombinedOutput()
	}
}

// The Tofino leaf's dev ports: two hosts, two uplinks, the CPU.
const (
	tofH0, tofH1, tofUp, tofUp2, tofCPU = 0, 4, 8, 12, 192
	tofFar                              = 10<<24 | 2<<16 | 9 // 10.2.0.9, up
)

// tofinoLeaf is a leaf's program for the Tofino switch CPU and its twin
// with cfg.
func tofinoLeaf(t *testing.T, cfg Config) (hawkeyetofino.Program, *Switch) {
	t.Helper()
	mac := func(b byte) header.MAC { return header.MAC{2, 0, 0, 0, 0, b} }
	prog := hawkeyetofino.Program{
		Ports: []hawkeyetofino.Port{
			{Name: "h0", DevPort: tofH0, Speed: "100G", FEC: "rs", MAC: mac(1), Host: true},
			{Name: "h1", DevPort: tofH1, Speed: "100G", FEC: "rs", MAC: mac(2), Host: true},
			{Name: "up", DevPort: tofUp, Speed: "100G", FEC: "rs", MAC: mac(3)},
			{Name: "up2", DevPort: tofUp2, Speed: "100G", FEC: "rs", MAC: mac(4)},
		},
		Routes: []hawkeyetofino.Route{
			{Prefix: netip.MustParsePrefix("10.1.0.1/32"), Port: "h0", MAC: mac(11)},
			{Prefix: netip.MustParsePrefix("10.1.0.2/32"), Port: "h1", MAC: mac(12)},
			{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Port: "up", MAC: mac(13)},
		},
		CPUPort: tofCPU,
	}
	var ports []SwitchPort
	for _, p := range prog.Ports {
		ports = append(ports, SwitchPort{Dev: p.DevPort, Bandwidth: 100e9, Host: p.Host})
	}
	var routes []SwitchRoute
	for _, r := range prog.Routes {
		i := map[string]int{"h0": tofH0, "h1": tofH1, "up": tofUp}[r.Port]
		routes = append(routes, SwitchRoute{Prefix: r.Prefix, Port: i, DstMAC: r.MAC})
	}
	sw, err := NewSwitch("leaf", cfg, ports, routes)
	if err != nil {
		t.Fatal(err)
	}
	sw.SetCPUPort(tofCPU)
	return prog, sw
}

// TestTofinoCPU runs the Tofino switch CPU (p4/hawkeyetofino.CPU) against
// the twin: data, pause frames and a colliding flow go through a Switch,
// its registers are read through the CPU's bfrt script (a stand-in bfshell
// answering from Switch.Registers) and its evictions and the poll's copy
// reach the CPU's port in telemetry.p4's layout. The report the CPU builds
// must be the one the twin's own poller builds at that moment, and its
// re-trace, sent in through the CPU's port, must leave the twin by the
// paused uplink as a PFC polling packet.
func TestTofinoCPU(t *testing.T) {
	prog, sw := tofinoLeaf(t, DefaultConfig())

	// Traffic over epochs 5..9 (1 ms each): h0 -> tofFar, up2 -> h1 and
	// h0 -> h1; a flow colliding with h0 -> tofFar's slot in epoch 8; XOFF on
	// the uplink in epoch 9.
	victim := hawkeyewire.FlowKey{Src: 10<<24 | 1<<16 | 1, Dst: tofFar, Sport: 49152, Dport: 4791, Proto: ProtoUDP}
	collider := victim
	for collider.Sport = 1; flowIndex(collider.Src, collider.Dst, ProtoUDP, collider.Sport, 4791)&4095 !=
		flowIndex(victim.Src, victim.Dst, ProtoUDP, victim.Sport, 4791)&4095; collider.Sport++ {
	}
	send := func(now int64, in int, f []byte, q int64) []Out {
		outs, _ := sw.Packet(now, in, f, q)
		return outs
	}
	for e := int64(5); e <= 9; e++ {
		for i := range int64(20) {
			now := e<<20 + i*40_000
			send(now, tofH0, roceFrame(victim.Src, victim.Dst, victim.Sport, 4791, 1000), 2000+i*100)
			send(now+1000, tofUp2, roceFrame(10<<24|3<<16|7, 10<<24|1<<16|2, 50000, 4791, 500), 0)
			send(now+3000, tofUp2, roceFrame(10<<24|3<<16|7, tofFar, 50002, 4791, 500), 0)
			if e == 7 {
				send(now+2000, tofH0, roceFrame(victim.Src, 10<<24|1<<16|2, 50001, 4791, 700), 1500)
			}
		}
		if e == 8 {
			send(e<<20+900_000, tofH0, roceFrame(collider.Src, collider.Dst, collider.Sport, 4791, 800), 100)
		}
	}
	send(9<<20+850_000, tofUp, pfcFrame(1<<3, [8]uint16{3: 0xffff}), 0)
	pollAt := int64(9<<20 + 900_000)
	poll := pollFrame(hawkeyewire.TypeFlow, 7, victim)
	outs, toCPU := sw.Packet(pollAt, tofH0, poll, 0)
	if !toCPU || len(outs) != 1 || outs[0].Port != tofUp || hawkeyewire.Header(outs[0].Frame[14:]).Type() != hawkeyewire.TypeBoth {
		t.Fatalf("the twin's trace: to CPU %v, %+v", toCPU, outs)
	}

	// The CPU's port: the CPU on A, the data plane on B.
	l := ring.Named("hawkcpu", ring.Config{})
	defer ring.Forget("hawkcpu")
	pool, err := dpdk.NewPool("hawkcpu-test", 64, 0)
	if err != nil {
		t.Fatal(err)
	}
	toCPUPort := func(b []byte) {
		p := pool.Get()
		p.CopyFrom(b)
		if l.B().TxBurst(0, []*dpdk.Packet{p}) != 1 {
			t.Fatal("ring full")
		}
	}
	st := sw.st
	if st.evN == 0 {
		t.Fatal("no flow evicted")
	}
	for i := range st.evN {
		ev := st.ev[(st.evHead+i)%len(st.ev)]
		f := ev.rec
		toCPUPort(hawkeyetofino.Evicted{Time: uint32(ev.epoch<<20 + 900_000), Key: f.key(), In: int(f.in), Out: int(f.out),
			Packets: f.packets, Qdepth: uint32(f.qsum), Paused: f.paused}.Append(nil))
	}
	toCPUPort(hawkeyetofino.AppendCPUCopy(nil, tofH0, uint32(pollAt), poll))

	regs, err := sw.Registers()
	if err != nil {
		t.Fatal(err)
	}
	var got []hawkeyetofino.CPUReport
	cpu, err := hawkeyetofino.NewCPU(hawkeyetofino.CPUConfig{Program: prog, Switch: "leaf", Port: l.A(), Pool: pool,
		Bfshell: standInBfshell(t, &regs), Retrace: true, Now: func() int64 { return 0 },
		Report: func(r hawkeyetofino.CPUReport) error { got = append(got, r); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if !cpu.Poll(context.Background()) {
		t.Fatal("nothing on the CPU's port")
	}
	s := cpu.Stats()
	if len(got) != 1 || s.Collections != 1 || s.ReadErrors != 0 || s.Polls != 1 || s.Evicted != uint64(st.evN) {
		t.Fatalf("%d reports, stats %+v", len(got), s)
	}
	want := sw.Collect(pollAt)
	if r := got[0]; r.Event != 7 || r.Victim != victim || r.Time != pollAt || !reflect.DeepEqual(r.Report, want) {
		gj, _ := json.MarshalIndent(r.Report, "", " ")
		wj, _ := json.MarshalIndent(want, "", " ")
		t.Fatalf("the CPU's report:\n%s\nthe twin's:\n%s", gj, wj)
	}
	if len(want.Evicted) == 0 || len(want.Epochs) != 4 || !hasPausedNow(want) || len(want.Epochs[3].Meters) == 0 {
		t.Errorf("the scenario lost its point: %d evicted, %d epochs, paused now %v", len(want.Evicted), len(want.Epochs), hasPausedNow(want))
	}

	// The re-trace: a PFC poll out of the paused uplink, through the
	// twin's CPU port.
	bufs := make([]*dpdk.Packet, 4)
	n := l.B().RxBurst(0, bufs)
	if n != 1 || s.Retraced != 1 {
		t.Fatalf("%d re-trace packets, %d counted", n, s.Retraced)
	}
	back := sw.fromCPUFrame(t, tofCPU, bufs[0].Data())
	bufs[0].Free()
	if len(back) != 1 || back[0].Port != tofUp {
		t.Fatalf("re-trace left by %+v", back)
	}
	h := hawkeyewire.Header(back[0].Frame[14:])
	if h.Type() != hawkeyewire.TypePFC || h.Event() != 7 || h.Victim() != victim || h.Ingress() != tofH0 || h.Egress() != tofUp {
		t.Fatalf("re-trace header %+v", h.Poll())
	}

	// A PFC trace from up2, 2 ms later: the CPU re-traces to the ports the
	// twin's data plane traces (up2 fed the paused uplink), and nowhere
	// else (not back to up2, not to hosts).
	pfcAt := pollAt + 2_000_000
	pfcPoll := pollFrame(hawkeyewire.TypePFC, 8, victim)
	outs, toCPU = sw.Packet(pfcAt, tofUp2, pfcPoll, 0)
	if !toCPU || len(outs) != 1 || outs[0].Port != tofUp {
		t.Fatalf("the twin's PFC trace: to CPU %v, %+v", toCPU, outs)
	}
	regs, err = sw.Registers()
	if err != nil {
		t.Fatal(err)
	}
	toCPUPort(hawkeyetofino.AppendCPUCopy(nil, tofUp2, uint32(pfcAt), pfcPoll))
	cpu.Poll(context.Background())
	if n := l.B().RxBurst(0, bufs); n != 1 || cpu.Stats().Retraced != 2 || len(got) != 2 {
		t.Fatalf("%d re-trace packets, %+v", n, cpu.Stats())
	}
	back = sw.fromCPUFrame(t, tofCPU, bufs[0].Data())
	bufs[0].Free()
	if h := hawkeyewire.Header(back[0].Frame[14:]); back[0].Port != outs[0].Port || h.Type() != hawkeyewire.TypePFC || h.Ingress() != tofUp2 {
		t.Fatalf("re-trace of the PFC trace: %+v by %d", h.Poll(), back[0].Port)
	}
	if want := sw.Collect(pfcAt); !reflect.DeepEqual(got[1].Report, want) {
		t.Fatalf("the second report differs from the twin's")
	}
}

func hasPausedNow(r hawkeyewire.SwitchReport) bool {
	for _, e := range r.Epochs {
		for _, p := range e.Ports {
			if p.PausedNow {
				return true
			}
		}
	}
	return false
}

// fromCPUFrame runs a frame the CPU sent in through the twin.
func (s *Switch) fromCPUFrame(t *testing.T, cpu int, f []byte) []Out {
	t.Helper()
	outs, toCPU := s.Packet(0, cpu, f, 0)
	if toCPU {
		t.Fatal("the CPU's own packet went back to it")
	}
	return outs
}

// TestTofinoCPURules: the Tofino switch CPU keeps out of a flow trace
// where the victim was neither paused nor queued exactly when the twin
// with the same QuietQdepth does, collects a switch at most once per
// CollectInterval and an event once, and counts a failed read without
// reporting.
func TestTofinoCPURules(t *testing.T) {
	cfg := DefaultConfig()
	cfg.QuietQdepth = 2000
	prog, sw := tofinoLeaf(t, cfg)
	calm := hawkeyewire.FlowKey{Src: 10<<24 | 1<<16 | 1, Dst: tofFar, Sport: 1000, Dport: 4791, Proto: ProtoUDP}
	queued := hawkeyewire.FlowKey{Src: 10<<24 | 3<<16 | 7, Dst: 10<<24 | 1<<16 | 2, Sport: 2000, Dport: 4791, Proto: ProtoUDP}
	base := int64(9 << 20)
	for i := range int64(20) {
		sw.Packet(base+i*10_000, tofH0, roceFrame(calm.Src, calm.Dst, calm.Sport, 4791, 1000), 0)
		sw.Packet(base+i*10_000+5000, tofUp2, roceFrame(queued.Src, queued.Dst, queued.Sport, 4791, 1000), 6000)
	}
	regs, err := sw.Registers()
	if err != nil {
		t.Fatal(err)
	}
	l := ring.Named("hawkcpu2", ring.Config{})
	defer ring.Forget("hawkcpu2")
	fail := false
	bfshell := standInBfshell(t, &regs)
	var reports []hawkeyetofino.CPUReport
	cpu, err := hawkeyetofino.NewCPU(hawkeyetofino.CPUConfig{Program: prog, Switch: "leaf", Port: l.A(), QuietQdepth: cfg.QuietQdepth,
		Now: func() int64 { return 0 },
		Bfshell: func(ctx context.Context, s string) ([]byte, error) {
			if fail {
				return []byte("bfrt_python> Error: no device"), errors.New("exit status 1")
			}
			return bfshell(ctx, s)
		},
		Report: func(r hawkeyetofino.CPUReport) error { reports = append(reports, r); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	type step struct {
		at     int64
		in     int
		t      uint16
		ev     uint8
		victim hawkeyewire.FlowKey
		// twin: the twin's data plane copies the poll to its CPU
		twin bool
		want hawkeyetofino.CPUStats
	}
	t0 := base + 300_000
	for i, s := range []step{
		// The calm victim's egress (the uplink) held no queue: quiet,
		// as the twin decides it.
		{t0, tofH0, hawkeyewire.TypeFlow, 1, calm, false, hawkeyetofino.CPUStats{Polls: 1, Collections: 1, Quiet: 1}},
		// The queued victim's egress (h1) held 6000 B: reported.
		{t0 + 10_000, tofUp2, hawkeyewire.TypeFlow, 2, queued, true, hawkeyetofino.CPUStats{Polls: 2, Collections: 2, Quiet: 1, Reports: 1}},
		// Another event 100 us later: within the collect interval.
		{t0 + 110_000, tofUp2, hawkeyewire.TypeFlow, 3, queued, true, hawkeyetofino.CPUStats{Polls: 3, Collections: 2, Quiet: 1, Reports: 1, RateLimited: 1}},
		// Event 2's PFC trace after the interval: collected already.
		{t0 + 3_000_000, tofUp, hawkeyewire.TypePFC, 2, queued, true, hawkeyetofino.CPUStats{Polls: 4, Collections: 2, Quiet: 1, Reports: 1, RateLimited: 1,
			Duplicates: 1}},
	} {
		poll := pollFrame(s.t, s.ev, s.victim)
		_, toCPU := sw.Packet(s.at, s.in, poll, 0)
		if toCPU != s.twin {
			t.Fatalf("step %d: the twin's copy to the CPU %v", i, toCPU)
		}
		cpu.Take(ctx, hawkeyetofino.AppendCPUCopy(nil, s.in, uint32(s.at), poll), 0)
		got := cpu.Stats()
		got.ReportBytes, got.ReadNs = 0, 0
		if got != s.want {
			t.Fatalf("step %d: %+v, want %+v", i, got, s.want)
		}
	}
	if len(reports) != 1 || reports[0].Event != 2 || reports[0].Report.Bytes == 0 {
		t.Fatalf("reports %+v", reports)
	}
	fail = true
	cpu.Take(ctx, hawkeyetofino.AppendCPUCopy(nil, tofH0, uint32(t0+6_000_000), pollFrame(hawkeyewire.TypeFlow, 9, calm)), 0)
	if st := cpu.Stats(); st.ReadErrors != 1 || st.Reports != 1 || st.Collections != 2 {
		t.Fatalf("a failed read: %+v", st)
	}
}
