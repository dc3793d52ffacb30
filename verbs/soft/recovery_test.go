package soft

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/verbs"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// lossyPair is a connected RC pair whose ports can drop packets.
func lossyPair(t *testing.T, prm rcParams, ca, cb Config) (*pair, *end, *end, [2]*lossyPort) {
	var ports [2]*lossyPort
	wrap := func(side int, pt dpdk.Port) dpdk.Port {
		ports[side] = &lossyPort{Port: pt}
		return ports[side]
	}
	p := newPair(t, ca, cb, wrap)
	x := newEnd(t, p.a, verbs.QPTypeRC, 1<<20, false)
	y := newEnd(t, p.b, verbs.QPTypeRC, 1<<20, false)
	connect(t, x, y, prm)
	return p, x, y, ports
}

func write(x, y *end, id uint64, off, n int) verbs.SendWR {
	return verbs.SendWR{ID: id, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGL:        []verbs.SGE{{Addr: x.mr.Addr() + uint64(off), Length: uint32(n), LKey: x.mr.LKey()}},
		RemoteAddr: y.mr.Addr() + uint64(off), RKey: y.mr.RKey()}
}

// TestTailLossRetryExceeded drops every copy of the last packet of a
// message: the requester retransmits exactly retry_cnt times, one timeout
// apart, then completes with RETRY_EXC_ERR and flushes the rest.
func TestTailLossRetryExceeded(t *testing.T) {
	prm := defaultRC()
	prm.retry = 3
	prm.timeout = 8 // 1.05 ms
	_, x, y, ports := lossyPair(t, prm, Config{}, Config{})
	// A one-packet message, so that no ACK of earlier packets can arrive
	// after a timeout and count as progress (which resets the retry count).
	last := prm.psnA
	var copies int
	var times []int64
	ports[0].setDecide(func(i int, p *roce.Packet, _ []byte) fate {
		if p.Opcode.Transport() == roce.TransportRC && p.PSN == last && !opIsResponse(p.Opcode) {
			copies++
			times = append(times, dpdk.Nanotime())
			return drop
		}
		return pass
	})
	start := time.Now()
	// One message only: a later one would make the responder NAK the gap,
	// which is recovery by NAK, not by the timer.
	must(t, x.qp.PostSend([]verbs.SendWR{write(x, y, 1, 0, 1000)}))
	wcs := waitWC(t, x.scq, 1, 5*time.Second)
	if wcs[0].Status != verbs.WCRetryExcErr || wcs[0].ID != 1 {
		t.Fatalf("completions %+v", wcs)
	}
	ports[0].mu.Lock()
	n := copies
	ts := append([]int64(nil), times...)
	ports[0].mu.Unlock()
	if n != 1+int(prm.retry) {
		t.Fatalf("the tail packet went out %d times, want 1 + retry_cnt = %d (%v) %v", n, 1+prm.retry, ts, nonzero(x.dev.Counters()))
	}
	rto := verbs.TimeoutNanos(prm.timeout)
	for i := 1; i < len(ts); i++ {
		if gap := ts[i] - ts[i-1]; gap < rto*95/100 {
			t.Fatalf("retransmission %d after %d ns, before the %d ns timeout", i, gap, rto)
		}
	}
	if el := time.Since(start); el < time.Duration(rto)*time.Duration(prm.retry+1) {
		t.Fatalf("gave up after %v", el)
	}
	if got := x.dev.Counter(CntLocalAckTimeoutErr); got != uint64(prm.retry)+1 {
		t.Fatalf("local_ack_timeout_err %d", got)
	}
	a, _ := x.qp.Query()
	if a.State != verbs.QPSErr {
		t.Fatalf("QP state %v", a.State)
	}
	if err := x.qp.PostSend([]verbs.SendWR{write(x, y, 3, 0, 1)}); err == nil {
		t.Fatal("post to a QP in ERR accepted")
	}
}

// TestNAKOncePerGap drops one middle packet of a long WRITE: the responder
// NAKs once, the requester goes back to the lost PSN, memory ends right.
func TestNAKOncePerGap(t *testing.T) {
	prm := defaultRC()
	prm.timeout = 14 // long, so recovery must come from the NAK
	_, x, y, ports := lossyPair(t, prm, Config{}, Config{})
	lost := roce.AddPSN(prm.psnA, 3)
	dropped := false
	ports[0].setDecide(func(i int, p *roce.Packet, _ []byte) fate {
		if !dropped && p.PSN == lost && p.Opcode == roce.RCWriteMiddle {
			dropped = true
			return drop
		}
		return pass
	})
	fill(x.buf, 3)
	must(t, x.qp.PostSend([]verbs.SendWR{write(x, y, 1, 0, 40*1024)}))
	wc := waitWC(t, x.scq, 1, 2*time.Second)[0]
	if wc.Status != verbs.WCSuccess {
		t.Fatalf("wc %+v", wc)
	}
	if !bytes.Equal(x.buf[:40*1024], y.buf[:40*1024]) {
		t.Fatal("memory differs")
	}
	if n := x.dev.Counter(CntPacketSeqErr); n != 1 {
		t.Fatalf("packet_seq_err %d, want 1 (one NAK per gap)", n)
	}
	if n := y.dev.Counter(CntOutOfSequence); n != 1 {
		// Once per NAK sequence error, as mlx5 and Lumina's checks
		// count it, not per packet dropped behind the gap.
		t.Fatalf("out_of_sequence %d, want 1 (one per gap)", n)
	}
	if n := x.dev.Counter(CntLocalAckTimeoutErr); n != 0 {
		t.Fatalf("recovered by timeout (%d), not by NAK", n)
	}
}

// TestImpliedNAKRead drops a READ response in the middle and the last one:
// the requester notices the gap (a later response, or the ACK of a later
// WRITE) and asks again for the rest.
func TestImpliedNAKRead(t *testing.T) {
	for _, which := range []string{"middle", "last"} {
		t.Run(which, func(t *testing.T) {
			prm := defaultRC()
			prm.timeout = 14
			_, x, y, ports := lossyPair(t, prm, Config{}, Config{})
			dropped := false
			ports[1].setDecide(func(i int, p *roce.Packet, _ []byte) fate {
				want := roce.RCReadResponseMiddle
				if which == "last" {
					want = roce.RCReadResponseLast
				}
				if !dropped && p.Opcode == want {
					dropped = true
					return drop
				}
				return pass
			})
			fill(y.buf, 4)
			rd := verbs.SendWR{ID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
				SGL:        []verbs.SGE{{Addr: x.mr.Addr(), Length: 10000, LKey: x.mr.LKey()}},
				RemoteAddr: y.mr.Addr() + 50000, RKey: y.mr.RKey()}
			must(t, x.qp.PostSend([]verbs.SendWR{rd, write(x, y, 2, 200000, 10)}))
			wcs := waitWC(t, x.scq, 2, 2*time.Second)
			if wcs[0].Status != verbs.WCSuccess || wcs[1].Status != verbs.WCSuccess {
				t.Fatalf("wcs %+v", wcs)
			}
			if !bytes.Equal(x.buf[:10000], y.buf[50000:60000]) {
				t.Fatal("READ data differs")
			}
			if x.dev.Counter(CntImpliedNakSeqErr) == 0 {
				t.Fatal("implied_nak_seq_err not counted")
			}
			if x.dev.Counter(CntLocalAckTimeoutErr) != 0 {
				t.Fatal("recovered by timeout")
			}
		})
	}
}

// TestRNR sends with no receive posted: with rnr_retry 2 the requester gives
// up after three RNR NAKs; with 7 (infinite) it succeeds once a receive is
// posted.
func TestRNR(t *testing.T) {
	prm := defaultRC()
	prm.rnrRetry = 2
	prm.minRNR = 1 // 10 us
	// An ACK timeout far longer than the RNR wait: a 1 ms one can expire on
	// a loaded machine before the RNR NAK is processed, and the timeout's
	// retransmission draws an RNR NAK of its own.
	prm.timeout = 14 // 67 ms
	_, x, y, _ := lossyPair(t, prm, Config{}, Config{})
	send := verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{{Addr: x.mr.Addr(), Length: 64, LKey: x.mr.LKey()}}}
	must(t, x.qp.PostSend([]verbs.SendWR{send}))
	wc := waitWC(t, x.scq, 1, 2*time.Second)[0]
	if wc.Status != verbs.WCRNRRetryExcErr {
		t.Fatalf("wc %+v", wc)
	}
	if n := y.dev.Counter(CntRNRNakSent); n != 3 {
		t.Fatalf("RNR NAKs sent %d, want 3", n)
	}
	if x.dev.Counter(CntRNRNakRetryErr) != 1 {
		t.Fatal("rnr_nak_retry_err not counted")
	}

	prm.rnrRetry = 7
	_, x, y, _ = lossyPair(t, prm, Config{}, Config{})
	copy(x.buf, "late receive")
	send.SGL = []verbs.SGE{{Addr: x.mr.Addr(), Length: 64, LKey: x.mr.LKey()}}
	must(t, x.qp.PostSend([]verbs.SendWR{send}))
	// rnr_retry 7 retries forever: post the receive only once the responder
	// has refused the SEND at least once, however late the loop gets to it.
	for deadline := time.Now().Add(5 * time.Second); y.dev.Counter(CntRNRNakSent) == 0; time.Sleep(100 * time.Microsecond) {
		if time.Now().After(deadline) {
			t.Fatal("no RNR NAK within 5 s of a SEND without a receive")
		}
	}
	must(t, y.qp.PostRecv([]verbs.RecvWR{{ID: 5, SGL: []verbs.SGE{{Addr: y.mr.Addr(), Length: 64, LKey: y.mr.LKey()}}}}))
	if wc := waitWC(t, x.scq, 1, 2*time.Second)[0]; wc.Status != verbs.WCSuccess {
		t.Fatalf("wc %+v", wc)
	}
	if wc := waitWC(t, y.rcq, 1, 2*time.Second)[0]; wc.Status != verbs.WCSuccess || string(y.buf[:12]) != "late receive" {
		t.Fatalf("recv wc %+v", wc)
	}
}

// TestRemoteAccessError writes with a bad R_Key, reads beyond a region and
// uses an atomic on a region without atomic access: each completes with
// REM_ACCESS_ERR, the QP goes to ERR and later requests are flushed.
func TestRemoteAccessError(t *testing.T) {
	cases := map[string]func(x, y *end, ro verbs.MR) verbs.SendWR{
		"bad rkey": func(x, y *end, _ verbs.MR) verbs.SendWR {
			w := write(x, y, 1, 0, 100)
			w.RKey ^= 0x55
			return w
		},
		"read beyond": func(x, y *end, _ verbs.MR) verbs.SendWR {
			return verbs.SendWR{ID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
				SGL:        []verbs.SGE{{Addr: x.mr.Addr(), Length: 100, LKey: x.mr.LKey()}},
				RemoteAddr: y.mr.Addr() + uint64(y.mr.Len()) - 50, RKey: y.mr.RKey()}
		},
		"atomic on read-only": func(x, y *end, ro verbs.MR) verbs.SendWR {
			return verbs.SendWR{ID: 1, Opcode: verbs.WRAtomicFetchAndAdd, Flags: verbs.SendSignaled, CompareAdd: 1,
				SGL:        []verbs.SGE{{Addr: x.mr.Addr(), Length: 8, LKey: x.mr.LKey()}},
				RemoteAddr: ro.Addr(), RKey: ro.RKey()}
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			_, x, y, _ := lossyPair(t, defaultRC(), Config{}, Config{})
			ro, err := y.pd.RegMR(make([]byte, 64), verbs.AccessRemoteRead)
			must(t, err)
			must(t, y.qp.PostRecv([]verbs.RecvWR{{ID: 9, SGL: []verbs.SGE{{Addr: y.mr.Addr(), Length: 64, LKey: y.mr.LKey()}}}}))
			must(t, x.qp.PostSend([]verbs.SendWR{mk(x, y, ro), write(x, y, 2, 0, 10), write(x, y, 3, 0, 10)}))
			wcs := waitWC(t, x.scq, 3, 2*time.Second)
			if wcs[0].Status != verbs.WCRemAccessErr || wcs[1].Status != verbs.WCWRFlushErr || wcs[2].Status != verbs.WCWRFlushErr {
				t.Fatalf("wcs %+v", wcs)
			}
			if x.dev.Counter(CntReqCQEError) != 1 || x.dev.Counter(CntReqCQEFlushError) != 2 {
				t.Fatalf("counters %v", nonzero(x.dev.Counters()))
			}
			a, _ := x.qp.Query()
			if a.State != verbs.QPSErr {
				t.Fatalf("state %v", a.State)
			}
			// Moving the QP to ERR by hand flushes posted receives too.
			must(t, y.qp.Modify(&verbs.QPAttr{State: verbs.QPSErr}, verbs.AttrState))
			if wc := waitWC(t, y.rcq, 1, time.Second)[0]; wc.Status != verbs.WCWRFlushErr || wc.ID != 9 {
				t.Fatalf("recv flush %+v", wc)
			}
		})
	}
}

// TestAdaptiveRetransmission drops every copy of a one-packet message with
// the adaptive profile: the first message of a QP gets six retries more than
// retry_cnt, and the first timeouts are shorter than the configured one.
func TestAdaptiveRetransmission(t *testing.T) {
	prof := ProfileCX6
	prof.AdaptiveRetrans = true
	prm := defaultRC()
	prm.retry = 3
	prm.timeout = 10 // 4.2 ms, adaptive starts at a sixteenth
	_, x, y, ports := lossyPair(t, prm, Config{Profile: prof}, Config{Profile: prof})
	var times []int64
	ports[0].setDecide(func(i int, p *roce.Packet, _ []byte) fate {
		if p.Opcode == roce.RCWriteOnly {
			times = append(times, dpdk.Nanotime())
			return drop
		}
		return pass
	})
	must(t, x.qp.PostSend([]verbs.SendWR{write(x, y, 1, 0, 100)}))
	if wc := waitWC(t, x.scq, 1, 10*time.Second)[0]; wc.Status != verbs.WCRetryExcErr {
		t.Fatalf("wc %+v", wc)
	}
	ports[0].mu.Lock()
	ts := append([]int64(nil), times...)
	ports[0].mu.Unlock()
	if len(ts) != 1+int(prm.retry)+6 {
		t.Fatalf("%d transmissions, want 1 + retry_cnt + 6 = %d", len(ts), 1+prm.retry+6)
	}
	rto := verbs.TimeoutNanos(prm.timeout)
	// The first three timeouts are rto/16, rto/8 and rto/4: all below rto/2.
	// A loaded machine can stall the loop for milliseconds once, so the
	// shortest of the three stands for them.
	if first := min(ts[1]-ts[0], ts[2]-ts[1], ts[3]-ts[2]); first >= rto/2 {
		t.Fatalf("first adaptive timeouts %d, %d, %d ns, configured %d ns", ts[1]-ts[0], ts[2]-ts[1], ts[3]-ts[2], rto)
	}
	if last := ts[len(ts)-1] - ts[len(ts)-2]; last < rto {
		t.Fatalf("last adaptive timeout %d ns did not grow past %d ns", last, rto)
	}
}

// TestARPFailure sends to an IPv4 neighbour that never answers: the device
// asks ARPRetries times, one ARPInterval apart, then fails the request.
func TestARPFailure(t *testing.T) {
	prof := ProfileCX5
	prof.ARPInterval, prof.ARPRetries = 2*time.Millisecond, 3
	p := newPair(t, Config{Profile: prof}, Config{}, nil)
	must(t, p.b.Close()) // nobody answers on the other end
	x := newEnd(t, p.a, verbs.QPTypeRC, 4096, false)
	y := newEnd(t, p.a, verbs.QPTypeRC, 4096, false) // only its region is used
	prm := defaultRC()
	must(t, x.qp.Modify(&verbs.QPAttr{State: verbs.QPSInit, Port: 1, AccessFlags: prm.access},
		verbs.AttrState|verbs.AttrPKeyIndex|verbs.AttrPort|verbs.AttrAccessFlags))
	must(t, x.qp.Modify(&verbs.QPAttr{State: verbs.QPSRTR, PathMTU: prm.mtu, DestQPN: 0x123, RQPSN: 1,
		MaxDestRdAtomic: 1, MinRNRTimer: 1, AH: verbs.AHAttr{DGID: verbs.GIDFromAddr(netip.MustParseAddr("10.0.0.99"))}},
		verbs.AttrState|verbs.AttrAV|verbs.AttrPathMTU|verbs.AttrDestQPN|verbs.AttrRQPSN|verbs.AttrMaxDestRdAtomic|verbs.AttrMinRNRTimer))
	must(t, x.qp.Modify(&verbs.QPAttr{State: verbs.QPSRTS, Timeout: 8, RetryCnt: 7, RNRRetry: 7, SQPSN: 1, MaxRdAtomic: 1},
		verbs.AttrState|verbs.AttrTimeout|verbs.AttrRetryCnt|verbs.AttrRNRRetry|verbs.AttrSQPSN|verbs.AttrMaxQPRdAtomic))
	start := time.Now()
	must(t, x.qp.PostSend([]verbs.SendWR{write(x, y, 1, 0, 10)}))
	wc := waitWC(t, x.scq, 1, 5*time.Second)[0]
	if wc.Status != verbs.WCRetryExcErr || wc.VendorErr != vendorNoNeighbor {
		t.Fatalf("wc %+v", wc)
	}
	if el := time.Since(start); el < time.Duration(prof.ARPRetries)*prof.ARPInterval {
		t.Fatalf("gave up after %v", el)
	}
	if n := p.a.Counter(CntARPRequestsSent); n != uint64(prof.ARPRetries) {
		t.Fatalf("%d ARP requests, want %d", n, prof.ARPRetries)
	}
	if p.a.Counter(CntARPFailed) != 1 {
		t.Fatal("arp_failed not counted")
	}
}
