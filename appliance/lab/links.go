package lab

import (
	"fmt"

	"github.com/rdma-appliance/appliance/dpdk"
	_ "github.com/rdma-appliance/appliance/dpdk/afpacket" // --netns ports
	"github.com/rdma-appliance/appliance/dpdk/netns"
	"github.com/rdma-appliance/appliance/dpdk/ring"
)

// links makes n links for a stage: in-process ring links, or with --netns
// veth pairs, each between two fresh network namespaces, opened as
// AF_PACKET ports (near ends in the first namespace, far ends in the
// second, which a software switch joins). closeAll closes the ports and
// removes the namespaces.
func (l *Lab) links(name string, n int, pool *dpdk.Pool) (near, far []dpdk.Port, closeAll func(), err error) {
	var closers []func()
	closeAll = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	defer func() {
		if err != nil {
			closeAll()
		}
	}()
	if !l.Netns {
		for i := range n {
			lk := ring.NewLink(fmt.Sprintf("%s%d", name, i), ring.Config{RingSize: 4096})
			a, b := lk.A(), lk.B()
			closers = append(closers, func() { a.Close(); b.Close() })
			near, far = append(near, a), append(far, b)
		}
		return near, far, closeAll, nil
	}
	netns.ReapStale("lab")
	open := func(ns, ifc string) (dpdk.Port, error) {
		// A 1 ms block timeout: TPACKET_V3 hands frames over a block at
		// a time, and the stage's flows are latency-bound.
		p, err := netns.OpenPort(ns, "afpacket:"+ifc+",timeout=1", dpdk.Config{Pool: pool, RxQueues: 1, TxQueues: 1, Promiscuous: true})
		if err != nil {
			return nil, fmt.Errorf("lab --netns: %w", err)
		}
		return p, nil
	}
	for range n {
		pr, err := netns.NewPair("lab", 0)
		if err != nil {
			return nil, nil, closeAll, fmt.Errorf("lab --netns: %w", err)
		}
		closers = append(closers, func() { _ = pr.Close() })
		a, err := open(pr.NSA, pr.IfA)
		if err != nil {
			return nil, nil, closeAll, err
		}
		closers = append(closers, func() { a.Close() })
		b, err := open(pr.NSB, pr.IfB)
		if err != nil {
			return nil, nil, closeAll, err
		}
		closers = append(closers, func() { b.Close() })
		near, far = append(near, a), append(far, b)
	}
	return near, far, closeAll, nil
}
