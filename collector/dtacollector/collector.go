// Package dtacollector is the collector side of Direct Telemetry Access: the RDMA
// service that hosts the primitives' memory (Key-Write table, Key-Increment
// counters, Append lists, Sketch-Merge sketches, Postcarder flow table),
// sets up one RC connection per translator through the exchange of package
// translator/dtatranslator, and answers queries by reading that memory. Reports reach
// the memory through the RNIC alone: the collector's CPU only polls Append
// lists, counts push notifications (WRITEs with immediate) and reads on
// query.
//
// A Spec (YAML, validated with file:line errors) is turned into a
// Collector by New, which allocates and registers the memory and starts the
// list pollers; Serve accepts translators; Register exposes the queries,
// connections and metrics over HTTP.
package dtacollector

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/internal/dtamem"
	"github.com/rdma-appliance/appliance/verbs"
)

// Options are the collector's run-time settings that are not in its file.
type Options struct {
	Log *slog.Logger
	// Port is the device port (default 1); GIDIndex the GID whose address
	// the collector offers translators (default 0).
	Port     int
	GIDIndex int
	// Claims, when set, records the cores pinned pollers take, so two
	// pollers (of this or, with a claims directory, another service)
	// never busy-poll one core.
	Claims *dpdk.CoreClaims
	// OnEntry, when set, is called by the pollers for every Append entry
	// they read, with the list, the entry's position in the list
	// (counting from 0) and its data. The pollers of one list call it
	// concurrently. Counters, rates and the recent entries are kept
	// whether it is set or not.
	OnEntry func(list uint32, pos uint64, data uint32)
}

// Errors of New and Serve.
var (
	// ErrClosed is returned by calls on a closed collector.
	ErrClosed = errors.New("dta collector: closed")
	// ErrDevice is wrapped by New's errors about the RDMA device.
	ErrDevice = errors.New("dta collector: device")
)

// Access. The collector's own registration of a primitive's memory
// grants no remote access: each translator gets registrations of its
// own, with only the access its primitive needs (atomics for
// Key-Increment's FETCH_ADDs, WRITE for the rest), deregistered when its
// connection ends, so a gone translator's keys stop working and the
// keys /v1/regions shows open nothing.
const (
	localAccess  = verbs.AccessLocalWrite
	writeAccess  = verbs.AccessLocalWrite | verbs.AccessRemoteWrite
	atomicAccess = verbs.AccessLocalWrite | verbs.AccessRemoteAtomic
	// qpAccess is the union the QP allows; each MR narrows it.
	qpAccess = verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteAtomic
)

// primitive is one primitive's memory: a buffer outside the Go heap,
// registered as one MR for the collector, and the access a translator's
// own registration gets.
type primitive struct {
	name   string
	buf    []byte
	mr     verbs.MR
	remote verbs.Access
}

// Collector hosts the primitives' memory on one RDMA device and serves
// translators and queries.
type Collector struct {
	spec  Spec
	dev   verbs.Device
	opt   Options
	log   *slog.Logger
	pd    verbs.PD
	ip    netip.Addr
	mac   header.MAC
	mtu   verbs.MTU
	start time.Time

	prims   []*primitive
	regions dtamem.Regions
	// Views into the primitives' buffers.
	kwMem, kiMem, pcMem []byte
	sketchMem           map[uint16][]byte
	lists               map[uint32]*list
	listIDs             []uint32

	// memMu guards the buffers' lifetime: queries read under RLock,
	// Close frees them under Lock.
	memMu  sync.RWMutex
	closed bool

	mu    sync.Mutex
	conns map[uint32]*connection // by the collector's QPN
	// byName and byIP bind a translator's QP and neighbour entry to the
	// name it authenticated with: another translator may not take them
	// while it is connected. Entries are reserved before the QP exists.
	byName   map[string]netip.Addr
	byIP     map[netip.Addr]string
	allowed  map[string]netip.Addr // the spec's translators, when given
	pending  atomic.Int64          // exchanges not done yet
	cancel   context.CancelFunc    // Serve's
	serving  bool
	closing  bool
	connects atomic.Uint64
	refused  atomic.Uint64
	authFail atomic.Uint64
	pushes   atomic.Uint64
	lastPush [recentPushes]Push
	nPush    uint64

	stopPolling atomic.Bool
	pollWG      sync.WaitGroup // pollers and the rate ticker
	serveWG     sync.WaitGroup // Serve and its connections
	stopTicker  chan struct{}
	closeOnce   sync.Once
}

// recentPushes is how many push notifications Stats shows.
const recentPushes = 16

// Push is one push notification: a WRITE with immediate, whose immediate
// the translator sets to the report's key.
type Push struct {
	Key        uint32    `json:"key"`
	Translator string    `json:"translator"`
	Time       time.Time `json:"time"`
}

// New builds the collector of a validated spec on dev: it maps each
// primitive's memory (on huge pages when the spec asks and the kernel
// has them), registers one MR per primitive on a PD and starts the
// Append pollers. Translators are served once Serve runs.
func New(s Spec, dev verbs.Device, opt Options) (*Collector, error) {
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	if opt.Port == 0 {
		opt.Port = 1
	}
	c := &Collector{spec: s, dev: dev, opt: opt, log: opt.Log.With("collector", s.Name), start: time.Now(),
		sketchMem: map[uint16][]byte{}, lists: map[uint32]*list{}, conns: map[uint32]*connection{},
		byName: map[string]netip.Addr{}, byIP: map[netip.Addr]string{}, stopTicker: make(chan struct{})}
	if len(s.Translators) > 0 {
		c.allowed = map[string]netip.Addr{}
		for _, a := range s.Translators {
			ip, err := netip.ParseAddr(a.IP)
			if err != nil {
				return nil, fmt.Errorf("dta collector: translator %s: %w", a.Name, err)
			}
			c.allowed[a.Name] = ip.Unmap()
		}
	}
	if err := c.address(); err != nil {
		return nil, err
	}
	if info := dev.Info(); info.MaxQPRdAtom > 0 && s.MaxAtomic > info.MaxQPRdAtom {
		return nil, fmt.Errorf("%w %s: max-atomic %d exceeds its max_qp_rd_atom %d", ErrDevice, info.Name, s.MaxAtomic, info.MaxQPRdAtom)
	}
	pd, err := dev.AllocPD()
	if err != nil {
		return nil, fmt.Errorf("%w: allocating a PD: %w", ErrDevice, err)
	}
	c.pd = pd
	if err := c.allocate(); err != nil {
		c.free()
		return nil, err
	}
	if err := c.regions.Validate(); err != nil {
		c.free()
		return nil, fmt.Errorf("dta collector: regions: %w", err)
	}
	if err := c.startPollers(); err != nil {
		c.stopPollers()
		c.free()
		return nil, err
	}
	return c, nil
}

// address finds what the collector offers: its IP (the GID at the
// configured index), MAC and path MTU.
func (c *Collector) address() error {
	pa, err := c.dev.QueryPort(c.opt.Port)
	if err != nil {
		return fmt.Errorf("%w: port %d: %w", ErrDevice, c.opt.Port, err)
	}
	if c.opt.GIDIndex < 0 || c.opt.GIDIndex >= len(pa.GIDs) {
		return fmt.Errorf("%w %s: GID index %d of %d RoCEv2 GIDs", ErrDevice, c.dev.Info().Name, c.opt.GIDIndex, len(pa.GIDs))
	}
	c.ip = pa.GIDs[c.opt.GIDIndex].Addr()
	c.mtu = verbs.MTUFromBytes(c.spec.MTU)
	if pa.ActiveMTU != 0 && pa.ActiveMTU < c.mtu {
		c.log.Warn("path MTU limited by the port", "mtu", c.spec.MTU, "active", pa.ActiveMTU.Bytes())
		c.mtu = pa.ActiveMTU
	}
	type macer interface{ MAC() header.MAC }
	if m, ok := c.dev.(macer); ok {
		c.mac = m.MAC()
		return nil
	}
	// A hardware RNIC's MAC is its netdev's.
	nd := c.dev.Info().Netdev
	if nd == "" {
		return fmt.Errorf("%w %s: no netdev to take the MAC from", ErrDevice, c.dev.Info().Name)
	}
	ifi, err := net.InterfaceByName(nd)
	if err != nil || len(ifi.HardwareAddr) != 6 {
		return fmt.Errorf("%w %s: MAC of netdev %s: %v", ErrDevice, c.dev.Info().Name, nd, err)
	}
	c.mac = header.MAC(ifi.HardwareAddr)
	return nil
}

// align64 rounds n up to a cache line, so sub-regions of one buffer do
// not share lines.
func align64(n uint64) uint64 { return (n + 63) &^ 63 }

// allocate maps and registers each primitive's memory and fills the
// regions with their addresses and keys.
func (c *Collector) allocate() error {
	c.regions = c.spec.Geometry()
	r := &c.regions
	if kw := r.KeyWrite; kw != nil {
		p, err := c.register("key-write", kw.Slots*uint64(dtamem.KeyWriteEntryLen(kw.DataWidth)), writeAccess)
		if err != nil {
			return err
		}
		kw.Addr, kw.RKey, c.kwMem = p.mr.Addr(), p.mr.RKey(), p.buf
	}
	if ki := r.KeyIncrement; ki != nil {
		p, err := c.register("key-increment", ki.Slots*8, atomicAccess)
		if err != nil {
			return err
		}
		ki.Addr, ki.RKey, c.kiMem = p.mr.Addr(), p.mr.RKey(), p.buf
	}
	if len(r.Lists) > 0 {
		ids := slices.Sorted(maps.Keys(r.Lists))
		var total uint64
		for _, id := range ids {
			total += align64(r.Lists[id].Entries * uint64(r.Layout.AppendEntryLen()))
		}
		p, err := c.register("append", total, writeAccess)
		if err != nil {
			return err
		}
		off := uint64(0)
		for _, id := range ids {
			l := r.Lists[id]
			n := l.Entries * uint64(r.Layout.AppendEntryLen())
			l.Addr, l.RKey = p.mr.Addr()+off, p.mr.RKey()
			r.Lists[id] = l
			c.lists[id] = newList(id, c.listSpec(id), p.buf[off:off+n], r.Layout)
			off += align64(n)
		}
		c.listIDs = ids
	}
	if len(r.Sketches) > 0 {
		ids := slices.Sorted(maps.Keys(r.Sketches))
		var total uint64
		for _, id := range ids {
			s := r.Sketches[id]
			total += align64(uint64(s.Len()))
		}
		p, err := c.register("sketches", total, writeAccess)
		if err != nil {
			return err
		}
		off := uint64(0)
		for _, id := range ids {
			s := r.Sketches[id]
			n := uint64(s.Len())
			s.Addr, s.RKey = p.mr.Addr()+off, p.mr.RKey()
			r.Sketches[id] = s
			c.sketchMem[id] = p.buf[off : off+n]
			off += align64(n)
		}
	}
	if pc := r.Postcards; pc != nil {
		p, err := c.register("postcards", pc.Slots*uint64(pc.RecordLen()), writeAccess)
		if err != nil {
			return err
		}
		pc.Addr, pc.RKey, c.pcMem = p.mr.Addr(), p.mr.RKey(), p.buf
	}
	return nil
}

func (c *Collector) listSpec(id uint32) ListSpec {
	for _, l := range c.spec.Append.Lists {
		if l.ID == id {
			return l
		}
	}
	return ListSpec{ID: id, Pollers: 1, Recent: DefaultRecent}
}

// register maps n bytes for a primitive and registers them for the
// collector; remote is the access translators' registrations get.
func (c *Collector) register(name string, n uint64, remote verbs.Access) (*primitive, error) {
	if n > 1<<46 {
		return nil, fmt.Errorf("dta collector: %s: %d bytes is beyond any host", name, n)
	}
	buf, err := verbs.AllocBuffer(int(n), c.spec.HugePages)
	if err != nil {
		return nil, fmt.Errorf("dta collector: %s memory (%d bytes): %w", name, n, err)
	}
	p := &primitive{name: name, buf: buf, remote: remote}
	c.prims = append(c.prims, p)
	if p.mr, err = c.pd.RegMR(buf, localAccess); err != nil {
		return nil, fmt.Errorf("%w: registering %s memory (%d bytes): %w", ErrDevice, name, n, err)
	}
	return p, nil
}

// free deregisters and unmaps every primitive and frees the PD.
func (c *Collector) free() {
	for _, p := range c.prims {
		if p.mr != nil {
			if err := p.mr.Dereg(); err != nil {
				c.log.Warn("deregistering memory", "primitive", p.name, "err", err)
			}
		}
		if err := verbs.FreeBuffer(p.buf); err != nil {
			c.log.Warn("unmapping memory", "primitive", p.name, "err", err)
		}
	}
	c.prims = nil
	if c.pd != nil {
		if err := c.pd.Dealloc(); err != nil {
			c.log.Warn("deallocating the PD", "err", err)
		}
		c.pd = nil
	}
}

// Regions are what the collector offers translators.
func (c *Collector) Regions() dtamem.Regions { return c.regions }

// Spec is the collector's validated spec.
func (c *Collector) Spec() Spec { return c.spec }

// Offer is the offer a translator's Hello is answered with, without the
// connection's QPN.
func (c *Collector) offer() dtamem.Offer {
	return dtamem.Offer{Name: c.spec.Name, IP: c.ip, MAC: c.mac.String(), MTU: c.mtu.Bytes(), MaxAtomic: c.spec.MaxAtomic,
		Regions: c.regions, Redundancy: c.spec.Redundancy}
}

// Close stops serving and polling, destroys every connection's QP and
// frees the memory. Queries after Close return ErrClosed.
func (c *Collector) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closing = true
		if c.cancel != nil {
			c.cancel()
		}
		c.mu.Unlock()
		c.serveWG.Wait()
		c.stopPollers()
		c.memMu.Lock()
		c.closed = true
		c.free()
		c.memMu.Unlock()
	})
	return nil
}

// Serve accepts translators on ln until ctx ends or Close, and returns
// after every connection's QP is destroyed. Each translator sends a
// Hello; the collector makes an RC QP for it, moves it to RTR expecting
// the translator's QPN and PSN, and answers with an Offer (or an Offer
// carrying the reason it refuses). The TCP connection stays open for
// the RDMA connection's life: when it ends, the QP goes, and a
// translator that comes back gets a new one.
func (c *Collector) Serve(ctx context.Context, ln net.Listener) error {
	c.mu.Lock()
	switch {
	case c.closing:
		c.mu.Unlock()
		ln.Close()
		return ErrClosed
	case c.serving:
		c.mu.Unlock()
		ln.Close()
		return errors.New("dta collector: already serving")
	}
	ctx, cancel := context.WithCancel(ctx)
	c.cancel, c.serving = cancel, true
	c.serveWG.Add(1)
	c.mu.Unlock()
	defer c.serveWG.Done()
	defer cancel()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	c.log.Info("serving translators", "exchange", ln.Addr().String(), "ip", c.ip, "mac", c.mac, "mtu", c.mtu.Bytes())
	for {
		tc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("dta collector: accepting translators: %w", err)
		}
		c.serveWG.Add(1)
		go func() {
			defer c.serveWG.Done()
			c.handle(ctx, tc)
		}()
	}
}

// ConnState is one translator's connection for the API.
type ConnState struct {
	Translator    string    `json:"translator"`
	Peer          string    `json:"peer"` // the exchange's TCP peer
	IP            string    `json:"ip"`
	MAC           string    `json:"mac"`
	TranslatorQPN uint32    `json:"translator_qpn"`
	QPN           uint32    `json:"qpn"`
	FirstPSN      uint32    `json:"first_psn"`
	State         string    `json:"state"`
	Since         time.Time `json:"since"`
	Pushes        uint64    `json:"pushes"`
	RecvErrors    uint64    `json:"recv_errors"`
}

// connection is one translator's RC connection.
type connection struct {
	hello      dtamem.Hello
	peer       string
	qp         verbs.QP
	cq         verbs.CQ
	mrs        []verbs.MR     // the translator's own registrations
	regions    dtamem.Regions // with their keys
	since      time.Time
	pushes     atomic.Uint64
	recvErrors atomic.Uint64
	done       chan struct{}
	polled     chan struct{}
}

// exchangeTimeout bounds an exchange from accept to offer: a peer that
// connects and says nothing (or dribbles) holds a pending slot no longer.
const exchangeTimeout = 10 * time.Second

// maxPending bounds the exchanges in progress at once, beyond the
// connections: a flood of silent peers cannot hold more goroutines and
// buffers than this.
const maxPending = 16

// handle runs one translator's exchange and keeps its QP for as long as
// the TCP connection lasts.
func (c *Collector) handle(ctx context.Context, tc net.Conn) {
	defer tc.Close()
	peer := tc.RemoteAddr().String()
	if c.pending.Add(1) > maxPending {
		c.pending.Add(-1)
		c.refused.Add(1)
		c.log.Warn("exchange: too many exchanges in progress", "peer", peer, "max", maxPending)
		return
	}
	pending := true
	done := func() {
		if pending {
			pending = false
			c.pending.Add(-1)
		}
	}
	defer done()
	stop := context.AfterFunc(ctx, func() { tc.Close() })
	defer stop()
	_ = tc.SetDeadline(time.Now().Add(exchangeTimeout))
	// A Hello is small: the reader of a peer not yet authenticated is too.
	r := bufio.NewReaderSize(tc, dtamem.MaxHelloLen)
	a, err := dtamem.Accept(r, tc, c.spec.Name, c.spec.Key)
	if a == nil {
		c.refused.Add(1)
		c.log.Warn("exchange: no hello", "peer", peer, "err", err)
		return
	}
	h := a.Hello
	refuse := func(err error) {
		c.refused.Add(1)
		if errors.Is(err, dtamem.ErrAuth) {
			c.authFail.Add(1)
		}
		// The name is the peer's word: quoted, and only when valid.
		name := h.Name
		if !dtamem.ValidName(name) {
			name = "?"
		}
		c.log.Warn("translator refused", "translator", name, "peer", peer, "err", err)
		o := dtamem.Offer{Name: c.spec.Name, Error: err.Error()}
		_ = dtamem.WriteMsg(tc, &o)
	}
	if err != nil {
		refuse(err)
		return
	}
	if err := h.Validate(); err != nil {
		refuse(err)
		return
	}
	if l := c.regions.Layout; h.Layout != l {
		refuse(fmt.Errorf("dta collector %s: %w", c.spec.Name, dtamem.LayoutMismatch(h.Layout, l)))
		return
	}
	if h.IP.Unmap().Is4() != c.ip.Is4() {
		refuse(fmt.Errorf("dta collector: translator address %v and collector GID %v are of different IP versions", h.IP, c.ip))
		return
	}
	if err := c.admit(h); err != nil {
		refuse(err)
		return
	}
	conn, err := c.connect(h, peer)
	if err != nil {
		c.release(h)
		refuse(err)
		return
	}
	defer c.disconnect(conn)
	o := c.offer()
	o.QPN = conn.qp.QPN()
	o.Regions = conn.regions
	if err := a.Offer(tc, &o); err != nil {
		c.log.Warn("exchange: sending the offer", "translator", h.Name, "err", err)
		return
	}
	_ = tc.SetDeadline(time.Time{})
	done()
	c.connects.Add(1)
	c.log.Info("translator connected", "translator", h.Name, "ip", h.IP, "translator_qpn", h.QPN, "qpn", o.QPN, "psn", h.PSN,
		"authenticated", a.Authenticated)
	// The translator never writes after its hello: a read returns when
	// the connection ends or the collector stops. What it sends anyway is
	// discarded a buffer at a time.
	_, _ = io.Copy(io.Discard, r)
	c.log.Info("translator gone", "translator", h.Name, "qpn", o.QPN, "pushes", conn.pushes.Load())
}

// admit checks a translator against the allow-list and the limits and
// reserves its name and address: a second translator may not take the
// QP or neighbour entry of one that is connected.
func (c *Collector) admit(h dtamem.Hello) error {
	ip := h.IP.Unmap()
	if c.allowed != nil {
		want, ok := c.allowed[h.Name]
		if !ok {
			return fmt.Errorf("dta collector: translator %q is not in the collector's translators", h.Name)
		}
		if want != ip {
			return fmt.Errorf("dta collector: translator %q must connect from %v, not %v", h.Name, want, ip)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byName[h.Name]; ok {
		return fmt.Errorf("dta collector: translator %q is already connected", h.Name)
	}
	if owner, ok := c.byIP[ip]; ok {
		return fmt.Errorf("dta collector: address %v belongs to translator %q, which is connected", ip, owner)
	}
	if len(c.byName) >= c.spec.MaxTranslators {
		return fmt.Errorf("dta collector: %d translators connected, the most it serves (max-translators)", len(c.byName))
	}
	c.byName[h.Name] = ip
	c.byIP[ip] = h.Name
	return nil
}

// release undoes admit.
func (c *Collector) release(h dtamem.Hello) {
	c.mu.Lock()
	delete(c.byName, h.Name)
	delete(c.byIP, h.IP.Unmap())
	c.mu.Unlock()
}

// neighborAdder is implemented by RNICs that keep their own neighbour
// table (the soft RNIC); a hardware RNIC resolves through the kernel.
type neighborAdder interface {
	AddNeighbor(ip netip.Addr, mac header.MAC)
}

// connect registers the translator's own view of the memory, creates its
// QP and takes it to RTR.
func (c *Collector) connect(h dtamem.Hello, peer string) (*connection, error) {
	mac, err := header.ParseMAC(h.MAC)
	if err != nil {
		return nil, err
	}
	mrs, regions, err := c.registerFor(h.Name)
	if err != nil {
		return nil, err
	}
	dereg := func() {
		for _, m := range mrs {
			_ = m.Dereg()
		}
	}
	depth := c.spec.RecvDepth
	cq, err := c.dev.CreateCQ(verbs.CQAttr{CQE: depth + 16})
	if err != nil {
		dereg()
		return nil, fmt.Errorf("%w: creating a CQ: %w", ErrDevice, err)
	}
	qp, err := c.pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: depth, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		cq.Destroy()
		dereg()
		return nil, fmt.Errorf("%w: creating a QP: %w", ErrDevice, err)
	}
	fail := func(err error) (*connection, error) {
		qp.Destroy()
		cq.Destroy()
		dereg()
		return nil, err
	}
	if na, ok := c.dev.(neighborAdder); ok {
		// The soft RNIC answers from its own table: without the entry
		// its ACKs would wait for ARP the translator may not answer.
		// admit reserved the address for this translator.
		na.AddNeighbor(h.IP.Unmap(), mac)
	}
	steps := []struct {
		a verbs.QPAttr
		m verbs.AttrMask
	}{
		{verbs.QPAttr{State: verbs.QPSInit, Port: uint8(c.opt.Port), AccessFlags: qpAccess},
			verbs.AttrState | verbs.AttrPKeyIndex | verbs.AttrPort | verbs.AttrAccessFlags},
		{verbs.QPAttr{State: verbs.QPSRTR, PathMTU: c.mtu, DestQPN: h.QPN, RQPSN: h.PSN,
			MaxDestRdAtomic: uint8(c.spec.MaxAtomic), MinRNRTimer: 1,
			AH: verbs.AHAttr{DGID: verbs.GIDFromAddr(h.IP), SGIDIndex: c.opt.GIDIndex, Port: c.opt.Port, HopLimit: 64}},
			verbs.AttrState | verbs.AttrAV | verbs.AttrPathMTU | verbs.AttrDestQPN | verbs.AttrRQPSN |
				verbs.AttrMaxDestRdAtomic | verbs.AttrMinRNRTimer},
	}
	for _, s := range steps {
		if err := qp.Modify(&s.a, s.m); err != nil {
			return fail(fmt.Errorf("%w: QP to %v: %w", ErrDevice, s.a.State, err))
		}
	}
	// Receives for WRITEs with immediate: they carry no data, so no SGE.
	wrs := make([]verbs.RecvWR, depth)
	if err := qp.PostRecv(wrs); err != nil {
		return fail(fmt.Errorf("%w: posting receives: %w", ErrDevice, err))
	}
	conn := &connection{hello: h, peer: peer, qp: qp, cq: cq, mrs: mrs, regions: regions, since: time.Now(),
		done: make(chan struct{}), polled: make(chan struct{})}
	c.mu.Lock()
	c.conns[qp.QPN()] = conn
	c.mu.Unlock()
	go c.completions(conn)
	return conn, nil
}

// registerFor registers every primitive's memory for one translator,
// with the remote access its primitive needs, and returns the regions
// with those keys.
func (c *Collector) registerFor(name string) ([]verbs.MR, dtamem.Regions, error) {
	keys := map[string]uint32{}
	var mrs []verbs.MR
	for _, p := range c.prims {
		m, err := c.pd.RegMR(p.buf, p.remote)
		if err != nil {
			for _, m := range mrs {
				_ = m.Dereg()
			}
			return nil, dtamem.Regions{}, fmt.Errorf("%w: registering %s memory for translator %s: %w", ErrDevice, p.name, name, err)
		}
		mrs = append(mrs, m)
		keys[p.name] = m.RKey()
	}
	r := c.regions
	if kw := r.KeyWrite; kw != nil {
		k := *kw
		k.RKey = keys["key-write"]
		r.KeyWrite = &k
	}
	if ki := r.KeyIncrement; ki != nil {
		k := *ki
		k.RKey = keys["key-increment"]
		r.KeyIncrement = &k
	}
	if r.Lists != nil {
		r.Lists = maps.Clone(r.Lists)
		for id, l := range r.Lists {
			l.RKey = keys["append"]
			r.Lists[id] = l
		}
	}
	if r.Sketches != nil {
		r.Sketches = maps.Clone(r.Sketches)
		for id, s := range r.Sketches {
			s.RKey = keys["sketches"]
			r.Sketches[id] = s
		}
	}
	if pc := r.Postcards; pc != nil {
		k := *pc
		k.RKey = keys["postcards"]
		r.Postcards = &k
	}
	return mrs, r, nil
}

// disconnect destroys a connection's QP and CQ, revokes its keys and
// frees its name and address.
func (c *Collector) disconnect(conn *connection) {
	close(conn.done)
	<-conn.polled
	if err := conn.qp.Destroy(); err != nil {
		c.log.Warn("destroying a QP", "qpn", conn.qp.QPN(), "err", err)
	}
	if err := conn.cq.Destroy(); err != nil {
		c.log.Warn("destroying a CQ", "err", err)
	}
	for _, m := range conn.mrs {
		if err := m.Dereg(); err != nil {
			c.log.Warn("deregistering a translator's memory", "translator", conn.hello.Name, "err", err)
		}
	}
	// Listed until gone, so a translator that sees it gone can come back.
	c.mu.Lock()
	delete(c.conns, conn.qp.QPN())
	delete(c.byName, conn.hello.Name)
	delete(c.byIP, conn.hello.IP.Unmap())
	c.mu.Unlock()
}

// completions takes the receive completions of WRITEs with immediate
// (push notifications) and keeps the receive queue full.
func (c *Collector) completions(conn *connection) {
	defer close(conn.polled)
	var wcs [32]verbs.WC
	var wrs [32]verbs.RecvWR
	// A slow timer in case a notification slipped between an empty poll
	// and the wait.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		n, err := conn.cq.Poll(wcs[:])
		if err != nil {
			c.log.Warn("polling a CQ", "qpn", conn.qp.QPN(), "err", err)
			return
		}
		repost := 0
		for _, wc := range wcs[:n] {
			if wc.Status != verbs.WCSuccess {
				// The QP is in error (or being destroyed): nothing to
				// repost into.
				if wc.Status != verbs.WCWRFlushErr {
					conn.recvErrors.Add(1)
				}
				continue
			}
			if wc.Opcode&verbs.WCRecv == 0 {
				continue
			}
			repost++
			if wc.Opcode == verbs.WCRecvRDMAWithImm {
				conn.pushes.Add(1)
				c.push(Push{Key: wc.Imm, Translator: conn.hello.Name, Time: time.Now()})
			}
		}
		if repost > 0 {
			if err := conn.qp.PostRecv(wrs[:repost]); err != nil {
				select {
				case <-conn.done:
					return
				default:
				}
				c.log.Warn("reposting receives", "qpn", conn.qp.QPN(), "err", err)
			}
		}
		if n > 0 {
			continue
		}
		select {
		case <-conn.done:
			return
		case <-conn.cq.Notify():
		case <-tick.C:
		}
	}
}

func (c *Collector) push(p Push) {
	c.pushes.Add(1)
	c.mu.Lock()
	c.lastPush[c.nPush%recentPushes] = p
	c.nPush++
	c.mu.Unlock()
}

// Connections are the translators connected now, by QPN.
func (c *Collector) Connections() []ConnState {
	c.mu.Lock()
	conns := make([]*connection, 0, len(c.conns))
	for _, conn := range c.conns {
		conns = append(conns, conn)
	}
	c.mu.Unlock()
	out := make([]ConnState, 0, len(conns))
	for _, conn := range conns {
		st := "unknown"
		if a, err := conn.qp.Query(); err == nil {
			st = a.State.String()
		}
		h := conn.hello
		out = append(out, ConnState{Translator: h.Name, Peer: conn.peer, IP: h.IP.String(), MAC: h.MAC,
			TranslatorQPN: h.QPN, QPN: conn.qp.QPN(), FirstPSN: h.PSN, State: st, Since: conn.since,
			Pushes: conn.pushes.Load(), RecvErrors: conn.recvErrors.Load()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].QPN < out[j].QPN })
	return out
}

// Pushes is the number of push notifications so far and the latest ones,
// oldest first.
func (c *Collector) Pushes() (uint64, []Push) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := min(c.nPush, recentPushes)
	out := make([]Push, 0, n)
	for i := c.nPush - n; i < c.nPush; i++ {
		out = append(out, c.lastPush[i%recentPushes])
	}
	return c.pushes.Load(), out
}
