//go:build !linux

package afpacket

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
)

// ErrClosed is returned by Wait on a closed port.
var ErrClosed = errors.New("afpacket: port closed")

// errNotLinux is what every call returns outside Linux: AF_PACKET is a
// Linux socket family.
var errNotLinux = fmt.Errorf("afpacket: AF_PACKET ports exist only on Linux, not on %s", runtime.GOOS)

// Port has the Linux driver's methods so that code using them compiles
// everywhere; no Port can be opened outside Linux.
type Port struct{}

var _ dpdk.Port = (*Port)(nil)

// KernelStats are the kernel's counters for one RX socket.
type KernelStats struct {
	Packets uint64
	Drops   uint64
	FreezeQ uint64
}

type driver struct{}

func (driver) Open(dev string, cfg dpdk.Config) (dpdk.Port, error) { return nil, errNotLinux }

func init() { dpdk.RegisterDriver("afpacket", driver{}) }

// Open fails outside Linux.
func Open(ifname string, cfg dpdk.Config) (*Port, error) {
	if _, err := parseOptions(cfg.Options); err != nil {
		return nil, err
	}
	return nil, errNotLinux
}

func (p *Port) ID() uint16                             { return 0 }
func (p *Port) Info() dpdk.PortInfo                    { return dpdk.PortInfo{NUMANode: -1} }
func (p *Port) RxBurst(q int, pkts []*dpdk.Packet) int { return 0 }
func (p *Port) TxBurst(q int, pkts []*dpdk.Packet) int { return 0 }
func (p *Port) Stats() dpdk.Stats                      { return dpdk.Stats{} }
func (p *Port) KernelStats(q int) KernelStats          { return KernelStats{} }
func (p *Port) Wait(q int, timeout time.Duration) (bool, error) {
	return false, errNotLinux
}
func (p *Port) Close() error { return nil }

// Block is a TPACKET_V3 block; there are none off Linux.
type Block struct{}

func (b *Block) Next(f *dpdk.Frame) bool { return false }
func (b *Block) Len() int                { return 0 }

func (b *Block) WriteEPB(buf []byte, snap, stopAt int, until int64) (n, used int, wire uint64, hw int) {
	return 0, 0, 0, 0
}

func (p *Port) ReadBlocks(qi, max int, fn func(b *Block)) int { return 0 }

func (p *Port) ReadSlots(qi, burst int, arena []byte, stride int, lens []uint16, wire []uint32) (n int, bytes uint64) {
	return 0, 0
}
