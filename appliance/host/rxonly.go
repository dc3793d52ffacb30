package host

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
)

// RxOnly opens the port named by its port string with queues receive
// queues and counts what arrives for d (like testpmd's rxonly), one
// unpinned poll loop over the queues, printing the port and a line of
// rates a second to w.
func RxOnly(ctx context.Context, w io.Writer, name string, queues int, d time.Duration) error {
	pool, err := dpdk.NewPool("ports-open", 8192, 0)
	if err != nil {
		return err
	}
	defer pool.Close()
	port, err := dpdk.Open(name, dpdk.Config{Pool: pool, RxQueues: queues, TxQueues: 1, Promiscuous: true})
	if err != nil {
		return err
	}
	defer port.Close()
	info := port.Info()
	fmt.Fprintf(w, "%s: driver %s, MAC %s, MTU %d, %d rx queues, NUMA node %d\n", info.Name, info.Driver,
		net.HardwareAddr(info.MAC[:]), info.MTU, info.RxQueues, info.NUMANode)
	var burst [64]*dpdk.Packet
	bo := dpdk.DefaultBackoff()
	start, tick := time.Now(), time.Now()
	var last dpdk.Stats
	for time.Since(start) < d && ctx.Err() == nil {
		got := 0
		for q := 0; q < info.RxQueues; q++ {
			n := port.RxBurst(q, burst[:])
			dpdk.FreeBulk(burst[:n])
			got += n
		}
		if got == 0 {
			bo.Idle()
		} else {
			bo.Busy()
		}
		if el := time.Since(tick); el >= time.Second {
			s := port.Stats()
			fmt.Fprintf(w, "  rx %.0f pkt/s %.1f Mbit/s, dropped %d, errors %d\n",
				float64(s.RxPackets-last.RxPackets)/el.Seconds(), float64(s.RxBytes-last.RxBytes)*8/el.Seconds()/1e6, s.Dropped, s.Errors)
			last, tick = s, time.Now()
		}
	}
	s := port.Stats()
	fmt.Fprintf(w, "total: rx %d packets %d bytes, dropped %d, no buffer %d, errors %d\n", s.RxPackets, s.RxBytes, s.Dropped, s.RxNoBuf, s.Errors)
	return nil
}
