// Package verbs is the RDMA verbs API of the appliance, shaped like ibverbs so
// that RDMA engineers recognise it: devices opened from registered providers,
// protection domains, memory regions with access flags and keys, completion
// queues with optional completion timestamps, and RC, UC and UD queue pairs
// driven through the RESET -> INIT -> RTR -> RTS state machine.
//
// Two providers serve it: verbs/soft, a RoCEv2 RNIC in Go on any dpdk port,
// and verbs/ibv, libibverbs through cgo (tag rdma). Services written against
// this package run unchanged on either.
//
// Hot paths take slices of work requests and completions (PostSend(wrs),
// PollCQ(wcs)) so callers reuse preallocated arrays and nothing is allocated
// per operation.
package verbs

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"sync"
)

// GID is a 128-bit RoCEv2 global identifier: an IPv6 address, or an IPv4
// address in its IPv4-mapped form.
type GID [16]byte

// GIDFromAddr returns the GID of an IP address.
func GIDFromAddr(a netip.Addr) GID { return GID(a.As16()) }

// Addr returns the GID as an IP address (IPv4 for IPv4-mapped GIDs).
func (g GID) Addr() netip.Addr { return netip.AddrFrom16(g).Unmap() }

// IsIPv4 says whether the GID is IPv4-mapped.
func (g GID) IsIPv4() bool { return g.Addr().Is4() }

func (g GID) String() string { return g.Addr().String() }

// MTU is an IB path MTU enum value, as IBV_MTU_*.
type MTU uint8

// Path MTUs.
const (
	MTU256  MTU = 1
	MTU512  MTU = 2
	MTU1024 MTU = 3
	MTU2048 MTU = 4
	MTU4096 MTU = 5
)

// Bytes is the MTU in bytes, 0 for an invalid value.
func (m MTU) Bytes() int {
	if m < MTU256 || m > MTU4096 {
		return 0
	}
	return 128 << m
}

// MTUFromBytes returns the enum for 256..4096, or 0.
func MTUFromBytes(n int) MTU {
	for m := MTU256; m <= MTU4096; m++ {
		if m.Bytes() == n {
			return m
		}
	}
	return 0
}

func (m MTU) String() string {
	if b := m.Bytes(); b > 0 {
		return fmt.Sprint(b)
	}
	return fmt.Sprintf("mtu(%d)", uint8(m))
}

// DeviceInfo describes an RDMA device.
type DeviceInfo struct {
	Name     string `json:"name"`     // e.g. "soft0", "mlx5_0"
	Provider string `json:"provider"` // "soft", "ibv"
	Netdev   string `json:"netdev,omitempty"`
	NodeGUID uint64 `json:"node_guid"`
	Ports    int    `json:"ports"`
	// Limits the provider enforces.
	MaxQP       int    `json:"max_qp"`
	MaxQPWR     int    `json:"max_qp_wr"`
	MaxSGE      int    `json:"max_sge"`
	MaxCQE      int    `json:"max_cqe"`
	MaxMRSize   uint64 `json:"max_mr_size"`
	MaxQPRdAtom int    `json:"max_qp_rd_atom"`
	MaxInline   int    `json:"max_inline_data"`
	// CompletionTimestamps says whether CQs can carry completion timestamps
	// (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP) and at what clock rate.
	CompletionTimestamps bool   `json:"completion_timestamps"`
	ClockHz              uint64 `json:"clock_hz,omitempty"`
}

// PortState is a port's logical state.
type PortState uint8

// Port states, as IBV_PORT_*.
const (
	PortDown   PortState = 1
	PortInit   PortState = 2
	PortArmed  PortState = 3
	PortActive PortState = 4
)

// PortAttr describes a device port.
type PortAttr struct {
	State     PortState
	MaxMTU    MTU
	ActiveMTU MTU
	GIDs      []GID // the GID table; RoCEv2 entries only
	SpeedMbps int
}

// Provider opens devices of one kind.
type Provider interface {
	Name() string
	Devices() ([]DeviceInfo, error)
	Open(name string) (Device, error)
}

var (
	provMu    sync.RWMutex
	providers = map[string]Provider{}
)

// Register makes a provider available; providers call it from init.
func Register(p Provider) {
	provMu.Lock()
	defer provMu.Unlock()
	if _, dup := providers[p.Name()]; dup {
		panic("verbs: provider registered twice: " + p.Name())
	}
	providers[p.Name()] = p
}

// Providers lists the registered providers' names.
func Providers() []string {
	provMu.RLock()
	defer provMu.RUnlock()
	out := make([]string, 0, len(providers))
	for n := range providers {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ErrNoDevice is returned when a device name matches no provider's device.
var ErrNoDevice = errors.New("verbs: no such device")

// DeviceList lists the devices of every provider (ibv_get_device_list). A
// provider that fails (no kernel RDMA support) is reported in the error but
// does not hide the others' devices.
func DeviceList() ([]DeviceInfo, error) {
	provMu.RLock()
	ps := make([]Provider, 0, len(providers))
	for _, p := range providers {
		ps = append(ps, p)
	}
	provMu.RUnlock()
	var all []DeviceInfo
	var errs []error
	for _, p := range ps {
		d, err := p.Devices()
		if err != nil {
			errs = append(errs, fmt.Errorf("provider %s: %w", p.Name(), err))
			continue
		}
		all = append(all, d...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	return all, errors.Join(errs...)
}

// OpenDevice opens a device by name, asking each provider
// (ibv_open_device). "provider:name" picks the provider explicitly.
func OpenDevice(name string) (Device, error) {
	provMu.RLock()
	defer provMu.RUnlock()
	for pn, p := range providers {
		if len(name) > len(pn)+1 && name[:len(pn)+1] == pn+":" {
			return p.Open(name[len(pn)+1:])
		}
	}
	for _, p := range providers {
		devs, err := p.Devices()
		if err != nil {
			continue
		}
		for _, d := range devs {
			if d.Name == name {
				return p.Open(name)
			}
		}
	}
	return nil, fmt.Errorf("%w: %q", ErrNoDevice, name)
}

// Device is an open RDMA device context (ibv_context).
type Device interface {
	Info() DeviceInfo
	QueryPort(port int) (PortAttr, error)
	AllocPD() (PD, error)
	CreateCQ(attr CQAttr) (CQ, error)
	Close() error
}

// Access are memory region and QP access flags, as IBV_ACCESS_*.
type Access uint32

// Access flags.
const (
	AccessLocalWrite   Access = 1 << 0
	AccessRemoteWrite  Access = 1 << 1
	AccessRemoteRead   Access = 1 << 2
	AccessRemoteAtomic Access = 1 << 3
)

// Validate checks the ibverbs rule that remote write or atomic access needs
// local write.
func (a Access) Validate() error {
	if a&(AccessRemoteWrite|AccessRemoteAtomic) != 0 && a&AccessLocalWrite == 0 {
		return fmt.Errorf("%w: remote write or atomic access requires local write", ErrInvalidArgument)
	}
	if a&^(AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead|AccessRemoteAtomic) != 0 {
		return fmt.Errorf("%w: unknown access flags %#x", ErrInvalidArgument, uint32(a))
	}
	return nil
}

// PD is a protection domain.
type PD interface {
	// RegMR registers buf; its address as seen by remote peers is MR.Addr.
	RegMR(buf []byte, access Access) (MR, error)
	CreateQP(attr QPInitAttr) (QP, error)
	// CreateAH makes an address handle for UD sends.
	CreateAH(attr AHAttr) (AH, error)
	Dealloc() error
}

// MR is a registered memory region.
type MR interface {
	LKey() uint32
	RKey() uint32
	// Addr is the region's virtual address: what a peer puts in RETH.VA.
	Addr() uint64
	Len() int
	Buf() []byte
	Access() Access
	Dereg() error
}

// AH is an address handle.
type AH interface {
	Attr() AHAttr
	Destroy() error
}

// AHAttr addresses a remote port (ibv_ah_attr with a GRH, as RoCE needs).
type AHAttr struct {
	DGID         GID
	SGIDIndex    int
	FlowLabel    uint32
	HopLimit     uint8
	TrafficClass uint8
	SL           uint8
	Port         int
}
