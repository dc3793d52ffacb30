package lumina

import (
	"cmp"
	"fmt"
	"math/bits"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/internal/spec"
	"github.com/rdma-appliance/appliance/verbs"
)

// TestSpec is a Lumina test file, key for key as Lumina's orchestrator
// reads it, so existing test files run unchanged.
type TestSpec struct {
	LocalWorkspace        string     `yaml:"local-workspace"`
	ResultPath            string     `yaml:"result-path"`
	AggregatePcapFilename string     `yaml:"aggregate-pcap-filename"`
	RewriteUDPDstPort     int        `yaml:"rewrite-udp-dst-port"`
	NumRepeats            int        `yaml:"num-repeats"`
	Switch                SwitchSpec `yaml:"switch"`
	Requester             HostSpec   `yaml:"requester"`
	Responder             HostSpec   `yaml:"responder"`
	RequesterMirror       MirrorSpec `yaml:"requester-mirror"`
	ResponderMirror       MirrorSpec `yaml:"responder-mirror"`
	Traffic               Traffic    `yaml:"traffic"`
}

// Access is how the orchestrator reaches a machine.
type Access struct {
	Workspace      string `yaml:"workspace"`
	ControlIP      string `yaml:"control-ip"`
	Username       string `yaml:"username"`
	SSHKeyFilepath string `yaml:"ssh-key-filepath"`
}

// SwitchSpec is the Tofino (or software injector) of the test.
type SwitchSpec struct {
	SDEPath               string `yaml:"sde-path"`
	Workspace             string `yaml:"workspace"`
	ControlIP             string `yaml:"control-ip"`
	Username              string `yaml:"username"`
	SSHKeyFilepath        string `yaml:"ssh-key-filepath"`
	PortSpeed             string `yaml:"port-speed"`
	FECType               string `yaml:"fec-type"`
	ListenPort            int    `yaml:"listen-port"`
	LocalSwitchConfigPath string `yaml:"local-switch-config-path"`
}

// HostSpec is the requester or the responder.
type HostSpec struct {
	Access         `yaml:",inline"`
	NIC            NICSpec        `yaml:"nic"`
	RoCEParameters RoCEParameters `yaml:"roce-parameters"`
}

// NICSpec is a host's RNIC (or a mirror host's NIC).
type NICSpec struct {
	Type       string `yaml:"type,omitempty"` // CX4, CX5, CX6, E810
	IfName     string `yaml:"if-name,omitempty"`
	PCIAddr    string `yaml:"pci-addr,omitempty"`
	IBDevice   string `yaml:"ib-device,omitempty"`
	IBPort     int    `yaml:"ib-port,omitempty"`
	SwitchPort int    `yaml:"switch-port,omitempty"`
	// IPList holds the NIC's addresses as Lumina writes them: with a
	// prefix ("10.0.0.1/24", what `ip addr replace` assigns) or bare
	// (a host address). The address part is the GID and the match key.
	IPList []string `yaml:"ip-list,omitempty"`
	// PrioDSCPMap maps a priority (0..7) to the DSCP values that select
	// it, written as Lumina's host code takes them: "07,06,05,...".
	// Absent, Lumina's default map applies (DSCP 8p..8p+7 -> prio p).
	PrioDSCPMap map[int]string `yaml:"prio-dscp-map,omitempty"`
	// RtePortID is a mirror NIC's DPDK port id.
	RtePortID int `yaml:"rte-port-id,omitempty"`
}

// RoCEParameters are the RNIC settings a test applies. The ConnectX keys
// are mlx5's sysfs and ROCE_ACCL knobs; E810 has a single switch,
// dcqcn-enable (irdma's roce_dcqcn_enable), which Lumina's host code reads
// for Intel NICs instead of the others.
type RoCEParameters struct {
	DCQCNRPEnable bool `yaml:"dcqcn-rp-enable"`
	DCQCNNPEnable bool `yaml:"dcqcn-np-enable"`
	// MinTimeBetweenCNPs is in microseconds, as mlx5's sysfs knob.
	MinTimeBetweenCNPs int  `yaml:"min-time-between-cnps"`
	AdaptiveRetrans    bool `yaml:"adaptive-retrans"`
	SlowRestart        bool `yaml:"slow-restart"`
	// DCQCNEnable is the E810's; nil when the file does not say.
	DCQCNEnable *bool `yaml:"dcqcn-enable,omitempty"`
}

// MirrorSpec is a dumper host.
type MirrorSpec struct {
	Access      `yaml:",inline"`
	PktDumpConf PktDumpConf `yaml:"pkt-dump-conf"`
	NIC         NICSpec     `yaml:"nic"`
}

// PktDumpConf is the dumper's capture settings.
type PktDumpConf struct {
	DumpFilename string `yaml:"dump-filename"`
	SnapLen      int    `yaml:"snap-len"`
	NumPkts      int    `yaml:"num-pkts"`
}

// Traffic is the traffic generator's part.
type Traffic struct {
	// NumQPs is a count, or "a,b" for send_read (a SEND QPs, b READ QPs).
	NumQPs               string      `yaml:"num-qps"`
	RDMAVerb             string      `yaml:"rdma-verb"`
	NumMsgsPerQP         int         `yaml:"num-msgs-per-qp"`
	MTU                  int         `yaml:"mtu"`
	MessageSize          int         `yaml:"message-size"`
	ListenPort           int         `yaml:"listen-port"`
	MultiGID             bool        `yaml:"multi-gid"`
	BarrierSync          bool        `yaml:"barrier-sync"`
	TxDepth              int         `yaml:"tx-depth"`
	MinRetransmitTimeout int         `yaml:"min-retransmit-timeout"`
	MaxRetransmitRetry   int         `yaml:"max-retransmit-retry"`
	DSCPList             []int       `yaml:"dscp-list,omitempty"`
	DataPktEvents        []EventSpec `yaml:"data-pkt-events"`
}

// EventSpec is one data-pkt-events entry: QPN and PSN relative (from 0;
// PSN from the connection's first packet, so within the first message it
// names that message's packet only, as Lumina's controller keys events at
// initial PSN + psn; or "all"), iter from 1.
type EventSpec struct {
	QPN  int    `yaml:"qpn"`
	PSN  string `yaml:"psn"`
	Type string `yaml:"type"`
	Iter int    `yaml:"iter"`
}

// Test is a validated test: the file, and what it means.
type Test struct {
	Spec TestSpec
	Doc  *spec.Doc
	// Verb and the QP counts (SendQPs of NumQPs carry SEND in send_read).
	Verb     intent.Verb
	NumQPs   int
	SendQPs  int
	Intents  []intent.Intent
	Geometry intent.Geometry
	// Raw is the file as read: Lumina's result layout keeps a copy of the
	// test file in each iteration's directory.
	Raw []byte
}

// LoadTest reads and validates a Lumina test file; every problem is
// reported with its file, line and key.
func LoadTest(path string) (*Test, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	return DecodeTest(path, data)
}

// DecodeTest is LoadTest for YAML in memory.
func DecodeTest(name string, data []byte) (*Test, error) {
	var s TestSpec
	doc, err := spec.Decode(name, data, &s)
	if err != nil {
		return nil, err
	}
	t, err := validate(s, doc)
	if t != nil {
		t.Raw = data
	}
	return t, err
}

// validateAccess checks what the orchestrator passes to ssh and dials:
// a control-ip that is an address or a host name (never an option), a
// plain user name.
func validateAccess(d *spec.Doc, key string, a Access) {
	if a.ControlIP != "" && !ValidHost(a.ControlIP) {
		d.Errorf(key+".control-ip", "%q: an IP address or a host name", a.ControlIP)
	}
	if a.Username != "" && !ValidUser(a.Username) {
		d.Errorf(key+".username", "%q: a user name (letters, digits, '_', '-', '.')", a.Username)
	}
}

var nicTypes = map[string]bool{"CX4": true, "CX5": true, "CX6": true, "E810": true}

// mirrorNICTypes are the dumper NICs Lumina's host code knows (XL710 only
// captures: it has no RDMA).
var mirrorNICTypes = map[string]bool{"CX4": true, "CX5": true, "CX6": true, "E810": true, "XL710": true}

// ParsePortSpeed reads a switch port speed as Lumina writes it (10G,
// 25G, 40G, 50G, 100G, 200G, 400G) into Mbit/s: the rate of the virtual
// testbed's links.
func ParsePortSpeed(v string) (int, error) {
	g, ok := strings.CutSuffix(strings.ToUpper(strings.TrimSpace(v)), "G")
	if ok {
		switch g {
		case "10", "25", "40", "50", "100", "200", "400":
			n, _ := strconv.Atoi(g)
			return n * 1000, nil
		}
	}
	return 0, fmt.Errorf("%q: one of 10G, 25G, 40G, 50G, 100G, 200G, 400G", v)
}

// ParseIPEntry reads one ip-list entry: an address ("10.0.0.1") or an
// address with its prefix length ("10.0.0.1/24"), which Lumina's host code
// hands to `ip addr replace` as it is. A bare address is a host prefix
// (/32 or /128), as ip(8) takes it. The host part must be a usable unicast
// address: it becomes a GID.
func ParseIPEntry(s string) (netip.Prefix, error) {
	var p netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is neither an IP address nor an address with a prefix (10.0.0.1/24)", s)
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is neither an IP address nor an address with a prefix (10.0.0.1/24)", s)
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if a := p.Addr().Unmap(); a.Zone() != "" || a.IsUnspecified() || a.IsMulticast() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return netip.Prefix{}, fmt.Errorf("%q: not a unicast address a NIC can hold", s)
	}
	return p, nil
}

// Prefixes returns the NIC's ip-list as prefixes (bare addresses as host
// prefixes), skipping entries validation refused.
func (n NICSpec) Prefixes() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range n.IPList {
		if p, err := ParseIPEntry(s); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// Addrs returns the address part of each ip-list entry: the GIDs.
func (n NICSpec) Addrs() []netip.Addr {
	ps := n.Prefixes()
	out := make([]netip.Addr, len(ps))
	for i, p := range ps {
		out[i] = p.Addr().Unmap()
	}
	return out
}

// DefaultPrioDSCPMap is Lumina's map when a NIC has no prio-dscp-map:
// priority p takes DSCP 8p..8p+7.
func DefaultPrioDSCPMap() map[int]string {
	m := make(map[int]string, 8)
	for p := 0; p < 8; p++ {
		var ds []string
		for d := 8*p + 7; d >= 8*p; d-- {
			ds = append(ds, fmt.Sprintf("%02d", d))
		}
		m[p] = strings.Join(ds, ",")
	}
	return m
}

// ParseDSCPList reads one prio-dscp-map value: DSCP values 0..63
// separated by commas.
func ParseDSCPList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 || n > 63 || strings.HasPrefix(f, "+") {
			return nil, fmt.Errorf("%q: DSCP values 0..63 separated by commas", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// DSCPToPrio is the NIC's DSCP -> priority map, from prio-dscp-map or
// Lumina's default, in DSCP order.
func (n NICSpec) DSCPToPrio() []DSCPPrio {
	m := n.PrioDSCPMap
	if len(m) == 0 {
		m = DefaultPrioDSCPMap()
	}
	var out []DSCPPrio
	for prio, v := range m {
		ds, _ := ParseDSCPList(v)
		for _, d := range ds {
			out = append(out, DSCPPrio{DSCP: d, Prio: prio})
		}
	}
	slices.SortFunc(out, func(a, b DSCPPrio) int { return cmp.Compare(a.DSCP, b.DSCP) })
	return out
}

// DSCPPrio is one entry of a DSCP -> priority map.
type DSCPPrio struct{ DSCP, Prio int }

func validate(s TestSpec, d *spec.Doc) (*Test, error) {
	t := &Test{Spec: s, Doc: d}
	if s.ResultPath == "" {
		d.Errorf("result-path", "missing: where results go")
	}
	if s.NumRepeats < 1 {
		d.Errorf("num-repeats", "must be at least 1, got %d", s.NumRepeats)
	}
	if s.RewriteUDPDstPort < 1 || s.RewriteUDPDstPort > 65535 || s.RewriteUDPDstPort == 4791 {
		d.Errorf("rewrite-udp-dst-port", "%d: a UDP port other than 4791 (RoCEv2's)", s.RewriteUDPDstPort)
	}
	if s.Switch.PortSpeed != "" {
		if _, err := ParsePortSpeed(s.Switch.PortSpeed); err != nil {
			d.Errorf("switch.port-speed", "%v", err)
		}
	}
	if s.AggregatePcapFilename == "" {
		d.Errorf("aggregate-pcap-filename", "missing: the merged trace's file name")
	} else if strings.ContainsRune(s.AggregatePcapFilename, '/') {
		d.Errorf("aggregate-pcap-filename", "%q: a file name, without a directory", s.AggregatePcapFilename)
	}
	for _, h := range []struct {
		key string
		h   HostSpec
	}{{"requester", s.Requester}, {"responder", s.Responder}} {
		if !nicTypes[strings.ToUpper(h.h.NIC.Type)] {
			d.Errorf(h.key+".nic.type", "%q: CX4, CX5, CX6 or E810", h.h.NIC.Type)
		}
		if len(h.h.NIC.IPList) == 0 {
			d.Errorf(h.key+".nic.ip-list", "missing: the RNIC's addresses (GIDs)")
		}
		seen := map[netip.Addr]int{}
		for i, a := range h.h.NIC.IPList {
			key := fmt.Sprintf("%s.nic.ip-list[%d]", h.key, i)
			p, err := ParseIPEntry(a)
			if err != nil {
				d.Errorf(key, "%v", err)
				continue
			}
			if j, dup := seen[p.Addr().Unmap()]; dup {
				d.Errorf(key, "%s is entry %d already: each entry is one GID", p.Addr(), j)
			}
			seen[p.Addr().Unmap()] = i
		}
		validateNICNames(d, h.key+".nic", h.h.NIC)
		for prio, v := range h.h.NIC.PrioDSCPMap {
			key := fmt.Sprintf("%s.nic.prio-dscp-map.%d", h.key, prio)
			if prio < 0 || prio > 7 {
				d.Errorf(key, "priority %d: want 0..7", prio)
			}
			if _, err := ParseDSCPList(v); err != nil {
				d.Errorf(key, "%v", err)
			}
		}
		if h.h.RoCEParameters.DCQCNEnable != nil && strings.ToUpper(h.h.NIC.Type) != "E810" {
			d.Errorf(h.key+".roce-parameters.dcqcn-enable", "an E810 (irdma) key; nic.type %s takes dcqcn-rp-enable and dcqcn-np-enable", h.h.NIC.Type)
		}
		validateAccess(d, h.key, h.h.Access)
		if v := h.h.RoCEParameters.MinTimeBetweenCNPs; v < 0 || v > 1_000_000 {
			d.Errorf(h.key+".roce-parameters.min-time-between-cnps", "%d us: want 0..1000000", v)
		}
	}
	for _, m := range []struct {
		key string
		m   MirrorSpec
	}{{"requester-mirror", s.RequesterMirror}, {"responder-mirror", s.ResponderMirror}} {
		if t := m.m.NIC.Type; t != "" && !mirrorNICTypes[strings.ToUpper(t)] {
			d.Errorf(m.key+".nic.type", "%q: CX4, CX5, CX6, E810 or XL710", t)
		}
		validateNICNames(d, m.key+".nic", m.m.NIC)
		validateAccess(d, m.key, m.m.Access)
		pc := m.m.PktDumpConf
		if pc.DumpFilename == "" || strings.ContainsRune(pc.DumpFilename, '/') {
			d.Errorf(m.key+".pkt-dump-conf.dump-filename", "%q: a file name", pc.DumpFilename)
		}
		if pc.SnapLen < 64 || pc.SnapLen > 65535 {
			d.Errorf(m.key+".pkt-dump-conf.snap-len", "%d: want 64..65535", pc.SnapLen)
		}
		// Lumina's dumper sizes its ring of buffers as a power of two
		// minus one.
		if n := pc.NumPkts; n < 1 || bits.OnesCount(uint(n+1)) != 1 {
			d.Errorf(m.key+".pkt-dump-conf.num-pkts", "%d: must be 2^n - 1, e.g. 16383", n)
		}
	}
	validateAccess(d, "switch", Access{ControlIP: s.Switch.ControlIP, Username: s.Switch.Username})
	t.validateTraffic(&s.Traffic, d)
	if err := d.Err(); err != nil {
		return nil, err
	}
	return t, nil
}

// Names that end up in commands on the hosts (sysfs paths, tool
// arguments) are held to what the kernel and PCI addressing allow, so no
// value from the file can become a path outside the NIC's directory or an
// option of the tool it is passed to.
var (
	ifNameRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.@-]{0,14}$`)
	pciAddrRE = regexp.MustCompile(`^([0-9A-Fa-f]{4}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]$`)
)

func validateNICNames(d *spec.Doc, key string, n NICSpec) {
	if n.IfName != "" && !ifNameRE.MatchString(n.IfName) {
		d.Errorf(key+".if-name", "%q is not an interface name", n.IfName)
	}
	if n.IBDevice != "" && !ValidIBDevice(n.IBDevice) {
		d.Errorf(key+".ib-device", "%q is not an RDMA device name (letters, digits, '_', '-', '.')", n.IBDevice)
	}
	if n.PCIAddr != "" && !pciAddrRE.MatchString(n.PCIAddr) {
		d.Errorf(key+".pci-addr", "%q is not a PCI address (03:00.0 or 0000:03:00.0)", n.PCIAddr)
	}
}

func (t *Test) validateTraffic(tr *Traffic, d *spec.Doc) {
	switch tr.RDMAVerb {
	case "write", "read", "send":
		t.Verb = intent.Verb(tr.RDMAVerb)
		n, err := strconv.Atoi(tr.NumQPs)
		if err != nil || n < 1 || n > 1024 {
			d.Errorf("traffic.num-qps", "%q: a count of 1..1024", tr.NumQPs)
		}
		t.NumQPs = n
	case "send_read":
		t.Verb = intent.VerbSendRead
		a, b, ok := strings.Cut(tr.NumQPs, ",")
		na, err1 := strconv.Atoi(strings.TrimSpace(a))
		nb, err2 := strconv.Atoi(strings.TrimSpace(b))
		if !ok || err1 != nil || err2 != nil || na < 0 || nb < 0 || na+nb < 1 || na+nb > 1024 {
			d.Errorf("traffic.num-qps", "%q: \"SEND,READ\" QP counts for send_read, e.g. \"2,2\"", tr.NumQPs)
		}
		t.NumQPs, t.SendQPs = na+nb, na
	default:
		d.Errorf("traffic.rdma-verb", "%q: write, read, send or send_read", tr.RDMAVerb)
	}
	if verbs.MTUFromBytes(tr.MTU) == 0 {
		d.Errorf("traffic.mtu", "%d: 256, 512, 1024, 2048 or 4096", tr.MTU)
	}
	if tr.MessageSize < 1 || tr.MessageSize > 1<<30 {
		d.Errorf("traffic.message-size", "%d: want 1..1 GiB", tr.MessageSize)
	}
	if tr.NumMsgsPerQP < 1 {
		d.Errorf("traffic.num-msgs-per-qp", "must be at least 1, got %d", tr.NumMsgsPerQP)
	}
	if tr.TxDepth < 1 || tr.TxDepth > 1024 {
		d.Errorf("traffic.tx-depth", "%d: want 1..1024", tr.TxDepth)
	}
	if tr.MinRetransmitTimeout < 1 || tr.MinRetransmitTimeout > 31 {
		d.Errorf("traffic.min-retransmit-timeout", "%d: the IB timeout exponent (4.096 us x 2^n), 1..31; 0 would disable the retransmission timer", tr.MinRetransmitTimeout)
	}
	if tr.MaxRetransmitRetry < 0 || tr.MaxRetransmitRetry > 7 {
		d.Errorf("traffic.max-retransmit-retry", "%d: want 0..7", tr.MaxRetransmitRetry)
	}
	if tr.ListenPort < 0 || tr.ListenPort > 65535 {
		d.Errorf("traffic.listen-port", "%d is not a TCP port", tr.ListenPort)
	}
	for i, v := range tr.DSCPList {
		if v < 0 || v > 63 {
			d.Errorf(fmt.Sprintf("traffic.dscp-list[%d]", i), "%d: DSCP is 0..63", v)
		}
	}
	t.Geometry = intent.Geometry{Verb: t.Verb, MessageSize: tr.MessageSize, MTU: tr.MTU, NumMessages: tr.NumMsgsPerQP}
	ppm := t.Geometry.PacketsPerMessage()
	for i, e := range tr.DataPktEvents {
		key := fmt.Sprintf("traffic.data-pkt-events[%d]", i)
		in := intent.Intent{QP: e.QPN, Iter: e.Iter}
		if err := in.Type.UnmarshalText([]byte(e.Type)); err != nil {
			d.Errorf(key+".type", "%q: drop, ecn or bit-error", e.Type)
			continue
		}
		// What Lumina refuses: events that change delivery need one
		// message in flight, or ITER cannot tell rounds apart.
		if in.Type != mirror.EventECN && tr.TxDepth > 1 {
			d.Errorf(key+".type", "%s events need traffic.tx-depth 1 (it is %d): only ECN marks may be injected with several messages in flight", e.Type, tr.TxDepth)
		}
		if e.QPN < 0 || (t.NumQPs > 0 && e.QPN >= t.NumQPs) {
			d.Errorf(key+".qpn", "%d: the test has QPs 0..%d", e.QPN, t.NumQPs-1)
		}
		switch e.PSN {
		case "all":
			in.PSN = intent.AllPSNs
		default:
			n, err := strconv.Atoi(e.PSN)
			if err != nil || n < 0 {
				d.Errorf(key+".psn", "%q: a packet number from 0 or \"all\"", e.PSN)
				continue
			}
			// psn counts from the connection's first packet (message k's
			// packet j is k x packets-per-message + j), as Lumina's
			// switch controller keys events.
			if ppm > 0 && tr.NumMsgsPerQP >= 1 && n >= ppm*tr.NumMsgsPerQP {
				d.Errorf(key+".psn", "%d: %d message(s) of %d bytes at MTU %d have packets 0..%d", n, tr.NumMsgsPerQP,
					tr.MessageSize, tr.MTU, ppm*tr.NumMsgsPerQP-1)
			}
			in.PSN = n
		}
		if e.Iter < 1 || e.Iter > 65535 {
			d.Errorf(key+".iter", "%d: rounds count from 1", e.Iter)
		}
		t.Intents = append(t.Intents, in)
	}
}
