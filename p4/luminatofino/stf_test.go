package luminatofino

import (
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/p4/stf"
	"github.com/rdma-appliance/appliance/translator/inject"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// TestSTF replays P4Testgen's tests of injector.p4 (the STF set and the
// PTF set, whose tests also set registers) against the software injector
// (translator/inject), the twin the lab runs: injectorModel maps each
// test's table entries and register cells onto an inject.Config and Table,
// sends the packet into the traffic port it names and collects what
// leaves the traffic ports. Mirrored copies are not part of a test
// (P4Testgen does not follow them), so the twin gets no dumper ports.
func TestSTF(t *testing.T) {
	unexpectedCells = 0
	rep := stf.Replay(t, "testdata/p4testgen/injector", injectorModel, injectorKnown)
	t.Logf("%d tests set a p4-mode conn_psn cell that expects no PSN", unexpectedCells)
	if rep.Passed != rep.Tests {
		t.Errorf("%d of %d tests pass against the twin", rep.Passed, rep.Tests)
	}
}

// unexpectedCells counts the p4-mode conn_psn cells with their low byte
// set that the replay gave the twin.
var unexpectedCells int

// injectorKnown are the tests whose expectation is wrong.
var injectorKnown = stf.Known{}

var stfSeq atomic.Int64

// injectorModel is the adapter: one injector per test.
func injectorModel(tc *stf.Test) ([]stf.Output, string, error) {
	// injector.p4 neither reads nor writes the IP and UDP lengths.
	tc.FixLengths()
	cfg := inject.Config{}
	// Dev ports become traffic ports in the order the test names them;
	// each port's MAC is what the program writes as the source of the
	// packets routed out of it (forward's smac) or answers ARP with.
	ports := map[int]int{}
	var devs []int
	macs := map[int]header.MAC{}
	port := func(dev int) int {
		if i, ok := ports[dev]; ok {
			return i
		}
		ports[dev] = len(devs)
		devs = append(devs, dev)
		return ports[dev]
	}
	setMAC := func(dev int, m header.MAC) string {
		if old, ok := macs[dev]; ok && old != m {
			return "two MACs for one port (the twin has one MAC per port)"
		}
		macs[dev] = m
		return ""
	}
	port(tc.InPort)
	var addrs = map[int][]netip.Addr{}
	var routes []inject.Route
	var discards []netip.Prefix
	var conns []intent.Conn
	var connIdx []int // each conn's register index (set_conn's idx)
	var entries []intent.Entry
	for _, e := range tc.Defaults {
		switch e.Table {
		case "Ingress.iter_mode":
			if e.Action == "Ingress.iter_p4" {
				cfg.IterMode = intent.IterP4
			}
		case "Ingress.wrr_cfg", "Egress.mirror_rewrite":
			// Mirroring only: nothing an STF test sees.
		default:
			return nil, "", fmt.Errorf("setdefault %s %s: no mapping onto the twin", e.Table, e.Action)
		}
	}
	for _, e := range tc.Adds {
		switch e.Table {
		case "Ingress.ipv4_fwd", "Ingress.ipv6_fwd":
			k, _ := e.Key("dst_addr")
			pfx, err := k.Prefix()
			if err != nil {
				return nil, "", err
			}
			switch e.Action {
			case "Ingress.forward":
				dev := int(e.Uint("port"))
				if why := setMAC(dev, header.MAC(e.Bytes("smac", 6))); why != "" {
					return nil, why, nil
				}
				routes = append(routes, inject.Route{Prefix: pfx, Port: port(dev), MAC: header.MAC(e.Bytes("dmac", 6))})
			case "Ingress.discard":
				discards = append(discards, pfx)
			default:
				return nil, "", fmt.Errorf("%s: action %s", e.Table, e.Action)
			}
		case "Ingress.arp_proxy":
			in, _ := e.Key("ingress_port")
			k, _ := e.Key("target_ip")
			pfx, err := k.Prefix()
			if err != nil {
				return nil, "", err
			}
			dev := int(in.Uint())
			switch e.Action {
			case "Ingress.arp_reply":
				// The twin answers for its own addresses on the port
				// and for prefixes routed out of another port, with
				// the port's MAC.
				if why := setMAC(dev, header.MAC(e.Bytes("mac", 6))); why != "" {
					return nil, why, nil
				}
				if pfx.Bits() == 32 {
					addrs[port(dev)] = append(addrs[port(dev)], pfx.Addr())
				} else {
					// A route out of a port the switch does not have
					// (dev ports stop at 511) stands for "another port".
					routes = append(routes, inject.Route{Prefix: pfx, Port: port(1<<9 + dev)})
				}
			case "Ingress.discard":
				// Routed out of the asking port: the host answers.
				routes = append(routes, inject.Route{Prefix: pfx, Port: port(dev)})
			default:
				return nil, "", fmt.Errorf("%s: action %s", e.Table, e.Action)
			}
		case "Ingress.connection":
			src, _ := e.Key("src_addr")
			dst, _ := e.Key("dst_addr")
			qpn, _ := e.Key("dst_qpn")
			conns = append(conns, intent.Conn{RequesterIP: netip.AddrFrom16([16]byte(src.Value())),
				ResponderIP: netip.AddrFrom16([16]byte(dst.Value())), ResponderQPN: uint32(qpn.Uint())})
			connIdx = append(connIdx, int(e.Uint("idx")))
		case "Ingress.event_psn", "Ingress.event_any":
			src, _ := e.Key("src_addr")
			dst, _ := e.Key("dst_addr")
			qpn, _ := e.Key("dst_qpn")
			iter, _ := e.Key("iter")
			key := intent.Key{Src: [16]byte(src.Value()), Dst: [16]byte(dst.Value()), DstQPN: uint32(qpn.Uint()),
				PSN: intent.AnyPSN, Iter: uint16(iter.Uint())}
			if psn, ok := e.Key("psn"); ok {
				key.PSN = uint32(psn.Uint())
			}
			// NoAction: an entry without an event, which in both shadows
			// a psn: all entry of the same round.
			ev, ok := map[string]mirror.EventType{"Ingress.drop": mirror.EventDrop, "Ingress.mark_ecn": mirror.EventECN,
				"Ingress.corrupt": mirror.EventBitError, "NoAction": mirror.EventNone}[e.Action]
			if !ok {
				return nil, "", fmt.Errorf("%s: action %s", e.Table, e.Action)
			}
			entries = append(entries, intent.Entry{Key: key, Event: ev})
		case "Ingress.wrr_session":
			// Mirroring only.
		default:
			return nil, "", fmt.Errorf("add %s: no mapping onto the twin", e.Table)
		}
	}
	for _, d := range discards {
		for _, r := range routes {
			if r.Prefix.Bits() < d.Bits() && r.Prefix.Contains(d.Addr()) {
				return nil, "a discard route inside a forwarding route (the twin has no discard routes)", nil
			}
		}
	}

	id := stfSeq.Add(1)
	pool, err := dpdk.NewPool(fmt.Sprintf("stf%d", id), 64, 10240)
	if err != nil {
		return nil, "", err
	}
	defer pool.Close()
	var hosts []*ring.Port
	for i, dev := range devs {
		l := ring.NewLink(fmt.Sprintf("stf%d-%d", id, i), ring.Config{RingSize: 64})
		defer l.A().Close()
		defer l.B().Close()
		l.A().SetMAC(macs[dev])
		cfg.Traffic = append(cfg.Traffic, inject.TrafficPort{Name: fmt.Sprint(dev), Port: l.A(), Addrs: addrs[i]})
		hosts = append(hosts, l.B())
	}
	cfg.Routes, cfg.Pool = routes, pool
	in, err := inject.New(cfg)
	if err != nil {
		return nil, "", err
	}
	if len(conns) > 0 {
		g := intent.Geometry{Verb: intent.VerbWrite, MessageSize: 1024, MTU: 1024, NumMessages: 1}
		if err := in.Table().Load(entries, conns, g, intent.Options{}); err != nil {
			return nil, "", err
		}
	}
	if why, err := setRounds(tc, in.Table(), cfg.IterMode, conns, connIdx); why != "" || err != nil {
		return nil, why, err
	}
	pkt := pool.Get()
	if pkt == nil || pkt.CopyFrom(tc.In) != len(tc.In) {
		return nil, "", fmt.Errorf("a %d-byte packet does not fit the pool", len(tc.In))
	}
	if hosts[ports[tc.InPort]].TxBurst(0, []*dpdk.Packet{pkt}) != 1 {
		return nil, "", fmt.Errorf("cannot send")
	}
	for in.Poll() {
	}
	var outs []stf.Output
	var burst [8]*dpdk.Packet
	for i, h := range hosts {
		n := h.RxBurst(0, burst[:])
		for _, p := range burst[:n] {
			outs = append(outs, stf.Output{Port: devs[i], Frame: append([]byte(nil), p.Data()...)})
			p.Free()
		}
	}
	return outs, "", nil
}

// setRounds writes a PTF test's conn_psn and conn_iter cells into the
// twin's ITER state of the connection with that index. conn_psn keeps
// PSN << 8 (the program and its control plane write nothing else); in
// paper mode the low byte does not change the comparison's outcome (see
// psn_paper), in p4 mode it makes every PSN unexpected, which the twin
// takes as a last PSN beyond 24 bits (SetRound).
func setRounds(tc *stf.Test, tab *inject.Table, mode intent.IterMode, conns []intent.Conn, idx []int) (string, error) {
	type cell struct {
		psn  uint32
		iter uint16
		set  int
	}
	cells := map[int]*cell{}
	for _, r := range tc.Registers {
		c := cells[r.Index]
		if c == nil {
			c = &cell{iter: 1}
			cells[r.Index] = c
		}
		switch r.Name {
		case "Ingress.conn_psn":
			v := uint32(r.Value.Uint64())
			c.psn, c.set = v>>8, c.set|1
			if mode == intent.IterP4 && v&0xff != 0 {
				c.psn |= roce.PSNMask + 1
				unexpectedCells++
			}
		case "Ingress.conn_iter":
			c.iter, c.set = uint16(r.Value.Uint64()), c.set|2
		case "Ingress.mirror_seq_lo", "Ingress.mirror_seq_hi", "Ingress.wrr_counter":
			// Mirroring only.
		default:
			return "", fmt.Errorf("register %s: no mapping onto the twin", r.Name)
		}
	}
	for i, c := range conns {
		cl := cells[idx[i]]
		if cl == nil {
			continue
		}
		if cl.set != 3 {
			return "", fmt.Errorf("connection %d: only one of conn_psn and conn_iter set", idx[i])
		}
		src, dst, qpn := intent.DataDirection(i, c, intent.Geometry{Verb: intent.VerbWrite}, intent.Options{})
		if err := tab.SetRound(src, dst, qpn, cl.psn, cl.iter); err != nil {
			return "", err
		}
	}
	return "", nil
}
