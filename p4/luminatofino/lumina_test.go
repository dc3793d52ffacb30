package luminatofino

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/p4/internal/bfrt"
	"github.com/rdma-appliance/appliance/p4/internal/p4test"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

const p4Path = "injector.p4"

func compile(t testing.TB, p *Program, intents []intent.Intent) {
	t.Helper()
	es, err := intent.Compile(intents, p.Conns, p.Geometry, p.Options)
	if err != nil {
		t.Fatal(err)
	}
	p.Entries = es
}

// listing2 is the paper's Listing 2 on the Figure 2 metadata: two
// connections, ten messages of 10240 B at MTU 1024 each, "mark the 4th
// packet of QP 1, drop the 5th packet of QP 2 and its retransmission",
// counted from 1 as the listing counts. The second connection's PSNs wrap.
func listing2(t testing.TB) Program {
	p := Program{
		Ports: []Port{
			{Name: "requester", DevPort: 128, Speed: "100G", FEC: "rs", AutoNeg: "off", MAC: p4test.MAC(t, "02:00:00:00:01:01"),
				Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.254")}},
			{Name: "responder", DevPort: 132, Speed: "100G", FEC: "rs", AutoNeg: "off", MAC: p4test.MAC(t, "02:00:00:00:01:02"),
				Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.254")}},
			{Name: "dumper0", DevPort: 136, Speed: "100G", FEC: "rs", AutoNeg: "off"},
		},
		Routes: []Route{
			{Prefix: netip.MustParsePrefix("10.0.0.2/32"), Port: "responder", MAC: p4test.MAC(t, "0c:42:a1:00:00:02")},
			{Prefix: netip.MustParsePrefix("10.0.0.1/32"), Port: "requester", MAC: p4test.MAC(t, "0c:42:a1:00:00:01")},
		},
		Dumpers:    []Dumper{{Port: "dumper0", Weight: 1}},
		MirrorSnap: 128,
		IterMode:   intent.IterPaper,
		Geometry:   intent.Geometry{Verb: intent.VerbWrite, MessageSize: 10240, MTU: 1024, NumMessages: 10},
		Options:    intent.Options{OneBased: true},
		Conns: []intent.Conn{
			{RequesterIP: netip.MustParseAddr("10.0.0.1"), RequesterQPN: 0xfe, RequesterIPSN: 1001,
				ResponderIP: netip.MustParseAddr("10.0.0.2"), ResponderQPN: 0xea, ResponderIPSN: 3002},
			{RequesterIP: netip.MustParseAddr("10.0.0.1"), RequesterQPN: 0xff, RequesterIPSN: 16777200,
				ResponderIP: netip.MustParseAddr("10.0.0.2"), ResponderQPN: 0xeb, ResponderIPSN: 7},
		},
	}
	compile(t, &p, []intent.Intent{
		{QP: 1, PSN: 4, Iter: 1, Type: mirror.EventECN},
		{QP: 2, PSN: 5, Iter: 1, Type: mirror.EventDrop},
		{QP: 2, PSN: 5, Iter: 2, Type: mirror.EventDrop},
	})
	return p
}

// psnAll is a READ test over IPv6 in the public P4's ITER mode, with
// front-panel ports, three dumpers of weights 1, 1 and 2, another rewrite
// port and psn: all intents (plus one with a PSN).
func psnAll(t testing.TB) Program {
	fp := func(name, panel string) Port {
		return Port{Name: name, FrontPanel: panel, Speed: "100G", FEC: "rs", MAC: p4test.MAC(t, "02:00:00:00:02:0"+panel[:1])}
	}
	p := Program{
		Name:  "lumina_injector",
		Ports: []Port{fp("host-a", "1/0"), fp("host-b", "2/0"), fp("dump-1", "3/0"), fp("dump-2", "4/0"), fp("dump-3", "5/0")},
		Routes: []Route{
			{Prefix: netip.MustParsePrefix("2001:db8::1/128"), Port: "host-a", MAC: p4test.MAC(t, "0c:42:a1:00:00:0a")},
			{Prefix: netip.MustParsePrefix("2001:db8::2/128"), Port: "host-b", MAC: p4test.MAC(t, "0c:42:a1:00:00:0b")},
		},
		Dumpers:     []Dumper{{Port: "dump-1", Weight: 1}, {Port: "dump-2", Weight: 1}, {Port: "dump-3", Weight: 2}},
		RewritePort: 9999,
		IterMode:    intent.IterP4,
		Geometry:    intent.Geometry{Verb: intent.VerbRead, MessageSize: 4096, MTU: 1024, NumMessages: 3},
		Conns: []intent.Conn{
			{RequesterIP: netip.MustParseAddr("2001:db8::1"), RequesterQPN: 0x11, RequesterIPSN: 0,
				ResponderIP: netip.MustParseAddr("2001:db8::2"), ResponderQPN: 0x21, ResponderIPSN: 500},
			{RequesterIP: netip.MustParseAddr("2001:db8::1"), RequesterQPN: 0x12, RequesterIPSN: 0xfffffe,
				ResponderIP: netip.MustParseAddr("2001:db8::2"), ResponderQPN: 0x22, ResponderIPSN: 600},
		},
	}
	compile(t, &p, []intent.Intent{
		{QP: 0, PSN: intent.AllPSNs, Iter: 2, Type: mirror.EventDrop},
		{QP: 1, PSN: intent.AllPSNs, Iter: 1, Type: mirror.EventECN},
		{QP: 1, PSN: 2, Iter: 3, Type: mirror.EventBitError},
	})
	return p
}

var examples = []struct {
	name string
	prog func(testing.TB) Program
}{
	{"listing2", listing2},
	{"psn_all", psnAll},
}

func TestGolden(t *testing.T) {
	for _, ex := range examples {
		t.Run(ex.name, func(t *testing.T) {
			p := ex.prog(t)
			s, err := p.Script()
			if err != nil {
				t.Fatal(err)
			}
			p4test.Golden(t, ex.name+".py", s)
			c, err := p.CounterScript()
			if err != nil {
				t.Fatal(err)
			}
			p4test.Golden(t, ex.name+"_counters.py", c)
		})
	}
}

// TestDeterministic: the script does not depend on the order of routes,
// ports or entries.
func TestDeterministic(t *testing.T) {
	for _, ex := range examples {
		p := ex.prog(t)
		want, err := p.Script()
		if err != nil {
			t.Fatal(err)
		}
		q := ex.prog(t)
		slices.Reverse(q.Ports)
		slices.Reverse(q.Routes)
		slices.Reverse(q.Entries)
		got, err := q.Script()
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: the script changes with the order of ports, routes or entries", ex.name)
		}
	}
}

func TestListing2Entries(t *testing.T) {
	p := listing2(t)
	s, err := p.Script()
	if err != nil {
		t.Fatal(err)
	}
	// Figure 2: the 4th packet of QP 1 is PSN 1001 + 4 - 1 = 1004.
	for _, want := range []string{
		"event_psn.add_with_mark_ecn(src_addr=ip('::ffff:10.0.0.1'), dst_addr=ip('::ffff:10.0.0.2'), dst_qpn=0xea, psn=1004, iter=1)",
		// The 5th packet of the second connection: 16777200 + 5 - 1, the
		// first message's only (Lumina's controller keys initial PSN + psn).
		"event_psn.add_with_drop(src_addr=ip('::ffff:10.0.0.1'), dst_addr=ip('::ffff:10.0.0.2'), dst_qpn=0xeb, psn=16777204, iter=2)",
		// Paper mode: last PSN = IPSN - 1 = 1000, << 8.
		"conn_psn.mod(REGISTER_INDEX=0, f1=0x3e800)",
		"iter_mode.set_default_with_iter_paper()",
		"mirror_rewrite.set_default_with_rewrite(dst_port=9741)",
		"max_pkt_len=128",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("the script lacks %q", want)
		}
	}
	if n := strings.Count(s, ".event_psn.add_with_"); n != 3 {
		t.Errorf("%d event_psn entries, want one per intent", n)
	}
}

func TestWRRSlots(t *testing.T) {
	p := psnAll(t)
	slots := p.wrrSlots()
	// Smooth WRR over weights 1, 1, 2: the heavy dumper every other slot.
	if want := []int{2, 0, 1, 2}; !slices.Equal(slots, want) {
		t.Errorf("slots %v, want %v", slots, want)
	}
	s, err := p.Script()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s, "wrr_cfg.set_default_with_set_wrr(last=3)") {
		t.Error("the cycle of total weight 4 should end at slot 3")
	}
}

// TestDataKeyMatchesCompile: dataKey, which the connection table and the
// register indices use, is the direction intent.Compile keys entries with.
func TestDataKeyMatchesCompile(t *testing.T) {
	for _, verb := range []intent.Verb{intent.VerbWrite, intent.VerbRead, intent.VerbSend, intent.VerbSendRead} {
		p := listing2(t)
		p.Geometry.Verb = verb
		p.Options = intent.Options{SendConns: 1}
		var intents []intent.Intent
		for i := range p.Conns {
			intents = append(intents, intent.Intent{QP: i, PSN: 0, Iter: 1, Type: mirror.EventDrop})
		}
		es, err := intent.Compile(intents, p.Conns, p.Geometry, p.Options)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			k := dataKey(e.Intent, p.Conns[e.Intent], p.Geometry, p.Options)
			if k != (connKey{Src: e.Key.Src, Dst: e.Key.Dst, DstQPN: e.Key.DstQPN}) {
				t.Errorf("%s: entry %v: data direction %v", verb, e, k)
			}
		}
	}
}

// TestNamesExistInP4 checks every table, action, key, action parameter,
// register and counter the generated scripts name against injector.p4,
// and that the scripts fill every table and register the program has.
func TestNamesExistInP4(t *testing.T) {
	ps := p4test.Parse(t, p4Path)
	used := map[string]bool{}
	for _, ex := range examples {
		p := ex.prog(t)
		s, err := p.Script()
		if err != nil {
			t.Fatal(err)
		}
		c, err := p.CounterScript()
		if err != nil {
			t.Fatal(err)
		}
		p4test.CheckScript(t, ps, p.name(), ex.name+".py", s, used)
		p4test.CheckScript(t, ps, p.name(), ex.name+"_counters.py", c, used)
	}
	p4test.CheckCovered(t, ps, used)
}

// TestSizesMatchP4: the Go limits are the program's.
func TestSizesMatchP4(t *testing.T) {
	ps := p4test.Parse(t, p4Path)
	// The per-port counters are indexed by dev port: every dev port the
	// port check lets through needs one.
	if PortSlots < bfrt.DevPorts {
		t.Errorf("PortSlots %d: dev ports go up to %d", PortSlots, bfrt.DevPorts-1)
	}
	for name, want := range map[string]uint64{"CONN_SLOTS": ConnSlots, "PORT_SLOTS": PortSlots,
		"EVENT_PSN_SIZE": EventPSNSize, "EVENT_ANY_SIZE": EventAnySize, "FWD_SIZE": FwdSize, "ARP_SIZE": ARPSize,
		"WRR_SLOTS": WRRSlots, "EVENT_SLOTS": PortSlots * 4, "DEFAULT_REWRITE_PORT": mirror.DefaultRewritePort,
		"ROCE_UDP_PORT": roce.UDPPort} {
		if got, ok := ps.Consts[name]; !ok || got != want {
			t.Errorf("injector.p4 %s = %d (declared %v), Go says %d", name, got, ok, want)
		}
	}
	for tab, want := range map[string]uint64{"Ingress.connection": ConnSlots, "Ingress.event_psn": EventPSNSize,
		"Ingress.event_any": EventAnySize, "Ingress.ipv4_fwd": FwdSize, "Ingress.ipv6_fwd": FwdSize,
		"Ingress.arp_proxy": ARPSize, "Ingress.wrr_session": WRRSlots} {
		if got := ps.Tables[tab]; got == nil || got.Size != want {
			t.Errorf("table %s: size %v, want %d", tab, got, want)
		}
	}
	for reg, want := range map[string]uint64{"Ingress.conn_psn": ConnSlots, "Ingress.conn_iter": ConnSlots} {
		if got := ps.Registers[reg]; got != want {
			t.Errorf("register %s: size %d, want %d", reg, got, want)
		}
	}
	for cnt, want := range map[string]uint64{"Ingress.rx_pkts": PortSlots, "Ingress.rx_roce_pkts": PortSlots,
		"Ingress.event_pkts": PortSlots * 4, "Egress.tx_pkts": PortSlots, "Egress.mirrored_pkts": PortSlots} {
		if got := ps.Counters[cnt]; got != want {
			t.Errorf("counter %s: size %d, want %d", cnt, got, want)
		}
	}
	// The event codes are Lumina's.
	for name, ev := range map[string]mirror.EventType{"EVENT_NONE": mirror.EventNone, "EVENT_DROP": mirror.EventDrop,
		"EVENT_ECN": mirror.EventECN, "EVENT_BIT_ERROR": mirror.EventBitError} {
		if got, ok := ps.Consts[name]; !ok || got != uint64(ev) {
			t.Errorf("injector.p4 %s = %d, want %d", name, got, ev)
		}
	}
}

// TestOpcodeTableMatchesRoCE: roce_opcode's const entries are exactly the
// RC and UC opcodes with payload, data_first for the first and only
// packets of a message, which is what inject.Table.Lookup tracks.
func TestOpcodeTableMatchesRoCE(t *testing.T) {
	ps := p4test.Parse(t, p4Path)
	got := map[uint64]string{}
	for _, e := range ps.Entries["Ingress.roce_opcode"] {
		if _, dup := got[e.Key]; dup {
			t.Errorf("opcode %#x listed twice", e.Key)
		}
		got[e.Key] = e.Action
	}
	for op := range 256 {
		info := roce.OpcodeInfo(roce.Opcode(op))
		want := ""
		if info.Valid && info.Payload && (info.Transport == roce.TransportRC || info.Transport == roce.TransportUC) {
			want = "data_rest"
			if info.Position.IsStart() {
				want = "data_first"
			}
		}
		if got[uint64(op)] != want {
			t.Errorf("opcode %#02x (%s): injector.p4 says %q, want %q", op, info.Name, got[uint64(op)], want)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, ex := range examples {
		p := ex.prog(t)
		if err := p.Validate(); err != nil {
			t.Errorf("%s: %v", ex.name, err)
		}
	}
	zero := Program{Ports: []Port{{Name: "a", DevPort: 0, Speed: "10G", FEC: "none", MAC: p4test.MAC(t, "02:00:00:00:00:01")}}}
	if _, err := zero.Script(); err != nil {
		t.Errorf("a program with one port and nothing else: %v", err)
	}
	var errs strings.Builder
	cases := []struct {
		field string
		edit  func(p *Program)
	}{
		{"name", func(p *Program) { p.Name = "my-prog" }},
		{"ports:", func(p *Program) { p.Ports = nil }},
		{"ports[0].name", func(p *Program) { p.Ports[0].Name = "1st" }},
		{"ports[1].name", func(p *Program) { p.Ports[1].Name = p.Ports[0].Name }},
		{"ports[1].name", func(p *Program) { p.Ports[0].Name, p.Ports[1].Name = "a-b", "a_b" }},
		{"ports[0].dev_port", func(p *Program) { p.Ports[0].DevPort = 100 }},
		{"ports[0].dev_port", func(p *Program) { p.Ports[0].DevPort = 512 }},
		{"ports[0].front_panel", func(p *Program) { p.Ports[0].FrontPanel = "1:0" }},
		{"ports[0].front_panel", func(p *Program) { p.Ports[0].FrontPanel = "66/0" }},
		{"ports[2].speed", func(p *Program) { p.Ports[2].Speed = "400G" }},
		{"ports[2].fec", func(p *Program) { p.Ports[2].FEC = "" }},
		{"ports[2].autoneg", func(p *Program) { p.Ports[2].AutoNeg = "maybe" }},
		{"ports[0].mac", func(p *Program) { p.Ports[0].MAC = header.MAC{} }},
		{"ports[0].addrs[0]", func(p *Program) { p.Ports[0].Addrs = []netip.Addr{netip.MustParseAddr("fe80::1")} }},
		{"ports[2].addrs", func(p *Program) { p.Ports[2].Addrs = []netip.Addr{netip.MustParseAddr("10.0.0.9")} }},
		{"ports[1].dev_port", func(p *Program) { p.Ports[1].DevPort = 4 }}, // another pipe than the requester
		{"dumpers[0].port", func(p *Program) { p.Dumpers[0].Port = "nope" }},
		{"dumpers[1].port", func(p *Program) { p.Dumpers = append(p.Dumpers, p.Dumpers[0]) }},
		{"dumpers[0].weight", func(p *Program) { p.Dumpers[0].Weight = -1 }},
		{"dumpers:", func(p *Program) { p.Dumpers[0].Weight = WRRSlots + 1 }},
		{"routes[0].prefix", func(p *Program) { p.Routes[0].Prefix = netip.MustParsePrefix("10.0.0.3/24") }},
		{"routes[1].prefix", func(p *Program) { p.Routes[1].Prefix = p.Routes[0].Prefix }},
		{"routes[0].prefix", func(p *Program) { p.Routes[0].Prefix = netip.Prefix{} }},
		{"routes[0].port", func(p *Program) { p.Routes[0].Port = "dumper0" }},
		{"routes[0].port", func(p *Program) { p.Routes[0].Port = "elsewhere" }},
		{"routes[0].mac", func(p *Program) { p.Routes[0].MAC = header.BroadcastMAC }},
		{"rewrite_port", func(p *Program) { p.RewritePort = 4791 }},
		{"mirror_snap", func(p *Program) { p.MirrorSnap = 40 }},
		{"iter_mode", func(p *Program) { p.IterMode = 7 }},
		{"geometry", func(p *Program) { p.Geometry.MTU = 1000 }},
		{"options.send_conns", func(p *Program) { p.Options.SendConns = 3 }},
		{"conns[1].responder_ip", func(p *Program) { p.Conns[1].ResponderIP = netip.MustParseAddr("2001:db8::2") }},
		{"conns[1].requester_ip", func(p *Program) { p.Conns[1].RequesterIP = netip.Addr{} }},
		{"conns[0].responder_qpn", func(p *Program) { p.Conns[0].ResponderQPN = 1 << 24 }},
		{"conns[0].requester_ipsn", func(p *Program) { p.Conns[0].RequesterIPSN = 1 << 24 }},
		{"conns[1]:", func(p *Program) { p.Conns[1].ResponderQPN = p.Conns[0].ResponderQPN }},
		{"entries[0].event", func(p *Program) { p.Entries[0].Event = mirror.EventNone }},
		{"entries[0].key.iter", func(p *Program) { p.Entries[0].Key.Iter = 0 }},
		{"entries[0].key.psn", func(p *Program) { p.Entries[0].Key.PSN = 1 << 25 }},
		{"entries[0].key:", func(p *Program) { p.Entries[0].Key.DstQPN = 0x123 }},
		{"entries[1].key:", func(p *Program) { p.Entries[1] = p.Entries[0] }},
		{"entries[0].key:", func(p *Program) { p.Conns = nil }},
	}
	for _, c := range cases {
		p := listing2(t)
		// Deep enough copies for the edits above.
		p.Ports = slices.Clone(p.Ports)
		p.Routes = slices.Clone(p.Routes)
		p.Dumpers = slices.Clone(p.Dumpers)
		p.Conns = slices.Clone(p.Conns)
		p.Entries = slices.Clone(p.Entries)
		c.edit(&p)
		_, err := p.Script()
		p4test.ExpectBad(t, ErrProgram, c.field, err)
		if _, err2 := p.CounterScript(); err2 == nil {
			t.Errorf("%s: CounterScript accepts what Script rejects", c.field)
		}
		if err != nil {
			fmt.Fprintln(&errs, err)
		}
	}
	// Limits of the tables.
	p := listing2(t)
	p.Entries = nil
	for i := range EventPSNSize + 1 {
		p.Entries = append(p.Entries, intent.Entry{Key: intent.Key{Src: p.Conns[0].RequesterIP.As16(),
			Dst: p.Conns[0].ResponderIP.As16(), DstQPN: p.Conns[0].ResponderQPN, PSN: uint32(i % (1 << 24)), Iter: 1},
			Event: mirror.EventDrop})
	}
	err := p.Validate()
	if err == nil || !strings.Contains(err.Error(), "event_psn holds") {
		t.Errorf("too many entries: %v", err)
	}
	fmt.Fprintln(&errs, err)
	p = listing2(t)
	p.Entries = nil
	for i := range EventAnySize + 1 {
		p.Entries = append(p.Entries, intent.Entry{Key: intent.Key{Src: p.Conns[0].RequesterIP.As16(),
			Dst: p.Conns[0].ResponderIP.As16(), DstQPN: p.Conns[0].ResponderQPN, PSN: intent.AnyPSN, Iter: uint16(i + 1)},
			Event: mirror.EventDrop})
	}
	fmt.Fprintln(&errs, p.Validate())
	p = listing2(t)
	p.Entries = nil
	for i := range ConnSlots + 1 {
		c := p.Conns[0]
		c.RequesterQPN = uint32(i)
		p.Conns = append(p.Conns, c)
	}
	fmt.Fprintln(&errs, p.Validate())
	p = listing2(t)
	for i := range FwdSize + 1 {
		p.Routes = append(p.Routes, Route{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), 32),
			Port: "responder", MAC: p.Routes[0].MAC})
	}
	fmt.Fprintln(&errs, p.Validate())
	p = listing2(t)
	for i := range ARPSize / 2 {
		p.Routes = append(p.Routes, Route{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), 32),
			Port: "responder", MAC: p.Routes[0].MAC})
	}
	fmt.Fprintln(&errs, p.Validate())
	// Each error in full, so that a change of wording or of the order
	// the fields are checked in shows.
	p4test.Golden(t, "validate_errors.txt", errs.String())
}

// TestNamesInCompiledProgram checks the scripts' names against what
// bf-p4c compiled injector.p4 into (its bfrt.json): the names the
// switch's bfrt_python will know.
func TestNamesInCompiledProgram(t *testing.T) {
	ps := p4test.Compiled(t, p4Path)
	used := map[string]bool{}
	for _, ex := range examples {
		p := ex.prog(t)
		s, err := p.Script()
		if err != nil {
			t.Fatal(err)
		}
		c, err := p.CounterScript()
		if err != nil {
			t.Fatal(err)
		}
		p4test.CheckScript(t, ps, p.name(), ex.name+".py", s, used)
		p4test.CheckScript(t, ps, p.name(), ex.name+"_counters.py", c, used)
	}
}
