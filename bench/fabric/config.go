package fabric

import (
	"errors"
	"fmt"
	"time"

	"github.com/rdma-appliance/appliance/verbs/dcqcn"
)

// Priorities: eight classes, as in 802.1Qbb.
const NumPrio = 8

// Default classes: RDMA data on a lossless class, ACKs, NAKs and CNPs on
// a lossy high one (as deployments map CNPs to their own queue).
const (
	PrioData    = 3
	PrioControl = 6
)

// Frame sizes on the wire. HeaderBytes is what a RoCEv2 data packet adds
// to its payload (Ethernet 14, IPv4 20, UDP 8, BTH 12, ICRC 4, FCS 4);
// every frame also occupies the preamble, start delimiter and
// inter-frame gap (20 bytes) of wire time; no frame is shorter than 64.
const (
	HeaderBytes  = 62
	WireOverhead = 20
	MinFrame     = 64
)

// SwitchConfig is the MMU, PFC, ECN and scheduling of switches (per
// layer when a scenario says so).
type SwitchConfig struct {
	// Buffer is the shared memory in bytes, Cell its allocation unit.
	Buffer int64
	Cell   int64
	// Guaranteed bytes per ingress port and priority group before the
	// shared pool is touched.
	Guaranteed int64
	// Alpha is the dynamic threshold: a priority group may hold at most
	// Alpha x (free shared buffer).
	Alpha float64
	// Headroom per lossless ingress priority group: what arrives between
	// sending XOFF and the upstream port stopping.
	Headroom int64
	// Lossless has a bit per priority with PFC on.
	Lossless uint8
	// XonOffset: XON is sent once the group is this far below its
	// threshold (hysteresis).
	XonOffset int64
	// PauseQuanta of an XOFF (512 bit times each; 0xffff the most).
	PauseQuanta uint16
	// ECN: RED marking at egress between Kmin and Kmax bytes of queue
	// with probability rising to Pmax, every packet above Kmax.
	Kmin, Kmax int64
	Pmax       float64
	ECN        bool
	// WRR weights per priority; priorities with weight 0 are strict and
	// served first, highest first.
	Weights [NumPrio]int
}

// HostConfig is what every RNIC does.
type HostConfig struct {
	// MTU is the payload per packet.
	MTU int
	// AckEvery: the receiver ACKs every this many packets and the last.
	AckEvery int
	// CNPInterval is the least time between two CNPs of one flow (the
	// notification point's pacing).
	CNPInterval int64
	// RTO is the retransmission timeout: no ACK progress for this long
	// and the sender goes back to the first unacknowledged packet.
	RTO int64
	// RetryLimit is an RC QP's retry_cnt: after this many timeouts in a
	// row without progress the flow fails and sends nothing more, as a QP
	// goes to the error state (0..7; 0, the default, retries forever).
	RetryLimit int
	// DCQCN on; its parameters (Table 4 of the ByteTuning paper by
	// default, at the host's line rate).
	DCQCN  bool
	Params *dcqcn.Params
	// ProcessingDelay holds every received packet this long before the
	// RNIC handles it (a slow host, for Hostmesh).
	ProcessingDelay int64
}

// Config is a simulation's behaviour.
type Config struct {
	Switch SwitchConfig
	// Layers overrides Switch for the switches of a layer ("tor", ...),
	// and Switches overrides both for one switch by name: a switch
	// configured unlike its peers, such as one whose PFC headroom is
	// too small for its cables.
	Layers   map[string]SwitchConfig
	Switches map[string]SwitchConfig
	Host     HostConfig
	// Hosts overrides Host per host name.
	Hosts map[string]HostConfig
	// TTL of data packets: a routing loop drops them eventually.
	TTL uint8
	// SampleInterval of the queue and pause time series (0: none).
	SampleInterval int64
	Seed           uint64
}

// DefaultConfig is a 100G datacenter: 16 MB of switch buffer in 256-byte
// cells, PFC on priority 3 with headroom for a few microseconds of cable,
// DCQCN with the ByteTuning paper's Table 4 (Kmin 5 KB, Kmax 200 KB, Pmax
// 10%), 1 KB MTU.
func DefaultConfig() Config {
	return Config{
		Switch: SwitchConfig{Buffer: 16 << 20, Cell: 256, Guaranteed: 4 << 10, Alpha: 1.0 / 8, Headroom: 64 << 10,
			Lossless: 1 << PrioData, XonOffset: 8 << 10, PauseQuanta: 0xffff,
			Kmin: 5 << 10, Kmax: 200 << 10, Pmax: 0.1, ECN: true,
			Weights: [NumPrio]int{1, 1, 1, 1, 1, 1, 0, 0}},
		Host: HostConfig{MTU: 1024, AckEvery: 4, CNPInterval: 50_000, RTO: int64(time.Millisecond), DCQCN: true},
		TTL:  64,
	}
}

// Validate checks a switch configuration.
func (c *SwitchConfig) Validate() error {
	switch {
	case c.Buffer <= 0 || c.Cell <= 0 || c.Cell > c.Buffer:
		return fmt.Errorf("buffer %d with cells of %d: positive, cells smaller", c.Buffer, c.Cell)
	case c.Guaranteed < 0 || c.Headroom < 0 || c.XonOffset < 0:
		return errors.New("guaranteed, headroom and xon offset are not negative")
	case c.Alpha <= 0:
		return fmt.Errorf("alpha %g: positive", c.Alpha)
	case c.ECN && (c.Kmin < 0 || c.Kmax < c.Kmin || c.Pmax < 0 || c.Pmax > 1):
		return fmt.Errorf("ECN Kmin %d Kmax %d Pmax %g: 0 <= Kmin <= Kmax, Pmax in [0,1]", c.Kmin, c.Kmax, c.Pmax)
	case c.Lossless != 0 && c.PauseQuanta == 0:
		return errors.New("PFC needs pause quanta")
	}
	for p, w := range c.Weights {
		if w < 0 {
			return fmt.Errorf("weight of priority %d negative", p)
		}
	}
	return nil
}

// Validate checks a host configuration.
func (c *HostConfig) Validate() error {
	switch {
	case c.MTU < 64 || c.MTU > 9000:
		return fmt.Errorf("MTU %d: 64..9000", c.MTU)
	case c.AckEvery < 1:
		return fmt.Errorf("ack every %d: at least 1", c.AckEvery)
	case c.CNPInterval < 0 || c.RTO <= 0 || c.ProcessingDelay < 0:
		return errors.New("CNP interval and processing delay not negative, RTO positive")
	case c.RetryLimit < 0 || c.RetryLimit > 7:
		return fmt.Errorf("retry limit %d: 0..7", c.RetryLimit)
	}
	if c.Params != nil {
		return c.Params.Validate()
	}
	return nil
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	if err := c.Switch.Validate(); err != nil {
		return fmt.Errorf("switch: %w", err)
	}
	for l, sc := range c.Layers {
		if err := sc.Validate(); err != nil {
			return fmt.Errorf("switch layer %s: %w", l, err)
		}
	}
	for name, sc := range c.Switches {
		if err := sc.Validate(); err != nil {
			return fmt.Errorf("switch %s: %w", name, err)
		}
	}
	if err := c.Host.Validate(); err != nil {
		return fmt.Errorf("host: %w", err)
	}
	for h, hc := range c.Hosts {
		if err := hc.Validate(); err != nil {
			return fmt.Errorf("host %s: %w", h, err)
		}
	}
	if c.TTL == 0 {
		return errors.New("TTL 0")
	}
	return nil
}
