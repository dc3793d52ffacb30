//go:build linux

package capture

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/afpacket"
	"github.com/rdma-appliance/appliance/dumper"
)

// helperEnv names the interface when this test binary runs as our
// capturer; helperReady is the line it prints once capturing.
// helperOptsEnv holds its port options, "key=value,...". helperModeEnv
// set to helperModeDumper runs the Lumina dumper on the port instead of
// the pcap loop.
const (
	helperEnv        = "CAPTURE_HELPER_IF"
	helperOptsEnv    = "CAPTURE_HELPER_OPTS"
	helperModeEnv    = "CAPTURE_HELPER_MODE"
	helperModeDumper = "dumper"
	helperReady      = "afpacket capture listening on"
)

// dumperArena is the dumper's num-pkts: more frames than a point sends
// (the senders reach about 1 Mpps here, for pointDur), so a full arena
// means a broken point rather than a slow dumper; it is counted as loss
// all the same. Go maps the arena's pages on first touch, so only the
// slots a point fills cost memory.
const dumperArena = 1 << 22

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
	if os.Getenv(helperModeEnv) == helperModeDumper {
		return dumperMain(port, ifname, opts)
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

// dumperMain runs the Lumina dumper on the port, unpinned (taskset has
// put the process on the capture core) so its worker backs off when the
// ring is empty instead of spinning, until SIGINT; then it stops the
// dumper, which writes its pcap, and prints tcpdump's three statistics
// lines with the dumper's counts (drops: the port's, which are the
// kernel's tp_drops plus RxNoBuf as for ours, and arena-full copies), and
// what the write after the capture cost.
func dumperMain(port *afpacket.Port, ifname string, opts map[string]string) int {
	dir, err := os.MkdirTemp("", "capbench-dumper")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer os.RemoveAll(dir)
	// The benchmark's frames are plain UDP to the RoCE port, not mirrored
	// copies; taking that port for the rewrite port makes Stop restore and
	// write them instead of counting them foreign, so the write below is
	// the work a real capture's Stop does.
	d, err := dumper.New(dumper.Config{Name: "capbench", Port: port, SnapLen: snapLen, NumPkts: dumperArena,
		RewritePort: 4791, Dir: dir})
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer d.Close()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	if err := d.Start(); err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Printf("%s %s, options %v, Lumina dumper: arena %d x %d bytes\n", helperReady, ifname, opts, dumperArena, snapLen)
	<-sig
	cpu0 := selfCPU()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := d.Stop(ctx)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	cpu := selfCPU() - cpu0
	ks := port.KernelStats(0)
	fmt.Printf("%d packets captured\n%d packets received by filter\n%d packets dropped by kernel\n",
		res.Captured, ks.Packets, res.PortDropped+res.ArenaFull)
	fmt.Printf("%d packets written in %.6f CPU-seconds (arena full %d, port dropped %d, malformed %v)\n",
		res.Written, cpu.Seconds(), res.ArenaFull, res.PortDropped, res.Malformed)
	_ = port.Close()
	return 0
}

// selfCPU is the process's user and system time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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
