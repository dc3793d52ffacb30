package hawkeyeagent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"time"

	"github.com/rdma-appliance/appliance/bench/perftest"
	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
)

// Config builds an Agent. The RTT samples come from Input or from Ping.
type Config struct {
	// Threshold in percent of the base RTT (at least 100); Interval is the
	// least time between two polls of one flow.
	Threshold int
	Interval  time.Duration
	// BaseRTT fixes every flow's base RTT; 0 takes the smallest seen.
	BaseRTT time.Duration
	// FirstEvent is the first event id: hosts sharing a fabric start
	// apart, as the switches deduplicate polls by event id.
	FirstEvent uint8
	// Port sends the polling frames, allocated from Pool, from Src to Dst
	// (the first-hop switch); without a Port polls are only printed.
	Port     dpdk.Port
	Pool     *dpdk.Pool
	Src, Dst header.MAC
	// Out receives every poll: a text line, or a JSON object a line.
	Out  io.Writer
	JSON bool
	Log  *slog.Logger
	// Input holds samples, one a line (see ParseRTTLine), and Hostmesh
	// batches; used when Ping is nil.
	Input io.Reader
	Ping  *Ping
	// PFC, when set, says whether the NIC is paused: polls then carry the
	// PFC bit (see PFCMonitor). The caller runs it.
	PFC *PFCMonitor
}

// Ping is the agent's own source of RTTs: one 8-byte RDMA READ every
// Params.Interval to a perftest server. A READ is one-sided, so its
// completion time is the network's and the RNICs' round trip.
type Ping struct {
	Params perftest.PingParams
	// Loopback runs the server in this process, two software RNICs on an
	// in-process link; otherwise Conn is connected to Server.
	Loopback bool
	Server   string
	Conn     io.ReadWriter
	Perftest perftest.Config
	// Thread runs the ping loop on the thread that drives the RNIC (the
	// caller locks and pins it); nil runs it on the calling goroutine.
	Thread func(func() error) error
}

// Stats count what an agent saw and did.
type Stats struct {
	Samples, Polls, Sent, Bad uint64
	// PFC counts the polls sent with the PFC bit (the NIC was paused).
	PFC uint64
}

// Agent turns RTT samples into polling frames.
type Agent struct {
	cfg   Config
	det   *Detector
	frame []byte
	stats Stats
	// err is the first failure to print a poll (the ping's callback
	// cannot return it).
	err error
}

// New builds an agent; Run starts it.
func New(cfg Config) *Agent {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	return &Agent{cfg: cfg, det: NewDetector(cfg.Threshold, int64(cfg.Interval), cfg.FirstEvent)}
}

// Stats are the agent's counts so far.
func (a *Agent) Stats() Stats { return a.stats }

// Run reads the samples until the input ends (or the ping's count is
// reached) or ctx ends, and returns the first failure to print a poll.
func (a *Agent) Run(ctx context.Context) error {
	var err error
	if a.cfg.Ping != nil {
		err = a.ping(ctx, a.cfg.Ping)
	} else {
		err = a.read(ctx, a.cfg.Input)
	}
	if err != nil {
		return err
	}
	st := a.stats
	a.cfg.Log.Info("hawkeye agent done", "samples", st.Samples, "polls", st.Polls, "sent", st.Sent, "pfc_polls", st.PFC, "bad_lines", st.Bad)
	return a.err
}

// ping measures RTTs with RDMA READs; each sample is one of the QP's
// 5-tuple (its UDP source port as the kernel derives it from the two QP
// numbers).
func (a *Agent) ping(ctx context.Context, p *Ping) error {
	fn := func(s perftest.PingSample) {
		src, dst := s.Src.Addr().Unmap(), s.Dst.Addr().Unmap()
		if !src.Is4() || !dst.Is4() {
			a.stats.Bad++
			return
		}
		k := hawkeyewire.FlowKey{Src: addrU32(src), Dst: addrU32(dst), Proto: protoUDP, Sport: s.SrcPort, Dport: rocePort}
		a.Observe(k, s.RTT)
	}
	if p.Loopback {
		_, err := perftest.PingLoopback(ctx, p.Params, perftest.LoopbackOptions{}, fn)
		return err
	}
	a.cfg.Log.Info("hawkeye agent pinging", "server", p.Server, "device", p.Perftest.Device.Info().Name, "interval", p.Params.Interval)
	run := func() error {
		_, err := perftest.Ping(ctx, p.Conn, p.Perftest, p.Params, fn)
		return err
	}
	if p.Thread == nil {
		return run()
	}
	return p.Thread(run)
}

// Observe runs one sample of flow k through the detector, and sends and
// prints the poll it raises; the error is the first failure to print.
func (a *Agent) Observe(k hawkeyewire.FlowKey, rtt int64) error {
	if a.err != nil {
		return a.err
	}
	a.stats.Samples++
	if base := int64(a.cfg.BaseRTT); base > 0 && a.det.Base(k) == 0 {
		a.det.SetBase(k, base)
	}
	now := dpdk.Nanotime()
	p, ok := a.det.Observe(k, rtt, now)
	if !ok {
		return nil
	}
	a.stats.Polls++
	paused := a.cfg.PFC.Paused()
	if paused {
		p.Type |= hawkeyewire.TypePFC
		a.stats.PFC++
	}
	sent := a.send(p)
	a.err = a.print(Poll{TimeNs: now, Event: p.Event, Victim: k, RTT: rtt, Base: a.det.Base(k), NICPaused: paused, Sent: sent})
	return a.err
}

// send transmits a polling frame, padded to the 60-byte minimum (the
// NIC adds the FCS).
func (a *Agent) send(p hawkeyewire.Poll) bool {
	if a.cfg.Port == nil {
		return false
	}
	a.frame = p.AppendFrame(a.frame[:0], a.cfg.Dst, a.cfg.Src)
	for len(a.frame) < 60 {
		a.frame = append(a.frame, 0)
	}
	pkt := a.cfg.Pool.Get()
	if pkt == nil {
		return false
	}
	if pkt.CopyFrom(a.frame) != len(a.frame) || a.cfg.Port.TxBurst(0, []*dpdk.Packet{pkt}) != 1 {
		pkt.Free()
		return false
	}
	a.stats.Sent++
	return true
}

// Poll is what the agent prints per poll.
type Poll struct {
	TimeNs int64               `json:"time_ns"`
	Event  uint8               `json:"event"`
	Victim hawkeyewire.FlowKey `json:"victim"`
	RTT    int64               `json:"rtt_ns"`
	Base   int64               `json:"base_ns"`
	// NICPaused: the NIC was paused by PFC, and the poll carries the PFC
	// bit.
	NICPaused bool `json:"nic_paused,omitempty"`
	Sent      bool `json:"sent"`
}

func (a *Agent) print(p Poll) error {
	if a.cfg.JSON {
		return json.NewEncoder(a.cfg.Out).Encode(p)
	}
	v := p.Victim
	pfc := ""
	if p.NICPaused {
		pfc = " NIC paused (PFC bit)"
	}
	_, err := fmt.Fprintf(a.cfg.Out, "poll event %d: %v:%d -> %v:%d proto %d rtt %d ns (base %d ns)%s sent %v\n", p.Event,
		IP4(v.Src), v.Sport, IP4(v.Dst), v.Dport, v.Proto, p.RTT, p.Base, pfc, p.Sent)
	return err
}

// IP4 is an address of a FlowKey as netip's.
func IP4(a uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)})
}

func addrU32(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}
