package dtatofino

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/internal/service"
	"github.com/rdma-appliance/appliance/internal/spec"
	"github.com/rdma-appliance/appliance/p4/internal/bfrt"
	"github.com/rdma-appliance/appliance/translator/dtatranslator"
)

// Spec is the file of `appliance dta tofino -f`: what the operator
// writes of a Tofino translator (its ports, routes, RoCE endpoint, build
// options, tracked reporters, flow control) and, per collector, where its
// exchange listens, the key to authenticate with and the switch port it
// sits behind. The rest of each collector (its MAC, IP, QPN and memory
// regions) comes from the collector itself, through the exchange the
// software translator uses (see Controller). The keys are the
// Translator's fields in the files' kebab case.
type Spec struct {
	// Name names the translator to the collectors (their logs, metrics
	// and allow-lists).
	Name string `yaml:"name"`
	// Program is the P4 program's name in bfrt (DefaultTranslatorName
	// when empty).
	Program string `yaml:"program"`
	// Listen is the HTTP address of /v1/status, /metrics and /healthz.
	Listen string `yaml:"listen"`
	// Interval is how often the counters are read (default 10s).
	Interval time.Duration `yaml:"interval"`
	// IP, MAC and QPN are the translator's RoCE endpoint: the WRITEs'
	// source, the source of ACKs and NACKs to reporters, the QP the
	// collectors' QPs are connected to.
	IP  string `yaml:"ip"`
	MAC string `yaml:"mac"`
	QPN uint32 `yaml:"qpn"`
	// DSCP marks the RoCE packets.
	DSCP uint8 `yaml:"dscp"`
	// The build's options: -DDTA_NO_SEQNUM, -DDTA_APPEND_BATCH,
	// -DDTA_SKETCH_MERGE, -DDTA_NO_METER.
	NoSeqnum    bool `yaml:"no-seqnum"`
	AppendBatch int  `yaml:"append-batch"`
	SketchMerge bool `yaml:"sketch-merge"`
	NoMeter     bool `yaml:"no-meter"`
	// AckSnap truncates the mirrored copies that become ACKs.
	AckSnap     int             `yaml:"ack-snap"`
	Ports       []PortSpec      `yaml:"ports"`
	Routes      []RouteSpec     `yaml:"routes"`
	Collectors  []CollectorSpec `yaml:"collectors"`
	Peers       []PeerSpec      `yaml:"peers"`
	FlowControl *FlowSpec       `yaml:"flow-control"`
	// ReconnectMin and ReconnectMax bound the wait between attempts to
	// set the collectors' connections up (default 100ms and 5s).
	ReconnectMin time.Duration `yaml:"reconnect-min"`
	ReconnectMax time.Duration `yaml:"reconnect-max"`

	// setup is the Translator the file describes, without what the
	// collectors' exchanges add (Validate builds it).
	setup Translator
}

// PortSpec is a switch port (Port).
type PortSpec struct {
	Name       string `yaml:"name"`
	FrontPanel string `yaml:"front-panel"`
	DevPort    int    `yaml:"dev-port"`
	Speed      string `yaml:"speed"`
	FEC        string `yaml:"fec"`
	AutoNeg    string `yaml:"autoneg"`
	MAC        string `yaml:"mac"`
}

// RouteSpec is a route (Route): an IPv4 prefix, the port and the next
// hop's MAC.
type RouteSpec struct {
	Prefix string `yaml:"prefix"`
	Port   string `yaml:"port"`
	MAC    string `yaml:"mac"`
}

// CollectorSpec is a collector: its name, exchange and key file as the
// software translator's file has them, the switch port towards it, the
// largest N of its Key-Write and Key-Increment reports, and the RoCE
// packets' UDP source port (0: derived from the QPNs).
type CollectorSpec struct {
	dtatranslator.CollectorSpec `yaml:",inline"`
	Port                        string `yaml:"port"`
	Redundancy                  int    `yaml:"redundancy"`
	UDPSrcPort                  uint16 `yaml:"udp-src-port"`
}

// PeerSpec is a reporter whose sequence numbers the translator tracks
// (Peer).
type PeerSpec struct {
	Name     string `yaml:"name"`
	IP       string `yaml:"ip"`
	AckPort  string `yaml:"ack-port"`
	FirstSeq uint8  `yaml:"first-seq"`
}

// FlowSpec is the rate meter (FlowControl).
type FlowSpec struct {
	Rate     uint64 `yaml:"rate"`
	Burst    uint64 `yaml:"burst"`
	HighDSCP int    `yaml:"high-dscp"`
	CPUPort  int    `yaml:"cpu-port"`
	CPUQueue int    `yaml:"cpu-queue"`
}

// DefaultListen is the HTTP address of `appliance dta tofino`.
const DefaultListen = "127.0.0.1:9320"

// LoadSpec reads and validates a Tofino translator's file; every problem
// is reported with its file, line and key.
func LoadSpec(path string) (Spec, error) {
	return spec.LoadAs[Spec](path)
}

// DecodeSpec is LoadSpec for YAML held in memory; name is used in errors.
func DecodeSpec(name string, data []byte) (Spec, error) {
	return spec.DecodeAs[Spec](name, data)
}

// Validate records the problems of s in doc and fills the defaults: the
// service's own keys and the collectors' exchanges are all checked, then
// the translator the file describes is checked as translator.p4 holds it
// (Translator.ValidateSetup), whose first problem is put at its key.
func (s *Spec) Validate(doc *spec.Doc) {
	dtatranslator.CheckName(doc, &s.Name, "tofino-translator")
	if s.Listen == "" {
		s.Listen = DefaultListen
	} else if _, _, err := net.SplitHostPort(s.Listen); err != nil {
		doc.Errorf("listen", "%q: want host:port", s.Listen)
	}
	if s.Interval == 0 {
		s.Interval = 10 * time.Second
	} else if s.Interval < 100*time.Millisecond {
		doc.Errorf("interval", "%v: at least 100ms (each read runs bfshell)", s.Interval)
	}
	dtatranslator.CheckReconnect(doc, &s.ReconnectMin, &s.ReconnectMax)
	t := Translator{Name: s.Program, QPN: s.QPN, DSCP: s.DSCP, NoSeqnum: s.NoSeqnum, AppendBatch: s.AppendBatch,
		SketchMerge: s.SketchMerge, NoMeter: s.NoMeter, AckSnap: s.AckSnap}
	parsed := true // every value parsed: the translator is worth checking
	mac := func(key, v string) header.MAC {
		m, err := header.ParseMAC(v)
		if err != nil {
			doc.Errorf(key, "%q is not a MAC address", v)
			parsed = false
		}
		return m
	}
	addr := func(key, v, what string) netip.Addr {
		a, err := netip.ParseAddr(v)
		if err != nil {
			doc.Errorf(key, "%q: want %s", v, what)
			parsed = false
		}
		return a
	}
	t.IP = addr("ip", s.IP, "the translator's IPv4 address")
	t.MAC = mac("mac", s.MAC)
	for i, p := range s.Ports {
		t.Ports = append(t.Ports, Port{Name: p.Name, FrontPanel: p.FrontPanel, DevPort: p.DevPort, Speed: p.Speed, FEC: p.FEC,
			AutoNeg: p.AutoNeg, MAC: mac(fmt.Sprintf("ports[%d].mac", i), p.MAC)})
	}
	for i, r := range s.Routes {
		key := fmt.Sprintf("routes[%d]", i)
		pfx, err := netip.ParsePrefix(r.Prefix)
		if err != nil {
			doc.Errorf(key+".prefix", "%q: want an IPv4 prefix such as 10.9.0.0/24", r.Prefix)
			parsed = false
		}
		t.Routes = append(t.Routes, Route{Prefix: pfx, Port: r.Port, MAC: mac(key+".mac", r.MAC)})
	}
	for i := range s.Collectors {
		c := &s.Collectors[i]
		key := fmt.Sprintf("collectors[%d]", i)
		c.Check(doc, key)
		// The offer hands out write access to the collector's memory,
		// and a peer that is not the collector would have the switch
		// write telemetry into it: off loopback, both sides prove they
		// hold the key.
		if host, _, err := net.SplitHostPort(c.Exchange); err == nil && c.KeyFile == "" && !service.LoopbackHost(host) {
			doc.Errorf(key+".key-file", "the exchange %s is off loopback: name the key shared with the collector", c.Exchange)
		}
		t.Collectors = append(t.Collectors, Collector{Name: c.Name, Port: c.Port, Redundancy: c.Redundancy, UDPSrcPort: c.UDPSrcPort})
	}
	for i, p := range s.Peers {
		t.Peers = append(t.Peers, Peer{Name: p.Name, IP: addr(fmt.Sprintf("peers[%d].ip", i), p.IP, "the reporter's IPv4 address"),
			AckPort: p.AckPort, FirstSeq: p.FirstSeq})
	}
	if f := s.FlowControl; f != nil {
		t.FlowControl = &FlowControl{Rate: f.Rate, Burst: f.Burst, HighDSCP: f.HighDSCP, CPUPort: f.CPUPort, CPUQueue: f.CPUQueue}
	}
	if !parsed {
		return
	}
	if err := t.ValidateSetup(); err != nil {
		var fe *bfrt.FieldError
		if !errors.As(err, &fe) {
			doc.Errorf("", "%v", err)
			return
		}
		doc.Errorf(specKey(fe.Field), "%s", specWords.Replace(fe.Msg))
		return
	}
	s.setup = t
}

// specKey is the file's key of a Translator field: the same path in kebab
// case ("flow_control.cpu_port" is "flow-control.cpu-port"); the
// translator's program name is the file's program.
func specKey(field string) string {
	if field == "name" {
		return "program"
	}
	return strings.ReplaceAll(field, "_", "-")
}

// specWords are the Translator's field names its messages use, as the
// file names them.
var specWords = strings.NewReplacer("no_seqnum", "no-seqnum", "no_meter", "no-meter", "sketch_merge", "sketch-merge",
	"flow_control", "flow-control")

// Setup is the Translator the validated file describes, with no
// collector's exchanged values yet: a copy, whose collectors the caller
// may fill.
func (s *Spec) Setup() Translator {
	t := s.setup
	t.Collectors = slices.Clone(t.Collectors)
	return t
}
