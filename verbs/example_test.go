package verbs_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/netip"
	"time"

	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/verbs"
	"github.com/rdma-appliance/appliance/verbs/soft"
)

// One RDMA WRITE over an RC connection between two RNICs: the bytes land
// in the responder's registered memory without its CPU posting anything,
// and the requester learns they did from its completion.
//
// The RNICs are software ones (verbs/soft) on the two ends of an
// in-process link. Past their creation the code uses package verbs only,
// so it runs unchanged on hardware devices from verbs.OpenDevice.
func Example_rdmaWrite() {
	link := ring.NewLink("verbs-example", ring.Config{})
	defer link.A().Close()
	defer link.B().Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var devs [2]verbs.Device
	for i, port := range []*ring.Port{link.A(), link.B()} {
		d, err := soft.NewDevice(fmt.Sprintf("example%d", i), port, soft.Config{
			GIDs: []netip.Addr{netip.AddrFrom4([4]byte{10, 0, 0, byte(1 + i)})},
			// One small message needs a few buffers, not the default
			// 8192 of 4 KiB frames.
			PoolSize: 256,
		})
		if err != nil {
			log.Fatal(err)
		}
		defer d.Close()
		if err := d.Start(ctx); err != nil {
			log.Fatal(err)
		}
		devs[i] = d
	}

	msg := []byte("written by the requester")
	// The soft RNIC registers any memory; a hardware one needs memory
	// from verbs.AllocBuffer, which the NIC may write at any time.
	local := append([]byte(nil), msg...)
	remote := make([]byte, 64)
	req, err := newRCEnd(devs[0], local, verbs.AccessLocalWrite)
	if err != nil {
		log.Fatal(err)
	}
	defer req.close()
	resp, err := newRCEnd(devs[1], remote, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.close()
	// Each side's QPN, first PSN and GID reach the other out of band in
	// a real program (perftest sends them over TCP).
	if err := req.connect(resp, 0x100, 0x200); err != nil {
		log.Fatal(err)
	}
	if err := resp.connect(req, 0x200, 0x100); err != nil {
		log.Fatal(err)
	}

	wr := []verbs.SendWR{{
		ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{{Addr: req.mr.Addr(), Length: uint32(len(msg)), LKey: req.mr.LKey()}},
		// What the responder hands out so that peers may write to it.
		RemoteAddr: resp.mr.Addr(), RKey: resp.mr.RKey(),
	}}
	if err := req.qp.PostSend(wr); err != nil {
		log.Fatal(err)
	}
	wc, err := awaitOne(req.cq, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%v of %d bytes: %v\n", wc.Opcode, len(msg), wc.Status)
	// The completion means the responder acknowledged the data, so it is
	// in remote by now.
	fmt.Printf("remote buffer: %q\n", remote[:len(msg)])
	// Output:
	// RDMA_WRITE of 24 bytes: success
	// remote buffer: "written by the requester"
}

// rcEnd is one side of an RC connection: a protection domain, a
// completion queue, a registered buffer and a queue pair.
type rcEnd struct {
	pd  verbs.PD
	cq  verbs.CQ
	mr  verbs.MR
	qp  verbs.QP
	gid verbs.GID
}

func newRCEnd(dev verbs.Device, buf []byte, access verbs.Access) (*rcEnd, error) {
	port, err := dev.QueryPort(1)
	if err != nil {
		return nil, err
	}
	e := &rcEnd{gid: port.GIDs[0]}
	if e.pd, err = dev.AllocPD(); err != nil {
		return nil, err
	}
	if e.cq, err = dev.CreateCQ(verbs.CQAttr{CQE: 16}); err != nil {
		return nil, err
	}
	if e.mr, err = e.pd.RegMR(buf, access); err != nil {
		return nil, err
	}
	e.qp, err = e.pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: e.cq, RecvCQ: e.cq,
		Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	return e, err
}

// connect moves the QP through INIT and RTR to RTS towards peer: sqPSN is
// the first PSN this side sends, rqPSN the first it expects.
func (e *rcEnd) connect(peer *rcEnd, sqPSN, rqPSN uint32) error {
	err := e.qp.Modify(&verbs.QPAttr{State: verbs.QPSInit, Port: 1,
		AccessFlags: verbs.AccessLocalWrite | verbs.AccessRemoteWrite},
		verbs.AttrState|verbs.AttrPKeyIndex|verbs.AttrPort|verbs.AttrAccessFlags)
	if err != nil {
		return err
	}
	err = e.qp.Modify(&verbs.QPAttr{State: verbs.QPSRTR, PathMTU: verbs.MTU1024, DestQPN: peer.qp.QPN(),
		RQPSN: rqPSN, AH: verbs.AHAttr{DGID: peer.gid, HopLimit: 64, Port: 1}, MaxDestRdAtomic: 1, MinRNRTimer: 12},
		verbs.AttrState|verbs.AttrAV|verbs.AttrPathMTU|verbs.AttrDestQPN|verbs.AttrRQPSN|
			verbs.AttrMaxDestRdAtomic|verbs.AttrMinRNRTimer)
	if err != nil {
		return err
	}
	// A 67 ms ACK timeout (4.096 us x 2^14) with seven retries.
	return e.qp.Modify(&verbs.QPAttr{State: verbs.QPSRTS, SQPSN: sqPSN, Timeout: 14, RetryCnt: 7, RNRRetry: 7,
		MaxRdAtomic: 1},
		verbs.AttrState|verbs.AttrSQPSN|verbs.AttrTimeout|verbs.AttrRetryCnt|verbs.AttrRNRRetry|verbs.AttrMaxQPRdAtomic)
}

// close releases what newRCEnd made, in the order ibverbs requires:
// nothing is destroyed while something made from it is alive.
func (e *rcEnd) close() {
	for _, f := range []func() error{e.qp.Destroy, e.mr.Dereg, e.cq.Destroy, e.pd.Dealloc} {
		if err := f(); err != nil {
			log.Print(err)
		}
	}
}

// awaitOne polls cq for one completion, sleeping on Notify in between
// instead of spinning a core.
func awaitOne(cq verbs.CQ, timeout time.Duration) (verbs.WC, error) {
	var wc [1]verbs.WC
	deadline := time.After(timeout)
	// Notify promises a wake after a new completion, not that one sent
	// while Poll ran is kept for the wait: a short tick polls again
	// rather than count on it.
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		n, err := cq.Poll(wc[:])
		if err != nil {
			return verbs.WC{}, err
		}
		if n == 1 {
			return wc[0], nil
		}
		select {
		case <-cq.Notify():
		case <-tick.C:
		case <-deadline:
			return verbs.WC{}, errors.New("no completion")
		}
	}
}
