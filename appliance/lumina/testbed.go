// Package lumina runs Lumina tests (testing RDMA NICs by injecting
// deterministic events in a middlebox and capturing every packet). This
// file is the testbed that puts a whole Lumina setup on one machine: two
// soft RNICs (requester and responder), the software event injector
// between them, and a pool of dumpers on its mirror ports, joined by
// in-process ring links or, as root, by veth pairs between network
// namespaces with AF_PACKET ports.
package lumina

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dpdk/netns"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/dumper"
	"github.com/rdma-appliance/appliance/dumper/pcap"
	"github.com/rdma-appliance/appliance/dumper/trace"
	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/translator/inject"
	"github.com/rdma-appliance/appliance/verbs/soft"

	_ "github.com/rdma-appliance/appliance/dpdk/afpacket" // netns links
)

// DumperSpec is one dumper of the testbed.
type DumperSpec struct {
	// Name names the dumper (default dumperN); File its pcap name
	// (default Name.pcap), one per queue as dumper.Config says.
	Name    string
	File    string
	Weight  int // share of the mirrored copies (default 1)
	Queues  int // receive queues, one worker each (default 1)
	NumPkts int // arena per worker (default dumper.DefaultNumPkts)
	SnapLen int // default dumper.DefaultSnapLen
}

// TestbedConfig shapes a testbed.
type TestbedConfig struct {
	// Name prefixes link names (rings) and files.
	Name string
	// Netns joins the parts with veth pairs in network namespaces and
	// AF_PACKET ports instead of in-process rings (needs root).
	Netns bool
	// RequesterIP and ResponderIP default to 10.0.0.1 and 10.0.1.1; the
	// RNICs get these GIDs first and the Extra ones after them (Lumina's
	// ip-list, for multi-gid tests).
	RequesterIP, ResponderIP       netip.Addr
	RequesterExtra, ResponderExtra []netip.Addr
	// Requester and Responder are the RNICs' behaviour (nic.type and
	// roce-parameters); zero means soft.ProfileCX5.
	Requester, Responder soft.Profile
	Dumpers              []DumperSpec
	IterMode             intent.IterMode
	Balance              inject.Balance
	RewritePort          uint16
	MirrorSnap           int
	// RingSize of the in-process links (default 4096).
	RingSize int
	// Dir receives the dumpers' files and the merged trace.
	Dir string
	// Virtual runs the testbed on virtual time (twin.go): no goroutines,
	// links with a rate and a delay, deterministic runs. Not with Netns.
	Virtual bool
	// SpeedMbps, PropDelay and SwitchBuffer shape the virtual links: the
	// rate of every link (the switch's port speed), each one's one-way
	// delay, and the switch's buffer per egress port in bytes (defaults
	// DefaultSpeedMbps, DefaultPropDelay, DefaultSwitchBuffer).
	SpeedMbps    int
	PropDelay    time.Duration
	SwitchBuffer int
	// DumperCost, in the virtual mode, gives every dumper a receive ring
	// of DumperRing descriptors (default DefaultDumperRing) behind a
	// mirror link at SpeedMbps, and a core that spends this much per copy
	// (MeasureDumperCost): copies that find the ring full are discarded.
	// Nil keeps the dumpers on in-process links that never fill. Each
	// dumper draws its burst costs from a stream seeded by DumperSeed.
	DumperCost *DumperCost
	DumperRing int
	DumperSeed uint64
}

// Testbed is a running Lumina setup.
type Testbed struct {
	Cfg      TestbedConfig
	Req      *soft.Device
	Resp     *soft.Device
	Injector *inject.Injector
	Dumpers  []*dumper.Dumper

	pool    *dpdk.Pool
	ports   []dpdk.Port
	pairs   []*netns.Pair
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	loopErr error
	names   []string
	weights []int
	// hostLinks are the RNICs' links to the switch, whose counters tell
	// settle whether the RNICs have read what the switch sent them.
	hostLinks []link
	// The virtual mode's clock, wires and progress count.
	clk   *simClock
	wires []*wire
	nics  []*dumperNIC
	moved uint64
}

// link is one connection of the testbed: end a on the host side, end b on
// the injector's.
type link struct{ a, b dpdk.Port }

func (tb *Testbed) newLink(name string, queues int) (link, error) {
	if !tb.Cfg.Netns {
		l := ring.NewLink(tb.Cfg.Name+"-"+name, ring.Config{Queues: queues, RingSize: tb.Cfg.RingSize})
		tb.ports = append(tb.ports, l.A(), l.B())
		return link{l.A(), l.B()}, nil
	}
	pr, err := netns.NewPair("lu", 0)
	if err != nil {
		return link{}, err
	}
	tb.pairs = append(tb.pairs, pr)
	open := func(ns, ifname string, rxq int) (dpdk.Port, error) {
		opts := ",blocks=16,blocksize=256K"
		if rxq > 1 {
			opts += ",fanout=hash"
		}
		return netns.OpenPort(ns, "afpacket:"+ifname+opts, dpdk.Config{Pool: tb.pool, RxQueues: rxq, TxQueues: queues, Promiscuous: true})
	}
	a, err := open(pr.NSA, pr.IfA, 1)
	if err != nil {
		return link{}, err
	}
	tb.ports = append(tb.ports, a)
	b, err := open(pr.NSB, pr.IfB, queues)
	if err != nil {
		return link{}, err
	}
	tb.ports = append(tb.ports, b)
	return link{a, b}, nil
}

// NewTestbed builds the links, the RNICs, the injector and the dumpers,
// and starts the RNICs' and the injector's loops. Close undoes it all.
func NewTestbed(cfg TestbedConfig) (tb *Testbed, err error) {
	if cfg.Name == "" {
		cfg.Name = "lumina"
	}
	if !cfg.RequesterIP.IsValid() {
		cfg.RequesterIP = netip.MustParseAddr("10.0.0.1")
	}
	if !cfg.ResponderIP.IsValid() {
		cfg.ResponderIP = netip.MustParseAddr("10.0.1.1")
	}
	if cfg.RingSize == 0 {
		cfg.RingSize = 4096
	}
	if len(cfg.Dumpers) == 0 {
		cfg.Dumpers = []DumperSpec{{}, {}}
	}
	if cfg.Dir == "" {
		cfg.Dir = "."
	}
	if cfg.SpeedMbps <= 0 {
		cfg.SpeedMbps = DefaultSpeedMbps
	}
	if cfg.PropDelay <= 0 {
		cfg.PropDelay = DefaultPropDelay
	}
	if cfg.SwitchBuffer <= 0 {
		cfg.SwitchBuffer = DefaultSwitchBuffer
	}
	if cfg.Virtual && cfg.Netns {
		return nil, errors.New("lumina testbed: virtual time runs on in-process links, not network namespaces")
	}
	if cfg.Netns {
		if err := netns.Available(); err != nil {
			return nil, err
		}
		netns.ReapStale("lu")
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	tb = &Testbed{Cfg: cfg}
	if cfg.Virtual {
		tb.clk = &simClock{t: virtualEpoch}
	}
	defer func() {
		if err != nil {
			tb.Close()
			tb = nil
		}
	}()
	if tb.pool, err = dpdk.NewPool(cfg.Name, 16384, dpdk.Headroom+4096+512); err != nil {
		return nil, err
	}
	var req, resp link
	if cfg.Virtual {
		req, resp = tb.newSimLink("req"), tb.newSimLink("resp")
	} else {
		if req, err = tb.newLink("req", 1); err != nil {
			return nil, fmt.Errorf("lumina testbed: requester link: %w", err)
		}
		if resp, err = tb.newLink("resp", 1); err != nil {
			return nil, fmt.Errorf("lumina testbed: responder link: %w", err)
		}
	}
	tb.hostLinks = []link{req, resp}
	icfg := inject.Config{Pool: tb.pool, IterMode: cfg.IterMode, Balance: cfg.Balance, RewritePort: cfg.RewritePort,
		MirrorSnap: cfg.MirrorSnap, Seed: 1,
		Traffic: []inject.TrafficPort{{Name: "requester", Port: req.b}, {Name: "responder", Port: resp.b}},
	}
	reqGIDs := append([]netip.Addr{cfg.RequesterIP}, cfg.RequesterExtra...)
	respGIDs := append([]netip.Addr{cfg.ResponderIP}, cfg.ResponderExtra...)
	for _, a := range reqGIDs {
		icfg.Routes = append(icfg.Routes, inject.Route{Prefix: netip.PrefixFrom(a, a.BitLen()), Port: 0, MAC: header.MAC(req.a.Info().MAC)})
	}
	for _, a := range respGIDs {
		icfg.Routes = append(icfg.Routes, inject.Route{Prefix: netip.PrefixFrom(a, a.BitLen()), Port: 1, MAC: header.MAC(resp.a.Info().MAC)})
	}
	var dumpPorts []dpdk.Port
	for i, ds := range cfg.Dumpers {
		name := ds.Name
		if name == "" {
			name = fmt.Sprintf("dumper%d", i)
		}
		var l link
		if cfg.Virtual && cfg.DumperCost != nil {
			if ds.Queues > 1 {
				return nil, fmt.Errorf("lumina testbed: %s: a dumper with a measured core has one receive queue", name)
			}
			ringSize := cfg.DumperRing
			if ringSize <= 0 {
				ringSize = DefaultDumperRing
			}
			l = tb.newSimDumperLink(name, ringSize, cfg.DumperCost, cfg.DumperSeed)
		} else if l, err = tb.newLink(name, max(ds.Queues, 1)); err != nil {
			return nil, fmt.Errorf("lumina testbed: %s link: %w", name, err)
		}
		w := max(ds.Weight, 1)
		icfg.Mirrors = append(icfg.Mirrors, inject.MirrorPort{Name: name, Port: l.a, Weight: w})
		dumpPorts = append(dumpPorts, l.b)
		tb.names, tb.weights = append(tb.names, name), append(tb.weights, w)
	}
	// On a mirror link the injector holds end a, which transmits on every
	// queue, and the dumper end b, which receives on every queue.
	for i, ds := range cfg.Dumpers {
		file := ds.File
		if file == "" {
			file = tb.names[i] + ".pcap"
		}
		dc := dumper.Config{Name: tb.names[i], Port: dumpPorts[i], SnapLen: ds.SnapLen, NumPkts: ds.NumPkts,
			RewritePort: cfg.RewritePort, Dir: cfg.Dir, File: file}
		if cfg.Virtual {
			dc.Stepped, dc.Now = true, tb.Now
		}
		d, err := dumper.New(dc)
		if err != nil {
			return nil, err
		}
		tb.Dumpers = append(tb.Dumpers, d)
	}
	reqCfg := soft.Config{GIDs: reqGIDs, Profile: cfg.Requester, PoolSize: 4096}
	respCfg := soft.Config{GIDs: respGIDs, Profile: cfg.Responder, PoolSize: 4096}
	if cfg.Virtual {
		reqCfg.Clock, respCfg.Clock = tb.clk.now, tb.clk.now
		reqCfg.Reproducible, respCfg.Reproducible = true, true
		reqCfg.Seed, respCfg.Seed = 1, 2
		// The RNIC's transmit pipeline: the frames it has built that its
		// port has not taken yet (4 x burst), which a retransmission
		// queues behind.
		reqCfg.Burst, respCfg.Burst = virtualBurst, virtualBurst
	}
	if tb.Req, err = soft.NewDevice(cfg.Name+"-req", req.a, reqCfg); err != nil {
		return nil, fmt.Errorf("lumina testbed: requester RNIC: %w", err)
	}
	if tb.Resp, err = soft.NewDevice(cfg.Name+"-resp", resp.a, respCfg); err != nil {
		return nil, fmt.Errorf("lumina testbed: responder RNIC: %w", err)
	}
	if tb.Injector, err = inject.New(icfg); err != nil {
		return nil, fmt.Errorf("lumina testbed: injector: %w", err)
	}
	if cfg.Virtual {
		// Nothing runs on its own: Wait and drain step every part.
		return tb, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	tb.cancel = cancel
	tb.wg.Add(1)
	go func() {
		defer tb.wg.Done()
		if err := tb.Injector.Run(ctx); err != nil {
			tb.loopErr = err
		}
	}()
	for _, d := range []*soft.Device{tb.Req, tb.Resp} {
		if err := d.Start(ctx); err != nil {
			return nil, err
		}
	}
	return tb, nil
}

// StartCapture resets the injector's counters and mirror sequence and
// starts every dumper, as the orchestrator does before traffic.
func (tb *Testbed) StartCapture() error {
	tb.Injector.Reset()
	for _, d := range tb.Dumpers {
		if err := d.Start(); err != nil {
			return err
		}
	}
	return nil
}

// Capture is what a stopped capture produced.
type Capture struct {
	Results  []*dumper.Result
	Injector mirror.InjectorStats
	Sources  []trace.Source
}

// StopCapture stops the dumpers (which drain their queues and write) and
// reads the injector's counters.
func (tb *Testbed) StopCapture(ctx context.Context) (*Capture, error) {
	c := &Capture{Injector: tb.Injector.Stats()}
	var errs []error
	for i, d := range tb.Dumpers {
		res, err := d.Stop(ctx)
		if err != nil {
			errs = append(errs, err)
		}
		if res == nil {
			continue
		}
		c.Results = append(c.Results, res)
		src := trace.Source{Name: tb.names[i]}
		for _, f := range res.Files {
			src.Paths = append(src.Paths, f.Path)
		}
		c.Sources = append(c.Sources, src)
	}
	return c, errors.Join(errs...)
}

// Merge merges a capture's files into out (a nanosecond pcap) and runs
// the integrity check against the injector's counters.
func (tb *Testbed) Merge(ctx context.Context, c *Capture, out string) (*trace.Report, error) {
	assign, err := trace.ScheduleAssign(tb.names, tb.weights, 1)
	if err != nil {
		return nil, err
	}
	if tb.Cfg.Balance != inject.BalanceWRR {
		assign = nil // copies follow flows: there is no schedule to blame
	}
	w, err := pcap.Create(out, pcap.WriterOptions{LinkType: pcap.LinkTypeEthernet, Nanosecond: true})
	if err != nil {
		return nil, err
	}
	rep, err := trace.Merge(ctx, c.Sources, w, trace.Options{Mirrored: int64(c.Injector.Mirrored),
		RxRoCE: int64(c.Injector.RxRoCE), FirstSeq: 1, Assign: assign, RewritePort: tb.Cfg.RewritePort})
	if cerr := w.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return rep, err
}

// Path is a file under the testbed's directory.
func (tb *Testbed) Path(name string) string { return filepath.Join(tb.Cfg.Dir, name) }

// Close stops the loops and releases everything, namespaces included.
func (tb *Testbed) Close() error {
	for _, d := range tb.Dumpers {
		d.Close()
	}
	for _, d := range []*soft.Device{tb.Req, tb.Resp} {
		if d != nil {
			d.Close()
		}
	}
	if tb.cancel != nil {
		tb.cancel()
	}
	tb.wg.Wait()
	for _, p := range tb.ports {
		p.Close()
	}
	var errs []error
	for _, pr := range tb.pairs {
		errs = append(errs, pr.Close())
	}
	if tb.pool != nil {
		tb.pool.Close()
	}
	return errors.Join(append(errs, tb.loopErr)...)
}
