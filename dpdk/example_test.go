package dpdk_test

import (
	"fmt"
	"log"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/ring"
)

// Two ends of an in-process ring link stand in for two NIC ports: what
// one end transmits, the other receives. The packets come from a pool and
// go back to it; between the two bursts they belong to the link.
func ExamplePort() {
	pool, err := dpdk.NewPool("example", 64, 0)
	if err != nil {
		log.Fatal(err)
	}
	link := ring.NewLink("example", ring.Config{})
	// Services open the same ends by string: dpdk.Open("ring:example.a", cfg).
	var a, b dpdk.Port = link.A(), link.B()

	tx := make([]*dpdk.Packet, 2)
	if n := pool.GetBulk(tx); n != len(tx) {
		log.Fatalf("the pool gave %d packets", n)
	}
	tx[0].CopyFrom([]byte("hello"))
	tx[1].CopyFrom([]byte("RoCEv2"))
	// TxBurst owns the packets it took; the ones it left (a full ring)
	// are still the caller's to retry or free.
	if n := a.TxBurst(0, tx); n < len(tx) {
		dpdk.FreeBulk(tx[n:])
	}

	rx := make([]*dpdk.Packet, 32)
	n := b.RxBurst(0, rx)
	for _, pkt := range rx[:n] {
		fmt.Printf("%q, %d bytes\n", pkt.Data(), pkt.Len())
	}
	dpdk.FreeBulk(rx[:n])

	fmt.Printf("%s sent %d, %s received %d\n", a.Info().Name, a.Stats().TxPackets, b.Info().Name, b.Stats().RxPackets)
	fmt.Printf("%d of %d buffers back in the pool\n", pool.Available(), pool.Size())

	a.Close()
	b.Close()
	// The pool can go only once every packet is back.
	if err := pool.Close(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// "hello", 5 bytes
	// "RoCEv2", 6 bytes
	// ring:example.a sent 2, ring:example.b received 2
	// 64 of 64 buffers back in the pool
}
