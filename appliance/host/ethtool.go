//go:build linux

package host

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrNoStats means a netdev's driver exports no statistics through ethtool
// (loopback, some virtual devices).
var ErrNoStats = errors.New("no ethtool statistics")

// The ethtool ABI (linux/ethtool.h) that x/sys/unix does not carry.
const (
	ethSSStats     = 1  // ETH_SS_STATS
	ethGStringLen  = 32 // ETH_GSTRING_LEN
	maxEthtoolStat = 1 << 16
)

// EthtoolStats reads a netdev's statistics as `ethtool -S` prints them,
// through the SIOCETHTOOL ioctl rather than a fork of ethtool, so that an
// agent can sample its NIC's counters every few milliseconds. The names are
// read at Open and again whenever the driver reports another count (a
// driver reload). Not safe for concurrent use.
type EthtoolStats struct {
	fd     int
	netdev string
	names  []string
	index  map[string]int
	stats  []byte // struct ethtool_stats and its values
}

// OpenEthtoolStats opens the statistics of netdev in the calling thread's
// network namespace.
func OpenEthtoolStats(netdev string) (*EthtoolStats, error) {
	if netdev == "" || len(netdev) >= unix.IFNAMSIZ {
		return nil, fmt.Errorf("host: ethtool: netdev %q: 1 to %d bytes", netdev, unix.IFNAMSIZ-1)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("host: ethtool %s: %w", netdev, err)
	}
	e := &EthtoolStats{fd: fd, netdev: netdev}
	n, err := e.count()
	if err == nil {
		err = e.loadNames(n)
	}
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return e, nil
}

// Close releases the socket.
func (e *EthtoolStats) Close() error { return unix.Close(e.fd) }

// Netdev is the interface read.
func (e *EthtoolStats) Netdev() string { return e.netdev }

// Names are the statistics' names in the driver's order.
func (e *EthtoolStats) Names() []string { return e.names }

// Index is the position of the statistic called name in Read's values.
func (e *EthtoolStats) Index(name string) (int, bool) {
	i, ok := e.index[name]
	return i, ok
}

// Read returns the current values in dst (grown to len(Names())). When
// the driver's count changed since the names were read (a driver reload),
// the names are read again first and changed reports it, so that a caller
// holding indexes looks them up anew.
func (e *EthtoolStats) Read(dst []uint64) (vals []uint64, changed bool, err error) {
	// The kernel writes as many values as the driver has now, whatever
	// the buffer says: ask for the count first (as ethtool does), and
	// keep slack in the buffers for a reload between the two calls.
	n, err := e.count()
	if err != nil {
		return dst, false, err
	}
	if n != len(e.names) {
		if err := e.loadNames(n); err != nil {
			return dst, true, err
		}
		changed = true
	}
	n = len(e.names)
	binary.NativeEndian.PutUint32(e.stats[0:4], unix.ETHTOOL_GSTATS)
	binary.NativeEndian.PutUint32(e.stats[4:8], uint32(n))
	if err := e.ioctl(unsafe.Pointer(&e.stats[0])); err != nil {
		return dst, changed, fmt.Errorf("host: ethtool -S %s: %w", e.netdev, err)
	}
	vals, err = decodeGStats(e.stats, n, dst)
	if err != nil {
		return dst, changed, fmt.Errorf("host: ethtool -S %s: %w", e.netdev, err)
	}
	return vals, changed, nil
}

// decodeGStats reads the n values of a struct ethtool_stats the kernel
// filled (cmd, n_stats, then n_stats u64) into dst, grown to n. The
// kernel's count must be the one asked for: another means the driver
// changed between the calls and the values are not those of the names.
func decodeGStats(buf []byte, n int, dst []uint64) ([]uint64, error) {
	if len(buf) < 8 {
		return dst, fmt.Errorf("statistics buffer of %d bytes", len(buf))
	}
	if got := int(binary.NativeEndian.Uint32(buf[4:8])); got != n {
		return dst, fmt.Errorf("the driver's statistics changed while read (%d, now %d)", n, got)
	}
	if n < 0 || (len(buf)-8)/8 < n {
		return dst, fmt.Errorf("%d statistics in a buffer of %d bytes", n, len(buf))
	}
	if cap(dst) < n {
		dst = make([]uint64, n)
	}
	dst = dst[:n]
	for i := range dst {
		dst[i] = binary.NativeEndian.Uint64(buf[8+8*i:])
	}
	return dst, nil
}

// count is the number of statistics the driver has now.
func (e *EthtoolStats) count() (int, error) {
	// struct ethtool_sset_info: cmd, reserved, sset_mask, then one u32
	// per set in the mask.
	var info [24]byte
	binary.NativeEndian.PutUint32(info[0:4], unix.ETHTOOL_GSSET_INFO)
	binary.NativeEndian.PutUint64(info[8:16], 1<<ethSSStats)
	if err := e.ioctl(unsafe.Pointer(&info[0])); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) {
			return 0, fmt.Errorf("host: ethtool %s: %w", e.netdev, ErrNoStats)
		}
		return 0, fmt.Errorf("host: ethtool %s: string sets: %w", e.netdev, err)
	}
	n := int(binary.NativeEndian.Uint32(info[16:20]))
	if binary.NativeEndian.Uint64(info[8:16])&(1<<ethSSStats) == 0 || n == 0 {
		return 0, fmt.Errorf("host: ethtool %s: %w", e.netdev, ErrNoStats)
	}
	if n > maxEthtoolStat {
		return 0, fmt.Errorf("host: ethtool %s: %d statistics, more than %d", e.netdev, n, maxEthtoolStat)
	}
	return n, nil
}

// loadNames reads the names of the driver's n statistics.
func (e *EthtoolStats) loadNames(n int) error {
	slack := n + 64
	// struct ethtool_gstrings: cmd, string_set, len, then len names of
	// ETH_GSTRING_LEN bytes, NUL-padded.
	strs := make([]byte, 12+slack*ethGStringLen)
	binary.NativeEndian.PutUint32(strs[0:4], unix.ETHTOOL_GSTRINGS)
	binary.NativeEndian.PutUint32(strs[4:8], ethSSStats)
	binary.NativeEndian.PutUint32(strs[8:12], uint32(n))
	if err := e.ioctl(unsafe.Pointer(&strs[0])); err != nil {
		return fmt.Errorf("host: ethtool %s: names: %w", e.netdev, err)
	}
	names, index, err := decodeGStrings(strs, n)
	if err != nil {
		return fmt.Errorf("host: ethtool %s: names: %w", e.netdev, err)
	}
	e.names, e.index = names, index
	e.stats = make([]byte, 8+8*slack)
	return nil
}

// decodeGStrings reads the n names of a struct ethtool_gstrings the
// kernel filled (cmd, string_set, len, then len names of ETH_GSTRING_LEN
// bytes, NUL-padded) and indexes them by name (a name listed twice, as
// some drivers do, indexes its first). The kernel's count must be the one
// asked for: another means the driver changed between the calls.
func decodeGStrings(buf []byte, n int) (names []string, index map[string]int, err error) {
	if len(buf) < 12 {
		return nil, nil, fmt.Errorf("string buffer of %d bytes", len(buf))
	}
	if got := int(binary.NativeEndian.Uint32(buf[8:12])); got != n {
		return nil, nil, fmt.Errorf("the driver's statistics changed while read (%d, now %d)", n, got)
	}
	if n < 0 || (len(buf)-12)/ethGStringLen < n {
		return nil, nil, fmt.Errorf("%d names in a buffer of %d bytes", n, len(buf))
	}
	names = make([]string, n)
	index = make(map[string]int, n)
	for i := range n {
		b := buf[12+i*ethGStringLen : 12+(i+1)*ethGStringLen]
		if j := bytes.IndexByte(b, 0); j >= 0 {
			b = b[:j]
		}
		names[i] = string(b)
		if _, dup := index[names[i]]; !dup {
			index[names[i]] = i
		}
	}
	return names, index, nil
}

// ifreqData is struct ifreq with its union as ifr_data.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte
}

func (e *EthtoolStats) ioctl(data unsafe.Pointer) error {
	var ifr ifreqData
	copy(ifr.name[:], e.netdev)
	ifr.data = data
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(e.fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	runtime.KeepAlive(data)
	if errno != 0 {
		return errno
	}
	return nil
}
