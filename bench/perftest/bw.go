package perftest

import (
	"errors"
	"fmt"
	"math"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/verbs"
)

// bwPost is the requester of a bandwidth test: it keeps up to TxDepth work
// requests outstanding on every QP, signals every CQMod-th (and the last),
// and stamps each message's post and completion time.
func (s *side) bwPost(size int, r *Result) error {
	p, e := s.p, s.e
	n, nq := p.Iters, len(e.qps)
	var scnt, ccnt [256]int // per QP: posted, completed (QPs <= 256)
	for q := range e.qps {
		s.sendWR(q, size)
	}
	posted, done, total := 0, 0, n*nq
	w := s.newWaiter(func() string {
		return fmt.Sprintf("%d of %d %v messages of %d bytes completed", done, total, p.Verb, size)
	})
	for done < total {
		busy := false
		for q, qp := range e.qps {
			wr := &s.wrs[q]
			base := wr.Flags &^ verbs.SendSignaled
			for scnt[q] < n && scnt[q]-ccnt[q] < p.TxDepth {
				k := scnt[q] + 1
				wr.ID = uint64(q)<<32 | uint64(k)
				wr.Flags = base
				if k%p.CQMod == 0 || k == n {
					wr.Flags |= verbs.SendSignaled
				}
				s.tposted[posted] = dpdk.Nanotime()
				s.gidx[q*n+scnt[q]] = int32(posted)
				if err := qp.PostSend(s.wrs[q : q+1]); err != nil {
					if errors.Is(err, verbs.ErrQueueFull) {
						break
					}
					return fmt.Errorf("perftest: QP %#x post: %w", qp.QPN(), err)
				}
				scnt[q]++
				posted++
				busy = true
			}
		}
		k, err := e.scq.Poll(s.wcs)
		if err != nil {
			return err
		}
		if k > 0 {
			now := dpdk.Nanotime()
			for i := range s.wcs[:k] {
				wc := &s.wcs[i]
				q := int(wc.ID >> 32)
				if wc.Status != verbs.WCSuccess || q >= nq {
					return wcError(e.qps[min(q, nq-1)].QPN(), wc)
				}
				upto := int(uint32(wc.ID))
				for j := ccnt[q]; j < upto; j++ {
					s.tcompl[s.gidx[q*n+j]] = now
				}
				done += upto - ccnt[q]
				ccnt[q] = upto
			}
			w.progress(now)
			continue
		}
		if !busy {
			if err := w.idle(); err != nil {
				return err
			}
		}
	}
	bwFigures(r, size, s.tposted[:total], s.tcompl[:total])
	return nil
}

// bwRecv is the responder of a SEND (or WRITE with immediate) bandwidth
// test: it counts receive completions and reposts receives until Iters were
// posted per QP. It has no post times, so its figures run from the first
// completion: average = (n-1) messages over first-to-last completion, peak
// the best run between completions.
func (s *side) bwRecv(size int, r *Result) error {
	p, e := s.p, s.e
	n, nq := p.Iters, len(e.qps)
	var rposted [256]int
	for q := range e.qps {
		rposted[q] = min(p.RxDepth, n)
	}
	want := verbs.WCRecv
	if p.Verb == Write {
		want = verbs.WCRecvRDMAWithImm
	}
	done, total := 0, n*nq
	w := s.newWaiter(func() string {
		return fmt.Sprintf("%d of %d messages of %d bytes received", done, total, size)
	})
	for done < total {
		k, err := e.rcq.Poll(s.wcs)
		if err != nil {
			return err
		}
		if k == 0 {
			if err := w.idle(); err != nil {
				return err
			}
			continue
		}
		now := dpdk.Nanotime()
		for i := range s.wcs[:k] {
			wc := &s.wcs[i]
			q := int(wc.ID >> 32)
			if wc.Status != verbs.WCSuccess || q >= nq {
				return wcError(e.qps[min(q, nq-1)].QPN(), wc)
			}
			if wc.Opcode != want || int(wc.ByteLen) != size {
				return fmt.Errorf("perftest: QP %#x received %v of %d bytes, expected %v of %d", wc.QPN, wc.Opcode,
					wc.ByteLen, want, size)
			}
			// The previous completion stands for this message's post.
			s.tposted[done] = now
			if done > 0 {
				s.tposted[done] = s.tcompl[done-1]
			}
			s.tcompl[done] = now
			done++
			if rposted[q] < n {
				if err := e.qps[q].PostRecv(s.rwrs[q : q+1]); err != nil {
					return fmt.Errorf("perftest: QP %#x post receive: %w", e.qps[q].QPN(), err)
				}
				rposted[q]++
			}
		}
		w.progress(now)
	}
	bwFigures(r, size, s.tposted[1:total], s.tcompl[1:total])
	return nil
}

// peakSamples bounds the peak search: perftest's search over every pair of
// messages is quadratic, so longer runs are sampled at a stride.
const peakSamples = 4096

// bwFigures computes perftest's figures from per-message post and
// completion times (in post order): the average is every byte over first
// post to last completion; the peak is size over the least average time per
// message of any run of consecutive messages i..j, (tcompl[j] - tposted[i])
// / (j - i + 1).
func bwFigures(r *Result, size int, tposted, tcompl []int64) {
	n := len(tposted)
	if n == 0 {
		return
	}
	last := tcompl[0]
	for _, t := range tcompl {
		last = max(last, t)
	}
	span := float64(last - tposted[0])
	if span <= 0 {
		span = 1
	}
	r.AvgBps = float64(size) * float64(n) / span * 1e9
	r.MsgRate = float64(n) / span * 1e9
	stride := max(1, n/peakSamples)
	best := math.Inf(1)
	for i := 0; i < n; i += stride {
		for j := n - 1; j >= i; j -= stride {
			if t := float64(tcompl[j]-tposted[i]) / float64(j-i+1); t > 0 && t < best {
				best = t
			}
		}
	}
	if math.IsInf(best, 1) {
		best = span / float64(n)
	}
	r.PeakBps = math.Max(float64(size)/best*1e9, r.AvgBps)
}
