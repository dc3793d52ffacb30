package dtatranslator

import (
	"fmt"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	_ "github.com/rdma-appliance/appliance/dpdk/afpacket" // the driver
	"github.com/rdma-appliance/appliance/dpdk/netns"
)

// TestServiceNetns is TestServiceEndToEnd across network namespaces: the
// collector's soft RNIC, the translator and two reporters each on an
// AF_PACKET port in a namespace of its own, joined over veth pairs by a
// software switch (ring.Bridge on AF_PACKET ports at the far ends). The
// exchange runs over the test's loopback. Needs root.
func TestServiceNetns(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	pool, err := dpdk.NewPool(fmt.Sprintf("dtans%p", t), 16384, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	open := func(ns, ifc string) dpdk.Port {
		p, err := netns.OpenPort(ns, "afpacket:"+ifc+",timeout=1", dpdk.Config{Pool: pool, RxQueues: 1, TxQueues: 1, Promiscuous: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	var near, far []dpdk.Port
	for range 4 {
		v := netns.TestPair(t, "dta", 0)
		near = append(near, open(v.NSA, v.IfA))
		far = append(far, open(v.NSB, v.IfB))
	}
	// Flows are flushed after 20 ms, not 1: over veth and under the race
	// detector a flow's five postcards spread over more than a
	// millisecond, and a record written before its last hop is
	// incomplete, which no longer counts as a path answered.
	b := buildServiceBed(t, near[0], near[1], near[2:], far, func(s *Spec) { s.FlushTimeout = 20 * time.Millisecond })
	sk := b.coll.regs.Sketches[ecSketch]
	var reps []*Reporter
	for i := range 2 {
		cfg := ReporterConfig{Keys: 2000, Redundancy: 2, Lists: []uint32{uint32(i + 1)}, Hops: 5,
			Sketch: &sk, SketchID: ecSketch, Retransmittable: true, Loss: 0.01, Count: 3000, Seed: 6, Rate: 50000}
		cfg.Mix.KeyWrite, cfg.Mix.Append, cfg.Mix.KeyIncrement, cfg.Mix.Postcarder = 3, 2, 2, 1
		reps = append(reps, b.reporter(t, i, cfg))
	}
	runReporters(t, reps)
	st := b.settle(t)
	b.checkTruth(t, reps...)
	t.Logf("over veth: %d reports, %d RDMA packets, %d NACKs, %d resyncs", st.Stats.Reports, st.Stats.RDMAOut,
		st.Seq.NACKs, st.Collectors[0].Conn.Resyncs)
}
