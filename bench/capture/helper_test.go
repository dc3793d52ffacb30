//go:build linux

package capture

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/afpacket"
)

// helperEnv names the interface when this test binary runs as our
// capturer; helperReady is the line it prints once capturing.
// helperOptsEnv holds its port options, "key=value,...".
const (
	helperEnv     = "CAPTURE_HELPER_IF"
	helperOptsEnv = "CAPTURE_HELPER_OPTS"
	helperReady   = "afpacket capture listening on"
)

func TestMain(m *testing.M) {
	if ifname := os.Getenv(helperEnv); ifname != "" {
		os.Exit(helperMain(ifname))
	}
	os.Exit(m.Run())
}

// helperMain is our side of the capture benchmark, started like tcpdump
// (in the capture namespace, pinned by taskset): capture ifname into pcap
// records written to /dev/null until SIGINT, then print tcpdump's three
// statistics lines.
func helperMain(ifname string) int {
	pool, err := dpdk.NewPool("capture", 8192, 0)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	opts := map[string]string{}
	for _, kv := range strings.Split(os.Getenv(helperOptsEnv), ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			opts[k] = v
		}
	}
	port, err := afpacket.Open(ifname, dpdk.Config{Pool: pool, Options: opts})
	if err != nil {
		fmt.Println(err)
		return 1
	}
	var stop atomic.Bool
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	// Shutdown closes the port, which wakes the Wait below: the loop sleeps
	// without a timeout, so the Go runtime keeps no timer for it.
	go func() { <-sig; stop.Store(true); _ = port.Close() }()

	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	w := newPcapWriter(null)
	fmt.Printf("%s %s, options %v\n", helperReady, ifname, opts)
	var burst [64]*dpdk.Packet
	for !stop.Load() {
		n := port.RxBurst(0, burst[:])
		if n == 0 {
			_, _ = port.Wait(0, -1)
			continue
		}
		for _, pkt := range burst[:n] {
			w.write(pkt)
		}
		dpdk.FreeBulk(burst[:n])
	}
	w.flush()
	// Counters survive Close, which read the kernel's last figures.
	s, ks := port.Stats(), port.KernelStats(0)
	fmt.Printf("%d packets captured\n%d packets received by filter\n%d packets dropped by kernel\n",
		s.RxPackets, ks.Packets, ks.Drops+s.RxNoBuf)
	return 0
}

// pcapWriter writes nanosecond pcap records the way tcpdump -w does (a
// record header and the captured bytes per frame into a buffer, the
// buffer to the file when full), so both capturers do the same output work.
type pcapWriter struct {
	w   io.Writer
	buf []byte
}

func newPcapWriter(w io.Writer) *pcapWriter {
	p := &pcapWriter{w: w, buf: make([]byte, 0, 64<<10)}
	var hdr [24]byte
	binary.LittleEndian.PutUint32(hdr[0:], 0xa1b23c4d) // nanosecond timestamps
	binary.LittleEndian.PutUint16(hdr[4:], 2)
	binary.LittleEndian.PutUint16(hdr[6:], 4)
	binary.LittleEndian.PutUint32(hdr[16:], snapLen)
	binary.LittleEndian.PutUint32(hdr[20:], 1) // Ethernet
	p.buf = append(p.buf, hdr[:]...)
	return p
}

func (p *pcapWriter) write(pkt *dpdk.Packet) {
	data := pkt.Data()
	if len(p.buf)+16+len(data) > cap(p.buf) {
		p.flush()
	}
	var rec [16]byte
	binary.LittleEndian.PutUint32(rec[0:], uint32(pkt.Timestamp/1e9))
	binary.LittleEndian.PutUint32(rec[4:], uint32(pkt.Timestamp%1e9))
	binary.LittleEndian.PutUint32(rec[8:], uint32(len(data)))
	binary.LittleEndian.PutUint32(rec[12:], uint32(len(data))) // the port does not carry the wire length
	p.buf = append(p.buf, rec[:]...)
	p.buf = append(p.buf, data...)
}

func (p *pcapWriter) flush() {
	_, _ = p.w.Write(p.buf)
	p.buf = p.buf[:0]
}
