package luminatofino

import (
	"fmt"
	"net/netip"

	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/translator/inject"
)

// FromSpec builds the Program of a Tofino injector from the file that
// also configures the software injector (its Tofino keys: front-panel or
// dev-port, speed, fec, autoneg, mac) and a test's load request (intents,
// runtime metadata, geometry), compiling the intents the way the software
// injector's POST /v1/load does. The spec must have been validated.
func FromSpec(s inject.Spec, req inject.LoadRequest) (Program, error) {
	p := Program{Name: s.Name, RewritePort: uint16(s.RewriteUDPDstPort), MirrorSnap: s.MirrorSnap,
		Geometry: req.Geometry, Options: intent.Options{SendConns: req.SendConns, OneBased: req.OneBased},
		Conns: req.Conns}
	var err error
	if p.IterMode, err = intent.ParseIterMode(s.IterMode); err != nil {
		return Program{}, err
	}
	if b, _ := inject.ParseBalance(s.Balance); b != inject.BalanceWRR {
		return Program{}, fmt.Errorf("lumina: balance %q: the Tofino program mirrors by weighted round-robin only", s.Balance)
	}
	for i, ps := range s.Ports {
		port := Port{Name: ps.Name, FrontPanel: ps.FrontPanel, DevPort: ps.DevPort, Speed: ps.Speed, FEC: ps.FEC,
			AutoNeg: ps.AutoNeg}
		if ps.MAC != "" {
			if port.MAC, err = header.ParseMAC(ps.MAC); err != nil {
				return Program{}, fmt.Errorf("lumina: ports[%d].mac: %w", i, err)
			}
		}
		for _, a := range ps.Addrs {
			addr, err := netip.ParseAddr(a)
			if err != nil {
				return Program{}, fmt.Errorf("lumina: ports[%d].addrs: %w", i, err)
			}
			port.Addrs = append(port.Addrs, addr.Unmap())
		}
		p.Ports = append(p.Ports, port)
		if ps.Role == "mirror" {
			p.Dumpers = append(p.Dumpers, Dumper{Port: ps.Name, Weight: ps.Weight})
		}
	}
	for i, r := range s.Routes {
		pfx, err := inject.RoutePrefix(r.Prefix)
		if err != nil {
			return Program{}, fmt.Errorf("lumina: routes[%d].prefix: %w", i, err)
		}
		m, err := header.ParseMAC(r.MAC)
		if err != nil {
			return Program{}, fmt.Errorf("lumina: routes[%d].mac: %w", i, err)
		}
		p.Routes = append(p.Routes, Route{Prefix: pfx, Port: r.Port, MAC: m})
	}
	if p.Entries, err = intent.Compile(req.Intents, req.Conns, req.Geometry, p.Options); err != nil {
		return Program{}, err
	}
	return p, p.Validate()
}
