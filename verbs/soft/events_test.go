package soft

import (
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/verbs"
)

func waitEvent(t *testing.T, d *Device, typ verbs.AsyncEventType, qpn uint32) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case ev := <-d.AsyncEvents():
			if ev.Type == typ && (qpn == 0 || ev.QPN == qpn) {
				return
			}
		case <-deadline:
			t.Fatalf("no %v event for QP %#x", typ, qpn)
		}
	}
}

// TestSQD moves a busy RC QP to SQD: messages already started finish, no
// new one starts, the drain ends with EventSQDrained, posting is still
// allowed, and SQD -> RTS resumes the queue.
func TestSQD(t *testing.T) {
	p := newPair(t, Config{}, Config{}, nil)
	const n, size = 32, 256 << 10
	x := newEnd(t, p.a, verbs.QPTypeRC, n*size, false)
	y := newEnd(t, p.b, verbs.QPTypeRC, n*size, false)
	// A 67 ms ACK timeout: the default 1 ms one can run out of retries on
	// a loaded machine and move the QP to ERR, which is not this test's
	// subject.
	prm := defaultRC()
	prm.timeout = 14
	connect(t, x, y, prm)
	wrs := make([]verbs.SendWR, n)
	for i := range wrs {
		wrs[i] = write(x, y, uint64(i), i*size, size)
	}
	must(t, x.qp.PostSend(wrs))
	// Once the first message is done the loop is busy with the next ones.
	done := waitWC(t, x.scq, 1, 5*time.Second)
	if done[0].Status != verbs.WCSuccess {
		t.Fatalf("first message: %v", done[0].Status)
	}
	must(t, x.qp.Modify(&verbs.QPAttr{State: verbs.QPSSQD, EnSQDAsyncNotify: true},
		verbs.AttrState|verbs.AttrEnSQDAsyncNotify))
	waitEvent(t, p.a, verbs.EventSQDrained, x.qp.QPN())
	a, err := x.qp.Query()
	if err != nil || a.State != verbs.QPSSQD || a.SQDraining {
		t.Fatalf("after drain: %v draining %v err %v", a.State, a.SQDraining, err)
	}
	for {
		var wc [64]verbs.WC
		k, _ := x.scq.Poll(wc[:])
		if k == 0 {
			break
		}
		done = append(done, wc[:k]...)
	}
	if len(done) == n {
		t.Skip("the loop started every message before the move to SQD; nothing to drain")
	}
	noWC(t, x.scq, 20*time.Millisecond)
	must(t, x.qp.PostSend([]verbs.SendWR{write(x, y, n, 0, 64)}))
	noWC(t, x.scq, 10*time.Millisecond)
	must(t, x.qp.Modify(&verbs.QPAttr{State: verbs.QPSRTS}, verbs.AttrState))
	rest := waitWC(t, x.scq, n+1-len(done), 10*time.Second)
	all := append(done, rest...)
	for i, wc := range all {
		if wc.Status != verbs.WCSuccess || wc.ID != uint64(i) {
			t.Fatalf("completion %d: %+v", i, wc)
		}
	}
	t.Logf("%d of %d messages completed before the drain ended", len(done), n)
}

// TestCQOverrunEvent overruns a small CQ: the lost completions are counted
// and one EventCQErr names the CQ.
func TestCQOverrunEvent(t *testing.T) {
	p := newPair(t, Config{}, Config{}, nil)
	x := newEnd(t, p.a, verbs.QPTypeRC, 1<<16, false)
	y := newEnd(t, p.b, verbs.QPTypeRC, 1<<16, false)
	small, err := p.a.CreateCQ(verbs.CQAttr{CQE: 2})
	must(t, err)
	qp, err := x.pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: small, RecvCQ: x.rcq,
		Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 1}})
	must(t, err)
	x.qp = qp
	connect(t, x, y, defaultRC())
	wrs := make([]verbs.SendWR, 5)
	for i := range wrs {
		wrs[i] = write(x, y, uint64(i), 0, 8)
	}
	must(t, x.qp.PostSend(wrs))
	deadline := time.After(5 * time.Second)
	for {
		select {
		case ev := <-p.a.AsyncEvents():
			if ev.Type != verbs.EventCQErr {
				continue
			}
			if ev.CQ != small {
				t.Fatalf("event names CQ %v", ev.CQ)
			}
			for p.a.Counter(CntCQOverflow) != 3 {
				time.Sleep(time.Millisecond)
			}
			return
		case <-deadline:
			t.Fatalf("no CQ error event; cq_overflow %d", p.a.Counter(CntCQOverflow))
		}
	}
}

// TestCommEst: the first packet a QP receives in RTR raises COMM_EST.
func TestCommEst(t *testing.T) {
	p := newPair(t, Config{}, Config{}, nil)
	x := newEnd(t, p.a, verbs.QPTypeRC, 1<<16, false)
	y := newEnd(t, p.b, verbs.QPTypeRC, 1<<16, false)
	prm := defaultRC()
	connect(t, x, y, prm)
	// Take y back to RTR through RESET, as a responder that has not
	// finished connecting.
	must(t, y.qp.Modify(&verbs.QPAttr{State: verbs.QPSReset}, verbs.AttrState))
	must(t, y.qp.Modify(&verbs.QPAttr{State: verbs.QPSInit, Port: 1, AccessFlags: prm.access},
		verbs.AttrState|verbs.AttrPKeyIndex|verbs.AttrPort|verbs.AttrAccessFlags))
	dgid, _ := p.a.GID(0)
	must(t, y.qp.Modify(&verbs.QPAttr{State: verbs.QPSRTR, PathMTU: prm.mtu, DestQPN: x.qp.QPN(), RQPSN: prm.psnA,
		MaxDestRdAtomic: prm.rdAtomic, MinRNRTimer: prm.minRNR, AH: verbs.AHAttr{DGID: dgid, Port: 1}},
		verbs.AttrState|verbs.AttrAV|verbs.AttrPathMTU|verbs.AttrDestQPN|verbs.AttrRQPSN|
			verbs.AttrMaxDestRdAtomic|verbs.AttrMinRNRTimer))
	must(t, x.qp.PostSend([]verbs.SendWR{write(x, y, 1, 0, 100)}))
	waitEvent(t, p.b, verbs.EventCommEst, y.qp.QPN())
	if wc := waitWC(t, x.scq, 1, 5*time.Second)[0]; wc.Status != verbs.WCSuccess {
		t.Fatalf("write to a responder in RTR: %+v", wc)
	}
}
