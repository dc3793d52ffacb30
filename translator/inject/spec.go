package inject

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/internal/spec"
)

// Spec is an injector's configuration file (`appliance inject run -f`):
// its ports, routes and mirror settings. The same file describes a Tofino
// injector for `appliance inject bfrt` (front-panel port, speed, FEC);
// each side ignores the keys of the other. Intents and runtime metadata
// do not belong here: they arrive per test over POST /v1/load.
type Spec struct {
	// Name is the P4 program's name in bfrt (Tofino only).
	Name string `yaml:"name"`
	// Listen is the HTTP control address.
	Listen string `yaml:"listen"`
	// IterMode is paper or p4; Balance wrr, flow-hash or ingress-port.
	IterMode string `yaml:"iter-mode"`
	Balance  string `yaml:"balance"`
	// RewriteUDPDstPort is Lumina's rewrite-udp-dst-port.
	RewriteUDPDstPort int `yaml:"rewrite-udp-dst-port"`
	// MirrorSnap truncates mirrored copies (0: whole packets).
	MirrorSnap int  `yaml:"mirror-snap"`
	DecTTL     bool `yaml:"dec-ttl"`
	// Core pins the pipeline loop; -1 (or absent) leaves it unpinned.
	Core  *int `yaml:"core"`
	Burst int  `yaml:"burst"`
	// Pool is the number of packet buffers for copies and ARP replies.
	Pool   int         `yaml:"pool"`
	Ports  []PortSpec  `yaml:"ports"`
	Routes []RouteSpec `yaml:"routes"`
}

// PortSpec is one port of the injector.
type PortSpec struct {
	Name string `yaml:"name"`
	// Role is traffic (towards a test host) or mirror (towards a dumper).
	Role string `yaml:"role"`
	// Port is the software injector's port string (driver:device).
	Port string `yaml:"port"`
	// Queues of a mirror port stand for the dumper NIC's RSS queues.
	Queues int `yaml:"queues"`
	// Addrs are the injector's own addresses on a traffic port.
	Addrs []string `yaml:"addrs"`
	// Weight is a mirror port's share of the copies (its dumper's
	// capacity); 0 counts as 1.
	Weight int `yaml:"weight"`
	// Tofino: front panel "conn/chnl" or dev port, speed, FEC, autoneg,
	// and the switch MAC on a traffic port.
	FrontPanel string `yaml:"front-panel"`
	DevPort    int    `yaml:"dev-port"`
	Speed      string `yaml:"speed"`
	FEC        string `yaml:"fec"`
	AutoNeg    string `yaml:"autoneg"`
	MAC        string `yaml:"mac"`
}

// RouteSpec sends packets for Prefix out of the traffic port named Port to
// the next hop MAC.
type RouteSpec struct {
	Prefix string `yaml:"prefix"`
	Port   string `yaml:"port"`
	MAC    string `yaml:"mac"`
}

var portNameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]*$`)

// LoadSpec reads and validates an injector file; every problem is
// reported with its file, line and key.
func LoadSpec(path string) (Spec, error) {
	return spec.LoadAs[Spec](path)
}

// DecodeSpec is LoadSpec for YAML held in memory; name is used in errors.
func DecodeSpec(name string, data []byte) (Spec, error) {
	return spec.DecodeAs[Spec](name, data)
}

// Validate records every problem of s in doc.
func (s *Spec) Validate(doc *spec.Doc) {
	if _, err := intent.ParseIterMode(s.IterMode); err != nil {
		doc.Errorf("iter-mode", "%q: want paper or p4", s.IterMode)
	}
	if _, err := ParseBalance(s.Balance); err != nil {
		doc.Errorf("balance", "%q: want wrr, flow-hash or ingress-port", s.Balance)
	}
	if s.RewriteUDPDstPort < 0 || s.RewriteUDPDstPort > 65535 {
		doc.Errorf("rewrite-udp-dst-port", "%d is not a UDP port", s.RewriteUDPDstPort)
	}
	if s.MirrorSnap != 0 && s.MirrorSnap < 64 {
		doc.Errorf("mirror-snap", "%d: 0 (whole packets) or at least 64 bytes, so copies keep their headers", s.MirrorSnap)
	}
	if s.Burst < 0 || s.Burst > 1024 {
		doc.Errorf("burst", "%d: want 1..1024", s.Burst)
	}
	if s.Pool < 0 {
		doc.Errorf("pool", "negative")
	}
	names := map[string]string{}
	traffic := 0
	for i, p := range s.Ports {
		key := fmt.Sprintf("ports[%d]", i)
		if !portNameRE.MatchString(p.Name) {
			doc.Errorf(key+".name", "%q: letters, digits, '_' and '-', starting with a letter", p.Name)
		} else if _, dup := names[p.Name]; dup {
			doc.Errorf(key+".name", "%q named twice", p.Name)
		}
		names[p.Name] = p.Role
		switch p.Role {
		case "traffic":
			traffic++
			if p.Weight != 0 {
				doc.Errorf(key+".weight", "only mirror ports have a weight")
			}
		case "mirror":
			if p.Weight < 0 {
				doc.Errorf(key+".weight", "negative")
			}
			if len(p.Addrs) > 0 {
				doc.Errorf(key+".addrs", "a mirror port has no addresses")
			}
		default:
			doc.Errorf(key+".role", "%q: want traffic or mirror", p.Role)
		}
		if p.Queues < 0 || p.Queues > 64 {
			doc.Errorf(key+".queues", "%d: want 1..64", p.Queues)
		}
		for j, a := range p.Addrs {
			if _, err := netip.ParseAddr(a); err != nil {
				doc.Errorf(fmt.Sprintf("%s.addrs[%d]", key, j), "%q is not an IP address", a)
			}
		}
		if p.MAC != "" {
			if _, err := header.ParseMAC(p.MAC); err != nil {
				doc.Errorf(key+".mac", "%q is not a MAC address", p.MAC)
			}
		}
	}
	if traffic == 0 {
		doc.Errorf("ports", "no traffic port")
	}
	for i, r := range s.Routes {
		key := fmt.Sprintf("routes[%d]", i)
		if _, err := RoutePrefix(r.Prefix); err != nil {
			doc.Errorf(key+".prefix", "%q is not an address or prefix", r.Prefix)
		}
		if role, ok := names[r.Port]; !ok {
			doc.Errorf(key+".port", "%q: no such port", r.Port)
		} else if role != "traffic" {
			doc.Errorf(key+".port", "%q is a %s port; routes go out of traffic ports", r.Port, role)
		}
		if _, err := header.ParseMAC(r.MAC); err != nil {
			doc.Errorf(key+".mac", "%q is not a MAC address", r.MAC)
		}
	}
}

// ParseBalance parses "wrr" (or empty), "flow-hash" and "ingress-port".
func ParseBalance(s string) (Balance, error) {
	switch s {
	case "wrr", "":
		return BalanceWRR, nil
	case "flow-hash":
		return BalanceFlowHash, nil
	case "ingress-port":
		return BalanceIngressPort, nil
	}
	return 0, fmt.Errorf("inject: balance %q (wrr, flow-hash or ingress-port)", s)
}

// String is the balance's name in the injector's file.
func (b Balance) String() string {
	switch b {
	case BalanceFlowHash:
		return "flow-hash"
	case BalanceIngressPort:
		return "ingress-port"
	}
	return "wrr"
}

// RoutePrefix parses a route's prefix; a bare address is a host route.
func RoutePrefix(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// Config builds the injector configuration of a validated Spec, opening
// each port with open (the CLI opens port strings with dpdk.Open, the lab
// hands out ring ends). It returns the opened ports so the caller closes
// them; on error the ports opened so far are closed.
func (s *Spec) Config(pool *dpdk.Pool, open func(PortSpec) (dpdk.Port, error)) (Config, []dpdk.Port, error) {
	cfg := Config{Pool: pool, MirrorSnap: s.MirrorSnap, DecTTL: s.DecTTL, Burst: s.Burst,
		RewritePort: uint16(s.RewriteUDPDstPort)}
	var err error
	if cfg.IterMode, err = intent.ParseIterMode(s.IterMode); err != nil {
		return Config{}, nil, err
	}
	if cfg.Balance, err = ParseBalance(s.Balance); err != nil {
		return Config{}, nil, err
	}
	var opened []dpdk.Port
	fail := func(err error) (Config, []dpdk.Port, error) {
		for _, p := range opened {
			p.Close()
		}
		return Config{}, nil, err
	}
	traffic := map[string]int{}
	for _, ps := range s.Ports {
		port, err := open(ps)
		if err != nil {
			return fail(fmt.Errorf("port %s: %w", ps.Name, err))
		}
		opened = append(opened, port)
		if ps.Role == "mirror" {
			cfg.Mirrors = append(cfg.Mirrors, MirrorPort{Name: ps.Name, Port: port, Weight: max(ps.Weight, 1)})
			continue
		}
		tp := TrafficPort{Name: ps.Name, Port: port}
		for _, a := range ps.Addrs {
			addr, err := netip.ParseAddr(a)
			if err != nil {
				return fail(fmt.Errorf("port %s: %w", ps.Name, err))
			}
			tp.Addrs = append(tp.Addrs, addr.Unmap())
		}
		traffic[ps.Name] = len(cfg.Traffic)
		cfg.Traffic = append(cfg.Traffic, tp)
	}
	if cfg.Routes, err = s.routes(traffic); err != nil {
		return fail(err)
	}
	return cfg, opened, nil
}

// routes resolves the routes' ports (traffic port name to index).
func (s *Spec) routes(traffic map[string]int) ([]Route, error) {
	var out []Route
	for _, r := range s.Routes {
		pfx, err := RoutePrefix(r.Prefix)
		if err != nil {
			return nil, fmt.Errorf("route %s: %w", r.Prefix, err)
		}
		mac, err := header.ParseMAC(r.MAC)
		if err != nil {
			return nil, fmt.Errorf("route %s: %w", r.Prefix, err)
		}
		i, ok := traffic[r.Port]
		if !ok {
			return nil, fmt.Errorf("route %s: no traffic port %q", r.Prefix, r.Port)
		}
		out = append(out, Route{Prefix: pfx, Port: i, MAC: mac})
	}
	return out, nil
}

// Update is what a running injector can change without a restart (a
// reload): routes, the mirror ports' weights (in their order), the
// balancing, the mirrored copies' snap length and UDP destination port,
// and the TTL decrement.
type Update struct {
	Routes      []Route
	Weights     []int
	Balance     Balance
	MirrorSnap  int
	RewritePort uint16
	DecTTL      bool
}

// Update is the reloadable part of s, a changed version of the running
// spec old. A change that needs a restart (the ports, the loop's core,
// burst or pool, the iteration mode, the listen address) is an error
// naming the key, so a reload changes all it is asked to or nothing.
func (s *Spec) Update(old *Spec) (Update, error) {
	restart := func(key string) (Update, error) {
		return Update{}, fmt.Errorf("inject: %s changed: restart the injector to apply it (nothing was reloaded)", key)
	}
	switch {
	case s.Listen != old.Listen:
		return restart("listen")
	case s.IterMode != old.IterMode:
		return restart("iter-mode")
	case s.Burst != old.Burst:
		return restart("burst")
	case s.Pool != old.Pool:
		return restart("pool")
	case (s.Core == nil) != (old.Core == nil) || s.Core != nil && *s.Core != *old.Core:
		return restart("core")
	case len(s.Ports) != len(old.Ports):
		return restart("ports")
	}
	traffic := map[string]int{}
	u := Update{MirrorSnap: s.MirrorSnap, RewritePort: uint16(s.RewriteUDPDstPort), DecTTL: s.DecTTL}
	if u.RewritePort == 0 {
		u.RewritePort = mirror.DefaultRewritePort
	}
	for i, p := range s.Ports {
		o := old.Ports[i]
		if p.Name != o.Name || p.Role != o.Role || p.Port != o.Port || p.Queues != o.Queues || !slices.Equal(p.Addrs, o.Addrs) {
			return restart(fmt.Sprintf("ports[%d] (%s)", i, o.Name))
		}
		if p.Role == "mirror" {
			u.Weights = append(u.Weights, max(p.Weight, 1))
		} else {
			traffic[p.Name] = len(traffic)
		}
	}
	var err error
	if u.Balance, err = ParseBalance(s.Balance); err != nil {
		return Update{}, err
	}
	if u.Routes, err = s.routes(traffic); err != nil {
		return Update{}, err
	}
	return u, nil
}
