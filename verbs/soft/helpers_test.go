package soft

import (
	"context"
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/verbs"
)

var testSeq atomic.Int64

// pair is two soft RNICs joined by a ring link.
type pair struct {
	a, b   *Device
	la, lb dpdk.Port
}

// newPair creates and starts two devices on a ring link; wrap, when set,
// wraps each device's port (for loss injection).
func newPair(t testing.TB, ca, cb Config, wrap func(side int, p dpdk.Port) dpdk.Port) *pair {
	t.Helper()
	id := testSeq.Add(1)
	l := ring.NewLink(fmt.Sprintf("t%d", id), ring.Config{RingSize: 4096})
	var pa, pb dpdk.Port = l.A(), l.B()
	if wrap != nil {
		pa, pb = wrap(0, pa), wrap(1, pb)
	}
	if len(ca.GIDs) == 0 {
		ca.GIDs = []netip.Addr{netip.MustParseAddr("10.0.0.1")}
	}
	if len(cb.GIDs) == 0 {
		cb.GIDs = []netip.Addr{netip.MustParseAddr("10.0.0.2")}
	}
	if ca.PoolSize == 0 && ca.Pool == nil {
		ca.PoolSize = 4096
	}
	if cb.PoolSize == 0 && cb.Pool == nil {
		cb.PoolSize = 4096
	}
	a, err := NewDevice(fmt.Sprintf("softA%d", id), pa, ca)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewDevice(fmt.Sprintf("softB%d", id), pb, cb)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		a.Close()
		b.Close()
	})
	return &pair{a: a, b: b, la: pa, lb: pb}
}

// end is one side of a connection: a PD, CQs, a QP and a registered buffer.
type end struct {
	dev  *Device
	pd   verbs.PD
	scq  verbs.CQ
	rcq  verbs.CQ
	qp   verbs.QP
	mr   verbs.MR
	buf  []byte
	gidx int
}

func newEnd(t testing.TB, d *Device, typ verbs.QPType, bufSize int, ts bool) *end {
	t.Helper()
	pd, err := d.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	scq, err := d.CreateCQ(verbs.CQAttr{CQE: 4096, CompletionTimestamps: ts})
	if err != nil {
		t.Fatal(err)
	}
	rcq, err := d.CreateCQ(verbs.CQAttr{CQE: 4096, CompletionTimestamps: ts})
	if err != nil {
		t.Fatal(err)
	}
	qp, err := pd.CreateQP(verbs.QPInitAttr{Type: typ, SendCQ: scq, RecvCQ: rcq,
		Cap: verbs.QPCap{MaxSendWR: 1024, MaxRecvWR: 1024, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInlineData: 256}})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, bufSize)
	mr, err := pd.RegMR(buf, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead|verbs.AccessRemoteAtomic)
	if err != nil {
		t.Fatal(err)
	}
	return &end{dev: d, pd: pd, scq: scq, rcq: rcq, qp: qp, mr: mr, buf: buf}
}

const testQKey = 0x11111111

func (e *end) udUp(t testing.TB) {
	t.Helper()
	must(t, e.qp.Modify(&verbs.QPAttr{State: verbs.QPSInit, Port: 1, QKey: testQKey},
		verbs.AttrState|verbs.AttrPKeyIndex|verbs.AttrPort|verbs.AttrQKey))
	must(t, e.qp.Modify(&verbs.QPAttr{State: verbs.QPSRTR}, verbs.AttrState))
	must(t, e.qp.Modify(&verbs.QPAttr{State: verbs.QPSRTS, SQPSN: 0}, verbs.AttrState|verbs.AttrSQPSN))
}

// rcParams are the connection attributes tests vary.
type rcParams struct {
	mtu       verbs.MTU
	timeout   uint8
	retry     uint8
	rnrRetry  uint8
	minRNR    uint8
	rdAtomic  uint8
	access    verbs.Access
	psnA      uint32
	psnB      uint32
	flowLabel uint32
}

func defaultRC() rcParams {
	return rcParams{mtu: verbs.MTU1024, timeout: 8, retry: 7, rnrRetry: 7, minRNR: 1, rdAtomic: 4,
		access: verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead | verbs.AccessRemoteAtomic,
		psnA:   0x100, psnB: 0xfffff0}
}

// connect brings two RC ends to RTS towards each other.
func connect(t testing.TB, x, y *end, p rcParams) {
	t.Helper()
	up := func(e, peer *end, sq, rq uint32) {
		must(t, e.qp.Modify(&verbs.QPAttr{State: verbs.QPSInit, Port: 1, AccessFlags: p.access},
			verbs.AttrState|verbs.AttrPKeyIndex|verbs.AttrPort|verbs.AttrAccessFlags))
		dgid, _ := peer.dev.GID(peer.gidx)
		must(t, e.qp.Modify(&verbs.QPAttr{State: verbs.QPSRTR, PathMTU: p.mtu, DestQPN: peer.qp.QPN(), RQPSN: rq,
			MaxDestRdAtomic: p.rdAtomic, MinRNRTimer: p.minRNR,
			AH: verbs.AHAttr{DGID: dgid, SGIDIndex: e.gidx, FlowLabel: p.flowLabel, Port: 1}},
			verbs.AttrState|verbs.AttrAV|verbs.AttrPathMTU|verbs.AttrDestQPN|verbs.AttrRQPSN|
				verbs.AttrMaxDestRdAtomic|verbs.AttrMinRNRTimer))
		must(t, e.qp.Modify(&verbs.QPAttr{State: verbs.QPSRTS, Timeout: p.timeout, RetryCnt: p.retry,
			RNRRetry: p.rnrRetry, SQPSN: sq, MaxRdAtomic: p.rdAtomic},
			verbs.AttrState|verbs.AttrTimeout|verbs.AttrRetryCnt|verbs.AttrRNRRetry|verbs.AttrSQPSN|verbs.AttrMaxQPRdAtomic))
	}
	up(x, y, p.psnA, p.psnB)
	up(y, x, p.psnB, p.psnA)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// waitWC polls cq until n completions arrived or the deadline passes.
func waitWC(t testing.TB, cq verbs.CQ, n int, d time.Duration) []verbs.WC {
	t.Helper()
	out := make([]verbs.WC, 0, n)
	buf := make([]verbs.WC, 64)
	deadline := time.Now().Add(d)
	for len(out) < n {
		k, err := cq.Poll(buf[:min(len(buf), n-len(out))])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, buf[:k]...)
		if k == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("timeout: %d of %d completions: %+v", len(out), n, out)
			}
			select {
			case <-cq.Notify():
			case <-time.After(time.Millisecond):
			}
		}
	}
	return out
}

// noWC checks that no completion arrives within d.
func noWC(t testing.TB, cq verbs.CQ, d time.Duration) {
	t.Helper()
	time.Sleep(d)
	var wc [4]verbs.WC
	if n, _ := cq.Poll(wc[:]); n != 0 {
		t.Fatalf("unexpected completions: %+v", wc[:n])
	}
}

func staticNeighbors(p *pair) {
	for i := 0; ; i++ {
		g, ok := p.b.GID(i)
		if !ok {
			break
		}
		p.a.AddNeighbor(g.Addr(), header.MAC(p.b.MAC()))
	}
	for i := 0; ; i++ {
		g, ok := p.a.GID(i)
		if !ok {
			break
		}
		p.b.AddNeighbor(g.Addr(), header.MAC(p.a.MAC()))
	}
}
