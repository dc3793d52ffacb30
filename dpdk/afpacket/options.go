package afpacket

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Defaults for the receive ring. A ring's capacity is not only its bytes:
// the kernel hands a block over when it is full or when the retire timeout
// passes, so at moderate rates every block leaves partly filled and the
// ring holds blocks x timeout worth of traffic. 256 blocks of 256 KiB keep
// both bounds generous: 64 MiB hold about 420k minimum-size frames (each
// takes 96 bytes of header and alignment before the frame, 160 bytes in
// all), 40 ms at 10 Mpps, and at low rates the ring covers 256 x 2 ms =
// half a second of a stalled poller. The 2 ms timeout bounds the latency a partly filled block adds
// when traffic is light.
const (
	DefaultBlockSize = 256 << 10
	DefaultBlocks    = 256
	DefaultTimeout   = 2 * time.Millisecond
	// DefaultFrameSize is the TX slot size: a 1500-byte MTU frame with a VLAN
	// tag plus the 48-byte slot header fits.
	DefaultFrameSize = 2048
	// DefaultTxFrames is the number of TX ring slots per queue (tx=ring)
	// when Config.RingSize is 0.
	DefaultTxFrames = 1024
)

// Fanout modes, the PACKET_FANOUT_* algorithms by name.
const (
	FanoutHash = "hash" // by flow hash: a flow stays on one queue, like RSS
	FanoutLB   = "lb"   // round robin
	FanoutCPU  = "cpu"  // by the CPU that received the frame
	FanoutQM   = "qm"   // by the NIC's RX queue (keeps the NIC's RSS)
	FanoutRnd  = "rnd"  // random
)

// TX methods.
const (
	TxRing = "ring" // PACKET_TX_RING, one sendto per burst
	TxMmsg = "mmsg" // sendmmsg, one call per burst
)

// options are the port-string settings, validated.
type options struct {
	fanout    string
	blockSize int
	blocks    int
	frameSize int
	timeout   time.Duration
	tx        string
	snaplen   int // 0: whole frames
	hwtstamp  bool
	rxhash    bool
}

// DefaultTx is the TX method used when the port string does not choose one:
// sendmmsg, which BenchmarkTx measured faster than the TX ring over veth
// on the 2-core lab VM (medians of 5 runs, one sender, bursts of 32:
// 64-byte frames 1.78 against 1.46 Mpps, 1024-byte 0.78 against 0.73).
// The ring saves the copy from user memory but hands the kernel a paged
// skb whose headers the receive path must pull back into the linear part;
// on a NIC with scatter-gather the ring may win for large frames, so
// tx=ring stays available.
const DefaultTx = TxMmsg

func parseOptions(m map[string]string) (options, error) {
	o := options{fanout: FanoutHash, blockSize: DefaultBlockSize, blocks: DefaultBlocks,
		frameSize: DefaultFrameSize, timeout: DefaultTimeout, tx: DefaultTx}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys) // deterministic error for several bad options
	for _, k := range keys {
		v := m[k]
		var err error
		switch k {
		case "fanout":
			switch v {
			case FanoutHash, FanoutLB, FanoutCPU, FanoutQM, FanoutRnd:
				o.fanout = v
			default:
				err = fmt.Errorf("want hash, lb, cpu, qm or rnd")
			}
		case "blocksize":
			o.blockSize, err = parseSize(v)
		case "blocks":
			o.blocks, err = strconv.Atoi(v)
		case "frame":
			o.frameSize, err = parseSize(v)
		case "snaplen":
			o.snaplen, err = parseSize(v)
		case "timeout":
			o.timeout, err = parseTimeout(v)
		case "tx":
			if v != TxRing && v != TxMmsg {
				err = fmt.Errorf("want ring or mmsg")
			}
			o.tx = v
		case "hwtstamp":
			o.hwtstamp, err = strconv.ParseBool(v)
		case "rxhash":
			o.rxhash, err = strconv.ParseBool(v)
		default:
			err = fmt.Errorf("unknown option")
		}
		if err != nil {
			return o, fmt.Errorf("afpacket: option %s=%s: %w", k, v, err)
		}
	}
	const page = 4096
	switch {
	case o.blockSize < page || o.blockSize%page != 0 || o.blockSize&(o.blockSize-1) != 0:
		return o, fmt.Errorf("afpacket: blocksize %d: want a power of two of at least 4096", o.blockSize)
	case o.blocks < 2 || o.blocks > 1<<16:
		return o, fmt.Errorf("afpacket: blocks %d: want 2 to 65536", o.blocks)
	case o.frameSize < 128 || o.frameSize%16 != 0 || o.frameSize > o.blockSize:
		return o, fmt.Errorf("afpacket: frame %d: want a multiple of 16 from 128 to the block size", o.frameSize)
	case o.snaplen < 0:
		return o, fmt.Errorf("afpacket: snaplen %d is negative", o.snaplen)
	case o.timeout < time.Millisecond:
		return o, fmt.Errorf("afpacket: timeout %v: the kernel counts in milliseconds, want at least 1ms", o.timeout)
	}
	return o, nil
}

// parseSize reads a byte count with an optional K, M or G suffix (powers of 1024).
func parseSize(s string) (int, error) {
	mult := 1
	switch {
	case strings.HasSuffix(s, "K"), strings.HasSuffix(s, "k"):
		mult = 1 << 10
	case strings.HasSuffix(s, "M"), strings.HasSuffix(s, "m"):
		mult = 1 << 20
	case strings.HasSuffix(s, "G"), strings.HasSuffix(s, "g"):
		mult = 1 << 30
	}
	if mult != 1 {
		s = s[:len(s)-1]
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > (1<<31-1)/mult {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return n * mult, nil
}

// parseTimeout reads a duration ("2ms") or a bare number of milliseconds.
func parseTimeout(s string) (time.Duration, error) {
	if n, err := strconv.Atoi(s); err == nil {
		if n > math.MaxInt64/int(time.Millisecond) {
			return 0, fmt.Errorf("%d ms: longer than a Duration holds", n)
		}
		return time.Duration(n) * time.Millisecond, nil
	}
	return time.ParseDuration(s)
}
