package perftest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/verbs"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// PingSample is one round trip of Ping: an 8-byte RDMA READ from its post
// to its completion.
type PingSample struct {
	Seq uint64
	At  int64 // dpdk.Nanotime() at the post
	RTT int64 // ns
	// The connection's RoCEv2 5-tuple (UDP to 4791): the GIDs and the
	// source port the QP's packets carry. The port follows the kernel's
	// convention for a QP without a flow label (rdma_calc_flow_label of
	// the two QP numbers, folded by rdma_flow_label_to_udp_sport), which
	// the software RNIC and mlx5 devices follow.
	Src, Dst verbs.GID
	SrcPort  uint16
}

// PingParams pace Ping.
type PingParams struct {
	// Interval between two READs (default 10 ms).
	Interval time.Duration
	// Count stops after this many samples; 0 runs until ctx ends.
	Count int
}

// Ping measures round trips to a perftest server (any `appliance verbs
// read` server: Ping announces an 8-byte READ latency test, which the
// server serves passively) one READ every Interval, and calls fn with each
// sample, on the calling thread. A READ is one-sided: the server's CPU is
// not involved, so a sample is the network's and the two RNICs' round
// trip. It returns the number of samples; the end of ctx is a clean stop
// (the server is told), not an error.
func Ping(ctx context.Context, conn io.ReadWriter, cfg Config, pp PingParams, fn func(PingSample)) (int, error) {
	if pp.Interval <= 0 {
		pp.Interval = 10 * time.Millisecond
	}
	// The iterations are the server's bookkeeping only (it serves READs
	// passively until DONE): perftest's minimum.
	s, err := startClient(ctx, conn, cfg, Params{Verb: Read, Latency: true, Size: 8, Iters: 5}, nil)
	if err != nil {
		return 0, err
	}
	defer s.e.close()
	pr := s.pr
	if err := pr.send("SIZE %d", s.p.Size); err != nil {
		return 0, err
	}
	if _, _, err := pr.wait(ctx, cfg.Poll, SetupTimeout, "READY"); err != nil {
		return 0, err
	}
	n, err := s.ping(ctx, pp, fn)
	if err != nil {
		pr.fail(err)
		return n, err
	}
	if err := pr.send("DONE"); err != nil {
		return n, err
	}
	// The end of ctx ends the pings, not the goodbye: a server left
	// without it would wait for its client a day.
	if _, _, err := pr.wait(context.WithoutCancel(ctx), cfg.Poll, SetupTimeout, "DONE"); err != nil {
		return n, err
	}
	return n, pr.send("BYE")
}

func (s *side) ping(ctx context.Context, pp PingParams, fn func(PingSample)) (int, error) {
	e := s.e
	qp := e.qps[0]
	wr := s.sendWR(0, s.p.Size)
	wr.Flags |= verbs.SendSignaled
	smp := PingSample{Src: e.gid, Dst: s.remote[0].GID,
		SrcPort: roce.UDPSrcPort(0, qp.QPN(), s.remote[0].QPN)}
	interval := int64(pp.Interval)
	next := dpdk.Nanotime()
	n := 0
	for pp.Count == 0 || n < pp.Count {
		// Between READs: drive a device that needs it, else sleep, and
		// watch the peer and the context.
		for {
			if err := ctx.Err(); err != nil {
				return n, nil
			}
			if err := s.pr.check(); err != nil {
				return n, err
			}
			now := dpdk.Nanotime()
			if now >= next {
				break
			}
			if s.cfg.Poll == nil || !s.cfg.Poll() {
				time.Sleep(min(time.Duration(next-now), time.Millisecond))
			}
		}
		wr.ID = uint64(n)
		t0 := dpdk.Nanotime()
		next = t0 + interval
		if err := qp.PostSend(s.wrs[:1]); err != nil {
			return n, fmt.Errorf("perftest: ping QP %#x post: %w", qp.QPN(), err)
		}
		w := s.newWaiter(func() string { return fmt.Sprintf("ping %d not answered", n) })
		for {
			k, err := e.scq.Poll(s.wcs[:1])
			if err != nil {
				return n, err
			}
			if k == 1 {
				now := dpdk.Nanotime()
				if s.wcs[0].Status != verbs.WCSuccess {
					return n, wcError(qp.QPN(), &s.wcs[0])
				}
				smp.Seq, smp.At, smp.RTT = uint64(n), t0, now-t0
				fn(smp)
				n++
				break
			}
			if err := w.idle(); err != nil {
				// A READ outstanding when ctx ends is abandoned: the QP
				// is destroyed with the endpoint.
				if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
					return n, nil
				}
				return n, err
			}
		}
	}
	return n, nil
}
