//go:build linux

package capture

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/afpacket"
	"github.com/rdma-appliance/appliance/dumper"
)

// helperEnv names the interface when this test binary runs the Lumina
// dumper as a capturer; helperReady is the line it prints once capturing.
// helperOptsEnv holds its port options, "key=value,...".
const (
	helperEnv     = "CAPTURE_HELPER_IF"
	helperOptsEnv = "CAPTURE_HELPER_OPTS"
	helperReady   = "afpacket capture listening on"
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

// helperMain runs the Lumina dumper on ifname, started like tcpdump (in
// the capture namespace, pinned by taskset).
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
	return dumperMain(port, ifname, opts)
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
	cpu0 := dpdk.ProcessCPU()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := d.Stop(ctx)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	cpu := dpdk.ProcessCPU() - cpu0
	ks := port.KernelStats(0)
	fmt.Printf("%d packets captured\n%d packets received by filter\n%d packets dropped by kernel\n",
		res.Captured, ks.Packets, res.PortDropped+res.ArenaFull)
	fmt.Printf("%d packets written in %.6f CPU-seconds (arena full %d, port dropped %d, malformed %v)\n",
		res.Written, cpu.Seconds(), res.ArenaFull, res.PortDropped, res.Malformed)
	_ = port.Close()
	return 0
}
