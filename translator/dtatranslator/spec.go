package dtatranslator

import (
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"time"

	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/internal/dtamem"
	"github.com/rdma-appliance/appliance/internal/dtawire"
	"github.com/rdma-appliance/appliance/internal/spec"
)

// Spec is a software translator's configuration file (`appliance dta
// translate -f`): the packet port it polls, its address, the collectors
// it writes into, and its reliability and flow-control settings.
type Spec struct {
	// Name names the translator to collectors, in logs and metrics.
	Name string `yaml:"name"`
	// Listen is the HTTP address of /metrics, /healthz and /v1/status.
	Listen string `yaml:"listen"`
	// Port is the packet port (driver:device) reports arrive on and RDMA
	// leaves from.
	Port string `yaml:"port"`
	// IP is the translator's IPv4 address: reporters send to it, RDMA
	// packets come from it, it answers ARP for it. MAC defaults to the
	// port's.
	IP  string `yaml:"ip"`
	MAC string `yaml:"mac"`
	// Core pins the loop; absent leaves it unpinned.
	Core  *int `yaml:"core"`
	Burst int  `yaml:"burst"`
	Pool  int  `yaml:"pool"`

	// NoSeqnum reads the 2-byte base header; DataWidth is Key-Write's
	// data size (4 by default).
	NoSeqnum  bool `yaml:"no-seqnum"`
	DataWidth int  `yaml:"data-width"`
	// FlushTimeout bounds how long an Append batch or a Postcarder flow
	// waits (default 1ms).
	FlushTimeout time.Duration `yaml:"flush-timeout"`
	// RDMAAckEvery asks the collector for an ACK every this many RDMA
	// packets (default 64).
	RDMAAckEvery int `yaml:"rdma-ack-every"`

	// Layout is the collector memory layout written (dtamem.Layout):
	// per-slot-crc (default) or dta-public, the public DTA collector's.
	// Every collector must serve the same: the exchange refuses a
	// collector of another layout, saying both.
	Layout string `yaml:"layout"`

	Collectors  []CollectorSpec `yaml:"collectors"`
	Reliability ReliabilitySpec `yaml:"reliability"`
	FlowControl FlowSpec        `yaml:"flow-control"`
	// ReconnectMin and ReconnectMax bound the backoff between attempts
	// to reach a collector (default 100ms and 5s).
	ReconnectMin time.Duration `yaml:"reconnect-min"`
	ReconnectMax time.Duration `yaml:"reconnect-max"`
}

// CollectorSpec names a collector, where its exchange listens and the
// key the translator authenticates with.
type CollectorSpec struct {
	Name     string `yaml:"name"`
	Exchange string `yaml:"exchange"`
	// KeyFile holds the secret shared with the collector (see
	// dtamem.ReadKey); a relative path is taken from the file's
	// directory. With a key the translator authenticates, and writes
	// only into a collector that proves it holds the key too.
	KeyFile string `yaml:"key-file"`
	// Key is KeyFile's content, read by Validate; callers building a
	// Spec in memory may set it themselves.
	Key []byte `yaml:"-" json:"-"`
}

// Check records the problems of the collector at key (such as
// "collectors[1]") in doc and reads its key file, a relative path taken
// from doc's file: what every translator checks of its collectors, the
// software one and the Tofino's control plane (p4/dtatofino) alike.
func (c *CollectorSpec) Check(doc *spec.Doc, key string) {
	if _, _, err := net.SplitHostPort(c.Exchange); err != nil {
		doc.Errorf(key+".exchange", "%q: want host:port of the collector's exchange (port %d by default)", c.Exchange, dtamem.ExchangePort)
	}
	if c.KeyFile != "" {
		p := c.KeyFile
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(doc.File), p)
		}
		k, err := dtamem.ReadKey(p)
		if err != nil {
			doc.Errorf(key+".key-file", "%v", err)
		}
		c.Key = k
	}
}

// ReliabilitySpec configures sequence tracking of retransmittable
// reports.
type ReliabilitySpec struct {
	// Disabled turns tracking off: every report is taken as it comes.
	Disabled     bool          `yaml:"disabled"`
	AckEvery     int           `yaml:"ack-every"`
	NackInterval time.Duration `yaml:"nack-interval"`
}

// FlowSpec configures the RDMA rate meter.
type FlowSpec struct {
	// Rate is RDMA packets a second (0: unmetered); Burst the bucket.
	Rate  float64 `yaml:"rate"`
	Burst int     `yaml:"burst"`
	// HighDSCP: reports whose IP DSCP is at least this are high priority
	// (queued under congestion), the rest low (dropped). Default 46 (EF).
	HighDSCP int `yaml:"high-dscp"`
	// Queue is how many high-priority reports may wait (default 4096).
	Queue int `yaml:"queue"`
}

// LoadSpec reads and validates a translator file; every problem is
// reported with its file, line and key.
func LoadSpec(path string) (Spec, error) {
	return spec.LoadAs[Spec](path)
}

// DecodeSpec is LoadSpec for YAML held in memory; name is used in errors.
func DecodeSpec(name string, data []byte) (Spec, error) {
	return spec.DecodeAs[Spec](name, data)
}

// Validate records every problem of s in doc and fills the defaults.
func (s *Spec) Validate(doc *spec.Doc) {
	CheckName(doc, &s.Name, "translator")
	if s.Listen == "" {
		s.Listen = "127.0.0.1:9310"
	} else if _, _, err := net.SplitHostPort(s.Listen); err != nil {
		doc.Errorf("listen", "%q: want host:port", s.Listen)
	}
	if a, err := netip.ParseAddr(s.IP); err != nil || !a.Is4() {
		doc.Errorf("ip", "%q: want the translator's IPv4 address", s.IP)
	}
	if s.MAC != "" {
		if _, err := header.ParseMAC(s.MAC); err != nil {
			doc.Errorf("mac", "%v", err)
		}
	}
	if s.Burst == 0 {
		s.Burst = 32
	} else if s.Burst < 1 || s.Burst > 1024 {
		doc.Errorf("burst", "%d: want 1..1024", s.Burst)
	}
	if s.Pool == 0 {
		s.Pool = 8192
	} else if s.Pool < 256 {
		doc.Errorf("pool", "%d: at least 256 buffers", s.Pool)
	}
	if err := (dtawire.Format{DataWidth: s.DataWidth}).Validate(); err != nil {
		doc.Errorf("data-width", "%v", err)
	}
	if s.FlushTimeout == 0 {
		s.FlushTimeout = time.Millisecond
	} else if s.FlushTimeout < 0 {
		doc.Errorf("flush-timeout", "negative")
	}
	if s.RDMAAckEvery == 0 {
		s.RDMAAckEvery = 64
	} else if s.RDMAAckEvery < 1 {
		doc.Errorf("rdma-ack-every", "%d: at least 1", s.RDMAAckEvery)
	}
	if _, err := dtamem.ParseLayout(s.Layout); err != nil {
		doc.Errorf("layout", "%v", err)
	}
	if len(s.Collectors) == 0 {
		doc.Errorf("collectors", "at least one collector")
	}
	names := map[string]bool{}
	for i, c := range s.Collectors {
		key := fmt.Sprintf("collectors[%d]", i)
		if c.Name == "" {
			s.Collectors[i].Name = fmt.Sprintf("collector%d", i)
		} else if names[c.Name] {
			doc.Errorf(key+".name", "%q named twice", c.Name)
		}
		names[s.Collectors[i].Name] = true
		s.Collectors[i].Check(doc, key)
	}
	r := &s.Reliability
	if r.AckEvery == 0 {
		r.AckEvery = 16
	} else if r.AckEvery < 1 || r.AckEvery > 127 {
		doc.Errorf("reliability.ack-every", "%d: want 1..127 (half the 8-bit sequence space)", r.AckEvery)
	}
	if r.NackInterval == 0 {
		r.NackInterval = time.Millisecond
	} else if r.NackInterval < 0 {
		doc.Errorf("reliability.nack-interval", "negative")
	}
	f := &s.FlowControl
	if f.Rate < 0 {
		doc.Errorf("flow-control.rate", "negative")
	}
	if f.Burst == 0 {
		f.Burst = 256
	} else if f.Burst < dtawire.MaxRedundancy {
		doc.Errorf("flow-control.burst", "%d: at least %d (one report's packets)", f.Burst, dtawire.MaxRedundancy)
	}
	if f.HighDSCP == 0 {
		f.HighDSCP = 46
	} else if f.HighDSCP < 0 || f.HighDSCP > 63 {
		doc.Errorf("flow-control.high-dscp", "%d: a DSCP is 0..63", f.HighDSCP)
	}
	if f.Queue == 0 {
		f.Queue = 4096
	} else if f.Queue < 1 {
		doc.Errorf("flow-control.queue", "%d: at least 1", f.Queue)
	}
	CheckReconnect(doc, &s.ReconnectMin, &s.ReconnectMax)
}

// CheckName checks a translator's name (def when empty) as collectors
// take it in the exchange's Hello: every translator's file, the software
// one's and the Tofino's (p4/dtatofino), has one.
func CheckName(doc *spec.Doc, name *string, def string) {
	if *name == "" {
		*name = def
	} else if !dtamem.ValidName(*name) {
		doc.Errorf("name", "%q: want 1..%d letters, digits, '.', '_' or '-' (collectors refuse other names)", *name, dtamem.MaxNameLen)
	}
}

// CheckReconnect fills and checks a translator file's reconnect-min and
// reconnect-max, the bounds of the wait between attempts to set a
// collector's connection up (default 100ms and 5s).
func CheckReconnect(doc *spec.Doc, lo, hi *time.Duration) {
	if *lo == 0 {
		*lo = 100 * time.Millisecond
	}
	if *hi == 0 {
		*hi = 5 * time.Second
	}
	if *lo < 0 || *hi < *lo {
		doc.Errorf("reconnect-max", "want 0 < reconnect-min <= reconnect-max")
	}
}

// MemLayout is the layout the spec names (validated).
func (s *Spec) MemLayout() dtamem.Layout {
	l, _ := dtamem.ParseLayout(s.Layout)
	return l
}
